package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// backend is the state fakes share, so that several fakes behave as one
// cluster: Snowflake IDs from one counter, segment IDs from one table.
type backend struct {
	ids  atomic.Int64 // the next Snowflake ID
	mu   sync.Mutex
	tags map[string]*fakeTag
}

type fakeTag struct{ next, stride int64 }

func newBackend() *backend {
	be := &backend{tags: map[string]*fakeTag{"orders": {1001, 1}, "odd": {1, 2}, "a/b": {1, 1}}}
	be.ids.Store(249845384023638016)
	return be
}

// fake implements the HTTP/JSON API over a backend, and counts requests.
type fake struct {
	be  *backend
	srv *httptest.Server

	tick     int64 // Snowflake ranges break at multiples of tick
	step     int64 // segment ranges break every step IDs
	maxCount int64
	token    atomic.Pointer[string] // when set, required

	status     atomic.Int64           // when set, every request is answered with it
	retryAfter atomic.Pointer[string] // the Retry-After of those answers, when set
	statusN    atomic.Int64           // when set, only this many more requests are answered with status
	times      sync.Mutex
	at         []time.Time  // when each request arrived
	delay      atomic.Int64 // nanoseconds to stall each request
	short      atomic.Bool  // answer one ID fewer than asked (a broken server)
	plainIDs   atomic.Bool  // answer {"ids": …} instead of ranges

	total, snow, seg, dec atomic.Int64
	lastAuth              atomic.Pointer[string]
	lastTag               atomic.Pointer[string]
}

func newFake(t testing.TB, be *backend, opts ...func(*fake)) *fake {
	f := &fake{be: be, tick: 4096, step: 500, maxCount: 100_000}
	for _, o := range opts {
		o(f)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/snowflake/next", f.snowflake)
	mux.HandleFunc("GET /v1/segment/{tag}/next", f.segment)
	mux.HandleFunc("GET /v1/decode/{id}", f.decode)
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/status" { // the client's overlap check (spaces.go), which fakes do not serve
			f.total.Add(1)
			f.times.Lock()
			f.at = append(f.at, time.Now())
			f.times.Unlock()
		}
		auth := r.Header.Get("Authorization")
		f.lastAuth.Store(&auth)
		if d := time.Duration(f.delay.Load()); d > 0 {
			select {
			case <-time.After(d):
			case <-r.Context().Done():
				return
			}
		}
		if s := int(f.status.Load()); s != 0 {
			if f.statusN.Load() > 0 && f.statusN.Add(-1) == 0 {
				f.status.Store(0) // that was the last one
			}
			if ra := f.retryAfter.Load(); ra != nil {
				w.Header().Set("Retry-After", *ra)
			}
			writeErr(w, s, codeOf(s), "told to fail")
			return
		}
		if tok := f.token.Load(); tok != nil && auth != "Bearer "+*tok {
			writeErr(w, http.StatusUnauthorized, "unauthenticated", "bad token")
			return
		}
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fake) URL() string { return f.srv.URL }

