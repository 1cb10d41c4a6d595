package verify

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/flakeid/flakeid/internal/humanize"
)

// callStats are the calls of one kind in one window, as their clients saw
// them.
type callStats struct {
	lat    []int64 // ns per call; a failed call is math.MaxInt64 (never answered)
	within int64   // answered with IDs within the deadline
	// genWithin is answered within the deadline less the load generator's
	// stalls in the call (stalls.overlap): a call late only because the
	// verifier was not running is not missed.
	genWithin int64
}

// add counts q; st are the load generator's stalls (nil for a closed-loop
// client, which has no schedule to tell them by).
func (s *callStats) add(q *request, deadline time.Duration, st stalls) {
	d := int64(math.MaxInt64)
	if q.ok() {
		d = max(q.end-q.start, 0)
		if d <= int64(deadline) {
			s.within++
		}
		if d-st.overlap(q.start, q.end) <= int64(deadline) {
			s.genWithin++
		}
	}
	s.lat = append(s.lat, d)
}

// stalls are the load generator's own stalls, merged and in order: each
// interval in which a fixed-rate schedule was overdue, from the send its
// sleep was for to when the sleep returned. While one schedule is overdue
// the verifier's process (or the whole machine) is not running its timers,
// and every call that is due or in flight then waits with it, whatever the
// service does: a call answered from the Go client's own buffer, which
// touches no server, is late only in such a stall.
type stalls [][2]int64

// stallsOf merges the late wake-ups' intervals.
func stallsOf(wakes []wake) stalls {
	var st stalls
	for _, w := range wakes {
		if w.late > 0 {
			st = append(st, [2]int64{w.at, w.at + w.late})
		}
	}
	slices.SortFunc(st, func(a, b [2]int64) int { return cmp.Compare(a[0], b[0]) })
	out := st[:0]
	for _, iv := range st {
		if n := len(out); n > 0 && iv[0] <= out[n-1][1] {
			out[n-1][1] = max(out[n-1][1], iv[1])
			continue
		}
		out = append(out, iv)
	}
	return out
}

// overlap is how long the stalls cover of [lo, hi].
func (st stalls) overlap(lo, hi int64) int64 {
	var d int64
	i, _ := slices.BinarySearchFunc(st, lo, func(iv [2]int64, t int64) int { return cmp.Compare(iv[1], t) })
	for ; i < len(st) && st[i][0] < hi; i++ {
		d += max(min(st[i][1], hi)-max(st[i][0], lo), 0)
	}
	return d
}

// quantile is the q-quantile of the latencies (sorted by done), as text:
// "failed" when it falls on a call that was never answered.
func (s *callStats) quantile(q float64) string {
	if len(s.lat) == 0 {
		return "—"
	}
	i := int(math.Ceil(q*float64(len(s.lat)))) - 1
	return latencyText(s.lat[max(0, min(i, len(s.lat)-1))])
}

func (s *callStats) done() { slices.Sort(s.lat) }

// share is the share answered within the deadline, with its nines.
func (s *callStats) share() (string, string) { return shareOf(s.within, int64(len(s.lat))) }

// genShare is the share answered within the deadline less the load
// generator's stalls (genWithin), with its nines.
func (s *callStats) genShare() (string, string) { return shareOf(s.genWithin, int64(len(s.lat))) }

func shareOf(within, n int64) (string, string) {
	if n == 0 {
		return "—", "—"
	}
	if within == n {
		return "100%", "none missed"
	}
	f := float64(within) / float64(n)
	return fmt.Sprintf("%.3f%%", 100*f), fmt.Sprintf("%.1f", nines(f))
}

// availability is the share within the deadline with its nines, in words.
func (s *callStats) availability() string { return availabilityOf(s.share()) }

// genAvailability is availability less the load generator's stalls.
func (s *callStats) genAvailability() string { return availabilityOf(s.genShare()) }

func availabilityOf(share, n9 string) string {
	if n9 == "none missed" {
		return share + " (none missed)"
	}
	return fmt.Sprintf("%s (%s nines)", share, n9)
}

// nines is -log10(1-f): 99.9% is 3 nines.
func nines(f float64) float64 { return max(0, -math.Log10(1-f)) }

// latencyText is a latency to three significant digits.
func latencyText(ns int64) string {
	switch d := time.Duration(ns); {
	case ns == math.MaxInt64:
		return "failed"
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.2f ms", float64(d)/1e6)
	case d < time.Second:
		return fmt.Sprintf("%.0f ms", float64(d)/1e6)
	default:
		return fmt.Sprintf("%.2f s", d.Seconds())
	}
}

