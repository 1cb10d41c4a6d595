package verify

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/flakeid/flakeid/snowflake"
)

// maxDetails bounds the violations described in full per check.
const maxDetails = 10

// violation is one breach of a guarantee, with the requests that show it.
type violation struct {
	what string
	reqs []int32
	ids  []int64
}

// fields splits IDs without a codec per call.
type fields struct {
	timeShift, dcShift, workerShift uint
	dcMask, workerMask              int64
	epochNs, unitNs                 int64
}

func newFields(l snowflake.Layout) fields {
	return fields{
		timeShift:   uint(l.SequenceBits + l.WorkerBits + l.DatacenterBits),
		dcShift:     uint(l.SequenceBits + l.WorkerBits),
		workerShift: uint(l.SequenceBits),
		dcMask:      int64(1)<<l.DatacenterBits - 1,
		workerMask:  int64(1)<<l.WorkerBits - 1,
		epochNs:     l.Epoch.UnixNano(),
		unitNs:      int64(l.TimeUnit),
	}
}

// holder is the (datacenter, worker) pair of an ID.
func (f fields) holder(id int64) [2]int64 {
	return [2]int64{id >> f.dcShift & f.dcMask, id >> f.workerShift & f.workerMask}
}

// timeNs is the Unix time, in ns, of the start of the ID's tick.
func (f fields) timeNs(id int64) int64 { return f.epochNs + (id>>f.timeShift)*f.unitNs }

// acked reports whether a request handed out IDs (an answer with the wrong
// number of IDs still handed them out).
func (q *request) acked() bool { return q.min <= q.max }

// checker holds the derived indexes of a history.
type checker struct {
	h       *history
	f       fields
	minLife int64 // the shortest a lease can live: the renewal period, TTL/4
	ttl     int64 // the lease TTL

	byInc   [][]int32 // acknowledged requests per incarnation
	okPolls [][]poll  // successful status polls per incarnation
}

func newChecker(h *history, l snowflake.Layout, ttl time.Duration) *checker {
	c := &checker{h: h, f: newFields(l), minLife: int64(min(time.Second, ttl/4)), ttl: int64(ttl), byInc: make([][]int32, len(h.incs)), okPolls: make([][]poll, len(h.incs))}
	for i := range h.reqs {
		q := &h.reqs[i]
		if q.acked() && q.inc >= 0 {
			c.byInc[q.inc] = append(c.byInc[q.inc], int32(i))
		}
	}
	for i, inc := range h.incs {
		for _, p := range inc.polls {
			if p.ok {
				c.okPolls[i] = append(c.okPolls[i], p)
			}
		}
	}
	return c
}

// withinAnswers checks that the IDs of each answer, and of the successive
// messages of each stream, increase. spans must be in recording order.
func (c *checker) withinAnswers(spans []span) (n int, vs []violation) {
	for i := 1; i < len(spans); i++ {
		a, b := spans[i-1], spans[i]
		if a.req == b.req && b.first <= a.last() {
			n++
			if len(vs) < maxDetails {
				vs = append(vs, violation{what: fmt.Sprintf("one answer holds %d after %d", b.first, a.last()), reqs: []int32{a.req}, ids: []int64{a.last(), b.first}})
			}
		}
	}
	for i := range c.h.reqs {
		q := &c.h.reqs[i]
		if q.prev < 0 || !q.acked() {
			continue
		}
		if p := &c.h.reqs[q.prev]; p.acked() && q.min <= p.max {
			n++
			if len(vs) < maxDetails {
				vs = append(vs, violation{what: fmt.Sprintf("a stream message starts at %d after a message that ended at %d", q.min, p.max),
					reqs: []int32{q.prev, int32(i)}, ids: []int64{p.max, q.min}})
			}
		}
	}
	return n, vs
}

