package segment_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	"pgregory.net/rapid"

	"github.com/flakeid/flakeid/segment"
	"github.com/flakeid/flakeid/segment/segmenttest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func quiet(t testing.TB) *slog.Logger {
	if tt, ok := t.(*testing.T); ok {
		return slog.New(slog.NewTextHandler(tt.Output(), nil))
	}
	return slog.New(slog.DiscardHandler)
}

func newAlloc(t testing.TB, cfg segment.Config) *segment.Allocator {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = quiet(t)
	}
	a, err := segment.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}

func TestConfigValidate(t *testing.T) {
	m := segmenttest.NewMemory()
	for _, tc := range []struct {
		cfg  segment.Config
		want string
	}{
		{segment.Config{}, "no Store"},
		{segment.Config{Store: m, Prefetch: 1.5}, "prefetch 1.5"},
		{segment.Config{Store: m, MaxStep: -1}, "max step -1"},
		{segment.Config{Store: m, MaxBatch: 20_000_000}, "max batch"},
		{segment.Config{Store: m, DefaultStep: 5_000_000}, "default step"},
		{segment.Config{Sources: []segment.Source{{Store: m, Delta: 2}, {Store: m, Delta: 3, Remainder: 1}}}, "share one"},
		{segment.Config{Sources: []segment.Source{{Store: m, Delta: 2, Remainder: 2}}}, "remainder 2"},
		{segment.Config{Sources: []segment.Source{{Store: m, Delta: 2}, {Store: m, Delta: 2}}}, "share remainder 0"},
		{segment.Config{Sources: []segment.Source{{Delta: 1}}}, "no Store"},
	} {
		if err := tc.cfg.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate(%+v) = %v, want an error naming %q", tc.cfg, err, tc.want)
		}
		if _, err := segment.New(tc.cfg); err == nil {
			t.Errorf("New(%+v) succeeded", tc.cfg)
		}
	}
	if err := (segment.Config{Store: m}).Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestTagNames(t *testing.T) {
	for _, ok := range []string{"a", "orders", "shop-1:orders/2026", strings.Repeat("x", 128), "A.b_c"} {
		if err := segment.ValidName(ok); err != nil {
			t.Errorf("ValidName(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"", strings.Repeat("x", 129), "a b", "ü", "a\x00", "a?b", "%2F"} {
		if err := segment.ValidName(bad); !errors.Is(err, segment.ErrInvalidTag) {
			t.Errorf("ValidName(%q) = %v, want ErrInvalidTag", bad, err)
		}
	}
	if err := segment.ValidateTag(segment.Tag{Name: "x", Step: 1, Description: strings.Repeat("d", 300)}); !errors.Is(err, segment.ErrInvalidTag) {
		t.Errorf("long description: %v", err)
	}
}

// TestSpansAndHandle: Next returns spans in order; a Handle serves the same
// tag without a lookup.
func TestSpansAndHandle(t *testing.T) {
	m := segmenttest.NewMemory()
	m.Create(t.Context(), segment.Tag{Name: "t", Step: 100})
	a := newAlloc(t, segment.Config{Store: m, SegmentDuration: -1})
	spans, err := a.Next(t.Context(), "t", 120) // crosses from the first half-step segment into the next
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for _, s := range spans {
		ids = slices.AppendSeq(ids, s.All())
		if s.Last() != s.First+s.Count-1 {
			t.Fatalf("span %+v: Last %d", s, s.Last())
		}
	}
	if len(ids) != 120 || ids[0] != 1 || ids[119] != 120 || len(spans) < 2 {
		t.Fatalf("Next(120) = %d IDs in %d spans: %v…", len(ids), len(spans), ids[:5])
	}
	h, err := a.Tag(t.Context(), "t")
	if err != nil {
		t.Fatal(err)
	}
	if id, err := h.NextID(t.Context()); err != nil || id != 121 {
		t.Fatalf("Handle.NextID = %d, %v; want 121", id, err)
	}
	if _, err := a.Tag(t.Context(), "unknown"); !errors.Is(err, segment.ErrUnknownTag) {
		t.Fatalf("Tag(unknown): %v", err)
	}
	st := a.Stats()
	if len(st) != 1 || st[0].Issued != 120 || st[0].Step != 100 {
		t.Fatalf("stats %+v", st)
	}
}

// TestBurstWaitsForFetch: a batch larger than both buffers is served by
// waiting for fetches instead of failing (Leaf returns an error, #48).
func TestBurstWaitsForFetch(t *testing.T) {
	m := segmenttest.NewMemory()
	m.Create(t.Context(), segment.Tag{Name: "burst", Step: 10})
	a := newAlloc(t, segment.Config{Store: m})
	spans, err := a.Next(t.Context(), "burst", 50_000)
	if err != nil {
		t.Fatal(err)
	}
	var n, prev int64
	for _, s := range spans {
		for id := range s.All() {
			if id <= prev {
				t.Fatalf("ID %d after %d", id, prev)
			}
			prev = id
			n++
		}
	}
	st := a.Stats()[0]
	if n != 50_000 || st.Waits == 0 || st.Step <= 10 {
		t.Fatalf("%d IDs; stats %+v: want waits and a grown step", n, st)
	}
}

// TestMultiSource: two stores each serve one residue class; losing one
// loses only its share.
func TestMultiSource(t *testing.T) {
	even, odd := segmenttest.NewMemory(), segmenttest.NewMemory()
	for _, m := range []*segmenttest.Memory{even, odd} {
		m.Create(t.Context(), segment.Tag{Name: "ha", Step: 100})
	}
	a := newAlloc(t, segment.Config{SegmentDuration: -1, Sources: []segment.Source{
		{Store: even, Delta: 2, Remainder: 0}, {Store: odd, Delta: 2, Remainder: 1}}})
	seen := map[int64]bool{}
	var evens, odds int
	take := func(n int) {
		for range n {
			id, err := a.NextID(t.Context(), "ha")
			if err != nil {
				t.Fatal(err)
			}
			if seen[id] {
				t.Fatalf("ID %d twice", id)
			}
			seen[id] = true
			if id%2 == 0 {
				evens++
			} else {
				odds++
			}
		}
	}
	take(1000)
	if evens == 0 || odds == 0 {
		t.Fatalf("%d even and %d odd IDs: both sources should serve", evens, odds)
	}
	odd.Cut()
	evens, odds = 0, 0
	take(2000)
	if evens < 1900 {
		t.Fatalf("with the odd source down, %d even and %d odd IDs", evens, odds)
	}
	spans, err := a.Next(t.Context(), "ha", 10)
	if err != nil || spans[0].Stride != 2 {
		t.Fatalf("Next = %+v, %v; want stride 2", spans, err)
	}
}

func TestUpdateAndTags(t *testing.T) {
	m := segmenttest.NewMemory()
	a := newAlloc(t, segment.Config{Store: m})
	if err := a.Create(t.Context(), segment.Tag{Name: "x"}); err != nil { // default step
		t.Fatal(err)
	}
	if _, err := a.NextID(t.Context(), "x"); err != nil {
		t.Fatal(err)
	}
	step := int64(4000)
	if err := a.Update(t.Context(), "x", &step, nil); err != nil {
		t.Fatal(err)
	}
	if st := a.Stats()[0]; st.Step != 4000 || st.MinStep != 4000 {
		t.Fatalf("after Update the loaded tag's step is %+v", st)
	}
	tooBig := int64(segment.MaxStep) + 1
	if err := a.Update(t.Context(), "x", &tooBig, nil); !errors.Is(err, segment.ErrInvalidTag) {
		t.Fatalf("Update to a step above MaxStep: %v", err)
	}
	tags, err := a.Tags(t.Context())
	if err != nil || len(tags) != 1 || tags[0].Step != 4000 || tags[0].Description != "" {
		t.Fatalf("Tags = %+v, %v", tags, err)
	}
}

func TestExhaustedTag(t *testing.T) {
	m := segmenttest.NewMemory()
	m.Create(t.Context(), segment.Tag{Name: "end", Step: 10, MaxID: math.MaxInt64 - 10})
	a := newAlloc(t, segment.Config{Store: m, SegmentDuration: -1})
	var err error
	for range 20 {
		if _, err = a.NextID(t.Context(), "end"); err != nil {
			break
		}
	}
	if !errors.Is(err, segment.ErrExhausted) {
		t.Fatalf("past int64: %v, want ErrExhausted", err)
	}
}

func TestClosed(t *testing.T) {
	m := segmenttest.NewMemory()
	m.Create(t.Context(), segment.Tag{Name: "c", Step: 10})
	a, err := segment.New(segment.Config{Store: m, Logger: quiet(t)})
	if err != nil {
		t.Fatal(err)
	}
	a.Close()
	if _, err := a.NextID(t.Context(), "c"); !errors.Is(err, segment.ErrClosed) {
		t.Fatalf("NextID after Close: %v", err)
	}
}

// TestAllocatorStateMachine: random batches, single IDs, outages and
// recoveries against one store; IDs never repeat and never decrease, and
// the store's max id is always past every ID handed out.
func TestAllocatorStateMachine(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		m := segmenttest.NewMemory()
		step := rapid.Int64Range(1, 50).Draw(rt, "step")
		m.Create(context.Background(), segment.Tag{Name: "sm", Step: step})
		a, err := segment.New(segment.Config{Store: m, Logger: slog.New(slog.DiscardHandler), FetchTimeout: 50 * time.Millisecond,
			Prefetch: rapid.Float64Range(0.01, 0.99).Draw(rt, "prefetch"), MaxStep: 200})
		if err != nil {
			rt.Fatal(err)
		}
		defer a.Close()
		var last int64
		check := func(id int64) {
			if id <= last {
				rt.Fatalf("ID %d after %d", id, last)
			}
			last = id
		}
		rt.Repeat(map[string]func(*rapid.T){
			"one": func(rt *rapid.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
				defer cancel()
				id, err := a.NextID(ctx, "sm")
				if err != nil {
					if !errors.Is(err, segment.ErrUnavailable) {
						rt.Fatalf("NextID: %v", err)
					}
					return
				}
				check(id)
			},
			"batch": func(rt *rapid.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
				defer cancel()
				spans, err := a.Next(ctx, "sm", rapid.IntRange(1, 300).Draw(rt, "n"))
				for _, s := range spans {
					for id := range s.All() {
						check(id)
					}
				}
				if err != nil && !errors.Is(err, segment.ErrUnavailable) {
					rt.Fatalf("Next: %v", err)
				}
			},
			"cut":  func(*rapid.T) { m.Cut() },
			"heal": func(*rapid.T) { m.Heal() },
			"": func(rt *rapid.T) {
				if m.Fetches.Load() == 0 {
					return
				}
				m.Heal()
				row, err := m.Get(context.Background(), "sm")
				if err != nil || row.MaxID <= last {
					rt.Fatalf("store max id %d (%v) not past the last ID %d", row.MaxID, err, last)
				}
			},
		})
	})
}

