package worker_test

// Hermetic tests of the lease (lease.go) against workertest.Memory, in a
// testing/synctest bubble: virtual time makes every instant exact, so the
// tests assert when things happen, not only that they do, and take
// milliseconds. (An external test package: workertest imports worker.)

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/flakeid/flakeid/snowflake"
	"github.com/flakeid/flakeid/worker"
	"github.com/flakeid/flakeid/worker/workertest"
)

// The lease timing of these tests (memConfig). ReserveAhead defaults to the
// TTL (2s, less than the default 3s) and Quarantine to ReserveAhead +
// MaxClockSkew (1s).
const (
	ttl          = 2 * time.Second
	renewEvery   = 500 * time.Millisecond
	retryEvery   = 200 * time.Millisecond
	margin       = 500 * time.Millisecond
	reserveAhead = ttl
	quarantine   = reserveAhead + time.Second
	// A lease's first renewal comes renewEvery + retryEvery after Acquire,
	// then one every renewEvery: at 0.7s, 1.2s, 1.7s, … after it.
	probation = renewEvery + retryEvery
)

// memConfig leases worker id 0, the only one, as owner.
func memConfig(t *testing.T, owner string) worker.Config {
	return worker.Config{Workers: 1, TTL: ttl, RenewEvery: renewEvery, RetryEvery: retryEvery, SafetyMargin: margin,
		Owner: owner, Logger: slog.New(slog.NewTextHandler(t.Output(), nil))}
}

func newLeaser(t *testing.T, c worker.Coordinator, cfg worker.Config) worker.Leaser {
	t.Helper()
	lr, err := worker.NewLeaser(c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return lr
}

func acquire(t *testing.T, c worker.Coordinator, cfg worker.Config) worker.Lease {
	t.Helper()
	l, err := newLeaser(t, c, cfg).Acquire(t.Context())
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	return l
}

// fence is a generator bound to a lease that records what the lease did to
// it: every SetUntil, and when it was revoked.
type fence struct {
	*snowflake.Generator
	mu      sync.Mutex
	untils  []time.Time
	revoked time.Time
}

func (f *fence) SetUntil(until time.Time) {
	f.mu.Lock()
	f.untils = append(f.untils, until)
	f.mu.Unlock()
	f.Generator.SetUntil(until)
}

func (f *fence) Revoke() {
	f.mu.Lock()
	if f.revoked.IsZero() {
		f.revoked = time.Now()
	}
	f.mu.Unlock()
	f.Generator.Revoke()
}

func (f *fence) state() (untils []time.Time, revoked time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]time.Time(nil), f.untils...), f.revoked
}

// bind starts a generator from l and binds it. Its layout counts from 1990:
// a bubble's clock starts at 2000-01-01, before the default epoch.
func bind(t *testing.T, l worker.Lease) *fence {
	t.Helper()
	return bindClock(t, l, time.Now)
}

// bindClock is bind with the generator's clock now.
func bindClock(t *testing.T, l worker.Lease, now func() time.Time) *fence {
	t.Helper()
	layout := snowflake.DefaultLayout()
	layout.Epoch = time.Date(1990, 1, 1, 0, 0, 0, 0, time.UTC)
	g, err := snowflake.New(snowflake.Settings{Layout: layout, DatacenterID: l.DatacenterID(), WorkerID: l.WorkerID(),
		NotBefore: l.NotBefore(), Now: now})
	if err != nil {
		t.Fatal(err)
	}
	f := &fence{Generator: g}
	l.Bind(f)
	return f
}

// issue takes an ID from f, which must succeed, and checks that its tick
// lies in [notBefore, until).
func issue(t *testing.T, f *fence, notBefore, until time.Time) {
	t.Helper()
	id, err := f.NextID()
	if err != nil {
		t.Fatalf("NextID at %v: %v", time.Now(), err)
	}
	p, err := f.Layout().Decode(id)
	if err != nil {
		t.Fatal(err)
	}
	if p.Time.Before(notBefore) || !p.Time.Before(until) {
		t.Fatalf("ID %d in the tick of %v, outside the lease's [%v, %v)", id, p.Time, notBefore, until)
	}
}

