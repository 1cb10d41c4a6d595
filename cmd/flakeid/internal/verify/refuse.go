package verify

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/flakeid/flakeid/internal/humanize"
)

// refuseWait is how long a start that must be refused may take to exit.
const refuseWait = 30 * time.Second

// refusal is one start of a node that must not serve — its state file
// damaged, another layout than its coordinator records, a misspelt key in
// its config — and how it went. Right is: it exits at once, non-zero, with
// an error that shows what is wrong (want), and without crashing.
type refusal struct {
	kind string   // the fault kind that made it
	what string   // what was started, in words
	at   int64    // when it was started
	args []string // its command line, after the binary
	want []string // what its output must contain
	log  string   // the file its output went to

	exit     int    // its exit status; -1 when the verifier killed it
	served   string // the address it served on, when it did
	timedOut bool   // it neither served nor exited within refuseWait
	out      string // its output (the first 256 KiB)
	marks    string // what a refused start changed in the coordinator that it must not have; "" when nothing
}

// crashRE finds a Go crash in a process's output: a panic, a fatal runtime
// error, a signal such as SIGBUS, a goroutine dump.
var crashRE = regexp.MustCompile(`(?m)^(panic: |fatal error: |goroutine \d+ \[|unexpected fault address|\[signal )|SIGBUS|SIGSEGV`)

// wrong says why the start was not rightly refused, or "" when it was.
func (f *refusal) wrong() string {
	switch {
	case f.served != "":
		return "it served (on " + f.served + ") instead of being refused"
	case f.timedOut:
		return fmt.Sprintf("it neither served nor exited within %v", refuseWait)
	case f.exit == 0:
		return "it exited with status 0 without serving"
	case crashRE.MatchString(f.out):
		return "it crashed (a Go crash report) instead of refusing with an error"
	case f.marks != "":
		return "it was refused, but " + f.marks
	}
	var missing []string
	for _, w := range f.want {
		if !strings.Contains(f.out, w) {
			missing = append(missing, strconv.Quote(w))
		}
	}
	if len(missing) > 0 {
		return fmt.Sprintf("it exited with status %d, but its output does not show %s", f.exit, strings.Join(missing, " and "))
	}
	return ""
}

// outcome is the refusal in a few words, for the fault timeline.
func (f *refusal) outcome() string {
	if w := f.wrong(); w != "" {
		return "NOT refused as it should be: " + w
	}
	return fmt.Sprintf("refused (exit %d)", f.exit)
}

// tryStart starts the flakeid binary with args, which must be refused, and
// waits until it exits, serves (then it is killed at once) or refuseWait
// passes. Its output goes to log. The error is for a start that could not
// be made at all (or the run ending).
func (r *runner) tryStart(ctx context.Context, kind, what string, args, want []string, log string) (refusal, error) {
	f := refusal{kind: kind, what: what, at: r.now(), args: args, want: want, log: log, exit: -1}
	logFile, err := os.Create(log)
	if err != nil {
		return f, err
	}
	defer logFile.Close()
	pr, pw, err := os.Pipe()
	if err != nil {
		return f, err
	}
	cmd := exec.Command(r.cfg.Bin, args...)
	cmd.Env = childEnv()
	cmd.Stdout, cmd.Stderr = pw, pw
	cmd.SysProcAttr = procAttr()
	err = cmd.Start()
	pw.Close()
	if err != nil {
		pr.Close()
		return f, err
	}
	var buf bytes.Buffer // the reader's until readDone is closed
	served := make(chan string, 1)
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		defer pr.Close()
		br := bufio.NewReader(pr)
		for {
			line, err := br.ReadString('\n')
			logFile.WriteString(line)
			if buf.Len() < 256<<10 {
				buf.WriteString(line)
			}
			if m := servingRE.FindStringSubmatch(line); m != nil {
				select {
				case served <- m[1]:
				default:
				}
			}
			if err != nil {
				return
			}
		}
	}()
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	timer := time.NewTimer(refuseWait)
	defer timer.Stop()
	select {
	case <-exited:
	case a := <-served:
		f.served = a
	case <-timer.C:
		f.timedOut = true
	case <-ctx.Done():
	}
	_ = cmd.Process.Kill() // nothing when it has exited
	<-exited
	<-readDone
	f.out = buf.String()
	if m := servingRE.FindStringSubmatch(f.out); m != nil && f.served == "" {
		f.served, f.timedOut = m[1], false // it served, then exited
	}
	if f.served == "" && !f.timedOut {
		if ctx.Err() != nil {
			return f, ctx.Err()
		}
		f.exit = cmd.ProcessState.ExitCode()
	}
	return f, nil
}

func (r *runner) addRefusal(f refusal) {
	r.mu.Lock()
	r.refusals = append(r.refusals, f)
	r.mu.Unlock()
}

// refusalRows add a check row for each fault kind that starts nodes that
// must be refused, and the details of every start that was not.
func (r *runner) refusalRows(rep *report, h *history) {
	var bad []refusal
	for _, k := range Kinds() {
		row := kindInfo[k].refused
		if row == "" || !slices.Contains(r.cfg.Faults, k) {
			continue
		}
		n, ok := 0, 0
		for _, f := range h.refusals {
			if f.kind != k {
				continue
			}
			n++
			if f.wrong() == "" {
				ok++
			} else {
				bad = append(bad, f)
			}
		}
		switch {
		case n == 0:
			rep.checks.add(row, "none started", "")
		case ok < n:
			rep.failed = true
			rep.checks.add(row, fmt.Sprintf("%d of %d refused", ok, n), "**FAIL**")
		default:
			rep.checks.add(row, fmt.Sprintf("%d of %d refused", ok, n), "ok")
		}
	}
	if len(bad) == 0 {
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n### starts that had to be refused: %s were not\n", humanize.Thousands(int64(len(bad))))
	for _, f := range bad {
		fmt.Fprintf(&b, "- %s %s: %s: %s\n", at(f.at), f.kind, f.what, f.wrong())
		fmt.Fprintf(&b, "    command: flakeid %s\n", strings.Join(f.args, " "))
		if f.log != "" {
			fmt.Fprintf(&b, "    output (in %s), the end:\n", f.log)
		}
		for _, l := range lastLines(f.out, 15, 3000) {
			fmt.Fprintf(&b, "      %s\n", l)
		}
	}
	rep.details = append(rep.details, b.String())
}

// lastLines are the last n lines of s, at most limit bytes in all.
func lastLines(s string, n, limit int) []string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	var size int
	for i := len(lines) - 1; i >= 0; i-- {
		if size += len(lines[i]) + 1; size > limit {
			return lines[i+1:]
		}
	}
	return lines
}
