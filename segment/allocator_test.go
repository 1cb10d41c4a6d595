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
		{segment.Config{Store: m, Sources: []segment.Source{{Store: m}}}, "both a Store and 1 Sources"},
	} {
		if err := tc.cfg.Validate(); !errors.Is(err, segment.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate(%+v) = %v, want ErrInvalidConfig naming %q", tc.cfg, err, tc.want)
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
	for _, ok := range []string{"a", "orders", "shop-1:orders:2026", strings.Repeat("x", 128), "A.b_c"} {
		if err := segment.ValidName(ok); err != nil {
			t.Errorf("ValidName(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"", strings.Repeat("x", 129), "a b", "ü", "a\x00", "a?b", "%2F", "/", "a/b", ".", ".."} {
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

// logCount is a slog handler that counts records by level.
type logCount struct {
	mu     sync.Mutex
	errors []string
}

func (l *logCount) Enabled(context.Context, slog.Level) bool { return true }
func (l *logCount) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logCount) WithGroup(string) slog.Handler            { return l }
func (l *logCount) Handle(_ context.Context, r slog.Record) error {
	if r.Level >= slog.LevelError {
		l.mu.Lock()
		l.errors = append(l.errors, r.Message)
		l.mu.Unlock()
	}
	return nil
}

// logged is a copy of the error records' messages so far.
func (l *logCount) logged() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.errors)
}

// settledErrors waits up to 5 s for at least want error records — a
// fetch in the background logs what it found just after the tag's state
// shows it — then 50 ms more for any beyond them, and returns them.
func (l *logCount) settledErrors(want int) []string {
	deadline := time.Now().Add(5 * time.Second)
	for len(l.logged()) < want && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)
	return l.logged()
}

// settle waits until the tag's next segment is fetched, so that the
// allocator's buffers (and its high mark) stop moving.
func settle(t *testing.T, a *segment.Allocator, tag string) segment.TagStats {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		for _, st := range a.Stats() {
			if st.Tag == tag && st.Next.Len() > 0 {
				return st
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no prefetched segment: %+v", a.Stats())
		}
		time.Sleep(time.Millisecond)
	}
}

// TestStoreWentBackwards: a store whose max_id is lowered below what the
// allocator fetched (a restored backup) gets the tag refused: nothing at or
// below the fetched ranges is issued again, the error wraps ErrRegressed and
// names the tag and both values, it is logged once, and Resume serves the
// tag again only once the store is above what was fetched.
func TestStoreWentBackwards(t *testing.T) {
	m := segmenttest.NewMemory()
	m.Create(t.Context(), segment.Tag{Name: "order", Step: 100})
	log := &logCount{}
	a := newAlloc(t, segment.Config{Store: m, SegmentDuration: -1, Logger: slog.New(log)})
	var ids []int64
	take := func() error {
		id, err := a.NextID(t.Context(), "order")
		if err == nil {
			ids = append(ids, id)
		}
		return err
	}
	for range 120 {
		if err := take(); err != nil {
			t.Fatal(err)
		}
	}
	before := settle(t, a, "order")
	if before.HighMark != 201 || before.Refused != "" {
		t.Fatalf("stats before the restore: %+v; want high mark 201 (four half-step segments)", before)
	}
	m.SetMaxID("order", 30) // a backup taken when max_id was 30
	var err error
	for range 1000 {
		if err = take(); err != nil {
			break
		}
	}
	if !errors.Is(err, segment.ErrRegressed) {
		t.Fatalf("after max_id went back to 30: %v, want ErrRegressed", err)
	}
	for _, want := range []string{`tag "order"`, "fetched up to 201", "store now at 30", "restored from an old backup", "operator resumes"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	for i, id := range ids {
		if i > 0 && id <= ids[i-1] || id >= 201 {
			t.Fatalf("ID %d (after %d): IDs must increase and stay within what was fetched before the restore", id, ids[max(i-1, 0)])
		}
	}
	// Refused: every path fails at once, with no fetch, and the detection
	// was logged once.
	fetches := m.Fetches.Load()
	for range 5 {
		if _, err := a.NextID(t.Context(), "order"); !errors.Is(err, segment.ErrRegressed) {
			t.Fatalf("NextID: %v", err)
		}
		if _, err := a.Next(t.Context(), "order", 3); !errors.Is(err, segment.ErrRegressed) {
			t.Fatalf("Next: %v", err)
		}
		h, err := a.Tag(t.Context(), "order")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := h.NextID(t.Context()); !errors.Is(err, segment.ErrRegressed) {
			t.Fatalf("Handle.NextID: %v", err)
		}
	}
	if got := m.Fetches.Load(); got != fetches {
		t.Fatalf("a refused tag fetched %d more segments", got-fetches)
	}
	if errs := log.settledErrors(1); len(errs) != 1 {
		t.Fatalf("%d error records (%v), want the detection logged once", len(errs), errs)
	}
	st := a.Stats()[0]
	if st.Refused != err.Error() || st.Regressions != 1 || st.HighMark != 201 {
		t.Fatalf("stats of the refused tag: %+v", st)
	}
	if errs := a.Refused(); len(errs) != 1 || !errors.Is(errs[0], segment.ErrRegressed) {
		t.Fatalf("Refused() = %v", errs)
	}

	// The store is still behind (at 80 after the refused fetch): Resume
	// refuses, naming both values.
	err = a.Resume(t.Context(), "order", 0)
	if !errors.Is(err, segment.ErrRegressed) || !strings.Contains(err.Error(), "at 80, below 201") {
		t.Fatalf("Resume with the store behind: %v", err)
	}
	for _, floor := range []int64{-1, 200} {
		if err := a.Resume(t.Context(), "order", floor); !errors.Is(err, segment.ErrInvalidTag) {
			t.Fatalf("Resume with floor %d: %v, want ErrInvalidTag", floor, err)
		}
	}
	if err := a.Resume(t.Context(), "nope", 0); !errors.Is(err, segment.ErrUnknownTag) {
		t.Fatalf("Resume of an unknown tag: %v", err)
	}
	if len(a.Refused()) != 1 {
		t.Fatal("a refused Resume cleared the refusal")
	}
	// The operator raises max_id in the database, then resumes.
	m.SetMaxID("order", 500)
	if err := a.Resume(t.Context(), "order", 0); err != nil {
		t.Fatal(err)
	}
	if len(a.Refused()) != 0 || a.Stats()[0].Refused != "" {
		t.Fatalf("still refused after Resume: %+v", a.Stats())
	}
	for range 300 {
		if err := take(); err != nil {
			t.Fatal(err)
		}
	}
	after := ids[len(ids)-300:]
	if after[0] != 500 || !slices.IsSorted(after) {
		t.Fatalf("IDs after Resume start at %d, want 500", after[0])
	}
	if st := a.Stats()[0]; st.Regressions != 1 || st.HighMark <= 500 {
		t.Fatalf("stats after Resume: %+v", st)
	}
}

// TestResumeRaisesTheStore: Resume with a floor raises every source's
// max_id to it (the difference is fetched and discarded), on a node that
// never loaded the tag too.
func TestResumeRaisesTheStore(t *testing.T) {
	m := segmenttest.NewMemory()
	m.Create(t.Context(), segment.Tag{Name: "order", Step: 10})
	a := newAlloc(t, segment.Config{Store: m, SegmentDuration: -1})
	if err := a.Resume(t.Context(), "order", 10_000); err != nil {
		t.Fatal(err)
	}
	if row, _ := m.Get(t.Context(), "order"); row.MaxID != 10_000 {
		t.Fatalf("max_id %d after Resume with floor 10000", row.MaxID)
	}
	if err := a.Resume(t.Context(), "order", 5000); err != nil { // already above: nothing to do
		t.Fatal(err)
	}
	if row, _ := m.Get(t.Context(), "order"); row.MaxID != 10_000 {
		t.Fatalf("max_id %d after Resume with floor 5000, want it left at 10000", row.MaxID)
	}
	if id, err := a.NextID(t.Context(), "order"); err != nil || id != 10_000 {
		t.Fatalf("NextID = %d, %v; want 10000", id, err)
	}
	// The first fetch takes half a step (10,000–10,005) and its first ID
	// starts the background fetch of the next half, which may or may not
	// have reached the store yet.
	if row, _ := m.Get(t.Context(), "order"); row.MaxID != 10_005 && row.MaxID != 10_010 {
		t.Fatalf("max_id %d, want 10005 or, with the prefetch done, 10010", row.MaxID)
	}
}

// TestStoreWentBackwardsUnderLoad: goroutines taking IDs while the store is
// lowered never get an ID twice, and all end with ErrRegressed.
func TestStoreWentBackwardsUnderLoad(t *testing.T) {
	m := segmenttest.NewMemory()
	m.Create(t.Context(), segment.Tag{Name: "hot", Step: 50})
	a := newAlloc(t, segment.Config{Store: m, MaxStep: 400})
	var mu sync.Mutex
	var all []int64
	var taken atomic.Int64
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			var ids []int64
			defer func() {
				mu.Lock()
				all = append(all, ids...)
				mu.Unlock()
			}()
			for {
				ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
				var err error
				if g%2 == 0 {
					var id int64
					if id, err = a.NextID(ctx, "hot"); err == nil {
						ids = append(ids, id)
					}
				} else {
					var spans []segment.Span
					if spans, err = a.Next(ctx, "hot", 7); err == nil {
						for _, s := range spans {
							ids = slices.AppendSeq(ids, s.All())
						}
					}
				}
				cancel()
				if err != nil {
					if !errors.Is(err, segment.ErrRegressed) {
						t.Errorf("goroutine %d: %v, want ErrRegressed", g, err)
					}
					return
				}
				if !slices.IsSorted(ids) {
					t.Errorf("goroutine %d: IDs not increasing", g)
					return
				}
				taken.Add(1)
			}
		})
	}
	for taken.Load() < 20_000 {
		time.Sleep(time.Millisecond)
	}
	m.SetMaxID("hot", 1)
	wg.Wait()
	slices.Sort(all)
	for i := 1; i < len(all); i++ {
		if all[i] == all[i-1] {
			t.Fatalf("ID %d handed out twice", all[i])
		}
	}
	if st := a.Stats()[0]; st.Regressions != 1 || st.Refused == "" {
		t.Fatalf("stats %+v", st)
	}
}

