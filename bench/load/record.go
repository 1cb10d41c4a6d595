package load

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

// Record is the result of one timed run: what was measured, how much, how
// fast and how long one operation took. Latencies are in microseconds.
type Record struct {
	Label   string  `json:"label"`
	Round   int     `json:"round"`
	Mode    string  `json:"mode"`
	Target  string  `json:"target"`
	Workers int     `json:"workers"`
	Threads int     `json:"threads,omitempty"` // wrk's -t
	Start   string  `json:"start"`             // RFC 3339, UTC
	Seconds float64 `json:"seconds"`           // measured window
	Ops     int64   `json:"ops"`
	IDs     int64   `json:"ids"`
	Errors  int64   `json:"errors"`
	OpsPerS float64 `json:"ops_per_sec"`
	IDsPerS float64 `json:"ids_per_sec"`
	P50     float64 `json:"p50_us"`
	P90     float64 `json:"p90_us"`
	P99     float64 `json:"p99_us"`
	P999    float64 `json:"p999_us,omitempty"` // wrk reports none
	Max     float64 `json:"max_us"`
	// Rate is the offered load of a fixed-rate run, ops/s (0: closed
	// loop); its latencies count from each op's scheduled time, and
	// LateP999 and LateMax are how late the load generator's own sleeps
	// woke up (µs), which every latency includes.
	Rate     float64 `json:"rate,omitempty"`
	LateP999 float64 `json:"late_p999_us,omitempty"`
	LateMax  float64 `json:"late_max_us,omitempty"`
	// ServerCPU is the CPU time, in seconds, the server's process used in
	// the window (RunConfig.ServerCPU; idload -server-pid): IDs/ServerCPU
	// is what the server does per core-second, whatever else shared its
	// core. 0: not measured.
	ServerCPU float64 `json:"server_cpu_s,omitempty"`
	Load1     float64 `json:"load1_start"` // 1-minute load average at the start
	Load1E    float64 `json:"load1_end"`   // and at the end
	Note      string  `json:"note,omitempty"`
}

// FromHistogram fills the latency fields from h.
func (r *Record) FromHistogram(h *Histogram) {
	us := func(d time.Duration) float64 { return float64(d) / 1e3 }
	r.P50, r.P90, r.P99, r.P999 = us(h.Quantile(0.5)), us(h.Quantile(0.9)), us(h.Quantile(0.99)), us(h.Quantile(0.999))
	r.Max = us(h.Max())
}

// String is the one-line human form of r.
func (r *Record) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-28s mode=%s workers=%d", r.Label, r.Mode, r.Workers)
	if r.Threads > 0 {
		fmt.Fprintf(&b, " threads=%d", r.Threads)
	}
	fmt.Fprintf(&b, " %.2fs ops=%d ops/s=%s ids/s=%s p50=%s p90=%s p99=%s",
		r.Seconds, r.Ops, Si(r.OpsPerS), Si(r.IDsPerS), Us(r.P50), Us(r.P90), Us(r.P99))
	if r.P999 > 0 {
		fmt.Fprintf(&b, " p999=%s", Us(r.P999))
	}
	fmt.Fprintf(&b, " max=%s errors=%d load1=%.2f→%.2f", Us(r.Max), r.Errors, r.Load1, r.Load1E)
	if r.Rate > 0 {
		fmt.Fprintf(&b, " rate=%s late-p999=%s late-max=%s", Si(r.Rate), Us(r.LateP999), Us(r.LateMax))
	}
	if r.Note != "" {
		fmt.Fprintf(&b, " (%s)", r.Note)
	}
	return b.String()
}

// Si formats a rate with k, M or G.
func Si(v float64) string {
	switch {
	case v >= 1e9:
		return fmt.Sprintf("%.3f G", v/1e9)
	case v >= 1e6:
		return fmt.Sprintf("%.3f M", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.1f k", v/1e3)
	}
	return fmt.Sprintf("%.1f", v)
}

// Us formats microseconds as µs or ms.
func Us(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.2f s", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.2f ms", v/1e3)
	}
	return fmt.Sprintf("%.0f µs", v)
}

// Append writes r as one JSON line at the end of the file path.
func Append(path string, r *Record) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	b, err := json.Marshal(r)
	if err != nil {
		f.Close()
		return err
	}
	_, err = f.Write(append(b, '\n'))
	return errors.Join(err, f.Close())
}

// ReadRecords reads JSON lines of Records; blank lines are skipped.
func ReadRecords(r io.Reader) ([]Record, error) {
	var out []Record
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		var rec Record
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		out = append(out, rec)
	}
	return out, sc.Err()
}

// Load1 returns the 1-minute load average (0 when unknown).
func Load1() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}

// CheckLoopback refuses any host but a loopback address or "localhost":
// the load tools only ever run against this machine.
func CheckLoopback(host string) error {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("target host %q is not a loopback address: the load tools only run against 127.0.0.0/8 or ::1", host)
}
