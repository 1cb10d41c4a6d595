// Command testreport reads `go test -json` on standard input, prints what a
// plain `go test` would (each package's result line, and the whole output of
// every test that failed) as it arrives, and at the end writes a short
// account for the summary that scripts/test.sh and .ci/run print last: the
// failed tests with their first error lines, packages that failed with no
// failed test (a build error, a panic, a time-out) with their first lines,
// and the counts of tests passed, failed and skipped.
//
// Usage:
//
//	go test -json ./... 2>&1 | go run ./scripts/testreport -failures FILE -counts FILE
//
// Lines that are not JSON events (the go command's own messages) are printed
// as they are. It exits 0 unless it cannot read its input or write its files:
// the verdict is go test's exit status.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
)

// event is one test2json event (go doc cmd/test2json), with the build events
// go test -json emits for packages that do not compile.
type event struct {
	Action      string
	Package     string
	Test        string
	Elapsed     float64
	Output      string
	ImportPath  string // build-output and build-fail events
	FailedBuild string
}

// Limits on the account, so that the summary stays short.
const (
	maxFailures   = 20  // failed tests or packages listed
	maxErrorLines = 4   // first error lines per failure
	maxLineLen    = 300 // characters per line
)

// failure is one failed test, or a package that failed on its own.
type failure struct {
	pkg, test string
	elapsed   float64
	lines     []string
}

// report collects the events of one go test run.
type report struct {
	out io.Writer
	// output holds each running test's output lines (key: package + " " +
	// test), printed only if the test fails; pkgOut a package's own lines.
	output  map[string][]string
	partial map[string]string // a key's output after its last newline
	pkgOut  map[string][]string
	build   map[string][]string // build output by import path
	failed  map[string]bool     // packages with a failed test
	running map[string]bool     // tests started and not ended
	fails   []failure
	passed  int
	failedN int
	skipped int
}

func newReport(out io.Writer) *report {
	return &report{out: out, output: map[string][]string{}, partial: map[string]string{},
		pkgOut: map[string][]string{}, build: map[string][]string{}, failed: map[string]bool{}, running: map[string]bool{}}
}

// noise are the framing lines of a test's own output.
func noise(line string) bool {
	for _, p := range []string{"=== RUN", "=== PAUSE", "=== CONT", "=== NAME", "--- FAIL", "--- PASS", "--- SKIP"} {
		if strings.HasPrefix(strings.TrimSpace(line), p) {
			return true
		}
	}
	return false
}

// lines splits output into whole lines, keeping the rest for later.
func (r *report) lines(key, out string) []string {
	text := r.partial[key] + out
	i := strings.LastIndexByte(text, '\n')
	if i < 0 {
		r.partial[key] = text
		return nil
	}
	r.partial[key] = text[i+1:]
	return strings.SplitAfter(text[:i+1], "\n")[:strings.Count(text[:i+1], "\n")]
}

// flush returns a key's remaining partial line as a line of its own.
func (r *report) flush(key string) []string {
	if p := r.partial[key]; p != "" {
		delete(r.partial, key)
		return []string{p + "\n"}
	}
	return nil
}

// firstLines returns up to maxErrorLines of the lines that say something,
// trimmed and clipped.
func firstLines(lines []string) []string {
	var out []string
	for _, l := range lines {
		l = strings.TrimRight(l, "\r\n")
		if strings.TrimSpace(l) == "" || noise(l) {
			continue
		}
		if len(l) > maxLineLen {
			l = l[:maxLineLen] + "…"
		}
		out = append(out, l)
		if len(out) == maxErrorLines {
			break
		}
	}
	return out
}

func (r *report) handle(e event) {
	key := e.Package + " " + e.Test
	switch e.Action {
	case "build-output":
		ls := r.lines("build "+e.ImportPath, e.Output)
		r.build[e.ImportPath] = append(r.build[e.ImportPath], ls...)
		r.print(ls)
	case "build-fail":
		r.build[e.ImportPath] = append(r.build[e.ImportPath], r.flush("build "+e.ImportPath)...)
	case "run":
		r.running[key] = true
	case "output":
		ls := r.lines(key, e.Output)
		if e.Test == "" {
			r.pkgOut[e.Package] = append(r.pkgOut[e.Package], ls...)
			for _, l := range ls {
				if l != "PASS\n" && l != "FAIL\n" && !result(l) {
					fmt.Fprint(r.out, l)
				}
			}
			return
		}
		r.output[key] = append(r.output[key], ls...)
	case "pass", "skip", "fail":
		if e.Test == "" {
			r.endPackage(e)
			return
		}
		delete(r.running, key)
		lines := append(r.output[key], r.flush(key)...)
		delete(r.output, key)
		switch e.Action {
		case "pass":
			r.passed++
		case "skip":
			r.skipped++
		case "fail":
			r.failedN++
			r.failed[e.Package] = true
			r.print(lines)
			first := firstLines(lines)
			if len(first) == 0 && r.failedSubtest(e.Package, e.Test) {
				return // a parent that failed only through its subtests, listed already
			}
			r.fails = append(r.fails, failure{pkg: e.Package, test: e.Test, elapsed: e.Elapsed, lines: first})
		}
	}
}

