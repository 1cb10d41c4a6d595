package workertest

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/flakeid/flakeid/worker"
)

// Memory is an in-memory worker.Coordinator: the reference implementation
// that the conformance suite checks itself against (Run passes on it), and a
// coordinator for unit tests of code that takes leases. Its clock is
// injected (time.Now by default), so inside a testing/synctest bubble it
// runs on the bubble's virtual time and lease tests take milliseconds.
//
// It is never for production: its state lives and dies with the process, so
// it keeps no two processes apart, and a restart loses every high-water
// mark.
//
// A *Memory is one client — one node's link — of one namespace of an
// in-memory coordinator. Client returns another client of the same
// namespace with a link of its own; InNamespace a client of another
// namespace of the same coordinator, which shares its datacenter registry.
// Cut, Hang and Heal act on one client's link (a partition of that node);
// Wipe and Snapshot act on the whole coordinator (a server that lost its
// data, or went back to an older copy).
//
// It keeps every promise of worker.Coordinator and worker.Claim:
//
//   - Acquire hands out a free worker id (never used, released or lapsed by
//     the coordinator's clock), preferring the lowest id whose high-water
//     mark has passed, else the one with the lowest mark; it raises the mark
//     to the reservation and reports the previous one raised to the
//     namespace's Floor. It admits by worker.Admit (one ID space per
//     registry, each datacenter for one namespace, one contract per
//     datacenter; worker.ErrContract showing both sides), refuses a
//     reservation past the request's worker.MarkBound (worker.ErrClockSkew),
//     and reports worker.ErrExhausted with the number of held ids; a
//     refusal writes nothing.
//   - Each (namespace, datacenter) has a namespace record with a random
//     incarnation, the contract and a Floor of the clock plus the
//     quarantine, rounded up to a millisecond.
//   - Renew and Release succeed only for the live holder (else
//     worker.ErrNotHeld) and raise the mark, which never decreases. They
//     fail with worker.ErrReset, re-initialising the namespace record (a new
//     incarnation, a floor never lower than the old one), when the record
//     is gone or older than the claim's, when the claim's slot is gone, its
//     mark is below one the claim stored, or it is not the claim's live
//     lease before the end of the lease last granted to the claim (the
//     coordinator went back to a copy in which the lease had lapsed); a
//     record newer than the claim's fails with ErrReset and changes nothing.
//   - Claims report the coordinator's clock, never stale (worker.Claim's
//     Clock), and implement worker.TakenAt.
//
// One mutex guards the whole coordinator, so every call is atomic.
type Memory struct {
	c  *memCoordinator
	ns string

	// The client's link, guarded by c.mu.
	link   linkState
	healed chan struct{} // closed by Heal; made by Hang
}

type linkState int

const (
	linkUp linkState = iota
	linkCut
	linkHung
)

var (
	_ worker.Coordinator = (*Memory)(nil)
	_ worker.Registry    = (*Memory)(nil)
	_ worker.MarkLowerer = (*Memory)(nil)
	_ Fault              = (*Memory)(nil)
	_ worker.TakenAt     = (*memClaim)(nil)
)

// memCoordinator is the state that the clients of a Memory share.
type memCoordinator struct {
	now func() time.Time

	mu sync.Mutex
	st memState
	// inits counts the namespace records initialised. It orders
	// incarnations, and it is kept outside st, as a wall clock would be, so
	// that a restored copy never reuses a number.
	inits uint64
}

// memState is everything Wipe deletes and Snapshot copies. Its maps hold
// values, so maps.Clone copies it deeply.
type memState struct {
	space    string // the registry's ID space, when hasSpace
	hasSpace bool
	registry map[int64]string // datacenter → the namespace that claimed it
	records  map[dcKey]memRecord
	slots    map[slotKey]memSlot
}

type dcKey struct {
	ns string
	dc int64
}

type slotKey struct {
	ns     string
	dc, id int64
}

// memRecord is a namespace record and its place in the order of
// initialisations.
type memRecord struct {
	worker.Namespace
	seq uint64
}