// duplicates sorts spans by their first ID and counts the IDs acknowledged
// more than once (an ID acknowledged k times counts k−1).
func duplicates(spans []span) (n int64, vs []violation) {
	slices.SortFunc(spans, func(a, b span) int {
		if c := cmp.Compare(a.first, b.first); c != 0 {
			return c
		}
		return cmp.Compare(a.n, b.n)
	})
	maxLast, maxReq := int64(math.MinInt64), int32(-1)
	for _, s := range spans {
		if s.first <= maxLast {
			hi := min(maxLast, s.last())
			n += hi - s.first + 1
			if len(vs) < maxDetails {
				what := fmt.Sprintf("ID %d acknowledged twice", s.first)
				if hi > s.first {
					what = fmt.Sprintf("IDs %d…%d (%d IDs) acknowledged twice", s.first, hi, hi-s.first+1)
				}
				vs = append(vs, violation{what: what, reqs: []int32{maxReq, s.req}, ids: []int64{s.first}})
			}
		}
		if s.last() > maxLast {
			maxLast, maxReq = s.last(), s.req
		}
	}
	return n, vs
}

// order checks, per process, that a request answered after another one's
// answer had arrived holds only larger IDs: for requests A and B of one
// incarnation with A.end < B.start, min(B) > max(A). Overlapping requests
// are not compared (either may have been served first). pairs counts the
// answers that had an earlier one to be compared with.
func (c *checker) order(segment bool) (n int, pairs int64, vs []violation) {
	for _, all := range c.byInc {
		var idx []int32
		for _, i := range all {
			if c.h.reqs[i].api.segment() == segment {
				idx = append(idx, i)
			}
		}
		byEnd := slices.Clone(idx)
		slices.SortFunc(byEnd, func(a, b int32) int { return cmp.Compare(c.h.reqs[a].end, c.h.reqs[b].end) })
		slices.SortFunc(idx, func(a, b int32) int { return cmp.Compare(c.h.reqs[a].start, c.h.reqs[b].start) })
		p, best, bestReq := 0, int64(math.MinInt64), int32(-1)
		for _, b := range idx {
			q := &c.h.reqs[b]
			for p < len(byEnd) && c.h.reqs[byEnd[p]].end < q.start {
				if m := c.h.reqs[byEnd[p]].max; m > best {
					best, bestReq = m, byEnd[p]
				}
				p++
			}
			if bestReq < 0 {
				continue
			}
			pairs++
			if q.min <= best {
				n++
				if len(vs) < maxDetails {
					vs = append(vs, violation{what: fmt.Sprintf("%s answered %d after an earlier answer held %d", c.h.incs[q.inc].name(), q.min, best),
						reqs: []int32{bestReq, b}, ids: []int64{best, q.min}})
				}
			}
		}
	}
	return n, pairs, vs
}

