// Package node runs a Snowflake generator under a leased worker id: the
// lease's high-water mark is the generator's NotBefore, its reservation the
// generator's fence. When the lease is lost, the generator goes on issuing
// on the reservation the lease stored (nobody else can issue there; see
// worker.Lease.Bind) while a new lease is sought in the background; once
// the new lease may issue — its first renewal done, its high-water mark
// passed — the node switches to a new generator under it, which starts
// after everything the old one issued, so the node's IDs keep increasing.
// A coordinator outage shorter than the reservation (worker.Config.
// ReserveAhead), less the time a new lease takes once the coordinator
// answers again, therefore costs the node nothing.
package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flakeid/flakeid/internal/backoff"
	"github.com/flakeid/flakeid/snowflake"
	"github.com/flakeid/flakeid/worker"
)

// ErrNoLease means the node holds no worker-id lease at the moment: it lost
// one and has not acquired another yet, or it was closed.
var ErrNoLease = errors.New("node: no worker-id lease held")

// ResumeError is the error of a call refused while the node waits out the
// start of a new lease — its worker id's high-water mark, or the quarantine
// after the coordinator lost its state — when it knows that start: it wraps
// ErrNoLease and the reason, and RetryAfter says how long, by the node's
// clock at the refusal, until the node issues again. A server passes it on as
// Retry-After, so that a client whose deadline ends sooner fails over or
// gives up at once instead of waiting.
type ResumeError struct {
	Err        error         // wraps ErrNoLease
	RetryAfter time.Duration // more than zero
}

// Error implements error.
func (e *ResumeError) Error() string {
	return fmt.Sprintf("%v (issues again in %v)", e.Err, e.RetryAfter.Round(time.Millisecond))
}

// Unwrap returns the reason.
func (e *ResumeError) Unwrap() error { return e.Err }

// ErrInvalidConfig means a Config is refused: every error of
// Config.Validate wraps it, and names the value that was wrong.
var ErrInvalidConfig = errors.New("node: invalid config")

// Config configures a Node. The node leases its worker ids by itself: it
// builds its worker.Leaser over Coordinator, with the datacenter id of
// Settings, the worker ids of Settings.Layout (0 to 2^WorkerBits − 1) and
// the layout's description as the ID-space contract the coordinator
// records, so that the lease always fits the layout it feeds.
type Config struct {
	// Coordinator is where worker ids are leased (backend/...). Required,
	// unless StaticWorkerID is set; then it must be nil.
	Coordinator worker.Coordinator
	// Lease holds the lease settings (TTL, renewal, reservation, clock
	// skew, quarantine, WaitForFree, Owner; worker.Config documents each
	// with its default and range); the zero value means every default. The
	// node fills in the rest, which must be left zero: Datacenter (from
	// Settings.DatacenterID), Workers (2^WorkerBits of the layout), Contract
	// (the layout), Now (Settings.Now) and Logger (Logger). It must be zero
	// with StaticWorkerID.
	Lease worker.Config
	// StaticWorkerID, when not nil, is a fixed worker id used instead of
	// leasing one (worker.Static). UNSAFE: two processes with the same id
	// issue duplicate IDs, and no high-water mark survives a restart after
	// the clock went back; every Start logs a warning saying so. Range 0 to
	// 2^WorkerBits − 1 of the layout. Default nil: lease from Coordinator.
	StaticWorkerID *int64
	// Settings for each generator. Layout (default snowflake.DefaultLayout),
	// DatacenterID (range 0 to 2^DatacenterBits − 1, default 0), MaxWait,
	// Policy, MaxBorrow and Now are the caller's, with the ranges and
	// defaults snowflake.Settings documents; Now is the lease's clock too.
	// WorkerID, NotBefore and Until come from each lease: they must be
	// left zero (use StaticWorkerID for a fixed worker id).
	Settings snowflake.Settings
	// Logger receives lease changes and the lease's own messages. Default
	// slog.Default().
	Logger *slog.Logger
}

