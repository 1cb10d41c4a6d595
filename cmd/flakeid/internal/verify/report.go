package verify

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/flakeid/flakeid/internal/humanize"
)

// table is a Markdown table.
type table struct {
	head []string
	rows [][]string
}

func (t *table) add(cells ...string) { t.rows = append(t.rows, cells) }

func (t *table) write(w io.Writer) {
	width := make([]int, len(t.head))
	for i, h := range t.head {
		width[i] = len([]rune(h))
	}
	for _, r := range t.rows {
		for i, c := range r {
			width[i] = max(width[i], len([]rune(c)))
		}
	}
	line := func(cells []string) {
		var b strings.Builder
		b.WriteString("|")
		for i, c := range cells {
			fmt.Fprintf(&b, " %s%s |", c, strings.Repeat(" ", width[i]-len([]rune(c))))
		}
		fmt.Fprintln(w, b.String())
	}
	line(t.head)
	sep := make([]string, len(t.head))
	for i := range sep {
		sep[i] = strings.Repeat("-", width[i])
	}
	line(sep)
	for _, r := range t.rows {
		line(r)
	}
}

func pct(part, all int64) string {
	if all == 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f%%", 100*float64(part)/float64(all))
}

func secs(d time.Duration) string { return fmt.Sprintf("%.1f s", d.Seconds()) }

// report is the outcome of the checks.
type report struct {
	title    []string
	load     table
	seen     table // latency and availability per API
	seenBy   table // the fixed-rate clients' per fault kind
	locals   table // the local generators of the languages (langs.go)
	faults   table
	checks   table
	details  []string
	errors   table
	events   table
	failed   bool
	deadline time.Duration
}

func (rep *report) write(w io.Writer) {
	for _, l := range rep.title {
		fmt.Fprintln(w, l)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Checks:")
	fmt.Fprintln(w)
	rep.checks.write(w)
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Load:")
	fmt.Fprintln(w)
	rep.load.write(w)
	for _, sec := range []struct {
		title string
		t     *table
	}{
		{fmt.Sprintf("What clients saw (answered within %v; the fixed-rate clients' latency counts from the moment their schedule meant to send, a failed call as never answered; \"less the generator's stalls\" leaves out of a call's time what fell in the load generator's own stalls, when a fixed-rate schedule was overdue in waking; every ID they got is in the checks above):", rep.deadline), &rep.seen},
		{fmt.Sprintf("What the fixed-rate clients saw per fault kind (share answered within %v · the same less the load generator's stalls · p99.9), in the same windows as below, and how late their own schedule woke (p99.9 · max: the load generator's stalls, which no server caused):", rep.deadline), &rep.seenBy},
		{"Local generators (a driver process per language making IDs in-process under a worker-id lease from the main group, every ID checked with the rest):", &rep.locals},
		{"Faults (availability counts the requests sent from the fault's start until every node answered again, at least 2 s; a node answered nothing while the calls of its plain HTTP client failed in a row, from the first failed call's schedule to the next answered one's, for a run that began in the window):", &rep.faults},
		{"Fault timeline:", &rep.events},
		{"Most frequent errors (digits replaced by #):", &rep.errors},
	} {
		if len(sec.t.rows) > 0 {
			fmt.Fprintf(w, "\n%s\n\n", sec.title)
			sec.t.write(w)
		}
	}
	if len(rep.details) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "Violations:")
		for _, d := range rep.details {
			fmt.Fprintln(w, d)
		}
	}
	fmt.Fprintln(w)
	if rep.failed {
		fmt.Fprintln(w, "RESULT: FAIL")
	} else {
		fmt.Fprintln(w, "RESULT: PASS")
	}
}

