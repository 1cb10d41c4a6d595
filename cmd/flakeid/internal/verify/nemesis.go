package verify

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
)

// The sizes of the faults.
const (
	clockBack     = -3 * time.Second // a node's wall clock jumps back …
	clockForward  = 2 * time.Second  // … or forward
	behind        = -5 * time.Second // a node restarts with its clock this far behind
	pgDown        = 3 * time.Second  // PostgreSQL is "restarting" this long
	rollbackAfter = 3 * time.Second  // sql-rollback restores a copy this old
	quiet         = 5 * time.Second  // no fault starts this close to the end
	nemesisLead   = 3 * time.Second  // nor this close to the start (at most a tenth of the run)
	healthyFor    = 500 * time.Millisecond
)

// kindInfo describes each fault kind: what it does, the group it needs,
// whether one injection satisfies MinFaults (once: it costs a quarantine,
// a refused start or a restart of the coordinator, and one shows it), the check row of the starts it
// makes that must be refused (refused), and est, a generous estimate of how
// long one takes, fault and recovery, for the schedule.
var kindInfo = map[string]struct {
	desc    string
	group   string
	once    bool
	lost    bool // it loses or rolls back a coordinator's state
	refused string
	est     func(ttl time.Duration) time.Duration
}{
	"clock-back":     {desc: "one node's wall clock jumps back 3 s (POST /admin/test/clock?shift=-3s)", group: groupMain, est: func(time.Duration) time.Duration { return 2 * time.Second }},
	"clock-forward":  {desc: "one node's wall clock jumps forward 2 s", group: groupMain, est: func(time.Duration) time.Duration { return 2 * time.Second }},
	"kill":           {desc: "kill -9 of one node (of any group), restarted with the same data directory and flags", group: groupMain, est: func(ttl time.Duration) time.Duration { return 6*time.Second + quarantine(ttl) }},
	"restart-behind": {desc: "kill -9 of one node, restarted with its clock 5 s behind (--test-clock-offset=-5s)", group: groupMain, est: func(ttl time.Duration) time.Duration { return 15 * time.Second }},
	"etcd-pause":     {desc: "etcd SIGSTOPped for lease TTL + 1.5 s, then SIGCONT", group: groupEtcd, est: pauseEst},
	"etcd-partition": {desc: "one node cut off from etcd (its proxy holds every byte) for lease TTL + 1.5 s", group: groupEtcd, est: partitionEst},
	"zk-pause":       {desc: "ZooKeeper SIGSTOPped for lease TTL + 1.5 s, then SIGCONT", group: groupZK, est: pauseEst},
	"zk-partition":   {desc: "one node cut off from ZooKeeper (its proxy holds every byte) for lease TTL + 1.5 s", group: groupZK, est: partitionEst},
	"zk-restart": {desc: "ZooKeeper killed (-9), down for lease TTL + 1.5 s, started again with its data: the holders' sessions and ephemeral nodes come back with its snapshot and outlive their owners' leases", group: groupZK, once: true,
		est: func(ttl time.Duration) time.Duration { return ttl + 5*time.Second }},
	"zk-data-loss": {desc: "ZooKeeper's state lost, alternately (the first by the seed): killed (-9), its data directory deleted and started again on its port — every node, session and ephemeral node gone, its zxids from 0 — or the main group's path deleted recursively by another client while the holders' sessions live on", group: groupZK, once: true, lost: true,
		est: dataLossEst},
	"consul-pause":     {desc: "the Consul agent SIGSTOPped for lease TTL + 1.5 s, then SIGCONT", group: groupConsul, est: pauseEst},
	"consul-partition": {desc: "one node cut off from Consul (its proxy holds every byte) for lease TTL + 1.5 s", group: groupConsul, est: partitionEst},
	"consul-data-loss": {desc: "the Consul dev agent killed (-9) and started again on its ports, empty (it keeps everything in memory): every key and session gone, its indexes from 0", group: groupConsul, once: true, lost: true,
		est: dataLossEst},
	"nats-pause":     {desc: "the NATS server SIGSTOPped for lease TTL + 1.5 s, then SIGCONT", group: groupNATS, est: pauseEst},
	"nats-partition": {desc: "one node cut off from NATS (its proxy holds every byte) for lease TTL + 1.5 s", group: groupNATS, est: partitionEst},
	"nats-data-loss": {desc: "the NATS server killed (-9), its JetStream store deleted, started again on its port: the bucket and every key gone", group: groupNATS, once: true, lost: true,
		est: dataLossEst},
	"pg-restart": {desc: "PostgreSQL \"restarts\": every connection reset, no new one for 3 s (segments, and the SQL group's leases)", group: groupMain, est: func(ttl time.Duration) time.Duration {
		return 4*time.Second + ttl + quarantine(ttl)
	}},
	"redis-restart-nosave": {desc: "the Redis group's redis-server shut down with SHUTDOWN NOSAVE and started again, empty, on its port", group: groupRedis, once: true, lost: true,
		est: func(ttl time.Duration) time.Duration {
			return 5*time.Second + ttl + quarantine(ttl)
		}},
	"redis-keys-deleted": {desc: "every key of the Redis group's prefix deleted (DEL)", group: groupRedis, once: true, lost: true,
		est: func(ttl time.Duration) time.Duration {
			return 4*time.Second + ttl + quarantine(ttl)
		}},
	"sql-rollback": {desc: "the SQL group's coordinator table copied, and 3 s later restored to that copy (DELETE + INSERT in one transaction), as a restored backup", group: groupSQL, once: true, lost: true,
		est: func(ttl time.Duration) time.Duration {
			return rollbackAfter + 4*time.Second + ttl + quarantine(ttl)
		}},
	"truncated-state": {desc: "kill -9 of a file-coordinator node; its workers.db truncated to half, then to 0 bytes, and a restart after each, which must be refused; then `flakeid recover` and a restart that serves", group: groupFile, once: true,
		refused: "a node whose workers.db was truncated (to half, to 0 bytes) is refused at start, naming the file",
		est:     func(ttl time.Duration) time.Duration { return 9*time.Second + quarantine(ttl) }},
	"other-layout": {desc: "an extra node started on the main group's coordinator with another layout (more worker and sequence bits); it must be refused", group: groupMain, once: true,
		refused: "a node with another layout than its coordinator records is refused at start, showing both layouts",
		est:     func(time.Duration) time.Duration { return 4 * time.Second }},
	"other-space": {desc: "an extra node started with a random other layout (a datacenter bit moved to the worker field as in issue 25, other widths, a preset, another epoch or time unit), on a random datacenter, mostly in another namespace (key prefix or path) of the main group's coordinator that shares its datacenter registry; it must be refused", group: groupMain, once: true,
		refused: "a node with another layout on any datacenter or namespace of the coordinator's registry is refused at start, showing both layouts",
		est:     func(time.Duration) time.Duration { return 3 * time.Second }},
	"local-kill": {desc: "kill -9 of a language's local generator (a process making IDs under a worker-id lease from the main group), started again at once", group: groupLocal,
		est: func(time.Duration) time.Duration { return 3 * time.Second }},
	"local-stop": {desc: "a language's local generator SIGSTOPped past its lease's reservation (the main group's reserve-ahead + lease TTL + 1 s), then SIGCONT", group: groupLocal,
		est: func(ttl time.Duration) time.Duration { return mainReserveAhead + ttl + 4*time.Second }},
	"clock-ahead": {desc: "an extra node with its clock 1 h ahead (--test-clock-offset=1h) started three times on the main group's coordinator and datacenter, as a restart loop would; each start must be refused, and afterwards no high-water mark of the datacenter may lie more than a minute ahead", group: groupMain, once: true,
		refused: "a node whose clock runs 1 h ahead is refused at start, three times in a row, and moves no high-water mark",
		est:     func(time.Duration) time.Duration { return 6 * time.Second }},
	"config-typo": {desc: "an extra node started with --config naming a file whose key \"coordinater\" is misspelt; it must be refused", group: groupMain, once: true,
		refused: "a node whose --config file has a misspelt key is refused at start, naming it",
		est:     func(time.Duration) time.Duration { return 3 * time.Second }},
}