// leaseConfig is the worker.Config of the node's leases: the caller's
// Lease with what the layout and settings fix.
func (c Config) leaseConfig(l snowflake.Layout, s snowflake.Settings, log *slog.Logger) worker.Config {
	lc := c.Lease
	lc.Datacenter = s.DatacenterID
	lc.Workers = int64(1) << l.WorkerBits
	lc.Contract = l.String()
	lc.Logger = log
	lc.Now = s.Now
	return lc
}

// Validate checks c without leasing anything: the layout; a coordinator or
// a static worker id, not both; WorkerID, NotBefore and Until left to the
// lease; the datacenter id and a static worker id within the layout's
// fields; the rest of Settings as snowflake.New checks it; and the lease
// settings as worker.Config.Validate checks them. Every error wraps
// ErrInvalidConfig (and the snowflake or worker error that says more).
func (c Config) Validate() error {
	_, err := c.plan()
	return err
}

// invalidConfig is a Config refused by the snowflake or worker package: it
// reads as that package's error (which names the value) and wraps both it
// and ErrInvalidConfig.
type invalidConfig struct{ err error }

func (e invalidConfig) Error() string   { return e.err.Error() }
func (e invalidConfig) Unwrap() []error { return []error{ErrInvalidConfig, e.err} }

// plan is what Start needs of a valid Config.
type plan struct {
	layout snowflake.Layout
	log    *slog.Logger
	lease  worker.Config // with a coordinator
}

// plan checks c (see Validate) and returns its normalised parts.
func (c Config) plan() (plan, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...)
	}
	// A refusal of the snowflake or worker package keeps its own words.
	refused := func(err error) error { return invalidConfig{err} }
	l, err := c.Settings.Layout.Normalize()
	if err != nil {
		return plan{}, refused(err)
	}
	p := plan{layout: l, log: c.Logger}
	if p.log == nil {
		p.log = slog.Default()
	}
	s := c.Settings
	maxDC, maxWorker := int64(1)<<l.DatacenterBits-1, int64(1)<<l.WorkerBits-1
	switch {
	case c.Coordinator == nil && c.StaticWorkerID == nil:
		return plan{}, bad("no Coordinator to lease worker ids from, and no StaticWorkerID")
	case c.Coordinator != nil && c.StaticWorkerID != nil:
		return plan{}, bad("both a Coordinator and StaticWorkerID %d: lease worker ids or use a static one, not both", *c.StaticWorkerID)
	case c.StaticWorkerID != nil && !reflect.ValueOf(c.Lease).IsZero():
		return plan{}, bad("lease settings with StaticWorkerID %d, which is not leased", *c.StaticWorkerID)
	case c.Lease.Datacenter != 0:
		return plan{}, bad("Lease.Datacenter %d: the datacenter id comes from Settings.DatacenterID", c.Lease.Datacenter)
	case c.Lease.Workers != 0:
		return plan{}, bad("Lease.Workers %d: the worker ids come from the layout's worker bits", c.Lease.Workers)
	case c.Lease.Contract != "":
		return plan{}, bad("Lease.Contract %q: the contract is the layout's", c.Lease.Contract)
	case c.Lease.Now != nil:
		return plan{}, bad("Lease.Now set: the lease's clock is Settings.Now")
	case c.Lease.Logger != nil:
		return plan{}, bad("Lease.Logger set: the lease logs to Config.Logger")
	case s.WorkerID != 0:
		return plan{}, bad("Settings.WorkerID %d: the worker id comes from the lease (use StaticWorkerID for a fixed one)", s.WorkerID)
	case !s.NotBefore.IsZero():
		return plan{}, bad("Settings.NotBefore %s: the high-water mark comes from the lease", s.NotBefore.Format(time.RFC3339Nano))
	case !s.Until.IsZero():
		return plan{}, bad("Settings.Until %s: the fence comes from the lease", s.Until.Format(time.RFC3339Nano))
	case s.DatacenterID < 0 || s.DatacenterID > maxDC:
		// The same words as snowflake.New's, before any lease is taken.
		return plan{}, refused(fmt.Errorf("%w: datacenter id %d, want 0–%d (%d datacenter bits)", snowflake.ErrNodeOutOfRange,
			s.DatacenterID, maxDC, l.DatacenterBits))
	case c.StaticWorkerID != nil && (*c.StaticWorkerID < 0 || *c.StaticWorkerID > maxWorker):
		return plan{}, refused(fmt.Errorf("%w: worker id %d, want 0–%d (%d worker bits)", snowflake.ErrNodeOutOfRange,
			*c.StaticWorkerID, maxWorker, l.WorkerBits))
	}
	// The rest of Settings (MaxWait, Policy, MaxBorrow, an epoch in the
	// future) as the generator of any lease would find it.
	if c.StaticWorkerID != nil {
		s.WorkerID = *c.StaticWorkerID
	}
	if _, err := snowflake.New(s); err != nil {
		return plan{}, refused(err)
	}
	if c.Coordinator != nil {
		p.lease = c.leaseConfig(l, s, p.log)
		if err := p.lease.Validate(); err != nil {
			return plan{}, refused(err)
		}
	}
	return p, nil
}