// pastReservation checks that f refuses to issue because its clock reached
// the reservation, without being revoked.
func pastReservation(t *testing.T, f *fence) {
	t.Helper()
	if id, err := f.NextID(); !errors.Is(err, snowflake.ErrFenced) || !strings.Contains(err.Error(), "past the reservation") {
		t.Fatalf("NextID at %v: %d, %v; want ErrFenced, past the reservation", time.Now(), id, err)
	}
}

// fenced checks that f refuses to issue because it was revoked.
func fenced(t *testing.T, f *fence) {
	t.Helper()
	if id, err := f.NextID(); !errors.Is(err, snowflake.ErrFenced) || !strings.Contains(err.Error(), "revoked") {
		t.Fatalf("NextID after the lease ended: %d, %v; want ErrFenced, revoked", id, err)
	}
}

// slot0 is the coordinator's record of worker id 0.
func slot0(t *testing.T, c worker.Coordinator) worker.Info {
	t.Helper()
	infos, err := c.List(t.Context(), 0)
	if err != nil || len(infos) != 1 || infos[0].Worker != 0 {
		t.Fatalf("List = %+v, %v; want worker 0 alone", infos, err)
	}
	return infos[0]
}

func namespace(t *testing.T, c worker.Coordinator) worker.Namespace {
	t.Helper()
	ns, ok, err := c.Namespace(t.Context(), 0)
	if err != nil || !ok {
		t.Fatalf("Namespace(0) = %+v, %v, %v; want a record", ns, ok, err)
	}
	return ns
}

// sleepUntil advances the bubble's clock to at (never an instant a lease's
// timer fires at, in these tests) and lets every goroutine settle.
func sleepUntil(at time.Time) {
	time.Sleep(time.Until(at))
	synctest.Wait()
}

func held(l worker.Lease) bool {
	select {
	case <-l.Done():
		return false
	default:
		return l.Err() == nil
	}
}

// waitDone waits up to a TTL for l to end and returns when it did.
func waitDone(t *testing.T, l worker.Lease) time.Time {
	t.Helper()
	select {
	case <-l.Done():
		return time.Now()
	case <-time.After(ttl):
		t.Fatalf("the lease still runs at %v", time.Now())
		return time.Time{}
	}
}

