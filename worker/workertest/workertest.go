// Package workertest is the conformance suite every worker.Coordinator
// passes, in the manner of testing/slogtest: a backend's test calls Run with
// a Harness that connects to the real service, and the same tests run for
// every backend.
package workertest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flakeid/flakeid/worker"
)

// Harness connects the suite to a backend.
type Harness struct {
	// Open prepares an empty namespace (key prefix, table rows, file) for
	// one test and returns its Connector. Clean up with t.Cleanup.
	Open func(t *testing.T) Connector
	// TTL is the lease TTL the tests use: at least the backend's minimum.
	// Default 2s.
	TTL time.Duration
	// Expiry is how long after a claim's last renewal (or its Acquire) the
	// coordinator may keep the id before another client can take it: the
	// suite waits this long before it expects a takeover. Default TTL +
	// TTL/2. A coordinator that treats the TTL as a lower bound says how
	// much longer it may hold on (Consul: twice the TTL plus the
	// lock-delay). It never shortens the wait below the TTL: a holder must
	// not lose its id to another before its TTL has passed.
	Expiry time.Duration
}

// Connector makes clients of one namespace, as separate nodes would have.
type Connector interface {
	// Connect returns a new client.
	Connect(t *testing.T) worker.Coordinator
	// ConnectFaulty returns a new client whose link to the coordinator the
	// returned Fault can cut (a network partition, a paused server, a held
	// file lock), while clients from Connect may still reach it or not, as
	// the fault has it. Clients from Connect and ConnectFaulty of one
	// Connector reach the same coordinator; the suite calls ConnectFaulty
	// before Connect, so a harness may start a private server there.
	ConnectFaulty(t *testing.T) (worker.Coordinator, Fault)
	// Wipe deletes every record of this namespace from the coordinator —
	// namespace records, slots, high-water marks — as a coordinator that
	// lost its data would: restarted without persistence, flushed, keys
	// deleted or evicted, a table truncated.
	Wipe(t *testing.T)
	// Snapshot copies every record of this namespace; the returned function
	// puts the copy back in place of what is there then, as a restore from
	// an older backup or a failover to a lagging replica would.
	Snapshot(t *testing.T) (restore func())
	// OtherNamespace returns a client of another namespace (key prefix,
	// table) on the same coordinator, sharing its datacenter registry; nil
	// when the backend has exactly one namespace per coordinator (a file).
	OtherNamespace(t *testing.T) worker.Coordinator
}

// Fault cuts and heals a client's link to the coordinator.
type Fault interface {
	Cut()
	Heal()
}

// Run runs the conformance suite.
func Run(t *testing.T, h Harness) {
	if h.TTL == 0 {
		h.TTL = 2 * time.Second
	}
	h.Expiry = max(h.Expiry, h.TTL+h.TTL/2)
	s := &suite{h: h}
	for _, tc := range []struct {
		name string
		fn   func(*testing.T)
	}{
		{"ExclusiveAcquisition", s.exclusive},
		{"ExhaustionNamesCount", s.exhaustion},
		{"RenewExtendsAndRaises", s.renew},
		{"RenewWithTheSameReservationHolds", s.renewSame},
		{"HighWaterNeverDecreases", s.highWaterMonotone},
		{"MarkNeverBelowReservation", s.markCoversReservation},
		{"ReleaseFreesKeepingHighWater", s.release},
		{"ExpiryAndTakeover", s.takeover},
		{"PrefersPassedHighWater", s.prefersPassed},
		{"TakeoverAllowsForSkew", s.takeoverAllowsForSkew},
		{"DatacentersAreSeparate", s.datacenters},
		{"ListReportsSlots", s.list},
		{"LeaseRenewsBeyondTTL", s.leaseRenews},
		{"LeaseCloseReleases", s.leaseClose},
		{"FencingWhenUnreachable", s.fencing},
		{"AcquireHonoursContext", s.acquireContext},
		{"NamespaceRecorded", s.namespaceRecorded},
		{"ContractConflictRefused", s.contractConflict},
		{"DatacenterOfAnotherNamespaceRefused", s.datacenterClaimed},
		{"OneIDSpacePerRegistry", s.oneSpace},
		{"NamespacesNeverShareADatacenter", s.namespacesApart},
		{"RefusalsWriteNothing", s.refusalsWriteNothing},
		{"ClockAheadRefusedBeforeWriting", s.clockAhead},
		{"RenewPastTheBoundRefused", s.renewPastBound},
		{"ClockProbeWritesNothing", s.clockProbe},
		{"ClaimsListedAndFreedSafely", s.claims},
		{"MarkLoweredOnlyByCommand", s.lowerMark},
		{"WipeEndsHolderAndQuarantines", s.wipeOnRenew},
		{"WipeThenAcquireQuarantines", s.wipeThenAcquire},
		{"RollbackDetected", s.rollback},
		{"LeaseEndsOnReset", s.leaseEndsOnReset},
		{"ClockReading", s.clockReading},
		{"RollbackNewcomerNeverOverlaps", s.rollbackNewcomer},
	} {
		t.Run(tc.name, tc.fn)
	}
}

type suite struct{ h Harness }

func (s *suite) req(owner string, workers int64, reserve time.Time) worker.Request {
	return worker.Request{Workers: workers, Owner: owner, TTL: s.h.TTL, Reserve: reserve, Contract: testContract, Space: testSpace}
}

// testSpace and testContract are the ID space and the contract of the
// suite's requests.
const (
	testSpace    = "41/5/5/12 × 1ms since 2025-01-01T00:00:00Z"
	testContract = testSpace + "; quarantine 0s"
)

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func ms(t time.Time) time.Time { return t.Truncate(time.Millisecond).Round(0) }

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func mustAcquire(t *testing.T, c worker.Coordinator, r worker.Request) worker.Claim {
	t.Helper()
	cl, err := c.Acquire(ctxT(t), r)
	if err != nil {
		t.Fatalf("Acquire(%+v): %v", r, err)
	}
	return cl
}

func slot(t *testing.T, c worker.Coordinator, dc, id int64) worker.Info {
	t.Helper()
	infos, err := c.List(ctxT(t), dc)
	if err != nil {
		t.Fatalf("List(%d): %v", dc, err)
	}
	for _, i := range infos {
		if i.Worker == id {
			return i
		}
	}
	t.Fatalf("List(%d) has no worker %d: %+v", dc, id, infos)
	return worker.Info{}
}

// exclusive: many contenders at once for few ids; exactly one holder each.
func (s *suite) exclusive(t *testing.T) {
	conn := s.h.Open(t)
	const contenders, ids = 16, 4
	clients := make([]worker.Coordinator, contenders)
	for i := range clients {
		clients[i] = conn.Connect(t)
	}
	reserve := ms(time.Now().Add(time.Second))
	var mu sync.Mutex
	held := map[int64]string{}
	var exhausted int
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i, c := range clients {
		wg.Go(func() {
			<-start
			owner := fmt.Sprintf("contender-%d", i)
			cl, err := c.Acquire(ctxT(t), s.req(owner, ids, reserve))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				if prev, dup := held[cl.WorkerID()]; dup {
					t.Errorf("worker id %d handed to %s and %s", cl.WorkerID(), prev, owner)
				}
				if cl.WorkerID() < 0 || cl.WorkerID() >= ids {
					t.Errorf("worker id %d outside [0, %d)", cl.WorkerID(), ids)
				}
				held[cl.WorkerID()] = owner
			case errors.Is(err, worker.ErrExhausted):
				exhausted++
			default:
				t.Errorf("Acquire: %v", err)
			}
		})
	}
	close(start)
	wg.Wait()
	if len(held) != ids || exhausted != contenders-ids {
		t.Fatalf("%d ids held and %d contenders told exhausted; want %d and %d", len(held), exhausted, ids, contenders-ids)
	}
	for id, owner := range held {
		if got := slot(t, clients[0], 0, id); got.Holder != owner || !got.Held(time.Now()) {
			t.Errorf("List says worker %d is held by %q until %v; Acquire gave it to %q", id, got.Holder, got.Expires, owner)
		}
	}
}