// The estimates of the main group's coordinator faults: a pause and a
// partition hold for TTL + 1.5 s, and the nodes recover within a few
// seconds; a data loss restarts the server (ZooKeeper in about a second,
// Consul in less) or deletes the prefix, the holders notice at their next
// renewal and go on on their reservations, and the group then issues
// nothing until the floor, the quarantine (mainQuarantine, 18 s) after the
// re-initialisation.
func pauseEst(ttl time.Duration) time.Duration     { return ttl + 7*time.Second }
func partitionEst(ttl time.Duration) time.Duration { return ttl + 6*time.Second }
func dataLossEst(ttl time.Duration) time.Duration {
	return ttl + 4*time.Second + mainQuarantine
}

// Kinds are the fault kinds, in the order the report lists them. The
// coordinator kinds (etcd-*, zk-*, consul-*) are only for a main group on
// that coordinator.
func Kinds() []string {
	return []string{"clock-back", "clock-forward", "kill", "restart-behind",
		"etcd-pause", "etcd-partition", "zk-pause", "zk-partition", "zk-restart", "zk-data-loss", "consul-pause", "consul-partition", "consul-data-loss",
		"nats-pause", "nats-partition", "nats-data-loss", "pg-restart", "redis-restart-nosave", "redis-keys-deleted", "sql-rollback", "truncated-state", "other-layout", "other-space", "clock-ahead", "config-typo", "local-kill", "local-stop"}
}

