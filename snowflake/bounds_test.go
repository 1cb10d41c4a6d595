package snowflake

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// usableTicks is the largest tick of n whose time is before year 9999's
// cap (Decode reports later times as the cap, so windows stay below it).
func usableTicks(n Layout) int64 {
	last, _ := tickOf(n, layoutMaxTime)
	return min(last-1, int64(1)<<n.TimeBits-1)
}

// drawInstant draws an instant near a tick boundary of n: a tick's start
// (possibly before the epoch or past the usable ticks) moved by nothing, a
// nanosecond either way, or a random part of a unit.
func drawInstant(t *rapid.T, n Layout, maxTick int64, label string) time.Time {
	tick := rapid.OneOf(
		rapid.Int64Range(0, maxTick),
		rapid.Int64Range(-3, 3),
		rapid.Int64Range(max(maxTick-3, 0), maxTick+3),
	).Draw(t, label+"Tick")
	if tick > maxTick+1 {
		tick = maxTick + 1
	}
	var at time.Time
	if tick < 0 {
		at = n.Epoch.Add(time.Duration(tick) * n.TimeUnit)
	} else {
		at = layoutTickTime(n, tick)
	}
	switch rapid.IntRange(0, 3).Draw(t, label+"Shift") {
	case 1:
		at = at.Add(-1)
	case 2:
		at = at.Add(1)
	case 3:
		at = at.Add(time.Duration(rapid.Int64Range(0, int64(n.TimeUnit)-1).Draw(t, label+"Within")))
	}
	return at
}

// TestBoundsExact checks, for random layouts (every width, units from 1 µs
// to 1 h, epochs) and windows with edges on, just before and just after
// tick starts (and before the epoch or past the end), that an ID lies in
// the window's bounds exactly when its time lies in the window: for
// random IDs and for the IDs at and next to the bounds. An empty window
// fails with ErrEmptyWindow and then no ID's time lies in it.
func TestBoundsExact(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		_, n := layoutDraw(t)
		maxTick := usableTicks(n)
		if maxTick < 0 {
			t.Skip("no tick before year 9999")
		}
		from := drawInstant(t, n, maxTick, "from")
		to := drawInstant(t, n, maxTick, "to")
		if rapid.Bool().Draw(t, "ordered") && to.Before(from) {
			from, to = to, from
		}
		b, err := n.Bounds(from, to)
		inWindow := func(id ID) bool {
			p, err := n.Decode(id)
			if err != nil {
				t.Fatalf("Decode(%d): %v", id, err)
			}
			return !p.Time.Before(from) && p.Time.Before(to)
		}
		var probes []ID
		for range 8 {
			id, err := n.Compose(layoutDrawParts(t, n, maxTick))
			if err != nil {
				t.Fatal(err)
			}
			probes = append(probes, id)
		}
		if err != nil {
			if !errors.Is(err, ErrEmptyWindow) {
				t.Fatalf("Bounds(%v, %v) with %v: %v, want ErrEmptyWindow", from, to, n, err)
			}
			for _, id := range probes {
				if inWindow(id) {
					t.Fatalf("Bounds(%v, %v) with %v: %v, but ID %d's time lies in the window", from, to, n, err, id)
				}
			}
			// An empty window holds no tick start: the first tick at or after from starts at or after to.
			return
		}
		top := ID(int64(1)<<(n.TimeBits+n.DatacenterBits+n.WorkerBits+n.SequenceBits) - 1)
		probes = append(probes, b.Min, b.Max)
		if b.Min > 0 {
			probes = append(probes, b.Min-1)
		}
		if b.Max < top {
			probes = append(probes, b.Max+1)
		}
		for _, id := range probes {
			p, _ := n.Decode(id)
			if p.Tick > maxTick {
				continue // its time is capped at year 9999
			}
			if in, want := id >= b.Min && id <= b.Max, inWindow(id); in != want {
				t.Fatalf("Bounds(%v, %v) with %v = [%d, %d]: ID %d (time %v) in bounds %v, in window %v",
					from, to, n, b.Min, b.Max, id, p.Time, in, want)
			}
		}
		pmin, _ := n.Decode(b.Min)
		if !b.From.Equal(pmin.Time) || b.From.Before(from) {
			t.Fatalf("Bounds.From = %v, want %v (the first tick's start, not before %v)", b.From, pmin.Time, from)
		}
	})
}

