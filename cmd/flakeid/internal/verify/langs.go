package verify

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/flakeid/flakeid/internal/faultnet"
	"github.com/flakeid/flakeid/internal/humanize"
)

// The clients of other languages (issue 47). For each language of
// Config.Languages the verifier runs that client's driver program
// (clients/python/verify/driver.py, clients/js/verify/driver.mjs,
// clients/java/src/verify/java/…/VerifyDriver.java) in two roles:
//
//   - a caller: the client with a Snowflake buffer over the main group's
//     nodes, each call one line on its stdin answered by one line on its
//     stdout, made on the fixed-rate schedule of the Go clients (paced.go)
//     and measured the same way;
//   - a local generator: it leases a worker id from the main group and
//     prints the IDs it makes in-process, a batch a line headed by its wall
//     clock before the batch; the nemesis kills it (-9, local-kill) and
//     stops it (SIGSTOP) past its reservation (local-stop), and it is
//     started again after a kill.
//
// Every ID either role hands out is recorded and checked with the rest.
// The drivers reach the nodes through front doors: a stable address per
// node that forwards each connection to the node's current process (a
// restarted node listens on another port), closed at once while the node
// has none.

// language is a client language the verifier drives.
type language struct {
	name     string
	buffered api // its caller's calls
	local    api // its local generators' batches
}

var languageInfo = map[string]language{
	"python": {"python", apiPyBuffered, apiPyLocal},
	"js":     {"js", apiJSBuffered, apiJSLocal},
	"java":   {"java", apiJavaBuffered, apiJavaLocal},
}

// Languages are the client languages verify can drive, in report order.
func Languages() []string { return []string{"python", "js", "java"} }

// localRate is how many IDs a local generator makes a second, in batches
// every localBatchEvery: enough to catch an ID made past a fence, little
// enough not to load the machine.
const (
	localRate       = 2000
	localBatchEvery = 10 * time.Millisecond
)

// driverGrace is how long past its deadline the verifier waits for a
// caller's answer before it counts the call as timed out (the driver's own
// timeout answers first unless its process stalls).
const driverGrace = 5 * time.Second

// langRun is the languages' part of a run.
type langRun struct {
	doors    []*faultnet.Proxy // one per node of the main group
	javaCP   string            // the compiled Java client and driver
	callers  []*caller
	locals   []*localGen
	mu       sync.Mutex
	recs     []*recorder // the local generators' processes' recorders
	startErr map[string]string
}

// endpoints are the front doors' URLs.
func (l *langRun) endpoints() []string {
	var eps []string
	for _, d := range l.doors {
		eps = append(eps, "http://"+d.Addr())
	}
	return eps
}

// startLanguages opens the front doors, builds what a language needs
// (Java's classes) and starts the callers; the local generators start with
// the load (runLocals).
func (r *runner) startLanguages(ctx context.Context) error {
	if len(r.cfg.Languages) == 0 {
		return nil
	}
	l := &langRun{startErr: map[string]string{}}
	r.langs = l
	for _, n := range r.nodes {
		if n.grp.kind != r.cfg.Coordinator {
			continue
		}
		d, err := faultnet.ListenTo(func() string {
			if inc := n.cur.Load(); inc != nil {
				return strings.TrimPrefix(inc.url, "http://")
			}
			return ""
		})
		if err != nil {
			return fmt.Errorf("verify: a front door for %s: %w", nodeName(n.idx), err)
		}
		l.doors = append(l.doors, d)
	}
	for _, name := range r.cfg.Languages {
		if name == "java" {
			if err := r.buildJava(ctx); err != nil {
				return err
			}
		}
		c, err := r.startCaller(languageInfo[name])
		if err != nil {
			return err
		}
		l.callers = append(l.callers, c)
		l.locals = append(l.locals, &localGen{lang: languageInfo[name]})
	}
	return nil
}

