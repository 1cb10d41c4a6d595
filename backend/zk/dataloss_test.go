//go:build linux

package zk

import (
	"cmp"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/flakeid/flakeid/internal/testenv"
	"github.com/flakeid/flakeid/internal/zkproc"
	"github.com/flakeid/flakeid/worker"
)

// privateZooKeeper starts a ZooKeeper server of the test's own (killed at
// its end, and with the test process), which the test may wipe. A missing
// zkServer.sh skips the test, and fails it under CI.
func privateZooKeeper(t *testing.T) *zkproc.Server {
	t.Helper()
	bin := testenv.Command(t, cmp.Or(os.Getenv("FLAKEID_ZK_BIN"), zkproc.DefaultBin),
		"the test starts a private ZooKeeper to wipe; install Debian's zookeeper package (./scripts/services.sh does) or set FLAKEID_ZK_BIN")
	s, err := zkproc.Start(t.Context(), zkproc.Options{Bin: bin, Dir: t.TempDir(),
		SysProcAttr: &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Kill)
	return s
}

// recFencer records what a lease did to its generator.
type recFencer struct {
	mu      sync.Mutex
	until   time.Time
	revoked bool
}

func (f *recFencer) SetUntil(t time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.revoked {
		f.until = t
	}
}

func (f *recFencer) Revoke() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.revoked = true
}

func (f *recFencer) Now() time.Time { return time.Now() }

func (f *recFencer) state() (time.Time, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.until, f.revoked
}

