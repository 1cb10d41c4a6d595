package protocol

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"maps"
	"time"

	"github.com/flakeid/flakeid/worker"
)

// ErrConflict is what Store.Commit returns when the state it was given as
// read has changed since: another client committed first. The driver reads
// and decides again.
var ErrConflict = errors.New("protocol: the state changed since it was read")

// Store is a coordinator as the driver sees it: one namespace of one
// registry. Its methods are atomic on the coordinator and safe for
// concurrent use; failures of the store or the network wrap
// worker.ErrUnavailable.
type Store interface {
	// Read reads datacenter dc: the coordinator's clock, the registry's ID
	// space and claim of dc, and this namespace's record and slots of dc.
	// A state the store cannot parse is an error (damaged state is refused,
	// never re-created).
	Read(ctx context.Context, dc int64) (State, error)
	// Commit makes next the state of datacenter read.Datacenter, if what
	// read was read from is unchanged, and fails with ErrConflict (writing
	// nothing) if it has changed. next is read with some of Space, Claim,
	// Record and Slots changed; the store writes what differs. A store
	// whose writes to several keys are not atomic together writes the
	// space first (created only if absent), then the rest.
	Commit(ctx context.Context, read, next State) error
	// Names names the coordinator in errors.
	Names() Names
}

// ClaimsReader is implemented by a Store whose registry holds several
// namespaces: it reads the registry (worker.Registry.Claims). A Driver over
// a Store without it has exactly one namespace, which claims every
// datacenter.
type ClaimsReader interface {
	Claims(ctx context.Context) (worker.Claims, error)
}

// LockedUpdater is implemented by a Store that can hold a lock of its own
// across a read and a commit (SQL's lock row of a datacenter). The driver
// then decides each Acquire inside it, so that clients acquiring at once
// queue on the lock instead of losing races to one another.
type LockedUpdater interface {
	// UpdateLocked takes the lock of datacenter dc, reads the datacenter
	// (sent: this process's clock when the read was sent), calls decide
	// with what it read, commits the state decide returns (nil: nothing to
	// write) and releases the lock. Its writes are guarded by what it read
	// all the same: a commit that does not take the lock may have changed
	// it since (then ErrConflict, writing nothing).
	UpdateLocked(ctx context.Context, dc int64, decide func(read State, sent time.Time) *State) error
}

// PeerAger is implemented by a Store with Sessions whose coordinator may
// keep a live holder's slot for longer than the lease's TTL after the holder
// last wrote it: Consul keeps a session up to twice its TTL after its last
// renewal. The driver takes a live peer's clock (Slot.ClockMs) to be up to
// PeerAge(ttl) old, for holders of lease TTL ttl; without it, up to ttl.
type PeerAger interface {
	PeerAge(ttl time.Duration) time.Duration
}

// HolderChecker is implemented by a Store that can tell that a holder's
// process is gone (the file coordinator, for processes of its own host): a
// slot whose holder is gone is free, and does not count as a rollback.
type HolderChecker interface {
	HolderGone(owner string) bool
}

// Names name a coordinator in errors.
type Names struct {
	// Registry names the registry: "the file /var/lib/flakeid/workers.db",
	// "NATS bucket flakeid at nats://127.0.0.1:4222".
	Registry string
	// Namespace names this namespace, as a registry claim records it.
	Namespace string
	// Place is where the namespace's datacenters are: "/var/lib/…/workers.db"
	// makes "datacenter 0 in /var/lib/…/workers.db".
	Place string
	// Store names what may go back to an older copy: "the file".
	Store string
}

// State is one datacenter of a namespace, as a Store read it, or as the
// driver decided it should become.
type State struct {
	// Datacenter is the datacenter id.
	Datacenter int64
	// Now is the coordinator's clock when the state was read.
	Now time.Time
	// Space is the registry's ID space, when HasSpace.
	Space    string
	HasSpace bool
	// Claim is the registry's claim on the datacenter.
	Claim Claim
	// Record is the namespace record of the datacenter; nil when none.
	Record *Record
	// Slots are the datacenter's worker ids that have a slot.
	Slots map[int64]Slot
	// FloorMs is a floor no namespace record is (re)initialised below:
	// the one `flakeid recover` set on the file coordinator; 0 for none.
	FloorMs int64
	// Sessions says that the store keeps each holder on a session of its
	// own (an etcd lease, a ZooKeeper ephemeral node, a Consul session) and
	// has no clock: a slot with a Holder is held until the store removes
	// it, whatever its ExpiresMs says; Now is this process's clock when the
	// read was answered; and the coordinator's clock, for the mark bound
	// and Claim.Clock, is the other live holders' (see peerClock).
	Sessions bool
	// OwnClock says, on a store with Sessions, that Now is the
	// coordinator's own clock after all (ZooKeeper's, read as the time of
	// a write): the mark bound and Claim.Clock use it, as on a store
	// without Sessions, and not the other holders' clocks.
	OwnClock bool
	// Delayed are worker ids that are free but that the store will not
	// let a new holder take yet (Consul's lock-delay after a session
	// ended): Acquire picks another, and counts them as held.
	Delayed map[int64]bool
	// Version is the store's own token of what it read (revisions, a
	// copy), for Commit; the driver never looks at it.
	Version any

	// sent and recv are when the driver sent the read and had its answer,
	// by this process's clock (a store's Read leaves them zero).
	sent, recv time.Time
	// age is the Store's PeerAge; nil: a peer's clock is up to the TTL old.
	age func(ttl time.Duration) time.Duration
}

// Claim is a registry's claim on a datacenter.
type Claim struct {
	// Namespace is the namespace that claimed the datacenter; "" when none.
	Namespace string
	// Freeing marks a claim that an Unclaim is freeing, on a store that
	// frees in two steps: nobody is admitted meanwhile.
	Freeing bool
}

