package workertest

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/flakeid/flakeid/worker"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// memConnector connects the suite to a Memory: every Connect is a client
// with a link of its own, so a Fault cuts one node off.
type memConnector struct{ m *Memory }

func (c memConnector) Connect(*testing.T) worker.Coordinator { return c.m.Client() }

func (c memConnector) ConnectFaulty(*testing.T) (worker.Coordinator, Fault) {
	cl := c.m.Client()
	return cl, cl
}

func (c memConnector) Wipe(*testing.T)                              { c.m.Wipe() }
func (c memConnector) Snapshot(*testing.T) func()                   { return c.m.Snapshot() }
func (c memConnector) OtherNamespace(*testing.T) worker.Coordinator { return c.m.InNamespace("other") }

// TestMemoryConformance runs the suite against the reference coordinator,
// which checks the suite itself. It runs on the real clock: the suite uses
// subtests, which a synctest bubble does not allow.
func TestMemoryConformance(t *testing.T) {
	Run(t, Harness{Open: func(*testing.T) Connector { return memConnector{NewMemory(nil)} }})
}

// hangFault hangs a client's link instead of cutting it.
type hangFault struct{ *Memory }

func (f hangFault) Cut() { f.Hang() }

// TestMemoryTakeover runs the fencing scenario in virtual time with each of
// Memory's faults, as a partition: the taker's link stays up throughout.
func TestMemoryTakeover(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault func(*Memory) Fault
	}{
		{"Cut", func(m *Memory) Fault { return m }},
		{"Hang", func(m *Memory) Fault { return hangFault{m} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				m := NewMemory(nil)
				a := m.Client()
				Takeover{Faulty: a, Fault: tc.fault(a), Healthy: m.Client(), TTL: 2 * time.Second, Partition: true}.Run(t)
			})
		})
	}
}

func memRequest(owner string, workers int64) worker.Request {
	return worker.Request{Workers: workers, Owner: owner, TTL: 2 * time.Second, Reserve: ms(time.Now()), Contract: testContract,
		Quarantine: time.Second}
}

// TestMemoryLinks: Cut fails at once, Hang waits for the context or Heal,
// and either affects one client only.
func TestMemoryLinks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := NewMemory(nil)
		a, b := m.Client(), m.Client()

		a.Cut()
		start := time.Now()
		if _, err := a.Acquire(t.Context(), memRequest("a", 2)); !errors.Is(err, worker.ErrUnavailable) || !strings.Contains(err.Error(), "cut") {
			t.Fatalf("Acquire on a cut link: %v, want ErrUnavailable saying cut", err)
		}
		if _, err := a.List(t.Context(), 0); !errors.Is(err, worker.ErrUnavailable) {
			t.Fatalf("List on a cut link: %v", err)
		}
		if time.Since(start) != 0 {
			t.Fatalf("a cut link took %v to fail, want no time", time.Since(start))
		}
		if _, err := b.Acquire(t.Context(), memRequest("b", 2)); err != nil {
			t.Fatalf("another client's Acquire while a is cut: %v", err)
		}

		a.Hang()
		ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
		_, err := a.Acquire(ctx, memRequest("a", 2))
		cancel()
		if !errors.Is(err, worker.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Acquire on a hung link: %v, want ErrUnavailable and the deadline", err)
		}
		if took := time.Since(start); took != 3*time.Second {
			t.Fatalf("a hung call returned after %v, want its deadline, 3s", took)
		}

		// A call waiting on a hung link goes through once healed, late.
		var wg sync.WaitGroup
		var late worker.Claim
		var lateErr error
		wg.Go(func() { late, lateErr = a.Acquire(t.Context(), memRequest("a", 2)) })
		time.Sleep(time.Second)
		synctest.Wait()
		if late != nil || lateErr != nil {
			t.Fatalf("a call on a hung link answered: %v, %v", late, lateErr)
		}
		a.Heal()
		wg.Wait()
		if lateErr != nil {
			t.Fatalf("the held Acquire after Heal: %v", lateErr)
		}
		if got := time.Since(start); got != 4*time.Second {
			t.Fatalf("the held Acquire went through at %v, want when healed (4s)", got)
		}
		infos, err := b.List(t.Context(), 0)
		if err != nil || !slices.ContainsFunc(infos, func(in worker.Info) bool { return in.Worker == late.WorkerID() && in.Holder == "a" }) {
			t.Fatalf("after the held Acquire List = %+v, %v; want worker %d held by a", infos, err, late.WorkerID())
		}

		// Cut ends a Hang: a waiting call fails; other clients go on.
		a.Hang()
		var cutErr error
		wg.Go(func() { _, cutErr = a.List(t.Context(), 0) })
		synctest.Wait()
		if _, err := b.List(t.Context(), 0); err != nil {
			t.Fatalf("b's List while a hangs: %v", err)
		}
		a.Cut()
		wg.Wait()
		if !errors.Is(cutErr, worker.ErrUnavailable) || !strings.Contains(cutErr.Error(), "cut") {
			t.Fatalf("a call waiting on a hung link that is then cut: %v, want ErrUnavailable saying cut", cutErr)
		}
		a.Heal()
		if _, err := a.List(t.Context(), 0); err != nil {
			t.Fatalf("List after Heal: %v", err)
		}
	})
}

