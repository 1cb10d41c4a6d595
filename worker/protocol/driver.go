package protocol

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/flakeid/flakeid/worker"
)

// MaxAttempts is how many times an operation reads and decides when its
// commits keep losing races to other clients' before it gives up with
// worker.ErrUnavailable. Each lost race is a commit another client won, so
// a herd gets through in turn; 64 lets one client lose to two dozen others
// churning over four worker ids (TestAcquireChurn on MariaDB lost 16 in a
// row once in CI), and the backoff (at most 64 ms) keeps it within about
// two seconds.
const MaxAttempts = 64

// Driver is a worker.Coordinator, worker.MarkLowerer and worker.Registry
// over a Store: every operation reads the datacenter, decides, and commits
// guarded by the read (see the package doc).
type Driver struct {
	store Store
	names Names
	gone  func(string) bool                 // nil: no holder is known to be gone
	age   func(time.Duration) time.Duration // the Store's PeerAge; nil when it has none
}

var (
	_ worker.Coordinator = (*Driver)(nil)
	_ worker.MarkLowerer = (*Driver)(nil)
	_ worker.Registry    = (*Driver)(nil)
)

// New returns the driver of s.
func New(s Store) *Driver {
	d := &Driver{store: s, names: s.Names()}
	if hc, ok := s.(HolderChecker); ok {
		d.gone = hc.HolderGone
	}
	if pa, ok := s.(PeerAger); ok {
		d.age = pa.PeerAge
	}
	return d
}

// update reads datacenter dc, decides by decide, and commits the state it
// returns (none: nothing to write), reading and deciding again after a lost
// race, up to MaxAttempts times; locked asks for a Store's LockedUpdater,
// when it has one, so that the decision is made under its lock. It returns
// decide's error, and the state of the committed attempt's read.
func (d *Driver) update(ctx context.Context, dc int64, locked bool, decide func(State) (*State, error)) (State, error) {
	if dc < 0 {
		return State{}, fmt.Errorf("%w: datacenter %d", worker.ErrInvalidConfig, dc)
	}
	lu, _ := d.store.(LockedUpdater)
	for attempt := 1; ; attempt++ {
		var st State
		var derr, err error
		if locked && lu != nil {
			err = lu.UpdateLocked(ctx, dc, func(read State, sent time.Time) *State {
				read.sent, read.recv, read.age, st = sent, time.Now(), d.age, read
				next, e := decide(read)
				derr = e
				if next != nil {
					next.Datacenter, next.Now, next.Version, next.Sessions, next.OwnClock = read.Datacenter, read.Now, read.Version, read.Sessions, read.OwnClock
				}
				return next
			})
		} else {
			if st, err = d.read(ctx, dc); err != nil {
				return st, err
			}
			var next *State
			if next, derr = decide(st); next == nil {
				return st, derr
			}
			next.Datacenter, next.Now, next.Version, next.Sessions, next.OwnClock = st.Datacenter, st.Now, st.Version, st.Sessions, st.OwnClock
			err = d.store.Commit(ctx, st, *next)
		}
		switch {
		case err == nil:
			return st, derr
		case !errors.Is(err, ErrConflict):
			return st, err
		case attempt == MaxAttempts:
			return st, fmt.Errorf("%w: datacenter %d in %s changed under %d attempts in a row: %w", worker.ErrUnavailable, dc, d.names.Place, attempt, err)
		}
		// Lost a race: back off at random, up to twice as long after each
		// (1 ms, 2 ms, … at most 64 ms), so that the clients that
		// collided spread out however many they are.
		t := time.NewTimer(time.Duration(rand.Int64N(int64(time.Millisecond) << min(attempt-1, 6))))
		select {
		case <-ctx.Done():
			t.Stop()
			return st, fmt.Errorf("%w: datacenter %d in %s: %w", worker.ErrUnavailable, dc, d.names.Place, ctx.Err())
		case <-t.C:
		}
	}
}