func writeErr(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"error":{"code":%q,"message":%q}}`, code, msg)
}

type jsonRange struct {
	First  string `json:"first"`
	Count  int64  `json:"count"`
	Stride int64  `json:"stride"`
}

func (f *fake) count(w http.ResponseWriter, r *http.Request) (int64, bool) {
	n, err := strconv.ParseInt(r.URL.Query().Get("count"), 10, 64)
	if err != nil || n < 1 || n > f.maxCount {
		writeErr(w, http.StatusBadRequest, "invalid_argument", fmt.Sprintf("count %q is out of range", r.URL.Query().Get("count")))
		return 0, false
	}
	if r.URL.Query().Get("format") != "ranges" && !f.plainIDs.Load() {
		writeErr(w, http.StatusBadRequest, "invalid_argument", "the client must ask for ranges")
		return 0, false
	}
	return n, true
}

func (f *fake) answer(w http.ResponseWriter, tag string, n int64, ranges []jsonRange) {
	if f.short.Load() {
		ranges[len(ranges)-1].Count--
		if ranges[len(ranges)-1].Count == 0 {
			ranges = ranges[:len(ranges)-1]
		}
	}
	body := map[string]any{"count": n}
	if tag != "" {
		body["tag"] = tag
	}
	if f.plainIDs.Load() {
		var ids []string
		for _, rg := range ranges {
			first, _ := strconv.ParseInt(rg.First, 10, 64)
			for i := range rg.Count {
				ids = append(ids, strconv.FormatInt(first+i*rg.Stride, 10))
			}
		}
		body["ids"] = ids
	} else {
		body["ranges"] = ranges
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(body)
}

func (f *fake) snowflake(w http.ResponseWriter, r *http.Request) {
	f.snow.Add(1)
	n, ok := f.count(w, r)
	if !ok {
		return
	}
	end := f.be.ids.Add(n)
	var ranges []jsonRange
	for id := end - n; id < end; {
		k := min(end-id, f.tick-id%f.tick) // up to the tick's end
		ranges = append(ranges, jsonRange{strconv.FormatInt(id, 10), k, 1})
		id += k
	}
	f.answer(w, "", n, ranges)
}

func (f *fake) segment(w http.ResponseWriter, r *http.Request) {
	f.seg.Add(1)
	tag := r.PathValue("tag")
	f.lastTag.Store(&tag)
	n, ok := f.count(w, r)
	if !ok {
		return
	}
	f.be.mu.Lock()
	ft := f.be.tags[tag]
	var first int64
	if ft != nil {
		first = ft.next
		ft.next += n * ft.stride
	}
	f.be.mu.Unlock()
	if ft == nil {
		writeErr(w, http.StatusNotFound, "not_found", "segment: unknown tag "+tag)
		return
	}
	var ranges []jsonRange
	for left := n; left > 0; {
		k := min(left, f.step)
		ranges = append(ranges, jsonRange{strconv.FormatInt(first, 10), k, ft.stride})
		first += k * ft.stride
		left -= k
	}
	f.answer(w, tag, n, ranges)
}

var testEpoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func (f *fake) decode(w http.ResponseWriter, r *http.Request) {
	f.dec.Add(1)
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id < 0 {
		writeErr(w, http.StatusBadRequest, "invalid_argument", "bad ID "+r.PathValue("id"))
		return
	}
	tick := id >> 22
	ts := testEpoch.Add(time.Duration(tick) * time.Millisecond)
	fmt.Fprintf(w, `{"id":"%d","time":%q,"unix_ms":%d,"tick":%d,"datacenter":%d,"worker":%d,"sequence":%d}`,
		id, ts.Format("2006-01-02T15:04:05.000Z07:00"), ts.UnixMilli(), tick, id>>17&31, id>>12&31, id&4095)
}

// newClient returns a client of the endpoints, closed at cleanup, with
// short backoffs.
func newClient(t testing.TB, cfg Config, endpoints ...string) *Client {
	t.Helper()
	cfg.Endpoints = endpoints
	if cfg.BackoffMin == 0 {
		cfg.BackoffMin, cfg.BackoffMax = 5*time.Millisecond, 50*time.Millisecond
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// closedURL is the address of a server that is gone.
func closedURL(t *testing.T) string {
	s := httptest.NewServer(http.NotFoundHandler())
	u := s.URL
	s.Close()
	return u
}

func TestConfig(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("DefaultConfig: %v", err)
	}
	ok := Config{Endpoints: []string{"http://127.0.0.1:8080"}}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	bad := map[string]func(*Config){
		"no endpoints":  func(c *Config) { c.Endpoints = nil },
		"scheme":        func(c *Config) { c.Endpoints = []string{"ftp://x:1"} },
		"no scheme":     func(c *Config) { c.Endpoints = []string{"127.0.0.1:8080"} },
		"query":         func(c *Config) { c.Endpoints = []string{"http://x:1/?a=b"} },
		"duplicate":     func(c *Config) { c.Endpoints = []string{"http://x:1", "http://x:1/"} },
		"user":          func(c *Config) { c.Endpoints = []string{"http://u:p@x:1"} },
		"token":         func(c *Config) { c.Token = "a\r\nX-Evil: 1" },
		"timeout":       func(c *Config) { c.Timeout = -1 },
		"attempts":      func(c *Config) { c.MaxAttempts = -1 },
		"backoff order": func(c *Config) { c.BackoffMin, c.BackoffMax = time.Second, time.Millisecond },
		"snowflake":     func(c *Config) { c.Buffer.Snowflake = MaxCount + 1 },
		"segment":       func(c *Config) { c.Buffer.Segment = -1 },
		"low water":     func(c *Config) { c.Buffer.LowWater = 1.5 },
		"low water NaN": func(c *Config) { c.Buffer.LowWater = math.NaN() },
	}
	for name, mod := range bad {
		c := ok
		mod(&c)
		if err := c.Validate(); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: Validate = %v, want ErrInvalidConfig", name, err)
		}
		if _, err := New(c); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: New = %v, want ErrInvalidConfig", name, err)
		}
	}
	d := Config{Endpoints: []string{"http://a:1", "http://b:1"}, BackoffMax: 20 * time.Millisecond}.withDefaults()
	if d.Timeout != DefaultTimeout || d.MaxAttempts != 4 || d.Buffer.LowWater != DefaultLowWater ||
		d.BackoffMin != 20*time.Millisecond || d.BackoffMax != 20*time.Millisecond {
		t.Fatalf("defaults: %+v", d)
	}
	if d := ok.withDefaults(); d.MaxAttempts != 3 || d.BackoffMin != DefaultBackoffMin || d.BackoffMax != DefaultBackoffMax {
		t.Fatalf("defaults for one endpoint: %+v", d)
	}
}

func TestUnbuffered(t *testing.T) {
	f := newFake(t, newBackend())
	c := newClient(t, Config{}, f.URL()+"/") // a trailing slash is fine
	ctx := t.Context()
	a, err := c.NextID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := c.NextIDs(ctx, 10_000) // crosses tick boundaries: several ranges
	if err != nil || len(ids) != 10_000 {
		t.Fatalf("NextIDs: %d IDs, %v", len(ids), err)
	}
	prev := a
	for i, id := range ids {
		if id <= prev || (i > 0 && id != prev+1) {
			t.Fatalf("ID %d is %d after %d", i, id, prev)
		}
		prev = id
	}
	if n := f.snow.Load(); n != 2 {
		t.Fatalf("%d requests, want 2", n)
	}
	if _, err := c.NextIDs(ctx, 0); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("NextIDs(0): %v", err)
	}
	if _, err := c.NextIDs(ctx, MaxCount+1); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("NextIDs(MaxCount+1): %v", err)
	}
	// Above the server's max count: the server's 400 comes back as is.
	_, err = c.NextIDs(ctx, 100_001)
	var ae *APIError
	if !errors.As(err, &ae) || ae.Status != 400 || ae.Code != "invalid_argument" || ae.Endpoint != f.URL() ||
		!errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "out of range") {
		t.Fatalf("NextIDs(100,001): %v", err)
	}

	// Segments: dense IDs, a tag with a stride, a tag that needs escaping.
	s1, err := c.NextSegment(ctx, "orders")
	if err != nil || s1 != 1001 {
		t.Fatalf("NextSegment = %d, %v; want 1001", s1, err)
	}
	segs, err := c.NextSegmentIDs(ctx, "orders", 1200)
	if err != nil || len(segs) != 1200 || segs[0] != 1002 || segs[1199] != 2201 {
		t.Fatalf("NextSegmentIDs = %d IDs (%v…), %v", len(segs), segs[:min(3, len(segs))], err)
	}
	odd, err := c.NextSegmentIDs(ctx, "odd", 3)
	if err != nil || !slices.Equal(odd, []int64{1, 3, 5}) {
		t.Fatalf("odd = %v, %v", odd, err)
	}
	if id, err := c.NextSegment(ctx, "a/b"); err != nil || id != 1 || *f.lastTag.Load() != "a/b" {
		t.Fatalf("tag a/b: %d, %v; server saw %q", id, err, *f.lastTag.Load())
	}
	_, err = c.NextSegment(ctx, "nope")
	if !errors.Is(err, ErrNotFound) || !errors.As(err, &ae) || ae.Status != 404 {
		t.Fatalf("unknown tag: %v", err)
	}
	if _, err := c.NextSegment(ctx, ""); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("empty tag: %v", err)
	}

	// The plain {"ids": …} form is understood too.
	f.plainIDs.Store(true)
	if ids, err := c.NextIDs(ctx, 5); err != nil || len(ids) != 5 || ids[4] != ids[0]+4 {
		t.Fatalf("plain IDs: %v, %v", ids, err)
	}
}

func TestDecode(t *testing.T) {
	f := newFake(t, newBackend())
	c := newClient(t, Config{}, f.URL())
	id := int64(249845384023638016 | 3<<12 | 2<<17 | 7)
	p, err := c.Decode(t.Context(), " "+strconv.FormatInt(id, 10)+"\n")
	if err != nil {
		t.Fatal(err)
	}
	want := Parts{ID: id, Time: testEpoch.Add(time.Duration(id>>22) * time.Millisecond), Tick: id >> 22,
		Datacenter: 2, Worker: 3, Sequence: 7}
	if !p.Time.Equal(want.Time) || p.ID != want.ID || p.Tick != want.Tick || p.Datacenter != 2 || p.Worker != 3 || p.Sequence != 7 {
		t.Fatalf("Decode = %+v, want %+v", p, want)
	}
	if _, err := c.Decode(t.Context(), "x/y?z"); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("Decode(bad): %v", err)
	}
	if _, err := c.Decode(t.Context(), " "); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("Decode(empty): %v", err)
	}
	if f.dec.Load() != 2 {
		t.Fatalf("%d decode requests, want 2", f.dec.Load())
	}
}

func TestFailoverFirstDown(t *testing.T) {
	for _, buffered := range []bool{false, true} {
		t.Run(fmt.Sprint("buffered=", buffered), func(t *testing.T) {
			good := newFake(t, newBackend())
			cfg := Config{}
			if buffered {
				cfg.Buffer = BufferConfig{Snowflake: 100, Segment: 100}
			}
			c := newClient(t, cfg, closedURL(t), good.URL())
			for i := range 500 {
				if _, err := c.NextID(t.Context()); err != nil {
					t.Fatalf("call %d: %v", i, err)
				}
				if _, err := c.NextSegment(t.Context(), "orders"); err != nil {
					t.Fatalf("call %d: %v", i, err)
				}
			}
			if _, err := c.Decode(t.Context(), "12345"); err != nil {
				t.Fatal(err)
			}
			// The dead endpoint cost one attempt; every request went to
			// the good one, which is preferred from then on.
			lo, hi := int64(1001), int64(1001)
			if buffered {
				lo, hi = 11, 15 // 500/100 + 1 refills each, plus Decode
			}
			if n := good.total.Load(); n < lo || n > hi {
				t.Fatalf("good endpoint got %d requests, want %d–%d", n, lo, hi)
			}
		})
	}
}

func TestFailoverServerKilledMidRun(t *testing.T) {
	for _, buffered := range []bool{false, true} {
		t.Run(fmt.Sprint("buffered=", buffered), func(t *testing.T) {
			be := newBackend()
			a, b := newFake(t, be), newFake(t, be)
			cfg := Config{Timeout: time.Second}
			if buffered {
				cfg.Buffer = BufferConfig{Snowflake: 50}
			}
			c := newClient(t, cfg, a.URL(), b.URL())
			var (
				stop  atomic.Bool
				calls atomic.Int64
				wg    sync.WaitGroup
				errs  = make(chan error, 8)
				seen  sync.Map
			)
			for range 8 {
				wg.Go(func() {
					for !stop.Load() {
						id, err := c.NextID(t.Context())
						if err != nil {
							errs <- err
							return
						}
						if _, dup := seen.LoadOrStore(id, true); dup {
							errs <- fmt.Errorf("duplicate %d", id)
							return
						}
						calls.Add(1)
					}
				})
			}
			waitFor(t, func() bool { return a.total.Load() >= 200 })
			if b.total.Load() != 0 {
				t.Fatalf("b got %d requests while a was up", b.total.Load())
			}
			a.srv.Close() // kill the preferred endpoint mid-run
			before := b.total.Load()
			waitFor(t, func() bool { return b.total.Load() >= before+200 })
			stop.Store(true)
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			t.Logf("%d calls; a answered %d requests, b %d", calls.Load(), a.total.Load(), b.total.Load())
		})
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out waiting")
		}
		time.Sleep(time.Millisecond)
	}
}

func Test4xxNotRetried(t *testing.T) {
	for _, status := range []int{400, 401, 403, 404, 409} {
		be := newBackend()
		a, b := newFake(t, be), newFake(t, be)
		a.status.Store(int64(status))
		c := newClient(t, Config{}, a.URL(), b.URL())
		_, err := c.NextID(t.Context())
		var ae *APIError
		if !errors.As(err, &ae) || ae.Status != status || ae.Endpoint != a.URL() || ae.Message != "told to fail" {
			t.Fatalf("status %d: %v", status, err)
		}
		if errors.Is(err, ErrUnavailable) {
			t.Fatalf("status %d: %v is ErrUnavailable", status, err)
		}
		if a.total.Load() != 1 || b.total.Load() != 0 {
			t.Fatalf("status %d: a got %d requests, b %d; want 1, 0", status, a.total.Load(), b.total.Load())
		}
	}
}

func Test5xxRetriedElsewhere(t *testing.T) {
	for _, status := range []int{503, 500, 502, 408, 429} {
		be := newBackend()
		a, b := newFake(t, be), newFake(t, be)
		a.status.Store(int64(status))
		c := newClient(t, Config{BackoffMin: time.Minute, BackoffMax: time.Minute}, a.URL(), b.URL())
		for range 10 {
			if _, err := c.NextID(t.Context()); err != nil {
				t.Fatalf("status %d: %v", status, err)
			}
		}
		// a is marked down for a minute: only the first call tried it.
		if a.total.Load() != 1 || b.total.Load() != 10 {
			t.Fatalf("status %d: a got %d requests, b %d; want 1, 10", status, a.total.Load(), b.total.Load())
		}
	}
}

func TestAllEndpointsFail(t *testing.T) {
	be := newBackend()
	a, b := newFake(t, be), newFake(t, be)
	a.status.Store(503)
	b.short.Store(true) // b answers garbage: retried too
	c := newClient(t, Config{MaxAttempts: 4}, a.URL(), b.URL())
	start := time.Now()
	_, err := c.NextID(t.Context())
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "0 IDs, asked for 1") {
		t.Fatalf("err = %v, want ErrUnavailable after b's bad answer", err)
	}
	if a.total.Load() != 2 || b.total.Load() != 2 {
		t.Fatalf("a got %d requests, b %d; want 2, 2", a.total.Load(), b.total.Load())
	}
	t.Logf("4 attempts in %v", time.Since(start))

	// The last failure is kept: a 503 APIError when a answered last.
	c2 := newClient(t, Config{MaxAttempts: 3}, a.URL())
	_, err = c2.NextSegment(t.Context(), "orders")
	var ae *APIError
	if !errors.Is(err, ErrUnavailable) || !errors.As(err, &ae) || ae.Status != 503 || ae.Code != "unavailable" {
		t.Fatalf("err = %v", err)
	}

	// A buffered client's caller gets the refill's error.
	c3 := newClient(t, Config{Buffer: BufferConfig{Snowflake: 100}}, a.URL())
	if _, err := c3.NextID(t.Context()); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("buffered: %v", err)
	}
	a.status.Store(0) // a recovers: the next call refills again
	if _, err := c3.NextID(t.Context()); err != nil {
		t.Fatalf("after recovery: %v", err)
	}
}

func TestContextDeadline(t *testing.T) {
	slow := newFake(t, newBackend())
	slow.delay.Store(int64(10 * time.Second))
	for _, buffered := range []bool{false, true} {
		cfg := Config{Timeout: 5 * time.Second}
		if buffered {
			cfg.Buffer.Snowflake = 100
		}
		c := newClient(t, cfg, slow.URL())
		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		start := time.Now()
		_, err := c.NextID(ctx)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 2*time.Second {
			t.Fatalf("buffered=%v: %v after %v; want DeadlineExceeded after 100ms", buffered, err, time.Since(start))
		}
	}

	// The per-attempt timeout moves on to the next endpoint.
	fast := newFake(t, newBackend())
	c := newClient(t, Config{Timeout: 100 * time.Millisecond}, slow.URL(), fast.URL())
	start := time.Now()
	if _, err := c.NextID(t.Context()); err != nil || time.Since(start) > 2*time.Second {
		t.Fatalf("%v after %v", err, time.Since(start))
	}

	// A canceled context ends the pause between rounds too.
	down := newClient(t, Config{MaxAttempts: 100, BackoffMin: time.Minute, BackoffMax: time.Minute}, closedURL(t))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	time.AfterFunc(100*time.Millisecond, cancel)
	start = time.Now()
	if _, err := down.NextID(ctx); !errors.Is(err, context.Canceled) || time.Since(start) > 2*time.Second {
		t.Fatalf("%v after %v", err, time.Since(start))
	}

	// A pause that would outlast the deadline is not taken: the call fails
	// at once, with the last failure, instead of waiting its deadline out.
	ctx, cancel = context.WithTimeout(t.Context(), 20*time.Second) // the pause is 30 s–1 min
	defer cancel()
	start = time.Now()
	_, err := down.NextID(ctx)
	if !errors.Is(err, ErrUnavailable) || errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "connect") ||
		time.Since(start) > 10*time.Second {
		t.Fatalf("%v after %v; want ErrUnavailable (connection refused) at once", err, time.Since(start))
	}
}

// TestRetryAfter: a server's Retry-After marks its endpoint down that long,
// stretches the pause between rounds (up to BackoffMax), and a call whose
// deadline ends before any endpoint is back fails at once — one request to
// each endpoint while they are not yet marked down, then one in all,
// ErrUnavailable with the last answer, not the deadline's error — while a
// call with time enough waits and gets its ID.
func TestRetryAfter(t *testing.T) {
	for _, date := range []bool{false, true} {
		ra := "3"
		if date { // to the second: 2.5–3.5 s from now
			ra = time.Now().Add(3500 * time.Millisecond).UTC().Format(http.TimeFormat)
		}
		be := newBackend()
		a, b := newFake(t, be), newFake(t, be)
		for _, f := range []*fake{a, b} {
			f.status.Store(503)
			f.retryAfter.Store(&ra)
		}
		c := newClient(t, Config{BackoffMin: 10 * time.Millisecond, BackoffMax: 10 * time.Second}, a.URL(), b.URL())
		for i, deadline := range []time.Duration{100 * time.Millisecond, 2 * time.Second} {
			ctx, cancel := context.WithTimeout(t.Context(), deadline)
			before := a.total.Load() + b.total.Load()
			_, err := c.NextID(ctx)
			cancel()
			var ae *APIError
			if !errors.Is(err, ErrUnavailable) || errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &ae) ||
				ae.Status != 503 || ae.RetryAfter < 2*time.Second || ae.RetryAfter > 3500*time.Millisecond {
				t.Fatalf("Retry-After %q, deadline %v: %v (%+v); want ErrUnavailable with the 503 and its Retry-After, at once", ra, deadline, err, ae)
			}
			if n, want := a.total.Load()+b.total.Load()-before, int64(2-i); n != want {
				t.Fatalf("Retry-After %q, deadline %v: %d requests, want %d (one to each endpoint, then one while both are marked down)", ra, deadline, n, want)
			}
		}
		// Long enough: the call pauses until the soonest is back, and one
		// request there succeeds. (Which one is soonest is not asked: an
		// HTTP date, to the second, gives both the same time.)
		n := int64(1)
		for _, f := range []*fake{a, b} {
			f.statusN.Store(n)
			f.status.Store(503)
			f.times.Lock()
			f.at = nil
			f.times.Unlock()
		}
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		if _, err := c.NextID(ctx); err != nil {
			t.Fatalf("Retry-After %q, deadline 10s: %v", ra, err)
		}
		cancel()
		var at []time.Time
		for _, f := range []*fake{a, b} {
			f.times.Lock()
			at = append(at, f.at...)
			f.times.Unlock()
		}
		slices.SortFunc(at, time.Time.Compare)
		if len(at) != 3 || at[2].Sub(at[1]) < 2*time.Second {
			t.Fatalf("Retry-After %q: requests at %v; want one to each endpoint, then one after the pause", ra, at)
		}
	}
}

// TestProbeWhileEveryEndpointIsDown: while every endpoint is marked down
// until after a call's deadline, each call asks one endpoint, the next in
// turn, and fails at once; a node back before its Retry-After is found
// within as many calls as there are endpoints, and then served from.
func TestProbeWhileEveryEndpointIsDown(t *testing.T) {
	be := newBackend()
	ra := "30"
	fakes := []*fake{newFake(t, be), newFake(t, be), newFake(t, be)}
	var urls []string
	for _, f := range fakes {
		f.status.Store(503)
		f.retryAfter.Store(&ra)
		urls = append(urls, f.URL())
	}
	c := newClient(t, Config{BackoffMin: 10 * time.Millisecond, BackoffMax: time.Minute}, urls...)
	call := func() error {
		ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
		defer cancel()
		_, err := c.NextID(ctx)
		return err
	}
	counts := func() (n []int64) {
		for _, f := range fakes {
			n = append(n, f.total.Load())
		}
		return n
	}
	if err := call(); !errors.Is(err, ErrUnavailable) || !slices.Equal(counts(), []int64{1, 1, 1}) {
		t.Fatalf("first call: %v, requests %v; want one to each", err, counts())
	}
	for k := range 6 { // two turns over the three, one request a call
		start := time.Now()
		err := call()
		if !errors.Is(err, ErrUnavailable) || errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 150*time.Millisecond {
			t.Fatalf("call %d: %v after %v; want ErrUnavailable at once", k, err, time.Since(start))
		}
		var sum int64
		for _, n := range counts() {
			sum += n
		}
		if sum != int64(4+k) {
			t.Fatalf("call %d: requests %v; want one more in all", k, counts())
		}
	}
	if got := counts(); !slices.Equal(got, []int64{3, 3, 3}) {
		t.Fatalf("requests %v after two turns; want each endpoint asked in turn", got)
	}
	// The second node is back 30 s early: found within three calls.
	fakes[1].status.Store(0)
	ok := -1
	for k := range 3 {
		if call() == nil {
			ok = k
			break
		}
	}
	if ok < 0 {
		t.Fatalf("a node back was not found in three calls: requests %v", counts())
	}
	before := fakes[1].total.Load()
	for range 5 {
		if err := call(); err != nil {
			t.Fatalf("after the node was found: %v", err)
		}
	}
	if n := fakes[1].total.Load() - before; n != 5 {
		t.Fatalf("%d of 5 calls went to the node that is back", n)
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		v    string
		want time.Duration
	}{
		{"", 0}, {"0", 0}, {"-3", 0}, {"7", 7 * time.Second}, {"1.5", 0}, {"soon", 0}, {"99999999999", 0},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second},
		{now.Add(-time.Second).Format(http.TimeFormat), 0},
		{now.Add(72 * time.Hour).Format(http.TimeFormat), 24 * time.Hour},
	} {
		if got := parseRetryAfter(c.v, now); got != c.want {
			t.Errorf("parseRetryAfter(%q) = %v, want %v", c.v, got, c.want)
		}
	}
}

func TestAuthHeader(t *testing.T) {
	f := newFake(t, newBackend())
	token := "s3cret-token-0123456789"
	f.token.Store(&token)
	c := newClient(t, Config{Token: token}, f.URL())
	if _, err := c.NextID(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := *f.lastAuth.Load(); got != "Bearer "+token {
		t.Fatalf("Authorization %q", got)
	}
	anon := newClient(t, Config{}, f.URL())
	_, err := anon.NextID(t.Context())
	if !errors.Is(err, ErrUnauthenticated) || *f.lastAuth.Load() != "" {
		t.Fatalf("without a token: %v (header %q)", err, *f.lastAuth.Load())
	}
	if f.total.Load() != 2 {
		t.Fatalf("%d requests: the 401 was retried", f.total.Load())
	}
}

func TestBufferRefillsInBackground(t *testing.T) {
	f := newFake(t, newBackend())
	const batch = 1000
	c := newClient(t, Config{Buffer: BufferConfig{Snowflake: batch, LowWater: 0.5}}, f.URL())
	ctx := t.Context()
	// The first call fills the buffer; using half of it (the low-water
	// mark) starts the next refill with no caller waiting for it.
	for range batch / 2 {
		if _, err := c.NextID(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n := f.snow.Load(); n != 1 {
		t.Fatalf("%d requests after %d IDs, want 1", n, batch/2)
	}
	if _, err := c.NextID(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return f.snow.Load() == 2 })
	time.Sleep(20 * time.Millisecond)
	if n := f.snow.Load(); n != 2 {
		t.Fatalf("%d requests, want 2: refills are not deduplicated", n)
	}

	// N calls make about N/batch requests.
	const N = 200_000
	last := int64(0)
	for range N {
		id, err := c.NextID(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if id <= last {
			t.Fatalf("ID %d after %d", id, last)
		}
		last = id
	}
	if n := f.snow.Load(); n < N/batch || n > N/batch+3 {
		t.Fatalf("%d requests for %d IDs in batches of %d, want about %d", n, N+batch/2+1, batch, N/batch)
	}

	// Small NextIDs come from the buffer, large ones are a request of
	// their own.
	before := f.snow.Load()
	small, err := c.NextIDs(ctx, batch/2)
	if err != nil || len(small) != batch/2 || small[0] <= last {
		t.Fatalf("NextIDs(%d): %d IDs, %v", batch/2, len(small), err)
	}
	for i := 1; i < len(small); i++ {
		if small[i] <= small[i-1] {
			t.Fatalf("NextIDs: %d after %d", small[i], small[i-1])
		}
	}
	if n := f.snow.Load() - before; n > 1 {
		t.Fatalf("NextIDs(%d) made %d requests", batch/2, n)
	}
	waitFor(t, func() bool { return c.flake.refillIdle() })
	before = f.snow.Load()
	if big, err := c.NextIDs(ctx, batch); err != nil || len(big) != batch {
		t.Fatalf("NextIDs(%d): %d IDs, %v", batch, len(big), err)
	}
	if n := f.snow.Load() - before; n != 1 {
		t.Fatalf("NextIDs(%d) made %d requests, want 1", batch, n)
	}
}

// A low-water refill that fails is tried again in the background, after
// the backoff or the server's Retry-After, while the buffer still holds IDs
// — not only once a caller finds it empty.
func TestFailedRefillIsRetried(t *testing.T) {
	f := newFake(t, newBackend())
	c := newClient(t, Config{MaxAttempts: 1, BackoffMin: 5 * time.Millisecond, BackoffMax: 20 * time.Millisecond,
		Buffer: BufferConfig{Snowflake: 100, LowWater: 0.5}}, f.URL())
	ctx := t.Context()
	if _, err := c.NextID(ctx); err != nil {
		t.Fatal(err)
	}
	// The next three requests fail; the 50th ID below starts a refill.
	f.status.Store(http.StatusServiceUnavailable)
	f.statusN.Store(3)
	for range 50 {
		if _, err := c.NextID(ctx); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, func() bool { return f.snow.Load() == 2 })
	waitFor(t, func() bool { return c.flake.refillIdle() })
	time.Sleep(50 * time.Millisecond)
	if n := f.total.Load(); n != 5 {
		t.Fatalf("%d requests, want 5: the first, three failed refills, one that succeeded", n)
	}
	// The buffer holds what the refill brought: 149 IDs without a request.
	for range 149 {
		if _, err := c.NextID(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n := f.total.Load(); n < 5 || n > 6 {
		t.Fatalf("%d requests after the buffer's 149 IDs, want 5 or 6 (the next low-water refill)", n)
	}

	// A server's Retry-After holds the retry back.
	g := newFake(t, newBackend())
	d := newClient(t, Config{MaxAttempts: 1, BackoffMin: time.Millisecond, BackoffMax: 5 * time.Millisecond,
		Buffer: BufferConfig{Snowflake: 100, LowWater: 0.5}}, g.URL())
	if _, err := d.NextID(ctx); err != nil {
		t.Fatal(err)
	}
	ra := "1"
	g.retryAfter.Store(&ra)
	g.status.Store(http.StatusServiceUnavailable)
	g.statusN.Store(1)
	for range 50 {
		if _, err := d.NextID(ctx); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, func() bool { return g.snow.Load() == 2 })
	g.times.Lock()
	at := slices.Clone(g.at)
	g.times.Unlock()
	if len(at) != 3 {
		t.Fatalf("%d requests, want 3", len(at))
	}
	if gap := at[2].Sub(at[1]); gap < 900*time.Millisecond {
		t.Fatalf("refill retried %v after a 503 with Retry-After: 1", gap)
	}

	// Close ends a retry that waits.
	others := goleak.IgnoreCurrent()
	h := newFake(t, newBackend())
	e, err := New(Config{Endpoints: []string{h.URL()}, MaxAttempts: 1, Buffer: BufferConfig{Snowflake: 100, LowWater: 0.5}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.NextID(ctx); err != nil {
		t.Fatal(err)
	}
	hour := "3600"
	h.retryAfter.Store(&hour)
	h.status.Store(http.StatusServiceUnavailable)
	for range 50 {
		if _, err := e.NextID(ctx); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, func() bool { return h.total.Load() == 2 && e.flake.refillIdle() })
	start := time.Now()
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Fatalf("Close took %v", el)
	}
	h.srv.Close()
	goleak.VerifyNone(t, others)
}

// refillIdle reports whether no refill is in flight (for tests).
func (b *buffer) refillIdle() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.refill == nil
}

func TestSegmentBuffers(t *testing.T) {
	f := newFake(t, newBackend())
	c := newClient(t, Config{Buffer: BufferConfig{Segment: 100}}, f.URL())
	ctx := t.Context()
	want := int64(1001)
	for range 1000 {
		id, err := c.NextSegment(ctx, "orders")
		if err != nil || id != want {
			t.Fatalf("NextSegment = %d, %v; want %d", id, err, want)
		}
		want++
	}
	ids, err := c.NextSegmentIDs(ctx, "orders", 50)
	if err != nil || len(ids) != 50 || ids[0] != want || ids[49] != want+49 {
		t.Fatalf("NextSegmentIDs: %v, %v", ids, err)
	}
	odd, err := c.NextSegmentIDs(ctx, "odd", 4)
	if err != nil || !slices.Equal(odd, []int64{1, 3, 5, 7}) {
		t.Fatalf("odd: %v, %v", odd, err)
	}
	if n := f.seg.Load(); n < 11 || n > 13 {
		t.Fatalf("%d segment requests for 1050 IDs in batches of 100", n)
	}
	// An unknown tag fails, and its buffer is forgotten.
	for range 3 {
		if _, err := c.NextSegment(ctx, "nope"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("unknown tag: %v", err)
		}
	}
	waitFor(t, func() bool { _, ok := c.tags.Load("nope"); return !ok })
}

func TestUniqueAcrossGoroutines(t *testing.T) {
	f := newFake(t, newBackend())
	c := newClient(t, Config{Buffer: BufferConfig{Snowflake: 10_000, Segment: 5_000}}, f.URL())
	const G, N = 64, 20_000
	results := make([][]int64, G)
	segs := make([][]int64, G)
	var wg sync.WaitGroup
	errs := make(chan error, G)
	for g := range G {
		wg.Go(func() {
			ids := make([]int64, 0, N)
			for i := range N {
				var err error
				switch {
				case i%1000 == 999:
					var more []int64
					more, err = c.NextIDs(t.Context(), 7)
					ids = append(ids, more...)
				case i%10 == 0:
					var id int64
					id, err = c.NextSegment(t.Context(), "orders")
					segs[g] = append(segs[g], id)
				default:
					var id int64
					id, err = c.NextID(t.Context())
					ids = append(ids, id)
				}
				if err != nil {
					errs <- err
					return
				}
			}
			results[g] = ids
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	check := func(name string, lists [][]int64) {
		var all []int64
		for g, ids := range lists {
			for i := 1; i < len(ids); i++ {
				if ids[i] <= ids[i-1] {
					t.Fatalf("%s: goroutine %d got %d after %d", name, g, ids[i], ids[i-1])
				}
			}
			all = append(all, ids...)
		}
		slices.Sort(all)
		for i := 1; i < len(all); i++ {
			if all[i] == all[i-1] {
				t.Fatalf("%s: %d handed out twice", name, all[i])
			}
		}
		t.Logf("%s: %d unique IDs", name, len(all))
	}
	check("snowflake", results)
	check("segment", segs)
	t.Logf("%d snowflake and %d segment requests", f.snow.Load(), f.seg.Load())
}

func TestCloseStopsRefills(t *testing.T) {
	f := newFake(t, newBackend())
	f.delay.Store(int64(time.Hour)) // every request hangs until canceled
	c, err := New(Config{Endpoints: []string{f.URL()}, Timeout: time.Minute,
		Buffer: BufferConfig{Snowflake: 100, Segment: 100}})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	wg.Go(func() { _, err := c.NextID(t.Context()); errs <- err })
	wg.Go(func() { _, err := c.NextSegment(t.Context(), "orders"); errs <- err })
	waitFor(t, func() bool { return f.total.Load() == 2 })
	start := time.Now()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("Close took %v", d)
	}
	for range 2 {
		if err := <-errs; !errors.Is(err, ErrClosed) {
			t.Fatalf("waiting caller: %v, want ErrClosed", err)
		}
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	for _, call := range []func() error{
		func() error { _, err := c.NextID(t.Context()); return err },
		func() error { _, err := c.NextIDs(t.Context(), 3); return err },
		func() error { _, err := c.NextSegment(t.Context(), "orders"); return err },
		func() error { _, err := c.NextSegmentIDs(t.Context(), "orders", 3); return err },
		func() error { _, err := c.Decode(t.Context(), "1"); return err },
	} {
		if err := call(); !errors.Is(err, ErrClosed) {
			t.Fatalf("after Close: %v", err)
		}
	}
	f.srv.Close()
	goleak.VerifyNone(t)
}

func TestBadAnswerParsing(t *testing.T) {
	cases := map[string]string{
		"too few":        `{"ranges":[{"first":"1","count":2,"stride":1}],"count":3}`,
		"too many":       `{"ranges":[{"first":"1","count":4,"stride":1}],"count":3}`,
		"zero count":     `{"ranges":[{"first":"1","count":0,"stride":1},{"first":"1","count":3,"stride":1}],"count":3}`,
		"negative":       `{"ranges":[{"first":"1","count":3,"stride":-1}],"count":3}`,
		"overflow":       `{"ranges":[{"first":"9223372036854775806","count":3,"stride":1}],"count":3}`,
		"not a number":   `{"ranges":[{"first":"x","count":3,"stride":1}],"count":3}`,
		"wrong tag":      `{"tag":"other","ranges":[{"first":"1","count":3,"stride":1}],"count":3}`,
		"not JSON":       `<html>`,
		"empty":          ``,
		"fractional id":  `{"ids":[1.5,2,3]}`,
		"huge stride":    `{"ranges":[{"first":"0","count":3,"stride":9223372036854775807}],"count":3}`,
		"negative count": `{"ranges":[{"first":"0","count":-3,"stride":1}],"count":3}`,
	}
	for name, body := range cases {
		if _, err := parseRanges(strings.NewReader(body), 3, "orders"); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	good := `{"tag":"orders","ranges":[{"first":"10","count":2,"stride":3},{"first":5,"count":"1"}],"count":3}`
	spans, err := parseRanges(strings.NewReader(good), 3, "orders")
	if err != nil || !slices.Equal(expand(nil, spans), []int64{10, 13, 5}) {
		t.Fatalf("good: %v, %v", spans, err)
	}
	ids, err := parseRanges(strings.NewReader(`{"ids":["7","8","10"]}`), 3, "")
	if err != nil || len(ids) != 2 || !slices.Equal(expand(nil, ids), []int64{7, 8, 10}) {
		t.Fatalf("ids: %v, %v", ids, err)
	}
	// Error bodies without the API's envelope still make an APIError.
	ae := readAPIError(502, strings.NewReader("<html>bad gateway</html>"), "http://x")
	if ae.Code != "internal" || ae.Message != "<html>bad gateway</html>" || !strings.Contains(ae.Error(), "502") {
		t.Fatalf("%+v", ae)
	}
	if ae := readAPIError(503, strings.NewReader(""), "http://x"); !errors.Is(ae, ErrUnavailable) || ae.Message != "Service Unavailable" {
		t.Fatalf("%+v", ae)
	}
}

func TestEndpointOrder(t *testing.T) {
	c := newClient(t, Config{}, "http://a:1", "http://b:1", "http://c:1", "http://d:1")
	tr := c.t
	names := func() string {
		var s []string
		for _, e := range tr.order(time.Now()) {
			s = append(s, e.base[7:8])
		}
		return strings.Join(s, "")
	}
	if got := names(); got != "abcd" {
		t.Fatal(got)
	}
	tr.preferred.Store(2)
	if got := names(); got != "cdab" {
		t.Fatal(got)
	}
	now := time.Now()
	tr.eps[3].downUntil = now.Add(time.Hour)
	tr.eps[2].downUntil = now.Add(time.Minute)
	if got := names(); got != "abcd" { // up ones from the preferred, then down ones soonest first
		t.Fatal(got)
	}
	tr.eps[2].downUntil = now.Add(2 * time.Hour)
	if got := names(); got != "abdc" {
		t.Fatal(got)
	}
}

// BenchmarkNextIDBuffered measures NextID served from the buffer, against a
// local fake server that hands out batches of 100,000.
func BenchmarkNextIDBuffered(b *testing.B) {
	f := newFake(b, newBackend())
	c := newClient(b, Config{Buffer: BufferConfig{Snowflake: 100_000}}, f.URL())
	ctx := context.Background()
	if _, err := c.NextID(ctx); err != nil {
		b.Fatal(err)
	}
	report := func(b *testing.B, start time.Time, requests int64) {
		b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "ids/s")
		b.ReportMetric(float64(b.N)/float64(max(1, f.snow.Load()-requests)), "ids/request")
	}
	b.Run("serial", func(b *testing.B) {
		start, requests := time.Now(), f.snow.Load()
		for b.Loop() {
			if _, err := c.NextID(ctx); err != nil {
				b.Fatal(err)
			}
		}
		report(b, start, requests)
	})
	b.Run("parallel", func(b *testing.B) {
		start, requests := time.Now(), f.snow.Load()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := c.NextID(ctx); err != nil {
					b.Error(err)
					return
				}
			}
		})
		report(b, start, requests)
	})
}

// BenchmarkNextSegmentBuffered measures NextSegment served from a tag's
// buffer (a map lookup and an atomic add).
func BenchmarkNextSegmentBuffered(b *testing.B) {
	f := newFake(b, newBackend(), func(f *fake) { f.step = 100_000 })
	c := newClient(b, Config{Buffer: BufferConfig{Segment: 100_000}}, f.URL())
	ctx := context.Background()
	start := time.Now()
	for b.Loop() {
		if _, err := c.NextSegment(ctx, "orders"); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "ids/s")
}
