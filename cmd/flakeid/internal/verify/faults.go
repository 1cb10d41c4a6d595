package verify

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/flakeid/flakeid/snowflake"
)

// The faults of lost state and wrong configuration: a coordinator that
// loses its data or goes back to an older copy (the nodes must notice, stop
// issuing and start again only past a quarantine), a state file cut short
// (the restart must be refused until `flakeid recover`), a node with
// another layout and a config with a misspelt key (refused at start).

// coordinatorLoss runs redis-restart-nosave, redis-keys-deleted,
// sql-rollback, zk-data-loss and consul-data-loss: the group's nodes keep
// running and must recover by themselves.
func (r *runner) coordinatorLoss(ctx context.Context, kind string, f *fault) {
	var err error
	f.lost = true
	switch kind {
	case "redis-restart-nosave":
		old := r.redis.cmd.Process.Pid
		f.start = r.now()
		err = r.redis.restartNoSave(ctx)
		f.end = r.now()
		f.note = fmt.Sprintf("redis-server (pid %d) shut down with SHUTDOWN NOSAVE, started again empty (pid %d) after %.1fs",
			old, r.redis.cmd.Process.Pid, time.Duration(f.end-f.start).Seconds())
		f.dc = r.groupDC(groupRedis)
	case "redis-keys-deleted":
		f.start = r.now()
		var n int
		n, err = r.redis.deleteKeys(ctx)
		f.end = r.now()
		f.note = fmt.Sprintf("the keys of the prefix %q deleted (%d)", redisPrefix, n)
		f.dc = r.groupDC(groupRedis)
		if err == nil && n == 0 {
			err = fmt.Errorf("no key of the prefix %q to delete", redisPrefix)
		}
	case "sql-rollback":
		t0 := r.now()
		var copied, restored int64
		if copied, err = r.snapshotSQL(ctx); err == nil {
			sleepCtx(ctx, rollbackAfter)
			f.start = r.now()
			restored, err = r.restoreSQL(ctx)
		}
		if f.start == 0 {
			f.start = t0
		}
		f.end = r.now()
		f.note = fmt.Sprintf("table %s restored to its copy of %.1fs before (%d rows copied, %d restored)",
			r.sqlTables[0], time.Duration(f.start-t0).Seconds(), copied, restored)
		f.dc = r.groupDC(groupSQL)
	case "zk-data-loss", "consul-data-loss", "nats-data-loss":
		f.start = r.now()
		f.note, err = r.coord.loseData(ctx)
		f.end = r.now()
		f.dc = r.groupDC(r.cfg.Coordinator)
	}
	if err != nil {
		f.note, f.failed = f.note+"; FAILED: "+err.Error(), true
	}
	// The nodes notice at their next renewal: let them, so that the
	// recovery the nemesis measures is from the quarantine, not from
	// before the loss was seen.
	sleepCtx(ctx, 2*min(time.Second, r.cfg.LeaseTTL/4)+200*time.Millisecond)
}

// groupDC is the datacenter of the group of that kind.
func (r *runner) groupDC(kind string) int64 {
	for _, g := range r.groups {
		if g.kind == kind {
			return g.dc
		}
	}
	return -1
}

