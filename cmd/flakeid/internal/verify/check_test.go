package verify

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flakeid/flakeid/snowflake"
	"pgregory.net/rapid"
)

// testLayout: 2 worker bits, no datacenter bits.
var testLayout = func() snowflake.Layout {
	l, err := snowflake.Layout{TimeBits: 41, WorkerBits: 2, SequenceBits: 12}.Normalize()
	if err != nil {
		panic(err)
	}
	return l
}()

func id(t *testing.T, tick, worker, seq int64) int64 {
	t.Helper()
	x, err := testLayout.Compose(snowflake.Parts{Tick: tick, Worker: worker, Sequence: seq})
	if err != nil {
		t.Fatal(err)
	}
	return int64(x)
}

const ms = int64(time.Millisecond)

// hist builds a history of answered requests: each is (inc, start, end,
// first ID, count).
type hreq struct {
	inc         int32
	start, end  int64
	first, n    int64
	failed, seg bool
}

func build(incs int, polls [][]poll, reqs ...hreq) *history {
	h := &history{wall0: time.Now()}
	for i := range incs {
		inc := &incarnation{id: int32(i), node: i, n: 1}
		if i < len(polls) {
			inc.polls = polls[i]
		}
		h.incs = append(h.incs, inc)
	}
	rec := &recorder{}
	for _, r := range reqs {
		q := request{start: r.start, end: r.end, inc: r.inc, node: int8(r.inc), api: apiHTTPBatch}
		if r.seg {
			q.api = apiHTTPSegment
		}
		if r.failed {
			rec.fail(q, errUnavailable)
			continue
		}
		rec.ack(q, -1, []rng{{r.first, r.n, 1}}, r.n)
	}
	h.reqs, h.sf, h.seg = merge([]*recorder{rec})
	return h
}

func checkerOf(h *history) *checker { return newChecker(h, testLayout, 2*time.Second) }

func TestVerifyDuplicates(t *testing.T) {
	h := build(2, nil,
		hreq{inc: 0, start: 0, end: ms, first: 100, n: 10},  // 100…109
		hreq{inc: 1, start: 0, end: ms, first: 105, n: 10},  // 105…114: 5 shared
		hreq{inc: 1, start: 0, end: ms, first: 200, n: 1},   // alone
		hreq{inc: 0, start: 0, end: ms, first: 114, n: 2},   // 114 shared again
		hreq{inc: 0, start: 0, end: ms, first: 50, n: 1000}) // covers all of the above: 17 more
	n, vs := duplicates(h.sf)
	// Extra acknowledgements per ID: 100…104 twice (5), 105…109 three
	// times (10), 110…113 twice (4), 114 three times (2), 115 and 200 twice
	// (1 each).
	if n != 23 {
		t.Fatalf("%d duplicates, want 23", n)
	}
	if len(vs) == 0 || len(vs[0].reqs) != 2 {
		t.Fatalf("violations %+v", vs)
	}
	h = build(1, nil, hreq{first: 1, n: 5, end: ms}, hreq{first: 6, n: 5, end: ms})
	if n, _ := duplicates(h.sf); n != 0 {
		t.Fatalf("adjacent ranges: %d duplicates", n)
	}
}

func TestVerifyOrder(t *testing.T) {
	h := build(2, nil,
		hreq{inc: 0, start: 0, end: 10 * ms, first: 1000, n: 10},
		hreq{inc: 0, start: 5 * ms, end: 30 * ms, first: 500, n: 10},  // overlaps the first: not compared
		hreq{inc: 0, start: 20 * ms, end: 30 * ms, first: 900, n: 10}, // after the first, below it
		hreq{inc: 1, start: 20 * ms, end: 30 * ms, first: 10, n: 10},  // another process: not compared
		hreq{inc: 0, start: 40 * ms, end: 50 * ms, first: 2000, n: 10, seg: true})
	c := checkerOf(h)
	n, pairs, vs := c.order(false)
	if n != 1 || pairs != 1 || len(vs) != 1 || vs[0].ids[1] != 900 {
		t.Fatalf("order: %d violations in %d pairs: %+v", n, pairs, vs)
	}
	if !strings.Contains(vs[0].what, "answered 900 after an earlier answer held 1009") {
		t.Fatalf("violation text: %s", vs[0].what)
	}
	if n, _, _ := c.order(true); n != 0 {
		t.Fatalf("segment order: %d violations", n)
	}
}

