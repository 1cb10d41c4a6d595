package server

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"net/http"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/flakeid/flakeid/snowflake"
)

// The web console: plain HTML, CSS and JavaScript embedded in the binary (no
// build step, no external resources), served at /ui/. The page polls the
// JSON API (/v1/status every second, /v1/decode/{id}, /v1/layout) with the
// bearer token the user types in, kept in sessionStorage. The assets
// themselves need no token.
//
//go:embed ui/index.html ui/ui.css ui/ui.js
var uiFiles embed.FS

// uiAsset is one embedded file, ready to serve.
type uiAsset struct {
	name, contentType, etag string
	body                    []byte
}

// uiContentTypes are the content types of the console's files, fixed here
// so they never depend on the machine's MIME database.
var uiContentTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
}

// uiCSP allows the page nothing from elsewhere: its own script, styles and
// API, and data: images (the empty favicon).
const uiCSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// loadUIAssets reads the embedded files once.
func loadUIAssets() map[string]uiAsset {
	out := map[string]uiAsset{}
	for _, name := range []string{"index.html", "ui.css", "ui.js"} {
		b, err := uiFiles.ReadFile("ui/" + name)
		if err != nil {
			panic(fmt.Sprintf("server: embedded console file %s: %v", name, err)) // cannot happen: go:embed names it
		}
		sum := sha256.Sum256(b)
		out[name] = uiAsset{name: name, contentType: uiContentTypes[path.Ext(name)],
			etag: `"` + hex.EncodeToString(sum[:8]) + `"`, body: b}
	}
	return out
}

// uiRoutes mounts the console: GET /ui/ (the page), /ui/ui.css, /ui/ui.js,
// a redirect from /ui, and the layout calculator's GET /v1/layout.
func (s *Server) uiRoutes(mux *http.ServeMux) {
	assets := loadUIAssets()
	mux.Handle("GET /ui/{file...}", s.instrument("/ui", func(w http.ResponseWriter, r *http.Request) error {
		name := r.PathValue("file")
		if name == "" {
			name = "index.html"
		}
		a, ok := assets[name]
		if !ok {
			return apiErrorf(http.StatusNotFound, codeNotFound, "no such console file: %s", clip(r.URL.Path))
		}
		h := w.Header()
		h.Set("Content-Type", a.contentType)
		h.Set("ETag", a.etag)
		h.Set("Cache-Control", "no-cache") // revalidate: a new binary serves new files
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		if a.name == "index.html" {
			h.Set("Content-Security-Policy", uiCSP)
			h.Set("X-Frame-Options", "DENY")
		}
		http.ServeContent(w, r, a.name, time.Time{}, bytes.NewReader(a.body))
		return nil
	}))
	mux.HandleFunc("GET /ui", func(w http.ResponseWriter, r *http.Request) {
		// Relative, so that the console also works under a proxy's path prefix.
		w.Header().Set("Location", "ui/")
		w.WriteHeader(http.StatusMovedPermanently)
	})
	// The calculator keeps the API's query rules: its parameters only,
	// each once, none empty.
	mux.Handle("GET /v1/layout", s.instrument("/v1/layout", endpoint{path: "/v1/layout", params: layoutParams}.checked(s.handleLayout)))
}

// layoutParams are the query parameters of GET /v1/layout.
var layoutParams = []string{"preset", "time_bits", "datacenter_bits", "worker_bits", "sequence_bits", "epoch", "unit"}

// layoutJSON is the answer of /v1/layout.
type layoutJSON struct {
	// Valid is true when the layout can issue IDs now (snowflake.New takes it).
	Valid bool   `json:"valid"`
	Error string `json:"error,omitempty"`
	// Bits is "time/datacenter/worker/sequence", normalized when the layout
	// normalizes (a zero time width becomes the rest of the 63 bits).
	Bits string `json:"bits"`
	// The normalized layout; absent when it does not normalize.
	TimeBits       int    `json:"time_bits"`
	DatacenterBits int    `json:"datacenter_bits"`
	WorkerBits     int    `json:"worker_bits"`
	SequenceBits   int    `json:"sequence_bits"`
	Epoch          string `json:"epoch,omitempty"`
	Unit           string `json:"unit,omitempty"`
	// Capacity (snowflake.Layout.Capacity), when the layout normalizes: an
	// epoch in the future or a time field that already ran out still
	// reports it, with valid false.
	IDsPerTick           int64   `json:"ids_per_tick,omitempty"`
	IDsPerSecond         float64 `json:"ids_per_second,omitempty"`
	Datacenters          int64   `json:"datacenters,omitempty"`
	WorkersPerDatacenter int64   `json:"workers_per_datacenter,omitempty"`
	Nodes                int64   `json:"nodes,omitempty"`
	LifetimeYears        float64 `json:"lifetime_years,omitempty"`
	RunsUntil            string  `json:"runs_until,omitempty"`
}

