// Package segmenttest is the conformance suite every segment.Store passes,
// in the manner of testing/slogtest: a store's test calls Run with a Harness
// that connects to the real database, and the same tests run for every
// store. It also has Memory, an in-memory reference store.
package segmenttest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flakeid/flakeid/segment"
)

// Harness connects the suite to a store.
type Harness struct {
	// Open prepares an empty namespace (table, bucket, file) for one test
	// and returns its Connector. Clean up with t.Cleanup.
	Open func(t *testing.T) Connector
}

// Connector makes clients of one namespace, as separate processes would.
type Connector interface {
	// Connect returns a new client.
	Connect(t *testing.T) segment.Store
	// ConnectFaulty returns a new client whose link to the database the
	// Fault can cut, heal, or reset (drop every connection, as a database
	// restart does).
	ConnectFaulty(t *testing.T) (segment.Store, Fault)
}

// Restorer is implemented by a Connector that can put its namespace back to
// an earlier copy, as restoring a database from a backup does. The test
// RestoredFromBackup runs only with a Connector that implements it.
type Restorer interface {
	// Backup copies every tag's max_id and returns a function that puts
	// the copied values back.
	Backup(t *testing.T) (restore func())
}

// Fault acts on a client's link to its database.
type Fault interface {
	Cut()
	Heal()
	Reset()
}

// Run runs the conformance suite.
func Run(t *testing.T, h Harness) {
	for _, tc := range []struct {
		name string
		fn   func(*testing.T, Connector)
	}{
		{"TagAdmin", tagAdmin},
		{"FetchRanges", fetchRanges},
		{"FetchErrors", fetchErrors},
		{"ConcurrentFetchesNeverOverlap", concurrentFetches},
		{"AllocatorsShareStoreUniquely", allocatorsShare},
		{"DynamicStep", dynamicStep},
		{"UnknownAndAutoCreatedTags", unknownTags},
		{"OutageServedFromBuffers", outage},
		{"RestartMidRun", restart},
		{"RestoredFromBackup", restoredFromBackup},
		{"DeleteKeepsMark", deleteKeepsMark},
		{"AllocatorDelete", allocatorDelete},
		{"DeleteNeverReissues", deleteNeverReissues},
		{"SeriesAdmin", seriesAdmin},
		{"SeriesNeverDuplicates", seriesNeverDuplicates},
		{"SeriesPeriodFull", seriesPeriodFull},
		{"Stride", stride},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, h.Open(t)) })
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func mustCreate(t *testing.T, s segment.Store, tag segment.Tag) {
	t.Helper()
	if err := s.Create(ctxT(t), tag); err != nil {
		t.Fatalf("Create(%+v): %v", tag, err)
	}
}

func quiet(t *testing.T) *slog.Logger { return slog.New(slog.NewTextHandler(t.Output(), nil)) }