// TestLeaseRenewsPastTTL: the renew path. A lease renews every RenewEvery
// and so keeps its worker id far past the TTL; each renewal reserves
// ReserveAhead past its start, and the generator's fence follows.
func TestLeaseRenewsPastTTL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := workertest.NewMemory(nil)
		t0 := time.Now()
		l := acquire(t, m, memConfig(t, "a"))
		defer l.Close()
		f := bind(t, l)

		// The first holder of a new namespace starts at its floor, the
		// quarantine after it was initialised, on probation: Until is
		// NotBefore, so nothing may be issued before the first renewal.
		floor := t0.Add(quarantine)
		if ns := namespace(t, m); !ns.Floor.Equal(floor) || !ns.Initialised.Equal(t0) {
			t.Fatalf("namespace %+v; want initialised at %v with the floor %v", ns, t0, floor)
		}
		if !l.NotBefore().Equal(floor) || !l.Until().Equal(floor) {
			t.Fatalf("NotBefore %v, Until %v; want both at the floor %v", l.NotBefore(), l.Until(), floor)
		}
		holder := slot0(t, m).Holder
		if !strings.HasPrefix(holder, "a/") {
			t.Fatalf("holder %q, want a/…", holder)
		}
		sleepUntil(t0.Add(probation - time.Millisecond))
		if !l.Until().Equal(floor) {
			t.Fatalf("Until %v before the first renewal; want the floor %v", l.Until(), floor)
		}

		for _, tc := range []struct {
			at, lastRenewal time.Duration // after t0
		}{
			{1300 * time.Millisecond, 1200 * time.Millisecond},
			{3300 * time.Millisecond, 3200 * time.Millisecond},
			{5*ttl + 300*time.Millisecond, 5*ttl + 200*time.Millisecond},
		} {
			sleepUntil(t0.Add(tc.at))
			renewed := t0.Add(tc.lastRenewal)
			want := renewed.Add(reserveAhead)
			if !held(l) {
				t.Fatalf("at %v the lease ended: %v", tc.at, l.Err())
			}
			if got := l.Until(); !got.Equal(want) {
				t.Fatalf("at %v Until = %v, want the last renewal's reservation %v", tc.at, got, want)
			}
			untils, revoked := f.state()
			if last := untils[len(untils)-1]; !last.Equal(want) || !revoked.IsZero() {
				t.Fatalf("at %v the fence is %v (revoked %v), want %v", tc.at, last, revoked, want)
			}
			s := slot0(t, m)
			if s.Holder != holder || !s.Expires.Equal(renewed.Add(ttl)) || !s.HighWater.Equal(want) {
				t.Fatalf("at %v the slot is %+v; want held by %s until %v, high-water %v", tc.at, s, holder, renewed.Add(ttl), want)
			}
			if !time.Now().Before(floor) {
				issue(t, f, floor, want)
			}
		}
		// The fence moved forward only, once at Bind and once for each
		// renewal that raised it (1.2s … 10.2s: 19 of them).
		untils, _ := f.state()
		for i := 1; i < len(untils); i++ {
			if !untils[i].After(untils[i-1]) {
				t.Fatalf("the fence went from %v to %v", untils[i-1], untils[i])
			}
		}
		if len(untils) != 20 {
			t.Fatalf("the fence was set %d times, want 20: at Bind and by 19 renewals", len(untils))
		}
	})
}

// linkFault is a way a link to the coordinator fails.
type linkFault struct {
	name string
	cut  func(*workertest.Memory)
}

// linkFaults are the link's failures: refusing at once (Cut), and never
// answering (Hang).
func linkFaults() []linkFault {
	return []linkFault{{"Cut", (*workertest.Memory).Cut}, {"Hang", (*workertest.Memory).Hang}}
}