// Slot is a worker id's slot, with its times in Unix milliseconds by the
// coordinator's clock.
type Slot struct {
	Holder    string `json:"holder,omitempty"`        // the owner; "" when free
	ExpiresMs int64  `json:"expires_ms,omitempty"`    // the lease's end; 0 when free
	HighMs    int64  `json:"high_water_ms,omitempty"` // the high-water mark; 0 when never set
	// ClockMs is, on a store with Sessions, the holder's clock when it
	// last wrote the slot (the node's, req.Now at Acquire); 0 elsewhere.
	ClockMs int64 `json:"clock_ms,omitempty"`
	// Renewed marks, on a store with Sessions, the slot of a Renew in the
	// state the driver commits: the store keeps its holder's session alive
	// (and the slot differs from the one read, even when nothing else
	// moved). It is never stored.
	Renewed bool `json:"-"`
}

// Record is a datacenter's namespace record (see worker.Namespace) with its
// times in Unix milliseconds, stored as the JSON object
//
//	{"incarnation": …, "contract": …, "floor_ms": …, "initialised_ms": …}
type Record struct {
	Incarnation   string `json:"incarnation"`
	Contract      string `json:"contract"`
	FloorMs       int64  `json:"floor_ms"`
	InitialisedMs int64  `json:"initialised_ms"`
}

// Namespace is the record as worker.Coordinator.Namespace reports it.
func (r Record) Namespace() worker.Namespace {
	return worker.Namespace{Incarnation: r.Incarnation, Contract: r.Contract, Floor: MsTime(r.FloorMs), Initialised: MsTime(r.InitialisedMs)}
}

// Encode is the record's JSON.
func (r Record) Encode() []byte {
	b, _ := json.Marshal(r) // cannot fail: strings and integers
	return b
}

// expiresMs is when slot s of st lapses, for the decisions: on a store
// with Sessions a slot with a holder is held (past now) for as long as the
// store keeps it.
func (st State) expiresMs(s Slot) int64 {
	if st.Sessions && s.Holder != "" {
		return max(s.ExpiresMs, st.Now.UnixMilli()+1)
	}
	return s.ExpiresMs
}

// peerClock is, on a store with Sessions, the newest clock among the live
// holders other than worker id self (-1: none excluded), read as st was.
// Its zero value when there is none.
func (st State) peerClock(self int64) (p peerTime) {
	var newest Slot
	for id, s := range st.Slots {
		if id != self && s.Holder != "" && s.ClockMs > newest.ClockMs {
			newest = s
		}
	}
	p.Read(newest.ClockMs, st.sent, st.recv)
	return p
}

// boundClock is the coordinator's clock a reservation by worker id self is
// bounded by (worker.MarkBound): the store's, or on a store with Sessions
// the latest the other live holders' clock can read, each having written
// its ClockMs at most peerAge(ttl) before (peers share the TTL); zero when
// there is none, which bounds nothing.
func (st State) boundClock(self int64, ttl time.Duration) time.Time {
	if !st.Sessions || st.OwnClock {
		return st.Now
	}
	p := st.peerClock(self)
	return p.Latest(st.recv, st.peerAge(ttl))
}

// peerAge is how long before st was read a live holder of lease TTL ttl
// may have written its slot's ClockMs.
func (st State) peerAge(ttl time.Duration) time.Duration {
	if st.age != nil {
		return st.age(ttl)
	}
	return ttl
}

// clone is a copy of s whose Slots and Record the driver may change.
func (s State) clone() State {
	s.Slots = maps.Clone(s.Slots)
	if s.Slots == nil {
		s.Slots = map[int64]Slot{}
	}
	if s.Record != nil {
		r := *s.Record
		s.Record = &r
	}
	return s
}

// Same reports whether a and b hold the same space, claim, record, slots
// and floor (Now, Datacenter and Version aside): how a store that re-reads
// inside a transaction (the file, SQL) decides Commit's ErrConflict.
func Same(a, b State) bool {
	if a.Space != b.Space || a.HasSpace != b.HasSpace || a.Claim != b.Claim || a.FloorMs != b.FloorMs ||
		(a.Record == nil) != (b.Record == nil) || (a.Record != nil && *a.Record != *b.Record) || len(a.Slots) != len(b.Slots) {
		return false
	}
	for id, s := range a.Slots {
		if t, ok := b.Slots[id]; !ok || t != s {
			return false
		}
	}
	return true
}

// CeilMs is t in Unix milliseconds, rounded up, and 0 for the zero time: a
// high-water mark stored lower than a reservation could let the next holder
// start in a tick this one used.
func CeilMs(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	ms := t.UnixMilli()
	if time.UnixMilli(ms).Before(t) {
		ms++
	}
	return ms
}

// CeilDurMs is d in whole milliseconds, rounded up: a quarantine is never
// shorter than asked.
func CeilDurMs(d time.Duration) int64 {
	ms := d.Milliseconds()
	if time.Duration(ms)*time.Millisecond < d {
		ms++
	}
	return ms
}

// MsTime is the instant of a stored Unix-millisecond value, in UTC; 0 is
// the zero time.
func MsTime(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

// FormatMs formats a Unix-millisecond value for an error, in UTC to the
// millisecond.
func FormatMs(ms int64) string {
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z07:00")
}

// NewIncarnation is a fresh random incarnation token for a namespace record:
// 16 hex digits.
func NewIncarnation() string {
	var b [8]byte
	_, _ = crand.Read(b[:]) // never fails: crypto/rand crashes the program instead
	return hex.EncodeToString(b[:])
}