// TestBoundsGeneratedIDs checks the property on IDs a generator issues: in
// a bubble, a generator issues IDs while its clock moves in random steps;
// for random windows over that time, the IDs in the bounds are exactly
// those whose time lies in the window.
func TestBoundsGeneratedIDs(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		unit := rapid.SampledFrom([]time.Duration{time.Microsecond, time.Millisecond, 10 * time.Millisecond, time.Second}).Draw(rt, "unit")
		l := Layout{TimeBits: 41, DatacenterBits: rapid.IntRange(0, 5).Draw(rt, "dc"), WorkerBits: rapid.IntRange(0, 5).Draw(rt, "worker"),
			SequenceBits: rapid.IntRange(0, 8).Draw(rt, "seq"), Epoch: time.Date(2026, 2, 20, 0, 0, 0, 0, time.UTC), TimeUnit: unit}
		steps := rapid.SliceOfN(rapid.Int64Range(0, int64(3*unit)), 1, 60).Draw(rt, "steps")
		var ids []ID
		var start, end time.Time
		func() {
			clk := &stepClock{now: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(rapid.Int64Range(0, 1e9).Draw(rt, "offset")))}
			g, err := New(Settings{Layout: l, Now: clk.Now, Policy: Borrow, MaxBorrow: time.Hour})
			if err != nil {
				rt.Fatal(err)
			}
			start = clk.Now()
			for _, s := range steps {
				clk.now = clk.now.Add(time.Duration(s))
				id, err := g.NextID()
				if err != nil {
					rt.Fatal(err)
				}
				ids = append(ids, id)
			}
			end = clk.now.Add(unit)
		}()
		span := end.Sub(start) + 2*unit
		from := start.Add(-unit + time.Duration(rapid.Int64Range(0, int64(span)).Draw(rt, "from")))
		to := from.Add(time.Duration(rapid.Int64Range(1, int64(span)).Draw(rt, "length")))
		b, err := l.Bounds(from, to)
		for _, id := range ids {
			p, _ := l.Decode(id)
			want := !p.Time.Before(from) && p.Time.Before(to)
			got := err == nil && id >= b.Min && id <= b.Max
			if got != want {
				rt.Fatalf("layout %v, window [%v, %v): bounds %+v, %v; ID %d (time %v) in bounds %v, in window %v",
					l, from, to, b, err, id, p.Time, got, want)
			}
		}
	})
}

// stepClock is a clock the test moves by hand.
type stepClock struct{ now time.Time }

func (c *stepClock) Now() time.Time { return c.now }

func TestBoundsRefusals(t *testing.T) {
	l := DefaultLayout()
	end := l.Capacity().RunsUntil
	epoch := l.Epoch
	sec := Layout{TimeBits: 31, WorkerBits: 10, SequenceBits: 12, Epoch: epoch, TimeUnit: time.Second}
	for _, tc := range []struct {
		name     string
		l        Layout
		from, to time.Time
		want     string
	}{
		{"reversed", l, epoch.Add(2 * time.Hour), epoch.Add(time.Hour), "before it starts"},
		{"empty", l, epoch.Add(time.Hour), epoch.Add(time.Hour), "before it starts"},
		{"before the epoch", l, epoch.Add(-time.Hour), epoch, "before the layout's epoch"},
		{"past the end", l, end, end.Add(time.Hour), "past the end"},
		{"inside a tick", sec, epoch.Add(100 * time.Millisecond), epoch.Add(400 * time.Millisecond), "holds no tick's start"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.l.Bounds(tc.from, tc.to)
			if !errors.Is(err, ErrEmptyWindow) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Bounds = %v, want ErrEmptyWindow saying %q", err, tc.want)
			}
		})
	}
	if _, err := (Layout{TimeBits: 70}).Bounds(epoch, end); !errors.Is(err, ErrInvalidLayout) {
		t.Fatalf("bad layout: %v, want ErrInvalidLayout", err)
	}
	// Clamped: a window over the whole layout is every ID.
	b, err := l.Bounds(time.Time{}, end.Add(time.Hour))
	if err != nil || b.Min != 0 || b.Max != 1<<63-1 || !b.From.Equal(epoch) || !b.To.Equal(end) {
		t.Fatalf("whole layout: %+v, %v", b, err)
	}
}

func TestParseTime(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		in   string
		want time.Time
	}{
		{"2026-03-01T00:00:00Z", time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)},
		{"2026-03-01T08:00:00.250+08:00", time.Date(2026, 3, 1, 0, 0, 0, 250e6, time.UTC)},
		{"2026-03-01", time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)},
		{"1772323200000", time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)},
		{"now", now},
		{"-1h", now.Add(-time.Hour)},
		{"+90m", now.Add(90 * time.Minute)},
		{"-1h30m", now.Add(-90 * time.Minute)},
		{"-7d", now.AddDate(0, 0, -7)},
	} {
		got, err := ParseTime(tc.in, now)
		if err != nil || !got.Equal(tc.want) {
			t.Errorf("ParseTime(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
	for _, in := range []string{"", "yesterday", "1h", "-1x", "2026-13-01", "2026-03-01 00:00:00", "-d", "99999999999999999999", "-99999999999d", "12:00"} {
		if _, err := ParseTime(in, now); !errors.Is(err, ErrInvalidTime) || !strings.Contains(err.Error(), fmt.Sprintf("%q", in)) {
			t.Errorf("ParseTime(%q) = %v, want ErrInvalidTime quoting the input", in, err)
		}
	}
}
