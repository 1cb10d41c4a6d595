package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/flakeid/flakeid/backend/bolt"
	"github.com/flakeid/flakeid/snowflake"
	"github.com/flakeid/flakeid/worker"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// flaky wraps a coordinator; while cut, every call fails as an unreachable
// coordinator's would.
type flaky struct {
	worker.Coordinator
	cut atomic.Bool
}

func (f *flaky) err() error { return fmt.Errorf("%w: cut by the test", worker.ErrUnavailable) }

func (f *flaky) Acquire(ctx context.Context, r worker.Request) (worker.Claim, error) {
	if f.cut.Load() {
		return nil, f.err()
	}
	c, err := f.Coordinator.Acquire(ctx, r)
	if err != nil {
		return nil, err
	}
	return &flakyClaim{Claim: c, f: f}, nil
}

type flakyClaim struct {
	worker.Claim
	f *flaky
}

func (c *flakyClaim) Renew(ctx context.Context, ttl time.Duration, reserve time.Time) error {
	if c.f.cut.Load() {
		return c.f.err()
	}
	return c.Claim.Renew(ctx, ttl, reserve)
}

func (c *flakyClaim) Release(ctx context.Context, reserve time.Time) error {
	if c.f.cut.Load() {
		return c.f.err()
	}
	return c.Claim.Release(ctx, reserve)
}