// seenTables are what clients saw: per API, the share of calls answered
// within the deadline and the latency quantiles; per fault kind, the same
// for the fixed-rate clients; and, among the checks, the Go client's
// availability as nines and the fixed-rate schedule's own lateness.
func (r *runner) seenTables(rep *report, h *history, late []wake) {
	dl := r.cfg.Deadline
	rep.deadline = dl
	st := stallsOf(late)
	var per [numAPI]callStats
	for i := range h.reqs {
		q := &h.reqs[i]
		if q.api == apiProbe || q.api == apiConnectStream || q.api.local() {
			continue // the stream's messages are not calls of their own, nor a local generator's batches
		}
		if q.api.paced() {
			per[q.api].add(q, dl, st)
		} else {
			per[q.api].add(q, dl, nil)
		}
	}
	rep.seen.head = []string{"API", "load", "calls", "within " + dl.String(), "nines", "within " + dl.String() + " less the generator's stalls", "p50", "p99", "p99.9", "max"}
	for a := range numAPI {
		s := &per[a]
		if len(s.lat) == 0 {
			continue
		}
		s.done()
		load := fmt.Sprintf("closed loop (%d clients in all)", r.cfg.Clients)
		if a.paced() {
			load = fmt.Sprintf("%d calls/s", r.cfg.Rate)
			switch a {
			case apiHTTPNode, apiRESPNode:
				load += " per node"
			case apiGoBuffered, apiPyBuffered, apiJSBuffered, apiJavaBuffered:
				load += fmt.Sprintf(", buffer %s IDs", humanize.Thousands(int64(min(r.cfg.Rate*bufferSeconds, 100_000))))
			}
		}
		share, n9 := s.share()
		genShare := "—" // a closed-loop client has no schedule
		if a.paced() {
			genShare, _ = s.genShare()
		}
		rep.seen.add(a.String(), load, humanize.Thousands(int64(len(s.lat))), share, n9, genShare,
			s.quantile(0.5), s.quantile(0.99), s.quantile(0.999), s.quantile(1))
	}
	if s := &per[apiGoClient]; len(s.lat) > 0 {
		b := &per[apiGoBuffered]
		res := fmt.Sprintf("%s of %s calls; buffered: %s", s.availability(), humanize.Thousands(int64(len(s.lat))), b.availability())
		rep.checks.add(fmt.Sprintf("availability as clients saw it: the Go client's NextID with failover over the main group, answered within %v", dl), res, "")
		res = fmt.Sprintf("%s; buffered: %s", s.genAvailability(), b.genAvailability())
		rep.checks.add(fmt.Sprintf("the same less the load generator's own stalls: answered within %v not counting the time, while the call was due or in flight, that a fixed-rate schedule was overdue in waking (the verifier's process, or the machine, not running)", dl), res, "")
	}
	if len(late) > 0 {
		var ls callStats
		for _, w := range late {
			ls.lat = append(ls.lat, w.late)
		}
		ls.done()
		rep.checks.add("the fixed-rate clients' own lateness (a sleep until a scheduled send returning late)",
			fmt.Sprintf("p99.9 %s, max %s over %s wake-ups", ls.quantile(0.999), ls.quantile(1), humanize.Thousands(int64(len(late)))), "")
	}
	if len(r.cfg.Targets) == 0 {
		r.seenByFault(rep, h, late)
	}
}

// seenByFault is the fixed-rate clients' share within the deadline and
// p99.9 per fault kind (the calls scheduled in a fault's window), with no
// fault in progress, and over the whole run; and, in the same windows, how
// late the clients' schedule woke — a late answer where the schedule was
// late too is the load generator's stall, not the service's.
func (r *runner) seenByFault(rep *report, h *history, late []wake) {
	var ran [numAPI]bool
	for i := range h.reqs {
		ran[h.reqs[i].api] = true
	}
	var kinds []api // the fixed-rate kinds that ran (a language's caller only with --languages)
	for a := range numAPI {
		if a.paced() && ran[a] {
			kinds = append(kinds, a)
		}
	}
	healthWait := r.healthWait()
	type win struct {
		lo, hi int64
		kind   string
	}
	var wins []win
	for _, f := range sortedFaults(h.faults) {
		wins = append(wins, win{f.start, f.window(healthWait), f.kind})
	}
	rows := map[string]*[numAPI]callStats{}
	row := func(k string) *[numAPI]callStats {
		if rows[k] == nil {
			rows[k] = &[numAPI]callStats{}
		}
		return rows[k]
	}
	const quiet, whole = "(no fault in progress)", "(whole run)"
	// windowsOf calls add with each row the moment at (ns) falls in: the
	// whole run, each fault kind whose window holds it (once), or none.
	windowsOf := func(at int64, add func(row string)) {
		add(whole)
		in := map[string]bool{}
		for _, w := range wins {
			if w.lo <= at && at <= w.hi && !in[w.kind] {
				in[w.kind] = true
				add(w.kind)
			}
		}
		if len(in) == 0 {
			add(quiet)
		}
	}
	st := stallsOf(late)
	for i := range h.reqs {
		q := &h.reqs[i]
		if !q.api.paced() {
			continue
		}
		windowsOf(q.start, func(k string) { row(k)[q.api].add(q, r.cfg.Deadline, st) })
	}
	wakes := map[string]*callStats{}
	for _, w := range late {
		windowsOf(w.at, func(k string) {
			if wakes[k] == nil {
				wakes[k] = &callStats{}
			}
			wakes[k].lat = append(wakes[k].lat, w.late)
		})
	}
	rep.seenBy.head = []string{"fault"}
	for _, a := range kinds {
		rep.seenBy.head = append(rep.seenBy.head, a.String())
	}
	rep.seenBy.head = append(rep.seenBy.head, "schedule woke late")
	var order []string
	for _, k := range Kinds() {
		if rows[k] != nil {
			order = append(order, k)
		}
	}
	for _, k := range append(order, quiet, whole) {
		ss := rows[k]
		if ss == nil {
			continue
		}
		cells := []string{k}
		for _, a := range kinds {
			s := &ss[a]
			s.done()
			share, _ := s.share()
			genShare, _ := s.genShare()
			cells = append(cells, strings.Join([]string{share, genShare, s.quantile(0.999)}, " · "))
		}
		ws := wakes[k]
		if ws == nil {
			ws = &callStats{}
		}
		ws.done()
		cells = append(cells, strings.Join([]string{ws.quantile(0.999), ws.quantile(1)}, " · "))
		rep.seenBy.add(cells...)
	}
}
