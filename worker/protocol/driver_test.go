package protocol

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/flakeid/flakeid/worker"
)

var t0 = time.UnixMilli(1_800_000_000_000).UTC()

func req(owner string, workers int64, reserve time.Time) worker.Request {
	return worker.Request{Workers: workers, Owner: owner, TTL: 2 * time.Second, Reserve: reserve,
		Contract: "space; quarantine 10s", Space: "space", Quarantine: 10 * time.Second}
}

// TestAcquireRefusalsWriteNothing: every refusal of Acquire is its error
// and no commit.
func TestAcquireRefusalsWriteNothing(t *testing.T) {
	ctx := context.Background()
	m := newMemStore(t0)
	d := New(m)
	if _, err := d.Acquire(ctx, req("a", 1, t0.Add(time.Second))); err != nil {
		t.Fatal(err)
	}
	other := req("b", 1, t0)
	other.Space, other.Contract = "other", "other; quarantine 10s"
	quarantine := req("c", 4, t0)
	quarantine.Contract = "space; quarantine 9s"
	ahead := req("d", 4, t0.Add(time.Hour))
	ahead.Now, ahead.MaxClockSkew = t0.Add(time.Hour).Add(-3*time.Second), time.Second
	bad := req("", 1, t0)
	for _, tc := range []struct {
		name string
		d    *Driver
		r    worker.Request
		want error
		says string
	}{
		{"exhausted", d, req("e", 1, t0), worker.ErrExhausted, `all 1 worker ids of datacenter 0 are held (0 by "a")`},
		{"another space", d, other, worker.ErrContract, `records the ID space "space"`},
		{"another contract", d, quarantine, worker.ErrContract, `recorded with the contract "space; quarantine 10s"`},
		{"clock ahead", d, ahead, worker.ErrClockSkew, "ahead of the coordinator's"},
		{"claimed by another namespace", New(m.in("other")), req("f", 4, t0), worker.ErrContract, `claimed in the memory registry by the namespace "ns"`},
		{"invalid", d, bad, worker.ErrInvalidConfig, "owner empty"},
	} {
		before := m.commitCount()
		_, err := tc.d.Acquire(ctx, tc.r)
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: %v, want %v saying %q", tc.name, err, tc.want, tc.says)
		}
		if m.commitCount() != before {
			t.Errorf("%s: the refusal committed", tc.name)
		}
	}
}

// TestInvalidArgumentsTouchNothing: a negative datacenter or worker id, or
// a Renew without a TTL, is ErrInvalidConfig naming it, before the store
// is read.
func TestInvalidArgumentsTouchNothing(t *testing.T) {
	ctx := context.Background()
	m := newMemStore(t0)
	d := New(m)
	cl, err := d.Acquire(ctx, req("a", 2, t0))
	if err != nil {
		t.Fatal(err)
	}
	before := m.commitCount()
	for name, call := range map[string]func() error{
		"List(-1)":          func() error { _, err := d.List(ctx, -1); return err },
		"Namespace(-1)":     func() error { _, _, err := d.Namespace(ctx, -1); return err },
		"Clock(dc -1)":      func() error { _, _, err := d.Clock(ctx, worker.Request{Datacenter: -1}); return err },
		"Unclaim(-1)":       func() error { return d.Unclaim(ctx, -1) },
		"LowerMark(-1, 0)":  func() error { _, err := d.LowerMark(ctx, -1, 0, t0); return err },
		"LowerMark(0, -1)":  func() error { _, err := d.LowerMark(ctx, 0, -1, t0); return err },
		"Renew with TTL 0":  func() error { return cl.Renew(ctx, 0, t0) },
		"Renew with TTL -1": func() error { return cl.Renew(ctx, -time.Second, t0) },
	} {
		if err := call(); !errors.Is(err, worker.ErrInvalidConfig) || !strings.ContainsAny(err.Error(), "-0") {
			t.Errorf("%s: %v, want ErrInvalidConfig naming the value", name, err)
		}
	}
	if m.commitCount() != before {
		t.Errorf("an invalid call committed")
	}
}

