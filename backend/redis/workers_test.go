package redis

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/flakeid/flakeid/internal/faultnet"
	"github.com/flakeid/flakeid/internal/testenv"
	"github.com/flakeid/flakeid/worker"
	"github.com/flakeid/flakeid/worker/protocol"
	"github.com/flakeid/flakeid/worker/workertest"
)

// testTTL is the lease TTL of every test here.
const testTTL = time.Second

// newClient is one node's connection pool to addr. Context deadlines cut
// commands short, as leases need.
func newClient(t testing.TB, addr string) *goredis.Client {
	c := goredis.NewClient(&goredis.Options{
		Addr:                     addr,
		ContextTimeoutEnabled:    true,
		DialTimeout:              time.Second,
		ReadTimeout:              2 * time.Second,
		WriteTimeout:             2 * time.Second,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	})
	t.Cleanup(func() { c.Close() })
	return c
}

// newPrefix is a key prefix of its own on the server at addr; its keys are
// deleted when the test ends.
func newPrefix(t testing.TB, addr string) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	prefix := "flakeid-test:" + hex.EncodeToString(b[:])
	t.Cleanup(func() {
		c := goredis.NewClient(&goredis.Options{Addr: addr,
			MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}})
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		iter := c.Scan(ctx, 0, prefix+":*", 100).Iterator()
		for iter.Next(ctx) {
			c.Del(ctx, iter.Val())
		}
		if err := iter.Err(); err != nil {
			t.Errorf("deleting the keys of %s: %v", prefix, err)
		}
	})
	return prefix
}

// server is a private redis-server process, for faults that would disturb
// the other tests sharing the main Redis. It runs without persistence (no
// RDB, no AOF), so a restart empties it.
type server struct {
	addr  string
	admin *goredis.Client // a connection of its own for CLIENT PAUSE/UNPAUSE

	bin, dir string
	port     int
	out      bytes.Buffer // every run's output; read only once a run exited
	cmd      *exec.Cmd
	exited   chan error // receives cmd.Wait's result
}

func freePort(t testing.TB) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// launch starts redis-server on s.port and waits until it answers.
func (s *server) launch() error {
	cmd := exec.Command(s.bin, "--port", strconv.Itoa(s.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", s.dir)
	cmd.Stdout, cmd.Stderr = &s.out, &s.out
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting redis-server: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var lastErr error
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		select {
		case err := <-exited:
			return fmt.Errorf("redis-server exited: %v\n%s", err, s.out.String())
		default:
		}
		// A new probe each time: a go-redis pool whose dials failed backs
		// off for a second.
		probe := s.client()
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		err := probe.Ping(ctx).Err()
		cancel()
		probe.Close()
		if err == nil {
			s.cmd, s.exited = cmd, exited
			return nil
		}
		lastErr = err
		time.Sleep(20 * time.Millisecond)
	}
	_ = cmd.Process.Kill()
	<-exited
	return fmt.Errorf("redis-server on %s did not answer: %v", s.addr, lastErr)
}

// client is a one-connection client of the server that never retries.
func (s *server) client() *goredis.Client {
	return goredis.NewClient(&goredis.Options{Addr: s.addr, PoolSize: 1, DialTimeout: time.Second, MaxRetries: -1,
		DialerRetries: 1, MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}})
}

// startServer starts redis-server on a free loopback port, killed when the
// test ends.
func startServer(t testing.TB) *server {
	t.Helper()
	bin := testenv.Command(t, "redis-server", "the fault tests start a private redis-server")
	dir := t.TempDir()
	var lastErr error
	for range 3 { // another process may take the free port first
		s := &server{bin: bin, dir: dir, port: freePort(t)}
		s.addr = fmt.Sprintf("127.0.0.1:%d", s.port)
		s.admin = goredis.NewClient(&goredis.Options{Addr: s.addr, PoolSize: 1, DialTimeout: time.Second,
			MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}})
		if lastErr = s.launch(); lastErr != nil {
			s.admin.Close()
			continue
		}
		t.Cleanup(func() {
			s.admin.Close()
			if s.cmd != nil {
				_ = s.cmd.Process.Kill() // works on a paused or stopped server too
				<-s.exited
			}
			if t.Failed() {
				t.Logf("private redis-server at %s:\n%s", s.addr, s.out.String())
			}
		})
		return s
	}
	t.Fatalf("could not start a private redis-server: %v", lastErr)
	return nil
}

// restart stops the server with SHUTDOWN NOSAVE and starts it again, empty,
// on the same port: Redis restarted without persistence.
func (s *server) restart(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c := s.client()
	_ = c.ShutdownNoSave(ctx).Err() // the connection closes instead of a reply
	c.Close()
	select {
	case <-s.exited:
		s.cmd = nil
	case <-ctx.Done():
		t.Fatalf("redis-server at %s still runs 5s after SHUTDOWN NOSAVE", s.addr)
	}
	var err error
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		if err = s.launch(); err == nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("restarting redis-server on %s: %v", s.addr, err)
}

// connector makes clients of one prefix. They talk to the shared Redis,
// except once the test asked for a faulty client: then every client of the
// test talks to a private redis-server that the fault pauses. The datacenter
// registry is the test's own key, "<prefix>:datacenters".
type connector struct {
	shared   string
	prefix   string
	registry string

	mu         sync.Mutex
	private    *server
	usedShared bool
}

// inRegistry moves w's datacenter registry to registry: a test's own, as a
// database of its own would have (the URL has no way to).
func inRegistry(w *Workers, registry string) *Workers {
	w.registry = registry
	w.Driver = protocol.New(store{w})
	return w
}

// newConnector is a connector of a fresh prefix on the shared Redis at addr.
func newConnector(t testing.TB, addr string) *connector {
	prefix := newPrefix(t, addr)
	return &connector{shared: addr, prefix: prefix, registry: prefix + ":datacenters"}
}

// addr is the server the test's clients talk to.
func (c *connector) addr() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.private != nil {
		return c.private.addr
	}
	c.usedShared = true
	return c.shared
}

func (c *connector) Connect(t *testing.T) worker.Coordinator {
	return inRegistry(NewWorkers(newClient(t, c.addr()), c.prefix), c.registry)
}

