package segment_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/flakeid/flakeid/segment"
	"github.com/flakeid/flakeid/segment/segmenttest"
)

// sources are the Memory stores as sources that record their shares, named
// by their index in ms (not their position in the list).
func sources(ms []*segmenttest.Memory, order []int) []segment.Source {
	out := make([]segment.Source, len(order))
	for i, k := range order {
		out[i] = segment.Source{Store: ms[k], Name: fmt.Sprintf("store-%d", k)}
	}
	return out
}

// The promise: with several stores that record their shares, no ID is
// handed out twice, whatever shares the stores record and in whatever order
// the sources are listed; shares that overlap are refused (before any ID is
// issued) naming both stores, and CheckStrides says exactly when a
// configuration overlaps or leaves IDs unserved.
func TestRecordedSharesProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		ctx := t.Context()
		n := rapid.IntRange(2, 4).Draw(rt, "stores")
		delta := rapid.Int64Range(1, 5).Draw(rt, "delta")
		ms := make([]*segmenttest.Memory, n)
		shares := make([][2]int64, n)
		for k := range ms {
			ms[k] = segmenttest.NewMemory()
			d := delta
			if rapid.IntRange(0, 5).Draw(rt, "other delta") == 0 {
				d = rapid.Int64Range(1, 6).Draw(rt, "delta of a store")
			}
			r := rapid.Int64Range(0, d-1).Draw(rt, "remainder")
			shares[k] = [2]int64{d, r}
			if err := ms[k].Create(ctx, segment.Tag{Name: "t", Step: rapid.Int64Range(1, 30).Draw(rt, "step"), Delta: d, Remainder: r}); err != nil {
				rt.Fatal(err)
			}
		}
		// The oracle: do two shares hold a common ID (checked by brute
		// force over one common period), and does their union hold all?
		overlap, covered := false, true
		period := int64(60) // a multiple of every delta 1–6
		owner := make([]int, period)
		for x := range period {
			owner[x] = -1
			for k, s := range shares {
				if x%s[0] == s[1] {
					if owner[x] >= 0 {
						overlap = true
					}
					owner[x] = k
				}
			}
			if owner[x] < 0 {
				covered = false
			}
		}
		sameDelta := true
		for _, s := range shares {
			sameDelta = sameDelta && s[0] == shares[0][0]
		}
		order := rand.Perm(n)
		a := newAlloc(t, segment.Config{SegmentDuration: -1, Sources: sources(ms, order)})
		err := a.CheckStrides(ctx)
		switch {
		case overlap && !errors.Is(err, segment.ErrInvalidConfig):
			rt.Fatalf("shares %v overlap; CheckStrides = %v", shares, err)
		case !overlap && covered && sameDelta && err != nil:
			rt.Fatalf("shares %v fit and cover; CheckStrides = %v", shares, err)
		case !overlap && !(covered && sameDelta) && !errors.Is(err, segment.ErrInvalidConfig):
			rt.Fatalf("shares %v leave IDs unserved or differ in delta; CheckStrides = %v", shares, err)
		}
		seen := map[int64]bool{}
		for range rapid.IntRange(1, 300).Draw(rt, "ids") {
			id, err := a.NextID(ctx, "t")
			if overlap {
				if !errors.Is(err, segment.ErrInvalidConfig) || !strings.Contains(err.Error(), "store-") {
					rt.Fatalf("shares %v overlap; NextID = %d, %v; want ErrInvalidConfig naming the stores", shares, id, err)
				}
				return
			}
			if err != nil {
				rt.Fatal(err)
			}
			if seen[id] {
				rt.Fatalf("shares %v: ID %d twice", shares, id)
			}
			seen[id] = true
			if owner[id%period] < 0 {
				rt.Fatalf("shares %v: ID %d is in no store's share", shares, id)
			}
		}
	})
}

