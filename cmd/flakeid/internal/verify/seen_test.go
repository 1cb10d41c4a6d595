package verify

import (
	"context"
	"math"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"pgregory.net/rapid"
)

// pacedRun runs a fixed-rate client at 100 calls/s with the given number of
// lanes for d under synctest's clock, calling call, and returns its
// requests by scheduled start and its wake-ups. sleep, when not nil, is how
// its schedule sleeps.
func pacedRun(t *testing.T, lanes int, d time.Duration, sleep func(ctx context.Context, d time.Duration),
	call func(r *runner, ctx context.Context, q request, rec *recorder)) ([]request, []wake) {
	r := &runner{cfg: Config{Rate: 100, Deadline: 100 * time.Millisecond}, t0: time.Now(), sleep: sleep}
	recs := make([]*recorder, lanes)
	for i := range recs {
		recs[i] = &recorder{}
	}
	late := &lateness{}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.paced(ctx, apiGoClient, recs, late, 0, func(ctx context.Context, q request, rec *recorder) { call(r, ctx, q, rec) })
	}()
	time.Sleep(d)
	cancel()
	<-done
	var reqs []request
	for _, rec := range recs {
		reqs = append(reqs, rec.reqs...)
	}
	slices.SortFunc(reqs, func(a, b request) int { return int(a.start - b.start) })
	return reqs, late.wakes
}

// TestVerifyPacedCorrectsOmission: a fixed-rate client whose service stalls
// for 300 ms still makes one call per period, and the calls the schedule
// owed during the stall carry the stall in their latency (wrk2's
// correction), instead of not being made — with one lane, and with four
// when the stall holds every call, so that the lanes are all busy.
func TestVerifyPacedCorrectsOmission(t *testing.T) {
	for _, lanes := range []int{1, pacedLanes} {
		synctest.Test(t, func(t *testing.T) {
			stall := [2]int64{int64(490 * time.Millisecond), int64(790 * time.Millisecond)}
			reqs, wakes := pacedRun(t, lanes, 2*time.Second, nil, func(r *runner, ctx context.Context, q request, rec *recorder) {
				if stall[0] <= q.start && q.start < stall[1] {
					time.Sleep(time.Duration(stall[1] - r.now())) // a call sent in the stall is answered at its end
				}
				q.end = r.now()
				rec.ack(q, -1, []rng{{q.start, 1, 1}}, 1)
			})
			if n := len(reqs); n < 199 || n > 201 {
				t.Fatalf("%d lanes: %d calls recorded in 2 s at 100/s, want 200", lanes, n)
			}
			var slow, over []time.Duration
			for _, q := range reqs {
				d := time.Duration(q.end - q.start)
				if d > 0 {
					slow = append(slow, d)
				}
				if d > 100*time.Millisecond {
					over = append(over, d)
				}
			}
			// The calls due in the stall were answered at its end, 300 ms …
			// 10 ms after their time, whether the one lane waited for the
			// first or the others waited for a lane.
			if len(slow) != 30 || slow[0] != 300*time.Millisecond || slow[1] != 290*time.Millisecond || slow[29] != 10*time.Millisecond {
				t.Fatalf("%d lanes: latencies after the stall: %v", lanes, slow)
			}
			if len(over) != 20 {
				t.Errorf("%d lanes: %d calls over the 100 ms deadline, want 20: %v", lanes, len(over), over)
			}
			if st := stallsOf(wakes); len(st) != 0 {
				t.Fatalf("%d lanes: the load generator's stalls %v under a fake clock: the service's stall would be left out", lanes, st)
			}
			if len(wakes) == 0 {
				t.Errorf("%d lanes: no wake-up recorded", lanes)
			}
			for _, w := range wakes {
				if w.late != 0 {
					t.Fatalf("%d lanes: a wake-up %v late under a fake clock", lanes, time.Duration(w.late))
				}
			}
		})
	}
}