type current struct {
	lease worker.Lease
	gen   *snowflake.Generator
	// prev is the generator this one replaced (nil for the first): it is
	// read live, so that a call it had in flight when its lease ended is
	// still counted, and folded into base at the next switch.
	prev *snowflake.Generator
	// base holds the counters of every generator before prev.
	base snowflake.Stats
	// lossCounted is set by whoever first counts the lease's end (the
	// watcher or a Status call that sees it first), so that a status that
	// shows the lease lost also counts why.
	lossCounted atomic.Bool
	// retiring is set just before gen is revoked for the switch to a new
	// lease, and handover closed once the successor is in place: a call
	// that the revocation refused waits for it and tries the successor.
	retiring atomic.Bool
	handover chan struct{}
}

// addCounters adds b's counters (Issued, Waits, BorrowedTicks,
// ClockBackwards, ClockForwards) to a's and returns a; the other fields are
// a's.
func addCounters(a, b snowflake.Stats) snowflake.Stats {
	a.Issued += b.Issued
	a.Waits += b.Waits
	a.BorrowedTicks += b.BorrowedTicks
	a.ClockBackwards += b.ClockBackwards
	a.ClockForwards += b.ClockForwards
	return a
}

// total is the counters of every generator of the node since Start, with
// the other fields of the current generator's stats st.
func (c *current) total(st snowflake.Stats) snowflake.Stats {
	t := addCounters(st, c.base)
	if c.prev != nil {
		t = addCounters(t, c.prev.Stats())
	}
	return t
}

// Node is a generator under a lease. It is safe for concurrent use.
type Node struct {
	cfg    Config
	leaser worker.Leaser
	// leaseCfg is the leases' configuration, defaults filled in (zero on a
	// static worker id).
	leaseCfg worker.Config
	handed   handedLeases // leases handed out by LeaseWorkerID
	layout   snowflake.Layout
	log      *slog.Logger
	cur      atomic.Pointer[current]
	leases   atomic.Int64
	resets   atomic.Int64 // leases ended because the coordinator lost its state
	skews    atomic.Int64 // leases refused or ended for clock skew
	// lastErr is why the node holds no lease, while it holds none.
	lastErr atomic.Pointer[error]
	// resumes is, while the watcher waits for a new lease to start, that
	// start (UnixNano of the node's clock); 0 otherwise.
	resumes atomic.Int64

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	close  sync.Once
}