// TestMultiSourceWentBackwards: one source going backwards refuses the
// whole tag, naming the source.
func TestMultiSourceWentBackwards(t *testing.T) {
	even, odd := segmenttest.NewMemory(), segmenttest.NewMemory()
	for _, m := range []*segmenttest.Memory{even, odd} {
		m.Create(t.Context(), segment.Tag{Name: "ha", Step: 20})
	}
	a := newAlloc(t, segment.Config{SegmentDuration: -1, Sources: []segment.Source{
		{Store: even, Delta: 2, Remainder: 0}, {Store: odd, Delta: 2, Remainder: 1}}})
	seen := map[int64]bool{}
	for range 100 {
		id, err := a.NextID(t.Context(), "ha")
		if err != nil || seen[id] {
			t.Fatalf("NextID = %d, %v", id, err)
		}
		seen[id] = true
	}
	odd.SetMaxID("ha", 1)
	var err error
	for range 1000 {
		var id int64
		if id, err = a.NextID(t.Context(), "ha"); err != nil {
			break
		}
		if seen[id] {
			t.Fatalf("ID %d twice", id)
		}
		seen[id] = true
	}
	if !errors.Is(err, segment.ErrRegressed) || !strings.Contains(err.Error(), `tag "ha" (source 1)`) {
		t.Fatalf("after one source went back: %v", err)
	}
	if err := a.Resume(t.Context(), "ha", 0); !errors.Is(err, segment.ErrRegressed) || !strings.Contains(err.Error(), "(source 1)") {
		t.Fatalf("Resume with source 1 behind: %v", err)
	}
	if err := a.Resume(t.Context(), "ha", a.Stats()[0].HighMark+100); err != nil {
		t.Fatal(err)
	}
	for range 100 {
		id, err := a.NextID(t.Context(), "ha")
		if err != nil || seen[id] {
			t.Fatalf("after Resume: %d, %v", id, err)
		}
		seen[id] = true
	}
}