// truncatedState kills a node of the file group, truncates its state file
// to half its size and restarts it with the same flags, which must be
// refused; then truncates it to 0 bytes and restarts it, which must be
// refused too; then runs `flakeid recover` and restarts it, which must
// serve.
func (r *runner) truncatedState(ctx context.Context, rnd *rand.Rand, f *fault) {
	n := r.pick(rnd, groupFile)
	f.node, f.start = n.idx, r.now()
	old := r.killNode(n)
	f.note = nodeName(n.idx) + " had no process"
	if old != nil {
		f.inc = old.id
		f.note = old.name() + " killed (-9)"
	}
	path := stateFile(n)
	st, err := os.Stat(path)
	if err != nil {
		f.note, f.failed = f.note+"; FAILED: "+err.Error(), true
		r.restart(ctx, n, f)
		return
	}
	for _, size := range []int64{st.Size() / 2, 0} {
		if err := os.Truncate(path, size); err != nil {
			f.note, f.failed = f.note+"; FAILED: "+err.Error(), true
			r.restart(ctx, n, f)
			return
		}
		r.extraStarts++
		what := fmt.Sprintf("%s restarted with its workers.db truncated from %d to %d bytes", nodeName(n.idx), st.Size(), size)
		ref, err := r.tryStart(ctx, "truncated-state", what, r.nodeArgs(n), []string{"workers.db"},
			filepath.Join(n.dir, fmt.Sprintf("refused.%d.log", r.extraStarts)))
		if err != nil {
			f.end, f.note, f.failed = r.now(), f.note+"; FAILED: starting it: "+err.Error(), true
			return
		}
		r.addRefusal(ref)
		f.note += fmt.Sprintf("; workers.db truncated from %d to %d bytes: the restart %s", st.Size(), size, ref.outcome())
	}
	out, err := r.recoverNode(ctx, n)
	if err != nil {
		f.note, f.failed = f.note+fmt.Sprintf("; flakeid recover FAILED: %v: %s", err, strings.Join(lastLines(out, 5, 800), " / ")), true
		r.restart(ctx, n, f)
		return
	}
	f.note += "; `flakeid recover` ran"
	r.restart(ctx, n, f)
}

// restart starts node n again (three attempts) and completes f.
func (r *runner) restart(ctx context.Context, n *node, f *fault) {
	var inc *incarnation
	var err error
	for attempt := 0; attempt < 3 && ctx.Err() == nil; attempt++ {
		if inc, err = r.startNode(ctx, n, 0); err == nil {
			break
		}
		r.logf("restarting %s: %v", nodeName(n.idx), err)
	}
	f.end = r.now()
	if inc == nil {
		f.note, f.failed = f.note+"; restart FAILED", true
		return
	}
	f.note += fmt.Sprintf("; %s serving on %s after %.1fs", inc.name(), inc.url, time.Duration(f.end-f.start).Seconds())
}

// recoverArgs are the flags of `flakeid recover` for node n's data
// directory: it moves the damaged workers.db aside and starts it afresh
// past a floor of now + the reservation + the default clock-skew bound,
// which the file group's nodes use (its segments are in PostgreSQL: no
// --tag-floor).
func recoverArgs(n *node) []string {
	return []string{"recover", "--data-dir", n.dir}
}

// recoverNode runs `flakeid recover` on node n's data directory.
func (r *runner) recoverNode(ctx context.Context, n *node) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, r.cfg.Bin, recoverArgs(n)...)
	cmd.Env = childEnv()
	cmd.SysProcAttr = procAttr()
	out, err := cmd.CombinedOutput()
	r.extraStarts++
	os.WriteFile(filepath.Join(n.dir, fmt.Sprintf("recover.%d.log", r.extraStarts)), out, 0o644)
	return string(out), err
}

// otherLayout is a layout that differs from l in its worker and sequence
// widths — 41/5/4/13 beside the verifier's 41/5/2/12, as in issue 12 —
// with the same epoch and time unit.
// otherSpace is l with one datacenter bit moved to the worker field (or
// back, when l has none): a layout whose IDs overlap l's on every
// datacenter, as issue 25 found.
func otherSpace(l snowflake.Layout) snowflake.Layout {
	o := l
	if l.DatacenterBits > 1 {
		o.DatacenterBits, o.WorkerBits = l.DatacenterBits-1, l.WorkerBits+1
	} else {
		o.DatacenterBits, o.WorkerBits = l.DatacenterBits+1, max(l.WorkerBits-1, 0)
	}
	if n, err := o.Normalize(); err == nil {
		return n
	}
	return otherLayout(l)
}

