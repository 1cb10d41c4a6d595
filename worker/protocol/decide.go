package protocol

import (
	"fmt"
	"strings"
	"time"

	"github.com/flakeid/flakeid/worker"
)

// The decisions of the protocol: pure functions from what a Store read to
// the state it should commit (nil: nothing to write) and the error the
// caller gets. They run again on every read after a lost race.

// acquired is what Acquisition decided.
type acquired struct {
	next     State
	id       int64
	prevMs   int64  // the mark before + the skew bound, raised to the record's floor
	record   Record // the namespace record the claim holds under
	slot     Slot   // the claim's slot as committed
	bound    worker.MarkBound
	contract string
	ahead    time.Duration // the request's Reserve − Now (nodeClock)
}

// acquisition decides an Acquire of req on st: admission (worker.Admit),
// the mark bound, a free worker id (Pick), the namespace record (new when
// there is none, with the incarnation given), the registry's space and claim
// when missing, and the slot: held by req.Owner for req.TTL, its mark
// raised to req.Reserve rounded up. The claim starts at the mark before
// plus req.MaxClockSkew, raised to the record's floor. A refusal is an
// error and nothing to write.
func acquisition(req worker.Request, st State, n Names, gone func(string) bool, incarnation string) (acquired, error) {
	nowMs := st.Now.UnixMilli()
	r := worker.Recorded{Registry: n.Registry, Namespace: n.Namespace, Space: st.Space, HasSpace: st.HasSpace,
		Claimant: st.Claim.Namespace, HasClaim: st.Claim.Namespace != "", ClaimFreeing: st.Claim.Freeing}
	if st.Record != nil {
		r.Contract, r.Initialised, r.HasRecord = st.Record.Contract, MsTime(st.Record.InitialisedMs), true
	}
	if err := worker.Admit(req, r); err != nil {
		return acquired{}, err
	}
	if err := req.MarkBound().Check("acquiring", req.Reserve, st.boundClock(-1, req.TTL)); err != nil {
		return acquired{}, err
	}
	// A newcomer starts the skew bound past the mark (worker.Claim.Previous),
	// and prefers an id where that has passed.
	skewMs := CeilDurMs(req.MaxClockSkew)
	id, held, ok := Pick(Candidates(st.Slots, func(s Slot) (bool, int64) { return holds(st, s, gone), s.HighMs + skewMs }), st.Delayed, req.Workers, nowMs)
	if !ok {
		note := ""
		if len(st.Delayed) > 0 {
			note = fmt.Sprintf(" (%d of them free, but in %s's lock-delay after their holders' sessions ended)", len(st.Delayed), n.Store)
		}
		return acquired{}, fmt.Errorf("%w: all %d worker ids of datacenter %d are held%s%s", worker.ErrExhausted, held, req.Datacenter, heldBy(st, req.Workers, gone), note)
	}
	next := st.clone()
	if !next.HasSpace {
		next.Space, next.HasSpace = req.Space, true
	}
	if next.Claim.Namespace == "" {
		next.Claim = Claim{Namespace: n.Namespace}
	}
	if next.Record == nil {
		// A new namespace, one whose state was lost, or slots of an older
		// flakeid: the slots are kept, their marks honoured.
		rec := newRecord(req.Contract, nowMs, req.Quarantine, st.FloorMs, incarnation)
		next.Record = &rec
	}
	s := next.Slots[id]
	prev := s.HighMs + skewMs
	s.Holder, s.ExpiresMs, s.HighMs = req.Owner, nowMs+req.TTL.Milliseconds(), max(s.HighMs, CeilMs(req.Reserve))
	nodeMs, ahead := nodeClock(req, func() time.Time { return st.Now })
	if st.Sessions {
		s.ClockMs = nodeMs
	}
	next.Slots[id] = s
	return acquired{next: next, id: id, prevMs: max(prev, next.Record.FloorMs), record: *next.Record, slot: s,
		bound: req.MarkBound(), contract: req.Contract, ahead: ahead}, nil
}

// heldBy names the holders of the first few held worker ids below workers
// in st, for an exhausted error: " (0 by "a", 1 by "b", …)"; "" when none.
func heldBy(st State, workers int64, gone func(string) bool) string {
	var names []string
	for _, id := range sortedIDs(st.Slots) {
		if s := st.Slots[id]; id < workers && holds(st, s, gone) {
			if len(names) == 3 {
				names = append(names, "…")
				break
			}
			names = append(names, fmt.Sprintf("%d by %q", id, s.Holder))
		}
	}
	if len(names) == 0 {
		return ""
	}
	return " (" + strings.Join(names, ", ") + ")"
}

// holds reports whether slot s of st is held by a holder that is not known
// to be gone.
func holds(st State, s Slot, gone func(string) bool) bool {
	return s.Holder != "" && st.expiresMs(s) > st.Now.UnixMilli() && (gone == nil || !gone(s.Holder))
}

// newRecord is a fresh namespace record of contract, initialised at nowMs,
// with a floor quarantine (rounded up) later and at least floorMs.
func newRecord(contract string, nowMs int64, quarantine time.Duration, floorMs int64, incarnation string) Record {
	return Record{Incarnation: incarnation, Contract: contract, InitialisedMs: nowMs, FloorMs: max(nowMs+CeilDurMs(quarantine), floorMs)}
}

// hold is what a claim remembers of its hold, and what its renewals need.
type hold struct {
	worker.Hold
	dc         int64
	contract   string // of the record it acquired under
	quarantine time.Duration
	ahead      time.Duration // the request's Reserve − Now, for ClockMs (nodeClock); < 0 without Now
	bound      worker.MarkBound
}