// TestLeaseLostWhenCutOff: the expire path. A holder cut off from its
// coordinator (failing at once, or hanging) keeps its lease until TTL −
// SafetyMargin after the start of its last successful renewal, and loses it
// exactly then, while the coordinator still holds the id for it: Done
// closes, and the generator keeps issuing up to its last reservation, never
// past it, which is where the next holder of the id starts. Close then
// revokes it.
func TestLeaseLostWhenCutOff(t *testing.T) {
	for _, tc := range linkFaults() {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				m := workertest.NewMemory(nil)
				link := m.Client() // A's link to the coordinator
				t0 := time.Now()
				a := acquire(t, link, memConfig(t, "a"))
				defer a.Close()
				f := bind(t, a)
				sleepUntil(t0.Add(3300 * time.Millisecond))
				before := slot0(t, m)
				lastRenewal := before.Expires.Add(-ttl)
				if want := t0.Add(3200 * time.Millisecond); !lastRenewal.Equal(want) {
					t.Fatalf("last renewal at %v, want %v", lastRenewal, want)
				}
				until := a.Until()
				issue(t, f, a.NotBefore(), until)

				tc.cut(link)
				giveUp := lastRenewal.Add(ttl - margin)
				sleepUntil(giveUp.Add(-time.Millisecond))
				if !held(a) {
					t.Fatalf("lease lost %v before TTL − margin after its last renewal: %v", time.Until(giveUp), a.Err())
				}
				issue(t, f, a.NotBefore(), until) // within the reservation, it still issues

				lost := waitDone(t, a)
				if !lost.Equal(giveUp) {
					t.Fatalf("lease lost at %v, want TTL − margin after the last renewal: %v", lost, giveUp)
				}
				if _, revoked := f.state(); !revoked.IsZero() {
					t.Fatalf("generator revoked at %v when the lease was lost: its reservation still stands", revoked)
				}
				if err := a.Err(); !errors.Is(err, worker.ErrLeaseLost) || errors.Is(err, worker.ErrReleased) ||
					!strings.Contains(err.Error(), "not renewed within") {
					t.Fatalf("Err = %v, want ErrLeaseLost: not renewed", err)
				}
				issue(t, f, a.NotBefore(), until) // on the reservation, until it ends
				if got := a.Until(); !got.Equal(until) {
					t.Fatalf("Until moved to %v while cut off, from %v", got, until)
				}

				// The coordinator holds the id for A until its lease lapses
				// there, the margin later; then B takes it, starting where
				// A's reservation ended.
				lrB := newLeaser(t, m.Client(), memConfig(t, "b"))
				if b, err := lrB.Acquire(t.Context()); !errors.Is(err, worker.ErrExhausted) {
					if err == nil {
						b.Close()
					}
					t.Fatalf("B's Acquire while the coordinator still holds A's lease: %v, want ErrExhausted", err)
				}
				sleepUntil(before.Expires)
				if !until.Equal(before.Expires) {
					t.Fatalf("reserved until %v, want the lease's expiry %v (ReserveAhead = TTL)", until, before.Expires)
				}
				pastReservation(t, f)
				b, err := lrB.Acquire(t.Context())
				if err != nil {
					t.Fatalf("B's Acquire once A's lease lapsed: %v", err)
				}
				defer b.Close()
				if want := until.Add(time.Second); b.WorkerID() != 0 || !b.NotBefore().Equal(want) {
					t.Fatalf("B holds worker %d from %v; want worker 0 from A's last reservation + the skew bound (1s), %v", b.WorkerID(), b.NotBefore(), want)
				}
				link.Heal()
				if err := a.Close(); err != nil || !errors.Is(a.Err(), worker.ErrLeaseLost) {
					t.Fatalf("Close of the lost lease: %v, Err %v; want nil and still ErrLeaseLost", err, a.Err())
				}
				fenced(t, f)
				if s := slot0(t, m); !strings.HasPrefix(s.Holder, "b/") {
					t.Fatalf("after A's Close the slot is %+v, want B's", s)
				}
			})
		})
	}
}

// TestReservationOutlivesLease: a reservation longer than the TTL. A holder
// cut off from its coordinator loses its lease at TTL − SafetyMargin after
// its last renewal, keeps issuing on its reservation for as long as it
// runs, and stops there; another node takes the worker id as soon as the
// coordinator lets the lease lapse and starts where the reservation ends,
// so that the two never issue in the same tick of the id.
func TestReservationOutlivesLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ahead = 3 * ttl
		m := workertest.NewMemory(nil)
		link := m.Client()
		cfg := memConfig(t, "a")
		cfg.ReserveAhead = ahead
		t0 := time.Now()
		a := acquire(t, link, cfg)
		defer a.Close()
		f := bind(t, a)
		// Past the first start's quarantine (ahead + 1s), just after a
		// renewal.
		sleepUntil(t0.Add(8300 * time.Millisecond))
		lastRenewal := slot0(t, m).Expires.Add(-ttl)
		until := a.Until()
		issue(t, f, a.NotBefore(), until)
		if want := lastRenewal.Add(ahead); !until.Equal(want) {
			t.Fatalf("reserved until %v, want %v past the last renewal (%v)", until, ahead, lastRenewal)
		}
		link.Cut()
		lost := waitDone(t, a)
		if want := lastRenewal.Add(ttl - margin); !lost.Equal(want) {
			t.Fatalf("lease lost at %v, want %v", lost, want)
		}
		cfgB := memConfig(t, "b")
		cfgB.ReserveAhead = ahead
		sleepUntil(lastRenewal.Add(ttl))
		b := acquire(t, m.Client(), cfgB)
		defer b.Close()
		if want := until.Add(cfgB.WithDefaults().MaxClockSkew); !b.NotBefore().Equal(want) {
			t.Fatalf("B starts at %v, want A's reservation + the skew bound, %v", b.NotBefore(), want)
		}
		// A issues on its reservation all the way, B's generator waits.
		for now := time.Now(); now.Before(until); now = time.Now() {
			issue(t, f, a.NotBefore(), until)
			sleepUntil(now.Add(500 * time.Millisecond))
		}
		pastReservation(t, f)
		if !a.Until().Equal(until) {
			t.Fatalf("A's reservation moved to %v after the lease ended, from %v", a.Until(), until)
		}
	})
}