// TestVerifyPacedGeneratorStall: when the schedule's own sleep overruns
// (the load generator not running, as when the machine stalls), the calls
// due while it slept carry the stall in their latency as the service's
// calls do, and the count less the generator's stalls leaves exactly that
// out; a wait for a free lane after the wake-up is the service's, and stays
// in.
func TestVerifyPacedGeneratorStall(t *testing.T) {
	const over = 250 * time.Millisecond
	for _, tc := range []struct {
		name    string
		lanes   int
		service time.Duration // the service answers no call due from 500 ms on before 750 ms + service
	}{{"fast service", pacedLanes, 0}, {"service stalled after the wake-up", 1, 300 * time.Millisecond}} {
		synctest.Test(t, func(t *testing.T) {
			t0 := time.Now()
			overslept := false
			sleep := func(ctx context.Context, d time.Duration) {
				// The sleep until the call due at 500 ms returns 250 ms late.
				if due := time.Since(t0) + d; !overslept && due >= 500*time.Millisecond {
					overslept = true
					d += over
				}
				sleepCtx(ctx, d)
			}
			woke := 750 * time.Millisecond
			reqs, wakes := pacedRun(t, tc.lanes, 2*time.Second, sleep, func(r *runner, ctx context.Context, q request, rec *recorder) {
				if end := woke + tc.service; tc.service > 0 && q.start >= int64(500*time.Millisecond) && r.now() < int64(end) {
					time.Sleep(end - time.Duration(r.now()))
				}
				q.end = r.now()
				rec.ack(q, -1, []rng{{q.start, 1, 1}}, 1)
			})
			if n := len(reqs); n < 199 || n > 201 {
				t.Fatalf("%d calls in 2 s at 100/s, want 200", n)
			}
			st := stallsOf(wakes)
			if want := (stalls{{int64(500 * time.Millisecond), int64(woke)}}); !slices.Equal(st, want) {
				t.Fatalf("the load generator's stalls %v, want %v", st, want)
			}
			var all, gen callStats
			for _, q := range reqs {
				all.add(&q, 100*time.Millisecond, nil)
				gen.add(&q, 100*time.Millisecond, st)
			}
			// Raw: the calls due 500 … 640 ms, answered at 750 ms, are over
			// 100 ms late (15); less the stall, none is. With the service
			// stalling them until 1050 ms (the one lane busy with the call due
			// at 500 ms, the rest waiting for it), every call due 500 … 940 ms
			// is over either way (45): the wait past the wake-up is the
			// service's.
			wantRaw, wantGen := 15, 0
			if tc.service > 0 {
				wantRaw, wantGen = 45, 45
			}
			n := int64(len(reqs))
			if rawOver, genOver := n-all.within, n-gen.genWithin; rawOver != int64(wantRaw) || genOver != int64(wantGen) {
				t.Errorf("%s: %d calls over the deadline from their schedule (want %d), %d less the stall (want %d)",
					tc.name, rawOver, wantRaw, genOver, wantGen)
			}
		})
	}
}

// TestVerifyStalls: the load generator's stalls are the late wake-ups'
// intervals merged, and a call's overlap with them is what of its time
// fell in any — checked against a count millisecond by millisecond over
// random wake-ups and calls.
func TestVerifyStalls(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		const span = 400 // ms
		var wakes []wake
		covered := make([]bool, span)
		for range rapid.IntRange(0, 12).Draw(t, "wakes") {
			at := rapid.Int64Range(0, span-1).Draw(t, "at")
			late := rapid.Int64Range(0, 60).Draw(t, "late")
			wakes = append(wakes, wake{at: at * ms, late: late * ms})
			for m := at; m < min(at+late, span); m++ {
				covered[m] = true
			}
		}
		st := stallsOf(wakes)
		for i := range st {
			if st[i][0] >= st[i][1] || (i > 0 && st[i][0] <= st[i-1][1]) {
				t.Fatalf("not merged and in order: %v", st)
			}
		}
		lo := rapid.Int64Range(0, span-1).Draw(t, "lo")
		hi := rapid.Int64Range(lo, span).Draw(t, "hi")
		var want int64
		for m := lo; m < hi; m++ {
			if covered[m] {
				want += ms
			}
		}
		if got := st.overlap(lo*ms, hi*ms); got != want {
			t.Fatalf("overlap of [%d, %d] ms with %v: %v, want %v", lo, hi, st, time.Duration(got), time.Duration(want))
		}
	})
}