func TestVerifyWithinAnswers(t *testing.T) {
	rec := &recorder{}
	q := request{start: 0, end: ms, api: apiHTTPBatch}
	rec.ack(q, -1, []rng{{100, 10, 1}, {105, 3, 1}}, 13) // second range starts inside the first
	m1 := rec.ack(request{api: apiConnectStream, end: ms}, -1, []rng{{500, 10, 1}}, 10)
	rec.ack(request{api: apiConnectStream, end: 2 * ms}, m1, []rng{{505, 10, 1}}, 10) // stream goes back
	h := &history{incs: []*incarnation{{}}}
	h.reqs, h.sf, h.seg = merge([]*recorder{rec})
	n, vs := checkerOf(h).withinAnswers(h.sf)
	if n != 2 || len(vs) != 2 {
		t.Fatalf("%d violations: %+v", n, vs)
	}
}

func TestVerifyMalformed(t *testing.T) {
	rec := &recorder{}
	rec.ack(request{api: apiHTTPBatch}, -1, []rng{{100, 999, 1}}, 1000)
	rec.ack(request{api: apiHTTPBatch}, -1, []rng{{100, 1000, 0}}, 1000) // stride 0 means 1
	rec.ack(request{api: apiHTTPSegment}, -1, []rng{{1, 3, 2}}, 3)       // 1, 3, 5
	if rec.reqs[0].err != errBadAnswer || !rec.reqs[0].acked() {
		t.Fatalf("short answer: %+v", rec.reqs[0])
	}
	if !rec.reqs[1].ok() || rec.reqs[1].max != 1099 {
		t.Fatalf("stride 0: %+v", rec.reqs[1])
	}
	if len(rec.seg) != 3 || rec.seg[2].first != 5 || rec.reqs[2].max != 5 {
		t.Fatalf("strided segment: %+v %+v", rec.seg, rec.reqs[2])
	}
}

// pollsAt makes polls 100 ms apart from t (ms), each answered 1 ms later.
func pollsAt(from int64, states ...poll) []poll {
	var ps []poll
	for i, p := range states {
		p.ok = true
		p.t0 = (from + int64(i)*100) * ms
		p.t1 = p.t0 + ms
		ps = append(ps, p)
	}
	return ps
}

func TestVerifyWorkers(t *testing.T) {
	held := func(w, leases int64) poll { return poll{held: true, worker: w, leases: leases} }
	polls := [][]poll{pollsAt(0, held(1, 1), held(1, 1), held(2, 2), held(2, 2))} // worker 1, then 2
	h := build(1, polls,
		hreq{inc: 0, start: 50 * ms, end: 60 * ms, first: id(t, 10, 1, 0), n: 5},   // ok
		hreq{inc: 0, start: 150 * ms, end: 160 * ms, first: id(t, 10, 2, 0), n: 5}, // the change: either is fine
		hreq{inc: 0, start: 250 * ms, end: 260 * ms, first: id(t, 11, 1, 0), n: 5}, // worker 1 after the change
		hreq{inc: 0, start: 250 * ms, end: 260 * ms, first: id(t, 11, 3, 0), n: 5}, // never held
		hreq{inc: 0, start: 350 * ms, end: 360 * ms, first: id(t, 12, 3, 0), n: 5}) // after the last poll: cannot tell
	n, unverifiable, checked, vs := checkerOf(h).workers(h.sf)
	if n != 2 || unverifiable != 1 || checked != 5 || len(vs) != 2 {
		t.Fatalf("%d violations, %d unverifiable, %d checked: %+v", n, unverifiable, checked, vs)
	}

	// Polls 1 s apart with the lease count jumping: a third lease may have
	// come and gone between them, so a mismatch is not a violation.
	polls = [][]poll{{
		{ok: true, t0: 0, t1: ms, held: true, worker: 1, leases: 1},
		{ok: true, t0: 1000 * ms, t1: 1001 * ms, held: true, worker: 2, leases: 3},
	}}
	h = build(1, polls, hreq{inc: 0, start: 500 * ms, end: 510 * ms, first: id(t, 10, 3, 0), n: 1})
	if n, unverifiable, _, _ := checkerOf(h).workers(h.sf); n != 0 || unverifiable != 1 {
		t.Fatalf("far polls: %d violations, %d unverifiable", n, unverifiable)
	}
}