// Reordering the sources across a restart, and adding or removing one,
// never hands out an ID twice: each store serves the share it recorded
// when Allocator.Create made the tag.
func TestRecordedSharesReordered(t *testing.T) {
	ctx := t.Context()
	ms := []*segmenttest.Memory{segmenttest.NewMemory(), segmenttest.NewMemory(), segmenttest.NewMemory()}
	creator := newAlloc(t, segment.Config{Sources: sources(ms, []int{0, 1, 2})})
	if err := creator.Create(ctx, segment.Tag{Name: "orders", Step: 7}); err != nil {
		t.Fatal(err)
	}
	for k, m := range ms {
		got, err := m.Get(ctx, "orders")
		if err != nil || got.Delta != 3 || got.Remainder != int64(k) {
			t.Fatalf("store %d: %+v, %v; want delta 3, remainder %d", k, got, err, k)
		}
	}
	if err := creator.Create(ctx, segment.Tag{Name: "x", Step: 7, Delta: 3, Remainder: 1}); !errors.Is(err, segment.ErrInvalidTag) {
		t.Fatalf("Create with one share for all three stores: %v", err)
	}
	seen := map[int64]bool{}
	for i, order := range [][]int{{0, 1, 2}, {2, 0, 1}, {1, 2, 0}, {2, 1}, {0}, {1, 0, 2}} {
		a := newAlloc(t, segment.Config{SegmentDuration: -1, Sources: sources(ms, order)})
		if err := a.CheckStrides(ctx); len(order) > 1 && len(order) < 3 {
			if !errors.Is(err, segment.ErrInvalidConfig) || !strings.Contains(err.Error(), "no store serves the IDs ≡ 0 (mod 3)") {
				t.Fatalf("restart %d, sources %v: CheckStrides = %v; want the unserved share named", i, order, err)
			}
		} else if err != nil {
			t.Fatalf("restart %d, sources %v: CheckStrides = %v", i, order, err)
		}
		for range 200 {
			id, err := a.NextID(ctx, "orders")
			if err != nil {
				t.Fatal(err)
			}
			if seen[id] {
				t.Fatalf("restart %d, sources %v: ID %d twice", i, order, id)
			}
			seen[id] = true
		}
		a.Close()
	}
}

// With one store down, IDs keep coming from the others; back, it serves
// its share again. A store whose recorded share changes to one that
// collides while it is served gets the tag refused until Resume.
func TestRecordedSharesOutage(t *testing.T) {
	ctx := t.Context()
	ms := []*segmenttest.Memory{segmenttest.NewMemory(), segmenttest.NewMemory()}
	a := newAlloc(t, segment.Config{SegmentDuration: -1, FetchTimeout: 50e6, Sources: sources(ms, []int{1, 0})})
	if err := a.Create(ctx, segment.Tag{Name: "t", Step: 10}); err != nil {
		t.Fatal(err)
	}
	seen := map[int64]bool{}
	take := func(k int) (odd, even int) {
		for range k {
			id, err := a.NextID(ctx, "t")
			if err != nil {
				t.Fatal(err)
			}
			if seen[id] {
				t.Fatalf("ID %d twice", id)
			}
			seen[id] = true
			if id%2 == 1 {
				odd++
			} else {
				even++
			}
		}
		return
	}
	if odd, even := take(200); odd == 0 || even == 0 {
		t.Fatalf("%d odd, %d even: both stores should serve", odd, even)
	}
	ms[0].Cut() // listed second, Create gave it remainder 1
	take(20)    // what was buffered from it
	if odd, even := take(300); odd > 10 || even < 290 {
		t.Fatalf("the odd store down: %d odd, %d even", odd, even)
	}
	ms[0].Heal()
	if odd, even := take(300); odd == 0 || even == 0 {
		t.Fatalf("store back: %d odd, %d even; want both again", odd, even)
	}
	if err := ms[1].SetStride("t", 2, 1); err != nil { // store-1 now claims store-0's share
		t.Fatal(err)
	}
	var err error
	for range 100 {
		if _, err = a.NextID(ctx, "t"); err != nil {
			break
		}
	}
	if !errors.Is(err, segment.ErrRegressed) || !errors.Is(err, segment.ErrInvalidConfig) {
		t.Fatalf("a store's share changed to collide: %v; want the tag refused", err)
	}
	if err := a.Resume(ctx, "t", 0); !errors.Is(err, segment.ErrInvalidConfig) || !strings.Contains(err.Error(), "store-0") || !strings.Contains(err.Error(), "store-1") {
		t.Fatalf("Resume with colliding shares: %v; want it refused naming both stores", err)
	}
}