// byWorker checks the high-water mark across processes: for two answers A
// and B holding IDs of one (datacenter, worker) pair, with A's answer
// arrived before B was sent, every ID of that pair in B is larger than
// every one in A, whichever processes answered. A holder's IDs all lie
// below its reservation, and the next holder of the worker id starts at or
// above it, so this holds through every handover; a reissue would break
// it even if the reissued ID was never acknowledged twice. handovers
// counts the answers compared with an earlier answer of another process.
func (c *checker) byWorker(spans []span) (n int, pairs, handovers int64, vs []violation) {
	type part struct {
		start, end, min, max int64
		req, inc             int32
		key                  [2]int64
	}
	var parts []part
	for i := 0; i < len(spans); {
		j := i + 1
		for j < len(spans) && spans[j].req == spans[i].req {
			j++
		}
		q := &c.h.reqs[spans[i].req]
		first := len(parts)
		for _, s := range spans[i:j] {
			for _, id := range [2]int64{s.first, s.last()} {
				k := c.f.holder(id)
				found := false
				for p := first; p < len(parts); p++ {
					if parts[p].key == k {
						parts[p].min, parts[p].max, found = min(parts[p].min, id), max(parts[p].max, id), true
					}
				}
				if !found {
					parts = append(parts, part{start: q.issuedFrom(), end: q.end, min: id, max: id, req: spans[i].req, inc: q.inc, key: k})
				}
			}
		}
		i = j
	}
	slices.SortFunc(parts, func(a, b part) int {
		if c := cmp.Compare(a.key[0], b.key[0]); c != 0 {
			return c
		}
		if c := cmp.Compare(a.key[1], b.key[1]); c != 0 {
			return c
		}
		return cmp.Compare(a.start, b.start)
	})
	for lo := 0; lo < len(parts); {
		hi := lo + 1
		for hi < len(parts) && parts[hi].key == parts[lo].key {
			hi++
		}
		group := parts[lo:hi]
		lo = hi
		byEnd := make([]int32, len(group))
		for i := range byEnd {
			byEnd[i] = int32(i)
		}
		slices.SortFunc(byEnd, func(a, b int32) int { return cmp.Compare(group[a].end, group[b].end) })
		p, best, bestAt := 0, int64(math.MinInt64), -1
		for i := range group {
			q := &group[i]
			for p < len(byEnd) && group[byEnd[p]].end < q.start {
				if m := group[byEnd[p]].max; m > best {
					best, bestAt = m, int(byEnd[p])
				}
				p++
			}
			if bestAt < 0 {
				continue
			}
			pairs++
			b := &group[bestAt]
			if b.inc != q.inc {
				handovers++
			}
			if q.min <= best {
				n++
				if len(vs) < maxDetails {
					who := func(inc int32) string {
						if inc < 0 {
							return "?"
						}
						return c.h.incs[inc].name()
					}
					vs = append(vs, violation{what: fmt.Sprintf("worker %d/%d: %s answered %d after %s had answered %d",
						q.key[0], q.key[1], who(q.inc), q.min, who(b.inc), best), reqs: []int32{b.req, q.req}, ids: []int64{best, q.min}})
				}
			}
		}
	}
	return n, pairs, handovers, vs
}

// pollSpan returns the polls of inc that bracket [start, end]: lo is the
// last one answered before start (-1: none), hi the first one asked after
// end (len: none).
func pollSpan(ps []poll, start, end int64) (lo, hi int) {
	lo = sort.Search(len(ps), func(i int) bool { return ps[i].t1 >= start }) - 1
	hi = sort.Search(len(ps), func(i int) bool { return ps[i].t0 > end })
	return lo, hi
}

// linked reports whether, between the snapshots of two successive polls p
// and q of one process, the process can have used no lease but the ones
// the two polls show. A node changes leases only by acquiring a new one,
// which raises the lease count before the new lease is used; a lease lives
// at least one renewal period (minLife). So with equal counts at most one
// change happened (p may have read its count just after the change), and
// when the polls are less than minLife apart no third lease can have come
// and gone between them.
func (c *checker) linked(p, q poll) bool { return p.leases == q.leases || q.t1-p.t0 < c.minLife }

