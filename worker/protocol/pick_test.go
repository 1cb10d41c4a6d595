package protocol

import (
	"math/rand/v2"
	"testing"
)

func TestPick(t *testing.T) {
	const now = 1000
	held := func(id, high int64) Candidate { return Candidate{ID: id, Held: true, HighMs: high} }
	free := func(id, high int64) Candidate { return Candidate{ID: id, HighMs: high} }
	for _, tc := range []struct {
		name    string
		slots   []Candidate
		delayed map[int64]bool
		workers int64
		id      int64
		ok      bool
		held    int64
	}{
		{"empty", nil, nil, 4, 0, true, 0},
		{"gap before held", []Candidate{held(1, 0)}, nil, 4, 0, true, 0},
		{"after held", []Candidate{held(0, 0)}, nil, 4, 1, true, 0},
		{"lowest passed", []Candidate{free(0, 2000), free(1, 900), free(2, 500)}, nil, 3, 1, true, 0},
		{"unsorted", []Candidate{free(2, 500), free(0, 2000), free(1, 900)}, nil, 3, 1, true, 0},
		{"never used beats future", []Candidate{free(0, 2000), free(1, 3000)}, nil, 3, 2, true, 0},
		{"gap beats future", []Candidate{free(0, 2000), free(2, 3000)}, nil, 3, 1, true, 0},
		{"smallest future", []Candidate{free(0, 3000), held(1, 1), free(2, 2000)}, nil, 3, 2, true, 0},
		{"lowest of equal futures", []Candidate{free(0, 3000), free(1, 2000), free(2, 2000)}, nil, 3, 1, true, 0},
		{"passed equals now", []Candidate{free(0, 3000), free(1, now)}, nil, 2, 1, true, 0},
		{"exhausted", []Candidate{held(0, 0), held(1, 0), free(5, 0)}, nil, 2, 0, false, 2},
		{"ids beyond workers ignored", []Candidate{held(0, 0), free(1, 0)}, nil, 1, 0, false, 1},
		{"delayed never-used skipped", nil, map[int64]bool{0: true}, 2, 1, true, 0},
		{"delayed passed skipped", []Candidate{free(0, 1), free(1, 2)}, map[int64]bool{0: true}, 2, 1, true, 0},
		{"delayed in a gap", []Candidate{held(2, 0)}, map[int64]bool{0: true, 1: true}, 3, 0, false, 3},
		{"all delayed", []Candidate{free(0, 1)}, map[int64]bool{0: true, 1: true}, 2, 0, false, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, n, ok := Pick(tc.slots, tc.delayed, tc.workers, now)
			if ok != tc.ok || (ok && id != tc.id) || (!ok && n != tc.held) {
				t.Fatalf("Pick = %d, %d held, %v; want %d, %d held, %v", id, n, ok, tc.id, tc.held, tc.ok)
			}
		})
	}
}

// TestPickMatchesWalk checks Pick against the rule it implements, on random
// slots: the lowest free id whose mark has passed, else the lowest of the
// free ids with the smallest mark.
func TestPickMatchesWalk(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		workers := r.Int64N(6) + 1
		byID := map[int64]Candidate{}
		for range r.IntN(8) {
			id := r.Int64N(8)
			byID[id] = Candidate{ID: id, Held: r.IntN(3) == 0, HighMs: r.Int64N(4) * 500}
		}
		delayed := map[int64]bool{}
		for range r.IntN(3) {
			delayed[r.Int64N(8)] = true
		}
		want, wantHeld, wantOK := int64(-1), int64(0), false
		var bestHigh int64
		for id := range workers {
			s := byID[id] // never used: mark 0
			if s.Held || delayed[id] {
				wantHeld++
				continue
			}
			if s.HighMs <= 1000 {
				want, wantOK = id, true
				break
			}
			if !wantOK || s.HighMs < bestHigh {
				want, bestHigh, wantOK = id, s.HighMs, true
			}
		}
		slots := Candidates(byID, func(s Candidate) (bool, int64) { return s.Held, s.HighMs })
		id, held, ok := Pick(slots, delayed, workers, 1000)
		if ok != wantOK || ok && id != want || !ok && held != wantHeld {
			t.Fatalf("Pick(%v, delayed %v, %d workers) = %d, %d held, %v; want %d, %d held, %v",
				byID, delayed, workers, id, held, ok, want, wantHeld, wantOK)
		}
	}
}