// TestMemoryClock: leases lapse by the injected clock, which claims report.
func TestMemoryClock(t *testing.T) {
	var mu sync.Mutex
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	clock := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return at
	}
	advance := func(d time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		at = at.Add(d)
	}
	m := NewMemory(clock)
	ctx := t.Context()
	r := memRequest("a", 1)
	cl, err := m.Acquire(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	if got, stale := cl.Clock(); !got.Equal(at) || stale != 0 {
		t.Fatalf("Clock() = %v, %v; want the injected %v, never stale", got, stale, at)
	}
	if ns, _, _ := m.Namespace(ctx, 0); !ns.Floor.Equal(at.Add(time.Second)) || !cl.Previous().Equal(ns.Floor) {
		t.Fatalf("floor %v, Previous %v: want the injected clock + the quarantine, %v", ns.Floor, cl.Previous(), at.Add(time.Second))
	}
	advance(2*time.Second - time.Nanosecond)
	r.Owner = "b"
	if _, err := m.Acquire(ctx, r); !errors.Is(err, worker.ErrExhausted) || !strings.Contains(err.Error(), "all 1 worker ids") {
		t.Fatalf("Acquire 1ns before the lease lapses by the coordinator's clock: %v, want ErrExhausted naming 1 held", err)
	}
	advance(time.Nanosecond)
	b, err := m.Acquire(ctx, r)
	if err != nil {
		t.Fatalf("Acquire when the lease lapsed by the coordinator's clock: %v", err)
	}
	if err := cl.Renew(ctx, 2*time.Second, ms(at)); !errors.Is(err, worker.ErrNotHeld) {
		t.Fatalf("the lapsed holder's Renew: %v, want ErrNotHeld", err)
	}
	advance(time.Second)
	if err := b.Renew(ctx, 2*time.Second, ms(at)); err != nil {
		t.Fatal(err)
	}
	if got, _ := b.Clock(); !got.Equal(at) {
		t.Fatalf("Clock() after Renew = %v, want %v", got, at)
	}
	if infos, _ := m.List(ctx, 0); len(infos) != 1 || !infos[0].Expires.Equal(at.Add(2*time.Second)) {
		t.Fatalf("List after Renew = %+v; want expiry at the injected clock + TTL", infos)
	}
}

// TestMemorySnapshotRestoresTwice: a restore puts back the copy, not a view
// of it, so it can be restored twice; and a namespace record older than a
// claim's is a rollback (re-initialised), a newer one a reset by someone
// else (left alone).
func TestMemorySnapshotRestoresTwice(t *testing.T) {
	m := NewMemory(nil)
	ctx := t.Context()
	a, err := m.Acquire(ctx, memRequest("a", 4))
	if err != nil {
		t.Fatal(err)
	}
	restore := m.Snapshot()
	old, _, _ := m.Namespace(ctx, 0)
	for i := range 2 {
		if _, err := m.Acquire(ctx, memRequest("b", 4)); err != nil {
			t.Fatal(err)
		}
		restore()
		if infos, _ := m.List(ctx, 0); len(infos) != 1 || infos[0].Holder != "a" {
			t.Fatalf("restore %d: List = %+v, want a's slot alone", i+1, infos)
		}
	}
	m.Wipe()
	if infos, _ := m.List(ctx, 0); len(infos) != 0 {
		t.Fatalf("after Wipe List = %+v", infos)
	}
	b, err := m.Acquire(ctx, memRequest("b", 4))
	if err != nil {
		t.Fatal(err)
	}
	wiped, _, _ := m.Namespace(ctx, 0)
	restore() // back to a copy from before b's incarnation
	if err := b.Renew(ctx, 2*time.Second, ms(time.Now())); !errors.Is(err, worker.ErrReset) || !strings.Contains(err.Error(), "older") {
		t.Fatalf("Renew under a namespace record older than the claim's: %v, want ErrReset naming the older copy", err)
	}
	fresh, _, _ := m.Namespace(ctx, 0)
	for _, inc := range []string{old.Incarnation, wiped.Incarnation} {
		if fresh.Incarnation == inc {
			t.Fatalf("after the rollback the incarnation is %s again, want a new one", inc)
		}
	}
	if err := a.Renew(ctx, 2*time.Second, ms(time.Now())); !errors.Is(err, worker.ErrReset) || !strings.Contains(err.Error(), "re-initialised at") {
		t.Fatalf("Renew under a newer namespace record: %v, want ErrReset naming the re-initialisation", err)
	}
	if ns, _, _ := m.Namespace(ctx, 0); ns != fresh {
		t.Fatalf("a claim of an older incarnation re-initialised the namespace again: %+v, was %+v", ns, fresh)
	}
}
