package worker

import (
	"fmt"
	"time"
)

// The rule of a renewal. Every Renew and Release compares what its claim
// remembers of the hold it acquired (Hold) with what it reads of the
// coordinator (Found), and the one function here, Diagnose, says what that
// means: the claim still holds its worker id; another owner has it (or
// nobody: ErrNotHeld); or the coordinator lost or rolled back its state
// (ErrReset), in which case the caller re-initialises the namespace record
// behind a quarantine — unless another client already did.

// Hold is what a claim remembers of its hold.
type Hold struct {
	Owner       string
	WorkerID    int64
	Incarnation string    // of the namespace record it acquired under
	Initialised time.Time // when that record was (re)initialised
	Stored      time.Time // the highest high-water mark it stored
	// LeaseEnd is the end of the lease the coordinator last granted it (the
	// coordinator's clock then + the TTL); zero once released, or where
	// the coordinator has no clock to compare it with.
	LeaseEnd time.Time
	// OwnerGone says the owner's process is known to be gone (the file
	// coordinator can tell for a process of its own host): then a slot no
	// longer its own is no sign of a rollback.
	OwnerGone bool
}

// Found is what a Renew or Release read of its claim's datacenter.
type Found struct {
	// Where names the datacenter in reasons: "datacenter 0 in /var/lib/flakeid/workers.db".
	Where string
	// Store names what may have gone back to an older copy: "the file",
	// "the database", "the coordinator".
	Store string
	// Record is the namespace record, nil when there is none.
	Record *Namespace
	// Slot is the claim's worker-id slot, nil when there is none.
	Slot *Info
	// Now is the coordinator's clock when it was read.
	Now time.Time
}

// Verdict is what Diagnose decided.
type Verdict int

// The verdicts of Diagnose.
const (
	// Holds: the claim still holds its worker id; the renewal may write.
	Holds Verdict = iota
	// NotHeld: the id is another owner's, free or lapsed (ErrNotHeld).
	NotHeld
	// Lost: the coordinator lost or rolled back its state, and this
	// caller re-initialises the namespace record (ErrReset).
	Lost
	// ResetBefore: another client already re-initialised the namespace
	// record after a loss (ErrReset, nothing to write).
	ResetBefore
)

// Diagnosis is a Verdict and what was found, for the error.
type Diagnosis struct {
	Verdict Verdict
	// Found says what was found, in words for an error (empty with Holds).
	Found string
}

// Diagnose decides what f means for a claim that remembers h, in this
// order:
//
//   - no namespace record (a loss), or one initialised before h's (a copy
//     from before the hold): Lost;
//   - another incarnation initialised no earlier: ResetBefore;
//   - h's incarnation, but the slot is gone, its mark is below one h
//     stored, or — while the coordinator's clock is before h.LeaseEnd — the
//     slot is no longer h's live lease (in a consistent timeline nobody else
//     can have it before then): the coordinator went back to an older copy,
//     Lost;
//   - the slot is h's live lease: Holds; otherwise NotHeld.
func Diagnose(h Hold, f Found) Diagnosis {
	lost := func(format string, args ...any) Diagnosis {
		return Diagnosis{Lost, fmt.Sprintf(format, args...)}
	}
	rec, s := f.Record, f.Slot
	switch {
	case rec == nil:
		return lost("the namespace record of %s is gone", f.Where)
	case rec.Initialised.Before(h.Initialised):
		return lost("the namespace record of %s was initialised at %s (incarnation %s), before the one this holder acquired under (%s, incarnation %s): %s went back to an older copy",
			f.Where, stampOf(rec.Initialised), rec.Incarnation, stampOf(h.Initialised), h.Incarnation, f.Store)
	case rec.Incarnation != h.Incarnation:
		return Diagnosis{ResetBefore, fmt.Sprintf("the namespace record of %s was re-initialised at %s (incarnation %s), after the one this holder acquired under (%s, incarnation %s): its state was lost, and another client found it first",
			f.Where, stampOf(rec.Initialised), rec.Incarnation, stampOf(h.Initialised), h.Incarnation)}
	case s == nil:
		return lost("worker %d's slot in %s is gone", h.WorkerID, f.Where)
	case s.HighWater.Before(h.Stored):
		return lost("worker %d's high-water mark in %s is %s, below the %s this holder stored: %s went back to an older copy",
			h.WorkerID, f.Where, stampOf(s.HighWater), stampOf(h.Stored), f.Store)
	case f.Now.Before(h.LeaseEnd) && !h.OwnerGone && (s.Holder != h.Owner || !s.Held(f.Now)):
		return lost("worker %d in %s is %s while this holder's lease runs until %s by the coordinator's clock (now %s): %s went back to an older copy",
			h.WorkerID, f.Where, slotState(*s, f.Now), stampOf(h.LeaseEnd), stampOf(f.Now), f.Store)
	case s.Holder != h.Owner || !s.Held(f.Now):
		return Diagnosis{NotHeld, fmt.Sprintf("worker %d of %s is %s", h.WorkerID, f.Where, slotState(*s, f.Now))}
	}
	return Diagnosis{Verdict: Holds}
}

// slotState describes a slot at now for an error: free, lapsed or held.
func slotState(s Info, now time.Time) string {
	switch {
	case s.Holder == "":
		return "free"
	case !s.Held(now):
		return fmt.Sprintf("lapsed (held by %q until %s)", s.Holder, stampOf(s.Expires))
	}
	return fmt.Sprintf("held by %q until %s", s.Holder, stampOf(s.Expires))
}

// stampOf formats a time of a diagnosis: UTC, to the millisecond.
func stampOf(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z07:00") }
