package zk

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	gozk "github.com/go-zookeeper/zk"

	"github.com/flakeid/flakeid/internal/faultnet"
	"github.com/flakeid/flakeid/internal/testenv"
	"github.com/flakeid/flakeid/worker"
	"github.com/flakeid/flakeid/worker/workertest"
)

// testTTL is the lease TTL of the tests: at least ZooKeeper's minimum
// session timeout (2 × tickTime; the test server's tickTime is 500ms).
const testTTL = 2 * time.Second

// adminConn is a quiet ZooKeeper session of the test's own, closed when the
// test ends.
func adminConn(t testing.TB, addr string) *gozk.Conn {
	t.Helper()
	c, _, err := gozk.Connect([]string{addr}, 10*time.Second, gozk.WithLogger(zkLogger{}), gozk.WithLogInfo(false))
	if err != nil {
		t.Fatalf("ZooKeeper session at %s: %v", addr, err)
	}
	t.Cleanup(c.Close)
	return c
}

// deleteTree deletes path and everything under it.
func deleteTree(c *gozk.Conn, path string) error {
	kids, _, err := c.Children(path)
	if errors.Is(err, gozk.ErrNoNode) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, k := range kids {
		if err := deleteTree(c, path+"/"+k); err != nil {
			return err
		}
	}
	if err := c.Delete(path, -1); err != nil && !errors.Is(err, gozk.ErrNoNode) {
		return err
	}
	return nil
}

// space is one test's tree on a ZooKeeper: its namespace, another namespace
// beside it, the datacenter registry they share and room for a Leaf tree,
// all under one random base deleted when the test ends.
type space struct {
	base, prefix, other, registry string
	admin                         *gozk.Conn // the test's own session, for setting up and inspecting
}

func testSpace(t testing.TB, addr string) space {
	t.Helper()
	var b [8]byte
	_, _ = rand.Read(b[:])
	base := "/flakeid-test/" + hex.EncodeToString(b[:])
	admin := adminConn(t, addr)
	t.Cleanup(func() {
		if err := deleteTree(admin, base); err != nil {
			t.Errorf("deleting %s: %v", base, err)
		}
	})
	return space{base: base, prefix: base + "/workers", other: base + "/other", registry: base + "/datacenters", admin: admin}
}

