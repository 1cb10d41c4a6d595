package snowflake

import (
	"errors"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// Above: for any layout, floor and instant, either every ID of the returned
// layout from that instant on is above the floor, with the latest epoch
// that does it (never later than the layout's own), or it refuses with
// ErrTimeExhausted because no epoch can.
func TestAboveProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		dc := rapid.IntRange(0, 8).Draw(rt, "dc")
		worker := rapid.IntRange(0, 16).Draw(rt, "worker")
		seq := rapid.IntRange(0, 16).Draw(rt, "seq")
		timeBits := rapid.IntRange(1, MaxBits-dc-worker-seq).Draw(rt, "time")
		unit := []time.Duration{time.Microsecond, time.Millisecond, 10 * time.Millisecond, time.Second}[rapid.IntRange(0, 3).Draw(rt, "unit")]
		epoch := time.UnixMilli(rapid.Int64Range(0, 1_800_000_000_000).Draw(rt, "epoch")).UTC()
		now := epoch.Add(time.Duration(rapid.Int64Range(0, int64(100*365*24*time.Hour)).Draw(rt, "since epoch")))
		l := Layout{TimeBits: timeBits, DatacenterBits: dc, WorkerBits: worker, SequenceBits: seq, Epoch: epoch, TimeUnit: unit}
		below := uint(dc + worker + seq)
		var floor ID
		if rapid.Bool().Draw(rt, "near today") {
			tick, _ := l.tickAt(now)
			floor = ID(max(0, min(tick+rapid.Int64Range(-5, 5).Draw(rt, "ticks off"), int64(1)<<timeBits-1)<<below))
		} else {
			floor = ID(rapid.Int64Range(-1, 1<<62).Draw(rt, "floor"))
		}
		got, err := l.Above(floor, now)
		smallest := func(l Layout, at time.Time) int64 {
			tick, _ := l.tickAt(at)
			return tick << below
		}
		if err != nil {
			if !errors.Is(err, ErrTimeExhausted) {
				rt.Fatalf("Above(%d, %v) of %v: %v", floor, now, l, err)
			}
			need := int64(floor)>>below + 1
			if need <= int64(1)<<timeBits-1 && now.UnixMilli()-need*int64(unit/time.Millisecond) >= 0 && unit >= time.Millisecond {
				rt.Fatalf("Above(%d, %v) of %v refused (%v), yet the tick it needs fits", floor, now, l, err)
			}
			return
		}
		if got.Epoch.After(epoch) || got.TimeBits != timeBits || got.TimeUnit != unit {
			rt.Fatalf("Above of %v = %v: the epoch may only move back, the fields stay", l, got)
		}
		for _, at := range []time.Time{now, now.Add(unit), now.Add(1000 * unit)} {
			if tick, _ := got.tickAt(at); tick > int64(1)<<timeBits-1 {
				continue // past the layout's life
			}
			if s := smallest(got, at); s <= int64(floor) {
				rt.Fatalf("Above(%d, %v) of %v = %v: at %v its smallest ID is %d, not above the floor", floor, now, l, got, at, s)
			}
		}
		if got.Epoch.Before(epoch) {
			later := got
			later.Epoch = got.Epoch.Add(time.Millisecond)
			if smallest(later, now) > int64(floor) {
				rt.Fatalf("Above(%d, %v) of %v = %v: an epoch 1ms later would do too", floor, now, l, got)
			}
		}
	})
}
