package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flakeid/flakeid/server"
	"github.com/flakeid/flakeid/snowflake"
)

// cuttable is a proxy to a server that can be cut off: while down it
// answers 503 to everything.
type cuttable struct {
	down atomic.Bool
	hs   *httptest.Server
}

func newCuttable(t *testing.T, target string) *cuttable {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	c := &cuttable{}
	rp := httputil.NewSingleHostReverseProxy(u)
	c.hs = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c.down.Load() {
			http.Error(w, "cut off", http.StatusServiceUnavailable)
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(c.hs.Close)
	return c
}

// current is g's lease now (a renewal swaps it in the background).
func current(g *LocalGenerator) *localLease {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.cur
}

// decodeAll decodes ids of the default layout.
func decodeAll(t *testing.T, ids []int64) []snowflake.Parts {
	t.Helper()
	l := snowflake.DefaultLayout()
	out := make([]snowflake.Parts, len(ids))
	for i, id := range ids {
		p, err := l.Decode(snowflake.ID(id))
		if err != nil {
			t.Fatal(err)
		}
		out[i] = p
	}
	return out
}

// TestLocalGeneratorUnique: local generators on two servers, each called
// from several goroutines, beside the servers' own IDs: every ID unique,
// each goroutine's increasing, each generator on a worker id of its own,
// near the servers' clock.
func TestLocalGeneratorUnique(t *testing.T) {
	cl := newCluster(t, 2)
	c := newClient(t, Config{Buffer: BufferConfig{Snowflake: 1000}}, cl.urls()...)
	ctx := t.Context()
	var gens []*LocalGenerator
	for i := range 3 {
		g, err := c.NewLocalGenerator(ctx, "test-"+string(rune('a'+i)))
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		gens = append(gens, g)
	}
	var mu sync.Mutex
	var all []int64
	var wg sync.WaitGroup
	start := time.Now()
	for _, g := range gens {
		for range 3 {
			wg.Go(func() {
				ids := make([]int64, 0, 20000)
				for range 20000 {
					id, err := g.NextID(ctx)
					if err != nil {
						t.Error(err)
						return
					}
					if len(ids) > 0 && id <= ids[len(ids)-1] {
						t.Errorf("ID %d after %d", id, ids[len(ids)-1])
						return
					}
					ids = append(ids, id)
				}
				mu.Lock()
				all = append(all, ids...)
				mu.Unlock()
			})
		}
	}
	wg.Go(func() {
		for range 5000 {
			id, err := c.NextID(ctx)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			all = append(all, id)
			mu.Unlock()
		}
	})
	wg.Wait()
	if t.Failed() {
		return
	}
	seen := make(map[int64]bool, len(all))
	for _, id := range all {
		if seen[id] {
			t.Fatalf("ID %d issued twice", id)
		}
		seen[id] = true
	}
	workers := map[int64]bool{}
	for _, n := range cl.nodes {
		workers[n.Status().WorkerID] = true
	}
	for _, g := range gens {
		w := current(g).worker
		if workers[w] {
			t.Fatalf("a local generator on worker %d, which another holds", w)
		}
		workers[w] = true
	}
	for _, p := range decodeAll(t, all[:100]) {
		if p.Time.Before(start.Add(-time.Second)) || p.Time.After(time.Now().Add(time.Second)) {
			t.Fatalf("an ID of %v, made between %v and now", p.Time, start)
		}
	}
}

// TestLocalGeneratorFence: cut off from its server, a local generator
// issues up to the end of its reservation and no further; once it may
// issue no more, a call fails with ErrUnavailable when its context ends;
// when another endpoint answers, it goes on under a new lease there.
func TestLocalGeneratorFence(t *testing.T) {
	cl := newCluster(t, 2)
	a, b := newCuttable(t, cl.urls()[0]), newCuttable(t, cl.urls()[1])
	b.down.Store(true)
	c := newClient(t, Config{}, a.hs.URL, b.hs.URL)
	g, err := c.NewLocalGenerator(t.Context(), "")
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	first := current(g)
	a.down.Store(true)
	g.mu.Lock()
	end := g.cur.end
	g.mu.Unlock()
	var ids []int64
	for {
		ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
		id, err := g.NextID(ctx)
		cancel()
		if errors.Is(err, ErrUnavailable) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
		if len(ids)%1000 == 0 {
			time.Sleep(time.Millisecond)
		}
	}
	for _, p := range decodeAll(t, ids) {
		if p.Worker != first.worker || p.Tick >= end {
			t.Fatalf("cut off, an ID in tick %d of worker %d; the reservation ends at tick %d of worker %d", p.Tick, p.Worker, end, first.worker)
		}
	}
	if len(ids) == 0 {
		t.Fatal("no ID on the reservation")
	}
	// The other endpoint comes back: a new lease there.
	b.down.Store(false)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	id, err := g.NextID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if id <= ids[len(ids)-1] && decodeAll(t, []int64{id})[0].Worker == first.worker {
		t.Fatalf("after the failover, ID %d, not after %d of the same worker", id, ids[len(ids)-1])
	}
	g.mu.Lock()
	now := g.cur
	g.mu.Unlock()
	if now.ep.base != b.hs.URL {
		t.Fatalf("the new lease is from %s, not %s", now.ep.base, b.hs.URL)
	}
}

// TestLocalGeneratorRefused: a masking server refuses local generation,
// a client closed has none, and Close releases the lease and ends NextID.
func TestLocalGeneratorRefused(t *testing.T) {
	masked := newClusterWith(t, 1, func(c *server.Config) {
		c.Mask = server.MaskConfig{Keys: []server.MaskKey{{ID: 1, Key: "000102030405060708090a0b0c0d0e0f"}}, Snowflake: true}
	})
	c := newClient(t, Config{}, masked.urls()...)
	_, err := c.NewLocalGenerator(t.Context(), "")
	if ae, ok := errors.AsType[*APIError](err); !ok || ae.Code != "failed_precondition" {
		t.Fatalf("a masking server: %v", err)
	}

	cl := newCluster(t, 1)
	c = newClient(t, Config{}, cl.urls()...)
	if _, err := c.NewLocalGenerator(t.Context(), "bad owner"); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("a bad owner: %v", err)
	}
	g, err := c.NewLocalGenerator(t.Context(), "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.NextID(t.Context()); err != nil {
		t.Fatal(err)
	}
	worker := current(g).worker
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := g.NextID(t.Context()); !errors.Is(err, ErrClosed) {
		t.Fatalf("NextID after Close: %v", err)
	}
	infos, err := cl.coord.List(t.Context(), 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range infos {
		if in.Worker == worker && in.Held(time.Now()) {
			t.Fatalf("worker %d held after Close", worker)
		}
	}
	_ = c.Close()
	if _, err := c.NewLocalGenerator(t.Context(), ""); !errors.Is(err, ErrClosed) {
		t.Fatalf("from a closed client: %v", err)
	}
}

// BenchmarkLocalGenerator measures NextID of a local generator (the
// default layout: at most 4,096 IDs per millisecond per worker id), beside
// snowflake.Generator's NextID in the same run, the in-process ceiling.
func BenchmarkLocalGenerator(b *testing.B) {
	cl := newCluster(b, 1)
	c := newClient(b, Config{}, cl.urls()...)
	g, err := c.NewLocalGenerator(b.Context(), "bench")
	if err != nil {
		b.Fatal(err)
	}
	defer g.Close()
	ctx := context.Background()
	sg, err := snowflake.New(snowflake.Settings{WorkerID: 31})
	if err != nil {
		b.Fatal(err)
	}
	ids := func(b *testing.B, start time.Time) {
		b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "ids/s")
	}
	b.Run("local/serial", func(b *testing.B) {
		start := time.Now()
		for b.Loop() {
			if _, err := g.NextID(ctx); err != nil {
				b.Fatal(err)
			}
		}
		ids(b, start)
	})
	b.Run("local/parallel", func(b *testing.B) {
		start := time.Now()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := g.NextID(ctx); err != nil {
					b.Error(err)
					return
				}
			}
		})
		ids(b, start)
	})
	b.Run("snowflake/serial", func(b *testing.B) {
		start := time.Now()
		for b.Loop() {
			if _, err := sg.NextID(); err != nil {
				b.Fatal(err)
			}
		}
		ids(b, start)
	})
}

