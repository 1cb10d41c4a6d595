package redis

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
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
// the other tests sharing the main Redis.
type server struct {
	addr  string
	cmd   *exec.Cmd
	admin *goredis.Client // a connection of its own for CLIENT PAUSE/UNPAUSE
}

func freePort(t testing.TB) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// startServer starts redis-server on a free loopback port, killed when the
// test ends.
func startServer(t testing.TB) *server {
	t.Helper()
	bin := testenv.Command(t, "redis-server", "the fault tests start a private redis-server")
	dir := t.TempDir()
	var lastErr error
	for range 3 { // another process may take the free port first
		port := freePort(t)
		var out bytes.Buffer
		cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
			"--save", "", "--appendonly", "no", "--dir", dir)
		cmd.Stdout, cmd.Stderr = &out, &out
		cmd.SysProcAttr = sysProcAttr()
		if err := cmd.Start(); err != nil {
			t.Fatalf("starting redis-server: %v", err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		s := &server{addr: fmt.Sprintf("127.0.0.1:%d", port), cmd: cmd}
		s.admin = goredis.NewClient(&goredis.Options{Addr: s.addr, PoolSize: 1, DialTimeout: time.Second,
			MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}})
		up := false
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
			select {
			case err := <-exited:
				lastErr = fmt.Errorf("redis-server exited: %v\n%s", err, out.String())
				deadline = time.Time{}
				continue
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			err := s.admin.Ping(ctx).Err()
			cancel()
			if err == nil {
				up = true
				break
			}
			lastErr = err
			time.Sleep(20 * time.Millisecond)
		}
		if !up {
			s.admin.Close()
			_ = cmd.Process.Kill()
			continue
		}
		t.Cleanup(func() {
			s.admin.Close()
			_ = cmd.Process.Kill() // works on a paused or stopped server too
			<-exited
			if t.Failed() {
				t.Logf("private redis-server at %s:\n%s", s.addr, out.String())
			}
		})
		return s
	}
	t.Fatalf("could not start a private redis-server: %v", lastErr)
	return nil
}

// connector makes clients of one prefix. They talk to the shared Redis,
// except once the test asked for a faulty client: then every client of the
// test talks to a private redis-server that the fault pauses.
type connector struct {
	shared string
	prefix string

	mu         sync.Mutex
	private    *server
	usedShared bool
}

func (c *connector) Connect(t *testing.T) worker.Coordinator {
	c.mu.Lock()
	defer c.mu.Unlock()
	addr := c.shared
	if c.private != nil {
		addr = c.private.addr
	} else {
		c.usedShared = true
	}
	return NewWorkers(newClient(t, addr), c.prefix)
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
	return NewWorkers(newClient(t, c.private.addr), c.prefix), &pauseFault{t: t, s: c.private}
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
			return &connector{shared: addr, prefix: newPrefix(t, addr)}
		},
		TTL: testTTL,
	})
}

