// Package worker leases worker ids so that no two running generators share
// one, and keeps a high-water mark per worker id so that no holder of an id
// ever issues an ID a previous holder could have issued.
//
// Duplicate worker ids are the first cause of duplicate Snowflake IDs in
// production (MAC/PID/IP-derived ids in containers, copied configuration, ids
// never recycled); a restart after the clock went back is the second. This
// package closes both:
//
//   - A worker id is held under a lease with a TTL in a Coordinator (etcd,
//     ZooKeeper, Consul, Redis, PostgreSQL/MySQL, NATS, or a local file for
//     one node; see backend/..., and worker/protocol, the protocol written
//     once over a store's atomic reads and writes). The holder renews it with the coordinator's own atomic
//     primitive, guarded by an owner token.
//   - Before issuing in a tick, a holder has stored in the coordinator a
//     reservation "IDs may have been issued up to time T" (T runs a few
//     seconds ahead and is renewed every second). The next holder of that
//     worker id — whatever its clock says — starts at T.
//   - A holder that cannot renew before its lease's expiry minus a safety
//     margin loses it: Lease.Done closes before anyone else could take the
//     id over. Its generator may still issue on the reservation it stored —
//     whoever holds the id next starts past it, and after a loss of the
//     coordinator's state the quarantine lies past it — so a coordinator
//     outage shorter than the reservation need not stop a node (see
//     node.Node, which takes a new lease meanwhile). A loss for clock skew,
//     and Close, revoke the generator at once.
//
// The contract mirrors etcd's concurrency.Session: Done closes when the lease
// is lost or released, Close releases it.
package worker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Sentinel errors; every error of this package and of its backends wraps one
// of them, and adds the values that were wrong.
var (
	// ErrLeaseLost means the lease ended without Close: the coordinator
	// said another owner holds the id, or it could not be renewed before
	// its expiry minus the safety margin.
	ErrLeaseLost = errors.New("worker: lease lost")
	// ErrReleased means the lease was released by Close.
	ErrReleased = errors.New("worker: lease released")
	// ErrNotHeld is returned by Claim.Renew and Claim.Release when the
	// coordinator no longer records this owner as the holder (the lease
	// expired, or another owner took the id).
	ErrNotHeld = errors.New("worker: worker id not held by this owner")
	// ErrExhausted means every worker id of the datacenter is held.
	ErrExhausted = errors.New("worker: every worker id is held")
	// ErrInvalidConfig means a Config field is out of range.
	ErrInvalidConfig = errors.New("worker: invalid config")
	// ErrUnavailable means the coordinator could not be reached or failed.
	ErrUnavailable = errors.New("worker: coordinator unavailable")
	// ErrReset means the coordinator lost or rolled back its state under a
	// holder: the datacenter's namespace record is gone or has another
	// incarnation, the holder's slot is gone, or its high-water mark is below
	// one this holder stored. Claim.Renew and Claim.Release return it; the
	// coordinator has already re-initialised the namespace behind a
	// quarantine, and the lease ends at once.
	ErrReset = errors.New("worker: coordinator state lost or rolled back")
	// ErrContract means Admit refused the request: its ID space (layout,
	// epoch, time unit) differs from the one the coordinator's registry
	// records, another namespace of the coordinator already claimed the
	// datacenter id, or its contract (space and quarantine) differs from the
	// one recorded for the datacenter. The error shows both sides.
	ErrContract = errors.New("worker: ID-space contract conflict")
	// ErrClockSkew means this node's clock differs from the coordinator's
	// (or, without a coordinator clock, from its live peers') by more than
	// Config.MaxClockSkew, or a reservation would raise a high-water mark
	// past the request's MarkBound.
	ErrClockSkew = errors.New("worker: clock skew beyond the bound")
	// ErrInUse means Registry.Unclaim refused to free a datacenter id: one
	// of its worker ids is held, or a high-water mark is still ahead.
	ErrInUse = errors.New("worker: datacenter id still in use")
)

