package protocol

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/flakeid/flakeid/worker"
)

// memStore is a Store in memory for the driver's own tests (a fake: the
// backends' tests run the driver on the real services): one registry with
// its namespaces, a clock the test sets, and a version per datacenter. With
// sessions it keeps holders as etcd keeps keys on leases: a holder is gone
// a TTL (its ExpiresMs − ClockMs) after its last write by the store's
// clock, and the State says Sessions.
type memStore struct {
	*memShared
	ns string
}

type memShared struct {
	mu       sync.Mutex
	now      time.Time
	space    string
	hasSpace bool
	dcs      map[int64]*memDC
	commits  int // successful commits, to see that a refusal wrote nothing
	sessions bool
	ownClock bool                 // with sessions: the State says OwnClock
	leases   map[string]time.Time // with sessions: when each holder's lease ends, by "dc/ns/id"
}

type memDC struct {
	claim   Claim
	records map[string]Record // by namespace
	slots   map[string]map[int64]Slot
	version int
}

func newMemStore(now time.Time) *memStore {
	return &memStore{memShared: &memShared{now: now, dcs: map[int64]*memDC{}}, ns: "ns"}
}

// in is a store of namespace ns on the same registry.
func (m *memStore) in(ns string) *memStore { return &memStore{memShared: m.memShared, ns: ns} }

func (m *memStore) Names() Names {
	return Names{Registry: "the memory registry", Namespace: m.ns, Place: "memory/" + m.ns, Store: "the memory"}
}

func (m *memStore) dc(dc int64) *memDC {
	d := m.dcs[dc]
	if d == nil {
		d = &memDC{records: map[string]Record{}, slots: map[string]map[int64]Slot{}}
		m.dcs[dc] = d
	}
	return d
}

func (m *memStore) Read(ctx context.Context, dc int64) (State, error) {
	if err := ctx.Err(); err != nil {
		return State{}, fmt.Errorf("%w: %w", worker.ErrUnavailable, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.read(dc), nil
}

// read is Read with m.mu held.
func (m *memStore) read(dc int64) State {
	d := m.dc(dc)
	if m.sessions {
		for id, s := range d.slots[m.ns] {
			if s.Holder != "" && !m.leases[fmt.Sprint(dc, "/", m.ns, "/", id)].After(m.now) {
				d.slots[m.ns][id] = Slot{HighMs: s.HighMs}
				d.version++
			}
		}
	}
	st := State{Datacenter: dc, Now: m.now, Space: m.space, HasSpace: m.hasSpace, Claim: d.claim,
		Slots: maps.Clone(d.slots[m.ns]), Version: d.version, Sessions: m.sessions, OwnClock: m.ownClock}
	if st.Slots == nil {
		st.Slots = map[int64]Slot{}
	}
	if r, ok := d.records[m.ns]; ok {
		st.Record = &r
	}
	return st
}

func (m *memStore) Commit(ctx context.Context, read, next State) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.commit(read, next)
}

// commit is Commit with m.mu held.
func (m *memStore) commit(read, next State) error {
	d := m.dc(read.Datacenter)
	if d.version != read.Version.(int) || m.hasSpace != read.HasSpace {
		return ErrConflict
	}
	if next.HasSpace {
		m.space, m.hasSpace = next.Space, true
	}
	d.claim = next.Claim
	if next.Record != nil {
		d.records[m.ns] = *next.Record
	}
	for id, s := range next.Slots {
		if m.sessions && s.Holder != "" && s != read.Slots[id] {
			if m.leases == nil {
				m.leases = map[string]time.Time{}
			}
			m.leases[fmt.Sprint(read.Datacenter, "/", m.ns, "/", id)] = time.UnixMilli(s.ExpiresMs)
		}
	}
	d.slots[m.ns] = maps.Clone(next.Slots)
	d.version++
	m.commits++
	return nil
}

func (m *memStore) Claims(context.Context) (worker.Claims, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := worker.Claims{Space: m.space, HasSpace: m.hasSpace}
	for dc, d := range m.dcs {
		if d.claim.Namespace != "" {
			c.Datacenters = append(c.Datacenters, worker.DatacenterClaim{Datacenter: dc, Namespace: d.claim.Namespace})
		}
	}
	return c, nil
}

// advance moves the clock.
func (m *memStore) advance(d time.Duration) {
	m.mu.Lock()
	m.now = m.now.Add(d)
	m.mu.Unlock()
}

// wipe loses every record, as a coordinator that lost its data.
func (m *memStore) wipe() {
	m.mu.Lock()
	m.space, m.hasSpace, m.dcs = "", false, map[int64]*memDC{}
	m.mu.Unlock()
}

// commitCount is how many commits succeeded.
func (m *memStore) commitCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.commits
}

// lockedMemStore is a memStore that is also a LockedUpdater: it reads,
// lets the driver decide and commits under its mutex.
type lockedMemStore struct{ *memStore }

func (m lockedMemStore) UpdateLocked(ctx context.Context, dc int64, decide func(State, time.Time) *State) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w: %w", worker.ErrUnavailable, err)
	}
	sent := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	read := m.read(dc)
	next := decide(read, sent)
	if next == nil {
		return nil
	}
	return m.commit(read, *next)
}