func allocator(t *testing.T, s segment.Store, cfg segment.Config) *segment.Allocator {
	t.Helper()
	cfg.Store = s
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

func tagAdmin(t *testing.T, c Connector) {
	s := c.Connect(t)
	ctx := ctxT(t)
	if tags, err := s.List(ctx); err != nil || len(tags) != 0 {
		t.Fatalf("List of an empty store = %+v, %v", tags, err)
	}
	mustCreate(t, s, segment.Tag{Name: "orders", Step: 1000, Description: "order numbers"})
	mustCreate(t, s, segment.Tag{Name: "chat:42:messages", Step: 10, MaxID: 5000})
	if err := s.Create(ctx, segment.Tag{Name: "orders", Step: 5}); !errors.Is(err, segment.ErrTagExists) {
		t.Fatalf("second Create of a tag: %v, want ErrTagExists", err)
	}
	for _, bad := range []segment.Tag{{Name: "", Step: 1}, {Name: "has space", Step: 1}, {Name: "ok", Step: 0}, {Name: "ok", Step: -4}, {Name: "snowflake", Step: 1}, {Name: "SnowFlake:orders", Step: 1}} {
		if err := s.Create(ctx, bad); !errors.Is(err, segment.ErrInvalidTag) {
			t.Errorf("Create(%+v): %v, want ErrInvalidTag", bad, err)
		}
	}
	got, err := s.Get(ctx, "orders")
	if err != nil || got.Name != "orders" || got.MaxID != 1 || got.Step != 1000 || got.Description != "order numbers" {
		t.Fatalf("Get(orders) = %+v, %v; want max id 1 (Leaf's default), step 1000", got, err)
	}
	if got, err := s.Get(ctx, "chat:42:messages"); err != nil || got.MaxID != 5000 {
		t.Fatalf("Get = %+v, %v; want max id 5000", got, err)
	}
	if _, err := s.Get(ctx, "nope"); !errors.Is(err, segment.ErrUnknownTag) {
		t.Fatalf("Get(nope): %v, want ErrUnknownTag", err)
	}
	step, desc := int64(250), "resized"
	if err := s.Update(ctx, "orders", &step, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Update(ctx, "orders", nil, &desc); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Get(ctx, "orders"); got.Step != 250 || got.Description != "resized" || got.MaxID != 1 {
		t.Fatalf("after Update: %+v", got)
	}
	if err := s.Update(ctx, "nope", &step, nil); !errors.Is(err, segment.ErrUnknownTag) {
		t.Fatalf("Update(nope): %v, want ErrUnknownTag", err)
	}
	tags, err := s.List(ctx)
	if err != nil || len(tags) != 2 || tags[0].Name != "chat:42:messages" || tags[1].Name != "orders" {
		t.Fatalf("List = %+v, %v; want both tags by name", tags, err)
	}
}

func fetchRanges(t *testing.T, c Connector) {
	s := c.Connect(t)
	ctx := ctxT(t)
	mustCreate(t, s, segment.Tag{Name: "t", Step: 100})
	next := int64(1)
	for _, n := range []int64{1, 100, 7, 100_000} {
		r, err := s.Fetch(ctx, "t", n)
		if err != nil {
			t.Fatal(err)
		}
		if r.Start != next || r.Len() != n {
			t.Fatalf("Fetch(%d) = %+v, want [%d, %d)", n, r, next, next+n)
		}
		next = r.End
	}
	if got, _ := s.Get(ctx, "t"); got.MaxID != next || got.Step != 100 {
		t.Fatalf("after fetching, the row is %+v; want max id %d, step unchanged", got, next)
	}
}

func fetchErrors(t *testing.T, c Connector) {
	s := c.Connect(t)
	ctx := ctxT(t)
	if _, err := s.Fetch(ctx, "nope", 10); !errors.Is(err, segment.ErrUnknownTag) {
		t.Fatalf("Fetch of an unknown tag: %v", err)
	}
	mustCreate(t, s, segment.Tag{Name: "edge", Step: 10, MaxID: math.MaxInt64 - 5})
	if r, err := s.Fetch(ctx, "edge", 5); err != nil || r.End != math.MaxInt64 {
		t.Fatalf("Fetch to the last ID: %+v, %v", r, err)
	}
	if _, err := s.Fetch(ctx, "edge", 1); !errors.Is(err, segment.ErrExhausted) {
		t.Fatalf("Fetch past int64: %v, want ErrExhausted", err)
	}
	if got, _ := s.Get(ctx, "edge"); got.MaxID != math.MaxInt64 {
		t.Fatalf("a refused fetch changed the row: %+v", got)
	}
	mustCreate(t, s, segment.Tag{Name: "z", Step: 10})
	if _, err := s.Fetch(ctx, "z", 0); err == nil {
		t.Fatal("Fetch of 0 IDs succeeded")
	}
}

// concurrentFetches: many clients fetching one tag at once get disjoint
// ranges that together cover [1, max id) with no hole.
func concurrentFetches(t *testing.T, c Connector) {
	const clients, each = 8, 40
	stores := make([]segment.Store, clients)
	for i := range stores {
		stores[i] = c.Connect(t)
	}
	mustCreate(t, stores[0], segment.Tag{Name: "hot", Step: 10})
	var mu sync.Mutex
	var ranges []segment.Range
	var wg sync.WaitGroup
	for i, s := range stores {
		wg.Go(func() {
			for k := range each {
				r, err := s.Fetch(ctxT(t), "hot", int64(1+(i+k)%13))
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				ranges = append(ranges, r)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	slices.SortFunc(ranges, func(a, b segment.Range) int { return int(a.Start - b.Start) })
	next := int64(1)
	for _, r := range ranges {
		if r.Start != next {
			t.Fatalf("range %+v after %d: ranges overlap or leave a hole", r, next)
		}
		next = r.End
	}
	if got, _ := stores[0].Get(ctxT(t), "hot"); got.MaxID != next || len(ranges) != clients*each {
		t.Fatalf("%d ranges up to %d, row %+v", len(ranges), next, got)
	}
}

// allocatorsShare: several allocators, each with its own client, on many
// goroutines: no ID twice, each goroutine's IDs increasing.
func allocatorsShare(t *testing.T, c Connector) {
	const allocators, goroutines, per = 3, 6, 4000
	admin := c.Connect(t)
	mustCreate(t, admin, segment.Tag{Name: "shared", Step: 200})
	var mu sync.Mutex
	var all []int64
	var wg sync.WaitGroup
	for range allocators {
		a := allocator(t, c.Connect(t), segment.Config{})
		for g := range goroutines {
			wg.Go(func() {
				ids := make([]int64, 0, per)
				for len(ids) < per {
					if g%2 == 0 {
						spans, err := a.Next(ctxT(t), "shared", min(37, per-len(ids)))
						if err != nil {
							t.Error(err)
							return
						}
						for _, sp := range spans {
							for id := range sp.All() {
								ids = append(ids, id)
							}
						}
						continue
					}
					id, err := a.NextID(ctxT(t), "shared")
					if err != nil {
						t.Error(err)
						return
					}
					ids = append(ids, id)
				}
				if !slices.IsSorted(ids) {
					t.Error("one goroutine's IDs are not increasing")
				}
				mu.Lock()
				all = append(all, ids...)
				mu.Unlock()
			})
		}
	}
	wg.Wait()
	slices.Sort(all)
	for i := 1; i < len(all); i++ {
		if all[i] == all[i-1] {
			t.Fatalf("ID %d handed out twice", all[i])
		}
	}
	if len(all) != allocators*goroutines*per {
		t.Fatalf("%d IDs, want %d", len(all), allocators*goroutines*per)
	}
}

// fakeClock moves only when told to.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (f *fakeClock) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *fakeClock) add(d time.Duration) {
	f.mu.Lock()
	f.now = f.now.Add(d)
	f.mu.Unlock()
}

// dynamicStep: segments used up fast double the step up to MaxStep; slow
// ones halve it down to the tag's configured step.
func dynamicStep(t *testing.T, c Connector) {
	s := c.Connect(t)
	mustCreate(t, s, segment.Tag{Name: "dyn", Step: 100})
	clk := &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	a := allocator(t, s, segment.Config{SegmentDuration: time.Minute, MaxStep: 800, Now: clk.Now})
	stats := func() segment.TagStats {
		for _, st := range a.Stats() {
			if st.Tag == "dyn" {
				return st
			}
		}
		t.Fatal("no stats for the tag")
		return segment.TagStats{}
	}
	use := func(n int) {
		for range n {
			if _, err := a.NextID(ctxT(t), "dyn"); err != nil {
				t.Fatal(err)
			}
		}
	}
	use(1)
	var steps []int64
	for range 6 { // fast: a segment every second
		clk.add(time.Second)
		use(int(stats().Size))
		steps = append(steps, stats().Step)
	}
	if got := stats().Step; got != 800 {
		t.Fatalf("after fast segments the step is %d (history %v), want the cap 800", got, steps)
	}
	for range 8 { // slow: a segment every hour
		clk.add(time.Hour)
		use(int(stats().Size))
		steps = append(steps, stats().Step)
	}
	if got := stats().Step; got != 100 {
		t.Fatalf("after slow segments the step is %d (history %v), want the tag's step 100", got, steps)
	}
	if st := stats(); st.MinStep != 100 || st.Fetches < 10 {
		t.Fatalf("stats %+v", st)
	}
}

func unknownTags(t *testing.T, c Connector) {
	s := c.Connect(t)
	a := allocator(t, s, segment.Config{})
	if _, err := a.NextID(ctxT(t), "missing"); !errors.Is(err, segment.ErrUnknownTag) {
		t.Fatalf("NextID of an unknown tag: %v, want ErrUnknownTag", err)
	}
	if _, err := a.Next(ctxT(t), "bad tag!", 1); !errors.Is(err, segment.ErrInvalidTag) {
		t.Fatalf("Next of an invalid tag name: %v, want ErrInvalidTag", err)
	}
	if _, err := a.Next(ctxT(t), "missing", 0); !errors.Is(err, segment.ErrInvalidCount) {
		t.Fatalf("Next of 0 IDs: %v, want ErrInvalidCount", err)
	}
	auto := allocator(t, s, segment.Config{AutoCreate: true, DefaultStep: 50})
	id, err := auto.NextID(ctxT(t), "fresh")
	if err != nil || id != 1 {
		t.Fatalf("auto-created tag's first ID = %d, %v; want 1", id, err)
	}
	if got, err := s.Get(ctxT(t), "fresh"); err != nil || got.Step != 50 {
		t.Fatalf("auto-created row %+v, %v", got, err)
	}
}

// outage: with the store cut off, the allocator serves from its buffers; a
// request it cannot serve fails with ErrUnavailable once its context ends;
// after recovery nothing is handed out twice.
func outage(t *testing.T, c Connector) {
	s, fault := c.ConnectFaulty(t)
	mustCreate(t, s, segment.Tag{Name: "out", Step: 1000})
	a := allocator(t, s, segment.Config{FetchTimeout: 500 * time.Millisecond, SegmentDuration: -1})
	seen := map[int64]bool{}
	take := func(ctx context.Context) error {
		id, err := a.NextID(ctx, "out")
		if err != nil {
			return err
		}
		if seen[id] {
			t.Fatalf("ID %d handed out twice", id)
		}
		seen[id] = true
		return nil
	}
	for range 300 {
		if err := take(ctxT(t)); err != nil {
			t.Fatal(err)
		}
	}
	// Let the prefetch land, so both buffers are full.
	deadline := time.Now().Add(10 * time.Second)
	for {
		st := a.Stats()
		if len(st) == 1 && st[0].Next.Len() > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no prefetched segment: %+v", st)
		}
		time.Sleep(10 * time.Millisecond)
	}
	fault.Cut()
	served := 0
	var err error
	for {
		ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
		err = take(ctx)
		cancel()
		if err != nil {
			break
		}
		served++
	}
	if !errors.Is(err, segment.ErrUnavailable) {
		t.Fatalf("once the buffers ran dry: %v, want ErrUnavailable", err)
	}
	// The buffers held what was left of the current segment and the next:
	// two halves of a step, less the 300 taken.
	if served < 500-300+500-1 || served > 1000 {
		t.Fatalf("served %d IDs from the buffers during the outage, want about %d", served, 1000-300)
	}
	fault.Heal()
	for range 2000 {
		if err := take(ctxT(t)); err != nil {
			t.Fatalf("after recovery: %v", err)
		}
	}
}

// restart: connections dropped mid-run (a database restart) cost at most a
// retry; nothing is handed out twice, by this allocator or a fresh one.
func restart(t *testing.T, c Connector) {
	s, fault := c.ConnectFaulty(t)
	mustCreate(t, s, segment.Tag{Name: "rs", Step: 20})
	a := allocator(t, s, segment.Config{FetchTimeout: 2 * time.Second})
	seen := map[int64]bool{}
	var last int64
	for i := range 3000 {
		if i%500 == 250 {
			fault.Reset()
		}
		id, err := a.NextID(ctxT(t), "rs")
		if err != nil {
			t.Fatalf("after %d IDs: %v", i, err)
		}
		if seen[id] || id <= last {
			t.Fatalf("ID %d after %d", id, last)
		}
		seen[id], last = true, id
	}
	a.Close()
	b := allocator(t, c.Connect(t), segment.Config{})
	for range 100 {
		id, err := b.NextID(ctxT(t), "rs")
		if err != nil {
			t.Fatal(err)
		}
		if seen[id] {
			t.Fatalf("a fresh allocator reissued %d", id)
		}
	}
	if got, _ := c.Connect(t).Get(ctxT(t), "rs"); got.MaxID <= last {
		t.Fatalf("row max id %d is not past the last ID %d", got.MaxID, last)
	}
}

// restoredFromBackup: a store put back to an older copy would hand out
// ranges an allocator already fetched; the allocator refuses the tag
// instead (ErrRegressed, naming both values), issues nothing more from it,
// and serves again only once Resume finds the store raised above what it
// fetched.
func restoredFromBackup(t *testing.T, c Connector) {
	r, ok := c.(Restorer)
	if !ok {
		t.Skip("the harness cannot restore a backup: its Connector is not a Restorer")
	}
	admin := c.Connect(t)
	mustCreate(t, admin, segment.Tag{Name: "rb", Step: 100})
	restore := r.Backup(t) // max_id 1
	a := allocator(t, c.Connect(t), segment.Config{SegmentDuration: -1})
	seen := map[int64]bool{}
	var last int64
	take := func() error {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		id, err := a.NextID(ctx, "rb")
		if err != nil {
			return err
		}
		if seen[id] || id <= last {
			t.Fatalf("ID %d after %d", id, last)
		}
		seen[id], last = true, id
		return nil
	}
	for range 300 {
		if err := take(); err != nil {
			t.Fatal(err)
		}
	}
	restore()
	// What is buffered (at most a step) may still be served; the next
	// fetch finds the store at 1, below what the allocator fetched.
	var err error
	for range 1000 {
		if err = take(); err != nil {
			break
		}
	}
	if !errors.Is(err, segment.ErrRegressed) {
		t.Fatalf("after the store was restored to max_id 1: %v, want ErrRegressed", err)
	}
	st := a.Stats()[0]
	if want := fmt.Sprintf(`tag "rb": fetched up to %d, store now at 1`, st.HighMark); !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q does not say %q", err, want)
	}
	if st.Refused != err.Error() || st.Regressions != 1 || st.HighMark <= last {
		t.Fatalf("stats of the refused tag: %+v (last ID %d)", st, last)
	}
	if errs := a.Refused(); len(errs) != 1 || errs[0].Error() != err.Error() {
		t.Fatalf("Refused() = %v", errs)
	}
	// Nothing more is issued, by any path, and no fetch waits.
	for range 3 {
		if _, err := a.NextID(ctxT(t), "rb"); !errors.Is(err, segment.ErrRegressed) {
			t.Fatalf("NextID of the refused tag: %v", err)
		}
		if spans, err := a.Next(ctxT(t), "rb", 5); !errors.Is(err, segment.ErrRegressed) || len(spans) != 0 {
			t.Fatalf("Next of the refused tag: %v, %v", spans, err)
		}
	}
	ctx := ctxT(t)
	if err := a.Resume(ctx, "rb", 0); !errors.Is(err, segment.ErrRegressed) {
		t.Fatalf("Resume with the store still behind: %v, want ErrRegressed", err)
	}
	if err := a.Resume(ctx, "rb", st.HighMark-1); !errors.Is(err, segment.ErrInvalidTag) {
		t.Fatalf("Resume with a floor below what was fetched: %v, want ErrInvalidTag", err)
	}
	if _, err := a.NextID(ctx, "rb"); !errors.Is(err, segment.ErrRegressed) {
		t.Fatalf("after refused resumes: %v", err)
	}
	floor := st.HighMark + 1000
	if err := a.Resume(ctx, "rb", floor); err != nil {
		t.Fatalf("Resume with floor %d: %v", floor, err)
	}
	if row, err := admin.Get(ctx, "rb"); err != nil || row.MaxID < floor {
		t.Fatalf("after Resume the row is %+v, %v; want max id at least %d", row, err, floor)
	}
	first := true
	for range 500 {
		if err := take(); err != nil {
			t.Fatalf("after Resume: %v", err)
		}
		if first && last < floor {
			t.Fatalf("first ID after Resume %d, want at least the floor %d", last, floor)
		}
		first = false
	}
	if st := a.Stats()[0]; st.Refused != "" || st.Regressions != 1 || len(a.Refused()) != 0 {
		t.Fatalf("stats after Resume: %+v", st)
	}
}

// stride: every store records a tag's share (delta and remainder): Get,
// List and Fetch return it, and every ID an allocator hands out is ≡
// remainder (mod delta), above the tag's max_id, and unique across
// allocators. A remainder not below the delta is refused. A deleted tag
// comes back only with the share it had (several stores serving one tag
// rely on a store's share never changing).
func stride(t *testing.T, c Connector) {
	ctx := ctxT(t)
	s := c.Connect(t)
	if err := s.Create(ctx, segment.Tag{Name: "bad", Step: 10, Delta: 2, Remainder: 2}); !errors.Is(err, segment.ErrInvalidTag) {
		t.Fatalf("Create with remainder 2 of delta 2: %v, want ErrInvalidTag", err)
	}
	if _, err := s.Get(ctx, "bad"); !errors.Is(err, segment.ErrUnknownTag) {
		t.Fatalf("a refused Create left a tag: %v", err)
	}
	if err := s.Create(ctx, segment.Tag{Name: "odd", Step: 30, Delta: 3, Remainder: 1, MaxID: 100}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, "odd")
	if err != nil || got.Delta != 3 || got.Remainder != 1 || got.MaxID != 100 {
		t.Fatalf("Get = %+v, %v; want delta 3, remainder 1, max id 100", got, err)
	}
	if all, err := s.List(ctx); err != nil || len(all) != 1 || all[0].Delta != 3 || all[0].Remainder != 1 {
		t.Fatalf("List = %+v, %v; want the tag with delta 3, remainder 1", all, err)
	}
	if r, err := s.Fetch(ctx, "odd", 5); err != nil || r.Delta != 3 || r.Remainder != 1 || r.Start != 100 {
		t.Fatalf("Fetch = %+v, %v; want [100, 105) with delta 3, remainder 1", r, err)
	}
	// A store's share of a tag never changes: deleted and created again,
	// the tag comes back only with the share it had.
	if err := s.Create(ctx, segment.Tag{Name: "plain", Step: 10}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name        string
		was, is     [2]int64
		ok          bool
		description string
	}{
		{"odd", [2]int64{3, 1}, [2]int64{3, 2}, false, "another remainder"},
		{"odd", [2]int64{3, 1}, [2]int64{2, 1}, false, "another delta"},
		{"odd", [2]int64{3, 1}, [2]int64{0, 0}, false, "every ID"},
		{"plain", [2]int64{0, 0}, [2]int64{2, 0}, false, "a share of a tag that served every ID"},
		{"plain", [2]int64{0, 0}, [2]int64{1, 0}, true, "delta 1: every ID, as before"},
		{"odd", [2]int64{3, 1}, [2]int64{3, 1}, true, "the same share"},
	} {
		if err := s.Delete(ctx, tc.name); err != nil {
			t.Fatal(err)
		}
		err := s.Create(ctx, segment.Tag{Name: tc.name, Step: 10, Delta: tc.is[0], Remainder: tc.is[1]})
		if tc.ok != (err == nil) || !tc.ok && !errors.Is(err, segment.ErrInvalidTag) {
			t.Fatalf("tag %q with delta %d, remainder %d, deleted and created again with %v (%s): %v", tc.name, tc.was[0], tc.was[1], tc.is, tc.description, err)
		}
		if !tc.ok {
			if _, err := s.Get(ctx, tc.name); !errors.Is(err, segment.ErrUnknownTag) {
				t.Fatalf("a refused Create brought %q back: %v", tc.name, err)
			}
			if err := s.Create(ctx, segment.Tag{Name: tc.name, Step: 10, Delta: tc.was[0], Remainder: tc.was[1]}); err != nil {
				t.Fatalf("creating %q again with its share %v: %v", tc.name, tc.was, err)
			}
		}
	}
	if got, err := s.Get(ctx, "odd"); err != nil || got.MaxID < 105 {
		t.Fatalf("odd, created again: %+v, %v; want max_id ≥ 105", got, err)
	}
	seen := map[int64]bool{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range 3 {
		a := allocator(t, c.Connect(t), segment.Config{SegmentDuration: -1})
		wg.Go(func() {
			for range 200 {
				id, err := a.NextID(ctx, "odd")
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				if seen[id] || id%3 != 1 || id < 100 {
					t.Errorf("ID %d: seen before %v, want ≡ 1 (mod 3) and ≥ 100", id, seen[id])
				}
				seen[id] = true
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	sp, err := allocator(t, c.Connect(t), segment.Config{}).TakeSegment(ctx, "odd")
	if err != nil || sp.Stride != 3 || sp.First%3 != 1 || sp.Count < 1 {
		t.Fatalf("TakeSegment = %+v, %v", sp, err)
	}
	for id := range sp.All() {
		if seen[id] {
			t.Fatalf("TakeSegment handed out %d again", id)
		}
	}
}