// check runs every check on the history and builds the report.
func (r *runner) check(h *history, loadStart, loadEnd int64, late []wake) *report {
	rep := &report{}
	c := newChecker(h, r.layout, r.cfg.LeaseTTL)
	if len(r.cfg.Targets) > 0 {
		rep.title = append(rep.title, fmt.Sprintf("flakeid verify: %d target servers (%s), %d clients, %s, no faults injected",
			len(r.cfg.Targets), strings.Join(r.cfg.Targets, ", "), r.cfg.Clients, time.Duration(loadEnd-loadStart).Round(100*time.Millisecond)))
	} else {
		rep.title = append(rep.title, fmt.Sprintf("flakeid verify: %s; %d processes in all, lease TTL %v, segments in PostgreSQL; %d clients, %s, seed %d",
			r.cfg.describeGroups(), len(h.incs), r.cfg.LeaseTTL, r.cfg.Clients, time.Duration(loadEnd-loadStart).Round(100*time.Millisecond), r.cfg.Seed))
	}
	rep.title = append(rep.title, "layout "+r.layout.String())

	rep.checks.head = []string{"check", "result", "verdict"}
	verdict := func(bad bool) string {
		if bad {
			rep.failed = true
			return "**FAIL**"
		}
		return "ok"
	}
	var sfIDs, segIDs int64
	for _, s := range h.sf {
		sfIDs += int64(s.n)
	}
	for _, s := range h.seg {
		segIDs += int64(s.n)
	}
	var sfAnswers, segAnswers int64
	for i := range h.reqs {
		if h.reqs[i].acked() {
			if h.reqs[i].api.segment() {
				segAnswers++
			} else {
				sfAnswers++
			}
		}
	}
	rep.checks.add("Snowflake IDs acknowledged", fmt.Sprintf("%s in %s answers", humanize.Thousands(sfIDs), humanize.Thousands(sfAnswers)), "")
	if r.segments {
		rep.checks.add(fmt.Sprintf("segment IDs acknowledged (tag %q)", r.cfg.Tag), fmt.Sprintf("%s in %s answers", humanize.Thousands(segIDs), humanize.Thousands(segAnswers)), "")
	}

	// Order within each answer and stream, before the spans are sorted.
	n1, v1 := c.withinAnswers(h.sf)
	n2, v2 := c.withinAnswers(h.seg)
	rep.checks.add("IDs increase within each answer and stream", fmt.Sprintf("%s violations", humanize.Thousands(int64(n1+n2))), verdict(n1+n2 > 0))
	rep.detail(c, "IDs out of order within an answer", append(v1, v2...), n1+n2)

	nw, unv, checked, vw := c.workers(h.sf)
	rep.checks.add("each ID's worker id held by the process that answered", fmt.Sprintf("%s violations in %s answers (%s unverifiable)", humanize.Thousands(int64(nw)), humanize.Thousands(checked), humanize.Thousands(int64(unv))), verdict(nw > 0))
	rep.detail(c, "IDs of a worker id the process did not hold", vw, nw)

	nl, windows, lostFor, refused, vl := c.leaseLost()
	rep.checks.add("no ID while the process's lease was lost and its reservation used up", fmt.Sprintf("%s answers in %d such windows (%s in all; %s requests refused in them)",
		humanize.Thousands(int64(nl)), windows, secs(lostFor), humanize.Thousands(int64(refused))), verdict(nl > 0))
	rep.detail(c, "IDs issued while the lease was lost and no reservation left", vl, nl)

	nr, rwindows, resFor, resAnswers, vr := c.onReservation(h.sf)
	rep.checks.add("a lost lease's IDs lie within its reservation and worker id", fmt.Sprintf("%s violations in %s answers given on the reservation in %d windows (%s in all)",
		humanize.Thousands(int64(nr)), humanize.Thousands(int64(resAnswers)), rwindows, secs(resFor)), verdict(nr > 0))
	rep.detail(c, "IDs past a lost lease's reservation", vr, nr)

	ne, excused, ve := c.exclusive()
	res := fmt.Sprintf("%s violations", humanize.Thousands(int64(ne)))
	if excused > 0 {
		res += fmt.Sprintf(" (%s polls of a second holder while a coordinator's state was lost, as expected)", humanize.Thousands(int64(excused)))
	}
	rep.checks.add("one process holds a worker id at a time (status polls)", res, verdict(ne > 0))
	rep.detail(c, "a worker id held by two processes", ve, ne)

	if slices.ContainsFunc(r.cfg.Faults, func(k string) bool { return kindInfo[k].lost }) {
		holders, nn, vn := c.lossNoticed()
		lost := 0
		for _, f := range h.faults {
			if f.lost && !f.failed {
				lost++
			}
		}
		rep.checks.add("every holder of a coordinator state that was lost or rolled back gave its lease up",
			fmt.Sprintf("%s of %s holders in %d faults", humanize.Thousands(int64(holders-nn)), humanize.Thousands(int64(holders)), lost), verdict(nn > 0))
		rep.detail(c, "holders that kept their lease across a loss of the coordinator's state", vn, nn)
	}

	no, pairs, vo := c.order(false)
	rep.checks.add("per process, Snowflake IDs increase across non-overlapping requests", fmt.Sprintf("%s violations in %s answers that followed another", humanize.Thousands(int64(no)), humanize.Thousands(pairs)), verdict(no > 0))
	rep.detail(c, "Snowflake IDs going backwards in one process", vo, no)
	if r.segments {
		nso, spairs, vso := c.order(true)
		rep.checks.add("per process, segment IDs increase across non-overlapping requests", fmt.Sprintf("%s violations in %s answers that followed another", humanize.Thousands(int64(nso)), humanize.Thousands(spairs)), verdict(nso > 0))
		rep.detail(c, "segment IDs going backwards in one process", vso, nso)
	}

	nh, hpairs, handovers, vh := c.byWorker(h.sf)
	rep.checks.add("per worker id, IDs increase across non-overlapping requests, whichever process answered (the high-water mark)",
		fmt.Sprintf("%s violations in %s answers that followed another, %s of them one of another process", humanize.Thousands(int64(nh)), humanize.Thousands(hpairs), humanize.Thousands(handovers)), verdict(nh > 0))
	rep.detail(c, "a worker id's IDs going backwards across processes", vh, nh)

	nd, vd := duplicates(h.sf)
	rep.checks.add("duplicate Snowflake IDs", humanize.Thousands(nd), verdict(nd > 0))
	rep.detail(c, "duplicate Snowflake IDs", vd, int(min(nd, 1<<31-1)))
	if r.segments {
		nsd, vsd := duplicates(h.seg)
		rep.checks.add(fmt.Sprintf("duplicate segment IDs (tag %q)", r.cfg.Tag), humanize.Thousands(nsd), verdict(nsd > 0))
		rep.detail(c, "duplicate segment IDs", vsd, int(min(nsd, 1<<31-1)))
	}

	var malformed int64
	for i := range h.reqs {
		if h.reqs[i].err == errBadAnswer {
			malformed++
		}
	}
	rep.checks.add("malformed answers (wrong count, unparsable)", humanize.Thousands(malformed), verdict(malformed > 0))
	crashed := 0
	for _, inc := range h.incs {
		if inc.crashed {
			crashed++
		}
	}
	if len(r.cfg.Targets) == 0 {
		rep.checks.add("node processes that exited without being killed", strconv.Itoa(crashed), verdict(crashed > 0))
		r.refusalRows(rep, h)
	}

	ahead, behind, ra, rb := c.gaps()
	where := func(i int32, d time.Duration) string {
		if i < 0 || d <= 0 {
			return ""
		}
		if q := &h.reqs[i]; q.inc < 0 {
			return " (" + q.api.String() + ": any node of the main group may have answered)"
		}
		return " (" + h.incs[h.reqs[i].inc].name() + ")"
	}
	rep.checks.add("largest gap between an ID's time and its request's wall time", fmt.Sprintf("ahead %s%s, behind %s%s",
		ahead.Round(time.Millisecond), where(ra, ahead), behind.Round(time.Millisecond), where(rb, behind)), "")

	r.loadTable(rep, h)
	if len(r.cfg.Targets) == 0 {
		r.faultTables(rep, h, loadStart)
	}
	var answered, total int64
	for i := range h.reqs {
		if h.reqs[i].api != apiProbe {
			total++
			if h.reqs[i].ok() {
				answered++
			}
		}
	}
	rep.checks.add("availability: requests answered with IDs", fmt.Sprintf("%s of %s", pct(answered, total), humanize.Thousands(total)), "")
	r.seenTables(rep, h, late)
	r.localRows(rep)
	r.errorTable(rep)
	return rep
}