// workers checks that each Snowflake ID's (datacenter, worker) was held by
// the process that answered it while the request was in flight. The IDs of
// a request are checked against the polls from the last one answered
// before the request was sent to the first one asked after its answer
// arrived, which must be linked pairwise. When that cannot be decided — no
// poll after the request (the process was killed), none before it while
// the process still had its first lease, polls too far apart — a mismatch
// is counted as unverifiable, not as a violation.
func (c *checker) workers(spans []span) (n, unverifiable int, checked int64, vs []violation) {
	var held, allowed [][2]int64 // reused: a request has one or two of each
	for i := 0; i < len(spans); {
		j := i + 1
		for j < len(spans) && spans[j].req == spans[i].req {
			j++
		}
		qi := spans[i].req
		q := &c.h.reqs[qi]
		held = held[:0]
		for _, s := range spans[i:j] {
			held = addKey(held, c.f.holder(s.first))
			held = addKey(held, c.f.holder(s.last()))
		}
		i = j
		if q.inc < 0 {
			continue
		}
		ps := c.okPolls[q.inc]
		lo, hi := pollSpan(ps, q.start, q.end)
		sure := len(ps) > 0 && hi < len(ps)
		from, to := max(lo, 0), min(hi, len(ps)-1)
		if lo < 0 && len(ps) > 0 && ps[0].leases != 1 {
			sure = false
		}
		allowed = allowed[:0]
		for k := from; k <= to && k < len(ps); k++ {
			allowed = addKey(allowed, [2]int64{ps[k].dc, ps[k].worker})
			if k > from && !c.linked(ps[k-1], ps[k]) {
				sure = false
			}
		}
		checked++
		for _, w := range held {
			if slices.Contains(allowed, w) {
				continue
			}
			if !sure {
				unverifiable++
				continue
			}
			n++
			if len(vs) < maxDetails {
				vs = append(vs, violation{what: fmt.Sprintf("%s answered IDs of worker %d/%d, which its status did not show around the request (%v)",
					c.h.incs[q.inc].name(), w[0], w[1], keys(allowed)), reqs: []int32{qi}, ids: []int64{q.min}})
			}
		}
	}
	return n, unverifiable, checked, vs
}

func addKey(set [][2]int64, k [2]int64) [][2]int64 {
	if slices.Contains(set, k) {
		return set
	}
	return append(set, k)
}

func keys(set [][2]int64) []string {
	var out []string
	for _, k := range set {
		out = append(out, fmt.Sprintf("%d/%d", k[0], k[1]))
	}
	slices.Sort(out)
	return out
}

// window is an interval in which one process surely held no lease (or
// surely held one).
type window struct {
	inc    int32
	lo, hi int64
	holder [2]int64
	until  int64 // the reservation's end, of a lost lease's window (Unix ns)
}

// The states a status poll shows a process in, for runs.
const (
	stateHeld  = iota // holding its lease
	stateOnRes        // its lease lost, issuing on the reservation it stored
	stateNone         // issuing nothing: its lease lost and its reservation used up or voided
)

func (p poll) state() int {
	switch {
	case p.held:
		return stateHeld
	case p.onRes:
		return stateOnRes
	}
	return stateNone
}

// runs finds, per process, the intervals between successive polls that
// show the same lease count, the same state, the same worker id and the
// same reservation end, each pair less than minLife apart: a lost lease
// stays lost until a new one (counted) replaces it, its reservation never
// moves, once used up it stays so, and no whole lease can have come and
// gone between two such polls, so the state they show held all along.
// state selects the runs of one state.
func (c *checker) runs(state int) []window {
	var out []window
	for inc, ps := range c.okPolls {
		for a := 0; a < len(ps); {
			b := a
			for b+1 < len(ps) && ps[b+1].state() == ps[a].state() && ps[b+1].leases == ps[a].leases &&
				ps[b+1].dc == ps[a].dc && ps[b+1].worker == ps[a].worker && (ps[a].held || ps[b+1].until == ps[a].until) &&
				ps[b+1].t1-ps[b].t0 < c.minLife {
				b++
			}
			if ps[a].state() == state && b > a && ps[a].t1 < ps[b].t0 {
				out = append(out, window{inc: int32(inc), lo: ps[a].t1, hi: ps[b].t0, holder: [2]int64{ps[a].dc, ps[a].worker}, until: ps[a].until})
			}
			a = b + 1
		}
	}
	return out
}

// inside returns, per window of ws, the Snowflake requests of its process
// sent after the window began and answered before it ended.
func (c *checker) inside(ws []window, visit func(w window, i int32)) {
	perInc := make([][]window, len(c.h.incs))
	for _, w := range ws {
		perInc[w.inc] = append(perInc[w.inc], w)
	}
	for i := range c.h.reqs {
		q := &c.h.reqs[i]
		if q.inc < 0 || q.api.segment() {
			continue
		}
		list := perInc[q.inc]
		k := sort.Search(len(list), func(k int) bool { return list[k].lo >= q.start }) - 1
		if k < 0 || q.end >= list[k].hi {
			continue
		}
		visit(list[k], int32(i))
	}
}

