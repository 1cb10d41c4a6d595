package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/flakeid/flakeid/node"
	"github.com/flakeid/flakeid/segment"
	"github.com/flakeid/flakeid/segment/segmenttest"
	"github.com/flakeid/flakeid/snowflake"
	"github.com/flakeid/flakeid/worker"
	"github.com/flakeid/flakeid/worker/workertest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fixture is a real server: a node leasing its worker id from a bbolt file,
// a segment allocator on an in-memory store with tag "orders".
type fixture struct {
	srv  *Server
	node *node.Node
	segs *segment.Allocator
	mem  *segmenttest.Memory // the segment store
	http *httptest.Server
}

// fixtureCoordinator is the fixtures' coordinator: in memory, so that a
// renewal never waits for a disk — a bbolt file's fsync, stalled on a
// loaded CI machine, ran fixtureLease's reservation out and fenced the
// node in the middle of tests about something else. The server's tests are
// about serving; every coordinator is tested against its real store in its
// own package (workertest), and cmd/flakeid runs the server on bbolt.
func fixtureCoordinator() *workertest.Memory { return workertest.NewMemory(nil) }

// fixtureLease is the fixtures' lease: the defaults but for a short
// reservation and clock bound, so that a fixture's first lease waits out a
// quarantine of 400 ms instead of 4 s (the handler tests are about HTTP, not
// leases; node and worker test the lease with the defaults). A renewal that
// stalls for 300 ms (the scheduler of a loaded machine) fences the node for
// a moment: tests that issue for seconds on end take streamLease.
func fixtureLease() worker.Config {
	return worker.Config{RenewEvery: 100 * time.Millisecond, RetryEvery: 50 * time.Millisecond,
		ReserveAhead: 300 * time.Millisecond, MaxClockSkew: 100 * time.Millisecond}
}

// streamLease is fixtureLease with a 2 s reservation, for a test that must
// issue without a pause for seconds: a renewal stalled by a loaded CI
// machine's fsync once fenced a 3.5 s stream of fixtureLease.
func streamLease() worker.Config {
	l := fixtureLease()
	l.ReserveAhead = 2 * time.Second
	return l
}

func newFixture(t testing.TB, mutate func(*Config)) *fixture {
	t.Helper()
	return newFixtureWith(t, mutate, nil)
}

// newFixtureWith is newFixture with the segment allocator's config changed
// by segMod (nil: as is).
func newFixtureWith(t testing.TB, mutate func(*Config), segMod func(*segment.Config)) *fixture {
	t.Helper()
	return newFixtureOpts(t, mutate, segMod, nil)
}

