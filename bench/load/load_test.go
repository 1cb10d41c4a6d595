package load

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

func TestBucketsCoverEveryValue(t *testing.T) {
	// Buckets are contiguous: each starts one past the previous end.
	prevHi := int64(-1)
	for i := range nBuckets {
		lo, hi := bucketRange(i)
		if lo != prevHi+1 || hi < lo {
			t.Fatalf("bucket %d is [%d, %d], previous ended at %d", i, lo, hi, prevHi)
		}
		prevHi = hi
		if i > 1<<subBits && float64(hi-lo+1)/float64(lo) > 1.0/(1<<subBits)+1e-12 {
			t.Fatalf("bucket %d [%d, %d] is wider than 1/64 of its start", i, lo, hi)
		}
	}
	if prevHi != math.MaxInt64 {
		t.Fatalf("last bucket ends at %d, want MaxInt64", prevHi)
	}
	for _, v := range []int64{0, 1, 63, 64, 65, 127, 128, 1000, 123456789, math.MaxInt64} {
		lo, hi := bucketRange(bucketOf(v))
		if v < lo || v > hi {
			t.Errorf("value %d is in bucket %d = [%d, %d]", v, bucketOf(v), lo, hi)
		}
	}
}

func TestQuantilesWithinOnePercent(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var h, a, b Histogram
	vals := make([]int64, 100_000)
	for i := range vals {
		v := int64(math.Exp(r.Float64()*14)) + 20 // 20 ns … 1.2 ms, log-spread
		vals[i] = v
		h.Record(time.Duration(v))
		if i%2 == 0 {
			a.Record(time.Duration(v))
		} else {
			b.Record(time.Duration(v))
		}
	}
	a.Merge(&b)
	slices.Sort(vals)
	for _, q := range []float64{0.5, 0.9, 0.99, 0.999} {
		exact := float64(vals[int(math.Ceil(q*float64(len(vals))))-1])
		for name, hh := range map[string]*Histogram{"single": &h, "merged": &a} {
			got := float64(hh.Quantile(q))
			if math.Abs(got-exact)/exact > 0.01 {
				t.Errorf("%s: q%.3f = %.0f, exact %.0f", name, q, got, exact)
			}
		}
	}
	if h.Count() != uint64(len(vals)) || a.Count() != h.Count() {
		t.Errorf("counts %d, %d, want %d", h.Count(), a.Count(), len(vals))
	}
	if h.Max() != time.Duration(vals[len(vals)-1]) {
		t.Errorf("max %v, want %v", h.Max(), vals[len(vals)-1])
	}
	var empty Histogram
	if empty.Quantile(0.99) != 0 || empty.Mean() != 0 {
		t.Error("empty histogram is not zero")
	}
}