// randomSpace draws a layout other than l, as an operator's mistake would
// make one: a datacenter bit moved to the worker field (issue 25), more
// worker or sequence bits, a preset, another epoch or another time unit.
func randomSpace(rnd *rand.Rand, l snowflake.Layout) snowflake.Layout {
	for range 8 {
		var o snowflake.Layout
		switch rnd.IntN(5) {
		case 0:
			o = otherSpace(l)
		case 1:
			o = otherLayout(l)
		case 2:
			names := []string{"default", "twitter", "sonyflake", "jssafe"}
			o, _ = snowflake.Preset(names[rnd.IntN(len(names))])
		case 3:
			o = l
			o.Epoch = l.Epoch.AddDate(-1-rnd.IntN(5), 0, 0)
		default:
			o = l
			o.TimeUnit = 10 * l.TimeUnit
		}
		if n, err := o.Normalize(); err == nil && n.String() != l.String() {
			return n
		}
	}
	return otherSpace(l)
}

// clockAhead starts a node whose clock runs an hour ahead three times in a
// row on the main group's coordinator and datacenter, as a restart loop
// would. Each start must be refused; afterwards no high-water mark of the
// datacenter may lie more than a minute ahead (a refused start writes
// nothing), which the last refusal carries.
func (r *runner) clockAhead(ctx context.Context, f *fault) {
	f.start = r.now()
	mainURL := coordURL(r.cfg.Coordinator, r.coord.addr())
	var last refusal
	for i := range 3 {
		r.extraStarts++
		dir := filepath.Join(r.dir, fmt.Sprintf("extra%d", r.extraStarts))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			f.end, f.note, f.failed = r.now(), err.Error(), true
			return
		}
		args := append(r.serveArgs(dir), "--coordinator", mainURL, "--datacenter", "0", "--max-clock-skew", mainClockSkew.String(), "--reserve-ahead", mainReserveAhead.String(),
			"--test-clock-offset=1h")
		args = append(args, r.cfg.LayoutArgs...)
		what := fmt.Sprintf("a node with its clock 1 h ahead on the main group's %s (start %d of 3)", coordName(r.cfg.Coordinator), i+1)
		ref, err := r.tryStart(ctx, "clock-ahead", what, args, []string{"clock skew"}, filepath.Join(dir, "log"))
		if err != nil {
			f.end, f.note, f.failed = r.now(), fmt.Sprintf("%s: could not be started: %v", what, err), true
			return
		}
		if i < 2 {
			r.addRefusal(ref)
		}
		last = ref
	}
	last.marks = r.marksAhead(ctx, mainURL, time.Minute)
	r.addRefusal(last)
	f.end = r.now()
	f.note = "3 starts 1 h ahead: " + last.outcome()
}

// marksAhead reads the high-water marks of datacenter 0 of the coordinator
// at url with `flakeid workers ls --json` and says which lies more than
// limit ahead of this machine's clock ("" when none does).
func (r *runner) marksAhead(ctx context.Context, url string, limit time.Duration) string {
	dir := filepath.Join(r.dir, "marks")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err.Error()
	}
	cmd := exec.CommandContext(ctx, r.cfg.Bin, "workers", "ls", "--json", "--coordinator", url, "--datacenter", "0", "--data-dir", dir)
	cmd.Env = childEnv()
	out, err := cmd.Output()
	if err != nil {
		return fmt.Sprintf("flakeid workers ls failed: %v", err)
	}
	now := time.Now()
	var ahead []string
	for line := range strings.Lines(string(out)) {
		var row struct {
			Worker    int64  `json:"worker"`
			HighWater string `json:"high_water"`
		}
		if err := json.Unmarshal([]byte(line), &row); err != nil {
			return fmt.Sprintf("flakeid workers ls printed %q: %v", line, err)
		}
		hw, err := time.Parse(time.RFC3339Nano, row.HighWater)
		if err == nil && hw.Sub(now) > limit {
			ahead = append(ahead, fmt.Sprintf("worker %d at %s (%v ahead)", row.Worker, row.HighWater, hw.Sub(now).Round(time.Second)))
		}
	}
	if len(ahead) > 0 {
		return "high-water marks moved ahead: " + strings.Join(ahead, ", ")
	}
	return ""
}

