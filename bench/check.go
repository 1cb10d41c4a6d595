package bench

import (
	"bytes"
	"cmp"
	"slices"
)

// Range is a run of consecutive integer IDs First … First+Count−1, as one
// NextN batch returns.
type Range struct {
	First int64
	Count int
}

// DupsInt64 sorts ids in place and returns how many of them repeat an
// earlier one (n copies of a value count n−1).
func DupsInt64(ids []int64) int {
	slices.Sort(ids)
	d := 0
	for i := 1; i < len(ids); i++ {
		if ids[i] == ids[i-1] {
			d++
		}
	}
	return d
}

// DupsBytes sorts ids in place and returns how many of them repeat an
// earlier one. IDs shorter than 20 bytes are zero-padded, which keeps them
// distinct exactly when the IDs are.
func DupsBytes(ids [][20]byte) int {
	slices.SortFunc(ids, func(a, b [20]byte) int { return bytes.Compare(a[:], b[:]) })
	d := 0
	for i := 1; i < len(ids); i++ {
		if ids[i] == ids[i-1] {
			d++
		}
	}
	return d
}

// DupsRanges sorts rs in place and returns how many IDs fall in more than
// one range (an ID covered k times counts k−1).
func DupsRanges(rs []Range) int64 {
	slices.SortFunc(rs, func(a, b Range) int { return cmp.Compare(a.First, b.First) })
	var d int64
	end := int64(-1 << 63) // one past the highest ID covered so far
	for _, r := range rs {
		last := r.First + int64(r.Count) // one past
		if r.First < end {
			d += min(end, last) - r.First
		}
		end = max(end, last)
	}
	return d
}

// Parity describes the low bits of a sample of IDs.
type Parity struct {
	N        int
	Even     float64 // fraction of even IDs
	ChiSq    float64 // chi-square of id mod 16 against uniform, 15 degrees of freedom
	Residues [16]int // count of each id mod 16
}

// ChiSq15Crit05 is the 5 % critical value of chi-square with 15 degrees of
// freedom: a uniform source exceeds it one time in twenty.
const ChiSq15Crit05 = 24.996

// ParityOf computes the parity statistics of ids (non-negative).
func ParityOf(ids []int64) Parity {
	p := Parity{N: len(ids)}
	if len(ids) == 0 {
		return p
	}
	even := 0
	for _, id := range ids {
		if id%2 == 0 {
			even++
		}
		p.Residues[uint64(id)%16]++
	}
	p.Even = float64(even) / float64(len(ids))
	exp := float64(len(ids)) / 16
	for _, c := range p.Residues {
		d := float64(c) - exp
		p.ChiSq += d * d / exp
	}
	return p
}
