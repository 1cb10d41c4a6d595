package load

import (
	"encoding/csv"
	"fmt"
	"io"
	"strconv"
)

// ParseRedisBenchmark reads the output of `redis-benchmark --csv -t T` (one
// test) into a Record: requests/s and the 50/99 % and max latencies.
// redis-benchmark is Redis's own load tool, written in C like wrk, so a wrk
// run against flakeid and a redis-benchmark run against Redis compare two
// servers through equally cheap clients. It reports no p90: P90 stays 0.
func ParseRedisBenchmark(r io.Reader) (Record, error) {
	rows, err := csv.NewReader(r).ReadAll()
	if err != nil {
		return Record{}, fmt.Errorf("redis-benchmark: %w", err)
	}
	if len(rows) != 2 {
		return Record{}, fmt.Errorf("redis-benchmark: want a header and one test row, got %d rows (run one test with --csv)", len(rows))
	}
	col := map[string]int{}
	for i, h := range rows[0] {
		col[h] = i
	}
	get := func(name string) (float64, error) {
		i, ok := col[name]
		if !ok || i >= len(rows[1]) {
			return 0, fmt.Errorf("redis-benchmark: no %q column", name)
		}
		v, err := strconv.ParseFloat(rows[1][i], 64)
		if err != nil {
			return 0, fmt.Errorf("redis-benchmark: %s %q: %w", name, rows[1][i], err)
		}
		return v, nil
	}
	rec := Record{Mode: "redis-benchmark"}
	if i, ok := col["test"]; ok {
		rec.Target = "redis " + rows[1][i]
	}
	if rec.OpsPerS, err = get("rps"); err != nil {
		return rec, err
	}
	ms := []struct {
		name string
		dst  *float64
	}{{"p50_latency_ms", &rec.P50}, {"p99_latency_ms", &rec.P99}, {"max_latency_ms", &rec.Max}}
	for _, m := range ms {
		v, err := get(m.name)
		if err != nil {
			return rec, err
		}
		*m.dst = v * 1e3
	}
	rec.IDsPerS = rec.OpsPerS
	return rec, nil
}
