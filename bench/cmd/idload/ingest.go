package main

import (
	"bytes"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/flakeid/flakeid/bench/load"
)

// parseRedisBenchmarkAny reads redis-benchmark output: the one-test --csv form
// (load.ParseRedisBenchmark: no p99.9), or the default, non-quiet form of one
// test, run with --precision 3, which parseRedisBenchmarkFull reads with its
// p99.9.
func parseRedisBenchmarkAny(b []byte) (load.Record, error) {
	if bytes.HasPrefix(bytes.TrimSpace(b), []byte(`"test"`)) {
		return load.ParseRedisBenchmark(bytes.NewReader(b))
	}
	return parseRedisBenchmarkFull(b)
}

// parseRedisBenchmarkFull reads the default (not -q, not --csv) output of
// redis-benchmark 7 for one test:
//
//	====== INCR ======
//	  900000 requests completed in 11.02 seconds
//	  8 parallel clients
//	…
//	Latency by percentile distribution:
//	0.000% <= 0.039 milliseconds (cumulative count 42)
//	…
//	99.902% <= 4.175 milliseconds (cumulative count 99903)
//	…
//	Cumulative distribution of latencies:
//	99.898% <= 4.103 milliseconds (cumulative count 99898)
//	…
//	Summary:
//	  throughput summary: 28232.64 requests per second
//	  latency summary (msec):
//	          avg       min       p50       p95       p99       max
//	        0.189     0.032     0.159     0.271     0.495    80.575
//
// Requests/s, p50, p99 and max come from the summary (redis-benchmark's own
// HdrHistogram quantiles). redis-benchmark prints no p99.9; P999 is the
// smallest latency printed in the two distributions whose cumulative count
// reaches 99.9 % of the requests: an upper bound of the true p99.9 at the
// resolution of those lines (HdrHistogram's, 3 significant digits, where a
// percentile line falls at or just above 99.9 %, as 99.902 % does). The
// progress lines (\r-separated) are skipped.
func parseRedisBenchmarkFull(b []byte) (load.Record, error) {
	rec := load.Record{Mode: "redis-benchmark"}
	type point struct {
		ms    float64
		count int64
	}
	var (
		points                   []point
		haveRate, haveLat, inLat bool
		latHeader                []string
		tests                    int
	)
	text := strings.ReplaceAll(string(b), "\r", "\n")
	for _, raw := range strings.Split(text, "\n") {
		line := strings.TrimSpace(raw)
		f := strings.Fields(line)
		switch {
		case line == "":
			continue
		case strings.HasPrefix(line, "====== ") && strings.HasSuffix(line, " ======"):
			tests++
			rec.Target = "redis-benchmark " + strings.TrimSuffix(strings.TrimPrefix(line, "====== "), " ======")
		case len(f) >= 6 && f[1] == "requests" && f[2] == "completed" && f[3] == "in":
			rec.Ops, _ = strconv.ParseInt(f[0], 10, 64)
			rec.Seconds, _ = strconv.ParseFloat(f[4], 64)
		case len(f) == 3 && f[1] == "parallel" && f[2] == "clients":
			rec.Workers, _ = strconv.Atoi(f[0])
		case len(f) == 7 && strings.HasSuffix(f[0], "%") && f[1] == "<=" && f[3] == "milliseconds" && f[5] == "count":
			// 99.902% <= 4.175 milliseconds (cumulative count 99903)
			ms, err1 := strconv.ParseFloat(f[2], 64)
			n, err2 := strconv.ParseInt(strings.TrimSuffix(f[6], ")"), 10, 64)
			if err1 != nil || err2 != nil {
				return rec, fmt.Errorf("redis-benchmark: distribution line %q", line)
			}
			points = append(points, point{ms, n})
		case strings.HasPrefix(line, "throughput summary:") && len(f) >= 3:
			v, err := strconv.ParseFloat(f[2], 64)
			if err != nil {
				return rec, fmt.Errorf("redis-benchmark: throughput %q: %w", f[2], err)
			}
			rec.OpsPerS, haveRate = v, true
		case strings.HasPrefix(line, "latency summary"):
			inLat = true
		case inLat && latHeader == nil && len(f) > 0 && f[0] == "avg":
			latHeader = f
		case inLat && latHeader != nil && !haveLat:
			if len(f) != len(latHeader) {
				return rec, fmt.Errorf("redis-benchmark: latency summary %q does not match %q", line, latHeader)
			}
			for i, h := range latHeader {
				v, err := strconv.ParseFloat(f[i], 64)
				if err != nil {
					return rec, fmt.Errorf("redis-benchmark: latency %s %q: %w", h, f[i], err)
				}
				switch h {
				case "p50":
					rec.P50 = v * 1e3
				case "p99":
					rec.P99, haveLat = v*1e3, true
				case "max":
					rec.Max = v * 1e3
				}
			}
			inLat = false
		}
	}
	if tests > 1 {
		return rec, fmt.Errorf("redis-benchmark: %d tests in the output; run one (-t T, or one command)", tests)
	}
	if !haveRate || !haveLat {
		return rec, fmt.Errorf("redis-benchmark: no throughput or latency summary (run it without -q and --csv, to the end)")
	}
	if len(points) > 0 {
		sort.SliceStable(points, func(i, j int) bool { return points[i].ms < points[j].ms })
		total := points[len(points)-1].count
		for _, p := range points {
			total = max(total, p.count)
		}
		target := (total*999 + 999) / 1000 // ⌈0.999 × total⌉
		for _, p := range points {
			if p.count >= target {
				rec.P999 = p.ms * 1e3
				break
			}
		}
	}
	rec.IDs = rec.Ops
	rec.IDsPerS = rec.OpsPerS
	return rec, nil
}

// parseWrkP999 reads wrk --latency output with load.ParseWrk and adds the
// 99.9 % latency that wrk does not print itself but scripts/lib/wrk-p999.lua
// prints from wrk's done() hook, as a line "99.9%  1.23ms" (wrk's units).
func parseWrkP999(b []byte) (load.Record, error) {
	rec, err := load.ParseWrk(bytes.NewReader(b))
	if err != nil {
		return rec, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 2 && f[0] == "99.9%" {
			us, err := load.WrkDuration(f[1])
			if err != nil {
				return rec, err
			}
			rec.P999 = us
		}
	}
	return rec, nil
}