func TestVerifyLeaseLost(t *testing.T) {
	lost := poll{held: false, worker: 1, leases: 1}
	polls := [][]poll{pollsAt(0, poll{held: true, worker: 1, leases: 1}, lost, lost, lost, poll{held: true, worker: 2, leases: 2})}
	// Lost from the answer of the poll at 100 ms (101 ms) to the poll at 300 ms.
	h := build(1, polls,
		hreq{inc: 0, start: 90 * ms, end: 120 * ms, first: 10, n: 1},            // sent before the loss was seen
		hreq{inc: 0, start: 150 * ms, end: 160 * ms, first: 20, n: 1},           // inside: a violation
		hreq{inc: 0, start: 150 * ms, end: 160 * ms, failed: true},              // inside, refused: right
		hreq{inc: 0, start: 250 * ms, end: 350 * ms, first: 30, n: 1},           // ends after the last lost poll
		hreq{inc: 0, start: 150 * ms, end: 160 * ms, first: 1, n: 1, seg: true}) // segments need no lease
	n, windows, total, refused, vs := checkerOf(h).leaseLost()
	if n != 1 || windows != 1 || refused != 1 || total != 199*time.Millisecond || vs[0].ids[0] != 20 {
		t.Fatalf("%d violations in %d windows (%v), %d refused: %+v", n, windows, total, refused, vs)
	}
}

// TestVerifyOnReservation: while a process reports its lease lost and its
// reservation running (until the tick of 1 s after the epoch, here), the
// IDs it answers must be of the lost lease's worker id and in ticks before
// the reservation's end; once it reports the reservation used up, it must
// answer nothing.
func TestVerifyOnReservation(t *testing.T) {
	until := testLayout.Epoch.Add(time.Second).UnixNano()
	onRes := poll{worker: 1, leases: 1, onRes: true, until: until}
	none := poll{worker: 1, leases: 1, until: until}
	polls := [][]poll{pollsAt(0, poll{held: true, worker: 1, leases: 1}, onRes, onRes, onRes, none, none, none)}
	h := build(1, polls,
		hreq{inc: 0, start: 150 * ms, end: 160 * ms, first: id(t, 999, 1, 0), n: 3},  // the last tick before the end: right
		hreq{inc: 0, start: 160 * ms, end: 170 * ms, first: id(t, 1000, 1, 0), n: 1}, // the reservation's end: a violation
		hreq{inc: 0, start: 170 * ms, end: 180 * ms, first: id(t, 500, 2, 0), n: 1},  // another worker id: a violation
		hreq{inc: 0, start: 250 * ms, end: 350 * ms, first: id(t, 1001, 1, 0), n: 1}, // spans the change of state: not judged
		hreq{inc: 0, start: 450 * ms, end: 460 * ms, first: id(t, 998, 1, 0), n: 1},  // reservation used up: a violation
		hreq{inc: 0, start: 460 * ms, end: 470 * ms, failed: true})                   // refused then: right
	c := checkerOf(h)
	n, windows, total, answers, vs := c.onReservation(h.sf)
	if n != 2 || windows != 1 || answers != 3 || total != 199*time.Millisecond || len(vs) != 2 ||
		!strings.Contains(vs[0].what, "which ends at") {
		t.Fatalf("on the reservation: %d violations in %d windows (%v), %d answers: %+v", n, windows, total, answers, vs)
	}
	ids := []int64{vs[0].ids[0], vs[1].ids[0]}
	slices.Sort(ids)
	if want := []int64{id(t, 500, 2, 0), id(t, 1000, 1, 0)}; !slices.Equal(ids, want) {
		t.Fatalf("violations for %v, want %v", ids, want)
	}
	if n, windows, _, refused, vs := c.leaseLost(); n != 1 || windows != 1 || refused != 1 || vs[0].ids[0] != id(t, 998, 1, 0) {
		t.Fatalf("reservation used up: %d violations in %d windows, %d refused: %+v", n, windows, refused, vs)
	}
}