// A series' periods created with several stores take, in each store, the
// share the series has there; a store down when a period begins gets no
// row for it, and the period is served from the others.
func TestRecordedSharesSeries(t *testing.T) {
	ctx := t.Context()
	ms := []*segmenttest.Memory{segmenttest.NewMemory(), segmenttest.NewMemory()}
	a := newAlloc(t, segment.Config{SegmentDuration: -1, Sources: sources(ms, []int{0, 1})})
	if err := a.Create(ctx, segment.Tag{Name: "ord", Step: 10, Series: &segment.Series{Period: segment.Day, Template: "{yyyyMMdd}{seq:6}"}}); err != nil {
		t.Fatal(err)
	}
	ms[1].Cut()
	seen := map[string]bool{}
	for range 50 {
		num, err := a.NextNumber(ctx, "ord")
		if err != nil {
			t.Fatal(err)
		}
		if seen[num.Text] {
			t.Fatalf("number %s twice", num.Text)
		}
		seen[num.Text] = true
	}
	ms[1].Heal()
	rows, err := ms[0].List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	periods := 0
	for _, r := range rows {
		if strings.HasPrefix(r.Name, "ord::") {
			periods++
			if r.Delta != 2 || r.Remainder != 0 {
				t.Fatalf("period row %+v; want the series' share in store 0, ≡ 0 (mod 2)", r)
			}
		}
	}
	if periods != 1 {
		t.Fatalf("%d period rows in store 0, want 1", periods)
	}
	if err := a.CheckStrides(ctx); err != nil {
		t.Fatalf("CheckStrides with a period missing from a store that was down: %v", err)
	}
}

func TestRecordedSharesConfig(t *testing.T) {
	m1, m2 := segmenttest.NewMemory(), segmenttest.NewMemory()
	for _, tc := range []struct {
		cfg  segment.Config
		want string
	}{
		{segment.Config{AutoCreate: true, Sources: []segment.Source{{Store: m1}, {Store: m2}}}, "auto-create with 2 sources"},
		{segment.Config{Sources: []segment.Source{{Store: m1}, {Store: m2, Delta: 2, Remainder: 1}}}, "set Delta in every source or in none"},
		{segment.Config{Sources: []segment.Source{{Store: m1, Name: "a", Delta: 2}, {Store: m2, Name: "b", Delta: 2}}}, "a and b share remainder 0"},
	} {
		if err := tc.cfg.Validate(); !errors.Is(err, segment.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate = %v, want ErrInvalidConfig naming %q", err, tc.want)
		}
	}
	// A store that records no share, among several, is refused for the
	// tag: it would serve every ID.
	m1.Create(t.Context(), segment.Tag{Name: "t", Step: 5})
	m2.Create(t.Context(), segment.Tag{Name: "t", Step: 5, Delta: 2, Remainder: 1})
	a := newAlloc(t, segment.Config{Sources: []segment.Source{{Store: m1, Name: "plain"}, {Store: m2, Name: "odd"}}})
	if _, err := a.NextID(t.Context(), "t"); !errors.Is(err, segment.ErrInvalidConfig) || !strings.Contains(err.Error(), "plain records no delta") {
		t.Fatalf("NextID with a store that records no share: %v", err)
	}
	if err := a.CheckStrides(t.Context()); !errors.Is(err, segment.ErrInvalidConfig) || !strings.Contains(err.Error(), "plain records no delta") {
		t.Fatalf("CheckStrides: %v", err)
	}
	// Configured shares: a store recording another is named.
	a = newAlloc(t, segment.Config{Sources: []segment.Source{{Store: m2, Name: "odd", Delta: 2}, {Store: m1, Name: "plain", Delta: 2, Remainder: 1}}})
	if err := a.CheckStrides(t.Context()); !errors.Is(err, segment.ErrInvalidConfig) || !strings.Contains(err.Error(), "odd records the IDs ≡ 1 (mod 2), and is configured to serve the IDs ≡ 0 (mod 2)") {
		t.Fatalf("CheckStrides, configured shares: %v", err)
	}
}