// loadTable counts requests and IDs per API.
func (r *runner) loadTable(rep *report, h *history) {
	var reqs, ok, ids [numAPI]int64
	var fails [numAPI][numErr]int64
	for i := range h.reqs {
		q := &h.reqs[i]
		reqs[q.api]++
		fails[q.api][q.err]++
		if q.ok() {
			ok[q.api]++
		}
	}
	for _, s := range h.sf {
		ids[h.reqs[s.req].api] += int64(s.n)
	}
	for _, s := range h.seg {
		ids[h.reqs[s.req].api] += int64(s.n)
	}
	rep.load.head = []string{"API", "requests", "answered", "IDs", "failures"}
	var tr, to, ti int64
	for a := range numAPI {
		if reqs[a] == 0 {
			continue
		}
		var f []string
		for e := errDown; e < numErr; e++ {
			if n := fails[a][e]; n > 0 {
				f = append(f, fmt.Sprintf("%s %s", humanize.Thousands(n), e))
			}
		}
		rep.load.add(a.String(), humanize.Thousands(reqs[a]), pct(ok[a], reqs[a]), humanize.Thousands(ids[a]), strings.Join(f, ", "))
		tr, to, ti = tr+reqs[a], to+ok[a], ti+ids[a]
	}
	rep.load.add("all", humanize.Thousands(tr), pct(to, tr), humanize.Thousands(ti), "")
}