// onReservation checks that a process whose lease was lost issues on the
// reservation it stored and never past it: every Snowflake ID answered to
// a request sent after a poll showed the lease lost, with the process on
// its reservation, and answered before the next such poll of the same
// lease and reservation, is of the lost lease's worker id and lies in a
// tick that starts before the reservation's end. answers counts the
// answers so checked (the IDs the process issued while its coordinator was
// out of reach).
func (c *checker) onReservation(spans []span) (n int, windows int, total time.Duration, answers int, vs []violation) {
	ws := c.runs(stateOnRes)
	for _, w := range ws {
		total += time.Duration(w.hi - w.lo)
	}
	in := make(map[int32]window)
	c.inside(ws, func(w window, i int32) { in[i] = w })
	counted := make(map[int32]bool)
	for _, s := range spans {
		w, ok := in[s.req]
		if !ok {
			continue
		}
		if !counted[s.req] {
			counted[s.req] = true
			answers++
		}
		id := s.first
		if c.f.holder(id) == w.holder && c.f.timeNs(id) < w.until {
			id = s.last()
		}
		if c.f.holder(id) != w.holder || c.f.timeNs(id) >= w.until {
			n++
			if len(vs) < maxDetails {
				vs = append(vs, violation{what: fmt.Sprintf("%s answered ID %d (worker %d/%d, tick of %s) on the reservation of its lost lease of worker %d/%d, which ends at %s",
					c.h.incs[w.inc].name(), id, c.f.holder(id)[0], c.f.holder(id)[1], time.Unix(0, c.f.timeNs(id)).UTC().Format("15:04:05.000"),
					w.holder[0], w.holder[1], time.Unix(0, w.until).UTC().Format("15:04:05.000")), reqs: []int32{s.req}, ids: []int64{id}})
			}
		}
	}
	return n, len(ws), total, answers, vs
}

// leaseLost checks that no Snowflake request sent after a process reported
// its lease lost with no reservation left and answered before it next
// reported the same was answered with IDs. refused counts the requests
// inside those windows that were (rightly) refused.
func (c *checker) leaseLost() (n int, windows int, total time.Duration, refused int, vs []violation) {
	ws := c.runs(stateNone)
	for _, w := range ws {
		total += time.Duration(w.hi - w.lo)
	}
	c.inside(ws, func(w window, i int32) {
		q := &c.h.reqs[i]
		if !q.acked() {
			refused++
			return
		}
		n++
		if len(vs) < maxDetails {
			vs = append(vs, violation{what: fmt.Sprintf("%s answered IDs %d… although it reported its lease lost and no reservation left from %s to %s",
				c.h.incs[q.inc].name(), q.min, at(w.lo), at(w.hi)), reqs: []int32{i}, ids: []int64{q.min}})
		}
	})
	return n, len(ws), total, refused, vs
}

// exclusive checks that no process reported holding a worker id inside an
// interval in which another process surely held it. Two holders are
// expected, and excused, while a coordinator's state is lost: from the
// fault's start until a TTL after its end, the holders of the lost state
// hold their leases until their next renewal finds the loss, while others
// may already have leased the same worker ids from the empty state (to
// issue only past the quarantine floor, which the per-worker-id order
// check verifies).
func (c *checker) exclusive() (n, excused int, vs []violation) {
	byHolder := map[[2]int64][]window{}
	for _, w := range c.runs(stateHeld) {
		byHolder[w.holder] = append(byHolder[w.holder], w)
	}
	seen := map[[2]int32]bool{}
	for inc, ps := range c.okPolls {
		for _, p := range ps {
			if !p.held {
				continue
			}
			for _, w := range byHolder[[2]int64{p.dc, p.worker}] {
				if w.inc == int32(inc) || p.t0 < w.lo || p.t1 > w.hi {
					continue
				}
				if c.stateLost(p.dc, p.t0, p.t1) {
					excused++
					continue
				}
				n++
				if key := [2]int32{w.inc, int32(inc)}; !seen[key] && len(vs) < maxDetails {
					seen[key] = true
					vs = append(vs, violation{what: fmt.Sprintf("%s reported holding worker %d/%d at %s–%s, while %s held it from %s to %s",
						c.h.incs[inc].name(), p.dc, p.worker, at(p.t0), at(p.t1), c.h.incs[w.inc].name(), at(w.lo), at(w.hi))})
				}
			}
		}
	}
	return n, excused, vs
}

