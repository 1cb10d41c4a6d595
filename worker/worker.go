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
//     Redis, PostgreSQL/MySQL, or a local file for one node; see
//     backend/...). The holder renews it with the coordinator's own atomic
//     primitive, guarded by an owner token.
//   - Before issuing in a tick, a holder has stored in the coordinator a
//     reservation "IDs may have been issued up to time T" (T runs a few
//     seconds ahead and is renewed every second). The next holder of that
//     worker id — whatever its clock says — starts at T.
//   - A holder that cannot renew before its lease's expiry minus a safety
//     margin loses it: Lease.Done closes and the bound generator is revoked,
//     before anyone else could take the id over.
//
// The contract mirrors etcd's concurrency.Session: Done closes when the lease
// is lost or released, Close releases it.
package worker

import (
	"context"
	"errors"
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
)

// Coordinator is the backend of leases: a store, shared by every node, of
// worker-id slots with a holder, an expiry measured by the coordinator's own
// clock, and a high-water mark that never decreases. Implementations live in
// backend/<name>; worker/workertest checks them all the same way.
type Coordinator interface {
	// Acquire claims, for req.Owner and req.TTL, one worker id in
	// [0, req.Workers) of req.Datacenter that nobody holds: never held,
	// released, or expired. Among free ids it prefers one whose high-water
	// mark has passed. In the same atomic step it raises the id's high-water
	// mark to at least req.Reserve and reports the mark stored before. When
	// every id is held it fails with an error wrapping ErrExhausted that says
	// how many are held; an unreachable coordinator gives ErrUnavailable.
	Acquire(ctx context.Context, req Request) (Claim, error)
	// List reports the worker ids of a datacenter that the coordinator has
	// a record of (held now or held before), ordered by worker id.
	List(ctx context.Context, datacenter int64) ([]Info, error)
}

// Request asks a Coordinator for a worker id.
type Request struct {
	Datacenter int64         // the datacenter id, ≥ 0
	Workers    int64         // ids 0 … Workers−1 may be handed out, ≥ 1
	Owner      string        // a token unique to this claim
	TTL        time.Duration // the lease lasts this long without renewal
	Reserve    time.Time     // raise the high-water mark to at least this (whole ms)
}

// High-water marks are whole milliseconds (Leasers round reservations up);
// a Coordinator stores them exactly, at millisecond precision or finer.

// Claim is a coordinator's handle on one held worker id. Its methods are
// atomic on the coordinator and succeed only while the owner still holds the
// id; they are called from one goroutine at a time.
type Claim interface {
	// WorkerID is the claimed id.
	WorkerID() int64
	// Previous is the high-water mark stored before this claim: no ID may be
	// issued in a tick that starts before it. Zero for a never-used id.
	Previous() time.Time
	// Renew extends the lease to now+ttl (coordinator clock) and raises the
	// high-water mark to at least reserve, or fails with ErrNotHeld.
	Renew(ctx context.Context, ttl time.Duration, reserve time.Time) error
	// Release raises the high-water mark to at least reserve and frees the
	// id, or fails with ErrNotHeld.
	Release(ctx context.Context, reserve time.Time) error
}

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
	// start before it. It only grows while the lease is held.
	Until() time.Time
	// Bind makes the lease fence f: f.SetUntil follows every reservation
	// stored, and f.Revoke is called the moment the lease is lost or
	// released — synchronously, before Done closes.
	Bind(f Fencer)
	// Done is closed when the lease ends.
	Done() <-chan struct{}
	// Err is nil while the lease is held, then wraps ErrLeaseLost or
	// ErrReleased.
	Err() error
	// Close releases the lease, storing the final reservation. It is safe
	// to call more than once.
	Close() error
}

// Fencer is what a lease fences: *snowflake.Generator implements it.
type Fencer interface {
	SetUntil(until time.Time)
	Revoke()
	// Now is the fenced generator's clock; reservations are taken from it.
	Now() time.Time
}
