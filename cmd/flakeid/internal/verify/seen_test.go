package verify

import (
	"context"
	"math"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// TestVerifyPacedCorrectsOmission: a fixed-rate client whose service stalls
// for 300 ms still makes one call per period, and the calls the schedule
// owed during the stall carry the stall in their latency (wrk2's
// correction), instead of not being made; the calls owed when the run ends
// behind schedule are recorded as timed out.
func TestVerifyPacedCorrectsOmission(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &runner{cfg: Config{Rate: 100, Deadline: 100 * time.Millisecond}, t0: time.Now()}
		rec := &recorder{}
		late := &lateness{}
		ctx, cancel := context.WithCancel(t.Context())
		calls := 0
		call := func(ctx context.Context, q request) {
			calls++
			if calls == 50 { // at 0.49 s: a 300 ms stall
				time.Sleep(300 * time.Millisecond)
			}
			q.end = r.now()
			rec.ack(q, -1, []rng{{int64(calls), 1, 1}}, 1)
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			r.paced(ctx, apiGoClient, rec, late, 0, call)
		}()
		time.Sleep(2 * time.Second)
		cancel()
		<-done
		if n := len(rec.reqs); n < 199 || n > 201 {
			t.Fatalf("%d calls recorded in 2 s at 100/s, want 200", n)
		}
		var slow, over []time.Duration
		for _, q := range rec.reqs {
			d := time.Duration(q.end - q.start)
			if d > 0 {
				slow = append(slow, d)
			}
			if d > r.cfg.Deadline {
				over = append(over, d)
			}
		}
		// The stalled call took 300 ms; the 29 owed behind it were sent at
		// once when it returned, 290 ms … 10 ms after their time (the 30th
		// was due as it returned).
		if len(slow) != 30 || slow[0] != 300*time.Millisecond || slow[1] != 290*time.Millisecond || slow[29] != 10*time.Millisecond {
			t.Fatalf("latencies after the stall: %v", slow)
		}
		if len(over) != 20 {
			t.Errorf("%d calls over the 100 ms deadline, want 20 (the stalled one and 19 owed): %v", len(over), over)
		}
		if len(late.wakes) == 0 {
			t.Error("no wake-up recorded")
		}
		for _, w := range late.wakes {
			if w.late != 0 {
				t.Fatalf("a wake-up %v late under a fake clock", time.Duration(w.late))
			}
		}
	})
}

// TestVerifyPacedEndsBehind: a call still stalled when the run ends leaves
// the calls the schedule owed recorded as timed out, not forgotten.
func TestVerifyPacedEndsBehind(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &runner{cfg: Config{Rate: 100, Deadline: 100 * time.Millisecond}, t0: time.Now()}
		rec := &recorder{}
		ctx, cancel := context.WithCancel(t.Context())
		call := func(ctx context.Context, q request) {
			if q.start >= int64(500*time.Millisecond) {
				<-ctx.Done() // stalls until the run ends, and is cut short
				return
			}
			q.end = r.now()
			rec.ack(q, -1, []rng{{q.start, 1, 1}}, 1)
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			r.paced(ctx, apiGoClient, rec, &lateness{}, 0, call)
		}()
		time.Sleep(time.Second)
		cancel()
		<-done
		var ok, timedOut int
		for _, q := range rec.reqs {
			switch q.err {
			case errNone:
				ok++
			case errTimeout:
				timedOut++
			}
		}
		// 50 answered before the stall; of the 50 owed since (0.51 … 1.0 s),
		// those whose deadline passed by 1 s are timed out: 0.51 … 0.90.
		if ok != 50 || timedOut != 40 {
			t.Fatalf("answered %d, timed out %d; want 50 and 40", ok, timedOut)
		}
	})
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
		s.add(&q, dl)
	}
	slow := request{start: 0, end: int64(150 * time.Millisecond)}
	s.add(&slow, dl)
	s.done()
	if s.within != 999 {
		t.Fatalf("within %d, want 999", s.within)
	}
	if got := s.quantile(1); got != "failed" {
		t.Errorf("max %q, want failed", got)
	}
	if got := s.quantile(0.5); got != "50 ms" {
		t.Errorf("p50 %q", got)
	}
	if got := s.quantile(0.999); got != "150 ms" {
		t.Errorf("p99.9 %q, want the late answer", got)
	}
	share, n9 := s.share()
	if share != "99.800%" || n9 != "2.7" {
		t.Errorf("share %q, nines %q", share, n9)
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
