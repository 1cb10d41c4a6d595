package consul

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	consulapi "github.com/hashicorp/consul/api"

	"github.com/flakeid/flakeid/internal/faultnet"
	"github.com/flakeid/flakeid/internal/testenv"
	"github.com/flakeid/flakeid/worker"
	"github.com/flakeid/flakeid/worker/protocol"
	"github.com/flakeid/flakeid/worker/workertest"
)

// testTTL is the lease TTL of the tests: sessions of 1s, the minimum the
// tests' agent (session_ttl_min = "1s") accepts.
const testTTL = 2 * time.Second

// testLockDelay is the lock-delay of the conformance suite's coordinators:
// its ExpiryAndTakeover takes the id over 1.5×TTL after the Acquire, and
// Consul frees it at TTL, then the lock-delay (the other tests use the
// default).
const testLockDelay = 300 * time.Millisecond

// testClient is a client of the Consul agent at addr with its own
// connections, closed when the test ends.
func testClient(t testing.TB, addr string) *consulapi.Client {
	t.Helper()
	cfg := consulapi.DefaultConfig()
	cfg.Address, cfg.Scheme, cfg.Token, cfg.TokenFile = addr, "http", "", ""
	c, err := consulapi.NewClient(cfg)
	if err != nil {
		t.Fatalf("consul client of %s: %v", addr, err)
	}
	t.Cleanup(cfg.Transport.CloseIdleConnections)
	return c
}

// withRegistry moves a coordinator's datacenter registry to prefix: a
// test's own on the shared agent, as a Consul cluster of its own would have
// (no URL has a way to).
func withRegistry(prefix string) Option {
	return func(w *Workers) { w.registry = prefix }
}

// requireAgent checks that the agent answers with a leader and accepts the
// tests' session TTLs.
func requireAgent(t *testing.T) string {
	t.Helper()
	addr := testenv.Consul().Require(t)
	c := testClient(t, addr)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for {
		leader, err := c.Status().LeaderWithQueryOptions(qo(ctx))
		if err == nil && leader != "" {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the Consul agent at %s has no leader: %q, %v", addr, leader, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return addr
}

// space is one test's keys on Consul: its namespace (prefix), another
// namespace beside it, and the datacenter registry they share, all under one
// random base deleted when the test ends, with every session named after it.
type space struct {
	base, prefix, other, registry string
}

// testSpace makes a fresh space on the agent at addr.
func testSpace(t testing.TB, addr string) space {
	t.Helper()
	var b [8]byte
	_, _ = rand.Read(b[:])
	base := "flakeid-test/" + hex.EncodeToString(b[:])
	admin := testClient(t, addr)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := admin.KV().DeleteTree(base+"/", wo(ctx)); err != nil {
			t.Errorf("deleting %s/: %v", base, err)
		}
		sessions, _, err := admin.Session().List(qo(ctx))
		if err != nil {
			t.Errorf("listing sessions: %v", err)
		}
		for _, s := range sessions {
			if strings.Contains(s.Name, base) {
				_, _ = admin.Session().Destroy(s.ID, wo(ctx))
			}
		}
	})
	return space{base: base, prefix: base + "/workers", other: base + "/other", registry: base + "/datacenters"}
}

// workers is a coordinator of the space's namespace through c.
func (s space) workers(c *consulapi.Client, opts ...Option) *Workers {
	return NewWorkers(c, s.prefix, append([]Option{withRegistry(s.registry)}, opts...)...)
}

// connector makes the clients of one conformance test: every client talks
// to the shared agent, the faulty one through a faultnet proxy that cuts
// it off alone (the agent runs on, and expires its sessions).
type connector struct {
	addr string
	space
	opts []Option

	mu    sync.Mutex
	admin *consulapi.Client
}

func (c *connector) Connect(t *testing.T) worker.Coordinator {
	return c.workers(testClient(t, c.addr), c.opts...)
}

func (c *connector) ConnectFaulty(t *testing.T) (worker.Coordinator, workertest.Fault) {
	w, proxy := proxied(t, c.addr, c.space, c.opts...)
	return w, proxy
}

func (c *connector) adminClient(t *testing.T) *consulapi.Client {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.admin == nil {
		c.admin = testClient(t, c.addr)
	}
	return c.admin
}

// Wipe deletes the namespace's prefix and the test's registry, as `consul
// kv delete -recurse` would: the holders' sessions live on.
func (c *connector) Wipe(t *testing.T) {
	admin := c.adminClient(t)
	for _, p := range []string{c.prefix, c.registry} {
		if _, err := admin.KV().DeleteTree(p+"/", wo(t.Context())); err != nil {
			t.Fatalf("wiping %s/: %v", p, err)
		}
	}
}

// Snapshot copies the namespace's keys with their values. The restore
// deletes the prefix and puts the copies back. A Consul session cannot be
// put back (its id is made by the server), and a key can only be locked by a
// session that is live now, so the keys that were locked (holder and clock
// keys) are locked by a new session per old one, of the old session's TTL,
// never renewed: a restored holder key lapses as a holder that died at the
// restore would. (`consul snapshot restore` brings the old sessions back
// under their old ids, so there the old holder's session checks would still
// pass; the rollback is recognised by the record and the high-water mark
// either way.) The registry lies outside the namespace and is not part of
// the copy.
func (c *connector) Snapshot(t *testing.T) func() {
	admin := c.adminClient(t)
	kvs, _, err := admin.KV().List(c.prefix+"/", qo(t.Context()))
	if err != nil {
		t.Fatalf("copying %s/: %v", c.prefix, err)
	}
	ttls := map[string]time.Duration{}
	for _, kv := range kvs {
		if kv.Session == "" {
			continue
		}
		if _, ok := ttls[kv.Session]; ok {
			continue
		}
		ttls[kv.Session] = testTTL / 2
		if s, _, err := admin.Session().Info(kv.Session, qo(t.Context())); err == nil && s != nil {
			if d, err := time.ParseDuration(s.TTL); err == nil {
				ttls[kv.Session] = d
			}
		}
	}
	return func() {
		ctx := t.Context()
		w := NewWorkers(admin, c.prefix, c.opts...)
		sessions := map[string]string{}
		for old, ttl := range ttls {
			// A session of exactly the old TTL.
			id, _, err := w.createSession(ctx, ttl, "restore "+c.base)
			if err != nil {
				t.Fatalf("restoring %s/: creating a session: %v", c.prefix, err)
			}
			sessions[old] = id
		}
		// One transaction, as a restore is one step for the nodes: the
		// prefix deleted and the copy put back.
		var b txnb
		b.add(consulapi.KVDeleteTree, c.prefix+"/", nil, 0, "")
		for _, kv := range kvs {
			if kv.Session != "" {
				b.add(consulapi.KVLock, kv.Key, kv.Value, 0, sessions[kv.Session])
			} else {
				b.add(consulapi.KVSet, kv.Key, kv.Value, 0, "")
			}
		}
		if ok, resp, err := w.run(ctx, &b); err != nil || !ok {
			t.Fatalf("restoring %s/: putting the copy: %v, %s", c.prefix, err, txnErrors(resp))
		}
	}
}