// ConnectFaulty returns a client of a private redis-server, and a fault that
// pauses that server with CLIENT PAUSE … WRITE (see pauseFault).
func (c *connector) ConnectFaulty(t *testing.T) (worker.Coordinator, workertest.Fault) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.private == nil {
		if c.usedShared {
			t.Fatal("ConnectFaulty after Connect: the earlier clients talk to the shared Redis, the faulty one would talk to a private server")
		}
		c.private = startServer(t)
	}
	return inRegistry(NewWorkers(newClient(t, c.private.addr), c.prefix), c.registry), &pauseFault{t: t, s: c.private}
}

// keys lists the test's keys: the prefix's hashes and the registry.
func (c *connector) keys(t *testing.T, raw *goredis.Client) []string {
	t.Helper()
	ctx := t.Context()
	keys := []string{c.registry}
	iter := raw.Scan(ctx, 0, c.prefix+":*", 100).Iterator()
	for iter.Next(ctx) {
		if iter.Val() != c.registry {
			keys = append(keys, iter.Val())
		}
	}
	if err := iter.Err(); err != nil {
		t.Fatalf("listing the keys of %s: %v", c.prefix, err)
	}
	return keys
}

// Wipe deletes the namespace's hashes and the test's registry, as a flush,
// DEL, eviction or restart without data would.
func (c *connector) Wipe(t *testing.T) {
	raw := newClient(t, c.addr())
	if err := raw.Del(t.Context(), c.keys(t, raw)...).Err(); err != nil {
		t.Fatalf("wiping %s: %v", c.prefix, err)
	}
}

// Snapshot DUMPs the namespace's keys and the registry; restore deletes
// what is there then and RESTOREs the copy, as a restored backup or a
// failover to a lagging replica would.
func (c *connector) Snapshot(t *testing.T) func() {
	raw := newClient(t, c.addr())
	dumps := map[string]string{}
	for _, k := range c.keys(t, raw) {
		d, err := raw.Dump(t.Context(), k).Result()
		if errors.Is(err, goredis.Nil) {
			continue
		}
		if err != nil {
			t.Fatalf("DUMP %s: %v", k, err)
		}
		dumps[k] = d
	}
	return func() {
		ctx := t.Context()
		if err := raw.Del(ctx, c.keys(t, raw)...).Err(); err != nil {
			t.Fatalf("restoring %s: %v", c.prefix, err)
		}
		for k, d := range dumps {
			if err := raw.RestoreReplace(ctx, k, 0, d).Err(); err != nil {
				t.Fatalf("RESTORE %s: %v", k, err)
			}
		}
	}
}

// OtherNamespace is a client of a fresh prefix on the same server, sharing
// the test's registry.
func (c *connector) OtherNamespace(t *testing.T) worker.Coordinator {
	addr := c.addr()
	return inRegistry(NewWorkers(newClient(t, addr), newPrefix(t, addr)), c.registry)
}

// pauseFault pauses a private server with CLIENT PAUSE <2 min> WRITE and
// resumes it with CLIENT UNPAUSE, both sent on the server's admin connection.
//
// Not CLIENT PAUSE … ALL: that postpones every command of every client that
// is not a replica, CLIENT UNPAUSE included, so Heal could not get through
// until the pause timed out (checked against Redis 7.0.15). WRITE mode
// postpones every command that may write or replicate — EVAL and EVALSHA
// included, which is all a lease ever sends — while CLIENT UNPAUSE (and
// HGETALL) still go through. For the coordinator it is a full outage: every
// Acquire, Renew and Release hangs until the client's deadline, and a
// command whose client gave up is dropped with its connection, never run.
type pauseFault struct {
	t *testing.T
	s *server
}

func (f *pauseFault) do(args ...any) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := f.s.admin.Do(ctx, args...).Err(); err != nil {
		f.t.Errorf("%v on %s: %v", args, f.s.addr, err)
	}
}

func (f *pauseFault) Cut()  { f.do("CLIENT", "PAUSE", 120_000, "WRITE") }
func (f *pauseFault) Heal() { f.do("CLIENT", "UNPAUSE") }

func TestWorkersConformance(t *testing.T) {
	addr := testenv.Redis().Require(t)
	workertest.Run(t, workertest.Harness{
		Open: func(t *testing.T) workertest.Connector {
			return newConnector(t, addr)
		},
		// Not testTTL: at 1s LeaseRenewsBeyondTTL cannot pass on any
		// backend. Its first reservation is the new namespace's floor,
		// now + the default quarantine (TTL/4 + 1s), and it wants the
		// reservation 2 TTLs later past that first one + a TTL.
		TTL: 2 * time.Second,
	})
}

