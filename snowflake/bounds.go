package snowflake

import (
	"fmt"
	"github.com/flakeid/flakeid/internal/quote"
	"math"
	"math/big"
	"strconv"
	"strings"
	"time"
)

// Bounds are the IDs of a layout whose time lies in a window: every ID
// from Min to Max (both included), and no other.
type Bounds struct {
	// Min is the smallest ID of the window: its first tick, datacenter,
	// worker and sequence 0.
	Min ID
	// Max is the largest: its last tick with every other bit set.
	Max ID
	// From and To are the window after clamping: From is the start of the
	// first tick in it and To the end of the last one (the first instant
	// past it), so [From, To) holds exactly the times of the IDs from Min
	// to Max.
	From, To time.Time
}

// Bounds returns the smallest and largest ID of the layout whose time (the
// start of its tick, Parts.Time) lies in the window [from, to): an ID id
// satisfies b.Min ≤ id ≤ b.Max exactly when from ≤ Decode(id).Time < to.
// That is the range scan of a window on an ID-keyed table (WHERE id
// BETWEEN min AND max), a pagination cursor (IDs after a time: from that
// time on), or everything before a time (from the zero time).
//
// A window reaching before the layout's epoch or past its end
// (Capacity().RunsUntil) is clamped to them. It fails with ErrEmptyWindow
// when no ID's time can lie in the window: to is not after from, the window
// ends at or before the epoch, starts at or past the end, or lies inside one
// tick without holding its start (a window of 300 ms in a layout of 1 s
// ticks, say); and with ErrInvalidLayout for a layout that does not
// normalize.
func (l Layout) Bounds(from, to time.Time) (Bounds, error) {
	c, err := newCodec(l)
	if err != nil {
		return Bounds{}, err
	}
	n := c.layout
	end := n.Capacity().RunsUntil
	switch {
	case !to.After(n.Epoch):
		return Bounds{}, fmt.Errorf("%w: it ends at %s, before the layout's epoch %s: no ID is that old", ErrEmptyWindow, rfc3339(to), rfc3339(n.Epoch))
	case !from.Before(end):
		return Bounds{}, fmt.Errorf("%w: it starts at %s, past the end of the layout's time field (%s)", ErrEmptyWindow, rfc3339(from), rfc3339(end))
	case !to.After(from):
		return Bounds{}, fmt.Errorf("%w: it ends (%s) before it starts (%s)", ErrEmptyWindow, rfc3339(to), rfc3339(from))
	}
	first, exact := tickOf(n, from)
	if !exact {
		first++ // the first tick that starts at or after from
	}
	last, exact := tickOf(n, to)
	if exact {
		last-- // the last tick that starts before to
	}
	first, last = max(first, 0), min(last, c.maxTick)
	if first > last {
		return Bounds{}, fmt.Errorf("%w: [%s, %s) holds no tick's start (ticks are %v long), so no ID's time lies in it",
			ErrEmptyWindow, rfc3339(from), rfc3339(to), n.TimeUnit)
	}
	below := c.timeShift // bits under the time field, all 0 in Min and 1 in Max
	b := Bounds{Min: ID(first << below), Max: ID(last<<below | (int64(1)<<below - 1)),
		From: c.tickTime(first), To: end}
	if last < c.maxTick {
		b.To = c.tickTime(last + 1)
	}
	return b, nil
}

// tickOf returns the tick t falls in (units since the epoch, rounded down)
// and whether t is that tick's start exactly. Ticks beyond the int64 range
// are clamped to it.
func tickOf(n Layout, t time.Time) (tick int64, exact bool) {
	ns := new(big.Int).Mul(big.NewInt(t.Unix()-n.Epoch.Unix()), big.NewInt(int64(time.Second)))
	ns.Add(ns, big.NewInt(int64(t.Nanosecond()-n.Epoch.Nanosecond())))
	q, r := new(big.Int).DivMod(ns, big.NewInt(int64(n.TimeUnit)), new(big.Int)) // Euclidean: r ≥ 0, q rounded down
	switch {
	case !q.IsInt64() && q.Sign() > 0:
		return math.MaxInt64, false
	case !q.IsInt64():
		return math.MinInt64, false
	}
	return q.Int64(), r.Sign() == 0
}

// rfc3339 writes t for an error: RFC 3339 in UTC, with the fraction it has.
func rfc3339(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// ParseTime reads an instant as people type it for a time window, relative
// to now where it is relative:
//
//   - RFC 3339, with or without a fraction: 2026-03-01T00:00:00Z,
//     2026-03-01T08:00:00.250+08:00;
//   - a date, meaning its midnight UTC: 2026-03-01;
//   - Unix milliseconds, digits only: 1772323200000;
//   - "now", or a signed offset from now: a Go duration (-1h, -90m, +30s,
//     -1h30m) or whole days (-7d).
//
// It fails with ErrInvalidTime naming the text and the forms it takes.
func ParseTime(s string, now time.Time) (time.Time, error) {
	bad := func(why string) (time.Time, error) {
		return time.Time{}, fmt.Errorf("%w: %s%s; want RFC 3339 (2026-03-01T00:00:00Z), a date (2026-03-01), Unix milliseconds, now, or an offset from now (-1h, -7d)",
			ErrInvalidTime, quote.Input(s), why)
	}
	switch {
	case s == "":
		return bad(" is empty")
	case s == "now":
		return now, nil
	case s[0] == '-' || s[0] == '+':
		if days, ok := strings.CutSuffix(s[1:], "d"); ok && days != "" && allDigits(days) {
			d, err := strconv.ParseInt(days, 10, 32)
			if err != nil || d > 3_650_000 {
				return bad(" is too many days")
			}
			if s[0] == '-' {
				d = -d
			}
			return now.AddDate(0, 0, int(d)), nil
		}
		d, err := time.ParseDuration(s)
		if err != nil {
			return bad(" is not a duration")
		}
		return now.Add(d), nil
	case allDigits(s):
		ms, err := strconv.ParseInt(s, 10, 64)
		if err != nil || ms > maxTime().UnixMilli() {
			return bad(" is past year 9999 as Unix milliseconds")
		}
		return time.UnixMilli(ms).UTC(), nil
	case len(s) == len(time.DateOnly):
		t, err := time.Parse(time.DateOnly, s)
		if err != nil {
			return bad(" is not a date")
		}
		return t, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return bad(" is not RFC 3339")
	}
	return t, nil
}

// allDigits reports whether s is all ASCII digits (true for "").
func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
