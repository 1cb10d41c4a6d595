package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
)

// spaces keeps two endpoints that share no coordinator from both feeding a
// client Snowflake IDs. No coordinator sees two servers that each lease
// from a file of their own (the default of `flakeid serve`) behind one load
// balancer: both hold worker 0 of datacenter 0 and issue the same IDs. A
// client given several endpoints sees them all, so the first time an
// endpoint hands it Snowflake IDs it reads that endpoint's /v1/status and
// every other endpoint's: the layout and the (datacenter, worker) pair each
// issues from. Two endpoints that hold the same pair at the same time, or
// issue under different layouts, can issue the same IDs; the client then
// fails the call with ErrOverlap naming both, and every later Snowflake
// call with it too. Servers that share a coordinator never hold one pair at
// once, so a client of a healthy cluster only pays one status read per
// endpoint. An endpoint that cannot be asked (down, or its token may not
// read /v1/status) is checked the next time it answers.
//
// One endpoint alone is never checked: a single URL (a load balancer's) is
// the operator's to vouch for.
type spaces struct {
	mu     sync.Mutex
	vetted map[int]bool // endpoint index → checked against the others
	err    error        // the overlap found; sticky
}

// idSpace is what a server's /v1/status says of the Snowflake IDs it
// issues now.
type idSpace struct {
	Held       bool   `json:"lease_held"`
	Datacenter int64  `json:"datacenter_id"`
	Worker     int64  `json:"worker_id"`
	Layout     string `json:"layout"`
}

func (s idSpace) String() string {
	return fmt.Sprintf("datacenter %d, worker %d of the layout %s", s.Datacenter, s.Worker, s.Layout)
}

// overlaps reports whether two servers issuing from a and b at the same
// time can issue the same IDs.
func (a idSpace) overlaps(b idSpace) bool {
	if !a.Held || !b.Held {
		return false // one issues nothing now
	}
	return a.Layout != b.Layout || a.Datacenter == b.Datacenter && a.Worker == b.Worker
}

// vet checks endpoint e, which just handed out Snowflake IDs, against the
// client's other endpoints, once; it returns ErrOverlap (and keeps
// returning it) when two can issue the same IDs.
func (s *spaces) vet(ctx context.Context, t *transport, e *endpoint) error {
	if len(t.eps) < 2 || e == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil || s.vetted[e.index] {
		return s.err
	}
	mine, ok, final := t.status(ctx, e)
	if !ok {
		if final { // a server that does not tell (no /v1/status, or not to this token)
			s.mark(e)
		}
		return nil // cannot tell now: check again at its next answer
	}
	for _, o := range t.eps {
		if o == e {
			continue
		}
		theirs, ok, _ := t.status(ctx, o)
		if !ok || !mine.overlaps(theirs) {
			continue
		}
		// A lease may have moved between the two reads: look again.
		again, ok1, _ := t.status(ctx, e)
		theirs, ok2, _ := t.status(ctx, o)
		if ok1 && ok2 && again.overlaps(theirs) {
			why := "both hold the same worker id"
			if again.Layout != theirs.Layout {
				why = "they use different layouts"
			}
			s.err = fmt.Errorf("%w: %s issues from %s, and %s from %s: %s, so they share no coordinator. "+
				"Point both at one coordinator (--coordinator), or give each its own --datacenter",
				ErrOverlap, e.base, again, o.base, theirs, why)
			return s.err
		}
	}
	s.mark(e)
	return nil
}

// mark records e as checked. Call it with mu held.
func (s *spaces) mark(e *endpoint) {
	if s.vetted == nil {
		s.vetted = map[int]bool{}
	}
	s.vetted[e.index] = true
}

// status reads endpoint e's /v1/status, once, within the per-attempt
// timeout. ok is false when it could not; final then says that asking again
// will not help (a 4xx other than 408 and 429: the server has no status, or
// the token may not read it).
func (t *transport) status(ctx context.Context, e *endpoint) (sp idSpace, ok, final bool) {
	err := t.once(ctx, e, http.MethodGet, "/v1/status", nil, func(_ http.Header, r io.Reader) error { return json.NewDecoder(r).Decode(&sp) })
	if ae, isAPI := errors.AsType[*APIError](err); isAPI && !retryable(ae.Status) {
		return sp, false, true
	}
	return sp, err == nil && sp.Layout != "", false
}