// TestPauseFault checks the fault the suite relies on: CLIENT PAUSE WRITE
// holds scripts until CLIENT UNPAUSE, which itself gets through.
func TestPauseFault(t *testing.T) {
	addr := testenv.Redis().Require(t)
	conn := newConnector(t, addr)
	c, fault := conn.ConnectFaulty(t)
	other := conn.Connect(t)
	req := worker.Request{Workers: 2, Owner: "a", TTL: testTTL, Reserve: time.Now()}
	cl, err := c.Acquire(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	fault.Cut()
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	err = cl.Renew(ctx, testTTL, time.Now())
	if !errors.Is(err, worker.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Renew on a paused server: %v, want ErrUnavailable and the deadline", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("Renew on a paused server took %v past its 300ms deadline", d)
	}
	healStart := time.Now()
	fault.Heal()
	if d := time.Since(healStart); d > time.Second {
		t.Fatalf("Heal took %v", d)
	}
	if err := cl.Renew(t.Context(), testTTL, time.Now()); err != nil {
		t.Fatalf("Renew after Heal: %v", err)
	}
	req.Owner = "b"
	if cl2, err := other.Acquire(t.Context(), req); err != nil || cl2.WorkerID() == cl.WorkerID() {
		t.Fatalf("the other client, on the same server: %v, %v", cl2, err)
	}
}

// TestPartitionLosesLeaseBeforeTakeover cuts one node from the shared Redis
// through a TCP proxy: its lease must end before another node can take the
// worker id, its generator fenced at its last reservation, where the new
// holder starts; and the renewals it had in flight, delivered when the link
// heals, must not disturb the new holder.
func TestPartitionLosesLeaseBeforeTakeover(t *testing.T) {
	addr := testenv.Redis().Require(t)
	proxy, err := faultnet.Listen(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	prefix := newPrefix(t, addr)
	reg := prefix + ":datacenters"
	workertest.Takeover{
		Faulty: inRegistry(NewWorkers(newClient(t, proxy.Addr()), prefix), reg), Fault: proxy,
		Healthy: inRegistry(NewWorkers(newClient(t, addr), prefix), reg),
		TTL:     testTTL, Partition: true, Within: 5 * testTTL,
	}.Run(t)
}

// shared is a coordinator on the shared Redis under a fresh prefix and a
// registry of its own, and a raw client to poke its keys.
func shared(t *testing.T) (*Workers, *goredis.Client) {
	addr := testenv.Redis().Require(t)
	raw := newClient(t, addr)
	prefix := newPrefix(t, addr)
	return inRegistry(NewWorkers(newClient(t, addr), prefix), prefix+":datacenters"), raw
}

func wantErr(t *testing.T, what string, err error, sentinel error, substrs ...string) {
	t.Helper()
	if !errors.Is(err, sentinel) {
		t.Fatalf("%s: %v, want %v", what, err, sentinel)
	}
	for _, s := range substrs {
		if !strings.Contains(err.Error(), s) {
			t.Fatalf("%s: %q does not say %q", what, err, s)
		}
	}
}

func TestCorruptStateIsAnError(t *testing.T) {
	ctx := t.Context()
	req := worker.Request{Workers: 4, Owner: "o", TTL: testTTL, Reserve: time.Now()}

	t.Run("Value", func(t *testing.T) {
		w, raw := shared(t)
		raw.HSet(ctx, w.Key(0), "2", "garbage\r\nmore")
		_, err := w.Acquire(ctx, req)
		wantErr(t, "Acquire", err, worker.ErrUnavailable, "corrupt", "garbage", w.Key(0))
		_, err = w.List(ctx, 0)
		wantErr(t, "List", err, worker.ErrUnavailable, "corrupt", "garbage")
	})
	t.Run("FieldName", func(t *testing.T) {
		w, raw := shared(t)
		raw.HSet(ctx, w.Key(0), "01", "0|0|0|")
		_, err := w.Acquire(ctx, req)
		wantErr(t, "Acquire", err, worker.ErrUnavailable, "corrupt", "01")
		_, err = w.List(ctx, 0)
		wantErr(t, "List", err, worker.ErrUnavailable, "corrupt", "01")
	})
	t.Run("HeldField", func(t *testing.T) {
		w, raw := shared(t)
		cl, err := w.Acquire(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		raw.HSet(ctx, w.Key(0), strconv.FormatInt(cl.WorkerID(), 10), "1|2|x|o")
		err = cl.Renew(ctx, testTTL, time.Now())
		wantErr(t, "Renew", err, worker.ErrUnavailable, "corrupt", "1|2|x|o")
		if errors.Is(err, worker.ErrNotHeld) {
			t.Fatalf("Renew of a corrupt field: %v, must not look like a lost lease", err)
		}
		err = cl.Release(ctx, time.Now())
		wantErr(t, "Release", err, worker.ErrUnavailable, "corrupt")
	})
	t.Run("Record", func(t *testing.T) {
		w, raw := shared(t)
		cl, err := w.Acquire(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		raw.HSet(ctx, w.Key(0), "ns", "12|x|abc|c")
		_, err = w.Acquire(ctx, req)
		wantErr(t, "Acquire", err, worker.ErrUnavailable, "corrupt", "12|x|abc|c", w.Key(0))
		_, _, err = w.Namespace(ctx, 0)
		wantErr(t, "Namespace", err, worker.ErrUnavailable, "corrupt", "12|x|abc|c")
		err = cl.Renew(ctx, testTTL, time.Now())
		wantErr(t, "Renew", err, worker.ErrUnavailable, "corrupt", "12|x|abc|c")
		if errors.Is(err, worker.ErrReset) {
			t.Fatalf("Renew under a corrupt record: %v, must not re-initialise it", err)
		}
		_, err = w.List(ctx, 0)
		wantErr(t, "List", err, worker.ErrUnavailable, "corrupt", "12|x|abc|c")
	})
	t.Run("FieldLikeTheRecord", func(t *testing.T) {
		w, raw := shared(t)
		raw.HSet(ctx, w.Key(0), "nsx", "0|0|0|")
		_, err := w.Acquire(ctx, req)
		wantErr(t, "Acquire", err, worker.ErrUnavailable, "corrupt", "nsx")
	})
	t.Run("WrongType", func(t *testing.T) {
		w, raw := shared(t)
		raw.Set(ctx, w.Key(0), "a string", 0)
		_, err := w.Acquire(ctx, req)
		wantErr(t, "Acquire", err, worker.ErrUnavailable, "WRONGTYPE")
		_, err = w.List(ctx, 0)
		wantErr(t, "List", err, worker.ErrUnavailable, "WRONGTYPE")
	})
}

func TestScriptErrorsAreErrors(t *testing.T) {
	ctx := t.Context()
	req := worker.Request{Workers: 4, Owner: "o", TTL: testTTL, Reserve: time.Now()}
	w, _ := shared(t)
	cl, err := w.Acquire(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	good := w.read
	w.read = goredis.NewScript(`return redis.call('NO_SUCH_COMMAND')`)
	_, err = w.Acquire(ctx, req)
	wantErr(t, "Acquire with a failing script", err, worker.ErrUnavailable, "Redis replied with an error", "Unknown Redis command")
	w.read = goredis.NewScript(`error('boom')`)
	wantErr(t, "Renew with a raising script", cl.Renew(ctx, testTTL, time.Now()), worker.ErrUnavailable, "boom")
	for _, src := range []string{`return 'hello'`, `return {1}`, `return {'a', 'b', {}, '', ''}`, `return {1, 2, {'0'}, '', ''}`,
		`return {1, 2, {}, 5, ''}`} {
		w.read = goredis.NewScript(src)
		_, err = w.Acquire(ctx, req)
		wantErr(t, "Acquire with a read script that "+src, err, worker.ErrUnavailable, "replied")
	}
	w.read = good
	goodCommit := w.commit
	w.commit = goredis.NewScript(`return 'maybe'`)
	wantErr(t, "Renew with a commit script that replies 'maybe'", cl.Renew(ctx, testTTL, time.Now()), worker.ErrUnavailable, "replied")
	// Lost races back off for up to protocol.MaxAttempts × 64 ms: the
	// lease must outlast them, or the last read finds it lapsed.
	w.commit = goodCommit
	if err := cl.Renew(ctx, time.Minute, time.Now()); err != nil {
		t.Fatal(err)
	}
	w.commit = goredis.NewScript(`return 'changed'`)
	err = cl.Release(ctx, time.Now())
	wantErr(t, "Release that always finds the state changed", err, worker.ErrUnavailable, "changed under", "attempts")
}

// TestCommitRetried: go-redis sends a script again when its reply was lost;
// a commit that already ran finds its own rev and succeeds, writing nothing
// (else a retried Release would look like a rollback), while another
// commit over the same read is refused.
func TestCommitRetried(t *testing.T) {
	ctx := t.Context()
	w, raw := shared(t)
	cl, err := w.Acquire(ctx, worker.Request{Workers: 2, Owner: "o", TTL: time.Minute, Reserve: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	st, err := store{w}.Read(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	v := st.Version.(version)
	run := func(rev, slot string) any {
		t.Helper()
		res, err := w.commit.Run(ctx, w.client, []string{w.Key(0), w.registry}, "0", v.rev, rev, v.space, v.claim, "", "",
			strconv.FormatInt(cl.WorkerID(), 10), slot).Result()
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := run("r1", "0|5|0|"); res != "ok" {
		t.Fatalf("the commit: %v", res)
	}
	if res := run("r1", "0|6|0|"); res != "ok" {
		t.Fatalf("the same commit again: %v, want ok", res)
	}
	if res := run("r2", "0|7|0|"); res != "changed" {
		t.Fatalf("another commit over the same read: %v, want changed", res)
	}
	if got := raw.HGet(ctx, w.Key(0), strconv.FormatInt(cl.WorkerID(), 10)).Val(); got != "0|5|0|" {
		t.Fatalf("the slot after the retries: %q, want the first commit's", got)
	}
}

func TestUnreachableIsUnavailable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	c := goredis.NewClient(&goredis.Options{Addr: addr, DialerRetries: 1, MaxRetries: -1,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}})
	t.Cleanup(func() { c.Close() })
	w := NewWorkers(c, "")
	if w.Prefix() != DefaultPrefix || w.Registry() != DefaultRegistry {
		t.Fatalf("Prefix() = %q, Registry() = %q; want %q, %q", w.Prefix(), w.Registry(), DefaultPrefix, DefaultRegistry)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	_, err = w.Acquire(ctx, worker.Request{Workers: 1, Owner: "o", TTL: testTTL, Reserve: time.Now()})
	wantErr(t, "Acquire", err, worker.ErrUnavailable, addr)
	_, err = w.List(ctx, 0)
	wantErr(t, "List", err, worker.ErrUnavailable)
}

// TestOpenWorkersURL: what OpenWorkers makes of a URL, with no Redis to
// talk to (it connects on first use).
func TestOpenWorkersURL(t *testing.T) {
	for _, tc := range []struct {
		url              string
		prefix, registry string
		addr             string
		db               int
		tls              bool
	}{
		{"redis://127.0.0.1:1", DefaultPrefix, DefaultRegistry, "127.0.0.1:1", 0, false},
		{"redis://:pw@127.0.0.1:1/3?prefix=p&dial_timeout=2s", "p", DefaultRegistry, "127.0.0.1:1", 3, false},
		{"rediss://127.0.0.1:1/?prefix=", DefaultPrefix, DefaultRegistry, "127.0.0.1:1", 0, true},
	} {
		u, err := url.Parse(tc.url)
		if err != nil {
			t.Fatal(err)
		}
		w, err := OpenWorkers(t.Context(), u)
		if err != nil {
			t.Errorf("OpenWorkers(%s): %v", tc.url, err)
			continue
		}
		o := w.client.(*goredis.Client).Options()
		if w.Prefix() != tc.prefix || w.Registry() != tc.registry || o.Addr != tc.addr || o.DB != tc.db ||
			(o.TLSConfig != nil) != tc.tls || !o.ContextTimeoutEnabled {
			t.Errorf("OpenWorkers(%s): prefix %q, registry %q, addr %s, db %d, TLS %v, ContextTimeoutEnabled %v; want %q, %q, %s, %d, %v, true",
				tc.url, w.Prefix(), w.Registry(), o.Addr, o.DB, o.TLSConfig != nil, o.ContextTimeoutEnabled,
				tc.prefix, tc.registry, tc.addr, tc.db, tc.tls)
		}
		if err := w.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	}
	// A registry of the URL's own would split the database's ID space.
	for _, raw := range []string{"redis://127.0.0.1:1?registry=r", "redis://127.0.0.1:1/2?prefix=p&registry=" + DefaultRegistry} {
		u, _ := url.Parse(raw)
		if w, err := OpenWorkers(t.Context(), u); !errors.Is(err, worker.ErrInvalidConfig) ||
			!strings.Contains(err.Error(), "registry= is not accepted") || !strings.Contains(err.Error(), DefaultRegistry) {
			t.Errorf("OpenWorkers(%s) = %v, %v; want ErrInvalidConfig refusing registry= and naming %s", raw, w, err, DefaultRegistry)
		}
	}

	for _, tc := range []struct{ url, want string }{
		{"etcd://127.0.0.1:1", `scheme "etcd", want redis or rediss`},
		{"redis://127.0.0.1:1/x", "invalid database number"},
		{"redis://127.0.0.1:1?table=t", "unexpected option: table"},
	} {
		u, err := url.Parse(tc.url)
		if err != nil {
			t.Fatal(err)
		}
		w, err := OpenWorkers(t.Context(), u)
		if err == nil {
			w.Close()
			t.Errorf("OpenWorkers(%s) succeeded", tc.url)
			continue
		}
		if !errors.Is(err, worker.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("OpenWorkers(%s): %v; want ErrInvalidConfig saying %s", tc.url, err, tc.want)
		}
	}
}

// TestOpenWorkers opens a coordinator of a real Redis from its URL and
// leases through it; its Close closes the client it made, and only that. A
// private server: the URL's registry is the database's one, DefaultRegistry.
func TestOpenWorkers(t *testing.T) {
	addr := startServer(t).addr
	prefix := newPrefix(t, addr)
	u, _ := url.Parse("redis://" + addr + "/0?prefix=" + url.QueryEscape(prefix))
	w, err := OpenWorkers(t.Context(), u)
	if err != nil {
		t.Fatal(err)
	}
	if w.Prefix() != prefix || w.Registry() != DefaultRegistry {
		t.Fatalf("Prefix, Registry = %q, %q", w.Prefix(), w.Registry())
	}
	workertest.Smoke(t, w, testTTL)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.client.Ping(t.Context()).Err(); !errors.Is(err, goredis.ErrClosed) {
		t.Fatalf("Ping through the client OpenWorkers made, after Close: %v; want %v", err, goredis.ErrClosed)
	}

	// A Workers of the caller's client leaves it open.
	c := newClient(t, addr)
	if err := NewWorkers(c, prefix).Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Ping(t.Context()).Err(); err != nil {
		t.Fatalf("the caller's client after the Workers' Close: %v", err)
	}
}

func TestInvalidRequests(t *testing.T) {
	w := NewWorkers(goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:1"}), "")
	ok := worker.Request{Workers: 1, Owner: "o", TTL: testTTL, Reserve: time.Now()}
	for _, mod := range []func(*worker.Request){
		func(r *worker.Request) { r.Workers = 0 },
		func(r *worker.Request) { r.Datacenter = -1 },
		func(r *worker.Request) { r.Owner = "" },
		func(r *worker.Request) { r.TTL = 0 },
	} {
		r := ok
		mod(&r)
		if _, err := w.Acquire(t.Context(), r); !errors.Is(err, worker.ErrInvalidConfig) {
			t.Errorf("Acquire(%+v): %v, want ErrInvalidConfig", r, err)
		}
	}
	r := ok
	r.Quarantine = -time.Second
	if _, err := w.Acquire(t.Context(), r); !errors.Is(err, worker.ErrInvalidConfig) {
		t.Errorf("Acquire(%+v): %v, want ErrInvalidConfig", r, err)
	}
	if _, err := w.List(t.Context(), -1); !errors.Is(err, worker.ErrInvalidConfig) {
		t.Errorf("List(-1): %v, want ErrInvalidConfig", err)
	}
	if _, _, err := w.Namespace(t.Context(), -1); !errors.Is(err, worker.ErrInvalidConfig) {
		t.Errorf("Namespace(-1): %v, want ErrInvalidConfig", err)
	}
}

// TestOwnerTokensAnyBytes: the holder is the last part of a slot's value, so
// tokens with separators, spaces and newlines round-trip.
func TestOwnerTokensAnyBytes(t *testing.T) {
	ctx := t.Context()
	w, _ := shared(t)
	owner := "host|1 2\r\nx|"
	cl, err := w.Acquire(ctx, worker.Request{Workers: 2, Owner: owner, TTL: testTTL, Reserve: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	infos, err := w.List(ctx, 0)
	if err != nil || len(infos) != 1 || infos[0].Holder != owner {
		t.Fatalf("List = %+v, %v; want held by %q", infos, err, owner)
	}
	if err := cl.Renew(ctx, testTTL, time.Now()); err != nil {
		t.Fatalf("Renew: %v", err)
	}
	if err := cl.Release(ctx, time.Now()); err != nil {
		t.Fatalf("Release: %v", err)
	}
	wantErr(t, "Renew after Release", cl.Renew(ctx, testTTL, time.Now()), worker.ErrNotHeld, "free")
}

// TestChoosesAmongFree: the lowest id whose mark passed; else the smallest
// mark; never a held id.
func TestChoosesAmongFree(t *testing.T) {
	ctx := t.Context()
	w, _ := shared(t)
	now := time.UnixMilli(time.Now().UnixMilli())
	const n = 5
	claims := make([]worker.Claim, n)
	for i := range claims {
		cl, err := w.Acquire(ctx, worker.Request{Workers: n, Owner: fmt.Sprintf("o%d", i), TTL: time.Minute, Reserve: now})
		if err != nil || cl.WorkerID() != int64(i) {
			t.Fatalf("Acquire %d: %v, %v", i, cl, err)
		}
		claims[i] = cl
	}
	marks := []time.Duration{3 * time.Hour, time.Hour, 2 * time.Hour, -time.Hour, -2 * time.Hour}
	release := func(ids ...int) {
		for _, id := range ids {
			if err := claims[id].Release(ctx, now.Add(marks[id])); err != nil {
				t.Fatal(err)
			}
		}
	}
	take := func(want int64) {
		t.Helper()
		cl, err := w.Acquire(ctx, worker.Request{Workers: n, Owner: fmt.Sprintf("t%d", want), TTL: time.Minute, Reserve: now})
		if err != nil || cl.WorkerID() != want {
			t.Fatalf("Acquire: %v, %v; want worker %d", cl, err, want)
		}
	}
	release(0, 1, 2)
	take(1) // no passed mark: the smallest
	take(2)
	release(3, 4)
	take(3) // passed marks: the lowest id, not the smallest mark
	take(4)
	take(0)
	if _, err := w.Acquire(ctx, worker.Request{Workers: n, Owner: "late", TTL: time.Minute, Reserve: now}); !errors.Is(err, worker.ErrExhausted) ||
		!strings.Contains(err.Error(), "all 5") {
		t.Fatalf("Acquire of 5 held ids: %v", err)
	}
	// A wider range still has never-used ids, from the lowest; they start
	// at the namespace's floor.
	ns, ok, err := w.Namespace(ctx, 0)
	if err != nil || !ok {
		t.Fatalf("Namespace(0) = %+v, %v, %v", ns, ok, err)
	}
	cl, err := w.Acquire(ctx, worker.Request{Workers: 1 << 31, Owner: "wide", TTL: time.Minute, Reserve: now})
	if err != nil || cl.WorkerID() != n || !cl.Previous().Equal(ns.Floor) {
		t.Fatalf("Acquire of 2^31 ids: %v, %v; want worker %d, never used, from the floor %v", cl, err, n, ns.Floor)
	}
}

func TestExpiredOwnLease(t *testing.T) {
	ctx := t.Context()
	w, raw := shared(t)
	const ttl = 200 * time.Millisecond
	cl, err := w.Acquire(ctx, worker.Request{Workers: 1, Owner: "o", TTL: ttl, Reserve: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(ttl + 100*time.Millisecond) // past the lease's end: a lapse, not a rollback
	wantErr(t, "Renew of a lapsed lease", cl.Renew(ctx, testTTL, time.Now()), worker.ErrNotHeld, "lapsed", `"o"`)
	wantErr(t, "Release of a lapsed lease", cl.Release(ctx, time.Now()), worker.ErrNotHeld, "lapsed")
	if v := raw.HGet(ctx, w.Key(0), "0").Val(); !strings.HasSuffix(v, "|o") {
		t.Fatalf("the refused calls changed the slot: %q", v)
	}
}

// TestScriptCacheFlushed: EVALSHA falls back to EVAL when Redis lost its
// scripts (a restart, SCRIPT FLUSH). On a private server, not to flush the
// shared one's cache.
func TestScriptCacheFlushed(t *testing.T) {
	testenv.Redis().Require(t)
	s := startServer(t)
	w := NewWorkers(newClient(t, s.addr), "")
	ctx := t.Context()
	cl, err := w.Acquire(ctx, worker.Request{Workers: 1, Owner: "o", TTL: testTTL, Reserve: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.admin.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := cl.Renew(ctx, testTTL, time.Now()); err != nil {
		t.Fatalf("Renew after SCRIPT FLUSH: %v", err)
	}
}

func TestParseRecord(t *testing.T) {
	r, err := parseRecord("5|6|ab12|41/5 × 1ms|q\r\n")
	if err != nil || r != (protocol.Record{InitialisedMs: 5, FloorMs: 6, Incarnation: "ab12", Contract: "41/5 × 1ms|q\r\n"}) {
		t.Fatalf("parseRecord = %+v, %v", r, err)
	}
	for _, v := range []string{"", "5|6|ab", "5|6||c", "x|6|ab|c", "5|-6|ab|c", "1234567890123456789|6|ab|c"} {
		if _, err := parseRecord(v); err == nil || !strings.Contains(err.Error(), "corrupt") {
			t.Errorf("parseRecord(%q): %v, want a corrupt-field error", v, err)
		}
	}
}

// acquireOne acquires a worker id of datacenter 0 under contract "c" and
// quarantine q, failing the test otherwise.
func acquireOne(t *testing.T, w *Workers, owner string, q time.Duration) worker.Claim {
	t.Helper()
	cl, err := w.Acquire(t.Context(), worker.Request{Workers: 4, Owner: owner, TTL: time.Minute,
		Reserve: time.Now().Add(time.Second), Contract: "c", Quarantine: q})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

func nsRecord(t *testing.T, w *Workers) worker.Namespace {
	t.Helper()
	ns, ok, err := w.Namespace(t.Context(), 0)
	if err != nil || !ok {
		t.Fatalf("Namespace(0) = %+v, %v, %v", ns, ok, err)
	}
	return ns
}

// TestResetKinds: every way the scripts recognise a loss or a rollback,
// made by editing the hash; ErrReset is never ErrNotHeld, and no slot is
// touched.
func TestResetKinds(t *testing.T) {
	ctx := t.Context()
	const q = 3 * time.Second
	check := func(t *testing.T, w *Workers, raw *goredis.Client, err error, reinit bool, says ...string) {
		t.Helper()
		wantErr(t, "after the loss", err, worker.ErrReset, says...)
		if errors.Is(err, worker.ErrNotHeld) {
			t.Fatalf("%v: ErrReset must not be ErrNotHeld", err)
		}
		if !reinit {
			return
		}
		ns := nsRecord(t, w)
		if !strings.Contains(err.Error(), ns.Incarnation) {
			t.Fatalf("%q does not name the new incarnation %s", err, ns.Incarnation)
		}
		if d := ns.Floor.Sub(ns.Initialised); d < q {
			t.Fatalf("re-initialised floor %v is %v after its initialisation, less than the quarantine %v", ns.Floor, d, q)
		}
	}
	t.Run("Gone", func(t *testing.T) {
		w, raw := shared(t)
		cl := acquireOne(t, w, "o", q)
		raw.HDel(ctx, w.Key(0), "ns")
		check(t, w, raw, cl.Renew(ctx, time.Minute, time.Now()), true, "is gone", w.Prefix(), "datacenter 0")
		if nsRecord(t, w).Contract != "c" {
			t.Fatalf("re-initialised without the claim's contract: %+v", nsRecord(t, w))
		}
		if infos, _ := w.List(ctx, 0); len(infos) != 1 || infos[0].Holder != "o" {
			t.Fatalf("the reset touched the slots: %+v", infos)
		}
	})
	t.Run("SlotGone", func(t *testing.T) {
		w, raw := shared(t)
		cl := acquireOne(t, w, "o", q)
		raw.HDel(ctx, w.Key(0), strconv.FormatInt(cl.WorkerID(), 10))
		check(t, w, raw, cl.Release(ctx, time.Now()), true, "worker 0's slot in", "is gone")
	})
	t.Run("MarkBelow", func(t *testing.T) {
		w, raw := shared(t)
		cl := acquireOne(t, w, "o", q)
		infos, err := w.List(ctx, 0)
		if err != nil || len(infos) != 1 {
			t.Fatalf("List = %+v, %v", infos, err)
		}
		raw.HSet(ctx, w.Key(0), "0", fmt.Sprintf("%d|%d|0|o", time.Now().Add(time.Minute).UnixMilli(), infos[0].HighWater.UnixMilli()-1))
		check(t, w, raw, cl.Renew(ctx, time.Minute, time.Now()), true, "high-water mark in", "below the")
	})
	t.Run("OlderRecord", func(t *testing.T) {
		w, raw := shared(t)
		cl := acquireOne(t, w, "o", q)
		// A copy from before the claim's incarnation, with a floor far
		// ahead and another contract: both are kept.
		floor := time.Now().Add(time.Hour).UnixMilli()
		was := nsRecord(t, w)
		raw.HSet(ctx, w.Key(0), "ns", fmt.Sprintf("%d|%d|00aa|old contract", was.Initialised.UnixMilli()-1000, floor))
		check(t, w, raw, cl.Renew(ctx, time.Minute, time.Now()), true, "00aa", "before the one this holder acquired under", was.Incarnation)
		if ns := nsRecord(t, w); ns.Floor.UnixMilli() != floor || ns.Contract != "old contract" {
			t.Fatalf("re-initialised record %+v: want the old floor %v and contract kept", ns, time.UnixMilli(floor))
		}
	})
	t.Run("AlreadyReinitialised", func(t *testing.T) {
		w, raw := shared(t)
		cl := acquireOne(t, w, "o", q)
		at := nsRecord(t, w).Initialised.UnixMilli() + 5
		raw.HSet(ctx, w.Key(0), "ns", fmt.Sprintf("%d|%d|00bb|c", at, at))
		before := nsRecord(t, w)
		check(t, w, raw, cl.Renew(ctx, time.Minute, time.Now()), false, "00bb", "another client found it first")
		if after := nsRecord(t, w); after != before {
			t.Fatalf("the record changed: %+v, was %+v", after, before)
		}
		wantErr(t, "Release", cl.Release(ctx, time.Now()), worker.ErrReset, "00bb")
	})
}

// TestTakeoverWhileLeaseRuns: Redis goes back to a copy in which the live
// holder's lease has lapsed, and a newcomer takes the id (raising its mark,
// so the holder's "mark below" check cannot fire). The holder's renewal,
// still before the lease end Redis granted it, is a rollback: ErrReset and a
// new incarnation; the newcomer's renewal then ends its lease too.
func TestTakeoverWhileLeaseRuns(t *testing.T) {
	ctx := t.Context()
	addr := testenv.Redis().Require(t)
	c := newConnector(t, addr)
	wa, wb := c.Connect(t), c.Connect(t)
	const ttl = 400 * time.Millisecond
	req := func(owner string) worker.Request {
		return worker.Request{Workers: 1, Owner: owner, TTL: ttl, Reserve: time.Now().Add(ttl),
			Contract: "c", Quarantine: time.Second}
	}
	a, err := wa.Acquire(ctx, req("holder"))
	if err != nil {
		t.Fatal(err)
	}
	restore := c.Snapshot(t)
	for range 4 { // > TTL, A renewing all along
		time.Sleep(ttl / 3)
		if err := a.Renew(ctx, ttl, time.Now().Add(ttl)); err != nil {
			t.Fatalf("Renew before the rollback: %v", err)
		}
	}
	restore()
	before := nsRecord(t, wa.(*Workers))
	b, err := wb.Acquire(ctx, req("newcomer"))
	if err != nil {
		t.Fatalf("the newcomer's Acquire from the older copy: %v", err)
	}
	if b.WorkerID() != a.WorkerID() {
		t.Fatalf("the newcomer got worker %d, want %d", b.WorkerID(), a.WorkerID())
	}
	err = a.Renew(ctx, ttl, time.Now().Add(ttl))
	wantErr(t, "the holder's Renew", err, worker.ErrReset, `held by "newcomer"`, "while this holder's lease runs until",
		"older copy")
	if errors.Is(err, worker.ErrNotHeld) {
		t.Fatalf("%v: ErrReset must not be ErrNotHeld", err)
	}
	after := nsRecord(t, wa.(*Workers))
	if after.Incarnation == before.Incarnation || !strings.Contains(err.Error(), after.Incarnation) {
		t.Fatalf("record %+v after the holder's Renew (was %+v; error %q): want a new incarnation", after, before, err)
	}
	if d := after.Floor.Sub(after.Initialised); d < time.Second {
		t.Fatalf("re-initialised floor %v is only %v after the initialisation", after.Floor, d)
	}
	wantErr(t, "the newcomer's Renew", b.Renew(ctx, ttl, time.Now().Add(ttl)), worker.ErrReset, after.Incarnation)
	if infos, _ := wa.List(ctx, 0); len(infos) != 1 || infos[0].Holder != "newcomer" {
		t.Fatalf("the reset touched the slots: %+v", infos)
	}
}

// TestReleaseRetried: a Release that already ran (its reply lost, the call
// retried) is ErrNotHeld, not a rollback, though the lease end it was
// granted has not come yet; a Release or Renew of a lease freed by somebody
// else before that end is a rollback.
func TestReleaseRetried(t *testing.T) {
	ctx := t.Context()
	w, raw := shared(t)
	cl := acquireOne(t, w, "o", 0)
	if err := cl.Release(ctx, time.Now()); err != nil {
		t.Fatal(err)
	}
	before := nsRecord(t, w)
	wantErr(t, "Release again", cl.Release(ctx, time.Now()), worker.ErrNotHeld, "free")
	if after := nsRecord(t, w); after != before {
		t.Fatalf("a retried Release changed the record: %+v, was %+v", after, before)
	}
	cl = acquireOne(t, w, "p", 0)
	field := strconv.FormatInt(cl.WorkerID(), 10)
	v := raw.HGet(ctx, w.Key(0), field).Val()
	_, rest, _ := strings.Cut(v, "|")
	h, _, _ := strings.Cut(rest, "|")
	raw.HSet(ctx, w.Key(0), field, "0|"+h+"|0|") // freed in an older copy
	wantErr(t, "Release of a slot freed before its end", cl.Release(ctx, time.Now()), worker.ErrReset,
		fmt.Sprintf("worker %d in datacenter 0", cl.WorkerID()), "is free", "older copy")
}

// TestAcquireWithoutRecord: a hash whose record is gone but whose slots
// remain (a partial loss, or written by an older flakeid) gets a record; the
// slots' marks still count. An Acquire that finds every id held writes
// nothing.
func TestAcquireWithoutRecord(t *testing.T) {
	ctx := t.Context()
	w, raw := shared(t)
	mark := time.Now().Add(time.Hour).UnixMilli()
	held := time.Now().Add(time.Hour).UnixMilli()
	raw.HSet(ctx, w.Key(0), "0", fmt.Sprintf("0|%d|0|", mark), "1", fmt.Sprintf("%d|0|0|old", held))
	// Ids 0 (free, mark ahead) and 1 (held): 0 is taken from its mark.
	req := worker.Request{Workers: 2, Owner: "o", TTL: testTTL, Reserve: time.Now(), Contract: "c"}
	cl, err := w.Acquire(ctx, req)
	if err != nil || cl.WorkerID() != 0 || cl.Previous().UnixMilli() != mark {
		t.Fatalf("Acquire = %v, %v; want worker 0 from its mark %v", cl, err, time.UnixMilli(mark))
	}
	if ns := nsRecord(t, w); ns.Contract != "c" {
		t.Fatalf("record %+v", ns)
	}
	w2, raw2 := shared(t)
	raw2.HSet(ctx, w2.Key(0), "0", fmt.Sprintf("%d|0|0|old", held))
	req.Workers = 1
	if _, err := w2.Acquire(ctx, req); !errors.Is(err, worker.ErrExhausted) {
		t.Fatalf("Acquire of a held id: %v", err)
	}
	if ns, ok, err := w2.Namespace(ctx, 0); ok || err != nil {
		t.Fatalf("the exhausted Acquire recorded %+v (%v)", ns, err)
	}
}

// TestContractAnyBytes: the contract is the last part of the record.
func TestContractAnyBytes(t *testing.T) {
	ctx := t.Context()
	w, _ := shared(t)
	contract := "a|b|c \r\n × 1ms; quarantine 4s"
	req := worker.Request{Workers: 2, Owner: "o", TTL: testTTL, Reserve: time.Now(), Contract: contract}
	if _, err := w.Acquire(ctx, req); err != nil {
		t.Fatal(err)
	}
	if ns := nsRecord(t, w); ns.Contract != contract || len(ns.Incarnation) != 16 {
		t.Fatalf("record %+v: want the contract %q and 16 hex digits", ns, contract)
	}
	req.Owner, req.Contract = "p", contract+"x"
	_, err := w.Acquire(ctx, req)
	wantErr(t, "Acquire with another contract", err, worker.ErrContract, strconv.Quote(contract), strconv.Quote(contract+"x"), w.Prefix())
}

// TestRegistry: the registry maps each datacenter id to the prefix that
// claimed it, and is checked on every Acquire.
func TestRegistry(t *testing.T) {
	ctx := t.Context()
	addr := testenv.Redis().Require(t)
	raw := newClient(t, addr)
	conn := newConnector(t, addr)
	a := conn.Connect(t).(*Workers)
	b := conn.OtherNamespace(t).(*Workers)
	req := worker.Request{Workers: 2, Owner: "o", TTL: testTTL, Reserve: time.Now()}
	if _, err := a.Acquire(ctx, req); err != nil {
		t.Fatal(err)
	}
	if got := raw.HGet(ctx, conn.registry, "0").Val(); got != a.Prefix() {
		t.Fatalf("registry entry of datacenter 0 = %q, want %q", got, a.Prefix())
	}
	_, err := b.Acquire(ctx, req)
	wantErr(t, "the other prefix", err, worker.ErrContract, strconv.Quote(a.Prefix()), strconv.Quote(b.Prefix()), conn.registry)
	if n := raw.Exists(ctx, b.Key(0)).Val(); n != 0 {
		t.Fatalf("the refused prefix wrote %s", b.Key(0))
	}
	// A registry of the wrong type is a failure of Redis.
	raw.Del(ctx, conn.registry)
	raw.Set(ctx, conn.registry, "x", 0)
	_, err = a.Acquire(ctx, req)
	wantErr(t, "Acquire with a broken registry", err, worker.ErrUnavailable, "WRONGTYPE", conn.registry)
}

// TestRestartWithoutPersistence: a private redis-server without RDB or AOF
// is stopped with SHUTDOWN NOSAVE under a holder and started again, empty,
// on the same port. The holder's lease ends with ErrReset within a renewal
// or two of the restart, and a newcomer starts after everything the holder
// may have issued.
func TestRestartWithoutPersistence(t *testing.T) {
	testenv.Redis().Require(t)
	s := startServer(t)
	cfg := worker.Config{Logger: slog.New(slog.NewTextHandler(t.Output(), nil)), Workers: 2, TTL: 2 * time.Second,
		RenewEvery: 200 * time.Millisecond, RetryEvery: 50 * time.Millisecond, ReserveAhead: 500 * time.Millisecond,
		SafetyMargin: 500 * time.Millisecond, Contract: "restart test"}
	leaser := func() worker.Leaser {
		lr, err := worker.NewLeaser(NewWorkers(newClient(t, s.addr), ""), cfg)
		if err != nil {
			t.Fatal(err)
		}
		return lr
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	old, err := leaser().Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	time.Sleep(3 * cfg.RenewEvery) // a few renewals
	stopped := time.Now()
	s.restart(t)
	up := time.Now()
	select {
	case <-old.Done():
	case <-time.After(cfg.TTL):
		t.Fatalf("the lease still runs %v after Redis restarted empty", cfg.TTL)
	}
	// A renewal in flight may reach the new server before restart returns.
	took := time.Since(up)
	if err := old.Err(); !errors.Is(err, worker.ErrLeaseLost) || !errors.Is(err, worker.ErrReset) ||
		!strings.Contains(err.Error(), "is gone") {
		t.Fatalf("lease error %v, want ErrLeaseLost and ErrReset saying the record is gone", err)
	}
	if took > 2*cfg.RenewEvery+100*time.Millisecond {
		t.Fatalf("the lease ended %v after the server was back, more than two renewal periods", took)
	}
	t.Logf("the server was down for %v; the lease ended at most %v after it was back: %v", up.Sub(stopped), max(took, 0), old.Err())
	oldUntil := old.Until()
	newcomer, err := leaser().Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer newcomer.Close()
	if !newcomer.NotBefore().After(oldUntil) {
		t.Fatalf("the newcomer starts at %v, not after the old holder's reservation %v", newcomer.NotBefore(), oldUntil)
	}
}

func TestParseSlot(t *testing.T) {
	id, s, err := parseSlot("12", "5|6|7|a|b")
	if err != nil || id != 12 || s != (protocol.Slot{ExpiresMs: 5, HighMs: 6, Holder: "a|b"}) {
		t.Fatalf("parseSlot = %d, %+v, %v", id, s, err)
	}
	for _, c := range [][2]string{
		{"x", "0|0|0|"}, {"-1", "0|0|0|"}, {"+1", "0|0|0|"}, {"01", "0|0|0|"}, {"12345678901234567890", "0|0|0|"},
		{"1", ""}, {"1", "0|0|0"}, {"1", "0|-1|0|"}, {"1", "+1|0|0|"}, {"1", "|0|0|"}, {"1", "0|1234567890123456789|0|"}, {"1", "0|x|0|"},
	} {
		if _, _, err := parseSlot(c[0], c[1]); err == nil || !strings.Contains(err.Error(), "corrupt") {
			t.Errorf("parseSlot(%q, %q): %v, want a corrupt-field error", c[0], c[1], err)
		}
	}
}

func BenchmarkWorkers(b *testing.B) {
	workertest.Benchmark(b, func(b *testing.B) worker.Coordinator {
		client := newClient(b, testenv.Redis().Require(b))
		prefix := "flakeid-bench:" + strconv.FormatInt(time.Now().UnixNano(), 36)
		b.Cleanup(func() {
			keys, _ := client.Keys(context.Background(), prefix+":*").Result()
			if len(keys) > 0 {
				client.Del(context.Background(), keys...)
			}
		})
		return inRegistry(NewWorkers(client, prefix), prefix+":datacenters")
	})
}