// memSlot is one worker id's slot. It is held when holder is set and the
// coordinator's clock is before expires.
type memSlot struct {
	holder  string
	expires time.Time
	high    time.Time
}

func newMemState() memState {
	return memState{registry: map[int64]string{}, records: map[dcKey]memRecord{}, slots: map[slotKey]memSlot{}}
}

func (s memState) clone() memState {
	return memState{space: s.space, hasSpace: s.hasSpace, registry: maps.Clone(s.registry), records: maps.Clone(s.records), slots: maps.Clone(s.slots)}
}

// NewMemory returns a client of a new, empty in-memory coordinator, in its
// namespace "default". now is the coordinator's clock, by which leases
// lapse; nil means time.Now (the virtual clock inside a testing/synctest
// bubble).
func NewMemory(now func() time.Time) *Memory {
	if now == nil {
		now = time.Now
	}
	return &Memory{c: &memCoordinator{now: now, st: newMemState()}, ns: "default"}
}

// Client returns another client of the same coordinator and namespace, as
// another node would have, with a link of its own.
func (m *Memory) Client() *Memory { return &Memory{c: m.c, ns: m.ns} }

// InNamespace returns a client of the namespace name of the same
// coordinator. Namespaces share the datacenter registry: a datacenter that
// one namespace used is refused to the others with worker.ErrContract.
func (m *Memory) InNamespace(name string) *Memory { return &Memory{c: m.c, ns: name} }

// Cut makes every call of this client fail at once with
// worker.ErrUnavailable, until Heal.
func (m *Memory) Cut() {
	m.c.mu.Lock()
	defer m.c.mu.Unlock()
	m.heal()
	m.link = linkCut
}

// Hang makes every call of this client wait, as on a link that drops
// packets, until its context ends (then it fails with worker.ErrUnavailable
// wrapping the context's error) or Heal (then it goes through, late).
func (m *Memory) Hang() {
	m.c.mu.Lock()
	defer m.c.mu.Unlock()
	if m.link != linkHung {
		m.link, m.healed = linkHung, make(chan struct{})
	}
}

// Heal ends a Cut or a Hang: calls waiting on a hung link go through.
func (m *Memory) Heal() {
	m.c.mu.Lock()
	defer m.c.mu.Unlock()
	m.heal()
}

func (m *Memory) heal() {
	if m.healed != nil {
		close(m.healed)
		m.healed = nil
	}
	m.link = linkUp
}

// Wipe deletes every record of the coordinator — the datacenter registry,
// and the namespace records, slots and high-water marks of every namespace
// — as a coordinator that lost its data would.
func (m *Memory) Wipe() {
	m.c.mu.Lock()
	defer m.c.mu.Unlock()
	m.c.st = newMemState()
}

// Snapshot copies every record of the coordinator; the returned function
// puts the copy back in place of what is there then (and may be called
// again), as a restore from an older backup or a failover to a lagging
// replica would.
func (m *Memory) Snapshot() (restore func()) {
	m.c.mu.Lock()
	defer m.c.mu.Unlock()
	saved := m.c.st.clone()
	return func() {
		m.c.mu.Lock()
		defer m.c.mu.Unlock()
		m.c.st = saved.clone()
	}
}

