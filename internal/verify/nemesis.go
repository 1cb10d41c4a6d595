package verify

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"time"
)

// The sizes of the faults.
const (
	clockBack    = -3 * time.Second // a node's wall clock jumps back …
	clockForward = 2 * time.Second  // … or forward
	behind       = -5 * time.Second // a node restarts with its clock this far behind
	pgDown       = 3 * time.Second  // PostgreSQL is "restarting" this long
	quiet        = 5 * time.Second  // no fault starts this close to the end
	healthWait   = 30 * time.Second // how long the nemesis waits for the cluster to recover
	healthyFor   = 500 * time.Millisecond
)

// kindInfo describes each fault kind; est is a generous estimate of how
// long one takes, fault and recovery, for the schedule.
var kindInfo = map[string]struct {
	desc string
	est  func(ttl time.Duration) time.Duration
}{
	"clock-back":     {"one node's wall clock jumps back 3 s (POST /admin/test/clock?shift=-3s)", func(time.Duration) time.Duration { return 2 * time.Second }},
	"clock-forward":  {"one node's wall clock jumps forward 2 s", func(time.Duration) time.Duration { return 2 * time.Second }},
	"kill":           {"kill -9 of one node, restarted with the same data directory and flags", func(time.Duration) time.Duration { return 6 * time.Second }},
	"restart-behind": {"kill -9 of one node, restarted with its clock 5 s behind (--test-clock-offset=-5s)", func(ttl time.Duration) time.Duration { return 15 * time.Second }},
	"etcd-pause":     {"etcd SIGSTOPped for lease TTL + 1.5 s, then SIGCONT", func(ttl time.Duration) time.Duration { return ttl + 7*time.Second }},
	"etcd-partition": {"one node cut off from etcd (its proxy holds every byte) for lease TTL + 1.5 s", func(ttl time.Duration) time.Duration { return ttl + 6*time.Second }},
	"pg-restart":     {"PostgreSQL \"restarts\": every connection reset, no new one for 3 s", func(time.Duration) time.Duration { return 6 * time.Second }},
}

// Kinds are the fault kinds, in the order the report lists them.
func Kinds() []string {
	return []string{"clock-back", "clock-forward", "kill", "restart-behind", "etcd-pause", "etcd-partition", "pg-restart"}
}

// nemesis injects faults one after another until a fault would not end
// quiet before until: first MinFaults rounds of every kind, each round in a
// random order, then kinds at random. After each fault it waits for the
// cluster to recover (every node answers Snowflake requests steadily), then
// pauses 1–3 s.
func (r *runner) nemesis(ctx context.Context, rec *recorder, until int64) {
	rnd := rand.New(rand.NewPCG(r.cfg.Seed, 0))
	sleepCtx(ctx, min(3*time.Second, r.cfg.Duration/10))
	var queue []string
	for range r.cfg.MinFaults {
		round := append([]string(nil), r.cfg.Faults...)
		rnd.Shuffle(len(round), func(i, j int) { round[i], round[j] = round[j], round[i] })
		queue = append(queue, round...)
	}
	fits := func(kind string) bool { return r.now()+int64(kindInfo[kind].est(r.cfg.LeaseTTL)+quiet) <= until }
	for ctx.Err() == nil {
		var kind string
		if len(queue) > 0 {
			var ok bool
			if kind, queue, ok = takeFitting(queue, fits); !ok {
				r.logf("no time left for the scheduled faults %v", queue)
				return
			}
		} else if kind = r.cfg.Faults[rnd.IntN(len(r.cfg.Faults))]; !fits(kind) {
			return
		}
		f := r.inject(ctx, kind, rnd)
		if ctx.Err() != nil {
			r.addFault(f)
			return
		}
		f.recovered = r.waitHealthy(ctx, rec)
		r.addFault(f)
		took := "not within " + healthWait.String()
		if f.recovered > 0 {
			took = fmt.Sprintf("%.1fs after it began", time.Duration(f.recovered-f.start).Seconds())
		}
		r.logf("%-14s %s; recovered %s", kind, f.note, took)
		sleepCtx(ctx, time.Second+time.Duration(rnd.Int64N(int64(2*time.Second))))
	}
}

// takeFitting removes from queue the first kind that fits and returns it;
// ok is false when none fits.
func takeFitting(queue []string, fits func(string) bool) (kind string, rest []string, ok bool) {
	k := slices.IndexFunc(queue, fits)
	if k < 0 {
		return "", queue, false
	}
	kind = queue[k] // before Delete, which shifts the tail
	return kind, slices.Delete(queue, k, k+1), true
}

func (r *runner) addFault(f fault) {
	r.mu.Lock()
	r.faults = append(r.faults, f)
	r.mu.Unlock()
}

// pick chooses a node that has a running process.
func (r *runner) pick(rnd *rand.Rand) *node {
	var alive []*node
	for _, n := range r.nodes {
		if n.cur.Load() != nil {
			alive = append(alive, n)
		}
	}
	if len(alive) == 0 {
		return r.nodes[rnd.IntN(len(r.nodes))]
	}
	return alive[rnd.IntN(len(alive))]
}