// read reads datacenter dc, refusing a negative id, and notes when the
// read was sent.
func (d *Driver) read(ctx context.Context, dc int64) (State, error) {
	if dc < 0 {
		return State{}, fmt.Errorf("%w: datacenter %d", worker.ErrInvalidConfig, dc)
	}
	sent := time.Now()
	st, err := d.store.Read(ctx, dc)
	st.sent, st.recv, st.age = sent, time.Now(), d.age
	return st, err
}

// Acquire implements worker.Coordinator.
func (d *Driver) Acquire(ctx context.Context, req worker.Request) (worker.Claim, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	var a acquired
	st, err := d.update(ctx, req.Datacenter, true, func(st State) (*State, error) {
		var err error
		if a, err = acquisition(req, st, d.names, d.gone, NewIncarnation()); err != nil {
			return nil, err
		}
		return &a.next, nil
	})
	if err != nil {
		return nil, err
	}
	c := &claim{d: d, taken: st.sent, prev: MsTime(a.prevMs), hold: hold{
		Hold: worker.Hold{Owner: req.Owner, WorkerID: a.id, Incarnation: a.record.Incarnation, Initialised: MsTime(a.record.InitialisedMs),
			Stored: MsTime(a.slot.HighMs)},
		dc: req.Datacenter, contract: a.record.Contract, quarantine: req.Quarantine, bound: a.bound, ahead: a.ahead,
	}}
	c.renewed(st, a.slot, req.TTL)
	return c, nil
}

// List implements worker.Coordinator.
func (d *Driver) List(ctx context.Context, dc int64) ([]worker.Info, error) {
	st, err := d.read(ctx, dc)
	if err != nil {
		return nil, err
	}
	infos := make([]worker.Info, 0, len(st.Slots))
	for _, id := range sortedIDs(st.Slots) {
		s := st.Slots[id]
		in := worker.Info{Datacenter: dc, Worker: id, HighWater: MsTime(s.HighMs)}
		if s.Holder != "" {
			in.Holder, in.Expires = s.Holder, MsTime(st.expiresMs(s))
		}
		infos = append(infos, in)
	}
	return infos, nil
}

// Namespace implements worker.Coordinator.
func (d *Driver) Namespace(ctx context.Context, dc int64) (worker.Namespace, bool, error) {
	st, err := d.read(ctx, dc)
	if err != nil || st.Record == nil {
		return worker.Namespace{}, false, err
	}
	return st.Record.Namespace(), true, nil
}

// Clock implements worker.Coordinator: the clock of a read of the
// request's datacenter, never stale; on a store with Sessions and no
// OwnClock, the newest clock of its live holders, stale by up to their
// lease's length (the zero time when none is live).
func (d *Driver) Clock(ctx context.Context, req worker.Request) (time.Time, time.Duration, error) {
	st, err := d.read(ctx, req.Datacenter)
	if err != nil || !st.Sessions || st.OwnClock {
		return st.Now, 0, err
	}
	p := st.peerClock(-1)
	p.Update(st.sent, st.recv, true, st.peerAge(req.TTL))
	at, stale := p.Clock()
	return at, stale, nil
}

// LowerMark implements worker.MarkLowerer.
func (d *Driver) LowerMark(ctx context.Context, dc, id int64, to time.Time) (time.Time, error) {
	if id < 0 {
		return time.Time{}, fmt.Errorf("%w: worker %d", worker.ErrInvalidConfig, id)
	}
	var from time.Time
	_, err := d.update(ctx, dc, false, func(st State) (*State, error) {
		next, f, err := lowering(st, d.names, id, to, d.gone)
		from = f
		return next, err
	})
	if err != nil {
		return time.Time{}, err
	}
	return from, nil
}

// Claims implements worker.Registry; a store with one namespace (no
// ClaimsReader) has no registry to list.
func (d *Driver) Claims(ctx context.Context) (worker.Claims, error) {
	cr, ok := d.store.(ClaimsReader)
	if !ok {
		return worker.Claims{}, fmt.Errorf("%w: %s has one namespace and no datacenter registry", worker.ErrInvalidConfig, d.names.Registry)
	}
	return cr.Claims(ctx)
}