func ExampleAllocator() {
	store := segmenttest.NewMemory() // use backend/sqldb or backend/bolt in production
	ctx := context.Background()
	a, err := segment.New(segment.Config{Store: store})
	if err != nil {
		panic(err)
	}
	defer a.Close()
	if err := a.Create(ctx, segment.Tag{Name: "orders", Step: 1000}); err != nil {
		panic(err)
	}
	first, _ := a.NextID(ctx, "orders")
	spans, _ := a.Next(ctx, "orders", 3)
	fmt.Println(first, spans[0].First, spans[0].Count)
	// Output: 1 2 3
}

func BenchmarkNextID(b *testing.B) {
	m := segmenttest.NewMemory()
	m.Create(context.Background(), segment.Tag{Name: "bench", Step: 1_000_000})
	a := newAlloc(b, segment.Config{Store: m, MaxStep: segment.MaxStep})
	ctx := context.Background()
	h, err := a.Tag(ctx, "bench")
	if err != nil {
		b.Fatal(err)
	}
	b.Run("handle", func(b *testing.B) {
		for b.Loop() {
			if _, err := h.NextID(ctx); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ids/s")
	})
	b.Run("by-name", func(b *testing.B) {
		for b.Loop() {
			if _, err := a.NextID(ctx, "bench"); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ids/s")
	})
	for _, g := range []int{2, 8, 64} {
		b.Run(fmt.Sprintf("handle/g=%d", g), func(b *testing.B) {
			var wg sync.WaitGroup
			per := b.N / g
			b.ResetTimer()
			for range g {
				wg.Go(func() {
					for range per {
						if _, err := h.NextID(ctx); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			b.ReportMetric(float64(per*g)/b.Elapsed().Seconds(), "ids/s")
		})
	}
	b.Run("batch-1000", func(b *testing.B) {
		var dst []segment.Span
		for b.Loop() {
			var err error
			if dst, err = h.Next(ctx, 1000, dst[:0]); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)*1000/b.Elapsed().Seconds(), "ids/s")
	})
}

// BenchmarkAtomicAdd is the baseline of the hot path: a bare
// atomic.Int64.Add loop.
func BenchmarkAtomicAdd(b *testing.B) {
	var n atomic.Int64
	for b.Loop() {
		n.Add(1)
	}
}