func (s *suite) exhaustion(t *testing.T) {
	c := s.h.Open(t).Connect(t)
	reserve := ms(time.Now())
	for i := range 3 {
		mustAcquire(t, c, s.req(fmt.Sprintf("o%d", i), 3, reserve))
	}
	_, err := c.Acquire(ctxT(t), s.req("late", 3, reserve))
	if !errors.Is(err, worker.ErrExhausted) {
		t.Fatalf("fourth Acquire of 3 ids: %v, want ErrExhausted", err)
	}
	if !strings.Contains(err.Error(), "3") {
		t.Fatalf("error %q does not say how many are held", err)
	}
}

func (s *suite) renew(t *testing.T) {
	c := s.h.Open(t).Connect(t)
	r1 := ms(time.Now().Add(time.Second))
	cl := mustAcquire(t, c, s.req("renewer", 1, r1))
	before := slot(t, c, 0, cl.WorkerID())
	if !before.HighWater.Equal(r1) {
		t.Fatalf("high-water after Acquire = %v, want the reservation %v", before.HighWater, r1)
	}
	time.Sleep(50 * time.Millisecond)
	r2 := r1.Add(1500 * time.Millisecond)
	if err := cl.Renew(ctxT(t), s.h.TTL, r2); err != nil {
		t.Fatalf("Renew: %v", err)
	}
	after := slot(t, c, 0, cl.WorkerID())
	if !after.Expires.After(before.Expires) {
		t.Fatalf("Renew did not extend the lease: expires %v, before %v", after.Expires, before.Expires)
	}
	if !after.HighWater.Equal(r2) {
		t.Fatalf("high-water after Renew = %v, want %v", after.HighWater, r2)
	}
	if after.Holder != "renewer" {
		t.Fatalf("holder after Renew = %q", after.Holder)
	}
}

// renewSame: renewals that reserve nothing new (the same reservation, by
// a node that gives its clock) still keep the lease for as long as they
// come, past several TTLs: a renewal extends the lease whatever it writes.
func (s *suite) renewSame(t *testing.T) {
	c := s.h.Open(t).Connect(t)
	now := ms(time.Now())
	r := s.req("steady", 1, now.Add(time.Second))
	r.Now = now
	cl := mustAcquire(t, c, r)
	for end := time.Now().Add(2 * s.h.TTL); time.Now().Before(end); time.Sleep(s.h.TTL / 4) {
		if err := cl.Renew(ctxT(t), s.h.TTL, r.Reserve); err != nil {
			t.Fatalf("Renew with the same reservation: %v", err)
		}
	}
	if in := slot(t, c, 0, cl.WorkerID()); in.Holder != "steady" || !in.Held(time.Now()) {
		t.Fatalf("after renewals with the same reservation over two TTLs the slot is %+v, want held by steady", in)
	}
	if _, err := c.Acquire(ctxT(t), s.req("other", 1, ms(time.Now()))); !errors.Is(err, worker.ErrExhausted) {
		t.Fatalf("another Acquire while the renewed lease runs: %v, want ErrExhausted", err)
	}
}

func (s *suite) highWaterMonotone(t *testing.T) {
	c := s.h.Open(t).Connect(t)
	high := ms(time.Now().Add(time.Hour))
	cl := mustAcquire(t, c, s.req("a", 1, high))
	if err := cl.Renew(ctxT(t), s.h.TTL, high.Add(-30*time.Minute)); err != nil {
		t.Fatalf("Renew: %v", err)
	}
	if got := slot(t, c, 0, 0).HighWater; !got.Equal(high) {
		t.Fatalf("a lower reservation lowered the high-water mark to %v (was %v)", got, high)
	}
	if err := cl.Release(ctxT(t), ms(time.Now())); err != nil {
		t.Fatalf("Release: %v", err)
	}
	next := mustAcquire(t, c, s.req("b", 1, ms(time.Now())))
	if !next.Previous().Equal(high) {
		t.Fatalf("next holder's Previous = %v, want %v", next.Previous(), high)
	}
	if got := slot(t, c, 0, 0).HighWater; !got.Equal(high) {
		t.Fatalf("Acquire with a lower reservation lowered the high-water mark to %v", got)
	}
}

// markCoversReservation: a reservation between two milliseconds is stored
// rounded up, never down, by Acquire, Renew and Release: a mark below the
// reservation would let the next holder start in a tick this one used.
func (s *suite) markCoversReservation(t *testing.T) {
	c := s.h.Open(t).Connect(t)
	covers := func(what string, reserve time.Time) {
		t.Helper()
		if got := slot(t, c, 0, 0).HighWater; got.Before(reserve) {
			t.Fatalf("%s with the reservation %s stored the mark %s, below it", what,
				reserve.UTC().Format(time.RFC3339Nano), got.UTC().Format(time.RFC3339Nano))
		}
	}
	base := ms(time.Now())
	reserve := base.Add(300*time.Millisecond + 400*time.Microsecond)
	cl := mustAcquire(t, c, s.req("a", 1, reserve))
	covers("Acquire", reserve)
	reserve = base.Add(700*time.Millisecond + time.Microsecond)
	if err := cl.Renew(ctxT(t), s.h.TTL, reserve); err != nil {
		t.Fatalf("Renew: %v", err)
	}
	covers("Renew", reserve)
	reserve = base.Add(900*time.Millisecond + 999*time.Microsecond)
	if err := cl.Release(ctxT(t), reserve); err != nil {
		t.Fatalf("Release: %v", err)
	}
	covers("Release", reserve)
	next := mustAcquire(t, c, s.req("b", 1, base))
	if next.Previous().Before(reserve) {
		t.Fatalf("the next holder's Previous %s is below the last reservation %s", next.Previous(), reserve)
	}
}

func (s *suite) release(t *testing.T) {
	conn := s.h.Open(t)
	a, b := conn.Connect(t), conn.Connect(t)
	before := time.Now()
	first := mustAcquire(t, a, s.req("first", 1, ms(time.Now())))
	if p := first.Previous(); p.Before(before.Add(-5*time.Second)) || p.After(time.Now().Add(5*time.Second)) {
		t.Fatalf("a never-used id of a new namespace has Previous %v, want the namespace's floor: about now (%v)", p, before)
	}
	final := ms(time.Now().Add(2 * time.Second))
	if err := first.Release(ctxT(t), final); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if got := slot(t, a, 0, first.WorkerID()); got.Held(time.Now()) {
		t.Fatalf("released slot still held: %+v", got)
	}
	second := mustAcquire(t, b, s.req("second", 1, ms(time.Now())))
	if second.WorkerID() != first.WorkerID() || !second.Previous().Equal(final) {
		t.Fatalf("after release: worker %d with Previous %v; want worker %d with Previous %v",
			second.WorkerID(), second.Previous(), first.WorkerID(), final)
	}
	if err := first.Release(ctxT(t), final); !errors.Is(err, worker.ErrNotHeld) {
		t.Fatalf("second Release by the old owner: %v, want ErrNotHeld", err)
	}
	if got := slot(t, a, 0, second.WorkerID()); got.Holder != "second" || !got.Held(time.Now()) {
		t.Fatalf("the old owner's Release freed the new holder's slot: %+v", got)
	}
}

