package server

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/flakeid/flakeid/snowflake"
)

// discardWriter is a ResponseWriter that keeps only the status and the
// header map, so that a benchmark measures the handler and not a recorder.
type discardWriter struct {
	h      http.Header
	status int
	n      int
}

func (d *discardWriter) Header() http.Header         { return d.h }
func (d *discardWriter) WriteHeader(code int)        { d.status = code }
func (d *discardWriter) Write(p []byte) (int, error) { d.n += len(p); return len(p), nil }

// hotPaths are the single-ID requests (and a small batch) whose handling
// must not allocate: BenchmarkHandler measures them and
// TestSingleIDAllocations checks them.
func hotPaths() []string {
	return []string{
		"/v1/snowflake/next",
		"/api/snowflake/get/x",
		"/v1/segment/orders/next",
		"/api/segment/get/orders",
		"/v1/snowflake/next?count=10",
	}
}

// serveHot returns a function that serves one GET of path through h into a
// reused writer, and the writer.
func serveHot(h http.Handler, path string) (func(), *discardWriter) {
	req := httptest.NewRequest(http.MethodGet, path, nil)
	w := &discardWriter{h: http.Header{}}
	return func() {
		clear(w.h)
		w.status = 0
		h.ServeHTTP(w, req)
	}, w
}

// BenchmarkHandler is the server's own work per single-ID request on the hot
// paths (routing, auth, metrics, generation, the answer), without net/http's
// connection handling: compare allocs/op and ns/op between changes.
func BenchmarkHandler(b *testing.B) {
	f := newFixture(b, nil)
	benchPaths(b, f.srv.Handler(), hotPaths())
}

// benchPaths runs a sub-benchmark per path: one GET of it through h a loop.
func benchPaths(b *testing.B, h http.Handler, paths []string) {
	for _, path := range paths {
		b.Run(path, func(b *testing.B) {
			serve, w := serveHot(h, path)
			b.ReportAllocs()
			for b.Loop() {
				serve()
				if w.status != 0 && w.status != http.StatusOK {
					b.Fatalf("%s: status %d", path, w.status)
				}
			}
		})
	}
}

// FuzzQuery checks the allocation-free query reader against net/url's.
func FuzzQuery(f *testing.F) {
	for _, q := range []string{"", "count=10", "format=ranges&count=3", "count=1&count=2", "count", "a=b&&count=%31",
		"count=1+2", "x=1;count=2", "=&count=", "count=é"} {
		f.Add(q, "count")
	}
	f.Fuzz(func(t *testing.T, raw, key string) {
		r := httptest.NewRequest(http.MethodGet, "/v1/snowflake/next", nil)
		r.URL.RawQuery = raw
		if got, want := query(r, key), r.URL.Query().Get(key); got != want {
			t.Fatalf("query(%q, %q) = %q, net/url says %q", raw, key, got, want)
		}
	})
}

func httptestRequest(target string) *http.Request {
	return httptest.NewRequest(http.MethodGet, target, nil)
}

// BenchmarkBatch is the server's work per batch of 1,000 Snowflake IDs, as
// decimal strings and as each UUID-shaped text (the handler alone, as
// BenchmarkHandler): ns/op over 1,000 is the cost per ID. The layout has
// 22 sequence bits, so that the default layout's ceiling (4,096 IDs a
// millisecond, 244 ns an ID) does not hide the server's own cost.
func BenchmarkBatch(b *testing.B) {
	e := newRPCEnvLayout(b, snowflake.Layout{TimeBits: 41, SequenceBits: 22}, nil)
	benchPaths(b, e.s.Handler(), []string{
		"/v1/snowflake/next?count=1000",
		"/v1/snowflake/next?count=1000&format=ranges",
		"/v1/snowflake/next?count=1000&format=uuid7",
		"/v1/snowflake/next?count=1000&format=typeid&prefix=order",
		"/v1/snowflake/next?count=1000&format=ulid",
	})
}
