// Package load holds what the service load tools (cmd/idload, cmd/idclient)
// share: a latency histogram, the result record they print and append as
// JSON lines, a parser for wrk's output into the same record, a summary of
// many records (medians over rounds, same-round ratios) and a guard that
// keeps every target on loopback.
package load

import (
	"math"
	"math/bits"
	"time"
)

// subBits is the number of mantissa bits per power of two: 64 buckets per
// doubling, so a bucket is at most 1/64 (1.6 %) of its value wide.
const subBits = 6

// nBuckets covers every non-negative int64.
const nBuckets = (64 - subBits) << subBits

// Histogram records durations in nanoseconds in log-linear buckets. The
// zero value is empty and ready; it is not safe for concurrent use (give
// each worker its own and Merge them).
type Histogram struct {
	counts   [nBuckets]uint64
	n        uint64
	min, max int64
	sum      float64
}

func bucketOf(v int64) int {
	if v < 1<<subBits {
		return int(max(v, 0))
	}
	e := bits.Len64(uint64(v)) - 1 // top bit, ≥ subBits
	m := (v >> (e - subBits)) & (1<<subBits - 1)
	return (e-subBits+1)<<subBits | int(m)
}

// bucketRange returns the smallest and largest value of bucket i.
func bucketRange(i int) (lo, hi int64) {
	if i < 1<<subBits {
		return int64(i), int64(i)
	}
	g, m := i>>subBits, int64(i&(1<<subBits-1))
	e := g + subBits - 1
	lo = 1<<e | m<<(e-subBits)
	return lo, lo + 1<<(e-subBits) - 1
}

// Record adds one duration.
func (h *Histogram) Record(d time.Duration) {
	v := int64(d)
	if h.n == 0 || v < h.min {
		h.min = v
	}
	if v > h.max {
		h.max = v
	}
	h.n++
	h.sum += float64(v)
	h.counts[bucketOf(v)]++
}

// Merge adds o's values to h.
func (h *Histogram) Merge(o *Histogram) {
	if o.n == 0 {
		return
	}
	if h.n == 0 || o.min < h.min {
		h.min = o.min
	}
	h.max = max(h.max, o.max)
	h.n += o.n
	h.sum += o.sum
	for i, c := range o.counts {
		h.counts[i] += c
	}
}

// Count is the number of recorded values.
func (h *Histogram) Count() uint64 { return h.n }

// Max is the largest recorded value.
func (h *Histogram) Max() time.Duration { return time.Duration(h.max) }

// Mean is the mean of the recorded values (0 when empty).
func (h *Histogram) Mean() time.Duration {
	if h.n == 0 {
		return 0
	}
	return time.Duration(h.sum / float64(h.n))
}

// Quantile returns the value at quantile q (0–1): the middle of the bucket
// holding the ceil(q·n)-th smallest value, clamped to the recorded min and
// max. Its error is below 1 % of the value.
func (h *Histogram) Quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(h.n)))
	rank = min(max(rank, 1), h.n)
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			lo, hi := bucketRange(i)
			v := lo + (hi-lo)/2
			return time.Duration(min(max(v, h.min), h.max))
		}
	}
	return time.Duration(h.max)
}