// badRanges is a store that answers fetches with a fixed range.
type badRanges struct {
	*segmenttest.Memory
	r segment.Range
}

func (b badRanges) Fetch(context.Context, string, int64) (segment.Range, error) { return b.r, nil }

// TestInsaneRanges: a range that is empty, reversed, negative or of the
// wrong length is refused as a failed fetch; nothing is issued from it.
func TestInsaneRanges(t *testing.T) {
	for _, r := range []segment.Range{{Start: 10, End: 5}, {Start: 10, End: 10}, {Start: -50, End: 0},
		{Start: 1, End: 1000}, {Start: math.MaxInt64 - 10, End: math.MinInt64 + 39}} {
		m := segmenttest.NewMemory()
		m.Create(t.Context(), segment.Tag{Name: "t", Step: 100})
		a := newAlloc(t, segment.Config{Store: badRanges{m, r}, SegmentDuration: -1})
		_, err := a.NextID(t.Context(), "t")
		if !errors.Is(err, segment.ErrUnavailable) || !strings.Contains(err.Error(), fmt.Sprintf("answered the range [%d, %d) to a fetch of 50 IDs", r.Start, r.End)) {
			t.Errorf("range %+v: %v", r, err)
		}
	}
}

// A stride the store records is obeyed; one that contradicts the source's
// configured stride, is not a stride, or changes while the tag is served
// gets the fetch's range given up, and nothing of it is handed out.
func TestRecordedStride(t *testing.T) {
	ctx := t.Context()
	m := segmenttest.NewMemory()
	if err := m.Create(ctx, segment.Tag{Name: "t", Step: 10, Delta: 3, Remainder: 2}); err != nil {
		t.Fatal(err)
	}
	a, err := segment.New(segment.Config{Sources: []segment.Source{{Store: m, Delta: 2, Remainder: 1}}, Logger: quiet(t), FetchTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if id, err := a.NextID(ctx, "t"); !errors.Is(err, segment.ErrInvalidConfig) || !strings.Contains(err.Error(), "configured with delta 2") {
		t.Fatalf("NextID with a stride that contradicts the source's: %d, %v", id, err)
	}

	b, err := segment.New(segment.Config{Store: m, Logger: quiet(t), SegmentDuration: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var got []int64
	for range 4 {
		id, err := b.NextID(ctx, "t")
		if err != nil || id%3 != 2 {
			t.Fatalf("NextID = %d, %v; want ≡ 2 (mod 3)", id, err)
		}
		got = append(got, id)
	}
	if err := m.SetStride("t", 2, 0); err != nil {
		t.Fatal(err)
	}
	refused := false
	for range 20 {
		id, err := b.NextID(ctx, "t")
		if err != nil {
			if !errors.Is(err, segment.ErrRegressed) || !strings.Contains(err.Error(), "changed from 3, 2 to 2, 0") {
				t.Fatalf("after the stride changed: %v", err)
			}
			refused = true
			break
		}
		if id%3 != 2 {
			t.Fatalf("ID %d after the stride changed: not of the stride the tag was served with", id)
		}
	}
	if !refused || len(b.Refused()) != 1 {
		t.Fatalf("a changed stride did not refuse the tag: %v", b.Refused())
	}
	// The operator resumes: the new stride is served.
	if err := b.Resume(ctx, "t", 0); err != nil {
		t.Fatal(err)
	}
	for range 10 {
		id, err := b.NextID(ctx, "t")
		if err != nil || id%2 != 0 || slices.Contains(got, id) {
			t.Fatalf("after Resume: %d, %v; want even, new", id, err)
		}
	}
	for _, bad := range [][2]int64{{2, 2}, {-1, 0}} {
		m2 := segmenttest.NewMemory()
		m2.Create(ctx, segment.Tag{Name: "t", Step: 10})
		m2.SetStride("t", bad[0], bad[1])
		c, _ := segment.New(segment.Config{Store: m2, Logger: quiet(t), FetchTimeout: time.Second})
		if id, err := c.NextID(ctx, "t"); err == nil || !strings.Contains(err.Error(), "records delta") {
			t.Errorf("stride %v: NextID = %d, %v", bad, id, err)
		}
		c.Close()
	}
}

// gatedStore holds back the answer of the first Fetch after arm, once it
// has its range, until release is closed: a fetch that finishes after one
// that began later.
type gatedStore struct {
	segment.Store
	mu      sync.Mutex
	armed   bool
	got     chan struct{} // closed when the held fetch has its range
	release chan struct{}
}

func (g *gatedStore) arm() {
	g.mu.Lock()
	g.armed = true
	g.mu.Unlock()
}

func (g *gatedStore) Fetch(ctx context.Context, tag string, n int64) (segment.Range, error) {
	r, err := g.Store.Fetch(ctx, tag, n)
	g.mu.Lock()
	hold := g.armed
	g.armed = false
	g.mu.Unlock()
	if hold {
		close(g.got)
		<-g.release
	}
	return r, err
}

// TestFetchesFinishingOutOfOrder: two fetches of one tag in flight at once
// (TakeSegment beside another, or beside the buffer's own refill) may
// finish in either order; the one that finishes last with the lower range
// is no store gone backwards (it was, before: the tag was refused until an
// operator resumed it, as TestTinyidPaths caught under load), while a
// range below one fetched before the fetch began still is
// (TestStoreWentBackwards).
func TestFetchesFinishingOutOfOrder(t *testing.T) {
	m := segmenttest.NewMemory()
	m.Create(t.Context(), segment.Tag{Name: "order", Step: 100})
	g := &gatedStore{Store: m, got: make(chan struct{}), release: make(chan struct{})}
	a := newAlloc(t, segment.Config{Store: g, SegmentDuration: -1})
	if _, err := a.NextID(t.Context(), "order"); err != nil {
		t.Fatal(err)
	}
	g.arm()
	var held segment.Span
	var heldErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		held, heldErr = a.TakeSegment(t.Context(), "order")
	}()
	<-g.got
	later, err := a.TakeSegment(t.Context(), "order")
	close(g.release)
	<-done
	if err != nil || heldErr != nil {
		t.Fatalf("two takes in flight at once: %v; %v", heldErr, err)
	}
	if held.First >= later.First {
		t.Fatalf("the held take's range starts at %d, the later one's at %d: the test did not reorder them", held.First, later.First)
	}
	if st := a.Stats()[0]; st.Refused != "" {
		t.Fatalf("the tag was refused: %s", st.Refused)
	}
	for range 300 { // through refills: the buffer still serves, above both
		id, err := a.NextID(t.Context(), "order")
		if err != nil {
			t.Fatal(err)
		}
		if id >= held.First && id < held.First+held.Count || id >= later.First && id < later.First+later.Count {
			t.Fatalf("ID %d of a segment taken whole", id)
		}
	}
}
