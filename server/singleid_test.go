package server

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestSingleIDAllocations: a single ID over HTTP — the JSON path, Leaf's
// paths and the segment path — allocates nothing in the server's own work
// (routing, auth, metrics, generation, the answer). The race detector makes
// sync.Pool drop items at random, so scripts/test.sh runs this without it.
func TestSingleIDAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop items; scripts/test.sh runs this test without -race")
	}
	f := newFixture(t, nil)
	h := f.srv.Handler()
	for _, path := range hotPaths() {
		serve, w := serveHot(h, path)
		serve()
		if w.status != 0 && w.status != http.StatusOK {
			t.Fatalf("%s: status %d", path, w.status)
		}
		if got := testing.AllocsPerRun(500, serve); got != 0 {
			t.Errorf("%s: %v allocations per request, want 0", path, got)
		}
	}
}

// TestSingleIDPathsMatchMux: the paths that singleIDPaths serves without the
// mux get the same answer as through the mux, and the paths it leaves to the
// mux (escaped, unclean, other methods, names that are not one segment) are
// answered as the mux's patterns say.
func TestSingleIDPathsMatchMux(t *testing.T) {
	f := newFixture(t, nil)
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, c := range []struct {
		method, path string
		status       int
		body         string // a part of the answer
	}{
		{"GET", "/api/segment/get/orders", 200, ""},
		{"GET", "/api/segment/get/%6Frders", 200, ""}, // escaped: through the mux, same tag
		{"GET", "/v1/segment/orders/next", 200, `"ids":["`},
		{"GET", "/v1/segment/%6Frders/next", 200, `"ids":["`},
		{"GET", "/api/snowflake/get/anything", 200, ""},
		{"GET", "/api/snowflake/get/", 404, `"code"`},
		{"GET", "/api/segment/get/", 404, `"code"`},
		{"GET", "/v1/segment//next", 307, ""}, // unclean: the mux redirects
		{"GET", "/api/segment/get/a/b", 404, `"code"`},
		{"GET", "/api/segment/get/a%2Fb", 400, `invalid tag: tag \"a/b\" has '/'`}, // one segment with an escaped slash: through the mux, tag "a/b", which no tag may be
		{"GET", "/api/segment/get/nosuchtag", 404, "nosuchtag"},
		{"POST", "/api/segment/get/orders", 405, `"code"`},
		{"POST", "/api/snowflake/get/x", 405, `"code"`},
	} {
		req, err := http.NewRequest(c.method, f.http.URL+c.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		body := string(b)
		if resp.StatusCode != c.status || !strings.Contains(body, c.body) {
			t.Errorf("%s %s: %d %q, want %d with %q", c.method, c.path, resp.StatusCode, body, c.status, c.body)
		}
	}
}