// Start checks cfg (see Config.Validate: a refused Config leases nothing
// and records no contract), acquires a first lease (waiting, with
// Lease.WaitForFree, while every worker id is held, until ctx ends) and
// returns a running Node. When the lease starts in the future — the
// quarantine of a namespace that was just (re)initialised, or a restart on a
// worker id whose reservation has not passed — Start waits for it, so that
// the node issues from its first request; ctx bounds the wait.
func Start(ctx context.Context, cfg Config) (*Node, error) {
	p, err := cfg.plan()
	if err != nil {
		return nil, err
	}
	var lr worker.Leaser
	if cfg.StaticWorkerID != nil {
		lr = worker.Static(cfg.Settings.DatacenterID, *cfg.StaticWorkerID, p.log)
	} else if lr, err = worker.NewLeaser(cfg.Coordinator, p.lease); err != nil {
		return nil, invalidConfig{err}
	}
	n := &Node{cfg: cfg, leaser: lr, layout: p.layout, log: p.log}
	if cfg.Coordinator != nil {
		n.leaseCfg = p.lease.WithDefaults()
	}
	n.ctx, n.cancel = context.WithCancel(context.Background())
	var l worker.Lease
	for {
		var err error
		if l, err = n.acquire(ctx); err != nil {
			n.cancel()
			return nil, err
		}
		err = n.waitIssuable(ctx, l)
		if err == nil {
			break
		}
		l.Close()
		if ctx.Err() != nil {
			n.cancel()
			return nil, err
		}
		// The lease ended on probation (the coordinator's state was found
		// lost): take another.
		n.log.Error("node: the new lease ended before its first renewal; acquiring another", "err", err)
	}
	g, err := n.generator(l, time.Time{})
	if err != nil {
		l.Close()
		n.cancel()
		return nil, err
	}
	c := &current{lease: l, gen: g, handover: make(chan struct{})}
	n.cur.Store(c)
	n.wg.Add(1)
	go n.watch(c)
	return n, nil
}

// now is the clock of the node's generators, before one is built.
func (n *Node) now() time.Time {
	if n.cfg.Settings.Now != nil {
		return n.cfg.Settings.Now()
	}
	return time.Now()
}

// waitIssuable waits until a generator under l may issue: the clock has
// passed the lease's high-water mark, and the lease's first renewal (the end
// of its probation) has reserved ticks ahead of it.
func (n *Node) waitIssuable(ctx context.Context, l worker.Lease) error {
	if wait := l.NotBefore().Sub(n.now()); wait > time.Second {
		n.log.Info("node: waiting for the worker id's high-water mark before issuing", "wait", wait.Round(time.Millisecond),
			"not_before", l.NotBefore())
	}
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for {
		now := n.now()
		until := l.Until() // zero: a lease that fences nothing (worker.Static)
		if !now.Before(l.NotBefore()) && (until.IsZero() || now.Before(until)) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("node: waiting for the worker id's high-water mark (%s) and the lease's first renewal: %w",
				l.NotBefore().Format(time.RFC3339Nano), ctx.Err())
		case <-l.Done():
			return fmt.Errorf("node: the lease ended before its first renewal: %w", l.Err())
		case <-t.C:
		}
	}
}

// acquire takes a lease of the configured datacenter and checks that a
// generator can run under it.
func (n *Node) acquire(ctx context.Context) (worker.Lease, error) {
	l, err := n.leaser.Acquire(ctx)
	if err != nil {
		if errors.Is(err, worker.ErrClockSkew) {
			n.skews.Add(1)
		}
		return nil, err
	}
	s := n.cfg.Settings
	if dc := l.DatacenterID(); dc != s.DatacenterID {
		l.Close()
		return nil, fmt.Errorf("node: a lease in datacenter %d, not the configured %d", dc, s.DatacenterID)
	}
	s.WorkerID, s.NotBefore, s.Until = l.WorkerID(), l.NotBefore(), l.Until()
	if _, err := snowflake.New(s); err != nil {
		l.Close()
		return nil, fmt.Errorf("node: a generator for worker %d/%d: %w", s.DatacenterID, s.WorkerID, err)
	}
	n.leases.Add(1)
	n.log.Info("node: worker id leased", "datacenter", s.DatacenterID, "worker", s.WorkerID,
		"not_before", s.NotBefore, "reserved_until", l.Until())
	return l, nil
}

// generator builds the generator of lease l, starting no earlier than after
// (the end of what a previous generator of this node issued), and binds it
// to l.
func (n *Node) generator(l worker.Lease, after time.Time) (*snowflake.Generator, error) {
	s := n.cfg.Settings
	s.WorkerID, s.NotBefore, s.Until = l.WorkerID(), l.NotBefore(), l.Until()
	if after.After(s.NotBefore) {
		s.NotBefore = after
	}
	g, err := snowflake.New(s)
	if err != nil {
		return nil, fmt.Errorf("node: a generator for worker %d/%d: %w", s.DatacenterID, s.WorkerID, err)
	}
	l.Bind(g)
	return g, nil
}