// Dump is the whole state of the coordinator — the registry's ID space and
// claims, every namespace record and slot — as text, in a fixed order: two
// dumps are equal exactly when the states are, so a test can show that a
// refused call changed nothing.
func (m *Memory) Dump() string {
	m.c.mu.Lock()
	defer m.c.mu.Unlock()
	st := m.c.st
	var b strings.Builder
	if st.hasSpace {
		fmt.Fprintf(&b, "space %q\n", st.space)
	}
	for _, dc := range slices.Sorted(maps.Keys(st.registry)) {
		fmt.Fprintf(&b, "claim %d %q\n", dc, st.registry[dc])
	}
	keys := slices.SortedFunc(maps.Keys(st.records), func(a, b dcKey) int {
		return cmp.Or(cmp.Compare(a.ns, b.ns), cmp.Compare(a.dc, b.dc))
	})
	for _, k := range keys {
		r := st.records[k]
		fmt.Fprintf(&b, "record %q %d %s %q floor %s at %s\n", k.ns, k.dc, r.Incarnation, r.Contract, stamp(r.Floor), stamp(r.Initialised))
	}
	slotKeys := slices.SortedFunc(maps.Keys(st.slots), func(a, b slotKey) int {
		return cmp.Or(cmp.Compare(a.ns, b.ns), cmp.Compare(a.dc, b.dc), cmp.Compare(a.id, b.id))
	})
	for _, k := range slotKeys {
		s := st.slots[k]
		fmt.Fprintf(&b, "slot %q %d %d %q until %s high %s\n", k.ns, k.dc, k.id, s.holder, stamp(s.expires), stamp(s.high))
	}
	return b.String()
}

// reach models this client's link: it fails when the link is cut or ctx has
// ended, and waits while the link hangs.
func (m *Memory) reach(ctx context.Context) error {
	for {
		m.c.mu.Lock()
		link, healed := m.link, m.healed
		m.c.mu.Unlock()
		switch link {
		case linkCut:
			return fmt.Errorf("%w: memory coordinator: the link of this client of namespace %q is cut", worker.ErrUnavailable, m.ns)
		case linkHung:
			select {
			case <-ctx.Done():
				return fmt.Errorf("%w: memory coordinator: no answer on the hung link of this client of namespace %q: %w",
					worker.ErrUnavailable, m.ns, ctx.Err())
			case <-healed:
				continue // look again: Cut also ends a Hang
			}
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("%w: memory coordinator: %w", worker.ErrUnavailable, err)
		}
		return nil
	}
}

// clock reads the coordinator's clock, without a monotonic reading so that
// stored times compare with ==. Call it with mu held.
func (c *memCoordinator) clock() time.Time { return c.now().Round(0) }

// initRecord writes a new namespace record for dc: a new incarnation, the
// contract, and a floor of now + quarantine, never below floor. Call it with
// mu held.
func (c *memCoordinator) initRecord(dc dcKey, contract string, now time.Time, quarantine time.Duration, floor time.Time) memRecord {
	var b [8]byte
	_, _ = rand.Read(b[:])
	c.inits++
	r := memRecord{seq: c.inits, Namespace: worker.Namespace{Incarnation: hex.EncodeToString(b[:]), Contract: contract,
		Floor: maxTime(ceilMilli(now.Add(quarantine)), floor), Initialised: now}}
	c.st.records[dc] = r
	if _, ok := c.st.registry[dc.dc]; !ok {
		c.st.registry[dc.dc] = dc.ns
	}
	return r
}

// pick chooses a free worker id in [0, workers) of dc: the lowest one whose
// high-water mark + skew has passed (a never-used id has none), else the
// one with the lowest mark. It reports how many ids are held. Call it with
// mu held.
func (c *memCoordinator) pick(dc dcKey, workers int64, now time.Time, skew time.Duration) (id, held int64, ok bool) {
	type candidate struct {
		id   int64
		high time.Time
	}
	better := func(a, b candidate) bool {
		ap, bp := !a.high.After(now), !b.high.After(now)
		switch {
		case ap != bp:
			return ap
		case !ap && !a.high.Equal(b.high):
			return a.high.Before(b.high)
		}
		return a.id < b.id
	}
	best := candidate{id: -1}
	consider := func(x candidate) {
		if best.id < 0 || better(x, best) {
			best = x
		}
	}
	used := map[int64]bool{}
	for k, s := range c.st.slots {
		if k.ns != dc.ns || k.dc != dc.dc || k.id >= workers {
			continue
		}
		used[k.id] = true
		if s.holder != "" && now.Before(s.expires) {
			held++
			continue
		}
		consider(candidate{k.id, s.high.Add(skew)})
	}
	unused := int64(0)
	for used[unused] {
		unused++
	}
	if unused < workers {
		consider(candidate{id: unused})
	}
	return best.id, held, best.id >= 0
}

