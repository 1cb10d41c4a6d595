package load

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// ParseWrk reads the output of `wrk --latency` into a Record: requests/s,
// the request count and window, the 50/90/99 % latencies, and errors
// (non-2xx/3xx answers plus socket errors). wrk reports no 99.9 %.
func ParseWrk(r io.Reader) (Record, error) {
	var rec Record
	rec.Mode = "wrk"
	var haveRate, haveP99 bool
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		f := strings.Fields(line)
		switch {
		case strings.HasPrefix(line, "Running ") && len(f) >= 5:
			rec.Target = f[len(f)-1]
		case len(f) >= 4 && f[1] == "threads" && f[2] == "and":
			rec.Threads, _ = strconv.Atoi(f[0])
			rec.Workers, _ = strconv.Atoi(f[3])
		case len(f) == 2 && (f[0] == "50%" || f[0] == "90%" || f[0] == "99%"):
			us, err := WrkDuration(f[1])
			if err != nil {
				return rec, err
			}
			switch f[0] {
			case "50%":
				rec.P50 = us
			case "90%":
				rec.P90 = us
			case "99%":
				rec.P99, haveP99 = us, true
			}
		case len(f) >= 2 && f[0] == "Latency" && f[1] != "Distribution" && len(f) >= 4:
			us, err := WrkDuration(f[3])
			if err != nil {
				return rec, err
			}
			rec.Max = us
		case len(f) >= 5 && f[1] == "requests" && f[2] == "in":
			rec.Ops, _ = strconv.ParseInt(f[0], 10, 64)
			s := strings.TrimSuffix(f[3], ",")
			us, err := WrkDuration(s)
			if err != nil {
				return rec, err
			}
			rec.Seconds = us / 1e6
		case strings.HasPrefix(line, "Requests/sec:") && len(f) == 2:
			v, err := strconv.ParseFloat(f[1], 64)
			if err != nil {
				return rec, fmt.Errorf("wrk: requests/sec %q: %w", f[1], err)
			}
			rec.OpsPerS, haveRate = v, true
		case strings.HasPrefix(line, "Non-2xx or 3xx responses:") && len(f) == 5:
			n, _ := strconv.ParseInt(f[4], 10, 64)
			rec.Errors += n
		case strings.HasPrefix(line, "Socket errors:"):
			// Socket errors: connect 0, read 0, write 0, timeout 0
			for i := 2; i+1 < len(f); i += 2 {
				n, _ := strconv.ParseInt(strings.TrimSuffix(f[i+1], ","), 10, 64)
				rec.Errors += n
			}
		}
	}
	if err := sc.Err(); err != nil {
		return rec, err
	}
	if !haveRate || !haveP99 {
		return rec, fmt.Errorf("wrk: output has no Requests/sec or no latency distribution (run wrk with --latency)")
	}
	rec.IDs = rec.Ops
	rec.IDsPerS = rec.OpsPerS
	return rec, nil
}

// WrkDuration turns wrk's "79.00us", "2.04ms", "1.00s" or "10.00m" into
// microseconds.
func WrkDuration(s string) (float64, error) {
	units := []struct {
		suffix string
		us     float64
	}{{"us", 1}, {"ms", 1e3}, {"s", 1e6}, {"m", 60e6}, {"h", 3600e6}}
	for _, u := range units {
		if v, ok := strings.CutSuffix(s, u.suffix); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return 0, fmt.Errorf("wrk: duration %q: %w", s, err)
			}
			return f * u.us, nil
		}
	}
	return 0, fmt.Errorf("wrk: duration %q has no unit", s)
}