// OtherNamespace is a client of the prefix beside the test's, sharing its
// registry.
func (c *connector) OtherNamespace(t *testing.T) worker.Coordinator {
	return NewWorkers(testClient(t, c.addr), c.other, append([]Option{withRegistry(c.registry)}, c.opts...)...)
}

func TestWorkersConformance(t *testing.T) {
	addr := requireAgent(t)
	workertest.Run(t, workertest.Harness{
		Open: func(t *testing.T) workertest.Connector {
			return &connector{addr: addr, space: testSpace(t, addr), opts: []Option{WithLockDelay(testLockDelay)}}
		},
		TTL: testTTL,
		// Consul ends a session up to twice its TTL after the last
		// renewal, and the lock-delay follows.
		Expiry: 2*testTTL + testLockDelay + 500*time.Millisecond,
	})
}

func BenchmarkWorkers(b *testing.B) {
	addr := testenv.Consul().Require(b)
	sp := testSpace(b, addr)
	workertest.Benchmark(b, func(b *testing.B) worker.Coordinator { return sp.workers(testClient(b, addr)) })
}

// proxied is a coordinator of the space on the agent at addr, reached
// through a faultnet proxy that the test can cut; the proxy closes when the
// test ends. A cut proxy holds every byte, so requests end by their
// contexts.
func proxied(t *testing.T, addr string, sp space, opts ...Option) (*Workers, *faultnet.Proxy) {
	t.Helper()
	proxy, err := faultnet.Listen(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	return sp.workers(testClient(t, proxy.Addr()), opts...), proxy
}

// TestPartitionLosesLeaseBeforeTakeover cuts a holder off the agent with a
// network partition (the agent runs on and expires its session): the holder
// must give its lease up before another node can take the id, and its
// requests held in the partition must change nothing when they arrive. The
// id must be taken within the stated failover: 2×TTL + lock-delay after the
// last renewal, plus a little.
func TestPartitionLosesLeaseBeforeTakeover(t *testing.T) {
	t.Parallel()
	addr := requireAgent(t)
	sp := testSpace(t, addr)
	faulty, proxy := proxied(t, addr, sp)
	workertest.Takeover{
		Faulty: faulty, Fault: proxy, Healthy: sp.workers(testClient(t, addr)),
		TTL: testTTL, Partition: true, Within: 2*testTTL + DefaultLockDelay + time.Second,
	}.Run(t)
}

// TestLateWritesAreFenced holds a former holder's Renew and a bare commit of
// its slot (with its session's renewal) in a partition until another node
// took the id over: when they arrive they must fail (ErrNotHeld; a lost race
// for the commit) and leave the new holder's slot alone.
func TestLateWritesAreFenced(t *testing.T) {
	t.Parallel()
	addr := requireAgent(t)
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
	// What a Renew that read st would commit: the slot renewed, its mark
	// raised to late.
	st, err := store{faulty}.Read(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	late, sl := base.Add(8*time.Hour), st.Slots[0]
	sl.HighMs, sl.Renewed = late.UnixMilli(), true
	next := st
	next.Slots = map[int64]protocol.Slot{0: sl}
	proxy.Cut()
	defer proxy.Heal()
	held := make(chan error, 2)
	go func() { held <- old.Renew(ctx, testTTL, late) }()
	go func() {
		// A bare commit of the slot, as if its read had got through just
		// before the partition.
		if err := (store{faulty}).Commit(ctx, st, next); !errors.Is(err, protocol.ErrConflict) {
			held <- fmt.Errorf("the bare commit: %w, want ErrConflict", err)
			return
		}
		held <- worker.ErrNotHeld
	}()

	req.Owner, req.Reserve = "new", newMark
	var cl worker.Claim
	for deadline := time.Now().Add(2*testTTL + DefaultLockDelay + time.Second); cl == nil; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the id did not become free within %v", 2*testTTL+DefaultLockDelay+time.Second)
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

// TestSessionDestroyedEndsClaim: an operator (or Consul) ends a holder's
// session; the holder key goes with it, the holder's next Renew fails with
// ErrNotHeld, and the next holder — after the lock-delay — starts above the
// old holder's reservation.
func TestSessionDestroyedEndsClaim(t *testing.T) {
	t.Parallel()
	addr := requireAgent(t)
	sp := testSpace(t, addr)
	admin := testClient(t, addr)
	w := sp.workers(testClient(t, addr))
	ctx := t.Context()
	mark := time.UnixMilli(time.Now().Add(time.Hour).UnixMilli())
	cl, err := w.Acquire(ctx, worker.Request{Workers: 1, Owner: "a", TTL: testTTL, Reserve: mark})
	if err != nil {
		t.Fatal(err)
	}
	session := sessionOf(t, admin, w, 0)
	if _, err := admin.Session().Destroy(session, wo(ctx)); err != nil {
		t.Fatal(err)
	}
	destroyed := time.Now()
	if kv, _, err := admin.KV().Get(w.keys().Holder(0, 0), qo(ctx)); err != nil || kv != nil {
		t.Fatalf("holder key after the session was destroyed: %+v, %v; want it deleted (behavior delete)", kv, err)
	}
	err = cl.Renew(ctx, testTTL, mark.Add(time.Hour))
	if !errors.Is(err, worker.ErrNotHeld) || errors.Is(err, worker.ErrReset) {
		t.Fatalf("Renew after the session was destroyed: %v; want ErrNotHeld", err)
	}
	// The lock-delay keeps the id from a newcomer for a while.
	r := worker.Request{Workers: 1, Owner: "b", TTL: testTTL, Reserve: time.Now()}
	var next worker.Claim
	for next == nil {
		next, err = w.Acquire(ctx, r)
		switch {
		case err == nil:
		case !errors.Is(err, worker.ErrExhausted):
			t.Fatal(err)
		case time.Since(destroyed) > DefaultLockDelay+time.Second:
			t.Fatalf("the id still not free %v after its session ended: %v", time.Since(destroyed), err)
		default:
			if !strings.Contains(err.Error(), "lock-delay") {
				t.Fatalf("Acquire during the lock-delay: %v; want it to say so", err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	if d := time.Since(destroyed); d < DefaultLockDelay-100*time.Millisecond {
		t.Fatalf("taken %v after the session ended, within the lock-delay %v", d, DefaultLockDelay)
	}
	if !next.Previous().Equal(mark) {
		t.Fatalf("the next holder starts at %v, want the old reservation %v", next.Previous(), mark)
	}
	if err := cl.Release(ctx, mark.Add(2*time.Hour)); !errors.Is(err, worker.ErrNotHeld) {
		t.Fatalf("the old holder's Release: %v, want ErrNotHeld", err)
	}
	if infos, err := w.List(ctx, 0); err != nil || infos[0].Holder != "b" || !infos[0].HighWater.Equal(mark) {
		t.Fatalf("List = %+v, %v; want held by b with the old mark", infos, err)
	}
}

// sessionOf is the session that locks the holder key of worker id in
// datacenter 0 of w, read through c ("" when none does).
func sessionOf(t *testing.T, c *consulapi.Client, w *Workers, id int64) string {
	t.Helper()
	kv, _, err := c.KV().Get(w.keys().Holder(0, id), qo(t.Context()))
	if err != nil {
		t.Fatal(err)
	}
	if kv == nil {
		return ""
	}
	return kv.Session
}

// TestSessionShape pins the sessions the coordinator creates: behavior
// delete, no health checks, the lock-delay asked for, and the lease TTL in
// whole seconds.
func TestSessionShape(t *testing.T) {
	t.Parallel()
	addr := requireAgent(t)
	sp := testSpace(t, addr)
	admin := testClient(t, addr)
	ctx := t.Context()
	for _, tc := range []struct {
		lease, want, delay time.Duration
	}{
		{testTTL, testTTL, DefaultLockDelay},
		{1500 * time.Millisecond, 2 * time.Second, 0},
		{5 * time.Second, 5 * time.Second, 2500 * time.Millisecond},
		{time.Second, time.Second, time.Second},
	} {
		w := sp.workers(testClient(t, addr), WithLockDelay(tc.delay))
		if tc.delay == DefaultLockDelay {
			w = sp.workers(testClient(t, addr)) // the default
		}
		cl, err := w.Acquire(ctx, worker.Request{Workers: 8, Owner: "o", TTL: tc.lease, Reserve: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		s, _, err := admin.Session().Info(sessionOf(t, admin, w, cl.WorkerID()), qo(ctx))
		if err != nil || s == nil {
			t.Fatalf("session info: %+v, %v", s, err)
		}
		if s.Behavior != "delete" || s.TTL != fmt.Sprintf("%ds", int(tc.want/time.Second)) || len(s.NodeChecks) != 0 ||
			len(s.ServiceChecks) != 0 || len(s.Checks) != 0 || s.LockDelay != tc.delay || !strings.Contains(s.Name, sp.prefix) {
			t.Fatalf("lease %v: session %+v; want behavior delete, TTL %v, no checks, lock-delay %v", tc.lease, s, tc.want, tc.delay)
		}
		h, _, err := admin.KV().Get(w.keys().Holder(0, cl.WorkerID()), qo(ctx))
		var v holderValue
		if err != nil || h == nil || h.Session != s.ID || json.Unmarshal(h.Value, &v) != nil || v.Owner != "o" || v.TTLMs != tc.lease.Milliseconds() {
			t.Fatalf("holder key %+v, %v", h, err)
		}
	}
}

// fakeAgent is an HTTP server that answers as a Consul agent with the
// default session_ttl_min of 10s would: transactions find nothing, and
// sessions shorter than 10s are refused with Consul's own message. It
// records the ACL tokens it was sent.
func fakeAgent(t *testing.T) (addr string, tokens func() []string) {
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("X-Consul-Token"))
		mu.Unlock()
		switch {
		case r.URL.Path == "/v1/kv/flakeid/workers/" || strings.HasPrefix(r.URL.Path, "/v1/kv/"):
			fmt.Fprint(rw, "[]")
		case r.URL.Path == "/v1/txn":
			var ops consulapi.TxnOps
			_ = json.NewDecoder(r.Body).Decode(&ops)
			var res consulapi.TxnResults
			for _, op := range ops {
				if op.KV != nil && op.KV.Verb == consulapi.KVGetOrEmpty {
					res = append(res, &consulapi.TxnResult{KV: &consulapi.KVPair{Key: op.KV.Key}})
				}
			}
			_ = json.NewEncoder(rw).Encode(consulapi.TxnResponse{Results: res})
		case r.URL.Path == "/v1/session/create":
			var body struct{ TTL string }
			_ = json.NewDecoder(r.Body).Decode(&body)
			d, _ := time.ParseDuration(body.TTL)
			if d < 10*time.Second {
				rw.WriteHeader(http.StatusInternalServerError)
				fmt.Fprintf(rw, "Invalid Session TTL '%d', must be between [10s=24h0m0s]", d)
				return
			}
			fmt.Fprint(rw, `{"ID": "adf4238a-882b-9ddc-4a9d-5b6758e4159e"}`)
		default:
			http.NotFound(rw, r)
		}
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://"), func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), seen...)
	}
}

// TestTTLRefused: a lease TTL the agent refuses sessions for fails Acquire
// with ErrInvalidConfig quoting the agent, and writes nothing. On an agent
// with Consul's default minimum of 10s, a 10s lease gets its 10s session.
func TestTTLRefused(t *testing.T) {
	t.Parallel()
	addr := requireAgent(t)
	sp := testSpace(t, addr)
	w := sp.workers(testClient(t, addr))
	ctx := t.Context()
	// Consul's maximum is 24h: a 49h lease is refused.
	_, err := w.Acquire(ctx, worker.Request{Workers: 1, Owner: "o", TTL: 49 * time.Hour, Reserve: time.Now()})
	if !errors.Is(err, worker.ErrInvalidConfig) || !strings.Contains(err.Error(), "Invalid Session TTL") || !strings.Contains(err.Error(), "49h") {
		t.Fatalf("Acquire with a 49h TTL: %v; want ErrInvalidConfig quoting the agent", err)
	}
	if infos, err := w.List(ctx, 0); err != nil || len(infos) != 0 {
		t.Fatalf("the refused Acquire wrote slots: %+v, %v", infos, err)
	}
	if _, ok, err := w.Namespace(ctx, 0); err != nil || ok {
		t.Fatalf("the refused Acquire wrote a namespace record: %v, %v", ok, err)
	}

	fake, _ := fakeAgent(t)
	fw := NewWorkers(testClient(t, fake), "")
	_, err = fw.Acquire(ctx, worker.Request{Workers: 1, Owner: "o", TTL: 2 * time.Second, Reserve: time.Now()})
	if !errors.Is(err, worker.ErrInvalidConfig) || !strings.Contains(err.Error(), "[10s=24h0m0s]") || !strings.Contains(err.Error(), "session_ttl_min") {
		t.Fatalf("Acquire with a 2s TTL on an agent with a 10s minimum: %v; want ErrInvalidConfig quoting the agent", err)
	}
	if _, ttl, err := fw.createSession(ctx, 10*time.Second, "x"); err != nil || ttl != 10*time.Second {
		t.Fatalf("a 10s lease on an agent with a 10s minimum: session of %v, %v; want the whole 10s", ttl, err)
	}
}

// TestOpenWorkersURL: the coordinator URL's parts and query keys, and which
// token wins, on a fake agent.
func TestOpenWorkersURL(t *testing.T) {
	fake, tokens := fakeAgent(t)
	ctx := t.Context()
	open := func(raw string) (*Workers, error) {
		t.Helper()
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		return OpenWorkers(ctx, u)
	}
	for _, tc := range []struct{ url, want string }{
		{"consul://" + fake + "/p?ttl=3s", `"ttl"`},
		{"consul://" + fake + "/p?lock_delay=1s&Token=x", `"Token"`},
		{"consul://" + fake + "/p?lock_delay=2m", "lock_delay"},
		{"consul://" + fake + "/p?lock_delay=-1s", "lock_delay"},
		{"consul://" + fake + "/p?lock_delay=x", "lock_delay"},
		{"consul://" + fake + "/p?registry=/", "registry= is not accepted"},
		{"consul://" + fake + "/p?registry=" + DefaultRegistry, DefaultRegistry},
		{"consul://" + fake + "/p?token=a&token=b", "token given 2 times"},
		{"consul://" + fake + "/p?token=secret&x=1", `"x"`},
		{"etcd://" + fake + "/p", "scheme"},
		{"consul:///p", "host"},
		{"consul://u:secret@" + fake + "/p", "user information"},
	} {
		w, err := open(tc.url)
		if err == nil {
			w.Close()
			t.Errorf("OpenWorkers(%s) succeeded", tc.url)
			continue
		}
		// The caller shows the URL (redacted) before the error.
		if !errors.Is(err, worker.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "secret") ||
			strings.Contains(err.Error(), fake) {
			t.Errorf("OpenWorkers(%s): %v; want ErrInvalidConfig saying %s (and not the URL)", tc.url, err, tc.want)
		}
	}

	t.Setenv("CONSUL_HTTP_TOKEN", "from-env")
	t.Setenv("CONSUL_HTTP_ADDR", "127.0.0.1:1")
	w, err := open("consul://" + fake + "/a/b/?lock_delay=2500ms&token=from-url")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if w.Prefix() != "a/b" || w.Registry() != DefaultRegistry || w.lockDelay != 2500*time.Millisecond {
		t.Fatalf("prefix %q, registry %q, lock-delay %v", w.Prefix(), w.Registry(), w.lockDelay)
	}
	if got := tokens(); len(got) == 0 || got[len(got)-1] != "from-url" {
		t.Fatalf("tokens sent %q; want the URL's", got)
	}
	if u, _ := url.Parse("consuls://consul.example.com/p"); true {
		// No port: Consul's HTTPS port; the check fails, naming it.
		ctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
		if _, err := OpenWorkers(ctx, u); !errors.Is(err, worker.ErrUnavailable) || !strings.Contains(err.Error(), "consul.example.com:8501") {
			t.Fatalf("OpenWorkers(%s): %v; want ErrUnavailable naming port 8501", u, err)
		}
	}
	w2, err := open("consul://" + fake)
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Close()
	if w2.Prefix() != DefaultPrefix || w2.Registry() != DefaultRegistry || w2.lockDelay != DefaultLockDelay {
		t.Fatalf("defaults: prefix %q, registry %q, lock-delay %v", w2.Prefix(), w2.Registry(), w2.lockDelay)
	}
	if got := tokens(); got[len(got)-1] != "from-env" {
		t.Fatalf("tokens sent %q; want CONSUL_HTTP_TOKEN without token=", got)
	}
}

// TestOpenWorkers opens a coordinator of a real Consul from its URL and
// leases through it; an agent that does not answer is unavailable.
func TestOpenWorkers(t *testing.T) {
	t.Parallel()
	addr := requireAgent(t)
	sp := testSpace(t, addr)
	open := func(ctx context.Context, raw string, opts ...Option) (*Workers, error) {
		t.Helper()
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		return OpenWorkers(ctx, u, opts...)
	}
	w, err := open(t.Context(), "consul://"+addr+"/"+sp.prefix+"/")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if w.Prefix() != sp.prefix || w.Registry() != DefaultRegistry {
		t.Fatalf("Prefix, Registry = %q, %q; want %q, %q", w.Prefix(), w.Registry(), sp.prefix, DefaultRegistry)
	}
	// The shared agent's registry is other tests' too: the smoke test
	// claims its datacenter in the test's own.
	withRegistry(sp.registry)(w)
	if d := NewWorkers(nil, ""); d.Prefix() != DefaultPrefix || d.Registry() != DefaultRegistry || d.lockDelay != DefaultLockDelay {
		t.Fatalf("defaults: Prefix, Registry = %q, %q", d.Prefix(), d.Registry())
	}
	workertest.Smoke(t, w, testTTL)
	// An option comes after the URL's.
	if w2, err := open(t.Context(), "consul://"+addr+"/"+sp.prefix+"?lock_delay=3s", WithLockDelay(2*time.Second)); err != nil || w2.lockDelay != 2*time.Second {
		t.Fatalf("OpenWorkers(lock_delay=3s, WithLockDelay(2s)): %v; want the option's lock-delay", err)
	} else {
		w2.Close()
	}

	// A closed port refuses at once; a black hole takes the deadline.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	start := time.Now()
	if w, err := open(ctx, "consul://"+dead); err == nil {
		w.Close()
		t.Fatal("OpenWorkers of a closed port succeeded")
	} else if !errors.Is(err, worker.ErrUnavailable) || !strings.Contains(err.Error(), dead) || time.Since(start) > time.Second {
		t.Fatalf("OpenWorkers of a closed port: %v after %v; want ErrUnavailable naming the address, at once", err, time.Since(start))
	}
	proxy, err := faultnet.Listen(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	proxy.Cut()
	defer proxy.Heal()
	ctx, cancel = context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	start = time.Now()
	if w, err := open(ctx, "consul://"+proxy.Addr()); err == nil {
		w.Close()
		t.Fatal("OpenWorkers through a cut link succeeded")
	} else if !errors.Is(err, worker.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > time.Second {
		t.Fatalf("OpenWorkers through a cut link: %v after %v; want ErrUnavailable and the deadline", err, time.Since(start))
	}
}

// TestUnavailable: a coordinator that cannot reach Consul fails with
// ErrUnavailable and the context's error.
func TestUnavailable(t *testing.T) {
	t.Parallel()
	addr := requireAgent(t)
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
	_, _, err = w.Namespace(short(), 0)
	check("Namespace", err)
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

// TestRenewLongerTTL: a Renew with a TTL longer than Consul keeps the
// session moves the holder key to a new session made for it.
func TestRenewLongerTTL(t *testing.T) {
	t.Parallel()
	addr := requireAgent(t)
	admin := testClient(t, addr)
	w := testSpace(t, addr).workers(testClient(t, addr))
	ctx := t.Context()
	cl, err := w.Acquire(ctx, worker.Request{Workers: 1, Owner: "o", TTL: testTTL, Reserve: time.UnixMilli(5000)})
	if err != nil {
		t.Fatal(err)
	}
	ttlOf := func(session string) time.Duration {
		t.Helper()
		se, _, err := admin.Session().Info(session, qo(ctx))
		if err != nil || se == nil {
			t.Fatalf("session %s: %+v, %v", session, se, err)
		}
		d, _ := time.ParseDuration(se.TTL)
		return d
	}
	first := sessionOf(t, admin, w, 0)
	if got := ttlOf(first); got != testTTL {
		t.Fatalf("a %v lease has a %v session, want %v", testTTL, got, testTTL)
	}
	// A Renew with the same TTL keeps the session.
	if err := cl.Renew(ctx, testTTL, time.UnixMilli(5500)); err != nil || sessionOf(t, admin, w, 0) != first {
		t.Fatalf("Renew with the same TTL: %v; session %s, was %s", err, sessionOf(t, admin, w, 0), first)
	}
	if err := cl.Renew(ctx, 6*time.Second, time.UnixMilli(6000)); err != nil {
		t.Fatal(err)
	}
	moved := sessionOf(t, admin, w, 0)
	if moved == first || moved == "" || ttlOf(moved) != 6*time.Second {
		t.Fatalf("after a 6s Renew the holder key is locked by session %q (was %s)", moved, first)
	}
	if s, _, err := admin.Session().Info(first, qo(ctx)); err != nil || s != nil {
		t.Fatalf("old session: %+v, %v; want destroyed", s, err)
	}
	infos, err := w.List(ctx, 0)
	if err != nil || len(infos) != 1 || infos[0].Holder != "o" || !infos[0].HighWater.Equal(time.UnixMilli(6000)) ||
		time.Until(infos[0].Expires) < 5*time.Second || time.Until(infos[0].Expires) > 6*time.Second {
		t.Fatalf("List = %+v, %v; want held by o for 5–6s more, high-water 6s", infos, err)
	}
	if err := cl.Renew(ctx, time.Second, time.UnixMilli(7000)); err != nil || sessionOf(t, admin, w, 0) != moved {
		t.Fatalf("Renew with a shorter TTL: %v; session %s, want %s kept", err, sessionOf(t, admin, w, 0), moved)
	}
	if err := cl.Release(ctx, time.UnixMilli(8000)); err != nil {
		t.Fatal(err)
	}
	if s, _, err := admin.Session().Info(moved, qo(ctx)); err != nil || s != nil {
		t.Fatalf("session after Release: %+v, %v; want destroyed", s, err)
	}
	// Released keys leave no lock-delay behind: the id is free at once.
	if _, err := w.Acquire(ctx, worker.Request{Workers: 1, Owner: "p", TTL: testTTL, Reserve: time.Now()}); err != nil {
		t.Fatalf("Acquire right after a Release: %v", err)
	}
}

// TestKeys pins the key layout (operators read it with `consul kv get`)
// and checks that keys of another shape under the prefix are ignored.
func TestKeys(t *testing.T) {
	t.Parallel()
	addr := requireAgent(t)
	c := testClient(t, addr)
	sp := testSpace(t, addr)
	prefix := sp.prefix
	w := sp.workers(c)
	ctx := t.Context()
	for _, k := range []string{"/3/x/holder", "/3/07/high", "/3/1/other", "/3/-1/high", "/30/0/holder", "/3/"} {
		if _, err := c.KV().Put(&consulapi.KVPair{Key: prefix + k, Value: []byte("junk")}, wo(ctx)); err != nil {
			t.Fatal(err)
		}
	}
	cl, err := w.Acquire(ctx, worker.Request{Datacenter: 3, Workers: 4, Owner: "o", TTL: testTTL, Reserve: time.UnixMilli(1234),
		Now: time.UnixMilli(1000), Contract: "c1", Quarantine: 1500 * time.Millisecond})
	if err != nil || cl.WorkerID() != 0 {
		t.Fatalf("Acquire = %v, %v; want worker 0", cl, err)
	}
	ns, _, err := c.KV().Get(prefix+"/3/namespace", qo(ctx))
	if err != nil || ns == nil || ns.Session != "" {
		t.Fatalf("namespace record of datacenter 3: %+v, %v", ns, err)
	}
	var rec map[string]any
	if err := json.Unmarshal(ns.Value, &rec); err != nil || len(rec) != 4 || len(rec["incarnation"].(string)) != 16 || rec["contract"] != "c1" ||
		rec["floor_ms"].(float64)-rec["initialised_ms"].(float64) != 1500 || cl.Previous() != time.UnixMilli(int64(rec["floor_ms"].(float64))).UTC() {
		t.Fatalf("namespace record %s (Previous %v): want {incarnation, contract c1, floor_ms = initialised_ms + 1.5s = Previous}", ns.Value, cl.Previous())
	}
	nearNow(t, "initialised", time.UnixMilli(int64(rec["initialised_ms"].(float64))))
	reg, _, err := c.KV().Get(sp.registry+"/3", qo(ctx))
	if err != nil || reg == nil || reg.Session != "" || string(reg.Value) != `{"namespace":"`+prefix+`","contract":"c1"}` {
		t.Fatalf("registry entry of datacenter 3: %+v, %v", reg, err)
	}
	slot, _, err := c.KV().List(prefix+"/3/0/", qo(ctx))
	if err != nil || len(slot) != 2 {
		t.Fatalf("keys of worker 3/0: %+v, %v", slot, err)
	}
	// The holder key: owner and TTL (what an older flakeid reads), the
	// lease's end by the holder's clock, and the node's clock (req.Now).
	h, hw := slot[1], slot[0] // in key order
	var v map[string]any
	if h.Key != prefix+"/3/0/holder" || h.Session == "" || json.Unmarshal(h.Value, &v) != nil || len(v) != 4 || v["owner"] != "o" ||
		v["ttl_ms"] != 2000.0 || v["clock_ms"] != 1000.0 || hw.Key != prefix+"/3/0/high" || string(hw.Value) != "1234" || hw.Session != "" {
		t.Fatalf("keys of worker 3/0: %s = %s, %s = %s", h.Key, h.Value, hw.Key, hw.Value)
	}
	nearNow(t, "the lease's end", time.UnixMilli(int64(v["expires_ms"].(float64))))
	infos, err := w.List(ctx, 3)
	// Expires is by the lister's clock, not the holder's (1000 here).
	if err != nil || len(infos) != 1 || infos[0].Worker != 0 || infos[0].Holder != "o" ||
		time.Until(infos[0].Expires) < time.Second || time.Until(infos[0].Expires) > 2*time.Second {
		t.Fatalf("List(3) = %+v, %v; want worker 0 only, expiring the 2s TTL from now", infos, err)
	}

	// Garbage where a record, a mark or a holder must be is an error
	// naming the key, never a panic.
	for _, tc := range []struct{ key, value string }{
		{prefix + "/4/namespace", "{not json"},
		{prefix + "/4/0/high", "soon"},
	} {
		if _, err := c.KV().Put(&consulapi.KVPair{Key: tc.key, Value: []byte(tc.value)}, wo(ctx)); err != nil {
			t.Fatal(err)
		}
		_, err := w.Acquire(ctx, worker.Request{Datacenter: 4, Workers: 4, Owner: "o", TTL: testTTL, Reserve: time.Now()})
		if !errors.Is(err, worker.ErrUnavailable) || !strings.Contains(err.Error(), tc.key) {
			t.Fatalf("Acquire with %s = %q: %v; want ErrUnavailable naming the key", tc.key, tc.value, err)
		}
		if _, err := c.KV().Delete(tc.key, wo(ctx)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.KV().Put(&consulapi.KVPair{Key: prefix + "/3/1/holder", Value: []byte("x")}, wo(ctx)); err != nil {
		t.Fatal(err)
	}
	if _, err := w.List(ctx, 3); !errors.Is(err, worker.ErrUnavailable) || !strings.Contains(err.Error(), prefix+"/3/1/holder") {
		t.Fatalf("List with a corrupt holder key: %v", err)
	}
	if _, err := w.Acquire(ctx, worker.Request{Datacenter: 3, Workers: 2, Owner: "p", TTL: testTTL, Reserve: time.Now(), Contract: "c1"}); !errors.Is(err, worker.ErrUnavailable) {
		t.Fatalf("Acquire with a corrupt holder key: %v", err)
	}
	// An unlocked holder key is stale: Acquire takes the slot over.
	if _, err := c.KV().Put(&consulapi.KVPair{Key: prefix + "/3/1/holder", Value: []byte(`{"owner":"gone","ttl_ms":1000}`)}, wo(ctx)); err != nil {
		t.Fatal(err)
	}
	cl2, err := w.Acquire(ctx, worker.Request{Datacenter: 3, Workers: 2, Owner: "p", TTL: testTTL, Reserve: time.Now(), Contract: "c1"})
	if err != nil || cl2.WorkerID() != 1 {
		t.Fatalf("Acquire over an unlocked holder key: %v, %v; want worker 1", cl2, err)
	}
}

// TestHerd: many nodes starting at once all pick the same lowest free id,
// and all but one lose each round; every one must still get an id.
func TestHerd(t *testing.T) {
	t.Parallel()
	addr := requireAgent(t)
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
	if len(seen) != nodes {
		t.Fatalf("%d nodes got ids, want %d", len(seen), nodes)
	}
	// Every session left is one of a claim: the losers' were destroyed.
	sessions, _, err := testClient(t, addr).Session().List(qo(t.Context()))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, s := range sessions {
		if strings.Contains(s.Name, sp.prefix) {
			n++
		}
	}
	if n != nodes {
		t.Fatalf("%d sessions left for %d claims", n, nodes)
	}
}

func TestRounding(t *testing.T) {
	for _, tc := range []struct {
		lease time.Duration
		want  time.Duration
	}{
		{time.Second, time.Second},
		{1500 * time.Millisecond, 2 * time.Second},
		{2 * time.Second, 2 * time.Second},
		{10 * time.Second, 10 * time.Second},
		{time.Nanosecond, time.Second},
	} {
		// The session never ends sooner than the lease: Consul's TTL is a
		// lower bound.
		if got := wholeSeconds(tc.lease); got != tc.want || got < tc.lease {
			t.Errorf("wholeSeconds(%v) = %v, want %v", tc.lease, got, tc.want)
		}
	}
}

// nearNow fails unless got is within a few seconds of now.
func nearNow(t *testing.T, what string, got time.Time) {
	t.Helper()
	if d := time.Since(got); d < -5*time.Second || d > 5*time.Second {
		t.Fatalf("%s = %v, want about now", what, got)
	}
}

// TestPeerClock: Consul has no clock a client can read, so a claim reports
// its peers' — the newest clock another live holder of the datacenter wrote
// — as its Acquire or last Renew read it, stale by PeerAge.
func TestPeerClock(t *testing.T) {
	t.Parallel()
	addr := requireAgent(t)
	c := testClient(t, addr)
	w := testSpace(t, addr).workers(c)
	ctx := t.Context()
	req := func(owner string, now time.Time) worker.Request {
		return worker.Request{Workers: 4, Owner: owner, TTL: testTTL, Now: now, Reserve: now.Add(time.Second)}
	}
	// stale: the lease TTL + twice the 1s session TTL.
	const stale = 3 * testTTL // the lease TTL + twice the session's
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
	within := func(what string, cl worker.Claim, want time.Time, slack time.Duration) {
		t.Helper()
		at, st := cl.Clock()
		if at.Before(want) || at.After(want.Add(slack)) || st < stale || st > stale+time.Second {
			t.Fatalf("%s: Clock = %v, stale %v; want %v (+%v), stale about %v", what, at, st, want, slack, stale)
		}
	}
	within("after Acquire", b, aNow, 0)

	// a renews with its clock 20s behind now: reserve − (Reserve − Now).
	aNow2 := time.UnixMilli(time.Now().Add(-20 * time.Second).UnixMilli())
	if err := a.Renew(ctx, testTTL, aNow2.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	kv, _, err := c.KV().Get(w.keys().Holder(0, a.WorkerID()), qo(ctx))
	var v holderValue
	if err != nil || kv == nil || json.Unmarshal(kv.Value, &v) != nil || v.ClockMs != aNow2.UnixMilli() {
		t.Fatalf("a's holder key after its Renew: %+v, %v; want its clock %d", kv, err, aNow2.UnixMilli())
	}
	// Every Renew reads the peers' clocks afresh.
	if err := b.Renew(ctx, testTTL, time.Now().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	within("after b's Renew", b, aNow2, 0)

	// A released holder's clock goes with its holder key.
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

// TestIndexCoincidence: Consul counts its indexes from 1 again after it
// lost its data, so an index Acquire read may name another value by the
// time its transaction runs. Here the read is doctored to show a lower mark
// under the real index: the claim's check-and-set passes, the values it
// returns give the coincidence away, and the real, higher mark must be put
// back and be the one the holder starts from.
func TestIndexCoincidence(t *testing.T) {
	t.Parallel()
	addr := requireAgent(t)
	sp := testSpace(t, addr)
	w := sp.workers(testClient(t, addr))
	ctx := t.Context()
	high := time.UnixMilli(time.Now().Add(time.Hour).UnixMilli())
	first, err := w.Acquire(ctx, worker.Request{Workers: 1, Owner: "first", TTL: testTTL, Reserve: high})
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Release(ctx, high); err != nil {
		t.Fatal(err)
	}
	doctored := 0
	w.afterRead = func(kvs map[string]*consulapi.KVPair) {
		if kv := kvs[w.keys().High(0, 0)]; kv != nil && doctored == 0 {
			kv.Value = []byte(strconv.FormatInt(high.Add(-30*time.Minute).UnixMilli(), 10))
			doctored++
		}
	}
	cl, err := w.Acquire(ctx, worker.Request{Workers: 1, Owner: "second", TTL: testTTL, Reserve: time.Now()})
	if doctored != 1 {
		t.Fatalf("the read was doctored %d times", doctored)
	}
	if err != nil {
		t.Fatal(err)
	}
	if !cl.Previous().Equal(high) {
		t.Fatalf("Previous = %v after an index coincidence; want the real mark %v", cl.Previous(), high)
	}
	if infos, err := w.List(ctx, 0); err != nil || !infos[0].HighWater.Equal(high) || infos[0].Holder != "second" {
		t.Fatalf("List = %+v, %v; want the mark %v kept", infos, err, high)
	}
}

// TestRaceBetweenReadAndClaim: another node takes the id Acquire picked
// and releases it with a higher mark between Acquire's read and its claim.
// The claim must not go through on what it read: it starts from the newer
// mark.
func TestRaceBetweenReadAndClaim(t *testing.T) {
	t.Parallel()
	addr := requireAgent(t)
	sp := testSpace(t, addr)
	w, other := sp.workers(testClient(t, addr)), sp.workers(testClient(t, addr))
	ctx := t.Context()
	m1 := time.UnixMilli(time.Now().Add(time.Hour).UnixMilli())
	m2 := m1.Add(time.Hour)
	first, err := w.Acquire(ctx, worker.Request{Workers: 1, Owner: "first", TTL: testTTL, Reserve: m1})
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Release(ctx, m1); err != nil {
		t.Fatal(err)
	}
	raced := false
	w.afterRead = func(map[string]*consulapi.KVPair) {
		if raced {
			return
		}
		raced = true
		cl, err := other.Acquire(ctx, worker.Request{Workers: 1, Owner: "racer", TTL: testTTL, Reserve: m1})
		if err != nil {
			t.Error(err)
			return
		}
		if err := cl.Release(ctx, m2); err != nil {
			t.Error(err)
		}
	}
	cl, err := w.Acquire(ctx, worker.Request{Workers: 1, Owner: "late", TTL: testTTL, Reserve: time.Now()})
	if err != nil || !raced {
		t.Fatalf("Acquire: %v (raced %v)", err, raced)
	}
	if !cl.Previous().Equal(m2) {
		t.Fatalf("Previous = %v; want the racer's final mark %v", cl.Previous(), m2)
	}
	if infos, err := w.List(ctx, 0); err != nil || !infos[0].HighWater.Equal(m2) || infos[0].Holder != "late" {
		t.Fatalf("List = %+v, %v; want held by late with the mark %v", infos, err, m2)
	}
}

// TestResetRecognised: the ways Consul loses or rolls back a namespace
// under a holder, each recognised in Renew or Release with an error that
// names the namespace, the datacenter and what was found.
func TestResetRecognised(t *testing.T) {
	t.Parallel()
	addr := requireAgent(t)
	req := worker.Request{Workers: 2, Owner: "holder", TTL: testTTL, Reserve: time.Now().Add(time.Second),
		Contract: "c", Quarantine: 3 * time.Second}
	setup := func(t *testing.T) (*connector, *Workers, *consulapi.Client, worker.Claim) {
		t.Parallel()
		conn := &connector{addr: addr, space: testSpace(t, addr)}
		c := testClient(t, addr)
		w := conn.workers(c)
		cl, err := w.Acquire(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		return conn, w, c, cl
	}
	put := func(t *testing.T, c *consulapi.Client, key, value string) {
		t.Helper()
		if _, err := c.KV().Put(&consulapi.KVPair{Key: key, Value: []byte(value)}, wo(t.Context())); err != nil {
			t.Fatal(err)
		}
	}
	del := func(t *testing.T, c *consulapi.Client, key string) {
		t.Helper()
		if _, err := c.KV().Delete(key, wo(t.Context())); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("RecordDeletedAlone", func(t *testing.T) {
		// Only the record is lost (an operator's delete of one key): the
		// holder's Renew re-initialises it, the slots and marks stay.
		_, w, c, cl := setup(t)
		del(t, c, w.keys().Namespace(0))
		wantReset(t, w, cl.Renew(t.Context(), testTTL, time.Now().Add(time.Second)), "is gone", true)
		infos, err := w.List(t.Context(), 0)
		if err != nil || len(infos) != 1 || infos[0].Holder != "holder" {
			t.Fatalf("the re-initialisation touched the slots: %+v, %v", infos, err)
		}
		if ns, ok, err := w.Namespace(t.Context(), 0); err != nil || !ok || ns.Contract != "c" {
			t.Fatalf("Namespace = %+v, %v, %v", ns, ok, err)
		}
	})

	t.Run("RegistryRecreated", func(t *testing.T) {
		// Everything lost: the re-initialisation writes the registry
		// entry again, so that another namespace cannot take the
		// datacenter meanwhile.
		conn, w, c, cl := setup(t)
		conn.Wipe(t)
		wantReset(t, w, cl.Renew(t.Context(), testTTL, time.Now().Add(time.Second)), "is gone", true)
		reg, _, err := c.KV().Get(w.keys().Registration(0), qo(t.Context()))
		if err != nil || reg == nil || string(reg.Value) != `{"namespace":"`+w.Prefix()+`","contract":"c"}` {
			t.Fatalf("registry entry after the reset: %+v, %v", reg, err)
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
		put(t, c, w.keys().High(0, cl.WorkerID()), "1000")
		wantReset(t, w, cl.Renew(t.Context(), testTTL, time.Now().Add(time.Second)), "high-water mark", true)
	})

	t.Run("MarkGone", func(t *testing.T) {
		_, w, c, cl := setup(t)
		del(t, c, w.keys().High(0, cl.WorkerID()))
		wantReset(t, w, cl.Release(t.Context(), time.Now()), "high-water mark", true)
	})

	t.Run("SessionGoneWithState", func(t *testing.T) {
		// A new, empty Consul behind the address: the session is gone
		// and so is the record; the session renewal's "not found" must
		// not be taken for a mere expiry.
		conn, w, c, cl := setup(t)
		if _, err := c.Session().Destroy(sessionOf(t, c, w, cl.WorkerID()), wo(t.Context())); err != nil {
			t.Fatal(err)
		}
		conn.Wipe(t)
		wantReset(t, w, cl.Renew(t.Context(), testTTL, time.Now().Add(time.Second)), "is gone", true)
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
		put(t, c, w.keys().High(0, cl.WorkerID()), strconv.FormatInt(raised, 10))
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

// TestUnclaimSeesAHolderThatCameBetween: Consul cannot guard a write by a
// whole prefix, so freeing a datacenter marks its registry entry, reads the
// datacenter again, and deletes the entry only if nothing changed. Here
// another node acquires a worker id right after the Unclaim's read: the
// re-read sees it, the entry is put back as it was, and the Unclaim fails
// naming the holder.
func TestUnclaimSeesAHolderThatCameBetween(t *testing.T) {
	t.Parallel()
	addr := requireAgent(t)
	sp := testSpace(t, addr)
	admin := testClient(t, addr)
	w, other := sp.workers(testClient(t, addr)), sp.workers(testClient(t, addr))
	ctx := t.Context()
	req := worker.Request{Workers: 4, Owner: "first", TTL: testTTL, Reserve: time.Now(), Quarantine: time.Millisecond}
	first, err := w.Acquire(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Release(ctx, time.Now()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond) // past the floor and the released mark
	before, _, err := admin.KV().Get(w.keys().Registration(0), qo(ctx))
	if err != nil || before == nil {
		t.Fatalf("registry entry: %+v, %v", before, err)
	}
	var came worker.Claim
	w.afterRead = func(map[string]*consulapi.KVPair) {
		if came != nil {
			return
		}
		req.Owner = "between"
		if came, err = other.Acquire(ctx, req); err != nil {
			t.Error(err)
		}
	}
	if err := w.Unclaim(ctx, 0); !errors.Is(err, worker.ErrInUse) || !strings.Contains(err.Error(), "held") {
		t.Fatalf("Unclaim with a holder that came after its read: %v, want ErrInUse naming it held", err)
	}
	if came == nil {
		t.Fatal("the hook did not acquire")
	}
	after, _, err := admin.KV().Get(w.keys().Registration(0), qo(ctx))
	if err != nil || after == nil || string(after.Value) != string(before.Value) {
		t.Fatalf("registry entry after the refused Unclaim: %+v, %v; want %s as before", after, err, before.Value)
	}
	if err := came.Renew(ctx, testTTL, time.Now()); err != nil {
		t.Fatalf("the holder that came between: %v", err)
	}
}
