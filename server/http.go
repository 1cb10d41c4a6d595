package server

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/flakeid/flakeid/segment"
	"github.com/flakeid/flakeid/snowflake"
)

// routes builds the handler: the JSON API, Leaf's paths, Connect, health and
// metrics, wrapped in panic recovery and request metrics. Each JSON API
// path states the query parameters it takes and whether it hands out IDs
// (see endpoint); both are checked before its handler runs.
func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	api := func(pattern, route string, params []string, issuing bool, h func(http.ResponseWriter, *http.Request) error) http.Handler {
		_, path, _ := strings.Cut(pattern, " ")
		ih := s.instrument(route, endpoint{path: path, params: params, issuing: issuing}.checked(h))
		mux.Handle(pattern, ih)
		return ih
	}
	idParams := []string{"count", "format"}
	api("GET /v1/snowflake/next", "/v1/snowflake/next", []string{"count", "format", "prefix"}, true, s.handleSnowflakeNext)
	api("GET /v1/snowflake/bounds", "/v1/snowflake/bounds", []string{"from", "to"}, false, s.handleBounds)
	segmentNext := api("GET "+segmentNextPrefix+"{tag}"+segmentNextSuffix, "/v1/segment/next", idParams, true, s.handleSegmentNext)
	api("GET /v1/decode/{id}", "/v1/decode", []string{"as"}, false, s.handleDecode)
	api("GET /v1/segment/{tag}/decode/{number}", "/v1/segment/decode", nil, false, s.handleSeriesDecode)
	api("GET /v1/segment/tags", "/v1/segment/tags", nil, false, s.handleTagsList)
	api("POST /v1/segment/tags", "/v1/segment/tags", nil, false, s.handleTagsCreate)
	api("PATCH /v1/segment/tags/{tag}", "/v1/segment/tags/update", nil, false, s.handleTagsUpdate)
	api("DELETE /v1/segment/tags/{tag}", "/v1/segment/tags/delete", nil, false, s.handleTagsDelete)
	api("POST /v1/segment/tags/{tag}/resume", "/v1/segment/tags/resume", nil, false, s.handleTagsResume)
	api("GET /v1/status", "/v1/status", nil, false, s.handleStatus)
	api("POST /v1/leases", "/v1/leases", nil, false, s.handleLeaseAcquire)
	api("POST /v1/leases/{lease}/renew", "/v1/leases/renew", nil, false, s.handleLeaseRenew)
	api("DELETE /v1/leases/{lease}", "/v1/leases/release", nil, false, s.handleLeaseRelease)
	// Meituan Leaf's paths: a Leaf client switches by changing a host name.
	leafSnowflake := api("GET "+leafSnowflakePrefix+"{key}", "/api/snowflake/get", []string{"format", "prefix"}, true, s.handleLeafSnowflake)
	leafSegment := api("GET "+leafSegmentPrefix+"{key}", "/api/segment/get", nil, true, s.handleLeafSegment)
	api("GET /decodeSnowflakeId", "/decodeSnowflakeId", []string{"snowflakeId", "as"}, false, s.handleLeafDecode)
	// Didi Tinyid's paths, as its clients call them.
	s.tinyidRoutes(mux)

	if s.clock != nil {
		api("POST /admin/test/clock", "/admin/test/clock", []string{"shift"}, false, s.handleTestClock)
	}
	// Health, readiness and metrics take no query either; they stay
	// outside the request metrics.
	open := func(pattern string, h http.Handler) {
		_, path, _ := strings.Cut(pattern, " ")
		e := endpoint{path: path}
		mux.Handle(pattern, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.RawQuery != "" {
				if err := checkQuery(r.URL.RawQuery, e.path, e.params); err != nil {
					s.writeError(w, err)
					return
				}
			}
			h.ServeHTTP(w, r)
		}))
	}
	open("GET /healthz", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, "ok\n")
	}))
	open("GET /readyz", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if err := s.Ready(); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintf(w, "not ready: %v\n", err)
			return
		}
		io.WriteString(w, "ready\n")
	}))
	open("GET /metrics", promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{Registry: s.reg}))
	open("GET /openapi.json", http.HandlerFunc(serveOpenAPI))
	s.connectRoutes(mux)
	s.uiRoutes(mux)
	// Anything else is a JSON 405 for a known path, or a JSON 404.
	mux.Handle("/", s.instrument("other", func(w http.ResponseWriter, r *http.Request) error {
		var allowed []string
		for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPatch, http.MethodDelete} {
			probe := r.Clone(r.Context())
			probe.Method = m
			if _, pattern := mux.Handler(probe); pattern != "" && pattern != "/" {
				allowed = append(allowed, m)
			}
		}
		if len(allowed) > 0 {
			w.Header().Set("Allow", strings.Join(allowed, ", "))
			return apiErrorf(http.StatusMethodNotAllowed, codeMethod, "method %s is not allowed on %s; use %s",
				clip(r.Method), clip(r.URL.Path), strings.Join(allowed, " or "))
		}
		return apiErrorf(http.StatusNotFound, codeNotFound, "no such endpoint: %s %s", clip(r.Method), clip(r.URL.Path))
	}))
	return s.recoverer(singleIDPaths(mux,
		singleIDRoute{leafSnowflakePrefix, "", leafSnowflake},
		singleIDRoute{leafSegmentPrefix, "", leafSegment},
		singleIDRoute{segmentNextPrefix, segmentNextSuffix, segmentNext}))
}

// errorBody is the JSON body of every error answer.
type errorBody struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	// The text says <token>, not \u003ctoken\u003e: the body is JSON,
	// never HTML, and application/json is not sniffed.
	enc.SetEscapeHTML(false)
	enc.Encode(v)
}