func TestParseWrk(t *testing.T) {
	f, err := os.Open("testdata/wrk-latency.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rec, err := ParseWrk(f)
	if err != nil {
		t.Fatal(err)
	}
	want := Record{Mode: "wrk", Target: "http://127.0.0.1:18098/api/snowflake/get/x", Workers: 8, Threads: 1,
		Seconds: 1.1, Ops: 41508, IDs: 41508, OpsPerS: 37741.92, IDsPerS: 37741.92,
		P50: 131, P90: 3340, P99: 54120, Max: 76620}
	if math.Abs(rec.Seconds-want.Seconds) < 1e-9 {
		rec.Seconds = want.Seconds
	}
	for _, p := range []*float64{&rec.P90, &rec.P99, &rec.Max} {
		*p = math.Round(*p*1000) / 1000
	}
	if rec != want {
		t.Errorf("got  %+v\nwant %+v", rec, want)
	}
	if _, err := ParseWrk(strings.NewReader("Requests/sec: 1\n")); err == nil {
		t.Error("output without --latency parsed")
	}
	errs := "Running 1s test @ http://127.0.0.1:1/\n  50%  1.00us\n  99%  1.00s\n  Non-2xx or 3xx responses: 7\n  Socket errors: connect 1, read 2, write 0, timeout 3\nRequests/sec: 5.5\n"
	rec, err = ParseWrk(strings.NewReader(errs))
	if err != nil || rec.Errors != 13 || rec.P99 != 1e6 || rec.P50 != 1 {
		t.Errorf("got %+v, %v; want 13 errors, p99 1 s, p50 1 µs", rec, err)
	}
}

func TestMedianAndRatios(t *testing.T) {
	if m := Median([]float64{3, 1, 2}); m != 2 {
		t.Errorf("median %v", m)
	}
	if m := Median([]float64{4, 1, 2, 3}); m != 2.5 {
		t.Errorf("median %v", m)
	}
	if Median(nil) != 0 {
		t.Error("median of nothing")
	}
	recs := []Record{
		{Label: "a", Round: 1, IDsPerS: 100}, {Label: "b", Round: 1, IDsPerS: 50},
		{Label: "a", Round: 2, IDsPerS: 90}, {Label: "b", Round: 2, IDsPerS: 100},
		{Label: "a", Round: 3, IDsPerS: 80}, // no b in round 3
		{Label: "b", Round: 4, IDsPerS: 80},
	}
	rs, err := Ratios(recs, []string{"a/b", "a/c"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rs[0].Rounds, []int{1, 2}) || !slices.Equal(rs[0].Values, []float64{2, 0.9}) {
		t.Errorf("a/b: %+v", rs[0])
	}
	if len(rs[1].Values) != 0 {
		t.Errorf("a/c: %+v", rs[1])
	}
	if _, err := Ratios(recs, []string{"ab"}); err == nil {
		t.Error("ratio without a slash accepted")
	}
	var sb strings.Builder
	WriteSummary(&sb, recs)
	WriteRatios(&sb, rs)
	out := sb.String()
	for _, s := range []string{"| a | 3 | 0.0 | 0.0–0.0 | 90.0 |", "| b | 3 | 0.0 | 0.0–0.0 | 80.0 |", "| a / b | 2 | 1.450× |", "no round has both"} {
		if !strings.Contains(out, s) {
			t.Errorf("summary lacks %q:\n%s", s, out)
		}
	}
}

func TestRecordsRoundTrip(t *testing.T) {
	path := t.TempDir() + "/r.jsonl"
	in := []Record{{Label: "x", Round: 1, Ops: 5, P999: 3}, {Label: "y", Round: 2, Note: "n"}}
	for i := range in {
		if err := Append(path, &in[i]); err != nil {
			t.Fatal(err)
		}
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out, err := ReadRecords(f)
	if err != nil || !slices.Equal(out, in) {
		t.Fatalf("got %+v, %v", out, err)
	}
}

func TestCheckLoopback(t *testing.T) {
	for _, h := range []string{"127.0.0.1:80", "127.1.2.3", "localhost:6379", "[::1]:8080", "::1"} {
		if err := CheckLoopback(h); err != nil {
			t.Errorf("%s: %v", h, err)
		}
	}
	for _, h := range []string{"10.0.0.1:80", "192.168.1.1", "example.com:80", "0.0.0.0:80", ""} {
		if err := CheckLoopback(h); err == nil {
			t.Errorf("%s accepted", h)
		}
	}
}

func TestRunCountsTheWindow(t *testing.T) {
	var calls atomic.Int64
	rec, h, err := Run(context.Background(), RunConfig{
		Workers:  3,
		Warmup:   20 * time.Millisecond,
		Duration: 100 * time.Millisecond,
		NewWorker: func(context.Context, int) (Worker, error) {
			return Worker{Op: func(context.Context) (int64, error) {
				calls.Add(1)
				time.Sleep(time.Millisecond)
				return 10, nil
			}}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if rec.Ops == 0 || rec.IDs != 10*rec.Ops || rec.Ops >= calls.Load() || uint64(rec.Ops) != h.Count() {
		t.Errorf("ops %d ids %d calls %d hist %d", rec.Ops, rec.IDs, calls.Load(), h.Count())
	}
	if rec.Workers != 3 || rec.Seconds != 0.1 || rec.P50 < 1000 {
		t.Errorf("record %+v", rec)
	}
}

func TestRunAbortsOnErrors(t *testing.T) {
	boom := errors.New("boom")
	start := time.Now()
	_, _, err := Run(context.Background(), RunConfig{
		Workers:   2,
		Duration:  10 * time.Second,
		MaxErrors: 5,
		NewWorker: func(context.Context, int) (Worker, error) {
			return Worker{Op: func(context.Context) (int64, error) { return 0, boom }}, nil
		},
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err %v, want boom", err)
	}
	if time.Since(start) > 5*time.Second {
		t.Errorf("an erroring run took %v", time.Since(start))
	}
	_, _, err = Run(context.Background(), RunConfig{Workers: 1, Duration: time.Second,
		NewWorker: func(context.Context, int) (Worker, error) { return Worker{}, boom }})
	if !errors.Is(err, boom) {
		t.Errorf("worker setup error: %v", err)
	}
}

func TestParseRedisBenchmark(t *testing.T) {
	out := "\"test\",\"rps\",\"avg_latency_ms\",\"min_latency_ms\",\"p50_latency_ms\",\"p95_latency_ms\",\"p99_latency_ms\",\"max_latency_ms\"\n" +
		"\"INCR\",\"52882.07\",\"0.101\",\"0.024\",\"0.095\",\"0.151\",\"0.191\",\"8.591\"\n"
	rec, err := ParseRedisBenchmark(strings.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	want := Record{Mode: "redis-benchmark", Target: "redis INCR", OpsPerS: 52882.07, IDsPerS: 52882.07, P50: 95, P99: 191, Max: 8591}
	for _, p := range []*float64{&rec.P50, &rec.P99, &rec.Max} {
		*p = math.Round(*p*1000) / 1000
	}
	if rec != want {
		t.Errorf("got  %+v\nwant %+v", rec, want)
	}
	for _, bad := range []string{"", "\"test\",\"rps\"\n", "\"test\",\"rps\"\n\"INCR\",\"fast\"\n",
		"\"test\",\"rps\"\n\"INCR\",\"1\"\n"} {
		if _, err := ParseRedisBenchmark(strings.NewReader(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// TestRunFixedRate: at a fixed rate a 300 ms stall of one op shows in the
// latency of the ops scheduled behind it (coordinated omission corrected),
// the op count stays the offered load, and the schedule spreads the
// workers; closed loop, the same stall is one slow op among many fast ones.
func TestRunFixedRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		stallOnce := func() func(context.Context, int) (Worker, error) {
			var n atomic.Int64
			return func(context.Context, int) (Worker, error) {
				return Worker{Op: func(context.Context) (int64, error) {
					if n.Add(1) == 50 {
						time.Sleep(300 * time.Millisecond)
					} else {
						time.Sleep(time.Millisecond)
					}
					return 1, nil
				}}, nil
			}
		}
		rec, h, err := Run(t.Context(), RunConfig{Workers: 1, Duration: 2 * time.Second, Rate: 100, NewWorker: stallOnce()})
		if err != nil {
			t.Fatal(err)
		}
		if rec.Ops != 200 || rec.Rate != 100 || rec.OpsPerS != 100 {
			t.Fatalf("ops %d, rate %v, ops/s %v: want 200 at 100/s", rec.Ops, rec.Rate, rec.OpsPerS)
		}
		// The stalled op and the 29 owed behind it (290 … 10 ms late, plus
		// their own 1 ms): 15 % of the ops take 10 ms or more.
		if p := h.Quantile(0.86); p < 10*time.Millisecond {
			t.Errorf("p86 %v: the stall does not show", p)
		}
		if m := h.Max(); m < 300*time.Millisecond || m > 310*time.Millisecond {
			t.Errorf("max %v, want the 300 ms stall", m)
		}
		if rec.LateMax != 0 {
			t.Errorf("sleeps woke %v µs late under a fake clock", rec.LateMax)
		}
		closed, ch, err := Run(t.Context(), RunConfig{Workers: 1, Duration: 2 * time.Second, NewWorker: stallOnce()})
		if err != nil {
			t.Fatal(err)
		}
		if p := ch.Quantile(0.99); p > 2*time.Millisecond || closed.Rate != 0 {
			t.Errorf("closed loop: p99 %v, rate %v; the stall should be one op in %d", p, closed.Rate, closed.Ops)
		}
		// Four workers at 400/s: each sends every 10 ms, staggered by 2.5 ms.
		var mu sync.Mutex
		var sent []time.Duration
		t0 := time.Now()
		_, _, err = Run(t.Context(), RunConfig{Workers: 4, Duration: 100 * time.Millisecond, Rate: 400,
			NewWorker: func(context.Context, int) (Worker, error) {
				return Worker{Op: func(context.Context) (int64, error) {
					mu.Lock()
					sent = append(sent, time.Since(t0))
					mu.Unlock()
					return 1, nil
				}}, nil
			}})
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(sent)
		for i := 1; i < len(sent); i++ {
			if d := sent[i] - sent[i-1]; d != 2500*time.Microsecond {
				t.Fatalf("sends %v and %v: %v apart, want 2.5 ms", sent[i-1], sent[i], d)
			}
		}
		if _, _, err := Run(t.Context(), RunConfig{Workers: 1, Duration: time.Second, Rate: -1, NewWorker: stallOnce()}); err == nil {
			t.Error("a negative rate was accepted")
		}
	})
}

// TestFixedRateSummary: the fixed-rate table lists only fixed-rate runs,
// with medians of the tail and of the generator's lateness, and p99.9
// ratios are taken within a round.
func TestFixedRateSummary(t *testing.T) {
	recs := []Record{
		{Label: "flakeid", Round: 1, Rate: 5000, OpsPerS: 4990, P999: 900, LateP999: 80, LateMax: 300},
		{Label: "redis", Round: 1, Rate: 5000, OpsPerS: 5000, P999: 600},
		{Label: "flakeid", Round: 2, Rate: 5000, OpsPerS: 5000, P999: 1200, LateP999: 100, LateMax: 500},
		{Label: "redis", Round: 2, Rate: 5000, OpsPerS: 5000, P999: 1000},
		{Label: "closed", Round: 1, OpsPerS: 90000, P999: 5000},
	}
	var b strings.Builder
	WriteFixedRate(&b, recs)
	out := b.String()
	if strings.Contains(out, "closed") || !strings.Contains(out, "| flakeid | 2 | 5.0 k | 5.0 k |") || !strings.Contains(out, "1.05 ms | 0 µs | 90 µs | 400 µs") {
		t.Errorf("fixed-rate table:\n%s", out)
	}
	rs, err := P999Ratios(recs, []string{"flakeid/redis"})
	if err != nil {
		t.Fatal(err)
	}
	if got := rs[0].Values; len(got) != 2 || got[0] != 1.5 || got[1] != 1.2 || rs[0].Of != "p99.9" {
		t.Errorf("p99.9 ratios %+v", rs[0])
	}
	b.Reset()
	WriteRatios(&b, rs)
	if !strings.Contains(b.String(), "(p99.9, same round)") || !strings.Contains(b.String(), "1.350×") {
		t.Errorf("ratios table:\n%s", b.String())
	}
}

// TestWaitUntil: a spinning wait never returns before its time.
func TestWaitUntil(t *testing.T) {
	for _, spin := range []time.Duration{0, SpinBefore, time.Hour} {
		at := time.Now().Add(3 * time.Millisecond)
		waitUntil(at, spin)
		if now := time.Now(); now.Before(at) {
			t.Errorf("spin %v: returned %v early", spin, at.Sub(now))
		}
	}
}