// TestVerifyPacedLanes: a service that answers every call in 25 ms — more
// than the 10 ms period, less than the deadline — is measured as answering
// in 25 ms by a client with four lanes; with one, every call waits for the
// one before it and the schedule falls further behind with each, until no
// call is answered within the deadline (what the verifier's clients
// reported on a loaded CI runner).
func TestVerifyPacedLanes(t *testing.T) {
	for _, tc := range []struct {
		lanes    int
		wantOver bool
	}{{pacedLanes, false}, {1, true}} {
		synctest.Test(t, func(t *testing.T) {
			reqs, _ := pacedRun(t, tc.lanes, 2*time.Second, nil, func(r *runner, ctx context.Context, q request, rec *recorder) {
				time.Sleep(25 * time.Millisecond)
				q.end = r.now()
				rec.ack(q, -1, []rng{{q.start, 1, 1}}, 1)
			})
			var over int
			worst := time.Duration(0)
			for _, q := range reqs {
				d := time.Duration(q.end - q.start)
				worst = max(worst, d)
				if d > 100*time.Millisecond {
					over++
				}
			}
			if !tc.wantOver {
				if n := len(reqs); n < 199 || n > 201 {
					t.Fatalf("%d lanes: %d calls in 2 s at 100/s, want 200", tc.lanes, n)
				}
				if worst != 25*time.Millisecond {
					t.Errorf("%d lanes: worst latency %v, want 25 ms", tc.lanes, worst)
				}
				return
			}
			if over < len(reqs)/2 {
				t.Errorf("%d lane: %d of %d calls over the deadline (worst %v); want the schedule to fall behind", tc.lanes, over, len(reqs), worst)
			}
		})
	}
}

// TestVerifyPacedEndsBehind: calls still stalled when the run ends, and the
// calls the schedule owed behind them, are recorded as timed out when their
// deadline has passed, not forgotten — as many with four lanes (four cut
// short, the rest owed) as with one.
func TestVerifyPacedEndsBehind(t *testing.T) {
	for _, lanes := range []int{1, pacedLanes} {
		synctest.Test(t, func(t *testing.T) {
			reqs, _ := pacedRun(t, lanes, time.Second, nil, func(r *runner, ctx context.Context, q request, rec *recorder) {
				if q.start >= int64(500*time.Millisecond) {
					<-ctx.Done() // stalls until the run ends, and is cut short
					return
				}
				q.end = r.now()
				rec.ack(q, -1, []rng{{q.start, 1, 1}}, 1)
			})
			var ok, timedOut int
			for _, q := range reqs {
				switch q.err {
				case errNone:
					ok++
				case errTimeout:
					timedOut++
					if q.end != int64(time.Second) {
						t.Errorf("%d lanes: a timed-out call ended at %v, want the run's end", lanes, time.Duration(q.end))
					}
				}
			}
			// 50 answered before the stall; of the 50 due since (0.50 …
			// 0.99 s), those whose deadline passed by 1 s are timed out:
			// 0.50 … 0.90.
			if ok != 50 || timedOut != 41 {
				t.Fatalf("%d lanes: answered %d, timed out %d; want 50 and 41", lanes, ok, timedOut)
			}
		})
	}
}

