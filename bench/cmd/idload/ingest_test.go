package main

import (
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flakeid/flakeid/bench/load"
)

func TestParseRedisBenchmarkFull(t *testing.T) {
	for _, tc := range []struct {
		file                        string
		target                      string
		workers                     int
		ops                         int64
		rps, p50, p99, p999, maxLat float64
	}{
		// p99.9: ⌈0.999 × 50000⌉ = 49950 requests; the first line reaching it
		// is the cumulative one "99.902% <= 1.903 milliseconds (… 49951)".
		{"testdata/redis-benchmark-incr.txt", "redis-benchmark INCR", 8, 50000, 51706.31, 87, 319, 1903, 3567},
		// 199800: "99.902% <= 12.311 milliseconds (… 199808)".
		{"testdata/redis-benchmark-p16.txt", "redis-benchmark INCR snowflake", 64, 200000, 709219.88, 1015, 3447, 12311, 12687},
	} {
		b, err := os.ReadFile(tc.file)
		if err != nil {
			t.Fatal(err)
		}
		rec, err := parseRedisBenchmarkAny(b)
		if err != nil {
			t.Fatalf("%s: %v", tc.file, err)
		}
		near := func(a, b float64) bool { return math.Abs(a-b) < 1e-6*math.Max(1, math.Abs(b)) }
		if rec.Target != tc.target || rec.Workers != tc.workers || rec.Ops != tc.ops || rec.IDs != tc.ops ||
			!near(rec.OpsPerS, tc.rps) || !near(rec.IDsPerS, tc.rps) || !near(rec.P50, tc.p50) ||
			!near(rec.P99, tc.p99) || !near(rec.P999, tc.p999) || !near(rec.Max, tc.maxLat) {
			t.Errorf("%s: got %+v", tc.file, rec)
		}
	}
}

func TestParseRedisBenchmarkCSV(t *testing.T) {
	csv := `"test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms"
"INCR","30193.24","0.178","0.032","0.143","0.271","0.631","65.247"
`
	rec, err := parseRedisBenchmarkAny([]byte(csv))
	if err != nil || rec.OpsPerS != 30193.24 || rec.P999 != 0 || math.Abs(rec.P99-631) > 1e-9 {
		t.Errorf("csv: %+v, %v", rec, err)
	}
}

func TestParseRedisBenchmarkFullErrors(t *testing.T) {
	for name, in := range map[string]string{
		"empty":     "",
		"cut short": "====== INCR ======\n  1000 requests completed in 0.10 seconds\n",
		"two tests": "====== INCR ======\n====== GET ======\n  throughput summary: 1.0 requests per second\n  latency summary (msec):\n  avg min p50 p95 p99 max\n  1 1 1 1 1 1\n",
	} {
		if _, err := parseRedisBenchmarkFull([]byte(in)); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestParseWrkP999(t *testing.T) {
	out := `Running 2s test @ http://127.0.0.1:16478/
  1 threads and 8 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency   458.26us    0.88ms   8.35ms   89.53%
    Req/Sec    42.74k     6.10k   52.77k    80.00%
  Latency Distribution
     50%  143.00us
     75%  258.00us
     90%    1.43ms
     99%    4.12ms
  84879 requests in 2.00s, 11.01MB read
Requests/sec:  42432.50
Transfer/sec:      5.50MB
  99.9%  6.75ms
`
	rec, err := parseWrkP999([]byte(out))
	if err != nil || rec.P999 != 6750 || rec.P99 != 4120 || rec.OpsPerS != 42432.50 {
		t.Errorf("wrk: %+v, %v", rec, err)
	}
	rec, err = parseWrkP999([]byte(strings.Replace(out, "  99.9%  6.75ms\n", "", 1)))
	if err != nil || rec.P999 != 0 {
		t.Errorf("wrk without the script's line: %+v, %v", rec, err)
	}
}

// With the tool's command after the flags, idload runs it, records its
// output, and the CPU time the server (here a busy shell loop) used while
// the command ran.
func TestIngestRunsToolWithServerCPU(t *testing.T) {
	busy := exec.Command("sh", "-c", "while :; do :; done")
	if err := busy.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { busy.Process.Kill(); busy.Wait() })
	out := filepath.Join(t.TempDir(), "r.jsonl")
	start := time.Now()
	err := ingestCmd("redis-benchmark", parseRedisBenchmarkAny, []string{"-label", "x", "-round", "2", "-json", out,
		"-server-pid", strconv.Itoa(busy.Process.Pid), "--", "sh", "-c", "sleep 0.5; cat testdata/redis-benchmark-incr.txt"})
	wall := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := load.ReadRecords(f)
	if err != nil || len(recs) != 1 {
		t.Fatalf("records %+v, %v", recs, err)
	}
	r := recs[0]
	if r.Label != "x" || r.Round != 2 || r.Ops != 50000 || r.ServerCPU <= 0 || r.ServerCPU > wall.Seconds()+0.02 {
		t.Errorf("record %+v: want 50000 ops and the busy loop's CPU time, more than 0 s and at most the %v it ran", r, wall)
	}

	// Without a command there is no window to measure the server in; a
	// command that fails is an error naming it.
	if err := ingestCmd("redis-benchmark", parseRedisBenchmarkAny, []string{"-server-pid", "1"}); err == nil ||
		!strings.Contains(err.Error(), "needs the tool's command") {
		t.Errorf("-server-pid without a command: %v", err)
	}
	if err := ingestCmd("redis-benchmark", parseRedisBenchmarkAny, []string{"--", "sh", "-c", "exit 3"}); err == nil ||
		!strings.Contains(err.Error(), "sh -c exit 3") {
		t.Errorf("a failing command: %v", err)
	}
}