func (s *Server) writeError(w http.ResponseWriter, err error) *apiError {
	ae := classify(err)
	var body errorBody
	body.Error.Code, body.Error.Message = ae.Code, ae.Message
	if ae.Status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", ae.retryAfter())
	}
	writeJSON(w, ae.Status, body)
	return ae
}

// instrument runs an API handler: auth happens inside the handlers, errors
// become JSON bodies, and every request is counted and timed. The route's
// metric series are resolved once here, not per request.
func (s *Server) instrument(route string, h func(http.ResponseWriter, *http.Request) error) http.Handler {
	ok := s.metrics.requests.WithLabelValues(route, "200")
	lat := s.metrics.latency.WithLabelValues(route)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		if err := h(w, r); err != nil {
			ae := s.writeError(w, err)
			if ae.Status >= 500 {
				s.log.Warn("server: request failed", "route", route, "status", ae.Status, "err", err)
			}
			s.metrics.requests.WithLabelValues(route, strconv.Itoa(ae.Status)).Inc()
		} else {
			ok.Inc()
		}
		lat.Observe(time.Since(start).Seconds())
	})
}

// recoverer turns a panic into a 500 instead of a dropped connection, and
// logs it; it should never run.
func (s *Server) recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.log.Error("server: panic in a handler", "panic", v, "path", r.URL.Path)
				s.writeError(w, apiErrorf(http.StatusInternalServerError, codeInternal, "internal error"))
			}
		}()
		next.ServeHTTP(w, r)
	})
}

func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

// handleSnowflakeNext answers GET /v1/snowflake/next: everything the
// request asks is checked before an ID is taken.
func (s *Server) handleSnowflakeNext(w http.ResponseWriter, r *http.Request) error {
	if err := s.authorize(r.Header, "", true, false); err != nil {
		return err
	}
	mk := s.mask.forSnowflake()
	q, err := s.idsQuery(r, "", mk)
	if err != nil {
		return err
	}
	var arr [4]snowflake.Batch
	batches, err := s.nextSnowflake(q.n, arr[:0])
	if err != nil {
		return err
	}
	var rarr [4]run
	return s.writeRuns(w, q, "", batchRuns(rarr[:0], batches), mk)
}

// handleSegmentNext answers GET /v1/segment/{tag}/next: everything the
// request asks is checked before an ID is taken.
func (s *Server) handleSegmentNext(w http.ResponseWriter, r *http.Request) error {
	tag := pathName(r, segmentNextPrefix, segmentNextSuffix)
	if err := segment.ValidName(tag); err != nil {
		return err
	}
	if err := s.authorize(r.Header, tag, false, false); err != nil {
		return err
	}
	mk := s.mask.forTag(tag)
	q, err := s.idsQuery(r, tag, nil)
	if err != nil {
		return err
	}
	if q.numeric {
		return s.serveSeriesNext(r.Context(), tag, q, s.writeNumbers(w, q, tag))
	}
	if q.ranges && mk != nil {
		if _, err := s.idsQuery(r, tag, mk); err != nil {
			return err
		}
	}
	var sarr [4]segment.Span
	spans, err := s.nextSegment(r.Context(), tag, q.n, sarr[:0])
	if isSeriesErr(err) {
		return s.serveSeriesNext(r.Context(), tag, q, s.writeNumbers(w, q, tag))
	}
	if err != nil {
		return err
	}
	var rarr [4]run
	return s.writeRuns(w, q, tag, spanRuns(rarr[:0], spans), mk)
}

// decodeJSON is the answer of /v1/decode/{id}.
type decodeJSON struct {
	ID snowflake.ID `json:"id"`
	// Masked and KeyID are set when the input was a masked ID: the text and
	// the id of the key that unmasks it.
	Masked     string `json:"masked,omitempty"`
	KeyID      *uint8 `json:"key_id,omitempty"`
	Time       string `json:"time"`
	UnixMs     int64  `json:"unix_ms"`
	Tick       int64  `json:"tick"`
	Datacenter int64  `json:"datacenter"`
	Worker     int64  `json:"worker"`
	Sequence   int64  `json:"sequence"`
	// Form, UUID and Prefix are set when the input was a UUIDv7, TypeID or
	// ULID text: its form (uuid7, typeid, ulid), the UUID it is, and a
	// TypeID's prefix.
	Form   string `json:"form,omitempty"`
	UUID   string `json:"uuid,omitempty"`
	Prefix string `json:"prefix,omitempty"`
}

func (s *Server) handleDecode(w http.ResponseWriter, r *http.Request) error {
	in, p, err := s.decode(r.PathValue("id"), query(r, "as"), s.unmaskCheck(r.Header))
	if err != nil {
		return err
	}
	id := in.id
	var keyID *uint8
	if in.masked != "" {
		keyID = &in.keyID
	}
	out := decodeJSON{ID: id, Masked: in.masked, KeyID: keyID, Time: p.Time.UTC().Format("2006-01-02T15:04:05.000Z07:00"),
		UnixMs: p.Time.UnixMilli(), Tick: p.Tick, Datacenter: p.Datacenter, Worker: p.Worker, Sequence: p.Sequence}
	if in.form != 0 {
		out.Form, out.UUID, out.Prefix = in.form.String(), in.uuid.String(), in.prefix
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) segments() (*segment.Allocator, error) {
	if s.segs == nil {
		return nil, apiErrorf(http.StatusNotFound, codeNotFound, "segment mode is not enabled on this server")
	}
	return s.segs, nil
}

// forTag is " for tag X", or "" for Snowflake IDs.
func forTag(tag string) string {
	if tag == "" {
		return ""
	}
	return fmt.Sprintf(" for tag %q", tag)
}