// Coordinator is the backend of leases: a store, shared by every node, of
// worker-id slots with a holder, an expiry measured by the coordinator's own
// clock, and a high-water mark that never decreases. Implementations live in
// backend/<name>; worker/workertest checks them all the same way.
type Coordinator interface {
	// Acquire decides by Admit whether req may have a worker id, refuses a
	// req.Reserve past req.MarkBound (ErrClockSkew), and claims, for
	// req.Owner and req.TTL, one worker id in
	// [0, req.Workers) of req.Datacenter that nobody holds: never held,
	// released, or expired. Among free ids it prefers one whose high-water
	// mark + req.MaxClockSkew has passed. In the same atomic step it raises
	// the id's high-water mark to at least req.Reserve and reports the mark
	// stored before (Claim.Previous). When
	// every id is held it fails with an error wrapping ErrExhausted that says
	// how many are held; an unreachable coordinator gives ErrUnavailable.
	// A refused Acquire writes nothing: no mark, slot, namespace record,
	// registry claim or ID space.
	Acquire(ctx context.Context, req Request) (Claim, error)
	// List reports the worker ids of a datacenter that the coordinator has
	// a record of (held now or held before), ordered by worker id.
	List(ctx context.Context, datacenter int64) ([]Info, error)
	// Namespace reports the namespace record of a datacenter, and false
	// when the coordinator has none (never used, or its state was lost).
	Namespace(ctx context.Context, datacenter int64) (Namespace, bool, error)
	// Clock reads the coordinator's clock as an Acquire of req would find
	// it, and writes no state (ZooKeeper, whose clock can only be read off a
	// write, rewrites its empty clock node): the coordinator's time when the reply was made
	// lies in [at, at+stale]. A Leaser checks its own clock against it
	// before it asks for a worker id, so that a node refused for clock skew
	// leaves no trace. A zero at means no clock (etcd and Consul with no
	// live holder in the datacenter).
	Clock(ctx context.Context, req Request) (at time.Time, stale time.Duration, err error)
}

// Namespace is the record a coordinator keeps for each datacenter of a
// namespace (a key prefix, a table, a file), written when the datacenter is
// first used and again whenever the coordinator finds that its state was
// lost or rolled back. It is what every holder of the datacenter checks on
// every Acquire, Renew and Release:
//
//   - Incarnation is a random token. A namespace record that is missing or
//     carries another incarnation than the one a holder acquired under means
//     the coordinator's state was reset: the holder's lease ends (ErrReset).
//   - Contract is the ID-space contract the first holder brought (layout,
//     epoch, time unit, quarantine). A request with another contract is
//     refused (ErrContract) with both shown.
//   - Floor is a high-water mark for every worker id of the datacenter: the
//     coordinator's clock at initialisation plus the quarantine. No holder
//     issues before it, so no ID a holder of the lost state may have issued
//     or may still issue inside its reservation is issued again.
type Namespace struct {
	Incarnation string    `json:"incarnation"`
	Contract    string    `json:"contract"`
	Floor       time.Time `json:"floor"`
	Initialised time.Time `json:"initialised"` // by the coordinator's clock
}

// High-water marks are whole milliseconds (Leasers round reservations up);
// a Coordinator stores them exactly, at millisecond precision or finer.

// Claim is a coordinator's handle on one held worker id. Its methods are
// atomic on the coordinator and succeed only while the owner still holds the
// id; they are called from one goroutine at a time.
type Claim interface {
	// WorkerID is the claimed id.
	WorkerID() int64
	// Previous is the high-water mark stored before this claim plus the
	// request's MaxClockSkew, raised to the namespace's Floor: no ID may be
	// issued in a tick that starts before it. The skew keeps a worker id's
	// IDs in order across a handover: a previous holder that lost its lease
	// issues on its reservation until its own clock reaches the mark, which
	// may be up to MaxClockSkew after the coordinator's did, and the
	// newcomer's first tick lies past that.
	Previous() time.Time
	// Renew extends the lease to now+ttl (coordinator clock) and raises the
	// high-water mark to at least reserve, or fails with ErrNotHeld. A
	// reserve past the MarkBound of the claim's request fails with
	// ErrClockSkew and writes nothing.
	Renew(ctx context.Context, ttl time.Duration, reserve time.Time) error
	// Release raises the high-water mark to at least reserve and frees the
	// id, or fails with ErrNotHeld.
	Release(ctx context.Context, reserve time.Time) error
	// Clock is the coordinator's clock as the last successful Acquire or
	// Renew read it, and how stale that reading may be: the coordinator's
	// time when the reply was made lies in [at, at+stale]. A coordinator
	// with a clock (Redis TIME, SQL now(), the file's machine) reports
	// stale 0; one without (etcd) reports its live peers' last written
	// clock, stale by up to their renewal period. A zero at means no
	// reading (no live peer): the clock is not checked.
	Clock() (at time.Time, stale time.Duration)
}