// TestLeaseCloseReleases: the close path. Close revokes the generator,
// releases the id with the lease's reservation as its high-water mark, so
// another node acquires it at once, starting there; a second Close is
// harmless, and the stopped lease never touches the id again.
func TestLeaseCloseReleases(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := workertest.NewMemory(nil)
		t0 := time.Now()
		a := acquire(t, m, memConfig(t, "a"))
		f := bind(t, a)
		sleepUntil(t0.Add(3300 * time.Millisecond))
		until := a.Until()
		issue(t, f, a.NotBefore(), until)

		lrB := newLeaser(t, m.Client(), memConfig(t, "b"))
		if b, err := lrB.Acquire(t.Context()); !errors.Is(err, worker.ErrExhausted) {
			if err == nil {
				b.Close()
			}
			t.Fatalf("B's Acquire while A holds the id: %v, want ErrExhausted", err)
		}

		if err := a.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		closed := time.Now()
		select {
		case <-a.Done():
		default:
			t.Fatal("Done not closed after Close")
		}
		if !errors.Is(a.Err(), worker.ErrReleased) || errors.Is(a.Err(), worker.ErrLeaseLost) {
			t.Fatalf("Err after Close = %v, want ErrReleased", a.Err())
		}
		if _, revoked := f.state(); !revoked.Equal(closed) {
			t.Fatalf("generator revoked at %v, want at Close, %v", revoked, closed)
		}
		fenced(t, f)
		if s := slot0(t, m); s.Holder != "" || s.Held(closed) || !s.HighWater.Equal(until) {
			t.Fatalf("after Close the slot is %+v; want free with the lease's reservation %v as its mark", s, until)
		}

		b, err := lrB.Acquire(t.Context())
		if err != nil {
			t.Fatalf("B's Acquire after A's Close: %v", err)
		}
		defer b.Close()
		if want := until.Add(time.Second); time.Since(closed) != 0 || b.WorkerID() != 0 || !b.NotBefore().Equal(want) {
			t.Fatalf("B got worker %d %v after the Close, from %v; want worker 0 at once, from A's reservation + the skew bound (1s), %v",
				b.WorkerID(), time.Since(closed), b.NotBefore(), want)
		}
		if err := a.Close(); err != nil || !errors.Is(a.Err(), worker.ErrReleased) {
			t.Fatalf("second Close: %v, Err %v", err, a.Err())
		}
		sleepUntil(t0.Add(3300*time.Millisecond + 2*ttl))
		if s := slot0(t, m); !held(b) || !strings.HasPrefix(s.Holder, "b/") || !s.Held(time.Now()) {
			t.Fatalf("2×TTL after A's Close the slot is %+v (B's lease: %v); want B's", s, b.Err())
		}
	})
}

