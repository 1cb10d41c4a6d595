package etcd

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/flakeid/flakeid/internal/faultnet"
	"github.com/flakeid/flakeid/internal/testenv"
	"github.com/flakeid/flakeid/worker"
	"github.com/flakeid/flakeid/worker/workertest"
)

// testTTL is the lease TTL of the tests: etcd's minimum with the default
// election settings (heartbeat 100ms, election timeout 1s → 1.5s, rounded up).
const testTTL = 2 * time.Second

// testClient is a quiet client of the etcd at addr, closed when the test ends.
func testClient(t testing.TB, addr string) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{addr}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatalf("etcd client of %s: %v", addr, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// requireMinTTL checks that the server grants leases of testTTL as asked:
// a server with a longer minimum would make the suite's expiry timings wrong.
func requireMinTTL(t *testing.T, c *clientv3.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	g, err := c.Grant(ctx, ttlSeconds(testTTL))
	if err != nil {
		t.Fatalf("granting a lease: %v", err)
	}
	defer c.Revoke(ctx, g.ID)
	if want := ttlSeconds(testTTL); g.TTL != want {
		t.Fatalf("etcd granted a %ds lease for %ds: its minimum TTL is above the tests' %v (election timeout raised?)", g.TTL, want, testTTL)
	}
}

// testPrefix is a fresh key prefix on the etcd at addr, deleted when the
// test ends.
func testPrefix(t testing.TB, addr string) string {
	t.Helper()
	var b [8]byte
	_, _ = rand.Read(b[:])
	prefix := "/flakeid-test/" + hex.EncodeToString(b[:]) + "/workers"
	admin := testClient(t, addr)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := admin.Delete(ctx, prefix+"/", clientv3.WithPrefix()); err != nil {
			t.Errorf("deleting %s/: %v", prefix, err)
		}
	})
	return prefix
}

// connector makes the clients of one test. Its clients use the shared etcd,
// unless the test asks for a faulty one first: then every client of the test
// uses a private etcd server that the fault pauses.
type connector struct {
	shared, prefix string

	mu        sync.Mutex
	endpoint  string // where Connect points
	connected bool   // Connect was called
	faulty    bool   // ConnectFaulty was called
}

func (c *connector) Connect(t *testing.T) worker.Coordinator {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.connected = true
	return New(testClient(t, c.endpoint), c.prefix)
}

func (c *connector) ConnectFaulty(t *testing.T) (worker.Coordinator, workertest.Fault) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.connected || c.faulty {
		// The fault pauses a private server: clients made before it would
		// be on another etcd and could never see the faulty client's ids.
		t.Fatal("etcd test connector: ConnectFaulty must be the first client of a test, and the only faulty one")
	}
	c.faulty = true
	faulty, healthy, fault := faultyServer(t, c.shared)
	c.endpoint = healthy
	return New(testClient(t, faulty), c.prefix), fault
}

func TestWorkersConformance(t *testing.T) {
	addr := testenv.Etcd().Require(t)
	requireMinTTL(t, testClient(t, addr))
	workertest.Run(t, workertest.Harness{
		Open: func(t *testing.T) workertest.Connector {
			return &connector{shared: addr, prefix: testPrefix(t, addr), endpoint: addr}
		},
		TTL: testTTL,
	})
}

func BenchmarkWorkers(b *testing.B) {
	addr := testenv.Etcd().Require(b)
	prefix := testPrefix(b, addr)
	workertest.Benchmark(b, func(b *testing.B) worker.Coordinator { return New(testClient(b, addr), prefix) })
}