// coordKinds are the fault kinds of the main group's coordinator.
func (c Config) coordKinds() []string {
	var ks []string
	for _, k := range Kinds() {
		if kindInfo[k].group == c.Coordinator {
			ks = append(ks, k)
		}
	}
	return ks
}

// minFaults is how many times kind must be injected for the run to pass
// with MinFaults: MinFaults, or at most 1 for a kind marked once.
func minFaults(kind string, minAll int) int {
	if kindInfo[kind].once {
		return min(minAll, 1)
	}
	return minAll
}

// mainKinds are the fault kinds of c the nemesis injects; the local
// generators' (groupLocal) are localNemesis's, beside it.
func (c Config) mainKinds() []string {
	var ks []string
	for _, k := range c.Faults {
		if kindInfo[k].group != groupLocal {
			ks = append(ks, k)
		}
	}
	return ks
}

// localKinds are the fault kinds of c that localNemesis injects.
func (c Config) localKinds() []string {
	var ks []string
	for _, k := range c.Faults {
		if kindInfo[k].group == groupLocal {
			ks = append(ks, k)
		}
	}
	return ks
}

// requiredQueue is the faults a schedule of kinds must inject first:
// MinFaults rounds (round k holds the kinds whose minFaults is at least
// k), each round in a random order.
func (c Config) requiredQueue(kinds []string, rnd *rand.Rand) []string {
	var queue []string
	for k := range c.MinFaults {
		var round []string
		for _, kind := range kinds {
			if minFaults(kind, c.MinFaults) > k {
				round = append(round, kind)
			}
		}
		rnd.Shuffle(len(round), func(i, j int) { round[i], round[j] = round[j], round[i] })
		queue = append(queue, round...)
	}
	return queue
}

// localNemesis injects the local generators' faults (local-kill,
// local-stop) one after another beside the nemesis, so that they overlap
// the cluster's faults and take none of their time: first the required
// rounds, then kinds at random, each followed by a pause of 1 s to
// maxFaultPause, until one would not end quiet before the run's end (which
// it moves, within its bound, for the required ones: extendFor). A local
// fault leaves the cluster as it was: it counts as recovered when it ends.
func (r *runner) localNemesis(ctx context.Context) {
	kinds := r.cfg.localKinds()
	if len(kinds) == 0 || r.langs == nil {
		return
	}
	rnd := rand.New(rand.NewPCG(r.cfg.Seed, 1))
	sleepCtx(ctx, min(nemesisLead, r.cfg.Duration/10))
	queue := r.cfg.requiredQueue(kinds, rnd)
	est := func(kind string) time.Duration { return kindInfo[kind].est(r.cfg.LeaseTTL) }
	for ctx.Err() == nil {
		kind, required := kinds[rnd.IntN(len(kinds))], len(queue) > 0
		if required {
			kind = queue[0]
			if r.now()+int64(est(kind)+quiet) > r.end.Load() {
				r.extendFor(est(kind)+quiet, queue) // the end moves only for a required fault that no longer fits
			}
		}
		if r.now()+int64(est(kind)+quiet) > r.end.Load() {
			if required {
				r.logf("no time left for the scheduled faults %v", queue)
			}
			return
		}
		if required {
			queue = queue[1:]
		}
		f := r.injectLocal(ctx, kind, rnd.IntN(len(r.langs.locals)))
		f.recovered = f.end
		r.addFault(f)
		r.logf("%-20s %s", kind, f.note)
		sleepCtx(ctx, time.Second+time.Duration(rnd.Int64N(int64(maxFaultPause-time.Second))))
	}
}