// watch replaces a lost lease until the node is closed. The lost lease's
// generator goes on issuing on its reservation (unless the loss voided it)
// until the new lease may issue.
func (n *Node) watch(c *current) {
	defer n.wg.Done()
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-c.lease.Done():
		}
		lost := c.lease.Err()
		n.countLoss(c, lost)
		n.lastErr.Store(&lost)
		if st := c.gen.Stats(); !st.Revoked && c.gen.Now().Before(c.lease.Until()) {
			n.log.Error("node: lease lost; issuing on its reservation while acquiring another", "err", lost,
				"reserved_until", c.lease.Until())
		} else {
			n.log.Error("node: lease lost; acquiring another", "err", lost)
		}
		bo := backoff.Backoff{Min: 50 * time.Millisecond, Max: 2 * time.Second}
		for attempt := 0; ; attempt++ {
			l, err := n.acquire(n.ctx)
			if err == nil {
				n.resumes.Store(l.NotBefore().UnixNano())
				err = n.waitIssuable(n.ctx, l)
				n.resumes.Store(0)
				if err == nil {
					if next := n.handOver(c, l); next != nil {
						c = next
						break
					}
					err = errors.New("node: no generator for the new lease")
				}
				l.Close()
			}
			if n.ctx.Err() != nil {
				return
			}
			err = fmt.Errorf("%w: %w", ErrNoLease, err)
			n.lastErr.Store(&err)
			t := time.NewTimer(bo.Next(attempt))
			select {
			case <-n.ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
	}
}

// handOver switches the node from c, whose lease ended, to a new generator
// under l, which may issue now: c's generator is revoked first, so that the
// new one starts after everything it issued. A call the revocation refuses
// waits for the switch and goes to the new generator. It returns the new
// current, or nil (and the node stays on c) when no generator could be
// built.
func (n *Node) handOver(c *current, l worker.Lease) *current {
	c.retiring.Store(true)
	c.gen.Revoke()
	g, err := n.generator(l, c.gen.Stats().HighWater)
	if err != nil {
		c.retiring.Store(false)
		close(c.handover)
		n.log.Error("node: the new lease's generator", "err", err)
		return nil
	}
	// The old generator's counters carry over, so that Status's totals
	// never decrease. The one it replaced has been revoked for a whole
	// lease: its counters are final.
	next := &current{lease: l, gen: g, base: c.base, prev: c.gen, handover: make(chan struct{})}
	if c.prev != nil {
		next.base = addCounters(next.base, c.prev.Stats())
	}
	n.cur.Store(next)
	close(c.handover)
	return next
}

// handedOver reports whether err came from c's generator being revoked for
// the switch to a new lease; then it has waited for the switch, and the
// call should be tried again.
func (n *Node) handedOver(c *current, err error) bool {
	if !c.retiring.Load() || !errors.Is(err, snowflake.ErrFenced) {
		return false
	}
	<-c.handover
	return c.retiring.Load()
}

// fail turns a fenced generator's error into the lease's reason.
func (n *Node) fail(c *current, err error) error {
	if errors.Is(err, snowflake.ErrFenced) {
		if lerr := c.lease.Err(); lerr != nil {
			err := fmt.Errorf("%w: %w", ErrNoLease, lerr)
			if r := n.resumes.Load(); r != 0 {
				if d := time.Unix(0, r).Sub(n.now()); d > 0 {
					return &ResumeError{Err: err, RetryAfter: d}
				}
			}
			return err
		}
		if u := c.lease.Until(); !u.IsZero() && !u.After(c.lease.NotBefore()) {
			return fmt.Errorf("%w: the new lease issues after its first renewal (its probation): %w", ErrNoLease, err)
		}
	}
	return err
}