// buildJava compiles the Java client with its driver into the run's
// directory.
func (r *runner) buildJava(ctx context.Context) error {
	root := filepath.Join(r.cfg.ClientsDir, "java", "src")
	out := filepath.Join(r.dir, "java-driver")
	args := []string{"--release", "17", "-encoding", "UTF-8", "-d", out}
	for _, sub := range []string{"main", "verify"} {
		err := filepath.WalkDir(filepath.Join(root, sub), func(p string, d os.DirEntry, err error) error {
			if err == nil && strings.HasSuffix(p, ".java") {
				args = append(args, p)
			}
			return err
		})
		if err != nil {
			return fmt.Errorf("verify: the Java client's sources (--clients-dir %s): %w", r.cfg.ClientsDir, err)
		}
	}
	if b, err := exec.CommandContext(ctx, "javac", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("verify: compiling the Java client and its driver: %v\n%s", err, b)
	}
	r.langs.javaCP = out
	return nil
}

// driverCmd is the command that runs lang's driver with args.
func (r *runner) driverCmd(lang string, args ...string) *exec.Cmd {
	dir := r.cfg.ClientsDir
	var cmd *exec.Cmd
	switch lang {
	case "python":
		cmd = exec.Command("python3", append([]string{filepath.Join(dir, "python", "verify", "driver.py")}, args...)...)
		cmd.Env = append(os.Environ(), "PYTHONPATH="+filepath.Join(dir, "python", "src"), "PYTHONUNBUFFERED=1")
	case "js":
		cmd = exec.Command("node", append([]string{filepath.Join(dir, "js", "verify", "driver.mjs")}, args...)...)
	default:
		cmd = exec.Command("java", append([]string{"-Xmx256m", "-XX:+UseSerialGC", "-cp", r.langs.javaCP, "io.github.flakeid.client.VerifyDriver"}, args...)...)
	}
	return cmd
}

// caller is a running caller driver: calls go out as "<seq>" lines (or
// "<seq> <timeout ms>" for a call with another timeout than the driver's)
// and come back as "<seq> <id>" or "<seq> ! <class> <message>".
type caller struct {
	lang   language
	cmd    *exec.Cmd
	stderr *tailBuffer
	mu     sync.Mutex
	in     io.WriteCloser
	next   uint64
	wait   map[uint64]chan string
	dead   chan struct{} // closed when its stdout ends
}

// startCaller starts lang's caller over the front doors, with a buffer as
// the buffered Go client's, the Go clients' timeouts (Deadline/2 an
// attempt, Deadline a call).
func (r *runner) startCaller(lang language) (*caller, error) {
	args := []string{"caller", strconv.FormatInt(r.cfg.Deadline.Milliseconds()/2, 10), strconv.FormatInt(r.cfg.Deadline.Milliseconds(), 10),
		strconv.Itoa(min(r.cfg.Rate*bufferSeconds, 100_000))}
	c := &caller{lang: lang, cmd: r.driverCmd(lang.name, append(args, r.langs.endpoints()...)...), stderr: &tailBuffer{},
		wait: map[uint64]chan string{}, dead: make(chan struct{})}
	c.cmd.Stderr = c.stderr
	var err error
	if c.in, err = c.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	out, err := c.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := c.cmd.Start(); err != nil {
		return nil, fmt.Errorf("verify: the %s caller: %w", lang.name, err)
	}
	go func() {
		defer close(c.dead)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			seq, rest, _ := strings.Cut(sc.Text(), " ")
			n, err := strconv.ParseUint(seq, 10, 64)
			if err != nil {
				continue
			}
			c.mu.Lock()
			ch := c.wait[n]
			delete(c.wait, n)
			c.mu.Unlock()
			if ch != nil {
				ch <- rest
			}
		}
	}()
	r.logf("%s caller started (pid %d)", lang.name, c.cmd.Process.Pid)
	return c, nil
}