// TestLeaseEndsOnReset: the reset path. The coordinator loses its state
// (Wipe) or goes back to an older copy (Snapshot's restore) under a holder;
// its next renewal finds out (ErrReset), the lease ends then with the reason,
// and the re-initialised namespace's floor lies past every reservation the
// holder made, so the next holder never issues where it might have.
func TestLeaseEndsOnReset(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault func(m *workertest.Memory, restore func())
	}{
		{"Wipe", func(m *workertest.Memory, _ func()) { m.Wipe() }},
		{"Rollback", func(_ *workertest.Memory, restore func()) { restore() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				m := workertest.NewMemory(nil)
				t0 := time.Now()
				a := acquire(t, m, memConfig(t, "a"))
				defer a.Close()
				f := bind(t, a)
				sleepUntil(t0.Add(3300 * time.Millisecond))
				old := namespace(t, m)
				restore := m.Snapshot() // worker 0 reserved up to 5.2s
				sleepUntil(t0.Add(3800 * time.Millisecond))
				until := a.Until() // a renewal at 3.7s reserved up to 5.7s
				tc.fault(m, restore)

				// Nothing shows before the next renewal, at 4.2s.
				sleepUntil(t0.Add(4100 * time.Millisecond))
				if !held(a) {
					t.Fatalf("lease ended before a renewal saw the reset: %v", a.Err())
				}
				issue(t, f, a.NotBefore(), until)
				lost := waitDone(t, a)
				if want := t0.Add(4200 * time.Millisecond); !lost.Equal(want) {
					t.Fatalf("lease lost at %v, want at the first renewal after the reset, %v", lost, want)
				}
				if err := a.Err(); !errors.Is(err, worker.ErrLeaseLost) || !errors.Is(err, worker.ErrReset) {
					t.Fatalf("Err = %v, want ErrLeaseLost and ErrReset", err)
				}
				if _, revoked := f.state(); !revoked.IsZero() {
					t.Fatalf("generator revoked at %v: the floor lies past its reservation, which still stands", revoked)
				}
				issue(t, f, a.NotBefore(), until)

				ns := namespace(t, m)
				if ns.Incarnation == old.Incarnation || !ns.Initialised.Equal(lost) || !ns.Floor.Equal(lost.Add(quarantine)) {
					t.Fatalf("namespace %+v after the reset (was %+v); want a new incarnation, initialised at %v with the floor %v",
						ns, old, lost, lost.Add(quarantine))
				}
				if !ns.Floor.After(until) {
					t.Fatalf("the new floor %v is not past the lost holder's reservation %v", ns.Floor, until)
				}

				// Once A's slot lapsed (rolled back, it is A's until 5.2s),
				// B starts at the floor and keeps its lease: the namespace
				// stays as re-initialised.
				sleepUntil(t0.Add(5300 * time.Millisecond))
				b := acquire(t, m.Client(), memConfig(t, "b"))
				defer b.Close()
				if !b.NotBefore().Equal(ns.Floor) {
					t.Fatalf("B starts at %v, want the new floor %v", b.NotBefore(), ns.Floor)
				}
				sleepUntil(t0.Add(5300*time.Millisecond + probation + 100*time.Millisecond))
				if !held(b) || !b.Until().After(b.NotBefore()) {
					t.Fatalf("B after its first renewal: Err %v, Until %v; want held and reserving", b.Err(), b.Until())
				}
				if again := namespace(t, m); again != ns {
					t.Fatalf("the namespace changed again: %+v, was %+v", again, ns)
				}
				if err := a.Close(); err != nil || !errors.Is(a.Err(), worker.ErrReset) {
					t.Fatalf("Close of the lost lease: %v, Err %v; want nil, still ErrReset", err, a.Err())
				}
				fenced(t, f)
			})
		})
	}
}