// nemesis injects faults one after another until a fault would not end
// quiet before the run's end: first MinFaults rounds of every kind (round
// k holds the kinds whose minFaults is at least k), each round in a random
// order — moving the end later, within its bound, when none of them fits
// any more (extendFor) — then kinds at random. After each fault it waits for the
// cluster to recover (every node answers Snowflake requests steadily), then
// pauses 1 s to maxFaultPause.
func (r *runner) nemesis(ctx context.Context, rec *recorder) {
	rnd := rand.New(rand.NewPCG(r.cfg.Seed, 0))
	kinds := r.cfg.mainKinds()
	if len(kinds) == 0 {
		return
	}
	sleepCtx(ctx, min(nemesisLead, r.cfg.Duration/10))
	queue := r.cfg.requiredQueue(kinds, rnd)
	est := func(kind string) time.Duration { return kindInfo[kind].est(r.cfg.LeaseTTL) }
	fits := func(kind string) bool { return r.now()+int64(est(kind)+quiet) <= r.end.Load() }
	for ctx.Err() == nil {
		var kind string
		if len(queue) > 0 {
			var ok bool
			left := func() time.Duration { return time.Duration(r.end.Load() - r.now()) }
			if kind, queue, ok = takeRequired(queue, left(), est); !ok {
				// None fits any more: recoveries took longer than their
				// estimates. Move the end for the longest, within its
				// bound, and take again.
				r.extendFor(est(longest(queue, est))+quiet, queue)
				kind, queue, ok = takeRequired(queue, left(), est)
			}
			if !ok {
				r.logf("no time left for the scheduled faults %v", queue)
				return
			}
		} else if kind = kinds[rnd.IntN(len(kinds))]; !fits(kind) {
			return
		}
		f := r.inject(ctx, kind, rnd)
		if ctx.Err() != nil {
			r.addFault(f)
			return
		}
		f.recovered = r.waitHealthy(ctx, rec)
		f.stuck = f.recovered == 0 && ctx.Err() == nil
		r.addFault(f)
		took := "not within " + r.healthWait().String()
		switch {
		case f.recovered > 0:
			took = fmt.Sprintf("%.1fs after it began", time.Duration(f.recovered-f.start).Seconds())
		case !f.stuck:
			took = "not before the run ended"
		}
		r.logf("%-20s %s; recovered %s", kind, f.note, took)
		if f.stuck {
			r.logStuckNodes()
		}
		sleepCtx(ctx, time.Second+time.Duration(rnd.Int64N(int64(maxFaultPause-time.Second))))
	}
}

// logStuckNodes shows, for a cluster that did not recover, what each
// running node logged last about its lease (request failures and debug
// lines left out), so that a failed run says why.
func (r *runner) logStuckNodes() {
	for _, n := range r.nodes {
		inc := n.cur.Load()
		if inc == nil || inc.log == "" {
			continue
		}
		var lines []string
		for line := range strings.Lines(tail(inc.log, 1<<20)) {
			if !strings.Contains(line, "level=DEBUG") && !strings.Contains(line, `msg="server: request failed"`) {
				lines = append(lines, strings.TrimRight(line, "\n"))
			}
		}
		lines = lines[max(0, len(lines)-12):]
		r.logf("%s's last log lines:\n  %s", inc.name(), strings.Join(lines, "\n  "))
	}
	// ZooKeeper says when it was slow (an fsync of its transaction log
	// over a second, a session expired, a client's connection closed).
	if z, ok := r.coord.(*zkServer); ok {
		var lines []string
		for line := range strings.Lines(z.Tail(1 << 16)) {
			if strings.Contains(line, "WARN") || strings.Contains(line, "ERROR") {
				lines = append(lines, strings.TrimRight(line, "\n"))
			}
		}
		if lines = lines[max(0, len(lines)-12):]; len(lines) > 0 {
			r.logf("ZooKeeper's last warnings:\n  %s", strings.Join(lines, "\n  "))
		}
	}
}

