package worker

import (
	"fmt"
	"time"
)

// The admission rule. Every coordinator admits a request by the one
// function here, Admit, over what it read; it only reads and writes,
// atomically, what Admit needs. The promise it keeps:
//
//	No two nodes that a coordinator admits can ever produce the same
//	63-bit value.
//
// Two generators produce disjoint IDs when they share a layout (bit widths,
// epoch, time unit) and differ in datacenter id or worker id. With different
// layouts nothing of the kind holds — a bit that is the datacenter id in one
// is the worker id, the sequence or the time in the other — so:
//
//  1. A coordinator's datacenter registry records one ID space (the layout,
//     Request.Space), written by the first Acquire on it and shared by every
//     namespace and datacenter on that registry. A request with another is
//     refused.
//  2. A datacenter id belongs to the namespace that claimed it first in the
//     registry; another namespace is refused it.
//  3. Every holder of a datacenter of a namespace uses the contract recorded
//     in its namespace record (the ID space and the quarantine).
//  4. Within the namespace's datacenter, worker ids are leased (one holder at
//     a time) and each holder starts after its predecessor's high-water mark.
//
// A refusal writes nothing: Admit runs before anything is written, and the
// backend's write (creating what is missing: the space, the claim, the
// record, then the slot) is guarded by what it read being unchanged.

// Recorded is what a coordinator has recorded that Admit decides on, as one
// Acquire read it.
type Recorded struct {
	// Registry names the registry in errors: "registry key flakeid:datacenters".
	Registry string
	// Namespace names the request's namespace (key prefix, table, file) in
	// errors, and is what a registry claim must name.
	Namespace string

	// Space is the registry's ID space, when HasSpace.
	Space    string
	HasSpace bool
	// Claimant is the namespace the registry gives the request's
	// datacenter to, when HasClaim.
	Claimant string
	HasClaim bool
	// ClaimFreeing says the claim is being freed (Registry.Unclaim of a
	// coordinator that marks it first): nobody is admitted to it meanwhile.
	ClaimFreeing bool
	// Contract is the contract of the datacenter's namespace record, when
	// HasRecord; Initialised is when that record was (re)initialised (the
	// zero time when not known).
	Contract    string
	Initialised time.Time
	HasRecord   bool
}

// Admit decides whether req may take a worker id on a coordinator that has
// recorded r (see the rule above). It returns nil, or an error wrapping
// ErrContract that shows both sides and what to do.
func Admit(req Request, r Recorded) error {
	switch {
	case r.HasSpace && r.Space != req.Space:
		return fmt.Errorf("%w: %s records the ID space %q, which every namespace and datacenter on it shares; this node's is %q. "+
			"Two layouts on one coordinator can issue the same 63-bit value (a bit that is the datacenter id in one is the worker id, "+
			"sequence or time in the other), so a node with another layout is refused: use the recorded layout, or a coordinator "+
			"(registry) of its own for another ID space",
			ErrContract, r.Registry, r.Space, req.Space)
	case r.HasClaim && r.ClaimFreeing:
		return fmt.Errorf("%w: datacenter %d is being freed in %s (flakeid workers unclaim, by the namespace %q): start again once that is done",
			ErrContract, req.Datacenter, r.Registry, r.Claimant)
	case r.HasClaim && r.Claimant != r.Namespace:
		return fmt.Errorf("%w: datacenter %d is claimed in %s by the namespace %q; this namespace is %q: "+
			"give each cluster its own datacenter id, or, if nothing of %q runs any more, free the id with "+
			"`flakeid workers unclaim --datacenter %d` and a --coordinator URL of that namespace (`flakeid workers claims` lists the claims)",
			ErrContract, req.Datacenter, r.Registry, r.Claimant, r.Namespace, r.Claimant, req.Datacenter)
	case r.HasRecord && r.Contract != req.Contract:
		since := ""
		if !r.Initialised.IsZero() {
			since = " since " + r.Initialised.UTC().Format("2006-01-02T15:04:05.000Z07:00")
		}
		return fmt.Errorf("%w: datacenter %d of %q is recorded with the contract %q%s; this node's is %q: "+
			"every node of a datacenter must use the same layout, epoch, time unit and quarantine",
			ErrContract, req.Datacenter, r.Namespace, r.Contract, since, req.Contract)
	}
	return nil
}

// MarkBound is how far past the coordinator's clock a holder may raise a
// high-water mark: its reservation ahead of its own clock plus the clock
// skew it is allowed. A node whose clock runs more than MaxClockSkew ahead
// of the coordinator's would otherwise push the marks of the ids it touches
// into the future, and every later holder of them would wait. Coordinators
// check it in the same atomic step that would store the mark (Acquire and
// Renew), and refuse with ErrClockSkew, writing nothing.
type MarkBound struct {
	Ahead time.Duration // Reserve − Now of the request
	Skew  time.Duration // Request.MaxClockSkew; 0: no bound
}

// MarkBound is the bound of req, and of every renewal of its claim.
func (r Request) MarkBound() MarkBound {
	if r.MaxClockSkew <= 0 || r.Now.IsZero() {
		return MarkBound{}
	}
	return MarkBound{Ahead: max(r.Reserve.Sub(r.Now), 0), Skew: r.MaxClockSkew}
}

// Span is Ahead + Skew in whole milliseconds (rounded down): a store that
// compares in milliseconds refuses a reservation of reserveMs (rounded up,
// as marks are stored) when reserveMs > its clock in Unix milliseconds
// (rounded down) + Span, which is exactly when Check refuses. -1 when there
// is no bound.
func (b MarkBound) Span() int64 {
	if b.Skew <= 0 {
		return -1
	}
	return (b.Ahead + b.Skew).Milliseconds()
}

// Exceeds reports whether a reservation of reserveMs (Unix ms, rounded up)
// is past the bound when the coordinator's clock reads coordMs (Unix ms,
// rounded down).
func (b MarkBound) Exceeds(reserveMs, coordMs int64) bool {
	span := b.Span()
	return span >= 0 && reserveMs > coordMs+span
}

// Check refuses a reservation past the bound when the coordinator's clock
// reads coordNow (a zero coordNow: no clock, nothing is refused), with an
// error wrapping ErrClockSkew that gives both clocks; what is "acquiring" or
// "renewing".
func (b MarkBound) Check(what string, reserve, coordNow time.Time) error {
	if coordNow.IsZero() || !b.Exceeds(ceilMilli(reserve).UnixMilli(), coordNow.UnixMilli()) {
		return nil
	}
	return b.Refused(what, reserve, coordNow)
}

// Refused is the error of a reservation that Exceeds the bound: it wraps
// ErrClockSkew and gives both clocks.
func (b MarkBound) Refused(what string, reserve, coordNow time.Time) error {
	node := reserve.Add(-b.Ahead)
	return fmt.Errorf("%w: %s: this node's clock (%s) is %v ahead of the coordinator's (%s); the bound is %v. "+
		"Nothing was written: a node whose clock runs ahead would push the worker ids' high-water marks into the future",
		ErrClockSkew, what, node.UTC().Format(time.RFC3339Nano), node.Sub(coordNow).Round(time.Millisecond),
		coordNow.UTC().Format(time.RFC3339Nano), b.Skew)
}
