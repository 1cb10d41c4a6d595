package idmask

import (
	"encoding/binary"
	"fmt"
	"math/bits"
)

// MaxCounterRange is the largest range MaskCounter permutes: 2^48 values
// (a 14-digit counter, the widest a business number's numeric form leaves
// room for, is below it).
const MaxCounterRange = 1 << 48

// MaxCounterTweak is the largest tweak MaskCounter takes: 2^40 − 1 (a
// 12-digit period such as 202611281530 is below it).
const MaxCounterTweak = 1<<40 - 1

// counterHeader is the first half of a counter block's tag: "IDMC" and the
// format version 1 (see MaskCounter).
const counterHeader = uint64('I')<<56 | uint64('D')<<48 | uint64('M')<<40 | uint64('C')<<32 | 1<<24

// MaskCounter returns the image of x under a keyed permutation of [0, n)
// chosen by the tweak: for one key, n and tweak, distinct x in [0, n) give
// distinct results in [0, n), and UnmaskCounter reverses it. Business-number
// series use it with n the period's capacity and the period as the tweak,
// so that each period's counters are shuffled differently and consecutive
// numbers do not show how many were issued.
//
// The construction is the package's Feistel network (AES-128 round
// function, ten rounds, alternating half widths) on the smallest width w
// ≥ 2 bits with 2^w ≥ n, walked in a cycle until the value falls in
// [0, n) (on average fewer than two passes, as 2^w < 2n). The round block
// is "IDMC" ‖ version 1 ‖ w ‖ i ‖ 0 ‖ tweak (40 bits) ‖ input (24 bits), so
// that no block of MaskCounter is a block of Mask. Small ranges are weak:
// NIST SP 800-38G Rev. 1 asks for at least 10^6 values; a range of 10^4
// can be mapped out by someone who sees a fair share of it.
//
// It fails with ErrOutOfRange for n outside [1, MaxCounterRange], x outside
// [0, n) or a tweak above MaxCounterTweak. It does not allocate.
func (m *Masker) MaskCounter(x, n, tweak uint64) (uint64, error) {
	if err := checkCounter(x, n, tweak); err != nil {
		return 0, err
	}
	return m.walkCounter(x, n, tweak, false), nil
}

// UnmaskCounter is the inverse of MaskCounter for the same n and tweak.
func (m *Masker) UnmaskCounter(y, n, tweak uint64) (uint64, error) {
	if err := checkCounter(y, n, tweak); err != nil {
		return 0, err
	}
	return m.walkCounter(y, n, tweak, true), nil
}

func checkCounter(x, n, tweak uint64) error {
	switch {
	case n < 1 || n > MaxCounterRange:
		return fmt.Errorf("%w: counter range of %d values, want 1 to 2^48", ErrOutOfRange, n)
	case x >= n:
		return fmt.Errorf("%w: counter %d, want 0 to %d", ErrOutOfRange, x, n-1)
	case tweak > MaxCounterTweak:
		return fmt.Errorf("%w: counter tweak %d, want 0 to 2^40−1", ErrOutOfRange, tweak)
	}
	return nil
}

// walkCounter applies the width-w network (or its inverse) until the value
// is below n. Cycle walking of a permutation of [0, 2^w) restricted to
// [0, n) is a permutation of [0, n), and walking backwards undoes it.
func (m *Masker) walkCounter(x, n, tweak uint64, backwards bool) uint64 {
	if n == 1 {
		return 0
	}
	w := uint(max(bits.Len64(n-1), 2))
	buf := m.blocks.Get().(*aesBuf)
	defer func() {
		binary.BigEndian.PutUint64(buf.in[:8], header)
		m.blocks.Put(buf)
	}()
	for {
		x = m.counterNetwork(buf, x, w, tweak, backwards)
		if x < n {
			return x
		}
	}
}

// counterNetwork runs the ten rounds on the w-bit value x, with halves of
// ⌊w/2⌋ (A, high) and w − ⌊w/2⌋ (B, low) bits, as feistel does.
func (m *Masker) counterNetwork(buf *aesBuf, x uint64, w uint, tweak uint64, backwards bool) uint64 {
	hi, lo := w/2, w-w/2
	var r, s uint64
	if backwards {
		r, s = x>>lo, x&(1<<lo-1)
	} else {
		r, s = x&(1<<lo-1), x>>lo
	}
	for k := range uint64(rounds) {
		i := k
		if backwards {
			i = rounds - 1 - k
		}
		width := hi
		if i&1 == 1 {
			width = lo
		}
		binary.BigEndian.PutUint64(buf.in[:8], counterHeader|uint64(w)<<16|i<<8)
		binary.BigEndian.PutUint64(buf.in[8:], tweak<<24|r)
		m.block.Encrypt(buf.out[:], buf.in[:])
		r, s = (s^binary.BigEndian.Uint64(buf.out[:8]))&(1<<width-1), r
	}
	if backwards {
		return r<<lo | s
	}
	return s<<lo | r
}