// Acquire implements worker.Coordinator.
func (m *Memory) Acquire(ctx context.Context, req worker.Request) (worker.Claim, error) {
	sent := time.Now()
	if err := req.Validate(); err != nil {
		return nil, fmt.Errorf("memory coordinator: %w", err)
	}
	if err := m.reach(ctx); err != nil {
		return nil, err
	}
	c := m.c
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock()
	dc := dcKey{m.ns, req.Datacenter}
	claimant, claimed := c.st.registry[req.Datacenter]
	rec, recorded := c.st.records[dc]
	if err := worker.Admit(req, worker.Recorded{
		Registry: "the memory coordinator's registry", Namespace: m.ns,
		Space: c.st.space, HasSpace: c.st.hasSpace, Claimant: claimant, HasClaim: claimed,
		Contract: rec.Contract, Initialised: rec.Initialised, HasRecord: recorded,
	}); err != nil {
		return nil, err
	}
	if err := req.MarkBound().Check("acquiring", req.Reserve, now); err != nil {
		return nil, err
	}
	id, held, ok := c.pick(dc, req.Workers, now, req.MaxClockSkew)
	if !ok {
		return nil, fmt.Errorf("%w: all %d worker ids of datacenter %d of namespace %q are held", worker.ErrExhausted, held, req.Datacenter, m.ns)
	}
	c.st.space, c.st.hasSpace = req.Space, true
	c.st.registry[req.Datacenter] = m.ns
	if !recorded {
		rec = c.initRecord(dc, req.Contract, now, req.Quarantine, time.Time{})
	}
	k := slotKey{m.ns, req.Datacenter, id}
	s := c.st.slots[k]
	prev := s.high.Add(req.MaxClockSkew) // see worker.Claim.Previous
	if s.high.IsZero() {
		prev = time.Time{}
	}
	s.holder, s.expires, s.high = req.Owner, now.Add(req.TTL), maxTime(s.high, req.Reserve.Round(0))
	c.st.slots[k] = s
	return &memClaim{m: m, key: k, owner: req.Owner, prev: maxTime(prev, rec.Floor), taken: sent,
		contract: rec.Contract, quarantine: req.Quarantine, bound: req.MarkBound(),
		incarnation: rec.Incarnation, seq: rec.seq, stored: s.high, clock: now, leaseEnd: s.expires}, nil
}

// List implements worker.Coordinator.
func (m *Memory) List(ctx context.Context, datacenter int64) ([]worker.Info, error) {
	if err := m.reach(ctx); err != nil {
		return nil, err
	}
	m.c.mu.Lock()
	defer m.c.mu.Unlock()
	infos := []worker.Info{}
	for k, s := range m.c.st.slots {
		if k.ns != m.ns || k.dc != datacenter {
			continue
		}
		in := worker.Info{Datacenter: datacenter, Worker: k.id, HighWater: s.high}
		if s.holder != "" {
			in.Holder, in.Expires = s.holder, s.expires
		}
		infos = append(infos, in)
	}
	slices.SortFunc(infos, func(a, b worker.Info) int { return cmp.Compare(a.Worker, b.Worker) })
	return infos, nil
}

// Claims implements worker.Registry.
func (m *Memory) Claims(ctx context.Context) (worker.Claims, error) {
	if err := m.reach(ctx); err != nil {
		return worker.Claims{}, err
	}
	m.c.mu.Lock()
	defer m.c.mu.Unlock()
	c := worker.Claims{Space: m.c.st.space, HasSpace: m.c.st.hasSpace}
	for _, dc := range slices.Sorted(maps.Keys(m.c.st.registry)) {
		c.Datacenters = append(c.Datacenters, worker.DatacenterClaim{Datacenter: dc, Namespace: m.c.st.registry[dc]})
	}
	return c, nil
}