// TakenAt is implemented by a Claim that knows when its hold began: the
// local time (with its monotonic reading) at which the request that took the
// worker id was sent, after which the coordinator keeps the id for at least
// the TTL. A lease runs from it. A Claim without it runs from the start of
// Acquire, which is earlier and so safe, but counts everything Acquire did
// before taking the id (reading clocks, opening a session) as time used.
type TakenAt interface {
	TakenAt() time.Time
}

// Renew, Release and Acquire check the namespace record as the Namespace
// documentation says: Renew and Release fail with ErrReset (and re-initialise
// the namespace behind req.Quarantine) when the record is missing or has
// another incarnation, when the claim's slot is missing, or when its
// high-water mark is below the highest reservation this claim stored.

// Info is one worker-id slot as a coordinator records it.
type Info struct {
	Datacenter int64     `json:"datacenter"`
	Worker     int64     `json:"worker"`
	Holder     string    `json:"holder,omitempty"`    // owner token; empty when free
	Expires    time.Time `json:"expires,omitzero"`    // when the lease lapses; zero when free
	HighWater  time.Time `json:"high_water,omitzero"` // the reservation stored
}

// Held reports whether the slot was held at instant now.
func (i Info) Held(now time.Time) bool { return i.Holder != "" && now.Before(i.Expires) }

// Leaser hands out leases on worker ids.
type Leaser interface {
	// Acquire returns a held lease, or an error wrapping ErrExhausted,
	// ErrUnavailable or the context's error.
	Acquire(ctx context.Context) (Lease, error)
}

// Lease is a held worker id. Its contract follows etcd's
// concurrency.Session: Done is closed when the lease is lost or released,
// after which Err says why.
type Lease interface {
	// DatacenterID is the datacenter the worker id belongs to.
	DatacenterID() int64
	// WorkerID is the leased worker id.
	WorkerID() int64
	// NotBefore is the high-water mark to start a generator from: no ID may
	// be issued in a tick that starts before it.
	NotBefore() time.Time
	// Until is the reservation held now: IDs may be issued in ticks that
	// start before it. It only grows while the lease is held, and stays
	// where it was once the lease has ended. A new lease
	// starts on probation, with Until = NotBefore (nothing may be issued),
	// until its first renewal — RenewEvery + RetryEvery after Acquire —
	// has found the coordinator's state unchanged: a holder that a
	// rolled-back coordinator handed a worker id still in use never issues.
	Until() time.Time
	// Bind makes the lease fence f: f.SetUntil follows every reservation
	// stored while the lease is held. When the lease is lost, f keeps the
	// last reservation as its fence and may issue up to it: nobody else
	// can issue there (whoever holds the worker id next starts at or past
	// its high-water mark, and after a loss of the coordinator's state at
	// the quarantine's floor, both past it). f.Revoke is called —
	// synchronously, before Done closes — when the lease is released
	// (Close, also after a loss) and when it is lost for clock skew
	// (ErrClockSkew), which voids the reservation: the clock it is read by
	// is out of bounds. Binding a lease that has ended revokes f.
	Bind(f Fencer)
	// Done is closed when the lease ends: lost (the bound generator may
	// still issue on its reservation, see Bind) or released.
	Done() <-chan struct{}
	// Err is nil while the lease is held, then wraps ErrLeaseLost or
	// ErrReleased.
	Err() error
	// Close releases the lease, storing the final reservation, and revokes
	// the bound generator, also after the lease was lost. It is safe to
	// call more than once.
	Close() error
	// ClockSkew is this node's clock minus the coordinator's, as measured
	// at the last acquisition or renewal (zero when never measured).
	ClockSkew() time.Duration
}

// Fencer is what a lease fences: *snowflake.Generator implements it.
type Fencer interface {
	SetUntil(until time.Time)
	Revoke()
	// Now is the fenced generator's clock; reservations are taken from it.
	Now() time.Time
}