// TestAcquireArithmetic: the first Acquire writes the space, the claim and
// a record whose floor is the clock + the quarantine (at least the store's
// floor); Previous is max(mark, floor); the mark is the reservation
// rounded up.
func TestAcquireArithmetic(t *testing.T) {
	for _, tc := range []struct {
		name           string
		storeFloor     int64
		mark           int64
		reserve        time.Time
		wantPrev, high int64
	}{
		{"fresh", 0, 0, t0.Add(1500 * time.Microsecond), t0.UnixMilli() + 10_000, t0.UnixMilli() + 2},
		{"store floor above", t0.UnixMilli() + 60_000, 0, t0, t0.UnixMilli() + 60_000, t0.UnixMilli()},
		{"mark above floor", 0, t0.UnixMilli() + 20_000, t0, t0.UnixMilli() + 20_000, t0.UnixMilli() + 20_000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := State{Now: t0, Slots: map[int64]Slot{}, FloorMs: tc.storeFloor}
			if tc.mark != 0 {
				st.Slots[0] = Slot{HighMs: tc.mark}
			}
			a, err := acquisition(req("a", 1, tc.reserve), st, Names{Namespace: "ns"}, nil, "inc")
			if err != nil {
				t.Fatal(err)
			}
			if a.prevMs != tc.wantPrev || a.slot.HighMs != tc.high || a.slot.Holder != "a" || a.slot.ExpiresMs != t0.UnixMilli()+2000 {
				t.Errorf("prev %d, slot %+v; want prev %d, high %d, held by a until +2s", a.prevMs, a.slot, tc.wantPrev, tc.high)
			}
			if !a.next.HasSpace || a.next.Space != "space" || a.next.Claim.Namespace != "ns" || a.next.Record.Incarnation != "inc" {
				t.Errorf("next = %+v; want the space, the claim and a record of incarnation inc", a.next)
			}
			if len(st.Slots) > 1 || (tc.mark == 0 && len(st.Slots) != 0) {
				t.Errorf("acquisition changed the state it read: %+v", st.Slots)
			}
		})
	}
}

// TestRenewalVerdicts: what a Renew writes for each verdict.
func TestRenewalVerdicts(t *testing.T) {
	rec := Record{Incarnation: "inc", Contract: "c", FloorMs: t0.UnixMilli() - 1000, InitialisedMs: t0.UnixMilli() - 5000}
	held := Slot{Holder: "a", ExpiresMs: t0.UnixMilli() + 1000, HighMs: t0.UnixMilli() + 500}
	h := hold{Hold: worker.Hold{Owner: "a", WorkerID: 0, Incarnation: "inc", Initialised: MsTime(rec.InitialisedMs),
		Stored: MsTime(held.HighMs), LeaseEnd: MsTime(held.ExpiresMs)}, contract: "c", quarantine: 10 * time.Second}
	n := Names{Namespace: "ns", Place: "memory", Store: "the memory"}
	state := func(r *Record, claim string, slots map[int64]Slot) State {
		return State{Now: t0, Claim: Claim{Namespace: claim}, Record: r, Slots: slots}
	}
	other := rec
	other.Incarnation, other.InitialisedMs = "later", t0.UnixMilli()-10
	for _, tc := range []struct {
		name     string
		st       State
		renew    bool
		want     error
		writes   bool
		newFloor bool // the next state re-initialises the record
	}{
		{"holds", state(&rec, "ns", map[int64]Slot{0: held}), true, nil, true, false},
		{"release", state(&rec, "ns", map[int64]Slot{0: held}), false, nil, true, false},
		{"record gone", state(nil, "ns", map[int64]Slot{0: held}), true, worker.ErrReset, true, true},
		{"record gone, claim gone", state(nil, "", nil), true, worker.ErrReset, true, true},
		{"record gone, another claims", state(nil, "b", nil), true, worker.ErrReset, false, false},
		{"reset before", state(&other, "ns", map[int64]Slot{0: held}), true, worker.ErrReset, false, false},
		{"slot gone", state(&rec, "ns", nil), true, worker.ErrReset, true, true},
		{"not held", state(&rec, "ns", map[int64]Slot{0: {Holder: "b", ExpiresMs: t0.UnixMilli() + 5000, HighMs: held.HighMs}}), true, worker.ErrReset, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			next, err := h.renewal(tc.st, n, tc.renew, 2*time.Second, t0.Add(3*time.Second), "fresh")
			if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("renewal: %v, want %v", err, tc.want)
			}
			if (next != nil) != tc.writes {
				t.Fatalf("renewal wrote %v, want %v", next != nil, tc.writes)
			}
			switch {
			case next == nil:
			case tc.newFloor:
				if next.Record.Incarnation != "fresh" || next.Record.FloorMs != t0.UnixMilli()+10_000 || next.Claim.Namespace != "ns" {
					t.Errorf("re-initialised record %+v, claim %+v; want incarnation fresh, floor now+10s, claimed", *next.Record, next.Claim)
				}
			case tc.renew:
				if s := next.Slots[0]; s.ExpiresMs != t0.UnixMilli()+2000 || s.HighMs != t0.UnixMilli()+3000 || s.Holder != "a" {
					t.Errorf("renewed slot %+v", s)
				}
			default:
				if s := next.Slots[0]; s.Holder != "" || s.ExpiresMs != 0 || s.HighMs != t0.UnixMilli()+3000 {
					t.Errorf("released slot %+v", s)
				}
			}
		})
	}
	// Inside the granted lease a slot taken by another is a rollback; past
	// it, only not held.
	st := state(&rec, "ns", map[int64]Slot{0: {Holder: "b", ExpiresMs: t0.UnixMilli() + 5000, HighMs: held.HighMs}})
	st.Now = t0.Add(2 * time.Second)
	if next, err := h.renewal(st, n, true, time.Second, t0, "x"); !errors.Is(err, worker.ErrNotHeld) || next != nil {
		t.Errorf("after the lease: %v, %v; want ErrNotHeld and nothing written", next, err)
	}
}

