package protocol

import (
	"cmp"
	"slices"
)

// Candidate is a worker id as Pick sees it.
type Candidate struct {
	ID     int64
	Held   bool  // someone holds it now: it cannot be taken
	HighMs int64 // its high-water mark, Unix ms; 0 when never used
}

// Pick chooses a free worker id in [0, workers): the lowest one whose mark
// has passed nowMs (an id absent from slots was never used: its mark is 0),
// else the one with the smallest mark, the lowest of those on a tie. Ids in
// delayed (Consul's ids waiting out a lock-delay; nil for none) count as
// held. It reports false, and how many ids are held, when none is free.
//
// slots may be in any order, and Pick sorts it by ID; ids at or beyond
// workers are left out.
func Pick(slots []Candidate, delayed map[int64]bool, workers, nowMs int64) (id, held int64, ok bool) {
	slices.SortFunc(slots, func(a, b Candidate) int { return cmp.Compare(a.ID, b.ID) })
	best, bestHigh := int64(-1), int64(0)
	next := int64(0) // the lowest id not seen yet
	for _, s := range slots {
		if s.ID >= workers {
			break
		}
		for ; next < s.ID; next++ {
			if !delayed[next] {
				return next, 0, true // never used, and lower than any passed one to come
			}
			held++
		}
		next = s.ID + 1
		switch {
		case s.Held || delayed[s.ID]:
			held++
		case s.HighMs <= nowMs:
			return s.ID, 0, true
		case best < 0 || s.HighMs < bestHigh:
			best, bestHigh = s.ID, s.HighMs
		}
	}
	for ; next < workers; next++ {
		if !delayed[next] {
			return next, 0, true
		}
		held++
	}
	if best >= 0 {
		return best, 0, true
	}
	return 0, held, false
}

// Candidates makes the candidates of Pick out of a backend's map of worker ids, view
// saying whether each is held and what its mark is.
func Candidates[S any](m map[int64]S, view func(S) (held bool, highMs int64)) []Candidate {
	out := make([]Candidate, 0, len(m))
	for id, s := range m {
		held, high := view(s)
		out = append(out, Candidate{ID: id, Held: held, HighMs: high})
	}
	return out
}