// TestLocalGeneratorAnswerReadLate: the server reads its clock (now_us)
// when the request arrives; its answer comes 1.5 s later, as to a process
// paused before it read it. The lease's 1 s of ticks has run out by then:
// the generator must issue nothing on it — its clock starts at the
// request's sending, not at the answer's arrival — and takes a new lease.
func TestLocalGeneratorAnswerReadLate(t *testing.T) {
	const t0 = 1_000_000 // the server's tick at the first request
	lease := func(name string, worker, first, end int64) string {
		return fmt.Sprintf(`{"lease":%q,"datacenter":1,"worker":%d,"layout":{"time_bits":41,"datacenter_bits":5,"worker_bits":5,"sequence_bits":12,"time_unit_us":1000,"name":"t"},`+
			`"first_tick":%d,"end_tick":%d,"now_us":%d,"renew_every_ms":50,"ttl_ms":1000}`, name, worker, first, end, first*1000)
	}
	var acquired atomic.Int32
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Method == http.MethodPost && r.URL.Path == "/v1/leases":
			if acquired.Add(1) == 1 {
				time.Sleep(1500 * time.Millisecond)
				fmt.Fprint(w, lease(strings.Repeat("a", 32), 3, t0, t0+1000))
				return
			}
			fmt.Fprint(w, lease(strings.Repeat("b", 32), 4, t0+3000, t0+100_000))
		case r.Method == http.MethodPost:
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"error":{"code":"not_found","message":"closed: not renewed within its TTL"}}`)
		default:
			fmt.Fprint(w, `{"released":true}`)
		}
	}))
	defer hs.Close()
	c := newClient(t, Config{Timeout: 5 * time.Second}, hs.URL)
	g, err := c.NewLocalGenerator(t.Context(), "late")
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	id, err := g.NextID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	l := snowflake.Layout{TimeBits: 41, DatacenterBits: 5, WorkerBits: 5, SequenceBits: 12, TimeUnit: time.Millisecond}
	if p, err := l.Decode(snowflake.ID(id)); err != nil || p.Worker != 4 || p.Tick < t0+3000 {
		t.Fatalf("first ID %d (%+v, %v): want one of the new lease (worker 4, tick %d on), none on the lease whose reservation had run out", id, p, err, t0+3000)
	}
}
