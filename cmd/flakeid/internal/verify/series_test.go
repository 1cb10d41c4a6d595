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