// faultTables summarize the faults per kind, with the availability while
// each lasted, and list them.
func (r *runner) faultTables(rep *report, h *history, loadStart int64) {
	var idx []int32
	for i := range h.reqs {
		if h.reqs[i].api != apiProbe && !h.reqs[i].api.local() {
			idx = append(idx, int32(i))
		}
	}
	slices.SortFunc(idx, func(a, b int32) int { return cmp.Compare(h.reqs[a].start, h.reqs[b].start) })
	inWindow := func(lo, hi int64, node int) (all, ok int64) {
		k := sort.Search(len(idx), func(k int) bool { return h.reqs[idx[k]].start >= lo })
		for ; k < len(idx) && h.reqs[idx[k]].start <= hi; k++ {
			q := &h.reqs[idx[k]]
			if node >= 0 && int(q.node) != node {
				continue
			}
			all++
			if q.ok() {
				ok++
			}
		}
		return all, ok
	}
	dark := newDarkness(h)
	type agg struct {
		n, all, ok, nodeAll, nodeOK int64
		longest, dark               time.Duration
		unrecovered, cut            int // not recovered within healthWait; when the run ended
	}
	per := map[string]*agg{}
	var windows [][2]int64
	failed, stuck, cut := 0, 0, 0
	faults := sortedFaults(h.faults)
	rep.events.head = []string{"at", "fault", "what happened", "recovered after"}
	healthWait := r.healthWait()
	for _, f := range faults {
		end := f.window(healthWait)
		windows = append(windows, [2]int64{f.start, end})
		a := per[f.kind]
		if a == nil {
			a = &agg{}
			per[f.kind] = a
		}
		if f.failed {
			failed++
		} else {
			a.n++
		}
		all, ok := inWindow(f.start, end, -1)
		a.all, a.ok = a.all+all, a.ok+ok
		a.dark = max(a.dark, dark.longest(f.start, end))
		if f.node >= 0 {
			na, nok := inWindow(f.start, end, f.node)
			a.nodeAll, a.nodeOK = a.nodeAll+na, a.nodeOK+nok
		}
		rec := "not within " + healthWait.String()
		switch {
		case f.recovered > 0:
			d := time.Duration(f.recovered - f.start)
			a.longest = max(a.longest, d)
			rec = secs(d)
		case f.stuck:
			a.unrecovered++
			stuck++
		default:
			rec = "not before the run ended"
			a.cut++
			cut++
		}
		rep.events.add(at(f.start-loadStart), f.kind, f.note, rec)
	}
	rep.faults.head = []string{"fault", "injected", "requests during", "answered", "answered by the node hit", "longest a node answered nothing", "longest recovery"}
	missing := false
	for _, k := range Kinds() {
		a := per[k]
		if a == nil {
			if slices.Contains(r.cfg.Faults, k) {
				rep.faults.add(k, "0", "", "", "", "", "")
				missing = missing || minFaults(k, r.cfg.MinFaults) > 0
			}
			continue
		}
		nodeCol := "—"
		if a.nodeAll > 0 {
			nodeCol = pct(a.nodeOK, a.nodeAll)
		}
		longest := secs(a.longest)
		if a.unrecovered > 0 {
			longest += fmt.Sprintf(" (%d not within %v)", a.unrecovered, healthWait)
		}
		if a.cut > 0 {
			longest += fmt.Sprintf(" (%d not before the run ended)", a.cut)
		}
		darkCol := "—"
		if dark.any {
			darkCol = secs(a.dark)
		}
		rep.faults.add(k, strconv.FormatInt(a.n, 10), humanize.Thousands(a.all), pct(a.ok, a.all), nodeCol, darkCol, longest)
		if a.n < int64(minFaults(k, r.cfg.MinFaults)) && slices.Contains(r.cfg.Faults, k) {
			missing = true
		}
	}
	// The rest of the run: no fault in progress.
	slices.SortFunc(windows, func(a, b [2]int64) int { return cmp.Compare(a[0], b[0]) })
	var all, ok int64
	w := 0
	for _, i := range idx {
		q := &h.reqs[i]
		for w < len(windows) && windows[w][1] < q.start {
			w++
		}
		if w < len(windows) && windows[w][0] <= q.start {
			continue
		}
		all++
		if q.ok() {
			ok++
		}
	}
	rep.faults.add("(no fault in progress)", "", humanize.Thousands(all), pct(ok, all), "", "", "")
	if len(r.cfg.Faults) > 0 {
		v := "ok"
		if failed > 0 {
			v = "**FAIL**"
			rep.failed = true
		}
		rep.checks.add("faults that could not be injected (see the timeline)", strconv.Itoa(failed), v)
		v = "ok"
		if stuck > 0 {
			v = "**FAIL**"
			rep.failed = true
		}
		res := fmt.Sprintf("%d of %d faults, each within %v", len(faults)-stuck-cut, len(faults), healthWait)
		if cut > 0 {
			res += fmt.Sprintf(" (%d cut short by the run's end)", cut)
		}
		rep.checks.add("the cluster recovered after every fault (every node answering again)", res, v)
	}
	if len(r.cfg.Faults) > 0 && r.cfg.MinFaults > 0 {
		v := "ok"
		if missing {
			v = "**FAIL**"
			rep.failed = true
		}
		var counts, once []string
		for _, k := range r.cfg.Faults {
			var n int64
			if a := per[k]; a != nil {
				n = a.n
			}
			counts = append(counts, fmt.Sprintf("%s %d", k, n))
			if minFaults(k, r.cfg.MinFaults) < r.cfg.MinFaults {
				once = append(once, k)
			}
		}
		row := fmt.Sprintf("every fault kind injected, at least %d each", r.cfg.MinFaults)
		if len(once) > 0 {
			row += fmt.Sprintf(" (once: %s)", strings.Join(once, ", "))
		}
		rep.checks.add(row, fmt.Sprintf("%d faults: %s", len(faults), strings.Join(counts, ", ")), v)
	}
}