// renewal decides a Renew (renew) or Release of the claim h on st, raising
// the mark to reserve and, for a Renew, extending the lease to ttl past the
// coordinator's clock. By worker.Diagnose: the claim holds its id (the slot
// changed), another owner has it (ErrNotHeld), another client already
// re-initialised the namespace (ErrReset), or the coordinator lost or
// rolled back its state (ErrReset, and the next state re-initialises the
// namespace record with the incarnation given — unless another namespace
// claimed the datacenter since, which is then no longer this namespace's
// to write). A Renew past the mark bound is ErrClockSkew.
func (h hold) renewal(st State, n Names, renew bool, ttl time.Duration, reserve time.Time, incarnation string) (*State, error) {
	nowMs := st.Now.UnixMilli()
	f := worker.Found{Where: fmt.Sprintf("datacenter %d in %s", h.dc, n.Place), Store: n.Store, Now: MsTime(nowMs)}
	if st.Record != nil {
		ns := st.Record.Namespace()
		f.Record = &ns
	}
	if s, ok := st.Slots[h.WorkerID]; ok {
		f.Slot = &worker.Info{Datacenter: h.dc, Worker: h.WorkerID, Holder: s.Holder, Expires: MsTime(st.expiresMs(s)), HighWater: MsTime(s.HighMs)}
	}
	d := worker.Diagnose(h.Hold, f)
	switch d.Verdict {
	case worker.Lost:
		if c := st.Claim.Namespace; c != "" && c != n.Namespace {
			return nil, fmt.Errorf("%w: %s; the datacenter is claimed by the namespace %q since", worker.ErrReset, d.Found, c)
		}
		next := st.clone()
		rec := newRecord(h.contract, nowMs, h.quarantine, st.FloorMs, incarnation)
		if st.Record != nil {
			rec.Contract, rec.FloorMs = st.Record.Contract, max(rec.FloorMs, st.Record.FloorMs)
		}
		next.Record, next.Claim = &rec, Claim{Namespace: n.Namespace}
		return &next, fmt.Errorf("%w: %s; the namespace is re-initialised (incarnation %s): no worker id issues before %s",
			worker.ErrReset, d.Found, rec.Incarnation, FormatMs(rec.FloorMs))
	case worker.ResetBefore:
		return nil, fmt.Errorf("%w: %s", worker.ErrReset, d.Found)
	case worker.NotHeld:
		return nil, fmt.Errorf("%w: %s", worker.ErrNotHeld, d.Found)
	}
	if renew {
		if err := h.bound.Check("renewing", reserve, st.boundClock(h.WorkerID, ttl)); err != nil {
			return nil, err
		}
	}
	next := st.clone()
	s := next.Slots[h.WorkerID]
	s.HighMs = max(s.HighMs, CeilMs(reserve))
	switch {
	case !renew:
		s.Holder, s.ExpiresMs, s.ClockMs = "", 0, 0
	case st.Sessions:
		s.ClockMs = nodeMs(h.ahead, reserve, func() time.Time { return st.Now })
		s.ExpiresMs, s.Renewed = nowMs+ttl.Milliseconds(), true
	default:
		s.ExpiresMs = nowMs + ttl.Milliseconds()
	}
	next.Slots[h.WorkerID] = s
	return &next, nil
}

// info is slot id of st as worker.Info reports it; a holder known to be
// gone is left out.
func info(st State, id int64, gone func(string) bool) worker.Info {
	s := st.Slots[id]
	in := worker.Info{Datacenter: st.Datacenter, Worker: id, HighWater: MsTime(s.HighMs)}
	if s.Holder != "" && (gone == nil || !gone(s.Holder)) {
		in.Holder, in.Expires = s.Holder, MsTime(st.expiresMs(s))
	}
	return in
}

// lowering decides a LowerMark of worker id on st (worker.CheckLowerMark),
// in a datacenter this namespace claims or nobody does: the next state and
// the mark it replaces.
func lowering(st State, n Names, id int64, to time.Time, gone func(string) bool) (*State, time.Time, error) {
	if c := st.Claim.Namespace; c != "" && c != n.Namespace {
		return nil, time.Time{}, fmt.Errorf("%w: datacenter %d is claimed in %s by the namespace %q, not by this one (%q): lower its marks with a --coordinator URL of %q",
			worker.ErrContract, st.Datacenter, n.Registry, c, n.Namespace, c)
	}
	toMs := CeilMs(to)
	in := info(st, id, gone)
	if err := worker.CheckLowerMark(in, MsTime(toMs), st.Now); err != nil {
		return nil, time.Time{}, err
	}
	next := st.clone()
	s := next.Slots[id]
	s.HighMs = toMs
	next.Slots[id] = s
	return &next, in.HighWater, nil
}

// unclaiming decides an Unclaim of st's datacenter by this namespace
// (worker.CheckUnclaim): the next state, whose claim is cleared.
func unclaiming(st State, n Names, gone func(string) bool) (*State, error) {
	switch c := st.Claim.Namespace; {
	case c == "":
		return nil, fmt.Errorf("%w: datacenter %d is not claimed in %s: nothing to free", worker.ErrContract, st.Datacenter, n.Registry)
	case c != n.Namespace:
		return nil, fmt.Errorf("%w: datacenter %d is claimed in %s by the namespace %q, not by this one (%q): free it with a --coordinator URL of %q",
			worker.ErrContract, st.Datacenter, n.Registry, c, n.Namespace, c)
	}
	slots := make([]worker.Info, 0, len(st.Slots))
	for _, id := range sortedIDs(st.Slots) {
		slots = append(slots, info(st, id, gone))
	}
	if err := worker.CheckUnclaim(n.Namespace, st.Datacenter, slots, st.Now); err != nil {
		return nil, err
	}
	next := st.clone()
	next.Claim = Claim{}
	return &next, nil
}