func TestVerifyExclusive(t *testing.T) {
	h := func(w, leases int64) poll { return poll{held: true, worker: w, leases: leases} }
	polls := [][]poll{
		pollsAt(0, h(1, 1), h(1, 1), h(1, 1), h(1, 1)),
		pollsAt(150, h(1, 1)),                   // inside process 0's run: two holders
		pollsAt(500, h(1, 1), h(1, 1)),          // after it: a handover
		pollsAt(50, h(2, 1), h(2, 1)),           // another worker id
		pollsAt(10, poll{worker: 1, leases: 1}), // not held
	}
	hist := build(len(polls), polls)
	n, excused, vs := checkerOf(hist).exclusive()
	if n != 1 || excused != 0 || len(vs) != 1 || !strings.Contains(vs[0].what, "n2.1 reported holding worker 0/1") {
		t.Fatalf("%d violations, %d excused: %+v", n, excused, vs)
	}
	// The same while the coordinator of datacenter 0 had lost its state: the
	// holder of the lost state holds until its next renewal, beside the
	// new one. A loss in another datacenter, or one that ended more than a
	// TTL before, excuses nothing.
	hist.faults = []fault{{kind: "redis-keys-deleted", lost: true, dc: 1, start: 100 * ms, end: 101 * ms},
		{kind: "sql-rollback", lost: true, dc: 0, start: 10 * ms, end: 11 * ms}}
	if n, excused, _ := checkerOf(hist).exclusive(); n != 0 || excused != 1 {
		t.Fatalf("during a loss: %d violations, %d excused", n, excused)
	}
	hist.faults[1].start, hist.faults[1].end = -3000*ms, -2000*ms
	if n, excused, _ := checkerOf(hist).exclusive(); n != 1 || excused != 0 {
		t.Fatalf("after a loss: %d violations, %d excused", n, excused)
	}
}

func TestVerifyByWorker(t *testing.T) {
	h := build(3, nil,
		hreq{inc: 0, start: 0, end: 10 * ms, first: id(t, 100, 1, 0), n: 10},
		hreq{inc: 1, start: 20 * ms, end: 30 * ms, first: id(t, 200, 1, 0), n: 10}, // handover, above: fine
		hreq{inc: 2, start: 40 * ms, end: 50 * ms, first: id(t, 150, 1, 0), n: 10}, // below the last holder: a reissue
		hreq{inc: 2, start: 40 * ms, end: 50 * ms, first: id(t, 50, 2, 0), n: 10})  // another worker id
	n, pairs, handovers, vs := checkerOf(h).byWorker(h.sf)
	if n != 1 || pairs != 2 || handovers != 2 || len(vs) != 1 || !strings.Contains(vs[0].what, "n3.1 answered") {
		t.Fatalf("%d violations in %d pairs, %d handovers: %+v", n, pairs, handovers, vs)
	}
}

func TestVerifyGaps(t *testing.T) {
	h := build(1, nil, hreq{inc: 0, start: 0, end: ms, first: id(t, 1, 0, 0), n: 1})
	h.wall0 = testLayout.Epoch.Add(3 * time.Second) // the ID is ~3 s behind its request
	ahead, behind, _, _ := checkerOf(h).gaps()
	if ahead != 0 || behind < 2990*time.Millisecond || behind > 3*time.Second {
		t.Fatalf("ahead %v, behind %v", ahead, behind)
	}
}

func TestVerifyTable(t *testing.T) {
	var b strings.Builder
	tb := table{head: []string{"a", "long header"}}
	tb.add("x", "y")
	tb.write(&b)
	want := "| a | long header |\n| - | ----------- |\n| x | y           |\n"
	if b.String() != want {
		t.Fatalf("table:\n%s", b.String())
	}
}

func TestVerifyTakeFitting(t *testing.T) {
	queue := []string{"etcd-pause", "kill", "clock-back", "kill"}
	short := func(k string) bool { return k != "etcd-pause" }
	var got []string
	for {
		k, rest, ok := takeFitting(queue, short)
		if !ok {
			break
		}
		got, queue = append(got, k), rest
	}
	if strings.Join(got, ",") != "kill,clock-back,kill" || strings.Join(queue, ",") != "etcd-pause" {
		t.Fatalf("took %v, left %v", got, queue)
	}
}

