package idmask

import (
	"errors"
	"testing"

	"pgregory.net/rapid"
)

// TestMaskCounterPermutes checks exhaustively, for every range size up to
// 300 and a few tweaks, that MaskCounter is a permutation of [0, n) and
// UnmaskCounter its inverse.
func TestMaskCounterPermutes(t *testing.T) {
	m, err := New(make([]byte, KeySize), 3, Bits63)
	if err != nil {
		t.Fatal(err)
	}
	for n := uint64(1); n <= 300; n++ {
		for _, tweak := range []uint64{0, 20261128, MaxCounterTweak} {
			seen := make([]bool, n)
			for x := range n {
				y, err := m.MaskCounter(x, n, tweak)
				if err != nil {
					t.Fatal(err)
				}
				if y >= n || seen[y] {
					t.Fatalf("n=%d tweak=%d: x=%d maps to %d (out of range or taken)", n, tweak, x, y)
				}
				seen[y] = true
				back, err := m.UnmaskCounter(y, n, tweak)
				if err != nil || back != x {
					t.Fatalf("n=%d tweak=%d: unmask(%d) = %d, %v; want %d", n, tweak, y, back, err, x)
				}
			}
		}
	}
}

// TestMaskCounterRoundTrip checks random ranges up to the largest, tweaks
// and keys: the image is in range and unmasks back; another tweak or key
// gives another permutation.
func TestMaskCounterRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		key := rapid.SliceOfN(rapid.Byte(), KeySize, KeySize).Draw(t, "key")
		m, err := New(key, 0, Bits63)
		if err != nil {
			t.Fatal(err)
		}
		n := rapid.Uint64Range(1, MaxCounterRange).Draw(t, "n")
		x := rapid.Uint64Range(0, n-1).Draw(t, "x")
		tweak := rapid.Uint64Range(0, MaxCounterTweak).Draw(t, "tweak")
		y, err := m.MaskCounter(x, n, tweak)
		if err != nil || y >= n {
			t.Fatalf("MaskCounter(%d, %d, %d) = %d, %v", x, n, tweak, y, err)
		}
		back, err := m.UnmaskCounter(y, n, tweak)
		if err != nil || back != x {
			t.Fatalf("UnmaskCounter(%d) = %d, %v; want %d", y, back, err, x)
		}
	})
}

// TestMaskCounterShuffles checks that consecutive counters of a range of a
// million do not map to consecutive values, and that two periods (tweaks)
// differ.
func TestMaskCounterShuffles(t *testing.T) {
	m, _ := New([]byte("0123456789abcdef"), 1, Bits63)
	const n = 1_000_000
	near, same := 0, 0
	for x := range uint64(1000) {
		a, _ := m.MaskCounter(x, n, 20261128)
		b, _ := m.MaskCounter(x+1, n, 20261128)
		c, _ := m.MaskCounter(x, n, 20261129)
		if a-b < 10 || b-a < 10 {
			near++
		}
		if a == c {
			same++
		}
	}
	if near > 5 || same > 5 {
		t.Fatalf("of 1000 counters, %d were within 10 of the next one's image and %d equal across two periods", near, same)
	}
}

// TestMaskCounterRefuses checks the range errors.
func TestMaskCounterRefuses(t *testing.T) {
	m, _ := New(make([]byte, KeySize), 0, Bits63)
	for _, c := range []struct{ x, n, tweak uint64 }{
		{0, 0, 0}, {5, 5, 0}, {0, MaxCounterRange + 1, 0}, {0, 10, MaxCounterTweak + 1},
	} {
		if _, err := m.MaskCounter(c.x, c.n, c.tweak); !errors.Is(err, ErrOutOfRange) {
			t.Errorf("MaskCounter(%d, %d, %d): %v, want ErrOutOfRange", c.x, c.n, c.tweak, err)
		}
		if _, err := m.UnmaskCounter(c.x, c.n, c.tweak); !errors.Is(err, ErrOutOfRange) {
			t.Errorf("UnmaskCounter(%d, %d, %d): %v, want ErrOutOfRange", c.x, c.n, c.tweak, err)
		}
	}
}

func BenchmarkMaskCounter(b *testing.B) {
	m, _ := New(make([]byte, KeySize), 0, Bits63)
	var x uint64
	for b.Loop() {
		y, _ := m.MaskCounter(x%999_999, 999_999, 20261128)
		x += y&1 + 1
	}
}