// TestVerifyCallStats: quantiles count a failed call as never answered,
// the share within the deadline counts only answered calls in time, and
// nines are -log10 of the share missed.
func TestVerifyCallStats(t *testing.T) {
	var s callStats
	dl := 100 * time.Millisecond
	for i := range 1000 {
		q := request{start: 0, end: int64(i) * int64(time.Millisecond) / 10} // 0 … 99.9 ms
		if i == 999 {
			q.err = errTimeout
		}
		s.add(&q, dl, nil)
	}
	slow := request{start: 0, end: int64(150 * time.Millisecond)}
	s.add(&slow, dl, nil)
	// The load generator stalled 60 ms while a call was in flight: late
	// from its schedule, on time less the stall; one 250 ms late is late
	// either way.
	st := stalls{{int64(20 * time.Millisecond), int64(80 * time.Millisecond)}}
	held := request{start: 0, end: int64(150 * time.Millisecond)}
	s.add(&held, dl, st)
	heldLate := request{start: 0, end: int64(250 * time.Millisecond)}
	s.add(&heldLate, dl, st)
	s.done()
	if s.within != 999 || s.genWithin != 1000 {
		t.Fatalf("within %d, want 999; from the wake-up %d, want 1000", s.within, s.genWithin)
	}
	if got := s.quantile(1); got != "failed" {
		t.Errorf("max %q, want failed", got)
	}
	if got := s.quantile(0.5); got != "50 ms" {
		t.Errorf("p50 %q", got)
	}
	if got := s.quantile(0.998); got != "150 ms" {
		t.Errorf("p99.8 %q, want a late answer", got)
	}
	share, n9 := s.share()
	if share != "99.601%" || n9 != "2.4" {
		t.Errorf("share %q, nines %q", share, n9)
	}
	if share, n9 := s.genShare(); share != "99.701%" || n9 != "2.5" {
		t.Errorf("share from the wake-up %q, nines %q", share, n9)
	}
	if got := nines(0.99999); math.Abs(got-5) > 1e-6 {
		t.Errorf("nines(0.99999) = %v", got)
	}
	var none callStats
	if a, b := none.share(); a != "—" || b != "—" || none.quantile(0.5) != "—" {
		t.Errorf("empty stats: %q %q", a, b)
	}
}

// TestVerifyBufferedOrder: a buffered client hands out IDs issued at an
// earlier refill, so an ID of it below one answered before it is no
// violation of the high-water mark, while the same answer to a plain call
// is.
func TestVerifyBufferedOrder(t *testing.T) {
	for _, tc := range []struct {
		a    api
		want int
	}{{apiGoBuffered, 0}, {apiGoClient, 1}, {apiHTTPNode, 1}} {
		rec := &recorder{}
		rec.ack(request{start: 0, end: 10 * ms, inc: 0, api: apiHTTPBatch}, -1, []rng{{id(t, 5, 1, 0), 10, 1}}, 10)
		rec.ack(request{start: 20 * ms, end: 30 * ms, inc: -1, node: -1, api: tc.a}, -1, []rng{{id(t, 4, 1, 0), 1, 1}}, 1)
		h := &history{wall0: time.Now(), incs: []*incarnation{{id: 0, n: 1}}}
		h.reqs, h.sf, h.seg = merge([]*recorder{rec})
		n, _, _, vs := checkerOf(h).byWorker(h.sf)
		if n != tc.want {
			t.Errorf("%s: %d violations, want %d: %v", tc.a, n, tc.want, vs)
		}
		if n > 0 && !strings.Contains(vs[0].what, "worker 0/1") {
			t.Errorf("%s: %q", tc.a, vs[0].what)
		}
	}
}