func boltCoordinator(t *testing.T, path string) *bolt.Workers {
	t.Helper()
	if path == "" {
		path = filepath.Join(t.TempDir(), "workers.db")
	}
	w, err := bolt.OpenWorkers(t.Context(), &url.URL{Scheme: "file", Path: path})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func quiet(t *testing.T) *slog.Logger { return slog.New(slog.NewTextHandler(t.Output(), nil)) }

// layoutOf is the default layout with 2^workerBits worker ids.
func layoutOf(workerBits int) snowflake.Layout {
	l := snowflake.DefaultLayout()
	l.WorkerBits = workerBits
	return l
}

// config is a node's Config over c: 2^workerBits worker ids, the clock now
// (nil: the built-in one) for the generator and the lease, and a
// clock-skew bound (0: the default, 1s).
func config(t *testing.T, c worker.Coordinator, workerBits int, now func() time.Time, skew time.Duration) Config {
	t.Helper()
	// A TTL of 3 s: short enough to test loss quickly, long enough that a
	// loaded CI machine's stalls do not lose the lease by accident.
	return Config{
		Coordinator: c,
		Lease: worker.Config{TTL: 3 * time.Second, RenewEvery: 100 * time.Millisecond,
			ReserveAhead: 300 * time.Millisecond, SafetyMargin: 500 * time.Millisecond, RetryEvery: 50 * time.Millisecond,
			MaxClockSkew: skew, Quarantine: 300*time.Millisecond + max(skew, time.Second)},
		Settings: snowflake.Settings{Layout: layoutOf(workerBits), Now: now},
		Logger:   quiet(t),
	}
}

func TestNodeIssuesUnderLease(t *testing.T) {
	coord := boltCoordinator(t, "")
	n, err := Start(t.Context(), config(t, coord, 2, nil, 0))
	if err != nil {
		t.Fatal(err)
	}
	a, err := n.NextID()
	if err != nil {
		t.Fatal(err)
	}
	b, err := n.NextN(10)
	if err != nil || b.First <= a {
		t.Fatalf("NextN = %+v, %v after %d", b, err, a)
	}
	st := n.Status()
	p, _ := n.Decode(a)
	if !st.Held || st.Leases != 1 || p.Worker != st.WorkerID || st.Stats.Issued != 11 {
		t.Fatalf("status %+v, ID worker %d", st, p.Worker)
	}
	time.Sleep(500 * time.Millisecond) // renewals move the reservation on
	if until := n.Status().Until; !until.After(st.Until) {
		t.Fatalf("reservation %v did not move past %v", until, st.Until)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := n.NextID(); !errors.Is(err, ErrNoLease) || !errors.Is(err, worker.ErrReleased) {
		t.Fatalf("NextID after Close: %v, want ErrNoLease (released)", err)
	}
	infos, err := coord.List(t.Context(), 0)
	if err != nil || len(infos) != 1 || infos[0].Held(time.Now()) {
		t.Fatalf("after Close the slot is %+v, %v; want it free", infos, err)
	}
}

// TestNodeLosesAndRegainsLease: with the coordinator cut off the node stops
// issuing when its reservation (shorter than the TTL here) runs out, before
// its lease could expire, and once it is back the node takes a lease again
// and its IDs keep increasing.
func TestNodeLosesAndRegainsLease(t *testing.T) {
	f := &flaky{Coordinator: boltCoordinator(t, "")}
	n, err := Start(t.Context(), config(t, f, 2, nil, 0))
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	last, err := n.NextID()
	if err != nil {
		t.Fatal(err)
	}
	f.cut.Store(true)
	cutAt := time.Now()
	var lostErr error
	for time.Since(cutAt) < 3*time.Second {
		id, err := n.NextID()
		if err != nil {
			lostErr = err
			break
		}
		if id <= last {
			t.Fatalf("ID %d after %d", id, last)
		}
		last = id
		time.Sleep(time.Millisecond)
	}
	if !errors.Is(lostErr, worker.ErrLeaseLost) && !errors.Is(lostErr, snowflake.ErrFenced) {
		t.Fatalf("cut off: NextID error %v, want lease lost or fenced", lostErr)
	}
	if took := time.Since(cutAt); took > time.Second {
		t.Fatalf("kept issuing %v after the cut, longer than the TTL", took)
	}
	// The reservation stops issuing first; the lease itself is given up
	// before TTL − safety margin has passed since the last renewal.
	for n.Status().Held {
		if time.Since(cutAt) > 3*time.Second {
			t.Fatal("lease still held a TTL after the cut")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := n.NextID(); !errors.Is(err, ErrNoLease) || !errors.Is(err, worker.ErrLeaseLost) {
		t.Fatalf("after the lease was lost NextID: %v, want ErrNoLease wrapping ErrLeaseLost", err)
	}
	f.cut.Store(false)
	deadline := time.Now().Add(5 * time.Second)
	for {
		id, err := n.NextID()
		if err == nil {
			if id <= last {
				t.Fatalf("after the new lease ID %d ≤ %d", id, last)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no lease again 5 s after the coordinator came back: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if st := n.Status(); !st.Held || st.Leases != 2 {
		t.Fatalf("status %+v, want held, second lease", st)
	}
}

// TestNodeRidesOutCoordinatorOutage: a coordinator outage longer than the
// lease's TTL but shorter than its reservation costs the node nothing.
// Callers on several goroutines take IDs all through it and never see an
// error; the lease is lost (Status: not held, on the reservation), a new
// one is taken once the coordinator is back, and the node switches to it
// with every caller's IDs still increasing and no ID twice.
func TestNodeRidesOutCoordinatorOutage(t *testing.T) {
	f := &flaky{Coordinator: boltCoordinator(t, "")}
	cfg := config(t, f, 2, nil, 0)
	cfg.Lease.ReserveAhead = 5 * time.Second // past the TTL (3 s)
	cfg.Lease.Quarantine = 6 * time.Second
	n, err := Start(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	first := n.Status()

	const callers = 4
	stop := make(chan struct{})
	errs := make(chan error, callers)
	got := make([][]snowflake.ID, callers)
	for i := range callers {
		go func() {
			var last snowflake.ID
			for {
				select {
				case <-stop:
					errs <- nil
					return
				default:
				}
				id, err := n.NextID()
				if err != nil {
					errs <- fmt.Errorf("caller %d at %v: %w", i, time.Now(), err)
					return
				}
				if id <= last {
					errs <- fmt.Errorf("caller %d: ID %d after %d", i, id, last)
					return
				}
				last = id
				got[i] = append(got[i], id)
				time.Sleep(200 * time.Microsecond)
			}
		}()
	}

	f.cut.Store(true)
	// The lease is given up TTL − margin (2.5 s) after its last renewal;
	// the node goes on on its reservation.
	deadline := time.Now().Add(5 * time.Second)
	var during Status
	for during = n.Status(); during.Held; during = n.Status() {
		if time.Now().After(deadline) {
			t.Fatal("the lease still held 5 s after the cut")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !during.OnReservation || during.Err == nil {
		t.Fatalf("status after the loss %+v: want on the reservation, with the reason", during)
	}
	time.Sleep(500 * time.Millisecond)
	f.cut.Store(false)
	for deadline = time.Now().Add(5 * time.Second); n.Status().Leases < 2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no new lease 5 s after the coordinator came back: %+v", n.Status())
		}
	}
	time.Sleep(200 * time.Millisecond) // callers on the new generator
	close(stop)
	seen := make(map[snowflake.ID]bool)
	for range callers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	workers := make(map[int64]bool)
	for _, ids := range got {
		for _, id := range ids {
			if seen[id] {
				t.Fatalf("ID %d issued twice", id)
			}
			seen[id] = true
			p, _ := n.Decode(id)
			workers[p.Worker] = true
		}
	}
	st := n.Status()
	if !st.Held || st.OnReservation || st.WorkerID == first.WorkerID || len(workers) != 2 {
		t.Fatalf("after the outage %+v (first worker %d, IDs from workers %v): want held, on another worker id",
			st, first.WorkerID, workers)
	}
	if st.Total.Issued != uint64(len(seen)) {
		t.Fatalf("totals count %d IDs, the callers took %d", st.Total.Issued, len(seen))
	}
}

// TestRestartWithClockBehind: a single node restarted with its clock 5 s
// behind never reissues an ID: it starts after the high-water mark the file
// kept.
func TestRestartWithClockBehind(t *testing.T) {
	path := filepath.Join(t.TempDir(), "workers.db")
	// The bound lets a clock 5 s behind through: the high-water mark is what
	// is tested (TestNodeRefusesSkewedClock tests the bound).
	const skew = 6 * time.Second
	first, err := Start(t.Context(), config(t, boltCoordinator(t, path), 0, nil, skew))
	if err != nil {
		t.Fatal(err)
	}
	var max snowflake.ID
	for range 1000 {
		id, err := first.NextID()
		if err != nil {
			t.Fatal(err)
		}
		max = id
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	behind := func() time.Time { return time.Now().Add(-5 * time.Second) }
	cfg := config(t, boltCoordinator(t, path), 0, behind, skew)
	cfg.Settings.MaxWait = 10 * time.Second
	second, err := Start(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	id, err := second.NextID()
	if err != nil {
		t.Fatal(err)
	}
	if id <= max {
		t.Fatalf("restarted node with its clock 5 s behind issued %d ≤ %d, the last ID before the restart", id, max)
	}
}

// shifted is a clock the test moves.
type shifted struct{ offset atomic.Int64 }

func (s *shifted) Now() time.Time { return time.Now().Add(time.Duration(s.offset.Load())) }

// TestNodeRefusesSkewedClock: a node whose clock moves beyond the bound from
// the coordinator's stops issuing at its next renewal, says why, counts it,
// and issues again (above everything it issued) once the clock is back.
func TestNodeRefusesSkewedClock(t *testing.T) {
	coord := boltCoordinator(t, "")
	var clk shifted
	cfg := config(t, coord, 2, clk.Now, 0)
	cfg.Settings.MaxWait = 10 * time.Second
	n, err := Start(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	last, err := n.NextID()
	if err != nil {
		t.Fatal(err)
	}
	clk.offset.Store(int64(3 * time.Second))
	deadline := time.Now().Add(5 * time.Second)
	for n.Status().Held {
		if time.Now().After(deadline) {
			t.Fatal("the node still holds its lease 5 s after its clock moved 3 s ahead")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := n.NextID(); !errors.Is(err, ErrNoLease) || !errors.Is(err, worker.ErrClockSkew) {
		t.Fatalf("NextID with the clock 3 s ahead: %v, want ErrNoLease and ErrClockSkew", err)
	}
	st := n.Status()
	if !errors.Is(st.Err, worker.ErrClockSkew) || st.SkewRefusals < 1 || !strings.Contains(st.Err.Error(), "ahead") {
		t.Fatalf("status %+v: want the skew as the reason, counted", st)
	}
	clk.offset.Store(0)
	deadline = time.Now().Add(10 * time.Second)
	for !n.Status().Held {
		if time.Now().After(deadline) {
			t.Fatalf("no lease 10 s after the clock came back: %v", n.Status().Err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The new lease issues after its first renewal (its probation).
	var id snowflake.ID
	for deadline = time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if id, err = n.NextID(); err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil || id <= last {
		t.Fatalf("after the clock came back: %d, %v; want an ID above %d", id, err, last)
	}
}

// TestTotalsSurviveLeaseChange: Status.Total counts every ID the node
// issued, across a lost lease and the new generator of the next one, and
// never decreases while the lease changes; Stats is the current
// generator's alone.
func TestTotalsSurviveLeaseChange(t *testing.T) {
	f := &flaky{Coordinator: boltCoordinator(t, "")}
	n, err := Start(t.Context(), config(t, f, 2, nil, 0))
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()

	// A watcher reads the totals all along and fails on any decrease.
	stop := make(chan struct{})
	watched := make(chan error, 1)
	go func() {
		var last snowflake.Stats
		for {
			tot := n.Status().Total
			if tot.Issued < last.Issued || tot.Waits < last.Waits || tot.BorrowedTicks < last.BorrowedTicks ||
				tot.ClockBackwards < last.ClockBackwards || tot.ClockForwards < last.ClockForwards {
				watched <- fmt.Errorf("totals went down: %+v after %+v", tot, last)
				return
			}
			last = tot
			select {
			case <-stop:
				watched <- nil
				return
			default:
				time.Sleep(100 * time.Microsecond)
			}
		}
	}()

	var issued uint64
	take := func() error {
		b, err := n.NextN(7)
		if err == nil {
			issued += uint64(b.Count)
		}
		return err
	}
	for range 100 {
		if err := take(); err != nil {
			t.Fatal(err)
		}
	}
	f.cut.Store(true)
	deadline := time.Now().Add(5 * time.Second)
	for n.Status().Held {
		take() // until the generator is fenced
		if time.Now().After(deadline) {
			t.Fatal("lease still held 5 s after the cut")
		}
		time.Sleep(time.Millisecond)
	}
	before := n.Status()
	f.cut.Store(false)
	for deadline = time.Now().Add(10 * time.Second); take() != nil; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no new lease 10 s after the coordinator came back: %v", n.Status().Err)
		}
	}
	for range 50 {
		if err := take(); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	if err := <-watched; err != nil {
		t.Fatal(err)
	}
	after := n.Status()
	if after.Leases != 2 {
		t.Fatalf("leases %d, want 2", after.Leases)
	}
	if after.Total.Issued != issued {
		t.Fatalf("Total.Issued %d, want the %d IDs issued (before the change: %d)", after.Total.Issued, issued, before.Total.Issued)
	}
	if after.Stats.Issued >= issued || after.Stats.Issued == 0 {
		t.Fatalf("Stats.Issued %d: want the new generator's alone, below the total %d", after.Stats.Issued, issued)
	}
	if after.Total.HighWater != after.Stats.HighWater {
		t.Fatalf("Total.HighWater %v, want the current generator's %v", after.Total.HighWater, after.Stats.HighWater)
	}
}