// darkness finds how long a node answered nothing: the runs of failed calls
// of each node's plain HTTP client (fixed-rate, so a run's length is
// measured to the client's period).
type darkness struct {
	h     *history
	nodes [][]int32 // per node, its plain HTTP client's requests by start
	any   bool      // some node has such a client
}

func newDarkness(h *history) *darkness {
	d := &darkness{h: h}
	for i := range h.reqs {
		q := &h.reqs[i]
		if q.api != apiHTTPNode || q.node < 0 {
			continue
		}
		for int(q.node) >= len(d.nodes) {
			d.nodes = append(d.nodes, nil)
		}
		d.nodes[q.node] = append(d.nodes[q.node], int32(i))
		d.any = true
	}
	for _, list := range d.nodes {
		slices.SortFunc(list, func(a, b int32) int { return cmp.Compare(h.reqs[a].start, h.reqs[b].start) })
	}
	return d
}

// longest is the longest run of one node's failed calls that began in
// [lo, hi]: from the first failed call's scheduled start to the next
// answered call's (or the last call's, when none was answered after it).
func (d *darkness) longest(lo, hi int64) time.Duration {
	var out int64
	for _, list := range d.nodes {
		k := sort.Search(len(list), func(k int) bool { return d.h.reqs[list[k]].start >= lo })
		// A run in progress at lo began before the window: not this
		// fault's.
		for k > 0 && k < len(list) && !d.h.reqs[list[k-1]].ok() && !d.h.reqs[list[k]].ok() {
			k++
		}
		from := int64(-1)
		for ; k < len(list); k++ {
			q := &d.h.reqs[list[k]]
			if q.ok() {
				if from >= 0 {
					out = max(out, q.start-from)
					from = -1
				}
				if q.start > hi {
					break
				}
				continue
			}
			if from < 0 {
				if q.start > hi {
					break
				}
				from = q.start
			}
		}
		if from >= 0 {
			out = max(out, d.h.reqs[list[len(list)-1]].start-from)
		}
	}
	return time.Duration(out)
}