func otherLayout(l snowflake.Layout) snowflake.Layout {
	for _, d := range [][2]int{{2, 1}, {1, 0}, {0, 1}, {-1, 0}, {0, -1}} {
		o := l
		o.WorkerBits, o.SequenceBits = l.WorkerBits+d[0], l.SequenceBits+d[1]
		if o.WorkerBits < 0 || o.SequenceBits < 0 || o.TimeBits+o.DatacenterBits+o.WorkerBits+o.SequenceBits > snowflake.MaxBits {
			continue
		}
		if n, err := o.Normalize(); err == nil && n.String() != l.String() {
			return n
		}
	}
	o := l
	o.Epoch = l.Epoch.Add(-l.TimeUnit) // every layout differs from itself by its epoch
	return o
}

// layoutFlags are the flags that give `flakeid serve` layout l exactly.
func layoutFlags(l snowflake.Layout) []string {
	return []string{"--time-bits", strconv.Itoa(l.TimeBits), "--datacenter-bits", strconv.Itoa(l.DatacenterBits),
		"--worker-bits", strconv.Itoa(l.WorkerBits), "--sequence-bits", strconv.Itoa(l.SequenceBits),
		"--epoch", l.Epoch.UTC().Format(time.RFC3339Nano), "--time-unit", l.TimeUnit.String()}
}

// misconfigured starts an extra node that must be refused at start:
// other-layout, on the main group's coordinator and datacenter with another
// layout; config-typo, with a --config file whose "coordinator" key is
// misspelt. Such a node is never one of the cluster's: if it serves, it is
// killed at once, and the report's check fails.
func (r *runner) misconfigured(ctx context.Context, kind string, rnd *rand.Rand, f *fault) {
	r.extraStarts++
	dir := filepath.Join(r.dir, fmt.Sprintf("extra%d", r.extraStarts))
	f.start = r.now()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		f.end, f.note, f.failed = r.now(), err.Error(), true
		return
	}
	mainURL := coordURL(r.cfg.Coordinator, r.coord.addr())
	args := r.serveArgs(dir)
	var what string
	var want []string
	switch kind {
	case "other-layout":
		o := otherLayout(r.layout)
		args = append(args, "--coordinator", mainURL, "--datacenter", "0", "--max-clock-skew", mainClockSkew.String(), "--reserve-ahead", mainReserveAhead.String())
		args = append(args, layoutFlags(o)...)
		what = fmt.Sprintf("a node with the layout %s on the main group's coordinator (%s), which records %s", o, coordName(r.cfg.Coordinator), r.layout)
		want = []string{o.String(), r.layout.String()}
	case "other-space":
		o := randomSpace(rnd, r.layout)
		url := mainURL
		if rnd.IntN(4) > 0 {
			url += "-other"
		}
		dc := rnd.Int64N(int64(1) << min(o.DatacenterBits, 5))
		args = append(args, "--coordinator", url, "--datacenter", strconv.FormatInt(dc, 10), "--max-clock-skew", mainClockSkew.String(), "--reserve-ahead", mainReserveAhead.String())
		args = append(args, layoutFlags(o)...)
		what = fmt.Sprintf("a node with the layout %s on datacenter %d of the namespace %s of the main group's %s, whose registry records %s",
			o, dc, url, coordName(r.cfg.Coordinator), r.layout)
		want = []string{o.String(), r.layout.String()}
	case "config-typo":
		cfgFile := filepath.Join(dir, "flakeid.json")
		b, _ := json.MarshalIndent(map[string]any{"coordinater": mainURL, "datacenter": 0}, "", "  ")
		if err := os.WriteFile(cfgFile, b, 0o644); err != nil {
			f.end, f.note, f.failed = r.now(), err.Error(), true
			return
		}
		args = append(args, "--config", cfgFile)
		args = append(args, r.cfg.LayoutArgs...)
		what = fmt.Sprintf(`a node with --config %s, which says "coordinater" for "coordinator"`, cfgFile)
		want = []string{"coordinater", "coordinator"} // the key, and the one meant
	}
	ref, err := r.tryStart(ctx, kind, what, args, want, filepath.Join(dir, "log"))
	f.end = r.now()
	if err != nil {
		f.note, f.failed = fmt.Sprintf("%s: could not be started: %v", what, err), true
		return
	}
	r.addRefusal(ref)
	f.note = what + ": " + ref.outcome()
}
