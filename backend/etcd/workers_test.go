package etcd

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
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
	"github.com/flakeid/flakeid/worker/protocol"
	"github.com/flakeid/flakeid/worker/workertest"
)

// testTTL is the lease TTL of the tests: etcd's minimum with the default
// election settings (heartbeat 100ms, election timeout 1s → 1.5s, rounded up).
const testTTL = 2 * time.Second

// testTTLSeconds is testTTL in etcd's lease granularity, whole seconds.
const testTTLSeconds = int64(testTTL / time.Second)

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
	g, err := c.Grant(ctx, testTTLSeconds)
	if err != nil {
		t.Fatalf("granting a lease: %v", err)
	}
	defer c.Revoke(ctx, g.ID)
	if want := int64(testTTLSeconds); g.TTL != want {
		t.Fatalf("etcd granted a %ds lease for %ds: its minimum TTL is above the tests' %v (election timeout raised?)", g.TTL, want, testTTL)
	}
}

// space is one test's keys on an etcd: its namespace (prefix), another
// namespace beside it, and the datacenter registry they share, all under one
// random base deleted when the test ends, so that tests never see each other.
type space struct {
	prefix, other, registry string
}

// testSpace makes a fresh space on the etcd at addr.
func testSpace(t testing.TB, addr string) space {
	t.Helper()
	var b [8]byte
	_, _ = rand.Read(b[:])
	base := "/flakeid-test/" + hex.EncodeToString(b[:])
	admin := testClient(t, addr)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := admin.Delete(ctx, base+"/", clientv3.WithPrefix()); err != nil {
			t.Errorf("deleting %s/: %v", base, err)
		}
	})
	return space{prefix: base + "/workers", other: base + "/other", registry: base + "/datacenters"}
}

// workers is a coordinator of the space's namespace through c.
// Its datacenter registry is the test's own, as a cluster of its own would
// have (the URL has no way to).
func (s space) workers(c *clientv3.Client) *Workers {
	return newWorkers(c, s.prefix, s.registry)
}

// connector makes the clients of one test. Its clients use the shared etcd,
// unless the test asks for a faulty one first: then every client of the test
// uses a private etcd server that the fault pauses.
type connector struct {
	shared string
	space

	mu        sync.Mutex
	endpoint  string // where Connect points
	connected bool   // Connect was called
	faulty    bool   // ConnectFaulty was called
	admin     *clientv3.Client
}

func (c *connector) Connect(t *testing.T) worker.Coordinator {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.connected = true
	return c.workers(testClient(t, c.endpoint))
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
	return c.workers(testClient(t, faulty)), fault
}

// adminClient is a client of the etcd the test's clients use, for the
// harness's own reads and writes.
func (c *connector) adminClient(t *testing.T) *clientv3.Client {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.admin == nil {
		c.admin = testClient(t, c.endpoint)
	}
	return c.admin
}

// Wipe deletes the namespace's prefix and the test's registry, as
// `etcdctl del --prefix` would: the holders' etcd leases live on (deleting
// keys does not revoke them), as they would after such a command.
func (c *connector) Wipe(t *testing.T) {
	admin := c.adminClient(t)
	for _, p := range []string{c.prefix, c.registry} {
		if _, err := admin.Delete(t.Context(), p+"/", clientv3.WithPrefix()); err != nil {
			t.Fatalf("wiping %s/: %v", p, err)
		}
	}
}