// TestAcquireRefusesSkewedCoordinator: a node whose clock is more than
// MaxClockSkew off the coordinator's, either way, is refused with
// ErrClockSkew before anything is written.
func TestAcquireRefusesSkewedCoordinator(t *testing.T) {
	for _, tc := range []struct {
		name   string
		offset time.Duration // the coordinator's clock minus the node's
		says   string
	}{
		{"coordinator ahead", 1500 * time.Millisecond, "1.5s behind"},
		{"coordinator behind", -time.Hour, "1h0m0s ahead"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				m := workertest.NewMemory(func() time.Time { return time.Now().Add(tc.offset) })
				before := m.Dump()
				l, err := newLeaser(t, m, memConfig(t, "a")).Acquire(t.Context())
				if err == nil {
					l.Close()
					t.Fatalf("Acquire from a coordinator %v off succeeded", tc.offset)
				}
				if !errors.Is(err, worker.ErrClockSkew) || !strings.Contains(err.Error(), tc.says) {
					t.Fatalf("Acquire: %v, want ErrClockSkew: %s", err, tc.says)
				}
				if after := m.Dump(); after != before {
					t.Fatalf("the refused start changed the coordinator:\n%s\nwas\n%s", after, before)
				}
			})
		})
	}
}

// TestRestartLoopAheadLeavesNoTrace: a node whose clock runs an hour ahead,
// restarted again and again (systemd, Kubernetes), never moves a mark: a
// correct node that comes next starts at once, not an hour later.
func TestRestartLoopAheadLeavesNoTrace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := workertest.NewMemory(nil)
		cfg := memConfig(t, "correct")
		cfg.Workers = 4
		first := acquire(t, m, cfg)
		sleepUntil(time.Now().Add(quarantine + probation))
		if err := first.Close(); err != nil {
			t.Fatal(err)
		}
		before := m.Dump()
		ahead := memConfig(t, "ahead")
		ahead.Workers = 4
		ahead.Now = func() time.Time { return time.Now().Add(time.Hour) }
		for i := range 10 {
			if _, err := newLeaser(t, m, ahead).Acquire(t.Context()); !errors.Is(err, worker.ErrClockSkew) {
				t.Fatalf("start %d of the node an hour ahead: %v, want ErrClockSkew", i, err)
			}
			time.Sleep(time.Second)
		}
		if after := m.Dump(); after != before {
			t.Fatalf("the refused starts changed the coordinator:\n%s\nwas\n%s", after, before)
		}
		next := acquire(t, m, cfg)
		defer next.Close()
		if wait := time.Until(next.NotBefore()); wait > reserveAhead {
			t.Fatalf("the next correct node waits %v for its mark, want at most the reservation %v", wait, reserveAhead)
		}
	})
}

// TestRenewalPastTheBoundEndsLease: a running node whose clock jumps ahead
// by more than MaxClockSkew loses its lease at the next renewal, which the
// coordinator refuses without raising the mark.
func TestRenewalPastTheBoundEndsLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := workertest.NewMemory(nil)
		var jump sync.Mutex
		offset := time.Duration(0)
		cfg := memConfig(t, "jumpy")
		cfg.Now = func() time.Time {
			jump.Lock()
			defer jump.Unlock()
			return time.Now().Add(offset)
		}
		l := acquire(t, m, cfg)
		defer l.Close()
		f := bindClock(t, l, cfg.Now)
		sleepUntil(time.Now().Add(quarantine + probation))
		if !held(l) {
			t.Fatalf("the lease is not held: %v", l.Err())
		}
		jump.Lock()
		offset = 37 * time.Second
		jump.Unlock()
		jumped := time.Now()
		select {
		case <-l.Done():
		case <-time.After(2 * renewEvery):
			t.Fatal("the lease outlived a renewal 37s ahead of the coordinator")
		}
		if !errors.Is(l.Err(), worker.ErrClockSkew) {
			t.Fatalf("the lease ended with %v, want ErrClockSkew", l.Err())
		}
		// A clock out of bounds voids the reservation: the generator is
		// revoked with the lease.
		fenced(t, f)
		if high := slot0(t, m).HighWater; high.After(jumped.Add(reserveAhead)) {
			t.Fatalf("the mark is %v, %v past the jump: the refused renewal moved it", high, high.Sub(jumped))
		}
	})
}