// maxFaultPause is the longest pause the nemesis makes after a fault.
const maxFaultPause = 3 * time.Second

// takeRequired removes from queue, the faults still to inject, the one to
// inject next and returns it; ok is false when none fits in left, the time
// until the end of the run. While left holds every queued fault at its
// estimate, with a pause after each and the quiet end, that is the first in
// queue order (any order then fits); once it does not, the longest that
// fits, so that a long fault is not left for last, when it no longer fits,
// while shorter ones use up the time.
func takeRequired(queue []string, left time.Duration, est func(string) time.Duration) (kind string, rest []string, ok bool) {
	fits := func(k string) bool { return est(k)+quiet <= left }
	if queueNeed(queue, est) <= left {
		return takeFitting(queue, fits)
	}
	best := -1
	for i, k := range queue {
		if fits(k) && (best < 0 || est(k) > est(queue[best])) {
			best = i
		}
	}
	if best < 0 {
		return "", queue, false
	}
	kind = queue[best]
	return kind, slices.Delete(queue, best, best+1), true
}

// longest is the kind of queue with the longest estimate (the first of
// those).
func longest(queue []string, est func(string) time.Duration) string {
	return slices.MaxFunc(queue, func(a, b string) int { return cmp.Compare(est(a), est(b)) })
}

