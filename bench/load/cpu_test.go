package load

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseStatCPU(t *testing.T) {
	for _, c := range []struct {
		stat string
		want time.Duration
		err  string
	}{
		{"1234 (flakeid) S 1 1234 1234 0 -1 4194560 900 0 0 0 250 37 0 0 20 0 7 0 100 0 0", 2870 * time.Millisecond, ""},
		{"99 (a ) (b)) R 1 2 3 4 5 6 7 8 9 10 1 2 0 0", 30 * time.Millisecond, ""}, // a name with spaces and parentheses
		{"no name here", 0, "no command name"},
		{"1 (x) S 1 2 3", 0, "4 fields after the command name"},
		{"1 (x) S 1 2 3 4 5 6 7 8 9 10 -5 2", 0, `CPU time "-5"`},
		{"1 (x) S 1 2 3 4 5 6 7 8 9 10 ab 2", 0, `CPU time "ab"`},
	} {
		got, err := parseStatCPU([]byte(c.stat))
		switch {
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%q: error %v, want one saying %q", c.stat, err, c.err)
		case c.err == "" && (err != nil || got != c.want):
			t.Errorf("%q: %v, %v; want %v", c.stat, got, err, c.want)
		}
	}
}

// TestProcessCPU: this process's CPU time grows by about what a busy loop
// spends, and a process that does not exist is an error.
func TestProcessCPU(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc (not Linux)")
	}
	c0, err := ProcessCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	x := 0
	for start := time.Now(); time.Since(start) < 300*time.Millisecond; {
		x++
	}
	c1, err := ProcessCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if d := c1 - c0; d < 50*time.Millisecond || d > 10*time.Second {
		t.Fatalf("300 ms of a busy loop (%d turns) counted %v of CPU", x, d)
	}
	if _, err := ProcessCPU(1 << 30); err == nil {
		t.Fatal("the CPU time of a process that does not exist: no error")
	}
}

// TestRunReadsServerCPU: Run reads the server's CPU time at the window's
// start and end (not during the warm-up), and a failing read fails the run.
func TestRunReadsServerCPU(t *testing.T) {
	var reads []time.Time
	cpu := time.Second
	worker := func(context.Context, int) (Worker, error) {
		return Worker{Op: func(context.Context) (int64, error) { time.Sleep(time.Millisecond); return 1, nil }}, nil
	}
	start := time.Now()
	rec, _, err := Run(context.Background(), RunConfig{
		Workers: 1, Warmup: 50 * time.Millisecond, Duration: 100 * time.Millisecond, NewWorker: worker,
		ServerCPU: func() (time.Duration, error) {
			reads = append(reads, time.Now())
			cpu += 40 * time.Millisecond
			return cpu, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(reads) != 2 || reads[0].Sub(start) < 45*time.Millisecond || reads[1].Sub(reads[0]) < 95*time.Millisecond {
		t.Fatalf("the CPU time was read at %v after the start, want at the window's start (50 ms) and end (150 ms)", reads)
	}
	if rec.ServerCPU < 0.039 || rec.ServerCPU > 0.041 {
		t.Fatalf("ServerCPU %v, want 0.04 (the difference of the two reads)", rec.ServerCPU)
	}
	if IDsPerCPU(rec) != float64(rec.IDs)/rec.ServerCPU || IDsPerCPU(Record{IDs: 5}) != 0 {
		t.Fatal("IDsPerCPU")
	}
	_, _, err = Run(context.Background(), RunConfig{
		Workers: 1, Duration: 50 * time.Millisecond, NewWorker: worker,
		ServerCPU: func() (time.Duration, error) { return 0, errors.New("no such process") },
	})
	if err == nil || !strings.Contains(err.Error(), "no such process") {
		t.Fatalf("a failing CPU read: %v, want the run to fail with it", err)
	}
}

// TestCPURatios: the ratio of IDs per server CPU-second, per round; a round
// where either side has no CPU time is left out.
func TestCPURatios(t *testing.T) {
	recs := []Record{
		{Label: "a", Round: 1, IDs: 900, ServerCPU: 1}, {Label: "b", Round: 1, IDs: 500, ServerCPU: 0.5},
		{Label: "a", Round: 2, IDs: 800, ServerCPU: 0.5}, {Label: "b", Round: 2, IDs: 800, ServerCPU: 1},
		{Label: "a", Round: 3, IDs: 800}, {Label: "b", Round: 3, IDs: 800, ServerCPU: 1},
	}
	rs, err := CPURatios(recs, []string{"a/b"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rs[0].Rounds, []int{1, 2}) || !slices.Equal(rs[0].Values, []float64{0.9, 2}) {
		t.Fatalf("a/b: %+v", rs[0])
	}
}