// proxied is a coordinator of prefix on the etcd at addr, reached through
// a faultnet proxy that the test can cut; the proxy closes when the test
// ends.
func proxied(t *testing.T, addr, prefix string) (*Workers, *faultnet.Proxy) {
	t.Helper()
	proxy, err := faultnet.Listen(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	return New(testClient(t, proxy.Addr()), prefix), proxy
}

// TestPartitionLosesLeaseBeforeTakeover cuts a holder off the shared etcd
// with a network partition (the server runs on and expires the lease): the
// holder must give its lease up before another node can take the id, and
// its requests held in the partition must change nothing when they arrive.
func TestPartitionLosesLeaseBeforeTakeover(t *testing.T) {
	addr := testenv.Etcd().Require(t)
	prefix := testPrefix(t, addr)
	faulty, proxy := proxied(t, addr, prefix)
	workertest.Takeover{
		Faulty: faulty, Fault: proxy, Healthy: New(testClient(t, addr), prefix),
		TTL: testTTL, Partition: true, Within: 3 * testTTL,
	}.Run(t)
}

// TestLateWritesAreFenced holds a former holder's guarded write and
// keep-alive in a partition until another node took the id over: when they
// arrive they must fail with ErrNotHeld and leave the new holder's slot
// alone.
func TestLateWritesAreFenced(t *testing.T) {
	addr := testenv.Etcd().Require(t)
	prefix := testPrefix(t, addr)
	faulty, proxy := proxied(t, addr, prefix)
	healthy := New(testClient(t, addr), prefix)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	req := worker.Request{Workers: 1, Owner: "old", TTL: testTTL, Reserve: time.UnixMilli(1_000_000)}
	old, err := faulty.Acquire(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	proxy.Cut()
	defer proxy.Heal()
	oc := old.(*claim)
	// A second handle on the same claim, so that both requests are held at
	// once (a claim serialises its own calls).
	twin := &claim{w: oc.w, dc: oc.dc, id: oc.id, owner: oc.owner, lease: oc.lease, ttl: oc.ttl, highMs: oc.highMs, highRev: oc.highRev}
	late := time.UnixMilli(9_000_000)
	held := make(chan error, 2)
	go func() { held <- oc.Renew(ctx, testTTL, late) }()
	go func() {
		// The guarded transaction alone, as if its keep-alive had got
		// through just before the partition.
		twin.mu.Lock()
		defer twin.mu.Unlock()
		held <- twin.guarded(ctx, "renewing", late)
	}()

	req.Owner, req.Reserve = "new", time.UnixMilli(2_000_000)
	var cl worker.Claim
	for deadline := time.Now().Add(3 * testTTL); cl == nil; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the id did not become free within %v", 3*testTTL)
		}
		if cl, err = healthy.Acquire(ctx, req); err != nil && !errors.Is(err, worker.ErrExhausted) {
			t.Fatal(err)
		}
	}
	if !cl.Previous().Equal(time.UnixMilli(1_000_000)) {
		t.Fatalf("new holder's Previous = %v, want the old reservation", cl.Previous())
	}
	proxy.Heal()
	for range 2 {
		if err := <-held; !errors.Is(err, worker.ErrNotHeld) {
			t.Fatalf("a held write of the old holder, arriving late: %v, want ErrNotHeld", err)
		}
	}
	infos, err := healthy.List(ctx, 0)
	if err != nil || len(infos) != 1 || infos[0].Holder != "new" || !infos[0].HighWater.Equal(time.UnixMilli(2_000_000)) {
		t.Fatalf("after the late writes List = %+v, %v; want held by new with high-water %v", infos, err, time.UnixMilli(2_000_000))
	}
	if err := old.Release(ctx, late); !errors.Is(err, worker.ErrNotHeld) {
		t.Fatalf("old holder's Release: %v, want ErrNotHeld", err)
	}
}

// TestUnavailable: a coordinator that cannot reach etcd fails with
// ErrUnavailable and the context's error.
func TestUnavailable(t *testing.T) {
	addr := testenv.Etcd().Require(t)
	w, proxy := proxied(t, addr, testPrefix(t, addr))
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	cl, err := w.Acquire(ctx, worker.Request{Workers: 1, Owner: "o", TTL: testTTL, Reserve: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	proxy.Cut()
	defer proxy.Heal()
	check := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, worker.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s through a partition: %v, want ErrUnavailable and the deadline", what, err)
		}
	}
	short := func() context.Context {
		ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
		t.Cleanup(cancel)
		return ctx
	}
	_, err = w.Acquire(short(), worker.Request{Workers: 2, Owner: "p", TTL: testTTL, Reserve: time.Now()})
	check("Acquire", err)
	_, err = w.List(short(), 0)
	check("List", err)
	check("Renew", cl.Renew(short(), testTTL, time.Now()))
	check("Release", cl.Release(short(), time.Now()))

	// The requests that timed out may still be applied when the partition
	// heals (the Release in particular): an unavailable coordinator's
	// failure says nothing about whether a write happened.
	proxy.Heal()
	if err := cl.Release(ctx, time.Now()); err != nil && !errors.Is(err, worker.ErrNotHeld) {
		t.Fatalf("Release after the heal: %v", err)
	}
	if infos, err := w.List(ctx, 0); err != nil || len(infos) != 1 || infos[0].Held(time.Now()) {
		t.Fatalf("after the Release List = %+v, %v; want worker 0 free", infos, err)
	}
}