// TestAcquireReturnsRefusalAsIs: a refusal that retrying cannot change (a
// contract conflict) is returned at once and as it is, even by a Leaser
// that waits for a free id.
func TestAcquireReturnsRefusalAsIs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := workertest.NewMemory(nil)
		first := memConfig(t, "a")
		first.Contract = "layout one"
		a := acquire(t, m, first)
		defer a.Close()
		other := memConfig(t, "b")
		other.Contract = "layout two"
		other.WaitForFree = true
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		start := time.Now()
		_, err := newLeaser(t, m.Client(), other).Acquire(ctx)
		if !errors.Is(err, worker.ErrContract) || errors.Is(err, worker.ErrUnavailable) || errors.Is(err, worker.ErrExhausted) {
			t.Fatalf("Acquire: %v, want the contract conflict alone", err)
		}
		for _, want := range []string{"layout one", "layout two"} {
			if !strings.Contains(err.Error(), want) {
				t.Fatalf("error %q does not show the contract %q", err, want)
			}
		}
		if took := time.Since(start); took != 0 {
			t.Fatalf("the refusal came after %v: Acquire retried", took)
		}
	})
}

// TestAcquireAbandonsHungCoordinator: an attempt on a coordinator that never
// answers is abandoned after twice the TTL with ErrUnavailable, and takes
// nothing.
func TestAcquireAbandonsHungCoordinator(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := workertest.NewMemory(nil)
		link := m.Client()
		link.Hang()
		defer link.Heal()
		start := time.Now()
		l, err := newLeaser(t, link, memConfig(t, "a")).Acquire(t.Context())
		if err == nil {
			l.Close()
			t.Fatal("Acquire on a hung link succeeded")
		}
		if !errors.Is(err, worker.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Acquire on a hung link: %v, want ErrUnavailable and the attempt's deadline", err)
		}
		if took := time.Since(start); took != 2*ttl {
			t.Fatalf("gave up after %v, want 2 × TTL = %v", took, 2*ttl)
		}
		if infos, err := m.List(t.Context(), 0); err != nil || len(infos) != 0 {
			t.Fatalf("List = %+v, %v; want nothing taken", infos, err)
		}
	})
}

// TestAcquireSeesCoordinatorBack: with WaitForFree, an Acquire that began
// while the coordinator was unreachable — for a moment or for many backoff
// rounds, failing at once or hanging — leases within a renewal period of
// the coordinator answering again (under synctest the round trips take no
// time), so that a node that lost its lease in an outage issues under a new
// one a renewal period and a probation after the outage, while its old
// reservation may still cover it. With a backoff that grew to 2 s, as it
// did, the wait after a long outage was up to 2 s.
func TestAcquireSeesCoordinatorBack(t *testing.T) {
	for _, tc := range linkFaults() {
		t.Run(tc.name, func(t *testing.T) {
			for _, outage := range []time.Duration{30 * time.Millisecond, 700 * time.Millisecond, 3 * time.Second,
				7300 * time.Millisecond, 9999 * time.Millisecond, 20 * time.Second, 61 * time.Second} {
				for range 8 { // the backoff's jitter: several draws of each
					synctest.Test(t, func(t *testing.T) {
						m := workertest.NewMemory(nil)
						link := m.Client()
						tc.cut(link)
						cfg := memConfig(t, "a")
						cfg.WaitForFree = true
						cfg.Logger = slog.New(slog.DiscardHandler)
						type result struct {
							l   worker.Lease
							err error
							at  time.Time
						}
						got := make(chan result, 1)
						go func() {
							l, err := newLeaser(t, link, cfg).Acquire(t.Context())
							got <- result{l, err, time.Now()}
						}()
						time.Sleep(outage)
						back := time.Now()
						link.Heal()
						r := <-got
						if r.err != nil {
							t.Fatalf("after a %v outage: %v", outage, r.err)
						}
						defer r.l.Close()
						if wait := r.at.Sub(back); wait > renewEvery {
							t.Fatalf("after a %v outage, leased %v after the coordinator answered again, want at most the renewal period %v",
								outage, wait, renewEvery)
						}
					})
				}
			}
		})
	}
}
