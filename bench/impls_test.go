package bench

import (
	"sync"
	"testing"
)

// TestDistinct has each implementation issue a few thousand IDs from four
// goroutines at once and checks that no value repeats.
func TestDistinct(t *testing.T) {
	const goroutines, calls = 4, 1000
	for _, im := range Impls() {
		t.Run(im.Name, func(t *testing.T) {
			factory, err := im.New()
			if err != nil {
				t.Fatal(err)
			}
			var (
				mu     sync.Mutex
				ints   []int64
				bytes  [][20]byte
				ranges []Range
				wg     sync.WaitGroup
			)
			for range goroutines {
				c := factory()
				wg.Go(func() {
					var li []int64
					var lb [][20]byte
					var lr []Range
					for range calls {
						switch {
						case c.Int != nil:
							id, err := c.Int()
							if err != nil {
								t.Error(err)
								return
							}
							li = append(li, id)
						case c.Batch != nil:
							first, n, err := c.Batch()
							if err != nil || n < 1 {
								t.Error(n, err)
								return
							}
							lr = append(lr, Range{first, n})
						default:
							var b [20]byte
							if err := c.Bytes(&b); err != nil {
								t.Error(err)
								return
							}
							lb = append(lb, b)
						}
					}
					mu.Lock()
					defer mu.Unlock()
					ints = append(ints, li...)
					bytes = append(bytes, lb...)
					ranges = append(ranges, lr...)
				})
			}
			wg.Wait()
			if got := len(ints) + len(bytes) + len(ranges); got != goroutines*calls {
				t.Fatalf("got %d results, want %d", got, goroutines*calls)
			}
			for _, id := range ints {
				if id < 0 {
					t.Fatalf("negative id %d", id)
				}
			}
			if d := DupsInt64(ints); d != 0 {
				t.Errorf("%d duplicate integer IDs of %d", d, len(ints))
			}
			if d := DupsBytes(bytes); d != 0 {
				t.Errorf("%d duplicate byte IDs of %d", d, len(bytes))
			}
			if d := DupsRanges(ranges); d != 0 {
				t.Errorf("%d IDs in more than one batch of %d", d, len(ranges))
			}
		})
	}
}

func TestDupHelpers(t *testing.T) {
	if d := DupsInt64([]int64{5, 1, 5, 3, 5, 1}); d != 3 {
		t.Errorf("DupsInt64 = %d, want 3", d)
	}
	if d := DupsBytes([][20]byte{{1}, {2}, {1}, {1, 1}}); d != 1 {
		t.Errorf("DupsBytes = %d, want 1", d)
	}
	// [10,14) [12,13) [13,20) [30,31): 12 and 13 are covered twice.
	if d := DupsRanges([]Range{{13, 7}, {10, 4}, {30, 1}, {12, 1}}); d != 2 {
		t.Errorf("DupsRanges = %d, want 2", d)
	}
	if d := DupsRanges([]Range{{0, 4096}, {4096, 4096}}); d != 0 {
		t.Errorf("DupsRanges of adjacent batches = %d, want 0", d)
	}
}

func TestParityOf(t *testing.T) {
	var ids []int64
	for i := range int64(160) {
		ids = append(ids, i)
	}
	p := ParityOf(ids)
	if p.Even != 0.5 || p.ChiSq != 0 {
		t.Errorf("0..159: even %v chi² %v, want 0.5 and 0", p.Even, p.ChiSq)
	}
	p = ParityOf([]int64{0, 16, 32, 48})
	if p.Even != 1 || p.ChiSq != 60 { // 4 in one bucket: (4−¼)²/¼ + 15·¼ = 56.25 + 3.75
		t.Errorf("multiples of 16: even %v chi² %v, want 1 and 60", p.Even, p.ChiSq)
	}
	if _, err := Select([]string{"nope"}); err == nil {
		t.Error("Select accepted an unknown name")
	}
}