func TestDial(t *testing.T) {
	addr := testenv.Etcd().Require(t)
	prefix := testPrefix(t, addr)
	w, err := Dial(t.Context(), []string{addr}, prefix+"/")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if w.Prefix() != prefix {
		t.Fatalf("Prefix = %q, want %q", w.Prefix(), prefix)
	}
	if infos, err := w.List(t.Context(), 0); err != nil || len(infos) != 0 {
		t.Fatalf("List = %+v, %v", infos, err)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	if w, err := Dial(ctx, []string{dead}, ""); err == nil {
		w.Close()
		t.Fatal("Dial of a closed port succeeded")
	} else if !errors.Is(err, worker.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Dial of a closed port: %v, want ErrUnavailable and the deadline", err)
	}
	if _, err := Dial(t.Context(), nil, ""); !errors.Is(err, worker.ErrInvalidConfig) {
		t.Fatalf("Dial without endpoints: %v, want ErrInvalidConfig", err)
	}
}

// TestRenewLongerTTL: a Renew with a longer TTL than the lease's moves the
// holder key to a new lease of that TTL.
func TestRenewLongerTTL(t *testing.T) {
	addr := testenv.Etcd().Require(t)
	c := testClient(t, addr)
	w := New(c, testPrefix(t, addr))
	ctx := t.Context()
	cl, err := w.Acquire(ctx, worker.Request{Workers: 1, Owner: "o", TTL: 1500 * time.Millisecond, Reserve: time.UnixMilli(5000)})
	if err != nil {
		t.Fatal(err)
	}
	oc := cl.(*claim)
	first := oc.lease
	if oc.ttl != 2 {
		t.Fatalf("a 1.5s TTL was granted as %ds, want 2s (rounded up)", oc.ttl)
	}
	if err := cl.Renew(ctx, 5*time.Second, time.UnixMilli(6000)); err != nil {
		t.Fatal(err)
	}
	if oc.lease == first || oc.ttl != 5 {
		t.Fatalf("after a 5s Renew the claim is on lease %x (was %x) of %ds", oc.lease, first, oc.ttl)
	}
	if ttl, err := c.TimeToLive(ctx, first); err != nil || ttl.TTL != -1 {
		t.Fatalf("old lease: %+v, %v; want revoked", ttl, err)
	}
	infos, err := w.List(ctx, 0)
	if err != nil || len(infos) != 1 || infos[0].Holder != "o" || !infos[0].HighWater.Equal(time.UnixMilli(6000)) ||
		time.Until(infos[0].Expires) < 4*time.Second || time.Until(infos[0].Expires) > 5*time.Second {
		t.Fatalf("List = %+v, %v; want held by o for 4–5s more, high-water 6s", infos, err)
	}
	// A shorter TTL keeps the lease.
	if err := cl.Renew(ctx, time.Second, time.UnixMilli(7000)); err != nil || oc.lease == first || oc.ttl != 5 {
		t.Fatalf("Renew with a shorter TTL: %v; lease %x of %ds", err, oc.lease, oc.ttl)
	}
	if err := cl.Release(ctx, time.UnixMilli(8000)); err != nil {
		t.Fatal(err)
	}
	if ttl, err := c.TimeToLive(ctx, oc.lease); err != nil || ttl.TTL != -1 {
		t.Fatalf("lease after Release: %+v, %v; want revoked", ttl, err)
	}
}

// TestKeys pins the key layout (operators read it with etcdctl) and checks
// that keys of another shape under the prefix are ignored.
func TestKeys(t *testing.T) {
	addr := testenv.Etcd().Require(t)
	c := testClient(t, addr)
	prefix := testPrefix(t, addr)
	w := New(c, prefix)
	ctx := t.Context()
	for _, k := range []string{"/3/x/holder", "/3/07/high", "/3/1/other", "/3/-1/high", "/30/0/holder", "/3/"} {
		if _, err := c.Put(ctx, prefix+k, "junk"); err != nil {
			t.Fatal(err)
		}
	}
	cl, err := w.Acquire(ctx, worker.Request{Datacenter: 3, Workers: 4, Owner: "o", TTL: testTTL, Reserve: time.UnixMilli(1234)})
	if err != nil || cl.WorkerID() != 0 {
		t.Fatalf("Acquire = %v, %v; want worker 0", cl, err)
	}
	resp, err := c.Get(ctx, prefix+"/3/0/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*mvccpb.KeyValue{}
	for _, kv := range resp.Kvs {
		got[strings.TrimPrefix(string(kv.Key), prefix)] = kv
	}
	if h, hw := got["/3/0/holder"], got["/3/0/high"]; len(got) != 2 || h == nil || hw == nil ||
		string(h.Value) != "o" || h.Lease == 0 || string(hw.Value) != "1234" || hw.Lease != 0 {
		t.Fatalf("keys of worker 3/0: %v", got)
	}
	infos, err := w.List(ctx, 3)
	if err != nil || len(infos) != 1 || infos[0].Worker != 0 {
		t.Fatalf("List(3) = %+v, %v; want worker 0 only", infos, err)
	}
}

// TestHerd: many nodes starting at once all pick the same lowest free id,
// and all but one lose each round; every one must still get an id.
func TestHerd(t *testing.T) {
	addr := testenv.Etcd().Require(t)
	prefix := testPrefix(t, addr)
	const nodes = 24
	var clients [nodes]*Workers
	for i := range clients {
		clients[i] = New(testClient(t, addr), prefix)
	}
	var wg sync.WaitGroup
	ids := make(chan int64, nodes)
	start := make(chan struct{})
	for i, w := range clients {
		wg.Go(func() {
			<-start
			cl, err := w.Acquire(t.Context(), worker.Request{Workers: 64, Owner: fmt.Sprint("node-", i), TTL: testTTL, Reserve: time.Now()})
			if err != nil {
				t.Errorf("node %d: %v", i, err)
				return
			}
			ids <- cl.WorkerID()
		})
	}
	close(start)
	wg.Wait()
	close(ids)
	seen := map[int64]bool{}
	for id := range ids {
		if seen[id] {
			t.Errorf("worker id %d handed out twice", id)
		}
		seen[id] = true
	}
}

func TestPick(t *testing.T) {
	const now = 1000
	held := &mvccpb.KeyValue{Value: []byte("h")}
	for _, tc := range []struct {
		name    string
		slots   map[int64]*slot
		workers int64
		id      int64
		ok      bool
		held    int64
	}{
		{"empty", nil, 4, 0, true, 0},
		{"gap before held", map[int64]*slot{1: {holder: held}}, 4, 0, true, 0},
		{"after held", map[int64]*slot{0: {holder: held}}, 4, 1, true, 0},
		{"lowest passed", map[int64]*slot{0: {highMs: 2000}, 1: {highMs: 900}, 2: {highMs: 500}}, 3, 1, true, 0},
		{"never used beats future", map[int64]*slot{0: {highMs: 2000}, 1: {highMs: 3000}}, 3, 2, true, 0},
		{"gap beats future", map[int64]*slot{0: {highMs: 2000}, 2: {highMs: 3000}}, 3, 1, true, 0},
		{"smallest future", map[int64]*slot{0: {highMs: 3000}, 1: {holder: held, highMs: 1}, 2: {highMs: 2000}}, 3, 2, true, 0},
		{"passed equals now", map[int64]*slot{0: {highMs: 3000}, 1: {highMs: now}}, 2, 1, true, 0},
		{"exhausted", map[int64]*slot{0: {holder: held}, 1: {holder: held}, 5: {}}, 2, 0, false, 2},
		{"ids beyond workers ignored", map[int64]*slot{0: {holder: held}, 1: {}}, 1, 0, false, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, n, ok := pick(tc.slots, tc.workers, now)
			if ok != tc.ok || (ok && id != tc.id) || (!ok && n != tc.held) {
				t.Fatalf("pick = %d, %d held, %v; want %d, %d held, %v", id, n, ok, tc.id, tc.held, tc.ok)
			}
		})
	}
}

func TestRounding(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want int64
	}{{time.Second, 1}, {1001 * time.Millisecond, 2}, {2 * time.Second, 2}, {time.Nanosecond, 1}} {
		if got := ttlSeconds(tc.d); got != tc.want {
			t.Errorf("ttlSeconds(%v) = %d, want %d", tc.d, got, tc.want)
		}
	}
	base := time.UnixMilli(1_700_000_000_123)
	for _, tc := range []struct {
		t    time.Time
		want int64
	}{{base, 1_700_000_000_123}, {base.Add(time.Nanosecond), 1_700_000_000_124}, {time.Time{}, 0}} {
		if got := ceilMs(tc.t); got != tc.want {
			t.Errorf("ceilMs(%v) = %d, want %d", tc.t, got, tc.want)
		}
	}
}