// stateLost reports whether [t0, t1] overlaps the time from the start of a
// fault that lost or rolled back the coordinator state of datacenter dc to
// a TTL after its end.
func (c *checker) stateLost(dc, t0, t1 int64) bool {
	for _, f := range c.h.faults {
		if f.lost && f.dc == dc && t1 >= f.start && t0 <= f.end+c.ttl {
			return true
		}
	}
	return false
}

// lossNoticed checks that every process that held a lease in a datacenter
// when its coordinator lost or rolled back its state gave that lease up:
// comparing its last poll before the fault began (at most a second before)
// with its first poll a TTL and a second after the fault ended, its lease
// count grew, or it holds no lease (it has not leased again yet; whether
// the cluster recovered is another check). A holder that kept its lease
// across the loss did not notice it. Processes without both polls (killed,
// the run ending) are skipped.
func (c *checker) lossNoticed() (holders, n int, vs []violation) {
	for _, f := range c.h.faults {
		if !f.lost || f.failed {
			continue
		}
		for inc, ps := range c.okPolls {
			k := sort.Search(len(ps), func(i int) bool { return ps[i].t1 > f.start }) - 1
			if k < 0 || !ps[k].held || ps[k].dc != f.dc || ps[k].t1 < f.start-int64(time.Second) {
				continue
			}
			before := ps[k]
			after := f.end + c.ttl + int64(time.Second)
			j := sort.Search(len(ps), func(i int) bool { return ps[i].t0 >= after })
			if j == len(ps) {
				continue
			}
			holders++
			if ps[j].leases == before.leases && ps[j].held {
				n++
				if len(vs) < maxDetails {
					vs = append(vs, violation{what: fmt.Sprintf("%s held worker %d/%d under lease #%d at %s, when %s began at %s (%s), and still at %s",
						c.h.incs[inc].name(), before.dc, before.worker, before.leases, at(before.t1), f.kind, at(f.start), f.note, at(ps[j].t0))})
				}
			}
		}
	}
	return holders, n, vs
}

// gaps is the largest distance between an ID's time field and the wall
// time of the request that returned it, ahead and behind.
func (c *checker) gaps() (ahead, behind time.Duration, aheadReq, behindReq int32) {
	wall0 := c.h.wall0.UnixNano()
	aheadReq, behindReq = -1, -1
	ahead, behind = math.MinInt64, math.MinInt64
	for i := range c.h.reqs {
		q := &c.h.reqs[i]
		if !q.acked() || q.api.segment() {
			continue
		}
		if d := time.Duration(c.f.timeNs(q.max) - (wall0 + q.end)); d > ahead {
			ahead, aheadReq = d, int32(i)
		}
		if q.api.buffered() || q.api.local() {
			continue // a buffered ID was issued at some earlier refill, a local generator's on a clock of the lease's node: no bound behind
		}
		if d := time.Duration(wall0 + q.start - (c.f.timeNs(q.min) + c.f.unitNs)); d > behind {
			behind, behindReq = d, int32(i)
		}
	}
	return max(ahead, 0), max(behind, 0), aheadReq, behindReq
}

// at formats a run time.
func at(t int64) string { return fmt.Sprintf("+%.3fs", time.Duration(t).Seconds()) }