// TestPauseFault checks the fault the suite relies on: CLIENT PAUSE WRITE
// holds scripts until CLIENT UNPAUSE, which itself gets through.
func TestPauseFault(t *testing.T) {
	addr := testenv.Redis().Require(t)
	conn := &connector{shared: addr, prefix: "flakeid-test:pause"}
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
// through a TCP proxy: its lease must end, and its generator be revoked,
// before another node can take the worker id; and the renewals it had in
// flight, delivered when the link heals, must not disturb the new holder.
func TestPartitionLosesLeaseBeforeTakeover(t *testing.T) {
	addr := testenv.Redis().Require(t)
	proxy, err := faultnet.Listen(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	prefix := newPrefix(t, addr)
	workertest.Takeover{
		Faulty: NewWorkers(newClient(t, proxy.Addr()), prefix), Fault: proxy,
		Healthy: NewWorkers(newClient(t, addr), prefix),
		TTL:     testTTL, Partition: true, Within: 5 * testTTL,
	}.Run(t)
}

// shared is a coordinator on the shared Redis under a fresh prefix, and a
// raw client to poke its keys.
func shared(t *testing.T) (*Workers, *goredis.Client) {
	addr := testenv.Redis().Require(t)
	raw := newClient(t, addr)
	return NewWorkers(newClient(t, addr), newPrefix(t, addr)), raw
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

	w.acquire = goredis.NewScript(`return redis.call('NO_SUCH_COMMAND')`)
	_, err = w.Acquire(ctx, req)
	wantErr(t, "Acquire with a failing script", err, worker.ErrUnavailable, "Redis replied with an error", "Unknown Redis command")

	w.acquire = goredis.NewScript(`error('boom')`)
	_, err = w.Acquire(ctx, req)
	wantErr(t, "Acquire with a raising script", err, worker.ErrUnavailable, "boom")

	for _, src := range []string{`return 'hello'`, `return {1}`, `return {'a', 'b'}`, `return {99, 0}`, `return {0, -5}`} {
		w.acquire = goredis.NewScript(src)
		_, err = w.Acquire(ctx, req)
		wantErr(t, "Acquire with a script that "+src, err, worker.ErrUnavailable, "replied")
	}
	w.renew = goredis.NewScript(`return {1, 2}`)
	wantErr(t, "Renew with a script that returns a table", cl.Renew(ctx, testTTL, time.Now()), worker.ErrUnavailable, "replied")
	w.release = goredis.NewScript(`return redis.error_reply('FLAKEID_NOTHELD')`)
	wantErr(t, "Release told not held without details", cl.Release(ctx, time.Now()), worker.ErrNotHeld, "held by nobody")
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
	if w.Prefix() != DefaultPrefix {
		t.Fatalf("Prefix() = %q, want %q", w.Prefix(), DefaultPrefix)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	_, err = w.Acquire(ctx, worker.Request{Workers: 1, Owner: "o", TTL: testTTL, Reserve: time.Now()})
	wantErr(t, "Acquire", err, worker.ErrUnavailable, addr)
	_, err = w.List(ctx, 0)
	wantErr(t, "List", err, worker.ErrUnavailable)
}

func TestInvalidRequests(t *testing.T) {
	w := NewWorkers(goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:1"}), "")
	ok := worker.Request{Workers: 1, Owner: "o", TTL: testTTL, Reserve: time.Now()}
	for _, mod := range []func(*worker.Request){
		func(r *worker.Request) { r.Workers = 0 },
		func(r *worker.Request) { r.Datacenter = -1 },
		func(r *worker.Request) { r.Owner = "" },
		func(r *worker.Request) { r.TTL = 0 },
		func(r *worker.Request) { r.Reserve = time.Date(40000, 1, 1, 0, 0, 0, 0, time.UTC) },
	} {
		r := ok
		mod(&r)
		if _, err := w.Acquire(t.Context(), r); !errors.Is(err, worker.ErrInvalidConfig) {
			t.Errorf("Acquire(%+v): %v, want ErrInvalidConfig", r, err)
		}
	}
	if _, err := w.List(t.Context(), -1); !errors.Is(err, worker.ErrInvalidConfig) {
		t.Errorf("List(-1): %v, want ErrInvalidConfig", err)
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
	// Another owner is told who holds the id.
	other := &claim{w: w, key: w.Key(0), id: cl.WorkerID(), owner: "other"}
	wantErr(t, "Renew by another owner", other.Renew(ctx, testTTL, time.Now()), worker.ErrNotHeld, "host|1 2")
	if err := cl.Release(ctx, time.Now()); err != nil {
		t.Fatalf("Release: %v", err)
	}
	wantErr(t, "Renew after Release", cl.Renew(ctx, testTTL, time.Now()), worker.ErrNotHeld, "nobody")
}

// TestAcquireIsIdempotentPerOwner: go-redis retries a script whose reply was
// lost; the retry must answer the same id and Previous, not take another.
func TestAcquireIsIdempotentPerOwner(t *testing.T) {
	ctx := t.Context()
	w, _ := shared(t)
	mark := time.UnixMilli(time.Now().Add(-time.Minute).UnixMilli())
	seed, err := w.Acquire(ctx, worker.Request{Workers: 3, Owner: "seed", TTL: testTTL, Reserve: mark})
	if err != nil {
		t.Fatal(err)
	}
	if err := seed.Release(ctx, mark); err != nil {
		t.Fatal(err)
	}
	req := worker.Request{Workers: 3, Owner: "o", TTL: testTTL, Reserve: time.UnixMilli(time.Now().UnixMilli())}
	first, err := w.Acquire(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	req.Reserve = req.Reserve.Add(time.Second)
	again, err := w.Acquire(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if again.WorkerID() != first.WorkerID() || !again.Previous().Equal(first.Previous()) || !first.Previous().Equal(mark) {
		t.Fatalf("retried Acquire: worker %d from %v; first: worker %d from %v (want %v)",
			again.WorkerID(), again.Previous(), first.WorkerID(), first.Previous(), mark)
	}
	infos, err := w.List(ctx, 0)
	if err != nil || len(infos) != 1 || !infos[0].HighWater.Equal(req.Reserve) {
		t.Fatalf("List = %+v, %v; want one slot with high-water %v", infos, err, req.Reserve)
	}
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
	// A wider range still has never-used ids, from the lowest.
	cl, err := w.Acquire(ctx, worker.Request{Workers: 1 << 31, Owner: "wide", TTL: time.Minute, Reserve: now})
	if err != nil || cl.WorkerID() != n || !cl.Previous().IsZero() {
		t.Fatalf("Acquire of 2^31 ids: %v, %v; want worker %d, never used", cl, err, n)
	}
}

func TestExpiredOwnLease(t *testing.T) {
	ctx := t.Context()
	w, raw := shared(t)
	cl, err := w.Acquire(ctx, worker.Request{Workers: 1, Owner: "o", TTL: testTTL, Reserve: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	// Make the lease lapse without waiting: expiry 1 ms after the epoch.
	v := raw.HGet(ctx, w.Key(0), "0").Val()
	_, rest, _ := strings.Cut(v, "|")
	raw.HSet(ctx, w.Key(0), "0", "1|"+rest)
	wantErr(t, "Renew of a lapsed lease", cl.Renew(ctx, testTTL, time.Now()), worker.ErrNotHeld, "expired")
	wantErr(t, "Release of a lapsed lease", cl.Release(ctx, time.Now()), worker.ErrNotHeld, "expired")
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

func TestMilliseconds(t *testing.T) {
	base := time.UnixMilli(1_700_000_000_123)
	for _, c := range []struct {
		t    time.Time
		want int64
	}{
		{base, 1_700_000_000_123},
		{base.Add(time.Nanosecond), 1_700_000_000_124},
		{base.Add(999 * time.Microsecond), 1_700_000_000_124},
		{time.UnixMilli(-5).Add(-time.Nanosecond), -5},
	} {
		if got := ceilMs(c.t); got != c.want {
			t.Errorf("ceilMs(%v) = %d, want %d", c.t, got, c.want)
		}
	}
	if got := durationMs(1500 * time.Microsecond); got != 2 {
		t.Errorf("durationMs(1.5ms) = %d", got)
	}
}

func TestParseSlot(t *testing.T) {
	id, s, err := parseSlot("12", "5|6|7|a|b")
	if err != nil || id != 12 || s != (slotValue{expires: 5, high: 6, prev: 7, holder: "a|b"}) {
		t.Fatalf("parseSlot = %d, %+v, %v", id, s, err)
	}
	for _, c := range [][2]string{
		{"x", "0|0|0|"}, {"-1", "0|0|0|"}, {"+1", "0|0|0|"}, {"01", "0|0|0|"}, {"1234567890123456", "0|0|0|"},
		{"1", ""}, {"1", "0|0|0"}, {"1", "0|-1|0|"}, {"1", "+1|0|0|"}, {"1", "|0|0|"}, {"1", "0|1234567890123456|0|"},
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
		return NewWorkers(client, prefix)
	})
}