// Registry is implemented by the coordinators that keep a datacenter
// registry shared by several namespaces (all but the file coordinator,
// whose one file is its one namespace): what `flakeid workers claims`
// shows, and the safe way to free a datacenter id that a test or an
// abandoned cluster claimed.
type Registry interface {
	// Claims reports the registry's ID space and which namespace claimed
	// each datacenter id.
	Claims(ctx context.Context) (Claims, error)
	// Unclaim frees datacenter dc in the registry, for another namespace
	// to claim. It does so only when this coordinator's namespace holds
	// the claim and, by the coordinator's clock (this machine's for etcd
	// and Consul, which have none), none of the datacenter's worker ids is
	// held and every high-water mark has passed: then whoever claims it
	// next starts past everything this namespace issued there (a new
	// namespace's floor is the clock plus the quarantine). Otherwise it
	// changes nothing: ErrContract when another namespace (or none) holds
	// the claim, ErrInUse naming the ids held or ahead. The namespace's
	// own records stay, so its nodes, started again, claim the id anew.
	Unclaim(ctx context.Context, dc int64) error
}

// Claims is a datacenter registry as Registry.Claims reports it.
type Claims struct {
	Space    string // the registry's ID space, when HasSpace
	HasSpace bool
	// Datacenters are the claims, ordered by datacenter id.
	Datacenters []DatacenterClaim
}

// DatacenterClaim is one claim of a datacenter registry.
type DatacenterClaim struct {
	Datacenter int64  `json:"datacenter"`
	Namespace  string `json:"namespace"`
}

// CheckUnclaim decides whether datacenter dc of namespace ns, whose slots
// are slots, may be freed at now (the coordinator's clock): nil, or an
// error wrapping ErrInUse that names the worker ids still held and the
// marks still ahead. Every Registry decides by it.
func CheckUnclaim(ns string, dc int64, slots []Info, now time.Time) error {
	var busy []string
	for _, s := range slots {
		switch {
		case s.Held(now):
			busy = append(busy, fmt.Sprintf("worker %d is held by %q until %s", s.Worker, s.Holder, s.Expires.UTC().Format(time.RFC3339Nano)))
		case s.HighWater.After(now):
			busy = append(busy, fmt.Sprintf("worker %d's high-water mark %s is %v ahead", s.Worker,
				s.HighWater.UTC().Format(time.RFC3339Nano), s.HighWater.Sub(now).Round(time.Millisecond)))
		}
	}
	if len(busy) > 0 {
		return fmt.Errorf("%w: datacenter %d of %q: %s; stop its nodes and try again once every mark has passed", ErrInUse, dc, ns, strings.Join(busy, "; "))
	}
	return nil
}

// MarkLowerer is implemented by every coordinator: the one way a high-water
// mark ever goes down, by an operator's explicit command (`flakeid workers
// lower-mark`), never by flakeid on its own. A mark is a promise that IDs
// may have been issued up to it; lowering it is safe only when the operator
// knows that no holder of the worker id issued an ID in a tick at or after
// the new value — a mark pushed ahead by a node that was refused at start,
// or by a node of an older flakeid whose clock ran ahead, which issued
// nothing there.
type MarkLowerer interface {
	// LowerMark lowers the high-water mark of worker id of datacenter dc
	// to to, in one atomic step that checks that the id is not held, that
	// its mark is above to, and that to is not before the coordinator's
	// clock (a mark at or below the clock costs nothing). It returns the
	// mark it replaced. Otherwise it changes nothing: ErrInUse when the id
	// is held, ErrInvalidConfig naming what was wrong.
	LowerMark(ctx context.Context, dc, id int64, to time.Time) (time.Time, error)
}

// CheckLowerMark decides whether the mark of slot s may be lowered to to
// when the coordinator's clock reads now: nil, or an error wrapping ErrInUse
// (the id is held) or ErrInvalidConfig (to is not below the mark, or before
// now). Every MarkLowerer decides by it.
func CheckLowerMark(s Info, to, now time.Time) error {
	stamp := func(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
	switch {
	case s.Held(now):
		return fmt.Errorf("%w: worker %d of datacenter %d is held by %q until %s: stop it first", ErrInUse, s.Worker, s.Datacenter, s.Holder, stamp(s.Expires))
	case !s.HighWater.After(to):
		return fmt.Errorf("%w: worker %d of datacenter %d has the mark %s, not above %s: nothing to lower", ErrInvalidConfig, s.Worker, s.Datacenter, stamp(s.HighWater), stamp(to))
	case to.Before(now):
		return fmt.Errorf("%w: %s is before the coordinator's clock %s: lower a mark to the clock at the most", ErrInvalidConfig, stamp(to), stamp(now))
	}
	return nil
}
