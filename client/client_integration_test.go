// End-to-end tests of the client against real servers (package server over a
// node.Node on a bbolt coordinator and a segment.Allocator on an in-memory
// store), served by httptest.

package client

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flakeid/flakeid/backend/bolt"
	"github.com/flakeid/flakeid/node"
	"github.com/flakeid/flakeid/segment"
	"github.com/flakeid/flakeid/segment/segmenttest"
	"github.com/flakeid/flakeid/server"
	"github.com/flakeid/flakeid/snowflake"
	"github.com/flakeid/flakeid/worker"
	"github.com/flakeid/flakeid/worker/workertest"
)

const integrationToken = "integration-token-0123456789"

// cluster is a few real servers sharing one worker-id coordinator (so each
// holds its own worker id) and one segment store (so their segments never
// overlap), as a deployment would.
type cluster struct {
	t     testing.TB
	coord *bolt.Workers
	store *segmenttest.Memory
	cfg   server.Config
	nodes []*node.Node
	https []*httptest.Server
	dc    int64 // the datacenter of the servers start runs
}

func newCluster(t testing.TB, servers int, tokens ...server.Token) *cluster {
	t.Helper()
	return newClusterWith(t, servers, func(c *server.Config) { c.Tokens = tokens })
}

// newClusterWith is newCluster with the servers' config changed by mutate.
func newClusterWith(t testing.TB, servers int, mutate func(*server.Config)) *cluster {
	t.Helper()
	coord, err := bolt.OpenWorkers(t.Context(), &url.URL{Scheme: "file", Path: filepath.Join(t.TempDir(), "workers.db")})
	if err != nil {
		t.Fatal(err)
	}
	store := segmenttest.NewMemory()
	if err := store.Create(t.Context(), segment.Tag{Name: "orders", Step: 1000}); err != nil {
		t.Fatal(err)
	}
	cfg := server.DefaultConfig()
	mutate(&cfg)
	cl := &cluster{t: t, coord: coord, store: store, cfg: cfg}
	for range servers {
		cl.start()
	}
	return cl
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// start runs one more server and returns its URL.
func (cl *cluster) start() string {
	t := cl.t
	t.Helper()
	n, err := node.Start(t.Context(), node.Config{Coordinator: cl.coord, Logger: quietLogger(),
		Settings: snowflake.Settings{DatacenterID: cl.dc}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Close() })
	alloc, err := segment.New(segment.Config{Store: cl.store, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = alloc.Close() })
	srv, err := server.New(server.Options{Config: cl.cfg, Node: n, Segments: alloc, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	cl.nodes = append(cl.nodes, n)
	cl.https = append(cl.https, hs)
	return hs.URL
}

func (cl *cluster) urls() []string {
	var u []string
	for _, hs := range cl.https {
		u = append(u, hs.URL)
	}
	return u
}

func TestIntegrationEndToEnd(t *testing.T) {
	cl := newCluster(t, 1)
	for _, buffered := range []bool{false, true} {
		t.Run("buffered="+strconv.FormatBool(buffered), func(t *testing.T) {
			cfg := Config{}
			if buffered {
				cfg.Buffer = BufferConfig{Snowflake: 1000, Segment: 100}
			}
			c := newClient(t, cfg, cl.urls()...)
			ctx := t.Context()
			before := time.Now()

			// Snowflake: increasing, unique, and decodable to this server's
			// worker id and to about now.
			var ids []int64
			for range 3000 {
				id, err := c.NextID(ctx)
				if err != nil {
					t.Fatal(err)
				}
				ids = append(ids, id)
			}
			more, err := c.NextIDs(ctx, 5000)
			if err != nil || len(more) != 5000 {
				t.Fatalf("NextIDs: %d, %v", len(more), err)
			}
			ids = append(ids, more...)
			for i := 1; i < len(ids); i++ {
				if ids[i] <= ids[i-1] {
					t.Fatalf("ID %d (%d) not after %d", i, ids[i], ids[i-1])
				}
			}
			st := cl.nodes[0].Status()
			p, err := c.Decode(ctx, strconv.FormatInt(ids[0], 10))
			if err != nil {
				t.Fatal(err)
			}
			if p.ID != ids[0] || p.Worker != st.WorkerID || p.Datacenter != st.DatacenterID ||
				p.Time.Before(before.Add(-2*time.Second)) || p.Time.After(time.Now().Add(time.Second)) {
				t.Fatalf("Decode(%d) = %+v; node status %+v, asked at %v", ids[0], p, st, before)
			}
			if _, err := c.Decode(ctx, "not-an-id"); !errors.Is(err, ErrInvalidArgument) {
				t.Fatalf("Decode(bad): %v", err)
			}

			// Segment: dense and increasing from one server.
			segs, err := c.NextSegmentIDs(ctx, "orders", 30)
			if err != nil {
				t.Fatal(err)
			}
			for range 300 {
				id, err := c.NextSegment(ctx, "orders")
				if err != nil {
					t.Fatal(err)
				}
				segs = append(segs, id)
			}
			for i := 1; i < len(segs); i++ {
				if segs[i] <= segs[i-1] {
					t.Fatalf("segment ID %d (%d) not after %d", i, segs[i], segs[i-1])
				}
			}
			if _, err := c.NextSegment(ctx, "no-such-tag"); !errors.Is(err, ErrNotFound) {
				t.Fatalf("unknown tag: %v", err)
			}
			if _, err := c.NextSegment(ctx, "bad tag!"); !errors.Is(err, ErrInvalidArgument) {
				t.Fatalf("invalid tag: %v", err)
			}
			if _, err := c.NextIDs(ctx, cl.cfg.MaxCount+1); !errors.Is(err, ErrInvalidArgument) {
				t.Fatalf("count above the server's max: %v", err)
			}
		})
	}
}

func TestIntegrationAuth(t *testing.T) {
	cl := newCluster(t, 1, server.Token{Token: integrationToken, Name: "test", Snowflake: true, Tags: []string{"orders"}})
	anon := newClient(t, Config{}, cl.urls()...)
	if _, err := anon.NextID(t.Context()); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("without a token: %v", err)
	}
	c := newClient(t, Config{Token: integrationToken, Buffer: BufferConfig{Snowflake: 100}}, cl.urls()...)
	if _, err := c.NextID(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := c.NextSegment(t.Context(), "orders"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.NextSegment(t.Context(), "other"); !errors.Is(err, ErrPermissionDenied) {
		t.Fatalf("a tag the token may not use: %v", err)
	}
}

func TestIntegrationFailover(t *testing.T) {
	for _, buffered := range []bool{false, true} {
		t.Run("buffered="+strconv.FormatBool(buffered), func(t *testing.T) {
			cl := newCluster(t, 2)
			if a, b := cl.nodes[0].Status(), cl.nodes[1].Status(); a.WorkerID == b.WorkerID {
				t.Fatalf("both servers hold worker %d", a.WorkerID)
			}
			cfg := Config{Timeout: time.Second}
			if buffered {
				cfg.Buffer = BufferConfig{Snowflake: 200, Segment: 50}
			}
			// The first endpoint is a dead one; then the two servers.
			c := newClient(t, cfg, append([]string{closedURL(t)}, cl.urls()...)...)
			var (
				mu        sync.Mutex
				flakes    []int64
				segs      []int64
				calls     atomic.Int64
				stop      atomic.Bool
				wg        sync.WaitGroup
				firstErr  atomic.Pointer[error]
				recordErr = func(err error) { firstErr.CompareAndSwap(nil, &err); stop.Store(true) }
			)
			for range 8 {
				wg.Go(func() {
					var f, s []int64
					for !stop.Load() {
						id, err := c.NextID(t.Context())
						if err != nil {
							recordErr(err)
							break
						}
						f = append(f, id)
						sid, err := c.NextSegment(t.Context(), "orders")
						if err != nil {
							recordErr(err)
							break
						}
						s = append(s, sid)
						calls.Add(1)
					}
					mu.Lock()
					flakes, segs = append(flakes, f...), append(segs, s...)
					mu.Unlock()
				})
			}
			waitFor(t, func() bool { return calls.Load() >= 2000 || stop.Load() })
			cl.https[0].Close() // kill the server the client was using
			before := calls.Load()
			waitFor(t, func() bool { return calls.Load() >= before+2000 || stop.Load() })
			stop.Store(true)
			wg.Wait()
			if err := firstErr.Load(); err != nil {
				t.Fatal(*err)
			}
			for name, ids := range map[string][]int64{"snowflake": flakes, "segment": segs} {
				slices.Sort(ids)
				for i := 1; i < len(ids); i++ {
					if ids[i] == ids[i-1] {
						t.Fatalf("%s ID %d handed out twice", name, ids[i])
					}
				}
				t.Logf("%s: %d unique IDs", name, len(ids))
			}
		})
	}
}

// TestIntegrationOverlapRefused: two real servers that each lease from a
// file of their own (flakeid serve's default) both hold worker 0 of
// datacenter 0 and would issue the same IDs behind one load balancer. A
// client given both refuses them with ErrOverlap naming both, and keeps
// refusing; given a server of each on another datacenter, it uses both.
func TestIntegrationOverlapRefused(t *testing.T) {
	for _, buffered := range []bool{false, true} {
		t.Run("buffered="+strconv.FormatBool(buffered), func(t *testing.T) {
			a, b := newCluster(t, 1), newCluster(t, 1)
			if sa, sb := a.nodes[0].Status(), b.nodes[0].Status(); sa.DatacenterID != sb.DatacenterID || sa.WorkerID != sb.WorkerID {
				t.Fatalf("the two servers hold %d/%d and %d/%d, want the same pair", sa.DatacenterID, sa.WorkerID, sb.DatacenterID, sb.WorkerID)
			}
			cfg := Config{}
			if buffered {
				cfg.Buffer = BufferConfig{Snowflake: 1000}
			}
			c := newClient(t, cfg, a.urls()[0], b.urls()[0])
			for range 2 {
				_, err := c.NextID(t.Context())
				if !errors.Is(err, ErrOverlap) {
					t.Fatalf("NextID from two servers on one worker id: %v, want ErrOverlap", err)
				}
				for _, want := range []string{a.urls()[0], b.urls()[0], "datacenter 0, worker 0", "share no coordinator"} {
					if !strings.Contains(err.Error(), want) {
						t.Fatalf("%q does not say %q", err, want)
					}
				}
			}
			if _, err := c.NextText(t.Context()); !errors.Is(err, ErrOverlap) {
				t.Fatalf("NextText: %v, want ErrOverlap", err)
			}
		})
	}
	t.Run("distinct datacenters", func(t *testing.T) {
		one := func(dc int64) string {
			cl := newClusterWith(t, 0, func(*server.Config) {})
			cl.dc = dc
			return cl.start()
		}
		c := newClient(t, Config{}, one(1), one(2))
		for range 100 {
			if _, err := c.NextID(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// TestIntegrationUUIDsAndBounds: NextUUIDs against a real server gives
// UUID-shaped texts that Decode reads back (form, UUID, prefix) to IDs in
// issue order; Bounds holds the IDs just issued; bad arguments are refused
// before a request.
func TestIntegrationUUIDsAndBounds(t *testing.T) {
	cl := newClusterWith(t, 1, func(c *server.Config) { c.TypeIDPrefix = "order" })
	c := newClient(t, Config{}, cl.urls()...)
	ctx := t.Context()
	var last int64
	for _, tc := range []struct{ format, prefix, want string }{
		{"uuid7", "", ""}, {"typeid", "", "order"}, {"typeid", "user", "user"}, {"ulid", "", ""},
	} {
		texts, err := c.NextUUIDs(ctx, 5, tc.format, tc.prefix)
		if err != nil || len(texts) != 5 || !slices.IsSorted(texts) {
			t.Fatalf("NextUUIDs(%s, %q) = %v, %v", tc.format, tc.prefix, texts, err)
		}
		for _, text := range texts {
			p, err := c.Decode(ctx, text)
			if err != nil || p.Form != tc.format || p.Prefix != tc.want || p.UUID == "" || p.ID <= last {
				t.Fatalf("Decode(%q) = %+v, %v (last ID %d)", text, p, err, last)
			}
			last = p.ID
		}
	}
	b, err := c.Bounds(ctx, "-1m", "+1m")
	if err != nil || last < b.Min || last > b.Max || b.Note != "" || b.From.IsZero() {
		t.Fatalf("Bounds(-1m, +1m) = %+v, %v; want it to hold %d", b, err, last)
	}
	if _, err := c.Bounds(ctx, "+1m", "-1m"); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("a reversed window: %v", err)
	}
	for _, tc := range [][2]string{{"uuid4", ""}, {"ulid", "order"}, {"typeid", "Order"}} {
		if _, err := c.NextUUIDs(ctx, 1, tc[0], tc[1]); !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("NextUUIDs(%q, %q): %v, want ErrInvalidArgument", tc[0], tc[1], err)
		}
	}
}

// TestIntegrationFailsFastDuringQuarantine: after the coordinator lost its
// state, every node refuses until the quarantine's floor and says when, in
// Retry-After; a caller whose deadline ends sooner gets ErrUnavailable at
// once — one request to each server, not its deadline's error — and a caller
// who can wait gets an ID from the first node back.
func TestIntegrationFailsFastDuringQuarantine(t *testing.T) {
	m := workertest.NewMemory(nil)
	lease := worker.Config{TTL: time.Second, RenewEvery: 100 * time.Millisecond, ReserveAhead: 200 * time.Millisecond,
		Quarantine: 3 * time.Second}
	var urls []string
	for range 2 {
		n, err := node.Start(t.Context(), node.Config{Coordinator: m.Client(), Lease: lease, Logger: quietLogger()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = n.Close() })
		srv, err := server.New(server.Options{Config: server.DefaultConfig(), Node: n, Logger: quietLogger()})
		if err != nil {
			t.Fatal(err)
		}
		hs := httptest.NewServer(srv.Handler())
		t.Cleanup(hs.Close)
		urls = append(urls, hs.URL)
	}
	c := newClient(t, Config{BackoffMin: 10 * time.Millisecond, BackoffMax: 5 * time.Second}, urls...)
	if _, err := c.NextID(t.Context()); err != nil {
		t.Fatal(err)
	}
	m.Wipe()
	// Within a renewal the reset shows, within the reservation after it the
	// nodes stop: then each refusal names the floor.
	deadline := time.Now().Add(3 * time.Second)
	var ae *APIError
	for {
		ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
		_, err := c.NextID(ctx)
		cancel()
		if err != nil {
			if !errors.As(err, &ae) || ae.Status != 503 || errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("%v: want the servers' 503, not the deadline's error", err)
			}
			if ae.RetryAfter >= 2*time.Second { // the node's own estimate: the default is 1 s
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no refusal with Retry-After ≥ 2s in 3 s after the wipe (last: %v)", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if ae.RetryAfter > lease.Quarantine+time.Second {
		t.Fatalf("Retry-After %v, more than the quarantine %v", ae.RetryAfter, lease.Quarantine)
	}
	// A caller who can wait: the pause runs to the soonest node's floor.
	ctx, cancel := context.WithTimeout(t.Context(), lease.Quarantine+5*time.Second)
	defer cancel()
	if _, err := c.NextID(ctx); err != nil {
		t.Fatalf("a caller with %v to wait: %v", lease.Quarantine+5*time.Second, err)
	}
}