// inject runs one fault to its end (healed, resumed, restarted).
func (r *runner) inject(ctx context.Context, kind string, rnd *rand.Rand) fault {
	f := fault{kind: kind, node: -1, inc: -1}
	hold := r.cfg.LeaseTTL + 1500*time.Millisecond
	switch kind {
	case "clock-back", "clock-forward":
		shift := clockBack
		if kind == "clock-forward" {
			shift = clockForward
		}
		n := r.pick(rnd)
		inc := n.cur.Load()
		f.node, f.start = n.idx, r.now()
		if inc == nil {
			f.end, f.note, f.failed = f.start, nodeName(n.idx)+" has no process: nothing shifted", true
			break
		}
		f.inc = inc.id
		off, err := r.shiftClock(ctx, inc, shift)
		f.end = r.now()
		f.note = fmt.Sprintf("%s clock %+v (now %s from the real time)", inc.name(), shift, off)
		if err != nil {
			f.note, f.failed = fmt.Sprintf("%s clock %+v failed: %v", inc.name(), shift, err), true
		}
	case "kill", "restart-behind":
		var offset time.Duration
		if kind == "restart-behind" {
			offset = behind
		}
		n := r.pick(rnd)
		f.node, f.start = n.idx, r.now()
		old := r.killNode(n)
		f.note = nodeName(n.idx) + " had no process"
		if old != nil {
			f.inc = old.id
			f.note = old.name() + " killed (-9)"
		}
		var inc *incarnation
		var err error
		for attempt := 0; attempt < 3 && ctx.Err() == nil; attempt++ {
			if inc, err = r.startNode(ctx, n, offset); err == nil {
				break
			}
			r.logf("restarting %s: %v", nodeName(n.idx), err)
		}
		f.end = r.now()
		if inc != nil {
			f.note += fmt.Sprintf("; %s serving on %s after %.1fs", inc.name(), inc.url, time.Duration(f.end-f.start).Seconds())
			if offset != 0 {
				f.note += fmt.Sprintf(" with its clock %v behind", -offset)
			}
		} else {
			f.note, f.failed = f.note+"; restart FAILED", true
		}
	case "etcd-pause":
		f.start = r.now()
		err := stopProcess(r.etcd.cmd.Process)
		sleepCtx(ctx, hold)
		cerr := contProcess(r.etcd.cmd.Process)
		f.end = r.now()
		f.note = fmt.Sprintf("etcd (pid %d) stopped for %.1fs", r.etcd.cmd.Process.Pid, time.Duration(f.end-f.start).Seconds())
		if err != nil || cerr != nil {
			f.note, f.failed = f.note+fmt.Sprintf(" FAILED: %v %v", err, cerr), true
		}
	case "etcd-partition":
		n := r.pick(rnd)
		f.node, f.start = n.idx, r.now()
		if inc := n.cur.Load(); inc != nil {
			f.inc = inc.id
		}
		n.etcdProxy.Cut()
		sleepCtx(ctx, hold)
		n.etcdProxy.Heal()
		f.end = r.now()
		f.note = fmt.Sprintf("%s cut off from etcd for %.1fs", nodeName(n.idx), time.Duration(f.end-f.start).Seconds())
	case "pg-restart":
		f.start = r.now()
		r.pgProxy.Cut()
		r.pgProxy.Reset()
		sleepCtx(ctx, pgDown)
		r.pgProxy.Heal()
		f.end = r.now()
		f.note = fmt.Sprintf("PostgreSQL connections reset, unreachable for %.1fs", time.Duration(f.end-f.start).Seconds())
	default:
		panic(fmt.Sprintf("verify: unknown fault kind %q", kind)) // Config.validate lets none through
	}
	return f
}

// shiftClock moves a node's test clock.
func (r *runner) shiftClock(ctx context.Context, inc *incarnation, d time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, inc.url+"/admin/test/clock?shift="+url.QueryEscape(d.String()), nil)
	if err != nil {
		return "", err
	}
	resp, err := r.pollHC.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: %s", resp.Status, b)
	}
	var out struct {
		Offset string `json:"offset"`
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return "", err
	}
	return out.Offset, nil
}

// waitHealthy waits until every node answers Snowflake requests steadily
// — every probe for healthyFor, probes 50 ms apart — and returns when that
// began, or 0
// when that did not happen within healthWait. One answer is not enough: a
// node whose clock stepped back answers from its newest tick until that
// tick's sequence runs out. The probes are recorded and checked like every
// other request.
func (r *runner) waitHealthy(ctx context.Context, rec *recorder) int64 {
	deadline := time.Now().Add(healthWait)
	var since []time.Time // per node: start of its current run of answers
	for range r.nodes {
		since = append(since, time.Time{})
	}
	for {
		healthy := true
		for i, n := range r.nodes {
			ok := false
			if inc := n.cur.Load(); inc != nil {
				q := request{start: r.now(), node: int8(n.idx), inc: inc.id, api: apiProbe}
				ok = r.call(ctx, inc, q, rec)
			}
			switch {
			case !ok:
				since[i] = time.Time{}
			case since[i].IsZero():
				since[i] = time.Now()
			}
			healthy = healthy && !since[i].IsZero() && time.Since(since[i]) >= healthyFor
		}
		if healthy { // recovered when the last node's run of answers began
			last := since[0]
			for _, t := range since {
				if t.After(last) {
					last = t
				}
			}
			return int64(last.Sub(r.t0))
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			return 0
		}
		sleepCtx(ctx, 50*time.Millisecond)
	}
}