// newFixtureOpts is newFixtureWith with the server's Options changed by
// optMod (nil: as is).
func newFixtureOpts(t testing.TB, mutate func(*Config), segMod func(*segment.Config), optMod func(*Options)) *fixture {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	if tt, ok := t.(*testing.T); ok {
		log = slog.New(slog.NewTextHandler(tt.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	coord := fixtureCoordinator()
	n, err := node.Start(context.Background(), node.Config{Coordinator: coord, Logger: log, Lease: fixtureLease()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	mem := segmenttest.NewMemory()
	if err := mem.Create(context.Background(), segment.Tag{Name: "orders", Step: 1000}); err != nil {
		t.Fatal(err)
	}
	scfg := segment.Config{Store: mem, Logger: log}
	if segMod != nil {
		segMod(&scfg)
	}
	segs, err := segment.New(scfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { segs.Close() })
	cfg := DefaultConfig()
	if mutate != nil {
		mutate(&cfg)
	}
	opts := Options{Config: cfg, Node: n, Segments: segs, Logger: log}
	if optMod != nil {
		optMod(&opts)
	}
	srv, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(checkedByOpenAPI(t, srv.Handler()))
	t.Cleanup(hs.Close)
	return &fixture{srv: srv, node: n, segs: segs, mem: mem, http: hs}
}

type reply struct {
	status int
	header http.Header
	body   string
}

// do sends a request to the fixture's server: a body, when not "", as
// application/json unless header (name, value, …) sets another
// Content-Type.
func (f *fixture) do(t testing.TB, method, path string, body string, header ...string) reply {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, f.http.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" { // a JSON body, unless the test says otherwise
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := f.http.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return reply{resp.StatusCode, resp.Header, string(b)}
}

// wantError checks a JSON error answer.
func wantError(t *testing.T, r reply, status int, code, mention string) {
	t.Helper()
	var body errorBody
	if r.status != status || json.Unmarshal([]byte(r.body), &body) != nil || body.Error.Code != code ||
		!strings.Contains(body.Error.Message, mention) {
		t.Fatalf("got %d %s; want %d with code %q mentioning %q", r.status, r.body, status, code, mention)
	}
}

func TestSnowflakeNext(t *testing.T) {
	f := newFixture(t, nil)
	r := f.do(t, "GET", "/v1/snowflake/next?count=5", "")
	var body struct{ IDs []string }
	if r.status != 200 || json.Unmarshal([]byte(r.body), &body) != nil || len(body.IDs) != 5 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	var prev int64
	for _, s := range body.IDs {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil || v <= prev {
			t.Fatalf("IDs %v: not increasing decimal strings", body.IDs)
		}
		prev = v
	}
	st := f.node.Status()
	if p, _ := f.node.Decode(snowflake.ID(prev)); p.Worker != st.WorkerID {
		t.Fatalf("ID from worker %d, the node holds %d", p.Worker, st.WorkerID)
	}
	r = f.do(t, "GET", "/v1/snowflake/next?count=3", "", "Accept", "text/plain")
	if lines := strings.Fields(r.body); r.status != 200 || len(lines) != 3 || !strings.HasPrefix(r.header.Get("Content-Type"), "text/plain") {
		t.Fatalf("text/plain: %d %q", r.status, r.body)
	}
	r = f.do(t, "GET", "/v1/snowflake/next?count=10000&format=ranges", "")
	var ranges struct {
		Ranges []struct {
			First snowflake.ID
			Count int64
		}
		Count int64
	}
	if err := json.Unmarshal([]byte(r.body), &ranges); err != nil || ranges.Count != 10000 {
		t.Fatalf("ranges: %v %s", err, r.body)
	}
	var sum int64
	for _, x := range ranges.Ranges {
		sum += x.Count
	}
	if sum != 10000 {
		t.Fatalf("ranges add up to %d", sum)
	}
	if r := f.do(t, "GET", "/v1/snowflake/next", ""); r.status != 200 || strings.Count(r.body, `"`) != 4 {
		t.Fatalf("default count: %s", r.body)
	}
	for _, q := range []string{"0", "-1", "abc", "100001", "99999999999999999999"} {
		wantError(t, f.do(t, "GET", "/v1/snowflake/next?count="+q, ""), 400, codeInvalid, "count")
	}
	wantError(t, f.do(t, "GET", "/v1/snowflake/next?count=2&format=xml", ""), 400, codeInvalid, "format")
}

func TestSegmentEndpoints(t *testing.T) {
	f := newFixture(t, nil)
	r := f.do(t, "GET", "/v1/segment/orders/next?count=3", "")
	var body struct {
		Tag string
		IDs []string
	}
	if err := json.Unmarshal([]byte(r.body), &body); err != nil || body.Tag != "orders" || !slices.Equal(body.IDs, []string{"1", "2", "3"}) {
		t.Fatalf("%d %s", r.status, r.body)
	}
	wantError(t, f.do(t, "GET", "/v1/segment/nope/next", ""), 404, codeNotFound, "unknown tag")
	wantError(t, f.do(t, "GET", "/v1/segment/bad%20tag/next", ""), 400, codeInvalid, "bad tag")

	r = f.do(t, "POST", "/v1/segment/tags", `{"tag":"chat","step":10,"description":"messages"}`)
	if r.status != 201 || !strings.Contains(r.body, `"tag":"chat"`) {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	wantError(t, f.do(t, "POST", "/v1/segment/tags", `{"tag":"chat","step":10}`), 409, codeExists, "chat")
	wantError(t, f.do(t, "POST", "/v1/segment/tags", `{"tag":"x","step":10`), 400, codeInvalid, "bad JSON")
	wantError(t, f.do(t, "POST", "/v1/segment/tags", `{"tag":"x","stepp":10}`), 400, codeInvalid, "stepp")
	wantError(t, f.do(t, "POST", "/v1/segment/tags", `{"tag":"x","step":-3}`), 400, codeInvalid, "step -3")
	wantError(t, f.do(t, "POST", "/v1/segment/tags", `{"tag":"x"} {"tag":"y"}`), 400, codeInvalid, "data after the object")
	wantError(t, f.do(t, "POST", "/v1/segment/tags", `{"description":"`+strings.Repeat("a", maxBody)+`"}`), 413, codeBodyTooLarge, "larger than")
	r = f.do(t, "PATCH", "/v1/segment/tags/chat", `{"step":500}`)
	if r.status != 200 || !strings.Contains(r.body, `"step":500`) {
		t.Fatalf("set step: %d %s", r.status, r.body)
	}
	wantError(t, f.do(t, "PATCH", "/v1/segment/tags/nope", `{"step":5}`), 404, codeNotFound, "nope")
	wantError(t, f.do(t, "PATCH", "/v1/segment/tags/chat", `{}`), 400, codeInvalid, "nothing to change")
	r = f.do(t, "GET", "/v1/segment/tags", "")
	if r.status != 200 || !strings.Contains(r.body, `"tag":"chat"`) || !strings.Contains(r.body, `"tag":"orders"`) {
		t.Fatalf("list: %d %s", r.status, r.body)
	}
}

func TestDecodeAndLeafPaths(t *testing.T) {
	f := newFixture(t, nil)
	r := f.do(t, "GET", "/api/snowflake/get/anykey", "")
	id, err := snowflake.Parse(r.body)
	if r.status != 200 || err != nil {
		t.Fatalf("Leaf snowflake: %d %q", r.status, r.body)
	}
	p, _ := f.node.Decode(id)
	r = f.do(t, "GET", "/v1/decode/"+id.String(), "")
	var d decodeJSON
	if err := json.Unmarshal([]byte(r.body), &d); err != nil || d.ID != id || d.Worker != p.Worker || d.Sequence != p.Sequence || d.UnixMs != p.Time.UnixMilli() {
		t.Fatalf("decode: %s", r.body)
	}
	for _, text := range textForms(id) {
		if r := f.do(t, "GET", "/v1/decode/"+text, ""); !strings.Contains(r.body, `"id":"`+id.String()+`"`) {
			t.Fatalf("decode base32: %s", r.body)
		}
	}
	wantError(t, f.do(t, "GET", "/v1/decode/garbage!", ""), 400, codeInvalid, "garbage")
	r = f.do(t, "GET", "/decodeSnowflakeId?snowflakeId="+id.String(), "")
	var leaf map[string]string
	if err := json.Unmarshal([]byte(r.body), &leaf); err != nil || leaf["workerId"] != strconv.FormatInt(p.Worker, 10) ||
		leaf["timestamp"] != strconv.FormatInt(p.Time.UnixMilli(), 10) {
		t.Fatalf("Leaf decode: %s", r.body)
	}
	wantError(t, f.do(t, "GET", "/decodeSnowflakeId", ""), 400, codeInvalid, "")
	if r := f.do(t, "GET", "/api/segment/get/orders", ""); r.status != 200 || r.body != "1" {
		t.Fatalf("Leaf segment: %d %q", r.status, r.body)
	}
	wantError(t, f.do(t, "GET", "/api/segment/get/unknown", ""), 404, codeNotFound, "unknown")
}

func TestMethodsAndUnknownPaths(t *testing.T) {
	f := newFixture(t, nil)
	r := f.do(t, "POST", "/v1/snowflake/next", "")
	wantError(t, r, 405, codeMethod, "use GET")
	if r.header.Get("Allow") != "GET" {
		t.Fatalf("Allow: %q", r.header.Get("Allow"))
	}
	wantError(t, f.do(t, "DELETE", "/v1/segment/tags", ""), 405, codeMethod, "GET or POST")
	wantError(t, f.do(t, "GET", "/v2/nothing", ""), 404, codeNotFound, "/v2/nothing")
}

func TestAuth(t *testing.T) {
	f := newFixture(t, func(c *Config) {
		c.Tokens = []Token{
			{Name: "shop", Token: "shop-token-0123456789", Tags: []string{"orders"}},
			{Name: "ids", Token: "ids-token-0123456789", Snowflake: true},
			{Name: "admin", Token: "admin-token-0123456789", Tags: []string{"*"}, Admin: true},
		}
	})
	bearer := func(tok string) []string { return []string{"Authorization", "Bearer " + tok} }
	wantError(t, f.do(t, "GET", "/v1/snowflake/next", ""), 401, codeUnauth, "missing bearer token")
	wantError(t, f.do(t, "GET", "/v1/snowflake/next", "", bearer("wrong-token-0123456789")...), 401, codeUnauth, "unknown")
	wantError(t, f.do(t, "GET", "/v1/snowflake/next", "", bearer("shop-token-0123456789")...), 403, codeForbidden, "Snowflake")
	if r := f.do(t, "GET", "/v1/snowflake/next", "", bearer("ids-token-0123456789")...); r.status != 200 {
		t.Fatalf("ids token: %d %s", r.status, r.body)
	}
	if r := f.do(t, "GET", "/v1/segment/orders/next", "", bearer("shop-token-0123456789")...); r.status != 200 {
		t.Fatalf("shop token on its tag: %d %s", r.status, r.body)
	}
	wantError(t, f.do(t, "GET", "/v1/segment/other/next", "", bearer("shop-token-0123456789")...), 403, codeForbidden, `"other"`)
	wantError(t, f.do(t, "POST", "/v1/segment/tags", `{"tag":"z","step":5}`, bearer("shop-token-0123456789")...), 403, codeForbidden, "change tags")
	if r := f.do(t, "POST", "/v1/segment/tags", `{"tag":"z","step":5}`, bearer("admin-token-0123456789")...); r.status != 201 {
		t.Fatalf("admin create: %d %s", r.status, r.body)
	}
	for _, open := range []string{"/healthz", "/readyz", "/metrics"} {
		if r := f.do(t, "GET", open, ""); r.status != 200 {
			t.Fatalf("%s without a token: %d", open, r.status)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		mut  func(*Config)
		want string
	}{
		{func(c *Config) { c.Listen = "nope" }, "listen address"},
		{func(c *Config) { c.MaxCount = -1 }, "max count -1"},
		{func(c *Config) { c.StreamBatch = 200_000 }, "stream batch"},
		{func(c *Config) { c.TLSCert = "x.pem" }, "both a certificate and a key"},
		{func(c *Config) { c.Tokens = []Token{{Token: "short"}} }, "shorter than 16"},
		{func(c *Config) {
			c.Tokens = []Token{{Token: "0123456789abcdef0"}, {Token: "0123456789abcdef0"}}
		}, "twice"},
		{func(c *Config) { c.Tokens = []Token{{Token: "0123456789abcdef0", Tags: []string{"bad tag"}}} }, "bad tag"},
		{func(c *Config) { c.ShutdownTimeout = time.Hour }, "shutdown timeout"},
	} {
		c := DefaultConfig()
		tc.mut(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate = %v, want an error naming %q", err, tc.want)
		}
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestHealthReadinessMetrics(t *testing.T) {
	f := newFixture(t, nil)
	if r := f.do(t, "GET", "/healthz", ""); r.status != 200 || r.body != "ok\n" {
		t.Fatalf("healthz: %d %q", r.status, r.body)
	}
	if r := f.do(t, "GET", "/readyz", ""); r.status != 200 {
		t.Fatalf("readyz: %d %q", r.status, r.body)
	}
	f.do(t, "GET", "/v1/snowflake/next?count=7", "")
	f.do(t, "GET", "/v1/segment/orders/next?count=3", "")
	r := f.do(t, "GET", "/metrics", "")
	for _, want := range []string{
		`flakeid_ids_issued_total{kind="snowflake",tag=""} 7`,
		`flakeid_ids_issued_total{kind="segment",tag="orders"} 3`,
		`flakeid_lease_held 1`, `flakeid_worker_id`, `flakeid_clock_backward_jumps_total 0`,
		`flakeid_http_request_duration_seconds_bucket{route="/v1/snowflake/next"`,
		`flakeid_segment_buffered_ids{tag="orders"}`, `flakeid_segment_step{tag="orders"} 1000`,
		`go_goroutines`,
	} {
		if !strings.Contains(r.body, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	r = f.do(t, "GET", "/v1/status", "")
	if !strings.Contains(r.body, `"lease_held":true`) || !strings.Contains(r.body, `"tag":"orders"`) {
		t.Fatalf("status: %s", r.body)
	}
	f.node.Close() // releases the lease
	if r := f.do(t, "GET", "/readyz", ""); r.status != 503 || !strings.Contains(r.body, "no worker-id lease") {
		t.Fatalf("readyz after the lease went: %d %q", r.status, r.body)
	}
	wantError(t, f.do(t, "GET", "/v1/snowflake/next", ""), 503, codeUnavailable, "lease")
}

// TestGracefulShutdown: a request in flight when the server is told to stop
// is answered; afterwards nothing is served.
func TestGracefulShutdown(t *testing.T) {
	f := newFixture(t, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.srv.Serve(ctx, ln) }()
	url := "http://" + ln.Addr().String()
	// A slow request: a large text answer read slowly.
	resp, err := http.Get(url + "/v1/snowflake/next?count=100000")
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || strings.Count(string(b), ",") != 99_999 {
		t.Fatalf("in-flight request cut short: %v, %d bytes", err, len(b))
	}
	if err := <-done; err != nil {
		t.Fatalf("Serve: %v", err)
	}
	if _, err := http.Get(url + "/healthz"); err == nil {
		t.Fatal("served after shutdown")
	}
}

// FuzzHandlers drives the HTTP API with random methods, paths, queries and
// bodies, on a plain server and on one that masks (Snowflake IDs and tag
// orders, base62): it must never panic (the recoverer would answer 500)
// nor answer an unexplained 5xx.
func FuzzHandlers(f *testing.F) {
	for _, seed := range []struct{ method, path, body string }{
		{"GET", "/v1/snowflake/next?count=3", ""},
		{"GET", "/v1/segment/orders/next?count=2&format=ranges", ""},
		{"POST", "/v1/segment/tags", `{"tag":"a","step":1}`},
		{"PATCH", "/v1/segment/tags/orders", `{"description":"x"}`},
		{"GET", "/v1/decode/7ZZZZZZZZZZZZ", ""},
		{"GET", "/decodeSnowflakeId?snowflakeId=-1", ""},
		{"GET", "/api/segment/get/%00", ""},
		{"PUT", "/v1/status", "{"},
		{"GET", "/v1/decode/3aZ09bY7cQk2L?as=masked", ""},
		{"GET", "/v1/decode/0123456789012?as=plain", ""},
		{"GET", "/api/snowflake/get/x", ""},
	} {
		f.Add(seed.method, seed.path, seed.body, false)
		f.Add(seed.method, seed.path, seed.body, true)
	}
	plain := newFixture(f, nil).srv.Handler()
	masked := newFixture(f, func(c *Config) {
		c.Mask = MaskConfig{Keys: []MaskKey{{ID: 3, Key: maskKeyOld}}, Form: "base62", Snowflake: true, Tags: []string{"orders"}}
	}).srv.Handler()
	f.Fuzz(func(t *testing.T, method, path, body string, mask bool) {
		h := plain
		if mask {
			h = masked
		}
		if !strings.HasPrefix(path, "/") {
			path = "/" + path
		}
		req, err := http.NewRequest(method, "http://x"+path, bytes.NewReader([]byte(body)))
		if err != nil {
			return // not a request a client could send
		}
		// Streams (health Watch, StreamSnowflake with count 0) run until
		// the client goes; the deadline plays the client.
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req.WithContext(ctx))
		if rec.Code >= 500 && rec.Code != http.StatusServiceUnavailable && rec.Code != http.StatusInsufficientStorage {
			t.Fatalf("%s %q %q → %d %s", method, path, body, rec.Code, rec.Body.String())
		}
		if ct := rec.Header().Get("Content-Type"); rec.Code >= 400 && !strings.HasPrefix(ct, "application/json") &&
			!strings.HasPrefix(ct, "text/plain") && !strings.HasPrefix(ct, "application/proto") && !strings.HasPrefix(ct, "application/grpc") &&
			!strings.HasPrefix(ct, "application/connect") {
			t.Fatalf("%s %q → %d with content type %q", method, path, rec.Code, ct)
		}
	})
}