// waitIssuing waits until the lease's generator may issue (a renewal after
// its probation moved the reservation past NotBefore), or fails at deadline.
func waitIssuing(t *testing.T, l worker.Lease, f *recFencer, deadline time.Time) {
	t.Helper()
	for {
		if until, _ := f.state(); until.After(l.NotBefore()) {
			return
		}
		select {
		case <-l.Done():
			t.Fatalf("the lease ended before it issued: %v", l.Err())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the lease on worker id %d did not start issuing by %s", l.WorkerID(), deadline.Format(stamp))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestServerDataLossRecovers: a ZooKeeper server that lost its disk (killed,
// its data directory deleted, restarted on the same port) comes back empty,
// its zxids starting again from 0, and refuses every client that has seen a
// later zxid than its own — go-zookeeper's reconnections of a Workers' shared
// session among them. The holder's lease ends (its session cannot survive
// the wipe), and the same Workers, whose shared connection is replaced once
// it has been without a session for its session timeout, hands out a worker
// id again, behind the floor of the re-initialised namespace.
func TestServerDataLossRecovers(t *testing.T) {
	t.Parallel()
	srv := privateZooKeeper(t)
	w := dial(t, srv.Addr(), DefaultPrefix)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg := worker.Config{Workers: 4, TTL: testTTL, Owner: "node", WaitForFree: true, Logger: quiet}
	lr, err := worker.NewLeaser(w, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	l1, err := lr.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer l1.Close()
	var f1 recFencer
	l1.Bind(&f1)
	waitIssuing(t, l1, &f1, time.Now().Add(10*time.Second))

	// A claim of another datacenter, renewed by hand, to look at its
	// session after the wipe.
	quarantine := 3 * time.Second
	direct, err := w.Acquire(ctx, worker.Request{Datacenter: 1, Workers: 2, Owner: "direct", TTL: testTTL,
		Reserve: time.Now().Add(time.Second), Contract: "c", Quarantine: quarantine})
	if err != nil {
		t.Fatal(err)
	}
	dc := sessionOf(t, w, 1, direct)
	if err := direct.Renew(ctx, testTTL, time.Now().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	old, ok, err := w.Namespace(ctx, 0)
	if err != nil || !ok {
		t.Fatalf("Namespace before the wipe: %v, %v", ok, err)
	}
	// Make the server's zxids run well ahead of where a wiped server's
	// start again (so that it refuses the clients who saw them for a
	// while): every node of a test writes a few.
	for range 30 {
		if _, err := w.zkNow(ctx); err != nil {
			t.Fatal(err)
		}
	}

	wiped := time.Now()
	if err := srv.Restart(t.Context(), true); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	t.Logf("the server was killed, wiped and back in %v", back.Sub(wiped).Round(time.Millisecond))

	// The holder's lease ends: it can renew neither on the wiped server
	// (which refuses its session, then knows nothing of it) nor anywhere
	// else, and gives up by its TTL at the latest.
	select {
	case <-l1.Done():
	case <-time.After(time.Until(back.Add(testTTL + 5*time.Second))):
		t.Fatalf("the lease outlived the wipe by %v", time.Since(back))
	}
	if !errors.Is(l1.Err(), worker.ErrLeaseLost) {
		t.Fatalf("the lease ended with %v, want ErrLeaseLost", l1.Err())
	}
	// Its generator keeps the reservation it held (the floor of the
	// namespace re-initialised below lies past it), and only that.
	until1, revoked := f1.state()
	if revoked || !until1.Equal(l1.Until()) {
		t.Fatalf("the lost lease's generator: revoked %v, fence %v; want its reservation %v kept", revoked, until1, l1.Until())
	}
	t.Logf("the lease ended %v after the server came back: %v", time.Since(back).Round(time.Millisecond), l1.Err())

	// The same Workers hands out a worker id again: its shared connection
	// is replaced by one that has seen no zxid, after its session timeout
	// at the latest, and the first Acquire re-initialises the namespace
	// behind a floor a quarantine ahead.
	lq := testTTL + time.Second // the Leaser's default quarantine: ReserveAhead (the TTL) + MaxClockSkew
	deadline := back.Add(sharedSessionTimeout + lq + 5*time.Second)
	actx, acancel := context.WithDeadline(t.Context(), deadline)
	defer acancel()
	l2, err := lr.Acquire(actx)
	if err != nil {
		t.Fatalf("no lease %v after the server came back: %v", time.Since(back).Round(time.Millisecond), err)
	}
	defer l2.Close()
	acquired := time.Since(back)
	var f2 recFencer
	l2.Bind(&f2)
	waitIssuing(t, l2, &f2, deadline)
	t.Logf("a new lease on worker id %d %v after the server came back, issuing after %v", l2.WorkerID(),
		acquired.Round(time.Millisecond), time.Since(back).Round(time.Millisecond))
	ctx = t.Context()
	ns, ok, err := w.Namespace(ctx, 0)
	if err != nil || !ok {
		t.Fatalf("Namespace after the wipe: %v, %v", ok, err)
	}
	if ns.Incarnation == old.Incarnation || ns.Floor.Before(ns.Initialised.Add(lq)) {
		t.Fatalf("the namespace after the wipe is %+v (before: %+v); want a new incarnation with a floor a quarantine %v after its initialisation",
			ns, old, lq)
	}
	if !ns.Floor.After(until1) {
		t.Fatalf("the namespace's floor %s is not past the lost lease's reservation %s", ns.Floor.Format(stamp), until1.Format(stamp))
	}
	if l2.NotBefore().Before(ns.Floor) {
		t.Fatalf("the new lease starts at %s, before the namespace's floor %s", l2.NotBefore().Format(stamp), ns.Floor.Format(stamp))
	}

	// The hand-renewed claim's session ended (its watchdog, since it was
	// not renewed, or ZooKeeper telling it the session is unknown), no new
	// session took its place, and its Renew says the lease is over.
	for dl := time.Now().Add(2 * testTTL); dc.err() == nil; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(dl) {
			t.Fatal("the claim's session outlived the wipe")
		}
	}
	t.Logf("the claim's session ended: %v", dc.err())
	if id := dc.conn.SessionID(); id != 0 && id != dc.id {
		t.Fatalf("the claim's connection opened another session %#x (its own was %#x)", id, dc.id)
	}
	err = direct.Renew(ctx, testTTL, time.Now().Add(time.Second))
	if !errors.Is(err, worker.ErrReset) && !errors.Is(err, worker.ErrNotHeld) {
		t.Fatalf("the claim's Renew after the wipe: %v, want ErrReset or ErrNotHeld", err)
	}
	t.Log(err)
	infos, err := w.List(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range infos {
		if in.Holder == "direct" {
			t.Fatalf("the claim's holder node is back after the wipe: %+v", in)
		}
	}
}