// window is when the fault's effects are counted: from its start until the
// cluster recovered (else until healthWait after it was removed), at least
// 2 s.
func (f *fault) window(healthWait time.Duration) (end int64) {
	end = f.recovered
	if end == 0 {
		end = f.end + int64(healthWait)
	}
	return max(end, f.start+int64(2*time.Second))
}

// errorTable lists the most frequent error messages.
func (r *runner) errorTable(rep *report) {
	type kv struct {
		k string
		n int
	}
	var all []kv
	for k, n := range r.samples {
		all = append(all, kv{k, n})
	}
	slices.SortFunc(all, func(a, b kv) int {
		if c := cmp.Compare(b.n, a.n); c != 0 {
			return c
		}
		return strings.Compare(a.k, b.k)
	})
	rep.errors.head = []string{"count", "API: class: message"}
	for i, e := range all {
		if i == 12 {
			break
		}
		rep.errors.add(humanize.Thousands(int64(e.n)), strings.ReplaceAll(e.k, "|", "/"))
	}
}

// detail describes up to maxDetails violations of one check: the
// requests, the IDs decoded, the status polls around them and the faults
// nearby.
func (rep *report) detail(c *checker, title string, vs []violation, n int) {
	if n == 0 {
		return
	}
	h := c.h
	var b strings.Builder
	fmt.Fprintf(&b, "\n### %s: %s (the first %d)\n", title, humanize.Thousands(int64(n)), len(vs))
	for _, v := range vs {
		fmt.Fprintf(&b, "- %s\n", v.what)
		for _, id := range v.ids {
			fmt.Fprintf(&b, "    ID %d: %s\n", id, c.decode(id))
		}
		for _, i := range v.reqs {
			if i < 0 {
				continue
			}
			q := &h.reqs[i]
			fmt.Fprintf(&b, "    request: %s\n", c.describe(i))
			if q.inc >= 0 {
				ps := c.okPolls[q.inc]
				lo, hi := pollSpan(ps, q.start, q.end)
				for _, k := range []int{lo - 1, lo, hi, hi + 1} {
					if k >= 0 && k < len(ps) {
						p := ps[k]
						fmt.Fprintf(&b, "      status of %s asked %s answered %s: held=%v worker %d/%d, lease #%d\n",
							h.incs[q.inc].name(), at(p.t0), at(p.t1), p.held, p.dc, p.worker, p.leases)
					}
				}
			}
			for _, f := range h.faults {
				end := max(f.end, f.recovered)
				if f.start <= q.end+int64(5*time.Second) && end >= q.start-int64(5*time.Second) {
					fmt.Fprintf(&b, "      fault nearby: %s–%s %s: %s\n", at(f.start), at(end), f.kind, f.note)
				}
			}
		}
	}
	rep.details = append(rep.details, b.String())
}

// describe is one request in words.
func (c *checker) describe(i int32) string {
	q := &c.h.reqs[i]
	who := nodeName(int(q.node)) + " (no process)"
	if q.inc >= 0 {
		inc := c.h.incs[q.inc]
		who = fmt.Sprintf("%s (%s)", inc.name(), inc.url)
		if inc.pid != 0 {
			who = fmt.Sprintf("%s (pid %d, %s)", inc.name(), inc.pid, inc.url)
		}
	}
	s := fmt.Sprintf("#%d %s to %s, sent %s, answered %s, %s", i, q.api, who, at(q.start), at(q.end), q.err)
	if q.acked() {
		s += fmt.Sprintf(", IDs %d…%d", q.min, q.max)
	}
	return s
}

// decode is an ID's fields in words.
func (c *checker) decode(id int64) string {
	w := c.f.holder(id)
	t := time.Unix(0, c.f.timeNs(id)).UTC().Format("15:04:05.000")
	return fmt.Sprintf("time %s, datacenter %d, worker %d, sequence %d", t, w[0], w[1], id&(int64(1)<<c.f.workerShift-1))
}