// Unclaim implements worker.Registry: atomically, under the coordinator's
// lock.
func (m *Memory) Unclaim(ctx context.Context, dc int64) error {
	if err := m.reach(ctx); err != nil {
		return err
	}
	m.c.mu.Lock()
	defer m.c.mu.Unlock()
	if ns, ok := m.c.st.registry[dc]; !ok || ns != m.ns {
		return fmt.Errorf("%w: datacenter %d is not claimed by the namespace %q of the memory coordinator (claimed: %v, by %q)",
			worker.ErrContract, dc, m.ns, ok, ns)
	}
	var slots []worker.Info
	for k, s := range m.c.st.slots {
		if k.ns == m.ns && k.dc == dc {
			slots = append(slots, worker.Info{Datacenter: dc, Worker: k.id, Holder: s.holder, Expires: s.expires, HighWater: s.high})
		}
	}
	slices.SortFunc(slots, func(a, b worker.Info) int { return cmp.Compare(a.Worker, b.Worker) })
	if err := worker.CheckUnclaim(m.ns, dc, slots, m.c.clock()); err != nil {
		return err
	}
	delete(m.c.st.registry, dc)
	return nil
}

// LowerMark implements worker.MarkLowerer, under the coordinator's lock.
func (m *Memory) LowerMark(ctx context.Context, dc, id int64, to time.Time) (time.Time, error) {
	if err := m.reach(ctx); err != nil {
		return time.Time{}, err
	}
	m.c.mu.Lock()
	defer m.c.mu.Unlock()
	to = ceilMilli(to)
	k := slotKey{m.ns, dc, id}
	s := m.c.st.slots[k]
	info := worker.Info{Datacenter: dc, Worker: id, Holder: s.holder, Expires: s.expires, HighWater: s.high}
	if err := worker.CheckLowerMark(info, to, m.c.clock()); err != nil {
		return time.Time{}, err
	}
	s.high = to
	m.c.st.slots[k] = s
	return info.HighWater, nil
}

// Clock implements worker.Coordinator: the coordinator's clock, never
// stale.
func (m *Memory) Clock(ctx context.Context, _ worker.Request) (time.Time, time.Duration, error) {
	if err := m.reach(ctx); err != nil {
		return time.Time{}, 0, err
	}
	m.c.mu.Lock()
	defer m.c.mu.Unlock()
	return m.c.clock(), 0, nil
}

// Namespace implements worker.Coordinator.
func (m *Memory) Namespace(ctx context.Context, datacenter int64) (worker.Namespace, bool, error) {
	if err := m.reach(ctx); err != nil {
		return worker.Namespace{}, false, err
	}
	m.c.mu.Lock()
	defer m.c.mu.Unlock()
	r, ok := m.c.st.records[dcKey{m.ns, datacenter}]
	return r.Namespace, ok, nil
}

// memClaim is a worker id held through a Memory client.
type memClaim struct {
	m          *Memory
	key        slotKey
	owner      string
	prev       time.Time
	taken      time.Time
	contract   string // of the namespace record acquired under
	quarantine time.Duration
	bound      worker.MarkBound

	// What the claim acquired under and stored since; guarded by m.c.mu.
	incarnation string
	seq         uint64
	stored      time.Time // the highest mark stored
	clock       time.Time // the coordinator's clock at the last Acquire or Renew
	leaseEnd    time.Time // the end of the lease last granted; zero once released
}

func (cl *memClaim) WorkerID() int64     { return cl.key.id }
func (cl *memClaim) Previous() time.Time { return cl.prev }
func (cl *memClaim) TakenAt() time.Time  { return cl.taken }

// Clock implements worker.Claim: the coordinator's clock, never stale.
func (cl *memClaim) Clock() (time.Time, time.Duration) {
	cl.m.c.mu.Lock()
	defer cl.m.c.mu.Unlock()
	return cl.clock, 0
}

func (cl *memClaim) Renew(ctx context.Context, ttl time.Duration, reserve time.Time) error {
	if ttl <= 0 {
		return fmt.Errorf("%w: memory coordinator: renewal for a TTL of %v", worker.ErrInvalidConfig, ttl)
	}
	return cl.change(ctx, true, ttl, reserve)
}

