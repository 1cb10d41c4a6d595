package snowflake

import (
	"math"
	"math/bits"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// TestDividerMatchesDivision checks the multiply-and-shift divider against
// Go's division for divisors in the range a clock can use (1µs–1h units are
// 10^3–3.6·10^12 ns, below 2^42) and beyond, for every non-negative int64
// dividend.
func TestDividerMatchesDivision(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		d := rapid.Uint64Range(2, 1<<40).Draw(t, "d")
		n := rapid.Uint64Range(0, math.MaxInt64).Draw(t, "n")
		if got, want := newDivider(d).div(n), n/d; got != want {
			t.Fatalf("newDivider(%d).div(%d) = %d, want %d", d, n, got, want)
		}
	})
}

// TestDividerMatchesDivisionNearMultiples draws the dividend next to a
// multiple of the divisor, where a rounding error in the magic number shows.
func TestDividerMatchesDivisionNearMultiples(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		d := rapid.Uint64Range(2, 1<<40).Draw(t, "d")
		q := rapid.Uint64Range(0, math.MaxInt64/d).Draw(t, "q")
		off := rapid.IntRange(-1, 1).Draw(t, "off")
		n := q*d + uint64(off) // off = -1 with q = 0 wraps; skip it
		if n > math.MaxInt64 {
			t.Skip("dividend outside [0, 2^63)")
		}
		if got, want := newDivider(d).div(n), n/d; got != want {
			t.Fatalf("newDivider(%d).div(%d) = %d, want %d", d, n, got, want)
		}
	})
}

// TestDividerWideDivisors covers divisors past any time unit, up to the
// largest uint64, to check the magic number's construction at l = 63 and 64.
func TestDividerWideDivisors(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		d := rapid.Uint64Range(2, math.MaxUint64).Draw(t, "d")
		n := rapid.Uint64Range(0, math.MaxInt64).Draw(t, "n")
		if got, want := newDivider(d).div(n), n/d; got != want {
			t.Fatalf("newDivider(%d).div(%d) = %d, want %d", d, n, got, want)
		}
	})
}

func TestDividerEdgeCases(t *testing.T) {
	divisors := []uint64{
		2, 3, 5, 7, 10, 1000, 1_000_000, 10_000_000, 1_000_000_000,
		uint64(time.Microsecond), uint64(time.Millisecond), uint64(10 * time.Millisecond),
		uint64(time.Second), uint64(time.Minute), uint64(time.Hour), 3_600_000_000_000,
		1<<40 - 1, 1<<40 + 1, 1<<62 + 1, math.MaxInt64, 1 << 63, math.MaxUint64,
	}
	for k := 1; k <= 63; k++ {
		divisors = append(divisors, uint64(1)<<k)
	}
	for _, d := range divisors {
		v := newDivider(d)
		qmax := uint64(math.MaxInt64) / d
		dividends := []uint64{
			0, 1, d - 1, d, d + 1, 2*d - 1, 2 * d,
			math.MaxInt64, math.MaxInt64 - 1, math.MaxInt64 - d,
			qmax * d, qmax*d - 1, qmax*d + d - 1,
			uint64(time.Date(2094, 9, 7, 0, 0, 0, 0, time.UTC).UnixNano()),
			uint64(time.Date(2262, 4, 11, 0, 0, 0, 0, time.UTC).UnixNano()),
		}
		for _, n := range dividends {
			if n > math.MaxInt64 {
				continue // the divider is defined for n < 2^63 (d−1 etc. may overflow for huge d)
			}
			if got, want := v.div(n), n/d; got != want {
				t.Errorf("newDivider(%d).div(%d) = %d, want %d", d, n, got, want)
			}
		}
		if d&(d-1) == 0 {
			// A power of two 2^k gives m = 2^63 and shift k−1: a plain shift.
			k := uint(bits.TrailingZeros64(d))
			if got, want := v.div(math.MaxInt64), uint64(math.MaxInt64)>>k; got != want {
				t.Errorf("newDivider(2^%d).div(2^63−1) = %d, want %d", k, got, want)
			}
		}
	}
}

// TestDividerByOne: divisors below 2 leave n unchanged (the clock never
// uses them, as units are at least 1µs, but they must not panic).
func TestDividerByOne(t *testing.T) {
	for _, n := range []uint64{0, 1, 12345, math.MaxInt64} {
		if got := newDivider(1).div(n); got != n {
			t.Errorf("newDivider(1).div(%d) = %d, want %d", n, got, n)
		}
	}
}