// errDriverGone is a call to a caller whose process has ended.
var errDriverGone = errors.New("the driver process has ended")

// call sends one call, with the driver's own timeout or (timeout > 0)
// that one, and returns the driver's answer (the line past the sequence
// number), waiting for it at most wait.
func (c *caller) call(ctx context.Context, timeout, wait time.Duration) (string, error) {
	ch := make(chan string, 1)
	c.mu.Lock()
	c.next++
	seq := c.next
	c.wait[seq] = ch
	var err error
	if timeout > 0 {
		_, err = fmt.Fprintf(c.in, "%d %d\n", seq, timeout.Milliseconds())
	} else {
		_, err = fmt.Fprintf(c.in, "%d\n", seq)
	}
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.wait, seq)
		c.mu.Unlock()
	}()
	if err != nil {
		return "", fmt.Errorf("%w: %v", errDriverGone, err)
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case ans := <-ch:
		return ans, nil
	case <-c.dead:
		return "", fmt.Errorf("%w: %s", errDriverGone, c.stderr.String())
	case <-t.C:
		return "", context.DeadlineExceeded
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// stop ends the caller: its stdin closes, and it is killed if it has not
// exited within a few seconds.
func (c *caller) stop() {
	c.in.Close()
	select {
	case <-c.dead:
	case <-time.After(3 * time.Second):
	}
	c.cmd.Process.Kill()
	c.cmd.Wait()
}

// driverCall is one call of a caller, recorded as the Go clients' are.
func (r *runner) driverCall(ctx context.Context, c *caller, q request, rec *recorder) {
	ans, err := c.call(ctx, 0, r.cfg.Deadline+driverGrace)
	q.end = r.now()
	if ctx.Err() != nil {
		return
	}
	if err != nil {
		why := errOther
		if errors.Is(err, context.DeadlineExceeded) {
			why = errTimeout
		}
		rec.fail(q, why)
		r.sample(q.api, why, err.Error())
		return
	}
	if rest, ok := strings.CutPrefix(ans, "! "); ok {
		class, msg, _ := strings.Cut(rest, " ")
		why := errOther
		switch class {
		case "timeout":
			why = errTimeout
		case "unavailable":
			why = errUnavailable
		}
		rec.fail(q, why)
		r.sample(q.api, why, msg)
		return
	}
	id, err := strconv.ParseInt(ans, 10, 64)
	if err != nil {
		rec.fail(q, errBadAnswer)
		r.sample(q.api, errBadAnswer, ans)
		return
	}
	rec.ack(q, -1, []rng{{id, 1, 1}}, 1)
}

// warmUpCaller makes one call of a caller before its schedule starts, as
// warmUp does for a Go client.
func (r *runner) warmUpCaller(ctx context.Context, c *caller, rec *recorder) {
	start := r.now()
	ans, err := c.call(ctx, callTimeout, callTimeout+driverGrace)
	id, perr := strconv.ParseInt(ans, 10, 64)
	if err != nil || perr != nil {
		r.logf("warming up the %s caller: %v %s", c.lang.name, err, ans)
		return
	}
	rec.ack(request{start: start, end: r.now(), inc: -1, node: -1, api: apiProbe}, -1, []rng{{id, 1, 1}}, 1)
}

// localGen is a language's local generator: one process at a time,
// started again when it exits.
type localGen struct {
	lang language
	mu   sync.Mutex
	cur  *exec.Cmd // the running process, nil between two
	// What happened to it: processes started, kills, stops, batches that
	// failed, IDs, and a sample of the failures.
	procs, kills, stops, failed int
	ids                         int64
	sample                      string
	longest                     time.Duration // the longest time between two batches read
}

// runLocals runs the languages' local generators until ctx ends.
func (r *runner) runLocals(ctx context.Context, wg *sync.WaitGroup) {
	if r.langs == nil {
		return
	}
	for _, g := range r.langs.locals {
		wg.Go(func() { r.runLocal(ctx, g) })
	}
}

// runLocal keeps one process of g running until ctx ends.
func (r *runner) runLocal(ctx context.Context, g *localGen) {
	for n := 1; ctx.Err() == nil; n++ {
		owner := fmt.Sprintf("verify-%s-%d", g.lang.name, n)
		cmd := r.driverCmd(g.lang.name, append([]string{"local", owner, strconv.Itoa(localRate)}, r.langs.endpoints()...)...)
		stderr := &tailBuffer{}
		cmd.Stderr = stderr
		out, err := cmd.StdoutPipe()
		if err == nil {
			err = cmd.Start()
		}
		if err != nil {
			r.logf("%s local generator: %v", g.lang.name, err)
			sleepCtx(ctx, time.Second)
			continue
		}
		g.mu.Lock()
		g.cur = cmd
		g.procs++
		g.mu.Unlock()
		rec := &recorder{}
		r.langs.mu.Lock()
		r.langs.recs = append(r.langs.recs, rec)
		r.langs.mu.Unlock()
		done := make(chan struct{})
		go func() {
			defer close(done)
			r.readLocal(g, out, rec)
		}()
		waited := make(chan struct{})
		go func() {
			select {
			case <-ctx.Done():
				cmd.Process.Kill()
			case <-waited:
			}
		}()
		<-done
		err = cmd.Wait()
		close(waited)
		g.mu.Lock()
		g.cur = nil
		g.mu.Unlock()
		if ctx.Err() == nil {
			if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
				r.logf("%s local generator %s exited by itself (%v): %s", g.lang.name, owner, err, stderr.String())
			}
			sleepCtx(ctx, 200*time.Millisecond)
		}
	}
}