func (s *suite) takeover(t *testing.T) {
	conn := s.h.Open(t)
	a, b := conn.Connect(t), conn.Connect(t)
	reserve := ms(time.Now().Add(s.h.TTL))
	old := mustAcquire(t, a, s.req("old", 1, reserve))
	if _, err := b.Acquire(ctxT(t), s.req("new", 1, ms(time.Now()))); !errors.Is(err, worker.ErrExhausted) {
		t.Fatalf("Acquire of a held id: %v, want ErrExhausted", err)
	}
	time.Sleep(s.h.Expiry)
	newReserve := ms(time.Now())
	cl := mustAcquire(t, b, s.req("new", 1, newReserve))
	if cl.WorkerID() != old.WorkerID() {
		t.Fatalf("took over worker %d, want %d", cl.WorkerID(), old.WorkerID())
	}
	if !cl.Previous().Equal(reserve) {
		t.Fatalf("new holder's Previous = %v, want the dead holder's reservation %v", cl.Previous(), reserve)
	}
	if err := old.Renew(ctxT(t), s.h.TTL, reserve.Add(time.Hour)); !errors.Is(err, worker.ErrNotHeld) {
		t.Fatalf("old holder's Renew after takeover: %v, want ErrNotHeld", err)
	}
	if got := slot(t, a, 0, cl.WorkerID()); got.Holder != "new" || !got.HighWater.Equal(maxTime(reserve, newReserve)) {
		t.Fatalf("old holder's failed Renew changed the slot: %+v", got)
	}
}