// TestLowerAndUnclaim: LowerMark and Unclaim decide by the worker package's
// rules, and write only when allowed.
func TestLowerAndUnclaim(t *testing.T) {
	ctx := context.Background()
	m := newMemStore(t0)
	d := New(m)
	cl, err := d.Acquire(ctx, req("a", 1, t0.Add(time.Minute)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.LowerMark(ctx, 0, 0, t0.Add(time.Second)); !errors.Is(err, worker.ErrInUse) {
		t.Errorf("LowerMark of a held id: %v, want ErrInUse", err)
	}
	if err := d.Unclaim(ctx, 0); !errors.Is(err, worker.ErrInUse) {
		t.Errorf("Unclaim while held: %v, want ErrInUse", err)
	}
	if err := cl.Release(ctx, t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	from, err := d.LowerMark(ctx, 0, 0, t0.Add(time.Second))
	if err != nil || !from.Equal(t0.Add(time.Minute)) {
		t.Fatalf("LowerMark = %v, %v; want the old mark", from, err)
	}
	if _, err := New(m.in("other")).LowerMark(ctx, 0, 0, t0.Add(time.Second)); !errors.Is(err, worker.ErrContract) {
		t.Errorf("LowerMark by another namespace: %v, want ErrContract", err)
	}
	if err := New(m.in("other")).Unclaim(ctx, 0); !errors.Is(err, worker.ErrContract) {
		t.Errorf("Unclaim by another namespace: %v, want ErrContract", err)
	}
	if err := d.Unclaim(ctx, 0); !errors.Is(err, worker.ErrInUse) {
		t.Errorf("Unclaim with the record's floor ahead: %v, want ErrInUse", err)
	}
	m.advance(11 * time.Second)
	if err := d.Unclaim(ctx, 0); err != nil {
		t.Fatalf("Unclaim once every mark passed: %v", err)
	}
	if c, _ := d.Claims(ctx); len(c.Datacenters) != 0 {
		t.Errorf("Claims after Unclaim = %+v", c)
	}
	if _, err := New(m.in("other")).Acquire(ctx, req("b", 1, t0)); err != nil {
		t.Errorf("Acquire by another namespace after Unclaim: %v", err)
	}
}

// TestDriverRapid runs random sequences of Acquire, Renew, Release, clock
// steps and losses of the whole state on one datacenter of two worker ids,
// and checks the protocol's promise after every step: a new holder of a
// worker id starts (Previous) at or past every reservation any earlier
// holder of it stored, and — unless the state was lost since — no two
// holders' leases on one id overlap by the coordinator's clock. It runs on
// a store with a clock, and on one with Sessions.
func TestDriverRapid(t *testing.T) {
	t.Run("clock", func(t *testing.T) { driverRapid(t, false, false) })
	t.Run("sessions", func(t *testing.T) { driverRapid(t, true, false) })
	t.Run("locked", func(t *testing.T) { driverRapid(t, false, true) })
}

func driverRapid(t *testing.T, sessions, locked bool) {
	rapid.Check(t, func(rt *rapid.T) {
		ctx := context.Background()
		m := newMemStore(t0)
		m.sessions = sessions
		d := New(m)
		if locked {
			d = New(lockedMemStore{m})
		}
		type holder struct {
			cl         worker.Claim
			prev       time.Time
			reserved   time.Time // the highest reservation stored
			leaseEnd   time.Time // by the coordinator's clock
			ended      bool
			epoch      int // losses of the state before its Acquire
			id         int64
			acquiredAt time.Time
		}
		var holders []*holder
		epoch, owners := 0, 0
		now := func() time.Time { st, _ := m.Read(ctx, 0); return st.Now }
		reserve := func(rt *rapid.T) time.Time {
			return now().Add(time.Duration(rapid.Int64Range(0, 3000).Draw(rt, "ahead")) * time.Millisecond)
		}
		pickLive := func(rt *rapid.T) *holder {
			var live []*holder
			for _, h := range holders {
				if !h.ended {
					live = append(live, h)
				}
			}
			if len(live) == 0 {
				rt.Skip("no live holder")
			}
			return rapid.SampledFrom(live).Draw(rt, "holder")
		}
		rt.Repeat(map[string]func(*rapid.T){
			"acquire": func(rt *rapid.T) {
				owners++
				r := req("o"+string(rune('a'+owners%26))+time.Duration(owners).String(), 2, reserve(rt))
				r.Quarantine, r.Contract = 5*time.Second, "space; quarantine 5s"
				cl, err := d.Acquire(ctx, r)
				if errors.Is(err, worker.ErrExhausted) {
					return
				}
				if err != nil {
					rt.Fatalf("Acquire: %v", err)
				}
				n := &holder{cl: cl, prev: cl.Previous(), reserved: r.Reserve, leaseEnd: now().Add(r.TTL).Truncate(time.Millisecond),
					epoch: epoch, id: cl.WorkerID(), acquiredAt: now()}
				for _, h := range holders {
					if h.id != n.id {
						continue
					}
					if n.prev.Before(h.reserved) {
						rt.Fatalf("worker %d: the new holder starts at %v, before %v that an earlier holder reserved", n.id, n.prev, h.reserved)
					}
					if !h.ended && h.epoch == epoch && h.leaseEnd.After(now()) {
						rt.Fatalf("worker %d: handed out while an earlier lease runs until %v (now %v)", n.id, h.leaseEnd, now())
					}
				}
				holders = append(holders, n)
			},
			"renew": func(rt *rapid.T) {
				h := pickLive(rt)
				res := reserve(rt)
				switch err := h.cl.Renew(ctx, 2*time.Second, res); {
				case err == nil:
					h.reserved, h.leaseEnd = maxT(h.reserved, res), now().Add(2*time.Second)
				case errors.Is(err, worker.ErrNotHeld), errors.Is(err, worker.ErrReset):
					h.ended = true
				default:
					rt.Fatalf("Renew: %v", err)
				}
			},
			"release": func(rt *rapid.T) {
				h := pickLive(rt)
				res := reserve(rt)
				if err := h.cl.Release(ctx, res); err == nil {
					h.reserved = maxT(h.reserved, res)
				} else if !errors.Is(err, worker.ErrNotHeld) && !errors.Is(err, worker.ErrReset) {
					rt.Fatalf("Release: %v", err)
				}
				h.ended = true
			},
			"advance": func(rt *rapid.T) {
				m.advance(time.Duration(rapid.Int64Range(0, 2500).Draw(rt, "step")) * time.Millisecond)
			},
			"lose state": func(rt *rapid.T) {
				m.wipe()
				epoch++
			},
		})
	})
}

func maxT(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// TestSessionsPeerClock: on a store with Sessions the coordinator's clock
// is the other live holders' (Leaf's peer check): a node an hour ahead of
// them is refused, one within the bound admitted, and without a live peer
// nothing bounds; Claim.Clock and Driver.Clock report the peers' clock,
// stale by the TTL.
func TestSessionsPeerClock(t *testing.T) {
	ctx := context.Background()
	m := newMemStore(t0)
	m.sessions = true
	d := New(m)
	alone := req("alone", 4, t0.Add(time.Hour))
	alone.Now, alone.MaxClockSkew = t0.Add(time.Hour).Add(-time.Second), time.Second
	cl, err := d.Acquire(ctx, alone)
	if err != nil {
		t.Fatalf("the first holder, with no peer to check it by: %v", err)
	}
	if at, _ := cl.Clock(); !at.IsZero() {
		t.Fatalf("Clock() of the only holder = %v, want none", at)
	}
	if err := cl.Release(ctx, t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	peer := req("peer", 4, t0.Add(-10*time.Second))
	peer.Now = t0.Add(-11 * time.Second) // 11s behind the store's clock, on a lease of 2s
	pc, err := d.Acquire(ctx, peer)
	if err != nil {
		t.Fatal(err)
	}
	if at, stale, err := d.Clock(ctx, peer); err != nil || !at.Equal(peer.Now) || stale != peer.TTL {
		t.Fatalf("Driver.Clock = %v, %v, %v; want the peer's %v, stale by its TTL", at, stale, err, peer.Now)
	}
	ahead := req("ahead", 4, t0.Add(time.Second))
	ahead.Now, ahead.MaxClockSkew = t0, time.Second // 11s ahead of the peer, 9s past its TTL
	if _, err := d.Acquire(ctx, ahead); !errors.Is(err, worker.ErrClockSkew) {
		t.Fatalf("a node 11s ahead of its peer, bound 1s past the peer's TTL: %v, want ErrClockSkew", err)
	}
	within := req("within", 4, t0.Add(-8*time.Second))
	within.Now, within.MaxClockSkew = t0.Add(-9*time.Second), time.Second // 2s ahead: the peer's TTL
	wc, err := d.Acquire(ctx, within)
	if err != nil {
		t.Fatalf("a node within its peer's TTL and the bound: %v", err)
	}
	if wc.WorkerID() == pc.WorkerID() {
		t.Fatalf("both holders have worker %d", wc.WorkerID())
	}
	if at, stale := wc.Clock(); !at.Equal(peer.Now) || stale != peer.TTL {
		t.Fatalf("Claim.Clock = %v, %v; want the peer's %v, stale by its TTL", at, stale, peer.Now)
	}
	// Both are held while the store keeps their sessions, and renew.
	infos, err := d.List(ctx, 0)
	if err != nil || len(infos) != 3 || infos[pc.WorkerID()].Holder != "peer" || !infos[pc.WorkerID()].Held(t0) {
		t.Fatalf("List = %+v, %v; want the peer held", infos, err)
	}
	if err := pc.Renew(ctx, 2*time.Second, t0.Add(-9*time.Second)); err != nil {
		t.Fatalf("the peer's Renew: %v", err)
	}
}

// TestSessionsOwnClock: a store with Sessions whose Now is its own clock
// (ZooKeeper's) bounds marks and answers Clock by it, not by the peers'.
func TestSessionsOwnClock(t *testing.T) {
	ctx := context.Background()
	m := newMemStore(t0)
	m.sessions, m.ownClock = true, true
	d := New(m)
	ahead := req("ahead", 4, t0.Add(time.Hour))
	ahead.Now, ahead.MaxClockSkew = t0.Add(time.Hour).Add(-time.Second), time.Second
	if _, err := d.Acquire(ctx, ahead); !errors.Is(err, worker.ErrClockSkew) {
		t.Fatalf("the first holder, an hour ahead of the store's own clock: %v, want ErrClockSkew", err)
	}
	within := req("a", 4, t0.Add(time.Second))
	within.Now, within.MaxClockSkew = t0, time.Second
	cl, err := d.Acquire(ctx, within)
	if err != nil {
		t.Fatal(err)
	}
	m.advance(time.Second)
	if at, stale, err := d.Clock(ctx, req("x", 4, t0)); err != nil || !at.Equal(t0.Add(time.Second)) || stale != 0 {
		t.Fatalf("Driver.Clock = %v, %v, %v; want the store's %v", at, stale, err, t0.Add(time.Second))
	}
	if err := cl.Renew(ctx, 2*time.Second, t0.Add(2*time.Second)); err != nil {
		t.Fatal(err)
	}
	if at, stale := cl.Clock(); !at.Equal(t0.Add(time.Second)) || stale != 0 {
		t.Fatalf("Claim.Clock = %v, %v; want the store's clock at the renewal %v", at, stale, t0.Add(time.Second))
	}
	if err := cl.Renew(ctx, 2*time.Second, t0.Add(time.Hour)); !errors.Is(err, worker.ErrClockSkew) {
		t.Fatalf("a renewal reserving an hour past the store's clock: %v, want ErrClockSkew", err)
	}
	// Held while the store keeps the session, past the lease's end.
	m.advance(time.Second + 500*time.Millisecond)
	infos, err := d.List(ctx, 0)
	if err != nil || len(infos) != 1 || !infos[0].Held(t0.Add(2500*time.Millisecond)) {
		t.Fatalf("List = %+v, %v; want worker 0 held", infos, err)
	}
}

// agedStore is a memStore with sessions whose coordinator keeps a holder's
// slot up to three TTLs after its last write (protocol.PeerAger), and
// whose reads say that the worker ids in delayed are in a lock-delay.
type agedStore struct {
	*memStore
	delayed map[int64]bool
}

func (a agedStore) PeerAge(ttl time.Duration) time.Duration { return 3 * ttl }

func (a agedStore) Read(ctx context.Context, dc int64) (State, error) {
	st, err := a.memStore.Read(ctx, dc)
	st.Delayed = a.delayed
	return st, err
}

// TestPeerAgeAndDelayed: a store's PeerAge widens the peer clock's
// staleness (the bound admits a node as far ahead of its peer as the peer's
// slot may be old), and its Delayed ids are not picked, and are counted
// held, with the exhausted error saying why.
func TestPeerAgeAndDelayed(t *testing.T) {
	ctx := context.Background()
	m := newMemStore(t0)
	m.sessions = true
	d := New(agedStore{m, map[int64]bool{0: true}})
	peer := req("peer", 4, t0.Add(-10*time.Second))
	peer.Now = t0.Add(-11 * time.Second)
	pc, err := d.Acquire(ctx, peer)
	if err != nil || pc.WorkerID() != 1 {
		t.Fatalf("Acquire with worker 0 delayed: %v, %v; want worker 1", pc, err)
	}
	if at, stale, err := d.Clock(ctx, peer); err != nil || !at.Equal(peer.Now) || stale != 3*peer.TTL {
		t.Fatalf("Driver.Clock = %v, %v, %v; want the peer's %v, stale by its PeerAge", at, stale, err, peer.Now)
	}
	ahead := req("ahead", 4, t0.Add(-4*time.Second))
	ahead.Now, ahead.MaxClockSkew = t0.Add(-5*time.Second), time.Second // 6s ahead of the peer: its PeerAge
	ac, err := d.Acquire(ctx, ahead)
	if err != nil {
		t.Fatalf("a node within its peer's PeerAge and the bound: %v", err)
	}
	if at, stale := ac.Clock(); !at.Equal(peer.Now) || stale != 3*peer.TTL {
		t.Fatalf("Claim.Clock = %v, %v; want the peer's %v, stale by its PeerAge", at, stale, peer.Now)
	}
	beyond := req("beyond", 4, t0.Add(6*time.Second))
	beyond.Now, beyond.MaxClockSkew = t0.Add(5*time.Second), time.Second // 10s ahead of the newest peer (ahead)
	if _, err := d.Acquire(ctx, beyond); !errors.Is(err, worker.ErrClockSkew) {
		t.Fatalf("a node 10s ahead of its newest peer, bound 1s past its PeerAge: %v, want ErrClockSkew", err)
	}
	last := req("last", 3, time.Time{})
	if _, err := d.Acquire(ctx, last); !errors.Is(err, worker.ErrExhausted) || !strings.Contains(err.Error(), "1 of them free, but in the memory's lock-delay") {
		t.Fatalf("Acquire with ids 1 and 2 held and 0 delayed: %v; want ErrExhausted naming the lock-delay", err)
	}
}
