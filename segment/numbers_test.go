package segment_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/flakeid/flakeid/idmask"
	"github.com/flakeid/flakeid/segment"
	"github.com/flakeid/flakeid/segment/segmenttest"
)

// benchKeys masks series with an all-zero key (key id 0).
func benchKeys(id uint8) (segment.CounterMasker, error) {
	return idmask.New(make([]byte, idmask.KeySize), id, idmask.Bits63)
}

// BenchmarkSeriesNumber is the hot path of a series: a number's text
// appended to a buffer (AppendNumberText), beside the plain ID by name, a
// masked series, and NextNumber (which returns a Number with its own text).
func BenchmarkSeriesNumber(b *testing.B) {
	m := segmenttest.NewMemory()
	a, err := segment.New(segment.Config{Store: m, MaxStep: segment.MaxStep, Logger: slog.New(slog.DiscardHandler), CounterKeys: benchKeys})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { a.Close() })
	ctx := b.Context()
	if err := a.Create(ctx, segment.Tag{Name: "plain", Step: 1_000_000}); err != nil {
		b.Fatal(err)
	}
	for name, masked := range map[string]bool{"ord": false, "ordm": true} {
		s := segment.Series{Period: segment.Day, Template: "ORD-{yyyyMMdd}-{seq:9}", Start: 1, Masked: masked}
		if err := a.Create(ctx, segment.Tag{Name: name, Step: 1_000_000, Series: &s}); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("plain-id-by-name", func(b *testing.B) {
		for b.Loop() {
			if _, err := a.NextID(ctx, "plain"); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ids/s")
	})
	for _, c := range []struct{ name, tag string }{{"text", "ord"}, {"text-masked", "ordm"}} {
		b.Run(c.name, func(b *testing.B) {
			buf := make([]byte, 0, 64)
			for b.Loop() {
				var err error
				if buf, err = a.AppendNumberText(ctx, c.tag, buf[:0]); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "numbers/s")
		})
	}
	// The same with a clock that costs nothing: what formatting costs,
	// apart from reading the time (time.Now is ~70 ns on a VM's kvm-clock).
	fixed := time.Now()
	fa, err := segment.New(segment.Config{Store: m, MaxStep: segment.MaxStep, Logger: slog.New(slog.DiscardHandler), Now: func() time.Time { return fixed }})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { fa.Close() })
	b.Run("text-fixed-clock", func(b *testing.B) {
		buf := make([]byte, 0, 64)
		for b.Loop() {
			var err error
			if buf, err = fa.AppendNumberText(ctx, "ord", buf[:0]); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "numbers/s")
	})
	var sink int64
	b.Run("time.Now", func(b *testing.B) {
		for b.Loop() {
			sink += time.Now().UnixNano()
		}
	})
	_ = sink
	b.Run("NextNumber", func(b *testing.B) {
		for b.Loop() {
			if _, err := a.NextNumber(ctx, "ord"); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "numbers/s")
	})
}

// Example_series makes a tag a series of order numbers that start again
// every day in Shanghai, and takes its first numbers.
func Example_series() {
	ctx := context.Background()
	clock := func() time.Time { return time.Date(2026, 11, 28, 17, 0, 0, 0, time.UTC) } // 01:00 on the 29th in Shanghai
	a, err := segment.New(segment.Config{Store: segmenttest.NewMemory(), Now: clock})
	if err != nil {
		log.Fatal(err)
	}
	defer a.Close()
	orders := segment.Series{Period: segment.Day, TZ: "Asia/Shanghai", Template: "ORD-{yyyyMMdd}-{seq:6}", Start: 1}
	if err := a.Create(ctx, segment.Tag{Name: "orders", Step: 100, Series: &orders}); err != nil {
		log.Fatal(err)
	}
	nums, err := a.NextNumbers(ctx, "orders", 2)
	if err != nil {
		log.Fatal(err)
	}
	for _, n := range nums {
		fmt.Println(n.Text, n.Numeric)
	}
	f, _ := a.Format(ctx, "orders")
	fmt.Println(f.CapacityText())
	// Output:
	// ORD-20261129-000001 20261129000001
	// ORD-20261129-000002 20261129000002
	// at most 999,999 numbers a day
}

// TestSeriesPrefetchesTheNextPeriod: a number taken in the last seconds of
// a period fetches the next period's first segment in the background, so
// that the first number after the boundary is handed out with the store
// unreachable.
func TestSeriesPrefetchesTheNextPeriod(t *testing.T) {
	ctx := t.Context()
	var mu sync.Mutex
	now := time.Date(2026, 11, 28, 23, 59, 55, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	m := segmenttest.NewMemory()
	a, err := segment.New(segment.Config{Store: m, Now: clock, Logger: slog.New(slog.DiscardHandler), FetchTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	s := segment.Series{Period: segment.Day, Template: "D{yyyyMMdd}-{seq:4}", Start: 1}
	if err := a.Create(ctx, segment.Tag{Name: "daily", Step: 10, Series: &s}); err != nil {
		t.Fatal(err)
	}
	if n, err := a.NextNumber(ctx, "daily"); err != nil || n.Text != "D20261128-0001" {
		t.Fatalf("the last day's number: %+v, %v", n, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if slices.ContainsFunc(a.Stats(), func(st segment.TagStats) bool { return st.Tag == "daily::20261129" }) {
			break // its row created and its first segment fetched and loaded
		}
		if time.Now().After(deadline) {
			t.Fatal("the next day's row was not created within 10 s of a number taken 5 s before midnight")
		}
		time.Sleep(10 * time.Millisecond)
	}
	m.Cut()
	mu.Lock()
	now = now.Add(10 * time.Second)
	mu.Unlock()
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if n, err := a.NextNumber(cctx, "daily"); err != nil || n.Text != "D20261129-0001" {
		t.Fatalf("the new day's first number with the store cut: %+v, %v (not prefetched)", n, err)
	}
}