// takeoverAllowsForSkew: a newcomer starts the request's MaxClockSkew
// (rounded up to a millisecond) past the id's mark, whether the holder
// before lost its lease or released it — a holder that lost its lease
// issues until its own clock, up to the skew behind, reaches the mark —
// and among free ids prefers one whose mark + skew has passed.
func (s *suite) takeoverAllowsForSkew(t *testing.T) {
	conn := s.h.Open(t)
	a, b := conn.Connect(t), conn.Connect(t)
	const skew = 1500*time.Millisecond + 300*time.Microsecond
	const skewUp = 1501 * time.Millisecond // rounded up to a millisecond
	withSkew := func(owner string, workers int64, reserve time.Time) worker.Request {
		r := s.req(owner, workers, reserve)
		r.MaxClockSkew = skew
		return r
	}
	reserve := ms(time.Now().Add(s.h.TTL))
	old := mustAcquire(t, a, s.req("old", 1, reserve))
	time.Sleep(s.h.Expiry)
	cl := mustAcquire(t, b, withSkew("new", 1, ms(time.Now())))
	// from reports whether a claim starts at mark + skew, up to rounding
	// the skew up to a millisecond.
	from := func(c worker.Claim, mark time.Time) bool {
		return !c.Previous().Before(mark.Add(skew)) && !c.Previous().After(mark.Add(skewUp))
	}
	if cl.WorkerID() != old.WorkerID() || !from(cl, reserve) {
		t.Fatalf("took over a lost lease: worker %d from %v; want worker %d from its mark + the skew bound, %v",
			cl.WorkerID(), cl.Previous(), old.WorkerID(), reserve.Add(skewUp))
	}
	final := ms(time.Now().Add(time.Second))
	if err := cl.Release(ctxT(t), final); err != nil {
		t.Fatalf("Release: %v", err)
	}
	next := mustAcquire(t, a, withSkew("next", 1, ms(time.Now())))
	if !from(next, final) {
		t.Fatalf("took over a released id from %v, want its mark + the skew bound, %v", next.Previous(), final.Add(skewUp))
	}

	// In another datacenter: id 0's mark has passed, but not by the
	// skew; id 1's passed long ago.
	now := ms(time.Now())
	rx, ry := s.req("x", 2, now.Add(200*time.Millisecond)), s.req("y", 2, now.Add(-10*time.Second))
	rx.Datacenter, ry.Datacenter = 1, 1
	x, y := mustAcquire(t, a, rx), mustAcquire(t, a, ry)
	if x.WorkerID() != 0 || y.WorkerID() != 1 {
		t.Fatalf("took workers %d and %d, want 0 and 1", x.WorkerID(), y.WorkerID())
	}
	for _, c := range []worker.Claim{x, y} {
		if err := c.Release(ctxT(t), time.Time{}); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(time.Until(now.Add(300 * time.Millisecond)))
	rz := withSkew("z", 2, ms(time.Now()))
	rz.Datacenter = 1
	if z := mustAcquire(t, b, rz); z.WorkerID() != y.WorkerID() {
		t.Fatalf("took worker %d, whose mark passed %v ago, less than the skew bound %v, over worker %d, whose mark passed 10s ago",
			z.WorkerID(), time.Since(now.Add(200*time.Millisecond)).Round(time.Millisecond), skew, y.WorkerID())
	}
}

func (s *suite) prefersPassed(t *testing.T) {
	c := s.h.Open(t).Connect(t)
	now := ms(time.Now())
	x := mustAcquire(t, c, s.req("x", 2, now))
	y := mustAcquire(t, c, s.req("y", 2, now))
	future := now.Add(time.Hour)
	if err := x.Release(ctxT(t), future); err != nil {
		t.Fatal(err)
	}
	if err := y.Release(ctxT(t), now); err != nil {
		t.Fatal(err)
	}
	cl := mustAcquire(t, c, s.req("z", 2, ms(time.Now())))
	if cl.WorkerID() != y.WorkerID() {
		t.Fatalf("took worker %d (high-water %v) over worker %d (high-water passed)", cl.WorkerID(), future, y.WorkerID())
	}
}

func (s *suite) datacenters(t *testing.T) {
	c := s.h.Open(t).Connect(t)
	now := ms(time.Now())
	for dc := range int64(3) {
		r := s.req(fmt.Sprintf("dc%d", dc), 1, now)
		r.Datacenter = dc
		if cl, err := c.Acquire(ctxT(t), r); err != nil || cl.WorkerID() != 0 {
			t.Fatalf("datacenter %d: %v, %v", dc, cl, err)
		}
	}
	infos, err := c.List(ctxT(t), 1)
	if err != nil || len(infos) != 1 || infos[0].Datacenter != 1 || infos[0].Holder != "dc1" {
		t.Fatalf("List(1) = %+v, %v", infos, err)
	}
}

func (s *suite) list(t *testing.T) {
	c := s.h.Open(t).Connect(t)
	if infos, err := c.List(ctxT(t), 0); err != nil || len(infos) != 0 {
		t.Fatalf("List of an empty namespace = %+v, %v", infos, err)
	}
	now := ms(time.Now())
	for i := range 3 {
		mustAcquire(t, c, s.req(fmt.Sprintf("o%d", i), 5, now.Add(time.Duration(i)*time.Second)))
	}
	infos, err := c.List(ctxT(t), 0)
	if err != nil || len(infos) != 3 {
		t.Fatalf("List = %+v, %v", infos, err)
	}
	for i, in := range infos {
		if i > 0 && in.Worker <= infos[i-1].Worker {
			t.Fatalf("List not ordered by worker: %+v", infos)
		}
		if in.Holder == "" || !in.Held(time.Now()) || in.Expires.After(time.Now().Add(s.h.TTL+time.Second)) {
			t.Fatalf("slot %+v: want held, expiring within the TTL", in)
		}
	}
}

// leaseConfig is the Leaser configuration of the tests: leases of ttl,
// renewed eight times a TTL.
func leaseConfig(t *testing.T, ttl time.Duration) worker.Config {
	return worker.Config{Logger: slog.New(slog.NewTextHandler(t.Output(), nil)), Workers: 2, TTL: ttl, RenewEvery: ttl / 8, ReserveAhead: ttl / 4,
		SafetyMargin: ttl / 4, RetryEvery: ttl / 20}
}

// newLeaser is a Leaser of c with cfg.
func newLeaser(t *testing.T, c worker.Coordinator, cfg worker.Config) worker.Leaser {
	t.Helper()
	lr, err := worker.NewLeaser(c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return lr
}

// acquireLease acquires a lease from lr; the caller closes it.
func acquireLease(t *testing.T, lr worker.Leaser) worker.Lease {
	t.Helper()
	l, err := lr.Acquire(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// fencer records what a lease did to its generator.
type fencer struct {
	mu      sync.Mutex
	until   time.Time
	revoked time.Time
}

func (f *fencer) SetUntil(t time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.revoked.IsZero() {
		f.until = t
	}
}
func (f *fencer) Revoke() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.revoked.IsZero() {
		f.revoked = time.Now()
	}
}
func (f *fencer) Now() time.Time { return time.Now() }
func (f *fencer) state() (time.Time, time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.until, f.revoked
}

func (s *suite) leaseRenews(t *testing.T) {
	c := s.h.Open(t).Connect(t)
	l := acquireLease(t, newLeaser(t, c, leaseConfig(t, s.h.TTL)))
	defer l.Close()
	var f fencer
	l.Bind(&f)
	start := time.Now()
	time.Sleep(2 * s.h.TTL)
	select {
	case <-l.Done():
		t.Fatalf("lease ended after 2×TTL despite renewals: %v", l.Err())
	default:
	}
	// After 2×TTL of renewals the reservation has followed the clock past
	// 1.5×TTL, well beyond where the lease started (the namespace's floor,
	// TTL/4 + 1s ahead), with room for a slow renewal on a loaded machine.
	if until, _ := f.state(); !until.After(start.Add(s.h.TTL + s.h.TTL/2)) {
		t.Fatalf("reservation did not follow the renewals: %v, 1.5×TTL after %v", until, start)
	}
	// The reservation first: a renewal between the two reads raises both,
	// the stored mark before the fence, so the mark read after must cover
	// the fence read before (read the other way round, a renewal landing
	// in between fails the check).
	until := l.Until()
	if got := slot(t, c, 0, l.WorkerID()); got.HighWater.Before(until) {
		t.Fatalf("coordinator high-water %v is behind the reservation the generator may use (%v)", got.HighWater, until)
	}
}

func (s *suite) leaseClose(t *testing.T) {
	conn := s.h.Open(t)
	c := conn.Connect(t)
	lr := newLeaser(t, c, leaseConfig(t, s.h.TTL))
	l := acquireLease(t, lr)
	var f fencer
	l.Bind(&f)
	until := l.Until()
	if err := l.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	select {
	case <-l.Done():
	default:
		t.Fatal("Done not closed after Close")
	}
	if !errors.Is(l.Err(), worker.ErrReleased) {
		t.Fatalf("Err after Close = %v, want ErrReleased", l.Err())
	}
	if _, revoked := f.state(); revoked.IsZero() {
		t.Fatal("Close did not revoke the generator")
	}
	if err := l.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	got := slot(t, c, 0, l.WorkerID())
	if got.Held(time.Now()) || got.HighWater.Before(until) {
		t.Fatalf("after Close the slot is %+v; want free with high-water ≥ %v", got, until)
	}
	// The next acquirer gets an id; if it is the released one, it starts
	// after the released reservation.
	l2 := acquireLease(t, lr)
	defer l2.Close()
	if l2.WorkerID() == l.WorkerID() && l2.NotBefore().Before(until) {
		t.Fatalf("the next holder starts at %v, before the released reservation %v", l2.NotBefore(), until)
	}
}

// fencing: a holder cut off from the coordinator loses its lease before
// anyone else can hold its worker id and issues no further than its last
// reservation, where the next holder starts; the id is usable after the
// fault.
func (s *suite) fencing(t *testing.T) {
	conn := s.h.Open(t)
	faulty, fault := conn.ConnectFaulty(t)
	Takeover{Faulty: faulty, Fault: fault, Healthy: conn.Connect(t), TTL: s.h.TTL,
		Within: s.h.Expiry + 2*s.h.TTL + 10*time.Second}.Run(t)
}

func (s *suite) acquireContext(t *testing.T) {
	c := s.h.Open(t).Connect(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := c.Acquire(ctx, s.req("x", 1, ms(time.Now()))); err == nil {
		t.Fatal("Acquire with a cancelled context succeeded")
	}
	// WaitForFree waits for a held id until the context ends.
	cfg := leaseConfig(t, s.h.TTL)
	cfg.Workers = 1
	holder := acquireLease(t, newLeaser(t, c, cfg))
	defer holder.Close()
	cfg.WaitForFree = true
	lr := newLeaser(t, c, cfg)
	ctx, cancel = context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	if l, err := lr.Acquire(ctx); err == nil {
		l.Close()
		t.Fatal("Acquire of a held id succeeded")
	} else if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, worker.ErrExhausted) {
		t.Fatalf("waiting Acquire: %v, want the deadline and ErrExhausted", err)
	}
}

// quarantine is the Quarantine of the reset tests' requests.
const quarantine = 3 * time.Second

// namespace reads the namespace record of datacenter 0, failing when none.
func namespace(t *testing.T, c worker.Coordinator) worker.Namespace {
	t.Helper()
	ns, ok, err := c.Namespace(ctxT(t), 0)
	if err != nil || !ok {
		t.Fatalf("Namespace(0) = %+v, %v, %v; want a record", ns, ok, err)
	}
	return ns
}

// nearNow fails unless t is within a few seconds of now plus d (the test
// machine and the coordinator share a clock, give or take).
func nearNow(t *testing.T, what string, got time.Time, d time.Duration) {
	t.Helper()
	want := time.Now().Add(d)
	if got.Before(want.Add(-5*time.Second)) || got.After(want.Add(5*time.Second)) {
		t.Fatalf("%s = %v, want about %v", what, got, want)
	}
}

func (s *suite) namespaceRecorded(t *testing.T) {
	c := s.h.Open(t).Connect(t)
	if ns, ok, err := c.Namespace(ctxT(t), 0); err != nil || ok {
		t.Fatalf("Namespace of an unused datacenter = %+v, %v, %v; want none", ns, ok, err)
	}
	r := s.req("first", 2, ms(time.Now()))
	r.Quarantine = quarantine
	cl := mustAcquire(t, c, r)
	ns := namespace(t, c)
	if ns.Incarnation == "" || ns.Contract != testContract {
		t.Fatalf("namespace record %+v: want an incarnation and the contract %q", ns, testContract)
	}
	nearNow(t, "initialised", ns.Initialised, 0)
	if d := ns.Floor.Sub(ns.Initialised); d < quarantine || d > quarantine+time.Second {
		t.Fatalf("floor %v is %v after initialisation, want the quarantine %v", ns.Floor, d, quarantine)
	}
	if cl.Previous().Before(ns.Floor) {
		t.Fatalf("the first holder starts at %v, before the namespace's floor %v", cl.Previous(), ns.Floor)
	}
	// A second holder starts after the floor too, and the record stays.
	cl2 := mustAcquire(t, c, r)
	if cl2.Previous().Before(ns.Floor) {
		t.Fatalf("the second holder starts at %v, before the namespace's floor %v", cl2.Previous(), ns.Floor)
	}
	if again := namespace(t, c); again != ns {
		t.Fatalf("the namespace record changed without a reset: %+v, then %+v", ns, again)
	}
}

func (s *suite) contractConflict(t *testing.T) {
	c := s.h.Open(t).Connect(t)
	mustAcquire(t, c, s.req("first", 4, ms(time.Now())))
	other := s.req("other", 4, ms(time.Now()))
	other.Contract = "41/5/4/13 × 1ms since 2025-01-01T00:00:00Z; quarantine 0s"
	_, err := c.Acquire(ctxT(t), other)
	if !errors.Is(err, worker.ErrContract) {
		t.Fatalf("Acquire with another contract: %v, want ErrContract", err)
	}
	for _, want := range []string{testContract, other.Contract} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("error %q does not show the contract %q", err, want)
		}
	}
	if infos, err := c.List(ctxT(t), 0); err != nil || len(infos) != 1 {
		t.Fatalf("the refused Acquire changed the slots: %+v, %v", infos, err)
	}
	// Another datacenter of the namespace may have its own quarantine, in
	// the same ID space.
	other.Contract = testSpace + "; quarantine 5s"
	other.Datacenter = 1
	mustAcquire(t, c, other)
}

// view is what a coordinator shows of datacenters dcs: each slot's holder
// and mark, and the namespace record. Two views are equal when nothing of
// it changed.
func view(t *testing.T, c worker.Coordinator, dcs ...int64) string {
	t.Helper()
	var b strings.Builder
	for _, dc := range dcs {
		infos, err := c.List(ctxT(t), dc)
		if err != nil {
			t.Fatalf("List(%d): %v", dc, err)
		}
		for _, in := range infos {
			fmt.Fprintf(&b, "dc %d worker %d holder %q high %s\n", dc, in.Worker, in.Holder, in.HighWater.UTC().Format(time.RFC3339Nano))
		}
		ns, ok, err := c.Namespace(ctxT(t), dc)
		if err != nil {
			t.Fatalf("Namespace(%d): %v", dc, err)
		}
		if ok {
			fmt.Fprintf(&b, "dc %d record %+v\n", dc, ns)
		}
	}
	return b.String()
}

// unchanged fails the test when the view of c over dcs is not before.
func unchanged(t *testing.T, what string, c worker.Coordinator, before string, dcs ...int64) {
	t.Helper()
	if after := view(t, c, dcs...); after != before {
		t.Fatalf("%s changed the coordinator:\n%s\nwas\n%s", what, after, before)
	}
}

// oneSpace: every namespace and datacenter on one registry shares one ID
// space; a request with another layout is refused, whatever its
// datacenter or namespace, and nothing is written.
func (s *suite) oneSpace(t *testing.T) {
	conn := s.h.Open(t)
	c := conn.Connect(t)
	mustAcquire(t, c, s.req("first", 4, ms(time.Now())))
	const otherSpace = "41/4/6/12 × 1ms since 2025-01-01T00:00:00Z"
	other := s.req("other", 64, ms(time.Now()))
	other.Space, other.Contract = otherSpace, otherSpace+"; quarantine 0s"
	refused := func(c worker.Coordinator, dc int64, where string) {
		t.Helper()
		before := view(t, c, 0, dc)
		r := other
		r.Datacenter = dc
		_, err := c.Acquire(ctxT(t), r)
		if !errors.Is(err, worker.ErrContract) {
			t.Fatalf("%s: Acquire with another ID space on datacenter %d: %v, want ErrContract", where, dc, err)
		}
		for _, want := range []string{testSpace, otherSpace} {
			if !strings.Contains(err.Error(), want) {
				t.Fatalf("%s: error %q does not show the ID space %q", where, err, want)
			}
		}
		unchanged(t, where+": the refused Acquire", c, before, 0, dc)
	}
	refused(c, 1, "the same namespace")
	refused(c, 0, "the same datacenter")
	if o := conn.OtherNamespace(t); o != nil {
		refused(o, 2, "another namespace on the same registry")
		// The space was not taken by the refusals: the first one's layout
		// is still admitted there.
		r := s.req("there", 4, ms(time.Now()))
		r.Datacenter = 2
		mustAcquire(t, o, r)
	}
	r := s.req("same", 4, ms(time.Now()))
	r.Datacenter = 1
	mustAcquire(t, c, r)
}

// namespacesApart searches random sequences of Acquires from two namespaces
// of one coordinator, with random layouts and datacenters: whatever the
// order, everything admitted shares one ID space, and no datacenter is
// admitted to both namespaces — so no two admitted nodes can issue the same
// 63-bit value (issue 46: two registries on one Redis admitted two
// clusters to the same datacenter and worker id). A refusal wraps
// ErrContract, or ErrExhausted within a namespace.
func (s *suite) namespacesApart(t *testing.T) {
	seed := time.Now().UnixNano()
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	t.Logf("seed %d", seed)
	spaces := []string{testSpace, "41/4/6/12 × 1ms since 2025-01-01T00:00:00Z", "39/5/5/14 × 10ms since 2025-01-01T00:00:00Z"}
	for trial := range 3 {
		conn := s.h.Open(t)
		namespaces := []worker.Coordinator{conn.Connect(t), conn.OtherNamespace(t)}
		if namespaces[1] == nil {
			t.Skip("one namespace per coordinator")
		}
		space := ""              // the ID space of everything admitted
		owner := map[int64]int{} // datacenter → the namespace admitted to it
		for step := range 10 {
			ns, dc, sp := rng.IntN(len(namespaces)), int64(rng.IntN(3)), spaces[rng.IntN(len(spaces))]
			r := s.req(fmt.Sprintf("t%d-s%d", trial, step), 2, ms(time.Now()))
			r.Datacenter, r.Space, r.Contract = dc, sp, sp+"; quarantine 0s"
			_, err := namespaces[ns].Acquire(ctxT(t), r)
			what := fmt.Sprintf("trial %d step %d: namespace %d, datacenter %d, space %q", trial, step, ns, dc, sp)
			switch {
			case err == nil:
				if space != "" && sp != space {
					t.Fatalf("%s admitted beside the space %q: two layouts on one coordinator", what, space)
				}
				if o, ok := owner[dc]; ok && o != ns {
					t.Fatalf("%s admitted, but namespace %d holds the datacenter: both can issue the same IDs", what, o)
				}
				space, owner[dc] = sp, ns
			case errors.Is(err, worker.ErrContract):
				if o, ok := owner[dc]; space == "" || (sp == space && (!ok || o == ns)) {
					t.Fatalf("%s refused with nothing in its way: %v", what, err)
				}
			case errors.Is(err, worker.ErrExhausted):
				if o, ok := owner[dc]; !ok || o != ns || sp != space {
					t.Fatalf("%s: %v; want ErrContract", what, err)
				}
			default:
				t.Fatalf("%s: %v", what, err)
			}
		}
	}
}

// refusalsWriteNothing: an Acquire refused because every id is held or for
// its contract changes nothing the coordinator shows.
func (s *suite) refusalsWriteNothing(t *testing.T) {
	c := s.h.Open(t).Connect(t)
	for i := range 2 {
		mustAcquire(t, c, s.req(fmt.Sprintf("o%d", i), 2, ms(time.Now().Add(time.Second))))
	}
	before := view(t, c, 0, 1)
	if _, err := c.Acquire(ctxT(t), s.req("late", 2, ms(time.Now().Add(time.Hour)))); !errors.Is(err, worker.ErrExhausted) {
		t.Fatalf("Acquire of a held-out datacenter: %v, want ErrExhausted", err)
	}
	unchanged(t, "an exhausted Acquire", c, before, 0, 1)
	r := s.req("contract", 4, ms(time.Now().Add(time.Hour)))
	r.Contract = testSpace + "; quarantine 9s"
	if _, err := c.Acquire(ctxT(t), r); !errors.Is(err, worker.ErrContract) {
		t.Fatalf("Acquire with another quarantine: %v, want ErrContract", err)
	}
	unchanged(t, "an Acquire refused for its contract", c, before, 0, 1)
}

// peer acquires a worker id for a holder whose clock is this machine's, so
// that a coordinator without a clock of its own (etcd, Consul) has one to
// compare with, and returns the time it sent.
func (s *suite) peer(t *testing.T, c worker.Coordinator) time.Time {
	t.Helper()
	now := time.Now()
	r := s.req("peer", 4, ms(now.Add(time.Second)))
	r.Now = now
	mustAcquire(t, c, r)
	return now
}

// clockAhead: a request whose clock is an hour ahead of the coordinator's
// (of its live peers' on a coordinator without a clock) is refused with
// ErrClockSkew, and no mark moves.
func (s *suite) clockAhead(t *testing.T) {
	c := s.h.Open(t).Connect(t)
	s.peer(t, c)
	before := view(t, c, 0)
	for i := range 3 {
		node := time.Now().Add(time.Hour)
		r := s.req(fmt.Sprintf("ahead-%d", i), 4, ms(node.Add(3*time.Second)))
		r.Now, r.MaxClockSkew = node, time.Second
		_, err := c.Acquire(ctxT(t), r)
		if !errors.Is(err, worker.ErrClockSkew) {
			t.Fatalf("Acquire an hour ahead: %v, want ErrClockSkew", err)
		}
	}
	unchanged(t, "an Acquire an hour ahead", c, before, 0)
	// Within the bound it is admitted.
	node := time.Now().Add(200 * time.Millisecond)
	r := s.req("within", 4, ms(node.Add(3*time.Second)))
	r.Now, r.MaxClockSkew = node, time.Second
	mustAcquire(t, c, r)
}

// renewPastBound: a Renew that would raise the mark past the coordinator's
// clock + the claim's reservation ahead + MaxClockSkew (a node whose clock
// jumped forward) is refused with ErrClockSkew, and the mark stays.
func (s *suite) renewPastBound(t *testing.T) {
	c := s.h.Open(t).Connect(t)
	now := s.peer(t, c)
	r := s.req("jumpy", 4, ms(now.Add(2*time.Second)))
	r.Now, r.MaxClockSkew = now, time.Second
	cl := mustAcquire(t, c, r)
	if err := cl.Renew(ctxT(t), s.h.TTL, ms(time.Now().Add(2500*time.Millisecond))); err != nil {
		t.Fatalf("Renew within the bound: %v", err)
	}
	before := view(t, c, 0)
	err := cl.Renew(ctxT(t), s.h.TTL, ms(time.Now().Add(40*time.Second)))
	if !errors.Is(err, worker.ErrClockSkew) {
		t.Fatalf("Renew 37s past the clock: %v, want ErrClockSkew", err)
	}
	unchanged(t, "a Renew past the bound", c, before, 0)
	if err := cl.Release(ctxT(t), ms(time.Now())); err != nil {
		t.Fatalf("Release after the refused Renew: %v", err)
	}
}

// claims: a coordinator with several namespaces implements worker.Registry:
// it lists the ID space and the claims, refuses to free a datacenter while
// a worker id of it is held or a mark is ahead, or for a namespace that
// does not hold the claim, and once freed the datacenter goes to whoever
// claims it next, starting past every mark of the old namespace.
func (s *suite) claims(t *testing.T) {
	conn := s.h.Open(t)
	c := conn.Connect(t)
	o := conn.OtherNamespace(t)
	if o == nil {
		t.Log("one namespace per coordinator: nothing to free")
		return
	}
	reg, ok := c.(worker.Registry)
	oreg, ok2 := o.(worker.Registry)
	if !ok || !ok2 {
		t.Fatalf("%T has several namespaces but does not implement worker.Registry", c)
	}
	cl := mustAcquire(t, c, s.req("old", 2, ms(time.Now())))
	got, err := reg.Claims(ctxT(t))
	if err != nil {
		t.Fatalf("Claims: %v", err)
	}
	if !got.HasSpace || got.Space != testSpace || len(got.Datacenters) != 1 || got.Datacenters[0].Datacenter != 0 || got.Datacenters[0].Namespace == "" {
		t.Fatalf("Claims = %+v, want the space %q and datacenter 0 claimed", got, testSpace)
	}
	if theirs, err := oreg.Claims(ctxT(t)); err != nil || len(theirs.Datacenters) != 1 || theirs.Datacenters[0] != got.Datacenters[0] {
		t.Fatalf("the other namespace's Claims = %+v, %v; want the same registry %+v", theirs, err, got)
	}
	if err := reg.Unclaim(ctxT(t), 0); !errors.Is(err, worker.ErrInUse) || !strings.Contains(err.Error(), "held") {
		t.Fatalf("Unclaim while worker 0 is held: %v, want ErrInUse naming it held", err)
	}
	_, err = o.Acquire(ctxT(t), s.req("new", 2, ms(time.Now())))
	if !errors.Is(err, worker.ErrContract) || !strings.Contains(err.Error(), "flakeid workers unclaim --datacenter 0") {
		t.Fatalf("another namespace acquiring the claimed datacenter: %v, want ErrContract naming the unclaim command", err)
	}
	mark := ms(time.Now().Add(time.Second))
	if err := cl.Release(ctxT(t), mark); err != nil {
		t.Fatal(err)
	}
	if err := reg.Unclaim(ctxT(t), 0); !errors.Is(err, worker.ErrInUse) || !strings.Contains(err.Error(), "ahead") {
		t.Fatalf("Unclaim while a mark is ahead: %v, want ErrInUse naming the mark", err)
	}
	time.Sleep(time.Until(mark) + 100*time.Millisecond)
	if err := oreg.Unclaim(ctxT(t), 0); !errors.Is(err, worker.ErrContract) {
		t.Fatalf("Unclaim by the namespace that does not hold the claim: %v, want ErrContract", err)
	}
	if err := reg.Unclaim(ctxT(t), 0); err != nil {
		t.Fatalf("Unclaim of a datacenter nobody uses: %v", err)
	}
	if got, err := reg.Claims(ctxT(t)); err != nil || len(got.Datacenters) != 0 || !got.HasSpace {
		t.Fatalf("Claims after Unclaim = %+v, %v; want no claim, the space kept", got, err)
	}
	ncl := mustAcquire(t, o, s.req("new", 2, ms(time.Now())))
	if !ncl.Previous().After(mark) {
		t.Fatalf("the new namespace starts at %v, not past the old namespace's mark %v", ncl.Previous(), mark)
	}
	if _, err := c.Acquire(ctxT(t), s.req("old-again", 2, ms(time.Now()))); !errors.Is(err, worker.ErrContract) {
		t.Fatalf("the old namespace after the new one claimed the datacenter: %v, want ErrContract", err)
	}
}

// lowerMark: a mark goes down only by MarkLowerer.LowerMark, and only for a
// free worker id, to a time not before the coordinator's clock and below
// the mark; the next holder then starts from the lowered mark.
func (s *suite) lowerMark(t *testing.T) {
	c := s.h.Open(t).Connect(t)
	ml, ok := c.(worker.MarkLowerer)
	if !ok {
		t.Fatalf("%T does not implement worker.MarkLowerer", c)
	}
	ahead := ms(time.Now().Add(time.Hour))
	cl := mustAcquire(t, c, s.req("pushed", 1, ahead))
	to := ms(time.Now().Add(2 * time.Second))
	if _, err := ml.LowerMark(ctxT(t), 0, 0, to); !errors.Is(err, worker.ErrInUse) {
		t.Fatalf("LowerMark of a held id: %v, want ErrInUse", err)
	}
	if err := cl.Release(ctxT(t), ahead); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []time.Time{ms(time.Now().Add(-time.Minute)), ahead.Add(time.Second)} {
		if _, err := ml.LowerMark(ctxT(t), 0, 0, bad); !errors.Is(err, worker.ErrInvalidConfig) {
			t.Fatalf("LowerMark to %v (mark %v): %v, want ErrInvalidConfig", bad, ahead, err)
		}
	}
	if got := slot(t, c, 0, 0).HighWater; !got.Equal(ahead) {
		t.Fatalf("refused LowerMark calls moved the mark to %v, want %v", got, ahead)
	}
	from, err := ml.LowerMark(ctxT(t), 0, 0, to)
	if err != nil || !from.Equal(ahead) {
		t.Fatalf("LowerMark = %v, %v; want the old mark %v", from, err, ahead)
	}
	if got := slot(t, c, 0, 0).HighWater; !got.Equal(to) {
		t.Fatalf("the mark is %v after LowerMark, want %v", got, to)
	}
	next := mustAcquire(t, c, s.req("next", 1, ms(time.Now())))
	if !next.Previous().Equal(maxTime(to, namespace(t, c).Floor)) {
		t.Fatalf("the next holder starts at %v, want the lowered mark %v", next.Previous(), to)
	}
}

// clockProbe: Clock reads the coordinator's clock (or reports none) and
// writes nothing, not even a namespace record for a new datacenter.
func (s *suite) clockProbe(t *testing.T) {
	c := s.h.Open(t).Connect(t)
	r := s.req("probe", 4, ms(time.Now()))
	r.Datacenter = 3
	at, stale, err := c.Clock(ctxT(t), r)
	if err != nil {
		t.Fatalf("Clock: %v", err)
	}
	check := func(what string) {
		t.Helper()
		// A peer clock (etcd, Consul) is stale by up to the time a live
		// holder keeps its clock key without writing it: within twice the
		// time the coordinator may keep an id after its holder's last word.
		if stale < 0 || stale > 2*s.h.Expiry {
			t.Fatalf("%s: stale %v, want 0–%v", what, stale, 2*s.h.Expiry)
		}
		nearNow(t, what, at, 0)
	}
	if !at.IsZero() {
		check("the coordinator's clock")
	}
	unchanged(t, "Clock", c, "", 3)
	// With a holder in the datacenter every coordinator reports a clock:
	// its own, or (etcd, Consul) the holder's.
	mustAcquire(t, c, r)
	r.Owner = "second"
	if at, stale, err = c.Clock(ctxT(t), r); err != nil || at.IsZero() {
		t.Fatalf("Clock with a holder: %v, %v; want a reading", at, err)
	}
	check("the coordinator's clock with a holder")
}

func (s *suite) datacenterClaimed(t *testing.T) {
	conn := s.h.Open(t)
	c := conn.Connect(t)
	o := conn.OtherNamespace(t)
	if o == nil {
		t.Log("one namespace per coordinator: nothing to refuse")
		return
	}
	mustAcquire(t, c, s.req("here", 1, ms(time.Now())))
	_, err := o.Acquire(ctxT(t), s.req("there", 1, ms(time.Now())))
	if !errors.Is(err, worker.ErrContract) || !strings.Contains(err.Error(), "datacenter 0") {
		t.Fatalf("another namespace acquiring datacenter 0: %v, want ErrContract naming datacenter 0", err)
	}
	if _, ok, err := o.Namespace(ctxT(t), 0); err != nil || ok {
		t.Fatalf("the refused namespace recorded datacenter 0: %v, %v", ok, err)
	}
	r := s.req("there", 1, ms(time.Now()))
	r.Datacenter = 1
	mustAcquire(t, o, r)
	r.Owner = "here-too"
	if _, err := c.Acquire(ctxT(t), r); !errors.Is(err, worker.ErrContract) {
		t.Fatalf("the first namespace acquiring datacenter 1 of the other: %v, want ErrContract", err)
	}
}

// wipeOnRenew: the coordinator loses everything under a holder; its next
// Renew fails with ErrReset and re-initialises the namespace with a floor
// past the holder's reservation.
func (s *suite) wipeOnRenew(t *testing.T) {
	conn := s.h.Open(t)
	c := conn.Connect(t)
	r := s.req("holder", 2, ms(time.Now().Add(time.Second)))
	r.Quarantine = quarantine
	cl := mustAcquire(t, c, r)
	old := namespace(t, c)
	conn.Wipe(t)
	if _, ok, err := c.Namespace(ctxT(t), 0); err != nil || ok {
		t.Fatalf("after Wipe the namespace has a record (%v, %v): the harness did not wipe", ok, err)
	}
	err := cl.Renew(ctxT(t), s.h.TTL, ms(time.Now().Add(2*time.Second)))
	if !errors.Is(err, worker.ErrReset) {
		t.Fatalf("Renew after the coordinator lost its state: %v, want ErrReset", err)
	}
	ns := namespace(t, c)
	if ns.Incarnation == old.Incarnation || ns.Contract != testContract {
		t.Fatalf("re-initialised namespace %+v (was %+v): want a new incarnation and the contract", ns, old)
	}
	nearNow(t, "re-initialised floor", ns.Floor, quarantine)
	next := mustAcquire(t, c, s.req("next", 2, ms(time.Now())))
	if next.Previous().Before(ns.Floor) {
		t.Fatalf("a holder after the reset starts at %v, before the floor %v", next.Previous(), ns.Floor)
	}
	if err := cl.Release(ctxT(t), ms(time.Now())); !errors.Is(err, worker.ErrReset) && !errors.Is(err, worker.ErrNotHeld) {
		t.Fatalf("Release by the holder of the lost state: %v, want ErrReset or ErrNotHeld", err)
	}
}

// wipeThenAcquire: after a loss, a newcomer initialises the namespace; its
// floor lies past every reservation the old holder may use, and the old
// holder's Renew fails.
func (s *suite) wipeThenAcquire(t *testing.T) {
	conn := s.h.Open(t)
	c, d := conn.Connect(t), conn.Connect(t)
	reserve := ms(time.Now().Add(2 * time.Second))
	r := s.req("old", 1, reserve)
	r.Quarantine = quarantine
	old := mustAcquire(t, c, r)
	conn.Wipe(t)
	r.Owner = "new"
	r.Reserve = ms(time.Now())
	cl := mustAcquire(t, d, r)
	if cl.WorkerID() != old.WorkerID() {
		t.Fatalf("took worker %d of 1", cl.WorkerID())
	}
	if !cl.Previous().After(reserve) {
		t.Fatalf("the newcomer starts at %v, not after the old holder's reservation %v", cl.Previous(), reserve)
	}
	nearNow(t, "newcomer's start", cl.Previous(), quarantine)
	if err := old.Renew(ctxT(t), s.h.TTL, ms(time.Now().Add(2*time.Second))); !errors.Is(err, worker.ErrReset) {
		t.Fatalf("the old holder's Renew after the reset: %v, want ErrReset", err)
	}
	if got := slot(t, d, 0, 0); got.Holder != "new" || !got.Held(time.Now()) {
		t.Fatalf("the old holder's failed Renew changed the newcomer's slot: %+v", got)
	}
}

// rollback: the coordinator is restored to an older copy under a holder.
func (s *suite) rollback(t *testing.T) {
	conn := s.h.Open(t)
	c := conn.Connect(t)
	r := s.req("holder", 2, ms(time.Now().Add(time.Second)))
	r.Quarantine = quarantine
	cl := mustAcquire(t, c, r)
	restore := conn.Snapshot(t)
	high := ms(time.Now().Add(time.Hour))
	if err := cl.Renew(ctxT(t), s.h.TTL, high); err != nil {
		t.Fatalf("Renew: %v", err)
	}
	old := namespace(t, c)
	restore()
	if got := slot(t, c, 0, cl.WorkerID()); !got.HighWater.Before(high) {
		t.Fatalf("after the restore the high-water mark is %v: the harness did not restore the older copy", got.HighWater)
	}
	err := cl.Renew(ctxT(t), s.h.TTL, ms(time.Now().Add(2*time.Second)))
	if !errors.Is(err, worker.ErrReset) {
		t.Fatalf("Renew after the coordinator went back to an older copy: %v, want ErrReset", err)
	}
	ns := namespace(t, c)
	if ns.Incarnation == old.Incarnation {
		t.Fatalf("the namespace was not re-initialised: %+v", ns)
	}
	nearNow(t, "floor after the rollback", ns.Floor, quarantine)
	next := mustAcquire(t, c, s.req("next", 2, ms(time.Now())))
	if next.Previous().Before(ns.Floor) {
		t.Fatalf("a holder after the rollback starts at %v, before the floor %v", next.Previous(), ns.Floor)
	}
}

// leaseEndsOnReset: a lease whose coordinator lost its state ends within a
// renewal period; its generator keeps the reservation it held, which the
// re-initialised namespace's floor lies past.
func (s *suite) leaseEndsOnReset(t *testing.T) {
	conn := s.h.Open(t)
	c := conn.Connect(t)
	l := acquireLease(t, newLeaser(t, c, leaseConfig(t, s.h.TTL)))
	defer l.Close()
	var f fencer
	l.Bind(&f)
	conn.Wipe(t)
	wiped := time.Now()
	select {
	case <-l.Done():
	case <-time.After(s.h.TTL):
		t.Fatalf("the lease still runs %v after the coordinator lost its state", s.h.TTL)
	}
	if !errors.Is(l.Err(), worker.ErrLeaseLost) || !errors.Is(l.Err(), worker.ErrReset) {
		t.Fatalf("lease error %v, want ErrLeaseLost and ErrReset", l.Err())
	}
	if ended := time.Since(wiped); ended > s.h.TTL/2+100*time.Millisecond {
		t.Fatalf("the lease ended %v after the loss, more than a renewal period", ended)
	}
	until, revoked := f.state()
	if !revoked.IsZero() {
		t.Fatalf("generator revoked at %v: after a reset its reservation still stands", revoked)
	}
	if ns := namespace(t, c); !ns.Floor.After(until) {
		t.Fatalf("the re-initialised namespace's floor %v is not past the holder's reservation %v", ns.Floor, until)
	}
}

// rollbackNewcomer: the coordinator goes back to a copy in which a live
// holder's worker id looks free, and a newcomer takes it before the holder
// noticed. The newcomer must never be free to issue in ticks the holder may
// still use: its probation (no reservation before its first renewal) lets
// the holder's own renewal find the rollback first.
func (s *suite) rollbackNewcomer(t *testing.T) {
	conn := s.h.Open(t)
	cfg := leaseConfig(t, s.h.TTL)
	cfg.Workers = 1
	a := acquireLease(t, newLeaser(t, conn.Connect(t), cfg))
	defer a.Close()
	var fa fencer
	a.Bind(&fa)
	restore := conn.Snapshot(t)
	time.Sleep(s.h.TTL + s.h.TTL/2) // in the copy, A's lease has lapsed; A renewed all along
	restore()

	cfgB := cfg
	cfgB.Owner = "newcomer"
	cfgB.WaitForFree = true
	ctx, cancel := context.WithTimeout(t.Context(), s.h.Expiry+3*s.h.TTL/2)
	defer cancel()
	b, err := newLeaser(t, conn.Connect(t), cfgB).Acquire(ctx)
	if err != nil {
		t.Logf("the newcomer got no lease (%v): nothing can overlap", err)
	} else {
		defer b.Close()
		var fb fencer
		b.Bind(&fb)
		select {
		case <-b.Done():
		case <-time.After(2 * s.h.TTL):
		}
		untilB, _ := fb.state()
		if untilB.After(b.NotBefore()) {
			// B may issue: only in ticks A can no longer use.
			untilA, _ := fa.state()
			if b.NotBefore().Before(untilA) {
				t.Fatalf("the newcomer may issue from %v while the holder reserved up to %v", b.NotBefore(), untilA)
			}
		}
	}
	select {
	case <-a.Done():
		if !errors.Is(a.Err(), worker.ErrReset) {
			t.Fatalf("the holder's lease ended with %v, want ErrReset", a.Err())
		}
	case <-time.After(s.h.TTL):
		t.Fatal("the holder did not find the rollback")
	}
}

// clockReading: the claim reports the coordinator's clock (or nothing).
func (s *suite) clockReading(t *testing.T) {
	c := s.h.Open(t).Connect(t)
	cl := mustAcquire(t, c, s.req("a", 2, ms(time.Now())))
	check := func(when string) {
		at, stale := cl.Clock()
		if at.IsZero() {
			return
		}
		if stale < 0 {
			t.Fatalf("%s: stale %v", when, stale)
		}
		nearNow(t, when+": the coordinator's clock", at, 0)
	}
	check("after Acquire")
	if err := cl.Renew(ctxT(t), s.h.TTL, ms(time.Now())); err != nil {
		t.Fatal(err)
	}
	check("after Renew")
}

// Benchmark measures what a backend costs: Acquire followed by Release of a
// worker id, and Renew of a held one, each against the real service. A
// backend's test file calls it from a Benchmark function.
func Benchmark(b *testing.B, connect func(b *testing.B) worker.Coordinator) {
	c := connect(b)
	ctx := context.Background()
	b.Run("AcquireRelease", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			cl, err := c.Acquire(ctx, worker.Request{Workers: 1024, Owner: fmt.Sprintf("bench-%d", i), TTL: 10 * time.Second, Reserve: ms(time.Now()), Contract: testContract})
			if err != nil {
				b.Fatal(err)
			}
			if err := cl.Release(ctx, ms(time.Now())); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Renew", func(b *testing.B) {
		cl, err := c.Acquire(ctx, worker.Request{Workers: 1024, Owner: "bench-renew", TTL: 10 * time.Second, Reserve: ms(time.Now()), Contract: testContract})
		if err != nil {
			b.Fatal(err)
		}
		defer cl.Release(ctx, ms(time.Now()))
		for b.Loop() {
			if err := cl.Renew(ctx, 10*time.Second, ms(time.Now().Add(3*time.Second))); err != nil {
				b.Fatal(err)
			}
		}
	})
}