// Unclaim implements worker.Registry.
func (d *Driver) Unclaim(ctx context.Context, dc int64) error {
	_, err := d.update(ctx, dc, false, func(st State) (*State, error) { return unclaiming(st, d.names, d.gone) })
	return err
}

// claim is the Driver's worker.Claim.
type claim struct {
	d     *Driver
	hold  hold
	prev  time.Time
	taken time.Time // when the read of the committed Acquire was sent
	clock time.Time // the coordinator's clock at the last Acquire or Renew
	// peers is, on a store with Sessions and no OwnClock, the other live
	// holders' clock at the last Acquire or Renew: Clock's answer.
	peers    peerTime
	sessions bool // Clock answers with peers
}

var _ worker.TakenAt = (*claim)(nil)

func (c *claim) WorkerID() int64     { return c.hold.WorkerID }
func (c *claim) Previous() time.Time { return c.prev }

// TakenAt implements worker.TakenAt: the lease's end was set to the
// coordinator's clock at the read plus the TTL, and that read was sent
// then.
func (c *claim) TakenAt() time.Time { return c.taken }

// Clock implements worker.Claim: the coordinator's clock as the last
// Acquire or Renew read it; on a store with Sessions, the other live
// holders' clock then, advanced by the time since.
func (c *claim) Clock() (time.Time, time.Duration) {
	if c.sessions {
		return c.peers.Clock()
	}
	return c.clock, 0
}

// renewed notes what the Acquire or Renew of ttl that read st and
// committed slot found: the coordinator's clock, and the lease's end by it
// (none on a store with Sessions, whose holders are held for as long as
// their sessions live, whatever their slots say).
func (c *claim) renewed(st State, slot Slot, ttl time.Duration) {
	c.clock, c.sessions, c.hold.LeaseEnd = st.Now, st.Sessions && !st.OwnClock, MsTime(slot.ExpiresMs)
	if st.Sessions {
		c.hold.LeaseEnd = time.Time{}
	}
	if c.sessions {
		p := st.peerClock(c.hold.WorkerID)
		p.Update(st.sent, st.recv, true, st.peerAge(ttl))
		c.peers = p
	}
}

// Renew implements worker.Claim.
func (c *claim) Renew(ctx context.Context, ttl time.Duration, reserve time.Time) error {
	if ttl <= 0 {
		return fmt.Errorf("%w: renewing with TTL %v", worker.ErrInvalidConfig, ttl)
	}
	return c.change(ctx, true, ttl, reserve)
}

// Release implements worker.Claim.
func (c *claim) Release(ctx context.Context, reserve time.Time) error {
	return c.change(ctx, false, 0, reserve)
}

func (c *claim) change(ctx context.Context, renew bool, ttl time.Duration, reserve time.Time) error {
	var slot Slot
	h := c.hold
	if c.d.gone != nil {
		h.OwnerGone = c.d.gone(h.Owner)
	}
	st, err := c.d.update(ctx, c.hold.dc, false, func(st State) (*State, error) {
		next, err := h.renewal(st, c.d.names, renew, ttl, reserve, NewIncarnation())
		if next != nil {
			slot = next.Slots[h.WorkerID]
		}
		return next, err
	})
	if err != nil {
		return err
	}
	c.hold.Stored = MsTime(max(CeilMs(c.hold.Stored), slot.HighMs))
	if renew {
		c.renewed(st, slot, ttl)
	} else {
		c.hold.LeaseEnd = time.Time{} // released: the claim holds no lease any more
	}
	return nil
}

// sortedIDs is the worker ids of slots, in order.
func sortedIDs(slots map[int64]Slot) []int64 {
	ids := make([]int64, 0, len(slots))
	for id := range slots {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}
