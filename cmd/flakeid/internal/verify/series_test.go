package verify

import (
	"fmt"
	"testing"
	"time"
)

// TestVerifySeriesChecks gives the series checks a clean history and
// histories with one violation each: a number twice, a text the template
// does not read, a number dated outside its call's window, a period with
// more unused counters than one step per process.
func TestVerifySeriesChecks(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 10, 0, 30, 0, time.UTC)
	r := &runner{t0: t0}
	incs := []*incarnation{{id: 0, started: 0, ended: int64(5 * time.Minute)}, {id: 1, started: 0, ended: int64(5 * time.Minute)}}
	at := func(d time.Duration) int64 { return int64(d) }
	num := func(minute, counter int, d time.Duration) seriesNumber {
		return seriesNumber{text: fmt.Sprintf("V20261128-10%02d-%06d", minute, counter), t0: at(d), t1: at(d + 50*time.Millisecond)}
	}
	clean := func() *seriesRecorder {
		rec := &seriesRecorder{calls: 4}
		for c := 1; c <= 30; c++ {
			rec.nums = append(rec.nums, num(0, c, time.Duration(c)*time.Second/2))
		}
		for c := 1; c <= 20; c++ {
			rec.nums = append(rec.nums, num(1, c+40, 40*time.Second)) // 40 unused from 1: within 2 processes × 50
		}
		return rec
	}
	if sc := r.checkSeries(clean(), incs); sc.numbers != 50 || sc.periods != 2 || len(sc.duplicates)+len(sc.malformed)+len(sc.offPeriod)+len(sc.waste) > 0 {
		t.Fatalf("a clean history: %+v", sc)
	}
	for name, c := range map[string]struct {
		mod   func(*seriesRecorder)
		check func(seriesChecks) int
	}{
		"twice":     {func(r *seriesRecorder) { r.nums = append(r.nums, r.nums[3]) }, func(s seriesChecks) int { return len(s.duplicates) }},
		"malformed": {func(r *seriesRecorder) { r.nums = append(r.nums, seriesNumber{text: "V20261128-1000-00000x"}) }, func(s seriesChecks) int { return len(s.malformed) }},
		"bad date":  {func(r *seriesRecorder) { r.nums = append(r.nums, seriesNumber{text: "V20261131-1000-000099"}) }, func(s seriesChecks) int { return len(s.malformed) }},
		"off period": {func(r *seriesRecorder) { r.nums = append(r.nums, num(5, 1, 10*time.Second)) }, // dated 10:05, asked at 10:00:40
			func(s seriesChecks) int { return len(s.offPeriod) }},
		"waste": {func(r *seriesRecorder) { r.nums = append(r.nums, num(1, 500, 45*time.Second)) }, // 439 unused > 2 × 50
			func(s seriesChecks) int { return len(s.waste) }},
	} {
		rec := clean()
		c.mod(rec)
		sc := r.checkSeries(rec, incs)
		if c.check(sc) != 1 {
			t.Errorf("%s: %+v, want the violation found once", name, sc)
		}
	}
}

// TestVerifySeriesSlackFollowsTheClocks: a number dated by a process whose
// clock the nemesis took 8 s behind (a restart behind, then a step back) is
// within the slack of its call, since the slack widens to the farthest any
// process's clock was; with every clock within 5 s it is off its period.
func TestVerifySeriesSlackFollowsTheClocks(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 10, 0, 30, 0, time.UTC)
	r := &runner{t0: t0}
	// Asked at 10:01:07.5, dated 10:00: its process's clock read 10:00:59.5.
	rec := &seriesRecorder{calls: 1, nums: []seriesNumber{{text: "V20261128-1000-000001",
		t0: int64(37500 * time.Millisecond), t1: int64(37550 * time.Millisecond)}}}
	inc := &incarnation{id: 0, started: 0, ended: int64(5 * time.Minute)}
	inc.setClock(-5 * time.Second)
	if got := seriesSlack([]*incarnation{inc}); got != seriesClockSlack {
		t.Fatalf("slack %v with a clock 5 s behind, want %v", got, time.Duration(seriesClockSlack))
	}
	if sc := r.checkSeries(rec, []*incarnation{inc}); len(sc.offPeriod) != 1 {
		t.Fatalf("clocks within 5 s: %+v, want the number off its period", sc)
	}
	inc.setClock(-8 * time.Second)
	inc.setClock(-6 * time.Second) // stepped forward again: the farthest stays 8 s
	if got := seriesSlack([]*incarnation{inc}); got != 9*time.Second {
		t.Fatalf("slack %v after a clock 8 s behind, want 9s", got)
	}
	if sc := r.checkSeries(rec, []*incarnation{inc}); len(sc.offPeriod) != 0 {
		t.Fatalf("a clock 8 s behind: %+v, want the number within the slack", sc)
	}
}