// queueNeed is how long the faults of queue take at their estimates, with
// the longest pause after each and the quiet end.
func queueNeed(queue []string, est func(string) time.Duration) time.Duration {
	need := quiet
	for _, k := range queue {
		need += est(k) + maxFaultPause
	}
	return need
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

// pick chooses a node of a group of that kind ("": of any group) that has
// a running process, or any node of it when none has.
func (r *runner) pick(rnd *rand.Rand, kind string) *node {
	if kind == groupMain {
		kind = r.cfg.Coordinator
	}
	var alive, all []*node
	for _, n := range r.nodes {
		if kind != "" && n.grp.kind != kind {
			continue
		}
		all = append(all, n)
		if n.cur.Load() != nil {
			alive = append(alive, n)
		}
	}
	if len(alive) == 0 {
		return all[rnd.IntN(len(all))]
	}
	return alive[rnd.IntN(len(alive))]
}

// pickClock chooses a node of the main group whose clock offset is to
// become to(its offset now), preferring the nodes for which the spread of
// the group's offsets — and of the offsets a restart gives, 0 and behind —
// stays within clockSpread, else the one that keeps it smallest. A node
// whose clock is further than mainClockSkew from its peers' is refused its
// lease (at start: serve exits), so the nemesis keeps the clocks it moves
// within the bound of each other and of a node it restarts.
func (r *runner) pickClock(rnd *rand.Rand, to func(now time.Duration) time.Duration) *node {
	var cands []*node
	var offs []time.Duration
	for _, n := range r.nodes {
		if n.grp.kind != r.cfg.Coordinator {
			continue
		}
		if inc := n.cur.Load(); inc != nil {
			cands = append(cands, n)
			offs = append(offs, time.Duration(inc.clock.Load()))
		}
	}
	if len(cands) == 0 {
		return r.pick(rnd, groupMain)
	}
	spreads := make([]time.Duration, len(cands))
	for i := range cands {
		lo, hi := min(to(offs[i]), behind, 0), max(to(offs[i]), behind, 0)
		for j, o := range offs {
			if j != i {
				lo, hi = min(lo, o), max(hi, o)
			}
		}
		spreads[i] = hi - lo
	}
	return cands[pickSpread(rnd, spreads, clockSpread)]
}

// pickSpread picks at random an index whose spread is within limit, else
// the first with the smallest spread.
func pickSpread(rnd *rand.Rand, spreads []time.Duration, limit time.Duration) int {
	var fit []int
	best := 0
	for i, s := range spreads {
		if s <= limit {
			fit = append(fit, i)
		}
		if s < spreads[best] {
			best = i
		}
	}
	if len(fit) > 0 {
		return fit[rnd.IntN(len(fit))]
	}
	return best
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
		n := r.pickClock(rnd, func(now time.Duration) time.Duration { return now + shift })
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
		if d, perr := time.ParseDuration(off); err == nil && perr == nil {
			inc.setClock(d)
		}
		if err != nil {
			f.note, f.failed = fmt.Sprintf("%s clock %+v failed: %v", inc.name(), shift, err), true
		}
	case "kill", "restart-behind":
		var offset time.Duration
		if kind == "restart-behind" {
			offset = behind
		}
		n := r.pick(rnd, "")
		if kind == "restart-behind" {
			n = r.pickClock(rnd, func(time.Duration) time.Duration { return offset })
		}
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
	case "etcd-pause", "zk-pause", "consul-pause", "nats-pause":
		f.start = r.now()
		pid := r.coord.pid()
		err := r.coord.pause()
		sleepCtx(ctx, hold)
		cerr := r.coord.resume()
		f.end = r.now()
		f.note = fmt.Sprintf("%s (pid %d) stopped for %.1fs", coordName(r.cfg.Coordinator), pid, time.Duration(f.end-f.start).Seconds())
		if err != nil || cerr != nil {
			f.note, f.failed = f.note+fmt.Sprintf(" FAILED: %v %v", err, cerr), true
		}
	case "zk-restart":
		z := r.coord.(*zkServer)
		f.start = r.now()
		pid := z.pid()
		z.kill()
		sleepCtx(ctx, hold)
		err := z.Restart(ctx, false)
		f.end = r.now()
		f.note = fmt.Sprintf("ZooKeeper (pid %d) killed (-9), started again with its data after %.1fs", pid, time.Duration(f.end-f.start).Seconds())
		if err != nil {
			f.note, f.failed = f.note+fmt.Sprintf(" FAILED: %v", err), true
		} else {
			f.note += fmt.Sprintf(" (pid %d)", z.pid())
		}
	case "etcd-partition", "zk-partition", "consul-partition", "nats-partition":
		n := r.pick(rnd, groupMain)
		f.node, f.start = n.idx, r.now()
		if inc := n.cur.Load(); inc != nil {
			f.inc = inc.id
		}
		n.coordProxy.Cut()
		sleepCtx(ctx, hold)
		n.coordProxy.Heal()
		f.end = r.now()
		f.note = fmt.Sprintf("%s cut off from %s for %.1fs", nodeName(n.idx), coordName(r.cfg.Coordinator), time.Duration(f.end-f.start).Seconds())
	case "pg-restart":
		f.start = r.now()
		r.pgProxy.Cut()
		r.pgProxy.Reset()
		sleepCtx(ctx, pgDown)
		r.pgProxy.Heal()
		f.end = r.now()
		f.note = fmt.Sprintf("PostgreSQL connections reset, unreachable for %.1fs", time.Duration(f.end-f.start).Seconds())
	case "redis-restart-nosave", "redis-keys-deleted", "sql-rollback", "zk-data-loss", "consul-data-loss", "nats-data-loss":
		r.coordinatorLoss(ctx, kind, &f)
	case "truncated-state":
		r.truncatedState(ctx, rnd, &f)
	case "other-layout", "other-space", "config-typo":
		r.misconfigured(ctx, kind, rnd, &f)
	case "clock-ahead":
		r.clockAhead(ctx, &f)
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
// under a lease it holds — every probe for healthyFor, probes 50 ms apart,
// each followed by a status showing the lease held — and returns when that
// began, or 0 when that did not happen within healthWait. One answer is not
// enough: a node whose clock stepped back answers from its newest tick
// until that tick's sequence runs out, and a node on a lost lease's
// reservation answers until the reservation runs out, which may be well
// after the fault. The probes are recorded and checked like every other
// request.
func (r *runner) waitHealthy(ctx context.Context, rec *recorder) int64 {
	deadline := time.Now().Add(r.healthWait())
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
				if ok = r.call(ctx, inc, q, rec); ok {
					st, err := r.status(ctx, inc.url)
					ok = err == nil && st.Held
				}
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