func (cl *memClaim) Release(ctx context.Context, reserve time.Time) error {
	return cl.change(ctx, false, 0, reserve)
}

// change checks the namespace record and the slot, then renews (renew) or
// releases the slot, raising its mark to reserve.
func (cl *memClaim) change(ctx context.Context, renew bool, ttl time.Duration, reserve time.Time) error {
	if err := cl.m.reach(ctx); err != nil {
		return err
	}
	c := cl.m.c
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock()
	dc := dcKey{cl.key.ns, cl.key.dc}
	where := fmt.Sprintf("datacenter %d of namespace %q of the memory coordinator", dc.dc, dc.ns)
	rec, recorded := c.st.records[dc]
	s, slotted := c.st.slots[cl.key]
	var lost string
	switch {
	case !recorded:
		lost = fmt.Sprintf("the namespace record of %s is gone", where)
	case rec.Incarnation != cl.incarnation && rec.seq < cl.seq:
		lost = fmt.Sprintf("the namespace record of %s (incarnation %s) is older than the one this holder acquired under (%s): the coordinator went back to an older copy",
			where, rec.Incarnation, cl.incarnation)
	case rec.Incarnation != cl.incarnation:
		return fmt.Errorf("%w: the namespace record of %s was re-initialised at %s (incarnation %s) after this holder acquired under incarnation %s",
			worker.ErrReset, where, stamp(rec.Initialised), rec.Incarnation, cl.incarnation)
	case !slotted:
		lost = fmt.Sprintf("worker %d's slot in %s is gone", cl.key.id, where)
	case s.high.Before(cl.stored):
		lost = fmt.Sprintf("worker %d's high-water mark in %s is %s, below the %s this holder stored: the coordinator went back to an older copy",
			cl.key.id, where, stamp(s.high), stamp(cl.stored))
	case now.Before(cl.leaseEnd) && (s.holder != cl.owner || !now.Before(s.expires)):
		lost = fmt.Sprintf("worker %d in %s is %s while this holder's lease runs until %s: the coordinator went back to an older copy",
			cl.key.id, where, slotState(s, now), stamp(cl.leaseEnd))
	}
	if lost != "" {
		contract := rec.Contract
		if !recorded {
			contract = cl.contract
		}
		fresh := c.initRecord(dc, contract, now, cl.quarantine, rec.Floor) // rec is zero when gone
		return fmt.Errorf("%w: %s; the namespace is re-initialised (incarnation %s): no worker id issues before %s",
			worker.ErrReset, lost, fresh.Incarnation, stamp(fresh.Floor))
	}
	if s.holder != cl.owner || !now.Before(s.expires) {
		return fmt.Errorf("%w: worker %d of %s is %s", worker.ErrNotHeld, cl.key.id, where, slotState(s, now))
	}
	if renew {
		if err := cl.bound.Check("renewing", reserve, now); err != nil {
			return err
		}
	}
	s.high = maxTime(s.high, reserve.Round(0))
	if renew {
		s.expires = now.Add(ttl)
		cl.clock, cl.leaseEnd = now, s.expires
	} else {
		s.holder, s.expires = "", time.Time{}
		cl.leaseEnd = time.Time{}
	}
	c.st.slots[cl.key] = s
	cl.stored = maxTime(cl.stored, s.high)
	return nil
}

// slotState describes a slot for an error message.
func slotState(s memSlot, now time.Time) string {
	switch {
	case s.holder == "":
		return "free"
	case !now.Before(s.expires):
		return fmt.Sprintf("lapsed (held by %q until %s)", s.holder, stamp(s.expires))
	}
	return fmt.Sprintf("held by %q until %s", s.holder, stamp(s.expires))
}

// ceilMilli rounds t up to a whole millisecond, the precision of high-water
// marks.
func ceilMilli(t time.Time) time.Time {
	r := t.Truncate(time.Millisecond)
	if r.Before(t) {
		r = r.Add(time.Millisecond)
	}
	return r.Round(0)
}

// stamp formats t for an error message.
func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