// failedSubtest reports whether a subtest of test has been listed as failed.
func (r *report) failedSubtest(pkg, test string) bool {
	for _, f := range r.fails {
		if f.pkg == pkg && strings.HasPrefix(f.test, test+"/") {
			return true
		}
	}
	return false
}

// endPackage prints the output of the package's tests that never ended (a
// panic or a time-out is attributed to whichever test ran last) and then the
// package's result line, and records a failure that no failed test
// explains: a build error, a panic, a time-out.
func (r *report) endPackage(e event) {
	var still, stillLines []string
	for k := range r.running {
		if pkg, test, _ := strings.Cut(k, " "); pkg == e.Package {
			still = append(still, test)
		}
	}
	slices.Sort(still)
	for _, test := range still {
		k := e.Package + " " + test
		ls := append(r.output[k], r.flush(k)...)
		r.print(ls)
		stillLines = append(stillLines, ls...)
		delete(r.running, k)
		delete(r.output, k)
	}
	own := append(r.pkgOut[e.Package], r.flush(e.Package+" ")...)
	for _, l := range own {
		if result(l) {
			fmt.Fprint(r.out, l)
		}
	}
	if e.Action != "fail" {
		return
	}
	var said []string
	for _, l := range own {
		if !result(l) && l != "FAIL\n" {
			said = append(said, l)
		}
	}
	f := failure{pkg: e.Package, elapsed: e.Elapsed}
	switch {
	case e.FailedBuild != "":
		f.test = "(build failed: " + e.FailedBuild + ")"
		f.lines = firstLines(r.build[e.FailedBuild])
	case len(still) > 0:
		f.test = "(the package failed while running " + strings.Join(still, ", ") + ")"
		f.lines = firstLines(append(said, stillLines...))
	case !r.failed[e.Package]:
		f.test = "(the package failed outside any test)"
		f.lines = firstLines(said)
	default:
		return
	}
	r.fails = append(r.fails, f)
}

// result reports whether a package's line is its result line ("ok  \tpkg",
// "FAIL\tpkg", "?   \tpkg"), which is printed when the package ends.
func result(l string) bool {
	return strings.HasPrefix(l, "ok  \t") || strings.HasPrefix(l, "FAIL\t") || strings.HasPrefix(l, "?   \t")
}

func (r *report) print(lines []string) {
	for _, l := range lines {
		if !strings.HasPrefix(l, "=== ") {
			fmt.Fprint(r.out, l)
		}
	}
}

// writeFailures writes the account of the failures.
func (r *report) writeFailures(w io.Writer) {
	for i, f := range r.fails {
		if i == maxFailures {
			fmt.Fprintf(w, "  … and %d more\n", len(r.fails)-maxFailures)
			break
		}
		fmt.Fprintf(w, "  FAIL %s %s (%.2fs)\n", f.pkg, f.test, f.elapsed)
		for _, l := range f.lines {
			fmt.Fprintf(w, "      %s\n", strings.TrimSpace(l))
		}
	}
}

// run reads the events from in until it ends.
func (r *report) run(in io.Reader) error {
	br := bufio.NewReader(in)
	for {
		line, err := br.ReadString('\n')
		if line != "" {
			var e event
			if strings.HasPrefix(line, "{") && json.Unmarshal([]byte(line), &e) == nil && (e.Action != "") {
				r.handle(e)
			} else {
				fmt.Fprint(r.out, line)
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

func main() {
	failures := flag.String("failures", "", "append the failed tests, with their first error lines, to this `file`")
	counts := flag.String("counts", "", "append a line \"passed failed skipped\" to this `file`")
	flag.Parse()
	r := newReport(os.Stdout)
	if err := r.run(os.Stdin); err != nil {
		fmt.Fprintln(os.Stderr, "testreport:", err)
		os.Exit(2)
	}
	write := func(name string, f func(io.Writer)) {
		if name == "" {
			return
		}
		fh, err := os.OpenFile(name, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err == nil {
			f(fh)
			err = fh.Close()
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "testreport:", err)
			os.Exit(2)
		}
	}
	write(*failures, r.writeFailures)
	write(*counts, func(w io.Writer) { fmt.Fprintf(w, "%d %d %d\n", r.passed, r.failedN, r.skipped) })
}