// Snapshot copies the namespace's keys with their values. The restore
// deletes the prefix and puts the copies back. etcd leases cannot be put
// back: a lease id is granted by the server, and a key can only be put on a
// lease that is live now. So the keys that were on a lease (holder keys)
// are put on a new lease per old one, of the old lease's granted TTL:
// a restored holder key then lapses a TTL later, as a holder that died at
// the restore would. (etcdutl snapshot restore brings the old leases back
// under their old ids, so there the old holder's lease compare would still
// pass; the rollback is recognised by the record and the high-water mark
// either way, and TestRestoredCopy checks that case on a real copy.) The
// registry lies outside the namespace and is not part of the copy.
func (c *connector) Snapshot(t *testing.T) func() {
	admin := c.adminClient(t)
	resp, err := admin.Get(t.Context(), c.prefix+"/", clientv3.WithPrefix())
	if err != nil {
		t.Fatalf("copying %s/: %v", c.prefix, err)
	}
	kvs := resp.Kvs
	ttls := map[int64]int64{}
	for _, kv := range kvs {
		if kv.Lease == 0 {
			continue
		}
		if _, ok := ttls[kv.Lease]; ok {
			continue
		}
		ttls[kv.Lease] = testTTLSeconds
		if l, err := admin.TimeToLive(t.Context(), clientv3.LeaseID(kv.Lease)); err == nil && l.GrantedTTL > 0 {
			ttls[kv.Lease] = l.GrantedTTL
		}
	}
	return func() {
		ctx := t.Context()
		// One transaction, as a restore is one step for the nodes: delete
		// the keys the copy lacks, put the copy's over the rest (etcd
		// refuses a put inside a range the same transaction deletes).
		now, err := admin.Get(ctx, c.prefix+"/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
		if err != nil {
			t.Fatalf("restoring %s/: reading: %v", c.prefix, err)
		}
		inCopy := map[string]bool{}
		for _, kv := range kvs {
			inCopy[string(kv.Key)] = true
		}
		var dels []clientv3.Op
		for _, kv := range now.Kvs {
			if !inCopy[string(kv.Key)] {
				dels = append(dels, clientv3.OpDelete(string(kv.Key)))
			}
		}
		leases := map[int64]clientv3.LeaseID{}
		for old, ttl := range ttls {
			g, err := admin.Grant(ctx, ttl)
			if err != nil {
				t.Fatalf("restoring %s/: granting a lease: %v", c.prefix, err)
			}
			leases[old] = g.ID
		}
		ops := append(make([]clientv3.Op, 0, len(dels)+len(kvs)), dels...)
		for _, kv := range kvs {
			var opts []clientv3.OpOption
			if kv.Lease != 0 {
				opts = append(opts, clientv3.WithLease(leases[kv.Lease]))
			}
			ops = append(ops, clientv3.OpPut(string(kv.Key), string(kv.Value), opts...))
		}
		if _, err := admin.Txn(ctx).Then(ops...).Commit(); err != nil {
			t.Fatalf("restoring %s/: putting the copy: %v", c.prefix, err)
		}
	}
}

// OtherNamespace is a client of the prefix beside the test's, sharing its
// registry.
func (c *connector) OtherNamespace(t *testing.T) worker.Coordinator {
	return newWorkers(testClient(t, c.endpoint), c.other, c.registry)
}

func TestWorkersConformance(t *testing.T) {
	addr := testenv.Etcd().Require(t)
	requireMinTTL(t, testClient(t, addr))
	workertest.Run(t, workertest.Harness{
		Open: func(t *testing.T) workertest.Connector {
			return &connector{shared: addr, space: testSpace(t, addr), endpoint: addr}
		},
		TTL: testTTL,
	})
}

func BenchmarkWorkers(b *testing.B) {
	addr := testenv.Etcd().Require(b)
	sp := testSpace(b, addr)
	workertest.Benchmark(b, func(b *testing.B) worker.Coordinator { return sp.workers(testClient(b, addr)) })
}

// proxied is a coordinator of the space on the etcd at addr, reached
// through a faultnet proxy that the test can cut; the proxy closes when the
// test ends.
func proxied(t *testing.T, addr string, sp space) (*Workers, *faultnet.Proxy) {
	t.Helper()
	proxy, err := faultnet.Listen(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	return sp.workers(testClient(t, proxy.Addr())), proxy
}

// TestPartitionLosesLeaseBeforeTakeover cuts a holder off the shared etcd
// with a network partition (the server runs on and expires the lease): the
// holder must give its lease up before another node can take the id, and
// its requests held in the partition must change nothing when they arrive.
func TestPartitionLosesLeaseBeforeTakeover(t *testing.T) {
	addr := testenv.Etcd().Require(t)
	sp := testSpace(t, addr)
	faulty, proxy := proxied(t, addr, sp)
	workertest.Takeover{
		Faulty: faulty, Fault: proxy, Healthy: sp.workers(testClient(t, addr)),
		TTL: testTTL, Partition: true, Within: 3 * testTTL,
	}.Run(t)
}

// TestLateWritesAreFenced holds a former holder's Renew and a bare commit of
// its slot (as if its keep-alive had got through just before the partition)
// in a partition until another node took the id over: when they arrive they
// must fail (ErrNotHeld; a lost race for the commit) and leave the new
// holder's slot alone.
func TestLateWritesAreFenced(t *testing.T) {
	addr := testenv.Etcd().Require(t)
	sp := testSpace(t, addr)
	faulty, proxy := proxied(t, addr, sp)
	healthy := sp.workers(testClient(t, addr))
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	// Marks past the namespace's floor (initialised now), so that they
	// are what the holders start from.
	base := time.UnixMilli(time.Now().Add(time.Hour).UnixMilli())
	oldMark, newMark := base, base.Add(time.Hour)
	req := worker.Request{Workers: 1, Owner: "old", TTL: testTTL, Reserve: oldMark}
	old, err := faulty.Acquire(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	late := base.Add(8 * time.Hour)
	st, err := store{faulty}.Read(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	next := st
	next.Slots = map[int64]protocol.Slot{0: st.Slots[0]}
	raised := next.Slots[0]
	raised.HighMs = late.UnixMilli()
	next.Slots[0] = raised
	proxy.Cut()
	defer proxy.Heal()
	held := make(chan error, 2)
	go func() { held <- old.Renew(ctx, testTTL, late) }()
	go func() {
		if err := (store{faulty}).Commit(ctx, st, next); !errors.Is(err, protocol.ErrConflict) {
			held <- fmt.Errorf("the bare commit: %w, want ErrConflict", err)
			return
		}
		held <- worker.ErrNotHeld
	}()

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
		t.Fatalf("new holder's Previous = %v, want the old reservation", cl.Previous())
	}
	proxy.Heal()
	for range 2 {
		if err := <-held; !errors.Is(err, worker.ErrNotHeld) {
			t.Fatalf("a held write of the old holder, arriving late: %v, want ErrNotHeld", err)
		}
	}
	infos, err := healthy.List(ctx, 0)
	if err != nil || len(infos) != 1 || infos[0].Holder != "new" || !infos[0].HighWater.Equal(newMark) {
		t.Fatalf("after the late writes List = %+v, %v; want held by new with high-water %v", infos, err, newMark)
	}
	if err := old.Release(ctx, late); !errors.Is(err, worker.ErrNotHeld) {
		t.Fatalf("old holder's Release: %v, want ErrNotHeld", err)
	}
}

// TestUnavailable: a coordinator that cannot reach etcd fails with
// ErrUnavailable and the context's error.
func TestUnavailable(t *testing.T) {
	addr := testenv.Etcd().Require(t)
	w, proxy := proxied(t, addr, testSpace(t, addr))
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

// TestOpenWorkersURL: what OpenWorkers makes of a URL, with no etcd to
// talk to.
func TestOpenWorkersURL(t *testing.T) {
	for _, tc := range []struct{ url, want string }{
		{"etcd:///flakeid/workers", "no etcd endpoint"},
		{"etcd://", "no etcd endpoint"},
		{"redis://127.0.0.1:2379/p", `scheme "redis", want etcd`},
	} {
		u, err := url.Parse(tc.url)
		if err != nil {
			t.Fatal(err)
		}
		w, err := OpenWorkers(t.Context(), u)
		if err == nil {
			w.Close()
			t.Fatalf("OpenWorkers(%s) succeeded", tc.url)
		}
		// The flakeid command shows the message after the flag and the URL:
		// it is only what is wrong.
		if !errors.Is(err, worker.ErrInvalidConfig) || err.Error() != tc.want {
			t.Errorf("OpenWorkers(%s): %v; want ErrInvalidConfig saying %q", tc.url, err, tc.want)
		}
	}

	// A registry of the URL's own would split the cluster's ID space.
	for _, raw := range []string{"etcd://127.0.0.1:1/a?registry=/r", "etcd://127.0.0.1:1?registry=" + DefaultRegistry} {
		u, _ := url.Parse(raw)
		if w, err := OpenWorkers(t.Context(), u); !errors.Is(err, worker.ErrInvalidConfig) ||
			!strings.Contains(err.Error(), "registry= is not accepted") || !strings.Contains(err.Error(), DefaultRegistry) {
			t.Errorf("OpenWorkers(%s) = %v, %v; want ErrInvalidConfig refusing registry= and naming %s", raw, w, err, DefaultRegistry)
		}
	}

	// Every host:port of the URL is an endpoint, spoken to over HTTP; one
	// that does not answer is reported as unavailable within the context.
	dead1, dead2 := deadAddr(t), deadAddr(t)
	u, _ := url.Parse("etcd://" + dead1 + "," + dead2 + "/p")
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	w, err := OpenWorkers(ctx, u)
	if err == nil {
		w.Close()
		t.Fatal("OpenWorkers of closed ports succeeded")
	}
	want := "http://" + dead1 + ",http://" + dead2
	if !errors.Is(err, worker.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), want) {
		t.Fatalf("OpenWorkers(%s): %v, want ErrUnavailable and the deadline, naming %s", u, err, want)
	}

	if d := NewWorkers(nil, ""); d.Prefix() != DefaultPrefix || d.Registry() != DefaultRegistry {
		t.Fatalf("defaults: Prefix, Registry = %q, %q", d.Prefix(), d.Registry())
	}
}

// deadAddr is a loopback address where nothing listens.
func deadAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestOpenWorkers opens a coordinator of a real etcd from its URL and
// leases through it; its Close closes the client it made, and only that. A
// private etcd: the URL's registry is the cluster's one, DefaultRegistry.
func TestOpenWorkers(t *testing.T) {
	addr := startPrivateEtcd(t).Addr()
	sp := testSpace(t, addr)
	u, _ := url.Parse("etcd://" + addr + sp.prefix + "/")
	w, err := OpenWorkers(t.Context(), u)
	if err != nil {
		t.Fatal(err)
	}
	if w.Prefix() != sp.prefix || w.Registry() != DefaultRegistry {
		t.Fatalf("Prefix, Registry = %q, %q; want %q, %q", w.Prefix(), w.Registry(), sp.prefix, DefaultRegistry)
	}
	workertest.Smoke(t, w, testTTL)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if w.client.Ctx().Err() == nil { // a client's context ends when it is closed
		t.Fatal("the client OpenWorkers made is still open after Close")
	}

	// No path: the default prefix (only read here).
	u, _ = url.Parse("etcd://" + addr)
	d, err := OpenWorkers(t.Context(), u)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if d.Prefix() != DefaultPrefix || d.Registry() != DefaultRegistry {
		t.Fatalf("etcd://host: Prefix, Registry = %q, %q; want %q, %q", d.Prefix(), d.Registry(), DefaultPrefix, DefaultRegistry)
	}

	// A Workers of the caller's client leaves it open.
	c := testClient(t, addr)
	if err := sp.workers(c).Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(t.Context(), sp.prefix); err != nil || c.Ctx().Err() != nil {
		t.Fatalf("the caller's client after the Workers' Close: %v, %v", err, c.Ctx().Err())
	}
}

// TestRenewLongerTTL: a Renew with a longer TTL than the lease's moves the
// holder key to a new lease of that TTL; a shorter one keeps the lease.
func TestRenewLongerTTL(t *testing.T) {
	addr := testenv.Etcd().Require(t)
	c := testClient(t, addr)
	w := testSpace(t, addr).workers(c)
	ctx := t.Context()
	cl, err := w.Acquire(ctx, worker.Request{Workers: 1, Owner: "o", TTL: 1500 * time.Millisecond, Reserve: time.UnixMilli(5000)})
	if err != nil {
		t.Fatal(err)
	}
	lease := func() (clientv3.LeaseID, int64) {
		t.Helper()
		kv, err := c.Get(ctx, w.keys().Holder(0, 0))
		if err != nil || len(kv.Kvs) != 1 {
			t.Fatalf("holder key: %v, %v", kv, err)
		}
		id := clientv3.LeaseID(kv.Kvs[0].Lease)
		ttl, err := c.TimeToLive(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return id, ttl.GrantedTTL
	}
	first, ttl := lease()
	if ttl != 2 {
		t.Fatalf("a 1.5s TTL was granted as %ds, want 2s (rounded up)", ttl)
	}
	if err := cl.Renew(ctx, 5*time.Second, time.UnixMilli(6000)); err != nil {
		t.Fatal(err)
	}
	second, ttl := lease()
	if second == first || ttl != 5 {
		t.Fatalf("after a 5s Renew the holder is on lease %x (was %x) of %ds", second, first, ttl)
	}
	if ttl, err := c.TimeToLive(ctx, first); err != nil || ttl.TTL != -1 {
		t.Fatalf("old lease: %+v, %v; want revoked", ttl, err)
	}
	infos, err := w.List(ctx, 0)
	if err != nil || len(infos) != 1 || infos[0].Holder != "o" || !infos[0].HighWater.Equal(time.UnixMilli(6000)) ||
		time.Until(infos[0].Expires) < 4*time.Second || time.Until(infos[0].Expires) > 5*time.Second {
		t.Fatalf("List = %+v, %v; want held by o for 4–5s more, high-water 6s", infos, err)
	}
	if err := cl.Renew(ctx, time.Second, time.UnixMilli(7000)); err != nil {
		t.Fatal(err)
	}
	if third, ttl := lease(); third != second || ttl != 5 {
		t.Fatalf("after a shorter Renew the holder is on lease %x of %ds; want %x of 5s", third, ttl, second)
	}
	if err := cl.Release(ctx, time.UnixMilli(8000)); err != nil {
		t.Fatal(err)
	}
	if ttl, err := c.TimeToLive(ctx, second); err != nil || ttl.TTL != -1 {
		t.Fatalf("lease after Release: %+v, %v; want revoked", ttl, err)
	}
}

// TestKeys pins the key layout (operators read it with etcdctl) and checks
// that keys of another shape under the prefix are ignored.
func TestKeys(t *testing.T) {
	addr := testenv.Etcd().Require(t)
	c := testClient(t, addr)
	sp := testSpace(t, addr)
	prefix := sp.prefix
	w := sp.workers(c)
	ctx := t.Context()
	for _, k := range []string{"/3/x/holder", "/3/07/high", "/3/1/other", "/3/-1/high", "/30/0/holder", "/3/"} {
		if _, err := c.Put(ctx, prefix+k, "junk"); err != nil {
			t.Fatal(err)
		}
	}
	cl, err := w.Acquire(ctx, worker.Request{Datacenter: 3, Workers: 4, Owner: "o", TTL: testTTL, Reserve: time.UnixMilli(1234),
		Now: time.UnixMilli(1000), Contract: "c1", Quarantine: 1500 * time.Millisecond})
	if err != nil || cl.WorkerID() != 0 {
		t.Fatalf("Acquire = %v, %v; want worker 0", cl, err)
	}
	others, err := c.Get(ctx, prefix+"/3/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	var ns *mvccpb.KeyValue
	for _, kv := range others.Kvs {
		if string(kv.Key) == prefix+"/3/namespace" {
			ns = kv
		}
	}
	if ns == nil || ns.Lease != 0 {
		t.Fatalf("namespace record %v of datacenter 3", ns)
	}
	var rec map[string]any
	if err := json.Unmarshal(ns.Value, &rec); err != nil || len(rec) != 4 || len(rec["incarnation"].(string)) != 16 || rec["contract"] != "c1" ||
		rec["floor_ms"].(float64)-rec["initialised_ms"].(float64) != 1500 || cl.Previous() != time.UnixMilli(int64(rec["floor_ms"].(float64))).UTC() {
		t.Fatalf("namespace record %s (Previous %v): want {incarnation, contract c1, floor_ms = initialised_ms + 1.5s = Previous}", ns.Value, cl.Previous())
	}
	nearNow(t, "initialised", time.UnixMilli(int64(rec["initialised_ms"].(float64))))
	reg, err := c.Get(ctx, sp.registry+"/3")
	if err != nil || len(reg.Kvs) != 1 || reg.Kvs[0].Lease != 0 || string(reg.Kvs[0].Value) != `{"namespace":"`+prefix+`","contract":"c1"}` {
		t.Fatalf("registry entry of datacenter 3: %v, %v", reg, err)
	}
	resp, err := c.Get(ctx, prefix+"/3/0/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*mvccpb.KeyValue{}
	for _, kv := range resp.Kvs {
		got[strings.TrimPrefix(string(kv.Key), prefix)] = kv
	}
	h, hw := got["/3/0/holder"], got["/3/0/high"]
	if len(got) != 2 || h == nil || hw == nil || h.Lease == 0 || string(hw.Value) != "1234" || hw.Lease != 0 {
		t.Fatalf("keys of worker 3/0: %v", got)
	}
	var holder map[string]any
	if err := json.Unmarshal(h.Value, &holder); err != nil || len(holder) != 3 || holder["holder"] != "o" || holder["clock_ms"] != 1000.0 ||
		holder["expires_ms"].(float64) < float64(time.Now().Add(testTTL-5*time.Second).UnixMilli()) ||
		holder["expires_ms"].(float64) > float64(time.Now().Add(testTTL).UnixMilli()) {
		t.Fatalf("holder key %s: want {holder o, clock_ms 1000 (the request's Now), expires_ms a TTL after this machine's now}", h.Value)
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
	sp := testSpace(t, addr)
	const nodes = 24
	var clients [nodes]*Workers
	for i := range clients {
		clients[i] = sp.workers(testClient(t, addr))
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

// nearNow fails unless got is within a few seconds of now.
func nearNow(t *testing.T, what string, got time.Time) {
	t.Helper()
	if d := time.Since(got); d < -5*time.Second || d > 5*time.Second {
		t.Fatalf("%s = %v, want about now", what, got)
	}
}

// TestPeerClock: etcd has no clock, so a claim reports its peers' — the
// newest clock another live holder of the datacenter wrote to its holder
// key — read by Acquire and by every Renew.
func TestPeerClock(t *testing.T) {
	addr := testenv.Etcd().Require(t)
	c := testClient(t, addr)
	w := testSpace(t, addr).workers(c)
	ctx := t.Context()
	req := func(owner string, now time.Time) worker.Request {
		return worker.Request{Workers: 4, Owner: owner, TTL: testTTL, Now: now, Reserve: now.Add(time.Second)}
	}
	aNow := time.UnixMilli(time.Now().Add(-30 * time.Second).UnixMilli())
	a, err := w.Acquire(ctx, req("a", aNow))
	if err != nil {
		t.Fatal(err)
	}
	if at, _ := a.Clock(); !at.IsZero() {
		t.Fatalf("the only holder reports a clock %v; want none", at)
	}
	b, err := w.Acquire(ctx, req("b", time.Now()))
	if err != nil {
		t.Fatal(err)
	}
	within := func(what string, cl worker.Claim, want time.Time) {
		t.Helper()
		at, stale := cl.Clock()
		if at.Before(want) || at.After(want.Add(500*time.Millisecond)) || stale != testTTL {
			t.Fatalf("%s: Clock = %v, stale %v; want %v (+0.5s), stale about the TTL %v", what, at, stale, want, testTTL)
		}
	}
	within("after Acquire", b, aNow)

	// a renews with its clock 20s behind now: reserve − (Reserve − Now).
	aNow2 := time.UnixMilli(time.Now().Add(-20 * time.Second).UnixMilli())
	if err := a.Renew(ctx, testTTL, aNow2.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	kv, err := c.Get(ctx, w.keys().Holder(0, a.WorkerID()))
	if err != nil || len(kv.Kvs) != 1 || !strings.Contains(string(kv.Kvs[0].Value), fmt.Sprintf(`"clock_ms":%d`, aNow2.UnixMilli())) {
		t.Fatalf("a's holder key after its Renew: %v, %v; want clock_ms %d", kv, err, aNow2.UnixMilli())
	}
	if err := b.Renew(ctx, testTTL, time.Now().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	within("after b's Renew", b, aNow2)

	// A released holder's clock goes with it.
	if err := a.Release(ctx, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := b.Renew(ctx, testTTL, time.Now().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if at, _ := b.Clock(); !at.IsZero() {
		t.Fatalf("Clock = %v after the only peer left; want none", at)
	}
}

// TestResetRecognised: the ways etcd loses or rolls back a namespace under a
// holder, each recognised in Renew or Release with an error that names the
// namespace, the datacenter and what was found.
func TestResetRecognised(t *testing.T) {
	addr := testenv.Etcd().Require(t)
	req := worker.Request{Workers: 2, Owner: "holder", TTL: testTTL, Reserve: time.Now().Add(time.Second),
		Contract: "c", Quarantine: 3 * time.Second}
	setup := func(t *testing.T) (*connector, *Workers, *clientv3.Client, worker.Claim) {
		conn := &connector{shared: addr, space: testSpace(t, addr), endpoint: addr}
		c := testClient(t, addr)
		w := conn.workers(c)
		cl, err := w.Acquire(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		return conn, w, c, cl
	}
	t.Run("RecordDeletedAlone", func(t *testing.T) {
		// Only the record is lost (an operator's del of one key): the
		// holder's Renew re-initialises it, the slots and marks stay.
		_, w, c, cl := setup(t)
		if _, err := c.Delete(t.Context(), w.keys().Namespace(0)); err != nil {
			t.Fatal(err)
		}
		wantReset(t, w, cl.Renew(t.Context(), testTTL, time.Now().Add(time.Second)), "is gone", true)
		infos, err := w.List(t.Context(), 0)
		if err != nil || len(infos) != 1 || infos[0].Holder != "holder" {
			t.Fatalf("the re-initialisation touched the slots: %+v, %v", infos, err)
		}
		if ns, ok, err := w.Namespace(t.Context(), 0); err != nil || !ok || ns.Contract != "c" {
			t.Fatalf("Namespace = %+v, %v, %v", ns, ok, err)
		}
	})

	t.Run("RestoreFromBeforeAReset", func(t *testing.T) {
		// A copy from an older incarnation: restored under a holder of a
		// newer one, it is recognised by its earlier initialisation.
		conn, w, _, cl := setup(t)
		restore := conn.Snapshot(t)
		conn.Wipe(t)
		wantReset(t, w, cl.Renew(t.Context(), testTTL, time.Now().Add(time.Second)), "is gone", true)
		newer, ok, err := w.Namespace(t.Context(), 0)
		if err != nil || !ok {
			t.Fatal(ok, err)
		}
		r := req
		r.Owner = "newer"
		next, err := w.Acquire(t.Context(), r)
		if err != nil {
			t.Fatal(err)
		}
		if next.Previous().Before(newer.Floor) {
			t.Fatalf("Previous %v before the floor %v", next.Previous(), newer.Floor)
		}
		restore()
		wantReset(t, w, next.Release(t.Context(), time.Now()), "before the", true)
		again, _, err := w.Namespace(t.Context(), 0)
		if err != nil || again.Floor.Before(newer.Floor) || again.Incarnation == newer.Incarnation {
			t.Fatalf("after the second re-initialisation %+v, %v; want a new incarnation with a floor ≥ %v", again, err, newer.Floor)
		}
	})

	t.Run("MarkBelowStored", func(t *testing.T) {
		_, w, c, cl := setup(t)
		if _, err := c.Put(t.Context(), w.keys().High(0, cl.WorkerID()), "1000"); err != nil {
			t.Fatal(err)
		}
		wantReset(t, w, cl.Renew(t.Context(), testTTL, time.Now().Add(time.Second)), "high-water mark", true)
	})

	t.Run("MarkGone", func(t *testing.T) {
		_, w, c, cl := setup(t)
		if _, err := c.Delete(t.Context(), w.keys().High(0, cl.WorkerID())); err != nil {
			t.Fatal(err)
		}
		wantReset(t, w, cl.Release(t.Context(), time.Now()), "high-water mark", true)
	})

	t.Run("SecondHolderFindsItDone", func(t *testing.T) {
		// Two holders of the lost state: the first re-initialises, the
		// second finds a later incarnation and writes nothing.
		conn, w, _, cl := setup(t)
		r := req
		r.Owner = "second"
		cl2, err := w.Acquire(t.Context(), r)
		if err != nil {
			t.Fatal(err)
		}
		conn.Wipe(t)
		wantReset(t, w, cl.Renew(t.Context(), testTTL, time.Now().Add(time.Second)), "is gone", true)
		ns, _, _ := w.Namespace(t.Context(), 0)
		wantReset(t, w, cl2.Renew(t.Context(), testTTL, time.Now().Add(time.Second)), "another client found it first", false)
		if again, _, _ := w.Namespace(t.Context(), 0); again != ns {
			t.Fatalf("the second holder re-initialised again: %+v, then %+v", ns, again)
		}
	})

	t.Run("MarkRaisedByAnother", func(t *testing.T) {
		// Not a reset: an operator raised the mark. The holder goes on
		// from it.
		_, w, c, cl := setup(t)
		raised := time.Now().Add(time.Hour).UnixMilli()
		if _, err := c.Put(t.Context(), w.keys().High(0, cl.WorkerID()), strconv.FormatInt(raised, 10)); err != nil {
			t.Fatal(err)
		}
		if err := cl.Renew(t.Context(), testTTL, time.Now().Add(time.Second)); err != nil {
			t.Fatal(err)
		}
		if infos, err := w.List(t.Context(), 0); err != nil || infos[0].HighWater.UnixMilli() != raised {
			t.Fatalf("List = %+v, %v; want the raised mark kept", infos, err)
		}
	})
}

// wantReset fails unless err wraps worker.ErrReset and not ErrNotHeld, names
// w's prefix, datacenter 0 and found, and says whether it re-initialised the
// record.
func wantReset(t *testing.T, w *Workers, err error, found string, reinit bool) {
	t.Helper()
	t.Log(err)
	if !errors.Is(err, worker.ErrReset) || errors.Is(err, worker.ErrNotHeld) {
		t.Fatalf("got %v; want ErrReset, not ErrNotHeld", err)
	}
	for _, s := range []string{w.Prefix(), "datacenter 0", found} {
		if !strings.Contains(err.Error(), s) {
			t.Fatalf("error %q does not say %q", err, s)
		}
	}
	if got := strings.Contains(err.Error(), "the namespace is re-initialised"); got != reinit {
		t.Fatalf("error %q: re-initialised %v, want %v", err, got, reinit)
	}
}
