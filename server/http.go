package server

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"io"
	"iter"
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
	api("GET /v1/snowflake/next", "/v1/snowflake/next", idParams, true, s.handleSnowflakeNext)
	segmentNext := api("GET "+segmentNextPrefix+"{tag}"+segmentNextSuffix, "/v1/segment/next", idParams, true, s.handleSegmentNext)
	api("GET /v1/decode/{id}", "/v1/decode", []string{"as"}, false, s.handleDecode)
	api("GET /v1/segment/tags", "/v1/segment/tags", nil, false, s.handleTagsList)
	api("POST /v1/segment/tags", "/v1/segment/tags", nil, false, s.handleTagsCreate)
	api("PATCH /v1/segment/tags/{tag}", "/v1/segment/tags/update", nil, false, s.handleTagsUpdate)
	api("POST /v1/segment/tags/{tag}/resume", "/v1/segment/tags/resume", nil, false, s.handleTagsResume)
	api("GET /v1/status", "/v1/status", nil, false, s.handleStatus)
	// Meituan Leaf's paths: a Leaf client switches by changing a host name.
	leafSnowflake := api("GET "+leafSnowflakePrefix+"{key}", "/api/snowflake/get", nil, true, s.handleLeafSnowflake)
	leafSegment := api("GET "+leafSegmentPrefix+"{key}", "/api/segment/get", nil, true, s.handleLeafSegment)
	api("GET /decodeSnowflakeId", "/decodeSnowflakeId", []string{"snowflakeId", "as"}, false, s.handleLeafDecode)

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
	s.connectRoutes(mux)
	s.uiRoutes(mux)
	// Anything else is a JSON 405 for a known path, or a JSON 404.
	mux.Handle("/", s.instrument("other", func(w http.ResponseWriter, r *http.Request) error {
		var allowed []string
		for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPatch} {
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
	enc.Encode(v)
}

func (s *Server) writeError(w http.ResponseWriter, err error) *apiError {
	ae := classify(err)
	var body errorBody
	body.Error.Code, body.Error.Message = ae.Code, ae.Message
	if ae.Status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
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

// authorize checks the bearer token for a request: snowflake asks for
// Snowflake IDs, tag (when not "") for that segment tag, admin for tag
// changes. Without configured tokens everything is allowed.
func (s *Server) authorize(h http.Header, tag string, snowflake, admin bool) error {
	if s.tokens == nil {
		return nil
	}
	tok, err := s.token(h)
	if err != nil {
		return err
	}
	return tokenAllows(tok, tag, snowflake, admin)
}

// tokenAllows checks what authorize checks, for a token already found (an
// HTTP request's bearer token, or a RESP connection's AUTH).
func tokenAllows(tok *Token, tag string, snowflake, admin bool) error {
	switch {
	case snowflake && !tok.Snowflake:
		return apiErrorf(http.StatusForbidden, codeForbidden, "token %q may not take Snowflake IDs", tok.Name)
	case admin && !tok.Admin:
		return apiErrorf(http.StatusForbidden, codeForbidden, "token %q may not change tags", tok.Name)
	case tag != "" && !tokenHasTag(tok, tag):
		return apiErrorf(http.StatusForbidden, codeForbidden, "token %q may not use tag %q", tok.Name, tag)
	}
	return nil
}

// token returns the configured token whose secret the request's bearer
// token is; call it only when tokens are configured.
func (s *Server) token(h http.Header) (*Token, error) {
	auth := h.Get("Authorization")
	secret, ok := strings.CutPrefix(auth, "Bearer ")
	if !ok || secret == "" {
		return nil, apiErrorf(http.StatusUnauthorized, codeUnauth, "missing bearer token (Authorization: Bearer <token>)")
	}
	tok := s.lookupToken(secret)
	if tok == nil {
		return nil, apiErrorf(http.StatusUnauthorized, codeUnauth, "unknown bearer token")
	}
	return tok, nil
}

// lookupToken returns the configured token whose secret is secret, or nil,
// comparing against every token in constant time.
func (s *Server) lookupToken(secret string) *Token {
	var tok *Token
	for k, t := range s.tokens {
		if subtle.ConstantTimeCompare([]byte(k), []byte(secret)) == 1 {
			tok = t
		}
	}
	return tok
}

func tokenHasTag(t *Token, tag string) bool {
	for _, x := range t.Tags {
		if x == "*" || x == tag {
			return true
		}
	}
	return false
}

func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

// rangeJSON is a run of IDs in a JSON answer.
type rangeJSON struct {
	First  snowflake.ID `json:"first"`
	Count  int64        `json:"count"`
	Stride int64        `json:"stride"`
}

// wantsText reports whether the client asked for text/plain.
func wantsText(r *http.Request) bool {
	a := r.Header.Get("Accept")
	return strings.Contains(a, "text/plain") && !strings.Contains(a, "application/json")
}

// query returns the value of key in the request's query, without parsing
// the query into a map when there is none (the single-ID hot path). The
// endpoint checked the query's names first (checkQuery), so a key is there
// at most once.
func query(r *http.Request, key string) string {
	q := r.URL.RawQuery
	if q == "" {
		return ""
	}
	if strings.ContainsAny(q, "%+;") { // escapes: let net/url decode them
		return r.URL.Query().Get(key)
	}
	for q != "" {
		var kv string
		kv, q, _ = strings.Cut(q, "&")
		if k, v, _ := strings.Cut(kv, "="); k == key {
			return v
		}
	}
	return ""
}

// getBuf returns a buffer for an answer from the server's pool; putBuf
// returns it. Answers are written in chunks of at most flushAt bytes, so
// pooled buffers stay small.
func (s *Server) getBuf() *[]byte {
	if b, ok := s.bufs.Get().(*[]byte); ok {
		return b
	}
	b := make([]byte, 0, 512)
	return &b
}

func (s *Server) putBuf(b *[]byte) {
	if cap(*b) <= 2*flushAt {
		*b = (*b)[:0]
		s.bufs.Put(b)
	}
}

// flushAt is the size at which a long answer is written out and its buffer
// reused.
const flushAt = 30 << 10

// run is a run of IDs: first, first+stride, … (count of them).
type run struct{ first, count, stride int64 }

// batchRuns appends the runs of Snowflake batches to dst.
func batchRuns(dst []run, batches []snowflake.Batch) []run {
	for _, b := range batches {
		dst = append(dst, run{int64(b.First), int64(b.Count), 1})
	}
	return dst
}

// spanRuns appends the runs of segment spans to dst.
func spanRuns(dst []run, spans []segment.Span) []run {
	for _, sp := range spans {
		dst = append(dst, run{sp.First, sp.Count, sp.Stride})
	}
	return dst
}

// ids yields the IDs of runs in order, with their index among them all.
func ids(runs []run) iter.Seq2[int, int64] {
	return func(yield func(int, int64) bool) {
		n := 0
		for _, rn := range runs {
			for i := range rn.count {
				if !yield(n, rn.first+i*rn.stride) {
					return
				}
				n++
			}
		}
	}
}

// writeIDs answers runs of IDs as the request asks (see idsQuery); tag,
// when not "", is echoed in the JSON answers, and mk, when not nil, masks
// every ID. The handlers check the request with idsQuery before they take
// IDs and call writeRuns.
func (s *Server) writeIDs(w http.ResponseWriter, r *http.Request, tag string, runs []run, mk *masking) error {
	q, err := s.idsQuery(r, tag, mk)
	if err != nil {
		return err
	}
	return s.writeRuns(w, q, tag, runs, mk)
}

// writeRuns answers runs of IDs: JSON strings by default, ranges with
// ?format=ranges, one per line for Accept: text/plain. tag, when not "", is
// echoed in the JSON answers. With mk not nil every ID is written as its
// masked text (idsQuery refused ranges: masked IDs do not form runs).
func (s *Server) writeRuns(w http.ResponseWriter, q idsQuery, tag string, runs []run, mk *masking) error {
	text := q.text
	if q.ranges && mk == nil && !text {
		body := map[string]any{}
		if tag != "" {
			body["tag"] = tag
		}
		rs := make([]rangeJSON, 0, len(runs))
		var total int64
		for _, rn := range runs {
			rs = append(rs, rangeJSON{snowflake.ID(rn.first), rn.count, rn.stride})
			total += rn.count
		}
		body["ranges"], body["count"] = rs, total
		writeJSON(w, http.StatusOK, body)
		return nil
	}
	if mk != nil {
		if err := mk.check(runs); err != nil {
			return err
		}
	}
	// One allocation-free pass: {"ids":["…",…]}, or one ID per line.
	bp := s.getBuf()
	defer s.putBuf(bp)
	buf := *bp
	if text {
		w.Header()["Content-Type"] = s.ctText
	} else {
		w.Header()["Content-Type"] = s.ctJSON
		buf = append(buf, '{')
		if tag != "" {
			buf = append(buf, `"tag":`...)
			buf = strconv.AppendQuote(buf, tag) // tag names are ASCII letters, digits and _-.:
			buf = append(buf, ',')
		}
		if mk != nil {
			buf = append(buf, `"masked":true,`...)
		}
		buf = append(buf, `"ids":[`...)
	}
	buf, err := appendIDs(w, buf, runs, mk, !text)
	if err != nil {
		*bp = buf[:0]
		return err
	}
	if !text {
		buf = append(buf, "]}\n"...)
	}
	_, err = w.Write(buf)
	*bp = buf
	return err
}

// appendIDs appends the IDs of runs to buf, masked when mk is not nil: as
// JSON strings separated by commas when json is set, else one per line. It
// writes buf out to w whenever it passes flushAt.
func appendIDs(w io.Writer, buf []byte, runs []run, mk *masking, json bool) ([]byte, error) {
	if mk != nil {
		return mk.appendTexts(w, buf, runs, json)
	}
	for i, id := range ids(runs) {
		if json {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = append(buf, '"')
			buf = strconv.AppendInt(buf, id, 10)
			buf = append(buf, '"')
		} else {
			buf = strconv.AppendInt(buf, id, 10)
			buf = append(buf, '\n')
		}
		if len(buf) > flushAt {
			w.Write(buf)
			buf = buf[:0]
		}
	}
	return buf, nil
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
	q, err := s.idsQuery(r, tag, mk)
	if err != nil {
		return err
	}
	var sarr [4]segment.Span
	spans, err := s.nextSegment(r.Context(), tag, q.n, sarr[:0])
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
	writeJSON(w, http.StatusOK, decodeJSON{ID: id, Masked: in.masked, KeyID: keyID, Time: p.Time.UTC().Format("2006-01-02T15:04:05.000Z07:00"),
		UnixMs: p.Time.UnixMilli(), Tick: p.Tick, Datacenter: p.Datacenter, Worker: p.Worker, Sequence: p.Sequence})
	return nil
}

func (s *Server) segments() (*segment.Allocator, error) {
	if s.segs == nil {
		return nil, apiErrorf(http.StatusNotFound, codeNotFound, "segment mode is not enabled on this server")
	}
	return s.segs, nil
}

// tagJSON is a tag row on the wire (GET /v1/segment/tags and the answers
// of the changes): snake_case keys, max_id a string of digits like every
// ID, the time RFC 3339 (absent when the store keeps none).
type tagJSON struct {
	Tag         string    `json:"tag"`
	MaxID       int64     `json:"max_id,string"`
	Step        int64     `json:"step"`
	Description string    `json:"description"`
	Updated     time.Time `json:"update_time,omitzero"`
}

func newTagJSON(t segment.Tag) tagJSON {
	return tagJSON{Tag: t.Name, MaxID: t.MaxID, Step: t.Step, Description: t.Description, Updated: t.Updated.UTC()}
}

func (s *Server) handleTagsList(w http.ResponseWriter, r *http.Request) error {
	a, err := s.segments()
	if err != nil {
		return err
	}
	if err := s.authorize(r.Header, "", false, false); err != nil {
		return err
	}
	tags, err := a.Tags(r.Context())
	if err != nil {
		return err
	}
	out := make([]tagJSON, 0, len(tags))
	for _, t := range tags {
		out = append(out, newTagJSON(t))
	}
	writeJSON(w, http.StatusOK, map[string]any{"tags": out})
	return nil
}

// handleTagsCreate answers POST /v1/segment/tags: {"tag": required,
// "step": 1–segment.MaxStep (absent: the allocator's default step),
// "description", "max_id": ≥ 0, a number or a string}. Any other key, a
// key twice or a value of the wrong kind is a 400 naming it.
func (s *Server) handleTagsCreate(w http.ResponseWriter, r *http.Request) error {
	a, err := s.segments()
	if err != nil {
		return err
	}
	if err := s.authorize(r.Header, "", false, true); err != nil {
		return err
	}
	members, err := readObject(w, r, false)
	if err != nil {
		return err
	}
	var t segment.Tag
	hasTag := false
	for _, m := range members {
		switch m.key {
		case "tag":
			t.Name, err = stringField(m)
			hasTag = true
		case "step":
			t.Step, err = wholeField(m, 1, segment.MaxStep, false)
		case "description":
			t.Description, err = stringField(m)
		case "max_id":
			t.MaxID, err = wholeField(m, 0, maxID, true)
		default:
			err = apiErrorf(http.StatusBadRequest, codeInvalid, "unknown key %q: POST /v1/segment/tags takes tag, step, description and max_id", clip(m.key))
		}
		if err != nil {
			return err
		}
	}
	if !hasTag {
		return apiErrorf(http.StatusBadRequest, codeInvalid, `tag is required: {"tag":"orders"}`)
	}
	if err := segment.ValidName(t.Name); err != nil {
		return err
	}
	if err := a.Create(r.Context(), t); err != nil { // Step 0 (absent): the default step
		return err
	}
	row, err := s.tagRow(r.Context(), a, t.Name)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, newTagJSON(row))
	return nil
}

func (s *Server) tagRow(ctx context.Context, a *segment.Allocator, name string) (segment.Tag, error) {
	tags, err := a.Tags(ctx)
	if err != nil {
		return segment.Tag{}, err
	}
	for _, t := range tags {
		if t.Name == name {
			return t, nil
		}
	}
	return segment.Tag{}, fmt.Errorf("%w: %q", segment.ErrUnknownTag, name)
}

// handleTagsUpdate answers PATCH /v1/segment/tags/{tag}: {"step",
// "description"}, at least one. tag and max_id cannot be changed; they and
// any other key are a 400 naming them.
func (s *Server) handleTagsUpdate(w http.ResponseWriter, r *http.Request) error {
	a, err := s.segments()
	if err != nil {
		return err
	}
	if err := s.authorize(r.Header, "", false, true); err != nil {
		return err
	}
	tag := r.PathValue("tag")
	if err := segment.ValidName(tag); err != nil {
		return err
	}
	members, err := readObject(w, r, false)
	if err != nil {
		return err
	}
	var (
		step        *int64
		description *string
	)
	for _, m := range members {
		switch m.key {
		case "step":
			var n int64
			n, err = wholeField(m, 1, segment.MaxStep, false)
			step = &n
		case "description":
			var d string
			d, err = stringField(m)
			description = &d
		case "tag", "max_id":
			err = apiErrorf(http.StatusBadRequest, codeInvalid, "%s cannot be changed: PATCH takes step and description", m.key)
		default:
			err = apiErrorf(http.StatusBadRequest, codeInvalid, "unknown key %q: PATCH takes step and description", clip(m.key))
		}
		if err != nil {
			return err
		}
	}
	if step == nil && description == nil {
		return apiErrorf(http.StatusBadRequest, codeInvalid, "nothing to change: give step or description")
	}
	if err := a.Update(r.Context(), tag, step, description); err != nil {
		return err
	}
	row, err := s.tagRow(r.Context(), a, tag)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, newTagJSON(row))
	return nil
}

// Leaf's snowflake path answers one decimal ID as text; the key is ignored
// (Leaf ignores it too).
func (s *Server) handleLeafSnowflake(w http.ResponseWriter, r *http.Request) error {
	if err := s.authorize(r.Header, "", true, false); err != nil {
		return err
	}
	var arr [1]snowflake.Batch
	b, err := s.nextSnowflake(1, arr[:0])
	if err != nil {
		return err
	}
	return s.writeOne(w, int64(b[0].First), s.mask.forSnowflake())
}

// writeOne answers one ID as text, as Leaf does: decimal, or its masked
// text when mk is not nil.
func (s *Server) writeOne(w http.ResponseWriter, id int64, mk *masking) error {
	bp := s.getBuf()
	defer s.putBuf(bp)
	if mk != nil {
		var err error
		if *bp, err = mk.appendText((*bp)[:0], id); err != nil {
			return err
		}
	} else {
		*bp = strconv.AppendInt((*bp)[:0], id, 10)
	}
	w.Header()["Content-Type"] = s.ctText
	_, err := w.Write(*bp)
	return err
}

// forTag is " for tag X", or "" for Snowflake IDs.
func forTag(tag string) string {
	if tag == "" {
		return ""
	}
	return fmt.Sprintf(" for tag %q", tag)
}

// Leaf's segment path answers the next ID of tag key as text.
func (s *Server) handleLeafSegment(w http.ResponseWriter, r *http.Request) error {
	tag := pathName(r, leafSegmentPrefix, "")
	if err := segment.ValidName(tag); err != nil {
		return err
	}
	if err := s.authorize(r.Header, tag, false, false); err != nil {
		return err
	}
	var arr [1]segment.Span
	spans, err := s.nextSegment(r.Context(), tag, 1, arr[:0])
	if err != nil {
		return err
	}
	return s.writeOne(w, spans[0].First, s.mask.forTag(tag))
}

// Leaf's decode answers {"timestamp","workerId","sequenceId"} as Leaf's
// LeafMonitorController does (timestamp in ms, as a string), plus the
// datacenter and an RFC 3339 time.
func (s *Server) handleLeafDecode(w http.ResponseWriter, r *http.Request) error {
	text := query(r, "snowflakeId")
	if text == "" {
		return apiErrorf(http.StatusBadRequest, codeInvalid, "snowflakeId is required: /decodeSnowflakeId?snowflakeId=<id>")
	}
	in, p, err := s.decode(text, query(r, "as"), s.unmaskCheck(r.Header))
	if err != nil {
		return err
	}
	id := in.id
	writeJSON(w, http.StatusOK, map[string]any{
		"snowflakeId":  id.String(),
		"timestamp":    strconv.FormatInt(p.Time.UnixMilli(), 10),
		"workerId":     strconv.FormatInt(p.Worker, 10),
		"datacenterId": strconv.FormatInt(p.Datacenter, 10),
		"sequenceId":   strconv.FormatInt(p.Sequence, 10),
		"time":         p.Time.UTC().Format("2006-01-02T15:04:05.000Z07:00"),
	})
	return nil
}

// handleTestClock shifts the node's test clock by ?shift= (a Go duration,
// e.g. -5s); mounted only when Options.TestClock is set.
func (s *Server) handleTestClock(w http.ResponseWriter, r *http.Request) error {
	if err := s.authorize(r.Header, "", false, true); err != nil {
		return err
	}
	shift := query(r, "shift")
	d, err := time.ParseDuration(shift)
	if err != nil {
		return apiErrorf(http.StatusBadRequest, codeInvalid, "shift %q: %v", clip(shift), err)
	}
	off := s.clock.Shift(d)
	s.log.Warn("server: TEST clock shifted", "by", d, "offset", off)
	writeJSON(w, http.StatusOK, map[string]string{"shifted": d.String(), "offset": off.String()})
	return nil
}