// handleLayout is the layout calculator: GET /v1/layout?time_bits=&
// datacenter_bits=&worker_bits=&sequence_bits=&epoch=&unit=&preset=. The
// preset (default, twitter, sonyflake, jssafe, leaf) gives the starting layout,
// "default" when absent, and each parameter given replaces its field. An
// impossible layout is a 200 with valid false and the library's error; a
// width that is not a whole number from 0 to 63, or a value that is not a
// time or a duration, is a 400. No token is needed: it only computes.
func (s *Server) handleLayout(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	l, err := snowflake.Preset(q.Get("preset"))
	if err != nil {
		return err
	}
	for _, f := range []struct {
		key string
		dst *int
	}{{"time_bits", &l.TimeBits}, {"datacenter_bits", &l.DatacenterBits}, {"worker_bits", &l.WorkerBits}, {"sequence_bits", &l.SequenceBits}} {
		v := strings.TrimSpace(q.Get(f.key))
		if v == "" {
			continue
		}
		n, err := wholeNumber(f.key, v, 0, 63)
		if err != nil {
			return err
		}
		*f.dst = int(n)
	}
	if v := strings.TrimSpace(q.Get("epoch")); v != "" {
		t, err := parseEpoch(v)
		if err != nil {
			return err
		}
		l.Epoch = t
	}
	if v := strings.TrimSpace(q.Get("unit")); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return apiErrorf(http.StatusBadRequest, codeInvalid, "unit %q is not a positive duration such as 1ms or 10ms", clip(v))
		}
		l.TimeUnit = d
	}

	out := layoutJSON{Bits: fmt.Sprintf("%d/%d/%d/%d", l.TimeBits, l.DatacenterBits, l.WorkerBits, l.SequenceBits)}
	if _, err := snowflake.New(snowflake.Settings{Layout: l}); err != nil { // also checks the clock
		out.Error = err.Error()
	} else {
		out.Valid = true
	}
	if n, err := l.Normalize(); err == nil {
		c := n.Capacity()
		out.Bits = fmt.Sprintf("%d/%d/%d/%d", n.TimeBits, n.DatacenterBits, n.WorkerBits, n.SequenceBits)
		out.TimeBits, out.DatacenterBits, out.WorkerBits, out.SequenceBits = n.TimeBits, n.DatacenterBits, n.WorkerBits, n.SequenceBits
		out.Epoch, out.Unit = n.Epoch.UTC().Format(time.RFC3339Nano), n.TimeUnit.String()
		out.IDsPerTick, out.IDsPerSecond = c.IDsPerTick, c.IDsPerSecond
		out.Datacenters, out.WorkersPerDatacenter, out.Nodes = c.Datacenters, c.WorkersPerDatacenter, c.Nodes
		out.LifetimeYears, out.RunsUntil = c.LifetimeYears, c.RunsUntil.UTC().Format(time.RFC3339)
	} else {
		out.TimeBits, out.DatacenterBits, out.WorkerBits, out.SequenceBits = l.TimeBits, l.DatacenterBits, l.WorkerBits, l.SequenceBits
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// parseEpoch reads an epoch as RFC 3339 (2025-01-01T00:00:00Z), a date
// (2025-01-01, midnight UTC) or Unix milliseconds (1735689600000).
func parseEpoch(v string) (time.Time, error) {
	if ms, err := strconv.ParseInt(v, 10, 64); err == nil {
		if ms < -62135596800000 || ms > 253402300799999 { // years 1–9999
			return time.Time{}, apiErrorf(http.StatusBadRequest, codeInvalid, "epoch %d ms is out of range", ms)
		}
		return time.UnixMilli(ms).UTC(), nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02"} {
		if t, err := time.Parse(layout, v); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, apiErrorf(http.StatusBadRequest, codeInvalid,
		"epoch %q: want RFC 3339 (2025-01-01T00:00:00Z), a date (2025-01-01) or Unix milliseconds", clip(v))
}