// TestVerifyTakeRequired: the faults a run must inject go in queue order
// while there is time for all of them at their estimates, and longest first
// once there is not, so a long one is not crowded out at the end (a CI run
// lost truncated-state so: queued last, 17 s needed at 35 − 18 s).
func TestVerifyTakeRequired(t *testing.T) {
	ests := map[string]time.Duration{"config-typo": 3 * time.Second, "other-layout": 4 * time.Second, "truncated-state": 12 * time.Second}
	est := func(k string) time.Duration { return ests[k] }
	queue := []string{"config-typo", "other-layout", "truncated-state"}
	for _, tc := range []struct {
		left time.Duration
		want string
	}{
		{40 * time.Second, "config-typo"},     // 5 + 6 + 7 + 15 = 33 s needed: queue order
		{26 * time.Second, "truncated-state"}, // short of 33 s: the longest that fits
		{10 * time.Second, "other-layout"},    // truncated-state needs 17 s
		{7 * time.Second, ""},                 // none fits
	} {
		k, rest, ok := takeRequired(slices.Clone(queue), tc.left, est)
		if k != tc.want || ok != (tc.want != "") || ok && len(rest) != 2 || !ok && len(rest) != 3 {
			t.Errorf("left %v: took %q (%v), left %v; want %q", tc.left, k, ok, rest, tc.want)
		}
	}
	// Whatever the faults really take (at most their estimates) and the
	// pauses (1–3 s), the schedule injects every fault whenever taking them
	// longest first would have: the best order for deadlines on the start.
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.IntRange(1, 6).Draw(rt, "n")
		queue := make([]string, n)
		ests, took := map[string]time.Duration{}, map[string]time.Duration{}
		for i := range queue {
			queue[i] = fmt.Sprintf("f%d", i)
			ests[queue[i]] = time.Duration(rapid.IntRange(1, 15).Draw(rt, "est")) * time.Second
			took[queue[i]] = time.Duration(rapid.Int64Range(0, int64(ests[queue[i]])).Draw(rt, "took"))
		}
		pauses := make([]time.Duration, n)
		for i := range pauses {
			pauses[i] = time.Duration(rapid.Int64Range(int64(time.Second), int64(maxFaultPause)).Draw(rt, "pause"))
		}
		run := time.Duration(rapid.IntRange(5, 120).Draw(rt, "run")) * time.Second
		est := func(k string) time.Duration { return ests[k] }
		schedule := func(next func(q []string, left time.Duration) (string, []string, bool)) int {
			q, at, done := slices.Clone(queue), time.Duration(0), 0
			for len(q) > 0 {
				k, rest, ok := next(q, run-at)
				if !ok {
					break
				}
				q, at, done = rest, at+took[k]+pauses[done], done+1
			}
			return done
		}
		longestFirst := func(q []string, left time.Duration) (string, []string, bool) {
			slices.SortStableFunc(q, func(a, b string) int { return int(ests[b] - ests[a]) })
			if ests[q[0]]+quiet > left {
				return "", q, false
			}
			return q[0], q[1:], true
		}
		got := schedule(func(q []string, left time.Duration) (string, []string, bool) { return takeRequired(q, left, est) })
		if best := schedule(longestFirst); best == n && got < n {
			rt.Fatalf("took %d of %d faults; longest first takes all", got, n)
		}
	})
}