// TestVerifySeenByFaultShowsScheduleLateness: each window's row shows how
// late the fixed-rate schedule woke in it, so that a late answer outside
// every fault, where the schedule was late too, reads as the load
// generator's stall.
func TestVerifySeenByFaultShowsScheduleLateness(t *testing.T) {
	r := &runner{cfg: Config{Rate: 100, Deadline: 100 * time.Millisecond, LeaseTTL: 2 * time.Second}}
	h := &history{faults: []fault{{kind: "kill", node: 0, start: 10_000 * ms, end: 11_000 * ms, recovered: 12_000 * ms}}}
	var late []wake
	for at := int64(0); at < 20_000*ms; at += 10 * ms {
		q := request{start: at, end: at + ms, inc: -1, node: -1, api: apiGoClient}
		w := wake{at: at, late: 100_000} // 0.1 ms
		switch at {
		case 5_000 * ms: // a stall with no fault in progress: the schedule 66 ms late, the call too
			w.late, q.end = 66*ms, at+70*ms+ms
		case 10_500 * ms: // in the kill's window
			w.late = 3 * ms
		}
		h.reqs = append(h.reqs, q)
		late = append(late, w)
	}
	rep := &report{}
	r.seenByFault(rep, h, late)
	if got := rep.seenBy.head[len(rep.seenBy.head)-1]; got != "schedule woke late" {
		t.Fatalf("last column %q", got)
	}
	want := map[string]string{
		"kill":                   "3.00 ms · 3.00 ms", // 201 wake-ups: p99.9 is the max
		"(no fault in progress)": "0.10 ms · 66 ms",
		"(whole run)":            "0.10 ms · 66 ms",
	}
	for _, row := range rep.seenBy.rows {
		w, ok := want[row[0]]
		if !ok {
			t.Fatalf("unexpected row %q", row)
		}
		if got := row[len(row)-1]; got != w {
			t.Errorf("%s: schedule woke late %q, want %q", row[0], got, w)
		}
		delete(want, row[0])
	}
	if len(want) > 0 {
		t.Errorf("rows missing: %v", want)
	}
}

// TestVerifyDarkness: the faults table says how long a node answered
// nothing — the longest run of its plain HTTP client's failed calls that
// began in a fault's window, from the first failed call's schedule to the
// next answered one's — whichever node it was, and not a run that began
// before the window.
func TestVerifyDarkness(t *testing.T) {
	h := &history{}
	fails := map[int8][][2]int64{ // per node, failing [from, to) in ms
		0: {{1_000, 3_000}, {5_000, 8_500}}, // 2 s before the fault's window; 3.5 s in it
		1: {{6_000, 7_000}},
		2: {{9_500, 20_000}}, // to the end of the run, past the window
	}
	for at := int64(0); at < 20_000; at += 10 {
		for node := range int8(3) {
			q := request{start: at * ms, end: at*ms + ms, inc: 0, node: node, api: apiHTTPNode}
			for _, f := range fails[node] {
				if f[0] <= at && at < f[1] {
					q.err = errUnavailable
				}
			}
			h.reqs = append(h.reqs, q)
		}
		h.reqs = append(h.reqs, request{start: at * ms, end: at * ms, inc: -1, node: -1, api: apiGoClient, err: errTimeout})
	}
	d := newDarkness(h)
	for _, c := range []struct {
		lo, hi int64
		want   time.Duration
	}{
		{4_900, 9_000, 3500 * time.Millisecond},
		{0, 4_000, 2 * time.Second},
		{2_000, 4_000, 0},                         // the run began before
		{9_000, 10_000, 10490 * time.Millisecond}, // to the last call, at 19.99 s
		{3_000, 4_900, 0},
	} {
		if got := d.longest(c.lo*ms, c.hi*ms); got != c.want {
			t.Errorf("longest(%d ms, %d ms) = %v, want %v", c.lo, c.hi, got, c.want)
		}
	}

	r := &runner{cfg: Config{Faults: []string{"etcd-pause"}, LeaseTTL: 2 * time.Second}}
	h.faults = []fault{{kind: "etcd-pause", node: -1, start: 4_900 * ms, end: 8_000 * ms, recovered: 9_000 * ms}}
	rep := &report{}
	r.faultTables(rep, h, 0)
	col := slices.Index(rep.faults.head, "longest a node answered nothing")
	if col < 0 {
		t.Fatalf("no column: %v", rep.faults.head)
	}
	if got := rep.faults.rows[0][col]; rep.faults.rows[0][0] != "etcd-pause" || got != "3.5 s" {
		t.Fatalf("row %v: want etcd-pause, 3.5 s", rep.faults.rows[0])
	}
}
