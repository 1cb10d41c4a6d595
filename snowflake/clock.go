package snowflake

import (
	"math/bits"
	"sync/atomic"
	"time"
)

// clock is a generator's time source: nanoseconds since the layout's epoch.
//
// With the built-in source it reads Go's monotonic clock (time.Since on a
// reading taken at construction), anchored to the wall clock at that moment,
// so a wall-clock step backwards is not seen; checkWall, run at most once per
// millisecond from the slow path, follows wall-clock steps forwards by raising
// adjust, which never falls. With an injected Settings.Now the same
// arithmetic applies to what Now returns: a Now without monotonic readings
// exposes its jumps, which is what the tests want.
type clock struct {
	now      func() time.Time // nil: the built-in source
	anchor   time.Time        // a reading at construction
	anchorNs int64            // anchor's wall time in ns since the epoch
	epochNs  int64
	unitNs   int64
	div      divider // divides by unitNs

	adjust atomic.Int64 // ns added to follow forward wall-clock steps

	// The wall-clock check is serialised by checking, a try-lock that never
	// blocks, so successive wall readings are taken in real-time order.
	checking  atomic.Bool
	lastCheck atomic.Int64 // generator ns at the last check
	lastWall  atomic.Int64 // wall ns since epoch at the last check
	offset    atomic.Int64 // wall − generator clock at the last check
	backwards atomic.Uint64
	forwards  atomic.Uint64
}

func newClock(now func() time.Time, epochNs, unitNs int64) *clock {
	c := &clock{now: now, epochNs: epochNs, unitNs: unitNs, div: newDivider(uint64(unitNs))}
	if now == nil {
		c.anchor = time.Now()
	} else {
		c.anchor = now()
	}
	c.anchorNs = c.anchor.UnixNano() - epochNs
	c.lastWall.Store(c.anchorNs)
	c.lastCheck.Store(c.anchorNs)
	return c
}

// ns returns the generator's time in nanoseconds since the epoch.
func (c *clock) ns() int64 {
	var d time.Duration
	if c.now == nil {
		d = time.Since(c.anchor) // monotonic clock only
	} else {
		d = c.now().Sub(c.anchor)
	}
	return c.anchorNs + int64(d) + c.adjust.Load()
}

// tickOf converts generator nanoseconds to a tick; -1 before the epoch.
func (c *clock) tickOf(ns int64) int64 {
	if ns < 0 {
		return -1
	}
	return int64(c.div.div(uint64(ns)))
}

// checkWall compares the wall clock with the generator's clock: a wall clock
// ahead is followed (adjust rises), one that stepped back since the last
// check is counted. It runs at most once per millisecond of generator time
// and never waits for another goroutine.
func (c *clock) checkWall(genNs int64) {
	if d := genNs - c.lastCheck.Load(); d < int64(time.Millisecond) && d > -int64(time.Millisecond) ||
		!c.checking.CompareAndSwap(false, true) {
		return
	}
	defer c.checking.Store(false)
	var wall time.Time
	if c.now == nil {
		wall = time.Now()
	} else {
		wall = c.now()
	}
	wallNs := wall.UnixNano() - c.epochNs
	gen := c.anchorNs + int64(wall.Sub(c.anchor)) + c.adjust.Load()
	if wallNs < c.lastWall.Load()-c.unitNs {
		c.backwards.Add(1)
	}
	if diff := wallNs - gen; diff > 0 {
		c.adjust.Add(diff)
		if diff >= c.unitNs {
			c.forwards.Add(1)
		}
		gen += diff
	}
	c.offset.Store(wallNs - gen)
	c.lastWall.Store(wallNs)
	c.lastCheck.Store(gen)
}

// divider divides by a constant d ≥ 2 with one multiplication: for n < 2^63,
// floor(n/d) = floor(n·m / 2^(63+l)) with l = ceil(log2 d) and
// m = ceil(2^(63+l) / d), which fits in 64 bits (Granlund and Montgomery,
// "Division by invariant integers using multiplication", 1994, theorem 4.2).
type divider struct {
	m     uint64
	shift uint // l − 1
	d     uint64
}

func newDivider(d uint64) divider {
	if d < 2 {
		return divider{d: d}
	}
	l := uint(bits.Len64(d - 1)) // ceil(log2 d)
	// m = ceil(2^(63+l)/d) as a 128-by-64 division of 2^(l-1)·2^64; the
	// quotient fits in 64 bits because d > 2^(l-1).
	m, r := bits.Div64(uint64(1)<<(l-1), 0, d)
	if r != 0 {
		m++
	}
	return divider{m: m, shift: l - 1, d: d}
}

func (v divider) div(n uint64) uint64 {
	if v.d < 2 {
		return n
	}
	hi, _ := bits.Mul64(n, v.m)
	return hi >> v.shift
}