// dial is a coordinator of prefix through the server at addr, opened from
// its URL and closed when the test ends.
func dial(t testing.TB, addr, prefix string, opts ...Option) *Workers {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	u := &url.URL{Scheme: "zk", Host: addr, Path: prefix}
	w, err := OpenWorkers(ctx, u, opts...)
	if err != nil {
		t.Fatalf("OpenWorkers(%s): %v", u, err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

// withRegistry moves a coordinator's datacenter registry to path: a test's
// own on the shared ensemble, as an ensemble of its own would have (no URL
// has a way to). connectWorkers checks the path.
func withRegistry(path string) Option {
	return func(w *Workers) { w.registry = strings.TrimRight(path, "/") }
}

func (s space) workers(t testing.TB, addr string, opts ...Option) *Workers {
	return dial(t, addr, s.prefix, append([]Option{withRegistry(s.registry)}, opts...)...)
}

// proxied is a coordinator of the space through a faultnet proxy to addr
// that the test can cut: its shared session and every claim's session go
// through it.
func proxied(t *testing.T, addr string, sp space, opts ...Option) (*Workers, *faultnet.Proxy) {
	t.Helper()
	proxy, err := faultnet.Listen(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	return sp.workers(t, proxy.Addr(), opts...), proxy
}

// connector makes the clients of one conformance test.
type connector struct {
	addr string
	space
}

func (c *connector) adminConn(*testing.T) *gozk.Conn { return c.admin }

func (c *connector) Connect(t *testing.T) worker.Coordinator { return c.workers(t, c.addr) }

// ConnectFaulty is a client through a proxy whose Cut is a partition: the
// shared server runs on and expires the client's sessions.
func (c *connector) ConnectFaulty(t *testing.T) (worker.Coordinator, workertest.Fault) {
	w, p := proxied(t, c.addr, c.space)
	return w, p
}

// Wipe deletes the namespace's tree and the test's registry, ephemeral
// holder nodes included, as a ZooKeeper that lost its data (or an operator's
// deleteall) would; the holders' sessions live on.
func (c *connector) Wipe(t *testing.T) {
	admin := c.adminConn(t)
	for _, p := range []string{c.prefix, c.registry} {
		if err := deleteTree(admin, p); err != nil {
			t.Fatalf("wiping %s: %v", p, err)
		}
	}
}

type saved struct {
	path      string
	data      []byte
	ephemeral bool
}

func walk(c *gozk.Conn, path string, out *[]saved) error {
	data, st, err := c.Get(path)
	if errors.Is(err, gozk.ErrNoNode) {
		return nil
	}
	if err != nil {
		return err
	}
	*out = append(*out, saved{path, data, st.EphemeralOwner != 0})
	kids, _, err := c.Children(path)
	if err != nil && !errors.Is(err, gozk.ErrNoNode) {
		return err
	}
	slices.Sort(kids)
	for _, k := range kids {
		if err := walk(c, path+"/"+k, out); err != nil {
			return err
		}
	}
	return nil
}

// Snapshot copies every node under the prefix with its data. The restore
// deletes the prefix and creates the copies again, parents first, in one
// Multi (atomic, as a restore is for the nodes). ZooKeeper
// cannot give a node back to the session that owned it, so holder nodes
// are re-created as ephemeral nodes of a new session that ends a TTL later,
// as a holder that died at the restore would. A real restore of a
// ZooKeeper snapshot brings the old sessions back too; either way the
// record and the high-water marks are what tell. The registry lies outside
// the namespace and is not part of the copy.
func (c *connector) Snapshot(t *testing.T) func() {
	admin := c.adminConn(t)
	var nodes []saved
	if err := walk(admin, c.prefix, &nodes); err != nil {
		t.Fatalf("copying %s: %v", c.prefix, err)
	}
	return func() {
		// One Multi, as a restore is one step for the nodes: delete what is
		// there now (deepest first), create the copy (parents first). It
		// runs on a session of its own that closes a TTL later, so the
		// copy's ephemeral holder nodes lapse as a holder that died at the
		// restore would; persistent nodes outlive it.
		var now []saved
		if err := walk(admin, c.prefix, &now); err != nil {
			t.Fatalf("restoring %s: reading: %v", c.prefix, err)
		}
		ops := make([]any, 0, len(now)+len(nodes))
		for i := len(now) - 1; i >= 0; i-- {
			ops = append(ops, &gozk.DeleteRequest{Path: now[i].path, Version: -1})
		}
		for _, n := range nodes {
			flags := int32(gozk.FlagPersistent)
			if n.ephemeral {
				flags = gozk.FlagEphemeral
			}
			ops = append(ops, &gozk.CreateRequest{Path: n.path, Data: n.data, Acl: acl(), Flags: flags})
		}
		eph, _, err := gozk.Connect([]string{c.addr}, testTTL, gozk.WithLogger(zkLogger{}), gozk.WithLogInfo(false))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(eph.Close)
		time.AfterFunc(testTTL, eph.Close)
		if _, err := eph.Multi(ops...); err != nil {
			t.Fatalf("restoring %s: %v", c.prefix, err)
		}
	}
}

// OtherNamespace is a client of the namespace beside the test's, sharing
// its registry.
func (c *connector) OtherNamespace(t *testing.T) worker.Coordinator {
	return dial(t, c.addr, c.other, withRegistry(c.registry))
}

func TestWorkersConformance(t *testing.T) {
	addr := testenv.ZooKeeper().Require(t)
	workertest.Run(t, workertest.Harness{
		Open: func(t *testing.T) workertest.Connector {
			return &connector{addr: addr, space: testSpace(t, addr)}
		},
		TTL: testTTL,
	})
}

func BenchmarkWorkers(b *testing.B) {
	addr := testenv.ZooKeeper().Require(b)
	sp := testSpace(b, addr)
	workertest.Benchmark(b, func(b *testing.B) worker.Coordinator { return sp.workers(b, addr) })
}

// TestPartitionLosesLeaseBeforeTakeover cuts a holder off the shared
// ZooKeeper with a network partition (the server runs on and expires its
// session): the holder must give its lease up before another node can take
// the id, and what it sent into the partition must change nothing when it
// arrives.
func TestPartitionLosesLeaseBeforeTakeover(t *testing.T) {
	t.Parallel()
	addr := testenv.ZooKeeper().Require(t)
	sp := testSpace(t, addr)
	faulty, proxy := proxied(t, addr, sp)
	workertest.Takeover{
		Faulty: faulty, Fault: proxy, Healthy: sp.workers(t, addr),
		TTL: testTTL, Partition: true, Within: 3 * testTTL,
	}.Run(t)
}

// TestLateWritesAreFenced holds a holder's renewal in a partition until its
// session expired and another node took the id over: when the partition
// heals, nothing it sent may change the new holder's slot, and its claim
// must report the id lost rather than renew it under a new session.
func TestLateWritesAreFenced(t *testing.T) {
	t.Parallel()
	addr := testenv.ZooKeeper().Require(t)
	sp := testSpace(t, addr)
	faulty, proxy := proxied(t, addr, sp)
	healthy := sp.workers(t, addr)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	// Marks past the namespace's floor (initialised now), so that they
	// are what the holders start from.
	base := time.UnixMilli(time.Now().Add(time.Hour).UnixMilli())
	oldMark, newMark, late := base, base.Add(time.Hour), base.Add(8*time.Hour)
	req := worker.Request{Workers: 1, Owner: "old", TTL: testTTL, Reserve: oldMark}
	old, err := faulty.Acquire(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	oc := sessionOf(t, faulty, 0, old)
	firstSession := oc.id
	proxy.Cut()
	defer proxy.Heal()
	held := make(chan error, 1)
	go func() { held <- old.Renew(ctx, testTTL, late) }()

	req.Owner, req.Reserve = "new", newMark
	var cl worker.Claim
	for deadline := time.Now().Add(3 * testTTL); cl == nil; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the id did not become free within %v", 3*testTTL)
		}
		if cl, err = healthy.Acquire(ctx, req); err != nil && !errors.Is(err, worker.ErrExhausted) {
			t.Fatal(err)
		}
	}
	if !cl.Previous().Equal(oldMark) {
		t.Fatalf("new holder's Previous = %v, want the old reservation %v", cl.Previous(), oldMark)
	}
	// The new holder renews, as its Leaser would.
	renewed := make(chan error, 1)
	stop := make(chan struct{})
	go func() {
		defer close(renewed)
		for {
			select {
			case <-stop:
				return
			case <-time.After(300 * time.Millisecond):
			}
			if err := cl.Renew(ctx, testTTL, newMark); err != nil {
				renewed <- err
				return
			}
		}
	}()
	proxy.Heal()
	if err := <-held; err == nil || errors.Is(err, worker.ErrReset) {
		t.Fatalf("the renewal held in the partition: %v; want it to fail, not as a reset", err)
	}
	// Give the held bytes and the old client's reconnection time to arrive.
	time.Sleep(testTTL)
	if err := old.Renew(ctx, testTTL, late); !errors.Is(err, worker.ErrNotHeld) {
		t.Fatalf("the old holder's Renew after the heal: %v, want ErrNotHeld", err)
	}
	if id := oc.conn.SessionID(); id != 0 && id != firstSession {
		t.Fatalf("the old claim's connection runs session %#x, not its own %#x", id, firstSession)
	}
	infos, err := healthy.List(ctx, 0)
	if err != nil || len(infos) != 1 || infos[0].Holder != "new" || !infos[0].HighWater.Equal(newMark) {
		t.Fatalf("after the heal List = %+v, %v; want held by new with the mark %v (the late one was %v)", infos, err, newMark, late)
	}
	close(stop)
	if err := <-renewed; err != nil {
		t.Fatalf("the new holder's Renew: %v", err)
	}
}

// TestSessionExpiryEndsClaim: a claim whose session ZooKeeper expired (its
// holder cut off for longer than the session timeout) fails fast while cut
// off, and reports ErrNotHeld afterwards — never renewing under a new
// session, which would not own the holder node.
func TestSessionExpiryEndsClaim(t *testing.T) {
	t.Parallel()
	addr := testenv.ZooKeeper().Require(t)
	sp := testSpace(t, addr)
	faulty, proxy := proxied(t, addr, sp)
	admin := sp.admin
	cl, err := faulty.Acquire(t.Context(), worker.Request{Workers: 2, Owner: "a", TTL: testTTL, Reserve: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	c := sessionOf(t, faulty, 0, cl)
	// Without its watchdog, which would give the session up itself, the
	// claim learns of the expiry from ZooKeeper when it reconnects; then
	// go-zookeeper would open a new session unless stopped.
	c.mu.Lock()
	c.watchdog.Stop()
	c.mu.Unlock()
	proxy.Cut()
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	start := time.Now()
	err = cl.Renew(ctx, testTTL, time.Now().Add(time.Second))
	cancel()
	if !errors.Is(err, worker.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > time.Second {
		t.Fatalf("Renew while cut off: %v after %v; want ErrUnavailable and the deadline, at once", err, time.Since(start))
	}
	// ZooKeeper expires the session a session timeout after it last heard
	// of it, and deletes the holder node.
	deadline := time.Now().Add(3 * testTTL)
	for {
		ok, _, err := admin.Exists(faulty.keys().Holder(0, cl.WorkerID()))
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the holder node outlived its session by %v", 3*testTTL)
		}
		time.Sleep(50 * time.Millisecond)
	}
	proxy.Heal()
	for deadline := time.Now().Add(3 * testTTL); c.err() == nil; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the claim did not learn that its session expired")
		}
	}
	t.Log(c.err())
	err = cl.Renew(t.Context(), testTTL, time.Now().Add(time.Second))
	if !errors.Is(err, worker.ErrNotHeld) {
		t.Fatalf("Renew after the session expired: %v, want ErrNotHeld", err)
	}
	t.Log(err)
	// Nothing was re-created by a new session of the claim's connection.
	time.Sleep(testTTL)
	if ok, _, err := admin.Exists(faulty.keys().Holder(0, cl.WorkerID())); err != nil || ok {
		t.Fatalf("the holder node is back (%v, %v)", ok, err)
	}
	if id := c.conn.SessionID(); id != 0 && id != c.id {
		t.Fatalf("the claim's connection opened another session %#x", id)
	}
	if err := cl.Release(t.Context(), time.Now()); !errors.Is(err, worker.ErrNotHeld) {
		t.Fatalf("Release after the session expired: %v, want ErrNotHeld", err)
	}
}

// TestNegotiatedTimeoutRefused: a TTL beyond the server's maxSessionTimeout
// (60s on the test server) would get a shorter session than the lease, so
// the claim is refused and nothing is written.
func TestNegotiatedTimeoutRefused(t *testing.T) {
	t.Parallel()
	addr := testenv.ZooKeeper().Require(t)
	sp := testSpace(t, addr)
	w := sp.workers(t, addr)
	_, err := w.Acquire(t.Context(), worker.Request{Workers: 1, Owner: "a", TTL: 2 * time.Minute, Reserve: time.Now()})
	if !errors.Is(err, worker.ErrInvalidConfig) {
		t.Fatalf("Acquire with a 2m TTL: %v, want ErrInvalidConfig", err)
	}
	for _, want := range []string{"2m0s", "1m0s", "maxSessionTimeout"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("error %q does not say %q", err, want)
		}
	}
	if infos, err := w.List(t.Context(), 0); err != nil || len(infos) != 0 {
		t.Fatalf("the refused Acquire wrote slots: %+v, %v", infos, err)
	}
	// A Renew may not stretch a claim beyond its session either.
	cl, err := w.Acquire(t.Context(), worker.Request{Workers: 1, Owner: "a", TTL: testTTL, Reserve: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.Renew(t.Context(), 10*time.Second, time.Now()); !errors.Is(err, worker.ErrInvalidConfig) {
		t.Fatalf("Renew for longer than the session: %v, want ErrInvalidConfig", err)
	}
	if err := cl.Release(t.Context(), time.Now()); err != nil {
		t.Fatal(err)
	}
}

// TestRecreatedNodesDetected: a wipe followed by another node's Acquire
// re-creates the record, holder and high nodes with the very versions the
// old holder's claim knows, so its version-checked Multi succeeds; the
// Czxid check must still end it (ErrReset), and leave the new holder's slot
// to it.
func TestRecreatedNodesDetected(t *testing.T) {
	t.Parallel()
	addr := testenv.ZooKeeper().Require(t)
	sp := testSpace(t, addr)
	conn := &connector{addr: addr, space: sp}
	a, b := sp.workers(t, addr), sp.workers(t, addr)
	admin := sp.admin
	req := worker.Request{Workers: 1, Owner: "old", TTL: testTTL, Reserve: time.Now(), Contract: "c", Quarantine: time.Second}
	old, err := a.Acquire(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	conn.Wipe(t)
	// A record's initialisation time is ZooKeeper's clock estimated from a
	// read (over by 1 ms plus the read's round trip): let the re-created
	// record be later than the old one by more than that, so that it is
	// seen as re-initialised after the old holder's, not as an older copy
	// (which this test is not about).
	time.Sleep(50 * time.Millisecond)
	req.Owner = "new"
	cl, err := b.Acquire(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	nc := sessionOf(t, b, 0, cl)
	err = old.Renew(t.Context(), testTTL, time.Now().Add(time.Second))
	if !errors.Is(err, worker.ErrReset) || !strings.Contains(err.Error(), "re-initialised") {
		t.Fatalf("the old holder's Renew: %v; want ErrReset saying the namespace was re-initialised", err)
	}
	data, st, err := admin.Get(a.keys().Holder(0, 0))
	if err != nil || st.EphemeralOwner != nc.id || !strings.Contains(string(data), `"new"`) {
		t.Fatalf("the new holder's node: %s, %+v, %v", data, st, err)
	}
	if err := cl.Renew(t.Context(), testTTL, time.Now().Add(time.Second)); err != nil {
		t.Fatalf("the new holder's Renew: %v", err)
	}
}

// TestOpenWorkersErrors: a server that does not answer gives ErrUnavailable
// within the deadline; bad options give ErrInvalidConfig (bad URLs:
// TestParseURL).
func TestOpenWorkersErrors(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close() // nothing listens there now
	ctx, cancel := context.WithTimeout(t.Context(), 1500*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = OpenWorkers(ctx, &url.URL{Scheme: "zk", Host: dead, Path: "/x"})
	if !errors.Is(err, worker.ErrUnavailable) || time.Since(start) > 2500*time.Millisecond || !strings.Contains(err.Error(), dead) {
		t.Fatalf("OpenWorkers(zk://%s/x) = %v after %v; want ErrUnavailable naming it, within the deadline", dead, err, time.Since(start))
	}
	// A server that accepts connections and never answers.
	mute, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer mute.Close()
	go func() {
		for {
			c, err := mute.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	ctx, cancel = context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	start = time.Now()
	_, err = OpenWorkers(ctx, &url.URL{Scheme: "zk", Host: mute.Addr().String(), Path: "/x"})
	if !errors.Is(err, worker.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 1500*time.Millisecond {
		t.Fatalf("OpenWorkers of a mute server = %v after %v; want ErrUnavailable at the deadline", err, time.Since(start))
	}
	for _, opt := range []Option{
		withRegistry("nope"),
		WithLeaf(LeafConfig{Path: "snowflake"}),
		WithLeaf(LeafConfig{Path: "/snowflake/a", Margin: -time.Second}),
	} {
		if _, err := OpenWorkers(t.Context(), &url.URL{Scheme: "zk", Host: dead, Path: "/x"}, opt); !errors.Is(err, worker.ErrInvalidConfig) {
			t.Errorf("OpenWorkers(zk://%s/x, an invalid option): %v, want ErrInvalidConfig", dead, err)
		}
	}
}

// sessionOf is the ZooKeeper session of cl, a claim of datacenter dc from
// w: the one of w's that owns its holder node.
func sessionOf(t *testing.T, w *Workers, dc int64, cl worker.Claim) *session {
	t.Helper()
	_, st, err := w.shared().Exists(w.keys().Holder(dc, cl.WorkerID()))
	if err != nil || st == nil {
		t.Fatalf("the holder node of worker %d of datacenter %d: %+v, %v", cl.WorkerID(), dc, st, err)
	}
	w.smu.Lock()
	defer w.smu.Unlock()
	s := w.sessions[st.EphemeralOwner]
	if s == nil {
		t.Fatalf("the holder node of worker %d of datacenter %d is owned by session %#x, not one of w's", cl.WorkerID(), dc, st.EphemeralOwner)
	}
	return s
}