// NextID returns the next ID. Without a lease it fails with an error
// wrapping ErrNoLease and the lease's error (worker.ErrLeaseLost); otherwise
// as snowflake.Generator.NextID.
func (n *Node) NextID() (snowflake.ID, error) {
	for {
		c := n.cur.Load()
		id, err := c.gen.NextID()
		if err == nil {
			return id, nil
		}
		if !n.handedOver(c, err) {
			return 0, n.fail(c, err)
		}
	}
}

// NextN reserves up to k consecutive IDs; see snowflake.Generator.NextN.
func (n *Node) NextN(k int) (snowflake.Batch, error) {
	for {
		c := n.cur.Load()
		b, err := c.gen.NextN(k)
		if err == nil {
			return b, nil
		}
		if !n.handedOver(c, err) {
			return b, n.fail(c, err)
		}
	}
}

// Now reads the node's clock: the current generator's, by which its
// leases reserve.
func (n *Node) Now() time.Time { return n.cur.Load().gen.Now() }

// Layout is the layout of the node's IDs.
func (n *Node) Layout() snowflake.Layout { return n.layout }

// Decode splits an ID of this node's layout into its parts.
func (n *Node) Decode(id snowflake.ID) (snowflake.Parts, error) { return n.layout.Decode(id) }

// Status is a snapshot of a node.
type Status struct {
	Held bool // a lease is held now
	// OnReservation says the lease was lost but the node still issues on
	// the reservation it stored (until Until), while it acquires another.
	OnReservation bool
	DatacenterID  int64           // of the current (or last) lease
	WorkerID      int64           // of the current (or last) lease
	NotBefore     time.Time       // the current generator's start
	Until         time.Time       // the reservation: IDs may be issued before it
	Leases        int64           // leases acquired since Start
	Resets        int64           // leases ended because the coordinator lost or rolled back its state
	SkewRefusals  int64           // leases refused or ended because the clock differs from the coordinator's
	ClockSkew     time.Duration   // this node's clock minus the coordinator's, at the last renewal
	Err           error           // why no lease is held, when none is
	Stats         snowflake.Stats // the current generator's counters
	// Total is Stats with its counters (Issued, Waits, BorrowedTicks,
	// ClockBackwards, ClockForwards) summed over every generator of the
	// node since Start, so that they never decrease when a new lease brings
	// a new generator; its other fields are the current generator's.
	Total snowflake.Stats
	Now   time.Time // the current generator's clock
}

// countLoss counts why c's lease ended (a reset, a clock skew), once.
func (n *Node) countLoss(c *current, lost error) {
	if !c.lossCounted.CompareAndSwap(false, true) {
		return
	}
	switch {
	case errors.Is(lost, worker.ErrReset):
		n.resets.Add(1)
	case errors.Is(lost, worker.ErrClockSkew):
		n.skews.Add(1)
	}
}

// Status returns a snapshot of the node.
func (n *Node) Status() Status {
	c := n.cur.Load()
	lost := c.lease.Err()
	if lost != nil {
		n.countLoss(c, lost)
	}
	s := Status{
		DatacenterID: c.lease.DatacenterID(),
		WorkerID:     c.lease.WorkerID(),
		NotBefore:    c.lease.NotBefore(),
		Until:        c.lease.Until(),
		Leases:       n.leases.Load(),
		Resets:       n.resets.Load(),
		SkewRefusals: n.skews.Load(),
		ClockSkew:    c.lease.ClockSkew(),
		Stats:        c.gen.Stats(),
		Now:          c.gen.Now(),
	}
	s.Total = c.total(s.Stats)
	if lost != nil {
		s.Err = lost
		if p := n.lastErr.Load(); p != nil {
			s.Err = *p
		}
		s.OnReservation = !s.Stats.Revoked && s.Now.Before(s.Until)
	} else {
		s.Held = true
	}
	return s
}

// Close stops seeking leases and releases the current one: the generator is
// revoked and the worker id freed with its high-water mark stored. The
// leases LeaseWorkerID handed out and not yet closed are released too.
func (n *Node) Close() error {
	var err error
	n.close.Do(func() {
		n.cancel()
		n.wg.Wait()
		err = errors.Join(n.closeHanded(), n.cur.Load().lease.Close())
	})
	return err
}