// readLocal records a local generator's batches: "<unix ns> <id> <id> …"
// (the wall clock read before the batch), or "! <unix ns> <message>" for a
// batch that failed. Only whole lines count.
func (r *runner) readLocal(g *localGen, out io.Reader, rec *recorder) {
	wall0 := r.t0.UnixNano()
	br := bufio.NewReaderSize(out, 64<<10)
	last := int64(0)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return // a last line without its newline was cut short by a kill: its last ID may be a prefix
		}
		now := r.now()
		line = strings.TrimSuffix(line, "\n")
		if rest, ok := strings.CutPrefix(line, "! "); ok {
			ts, msg, _ := strings.Cut(rest, " ")
			t, _ := strconv.ParseInt(ts, 10, 64)
			rec.fail(request{start: t - wall0, end: now, inc: -1, node: -1, api: g.lang.local}, errUnavailable)
			g.mu.Lock()
			g.failed++
			if g.sample == "" {
				g.sample = msg
			}
			g.mu.Unlock()
			continue
		}
		fields := strings.Fields(line)
		if len(fields) < 2 {
			continue // "ready" and the like
		}
		t, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil {
			continue
		}
		ids := make([]int64, 0, len(fields)-1)
		for _, f := range fields[1:] {
			id, err := strconv.ParseInt(f, 10, 64)
			if err != nil {
				ids = nil // not a batch
				break
			}
			ids = append(ids, id)
		}
		if len(ids) == 0 {
			continue
		}
		// A record per increasing run: a batch that changed leases may go
		// on lower (a new worker id, or a node's clock behind).
		q := request{start: t - wall0, end: now, inc: -1, node: -1, api: g.lang.local}
		for lo := 0; lo < len(ids); {
			hi := lo + 1
			for hi < len(ids) && ids[hi] > ids[hi-1] {
				hi++
			}
			ranges := make([]rng, 0, hi-lo)
			for _, id := range ids[lo:hi] {
				ranges = append(ranges, rng{id, 1, 1})
			}
			rec.ack(q, -1, ranges, int64(len(ranges)))
			lo = hi
		}
		g.mu.Lock()
		g.ids += int64(len(ids))
		if last > 0 {
			g.longest = max(g.longest, time.Duration(now-last))
		}
		g.mu.Unlock()
		last = now
	}
}