// TestVerifyRunExtends: a run at least as long as its required faults'
// estimates (minRun, which validate demands) injects them all even when
// each takes up to 1.5 times its estimate, as recoveries do on a loaded
// machine, by moving its end later within its bound (half the run), as the
// nemesis does before each required fault (CI lost etcd-partition once so:
// a clock-back recovery took 13.7 s, estimated at 2).
func TestVerifyRunExtends(t *testing.T) {
	// scheduled is how many of queue's faults a run of length run injects
	// when each takes took and the pause after the i-th is pauses[i],
	// with or without the extension.
	scheduled := func(queue []string, ests, took map[string]time.Duration, pauses []time.Duration, run time.Duration, extend bool) int {
		est := func(k string) time.Duration { return ests[k] }
		q, at, done := slices.Clone(queue), int64(0), 0
		end, hardEnd := int64(run), int64(run+run/2)
		for len(q) > 0 {
			k, rest, ok := takeRequired(q, time.Duration(end-at), est)
			if !ok && extend { // as the nemesis: only when none fits
				end = extended(end, hardEnd, at, est(longest(q, est))+quiet)
				k, rest, ok = takeRequired(q, time.Duration(end-at), est)
			}
			if !ok {
				break
			}
			q, at, done = rest, at+int64(took[k]+pauses[done]), done+1
		}
		return done
	}
	// Three faults estimated at 10 s that take 15 s each, the longest
	// pauses, and the shortest run validate allows: the third no longer
	// fits without the extension.
	queue := []string{"a", "b", "c"}
	ests := map[string]time.Duration{"a": 10 * time.Second, "b": 10 * time.Second, "c": 10 * time.Second}
	took := map[string]time.Duration{"a": 15 * time.Second, "b": 15 * time.Second, "c": 15 * time.Second}
	pauses := []time.Duration{maxFaultPause, maxFaultPause, maxFaultPause}
	run := queueNeed(queue, func(k string) time.Duration { return ests[k] })
	if got := scheduled(queue, ests, took, pauses, run, false); got != 2 {
		t.Errorf("without the extension %d of 3 faults fit, want 2 (the schedule does not test the extension)", got)
	}
	if got := scheduled(queue, ests, took, pauses, run, true); got != 3 {
		t.Errorf("with the extension %d of 3 faults fit, want 3", got)
	}
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.IntRange(1, 6).Draw(rt, "n")
		queue := make([]string, n)
		ests, took := map[string]time.Duration{}, map[string]time.Duration{}
		for i := range queue {
			queue[i] = fmt.Sprintf("f%d", i)
			ests[queue[i]] = time.Duration(rapid.IntRange(1, 15).Draw(rt, "est")) * time.Second
			took[queue[i]] = time.Duration(rapid.Int64Range(0, int64(ests[queue[i]])*3/2).Draw(rt, "took"))
		}
		pauses := make([]time.Duration, n)
		for i := range pauses {
			pauses[i] = time.Duration(rapid.Int64Range(int64(time.Second), int64(maxFaultPause)).Draw(rt, "pause"))
		}
		run := queueNeed(queue, func(k string) time.Duration { return ests[k] }) + time.Duration(rapid.Int64Range(0, int64(30*time.Second)).Draw(rt, "spare"))
		if got := scheduled(queue, ests, took, pauses, run, true); got < n {
			rt.Fatalf("took %d of %d faults in a run of %v extended by up to half", got, n, run)
		}
	})
	// extended never moves the end earlier, nor past the bound.
	for _, tc := range []struct {
		end, hard, now int64
		d              time.Duration
		want           int64
	}{
		{end: 100, hard: 150, now: 90, d: 5, want: 100},
		{end: 100, hard: 150, now: 90, d: 20, want: 110},
		{end: 100, hard: 150, now: 90, d: 100, want: 150},
		{end: 160, hard: 150, now: 90, d: 100, want: 160},
	} {
		if got := extended(tc.end, tc.hard, tc.now, tc.d); got != tc.want {
			t.Errorf("extended(%d, %d, %d, %d) = %d, want %d", tc.end, tc.hard, tc.now, tc.d, got, tc.want)
		}
	}
}

func TestVerifyLossNoticed(t *testing.T) {
	p := func(t0 int64, held bool, leases int64) poll {
		return poll{ok: true, t0: t0 * ms, t1: t0*ms + ms, held: held, worker: 1, leases: leases}
	}
	polls := [][]poll{
		{p(900, true, 1), p(4500, true, 2)},                   // gave its lease up: right
		{p(950, true, 1), p(2000, true, 1), p(4600, true, 1)}, // kept it: a violation
		{p(950, true, 1), p(4550, false, 1)},                  // gave it up, not leased again yet: right
		{p(900, false, 1), p(4500, true, 1)},                  // held nothing at the loss
		{p(900, true, 1)},                                     // killed: no poll after
		{p(-500, true, 1), p(4500, true, 1)},                  // last poll too long before the loss
	}
	h := build(len(polls), polls)
	h.faults = []fault{{kind: "redis-keys-deleted", lost: true, dc: 0, start: 1000 * ms, end: 1001 * ms, note: "keys deleted"},
		{kind: "sql-rollback", lost: true, dc: 1, start: 1000 * ms, end: 1001 * ms}, // another datacenter
		{kind: "kill", start: 1000 * ms, end: 1001 * ms}}                            // no loss
	holders, n, vs := checkerOf(h).lossNoticed()
	if holders != 3 || n != 1 || len(vs) != 1 || !strings.Contains(vs[0].what, "n2.1 held worker 0/1 under lease #1 at +0.951s, when redis-keys-deleted began at +1.000s") {
		t.Fatalf("%d holders, %d kept their lease: %+v", holders, n, vs)
	}
}
