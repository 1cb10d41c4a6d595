package worker

import (
	"fmt"
	"strings"
	"time"
)

// Request asks a Coordinator for a worker id.
type Request struct {
	Datacenter int64         // the datacenter id, ≥ 0
	Workers    int64         // ids 0 … Workers−1 may be handed out, ≥ 1
	Owner      string        // a token unique to this claim
	TTL        time.Duration // the lease lasts this long without renewal
	Reserve    time.Time     // raise the high-water mark to at least this (whole ms)
	// Now is the requesting node's clock when it made the request; Reserve
	// − Now is how far ahead it reserves, which it keeps for its renewals
	// (a coordinator without a clock of its own, etcd, publishes the
	// renewing node's clock, reserve − (Reserve − Now), for its peers).
	Now time.Time
	// Contract is the ID-space contract: recorded in the namespace when it
	// is initialised, compared on every Acquire (ErrContract when it
	// differs), and recorded again when the namespace is re-initialised
	// after a reset. Any string; Leasers send Config.Contract.
	Contract string
	// Space is the ID space (layout, epoch, time unit) the requester's IDs
	// follow: the coordinator's registry records the first one and refuses
	// any other, on every namespace and datacenter (see Admit). Any string;
	// Leasers send Config.Contract.
	Space string
	// MaxClockSkew bounds the high-water marks this request and the
	// renewals of its claim may store: at most the coordinator's clock +
	// (Reserve − Now) + MaxClockSkew (see MarkBound). A request past it is
	// refused with ErrClockSkew and nothing written. 0 (or a zero Now)
	// leaves the marks unbounded; Leasers send Config.MaxClockSkew.
	//
	// It also delays a newcomer: the claim's Previous is the id's mark +
	// MaxClockSkew (see Claim.Previous), since the previous holder — one
	// whose lease was lost may still be issuing on its reservation — stops
	// when its own clock, up to MaxClockSkew behind the coordinator's,
	// reaches the mark.
	MaxClockSkew time.Duration
	// Quarantine is added to the coordinator's clock to make the Floor of
	// a namespace (re)initialised by this request or by a later Renew or
	// Release of its claim. ≥ 0.
	Quarantine time.Duration
}

// Validate checks the fields every Coordinator needs in range: Datacenter
// ≥ 0, Workers ≥ 1, a non-empty Owner, TTL > 0, MaxClockSkew ≥ 0 and Quarantine ≥ 0. The
// error wraps ErrInvalidConfig and names every bad field with its value.
// Coordinators call it first in Acquire, and after it check what their
// store limits further (a TTL of whole milliseconds, an owner's length).
func (r Request) Validate() error {
	var bad []string
	if r.Datacenter < 0 {
		bad = append(bad, fmt.Sprintf("datacenter %d, want ≥ 0", r.Datacenter))
	}
	if r.Workers < 1 {
		bad = append(bad, fmt.Sprintf("workers %d, want ≥ 1", r.Workers))
	}
	if r.Owner == "" {
		bad = append(bad, "owner empty, want a token unique to the claim")
	}
	if r.TTL <= 0 {
		bad = append(bad, fmt.Sprintf("TTL %v, want > 0", r.TTL))
	}
	if r.MaxClockSkew < 0 {
		bad = append(bad, fmt.Sprintf("max clock skew %v, want ≥ 0", r.MaxClockSkew))
	}
	if r.Quarantine < 0 {
		bad = append(bad, fmt.Sprintf("quarantine %v, want ≥ 0", r.Quarantine))
	}
	if len(bad) > 0 {
		return fmt.Errorf("%w: bad request: %s", ErrInvalidConfig, strings.Join(bad, "; "))
	}
	return nil
}