// localStopFor is how long local-stop holds a local generator: past its
// lease's reservation (the main group's reserve-ahead from its last
// renewal) and the lease's TTL, so that the server has closed the lease and
// another process may hold its worker id when it runs again.
func (r *runner) localStopFor() time.Duration {
	return mainReserveAhead + r.cfg.LeaseTTL + time.Second
}

// injectLocal kills -9 (local-kill) or stops past its reservation
// (local-stop) the process of a local generator picked at random.
func (r *runner) injectLocal(ctx context.Context, kind string, pick int) fault {
	f := fault{kind: kind, node: -1, inc: -1, start: r.now()}
	g := r.langs.locals[pick]
	g.mu.Lock()
	cmd := g.cur
	g.mu.Unlock()
	if cmd == nil {
		f.end, f.note, f.failed = r.now(), g.lang.name+" local generator had no process", true
		return f
	}
	pid := cmd.Process.Pid
	switch kind {
	case "local-kill":
		err := cmd.Process.Kill()
		f.note = fmt.Sprintf("%s local generator (pid %d) killed (-9)", g.lang.name, pid)
		if err != nil {
			f.note, f.failed = f.note+fmt.Sprintf(" FAILED: %v", err), true
		}
		g.mu.Lock()
		g.kills++
		g.mu.Unlock()
	case "local-stop":
		err := cmd.Process.Signal(syscall.SIGSTOP)
		sleepCtx(ctx, r.localStopFor())
		cerr := cmd.Process.Signal(syscall.SIGCONT)
		f.note = fmt.Sprintf("%s local generator (pid %d) stopped for %.1fs", g.lang.name, pid, time.Duration(r.now()-f.start).Seconds())
		if err != nil || cerr != nil {
			f.note, f.failed = f.note+fmt.Sprintf(" FAILED: %v %v", err, cerr), true
		}
		g.mu.Lock()
		g.stops++
		g.mu.Unlock()
	}
	f.end = r.now()
	return f
}

// stopLanguages stops the callers and closes the front doors (the local
// generators end with the load's context).
func (r *runner) stopLanguages() {
	if r.langs == nil {
		return
	}
	for _, c := range r.langs.callers {
		c.stop()
	}
	for _, d := range r.langs.doors {
		d.Close()
	}
}

// localRows adds the local generators' table and checks to the report:
// each language's generators made IDs (the duplicates check holds them with
// every other ID).
func (r *runner) localRows(rep *report) {
	if r.langs == nil {
		return
	}
	rep.locals.head = []string{"language", "processes", "IDs", "killed (-9)", "stopped past the reservation", "longest without a batch", "failed batches (a sample)"}
	var missing []string
	for _, g := range r.langs.locals {
		g.mu.Lock()
		sample := ""
		if g.failed > 0 {
			sample = fmt.Sprintf("%d (%s)", g.failed, g.sample[:min(len(g.sample), 120)])
		}
		rep.locals.add(g.lang.name, strconv.Itoa(g.procs), humanize.Thousands(g.ids), strconv.Itoa(g.kills), strconv.Itoa(g.stops),
			g.longest.Round(time.Millisecond).String(), sample)
		if g.ids == 0 {
			missing = append(missing, g.lang.name)
		}
		g.mu.Unlock()
	}
	res, verdict := "every language's local generators made IDs", "ok"
	if len(missing) > 0 {
		res, verdict = "none from "+strings.Join(missing, ", "), "**FAIL**"
		rep.failed = true
	}
	rep.checks.add("the local generators of every language made IDs, checked with the rest (duplicates, per worker id order)", res, verdict)
}

// tailBuffer keeps the last 4 KiB written to it (a driver's stderr).
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > 4096 {
		t.buf = t.buf[len(t.buf)-4096:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.buf))
}
