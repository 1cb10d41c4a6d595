package idview

import (
	"time"

	"pgregory.net/rapid"

	"github.com/flakeid/flakeid/snowflake"
)

// preset is the named preset layout.
func preset(name string) snowflake.Layout {
	l, err := snowflake.Preset(name)
	if err != nil {
		panic(err)
	}
	return l
}

func twitterLayout() snowflake.Layout   { return preset("twitter") }
func sonyflakeLayout() snowflake.Layout { return preset("sonyflake") }
func jsSafeLayout() snowflake.Layout    { return preset("jssafe") }
func leafLayout() snowflake.Layout      { return preset("leaf") }

// layoutDraw draws a normalized layout: any widths, units from 1 µs to 1 h
// (sub-millisecond ones included), epochs from 1970 to 2200.
func layoutDraw(t *rapid.T) (drawn, n snowflake.Layout) {
	tb := rapid.IntRange(1, snowflake.MaxBits).Draw(t, "timeBits")
	dc := rapid.IntRange(0, snowflake.MaxBits-tb).Draw(t, "datacenterBits")
	wk := rapid.IntRange(0, snowflake.MaxBits-tb-dc).Draw(t, "workerBits")
	sq := rapid.IntRange(0, snowflake.MaxBits-tb-dc-wk).Draw(t, "sequenceBits")
	unit := rapid.SampledFrom([]time.Duration{time.Microsecond, 3 * time.Microsecond, time.Millisecond,
		10 * time.Millisecond, time.Second, time.Minute, time.Hour}).Draw(t, "unit")
	epoch := time.Unix(rapid.Int64Range(0, time.Date(2200, 12, 31, 0, 0, 0, 0, time.UTC).Unix()).Draw(t, "epoch"), 0).UTC()
	drawn = snowflake.Layout{TimeBits: tb, DatacenterBits: dc, WorkerBits: wk, SequenceBits: sq, Epoch: epoch, TimeUnit: unit}
	n, err := drawn.Normalize()
	if err != nil {
		t.Fatalf("drawn layout %+v: %v", drawn, err)
	}
	return drawn, n
}

// usableTicks is the last tick of n that ends before year 9999 (the cap of
// the times Decode reports), or -1 when none does.
func usableTicks(n snowflake.Layout) int64 {
	b, err := n.Bounds(n.Epoch, time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC))
	if err != nil {
		return -1
	}
	p, err := n.Decode(b.Max)
	if err != nil {
		return -1
	}
	return p.Tick - 1
}

// layoutDrawParts draws the fields of an ID of n with a tick up to maxTick.
func layoutDrawParts(t *rapid.T, n snowflake.Layout, maxTick int64) snowflake.Parts {
	return snowflake.Parts{
		Tick:       rapid.Int64Range(0, maxTick).Draw(t, "tick"),
		Datacenter: rapid.Int64Range(0, 1<<n.DatacenterBits-1).Draw(t, "datacenter"),
		Worker:     rapid.Int64Range(0, 1<<n.WorkerBits-1).Draw(t, "worker"),
		Sequence:   rapid.Int64Range(0, 1<<n.SequenceBits-1).Draw(t, "sequence"),
	}
}

// stepClock is a clock the test moves.
type stepClock struct{ now time.Time }

func (c *stepClock) Now() time.Time { return c.now }
