package snowflake

import (
	"errors"
	"math"
	"math/big"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// layoutNow is the fixed "now" of the validateAt tests.
var layoutNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// layoutCheckErr fails t unless err wraps want and its message contains every
// one of has (want nil: err must be nil).
func layoutCheckErr(t *testing.T, what string, err, want error, has ...string) {
	t.Helper()
	if want == nil {
		if err != nil {
			t.Fatalf("%s: unexpected error %v", what, err)
		}
		return
	}
	if !errors.Is(err, want) {
		t.Fatalf("%s: error %v, want one wrapping %q", what, err, want)
	}
	for _, s := range has {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("%s: error %q does not mention %q", what, err, s)
		}
	}
}

// layoutEqual compares layouts field by field, epochs by instant.
func layoutEqual(a, b Layout) bool {
	return a.TimeBits == b.TimeBits && a.DatacenterBits == b.DatacenterBits && a.WorkerBits == b.WorkerBits &&
		a.SequenceBits == b.SequenceBits && a.Epoch.Equal(b.Epoch) && a.TimeUnit == b.TimeUnit
}

func TestLayoutNormalizeTable(t *testing.T) {
	epoch2020 := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name   string
		layout Layout
		want   error
		has    []string
		// Normalized widths (time/datacenter/worker/sequence), checked when want is nil.
		bits [4]int
	}{
		{name: "zero layout is the default", layout: Layout{}, bits: [4]int{41, 5, 5, 12}},
		{name: "default", layout: DefaultLayout(), bits: [4]int{41, 5, 5, 12}},
		{
			name:   "game server 37+20+16 = 73 bits",
			layout: Layout{TimeBits: 37, WorkerBits: 20, SequenceBits: 16},
			want:   ErrInvalidLayout,
			has:    []string{"73 bits", "by 10", "time 37", "worker 20", "sequence 16", "63 bits"},
		},
		{
			name:   "one bit too many",
			layout: Layout{TimeBits: 42, DatacenterBits: 5, WorkerBits: 5, SequenceBits: 12},
			want:   ErrInvalidLayout,
			has:    []string{"64 bits", "by 1"},
		},
		{name: "exactly 63 bits", layout: Layout{TimeBits: 40, DatacenterBits: 3, WorkerBits: 8, SequenceBits: 12}, bits: [4]int{40, 3, 8, 12}},
		{name: "time 0 means the rest", layout: Layout{WorkerBits: 10, SequenceBits: 12}, bits: [4]int{41, 0, 10, 12}},
		{name: "time 0, all four", layout: Layout{DatacenterBits: 4, WorkerBits: 6, SequenceBits: 10}, bits: [4]int{43, 4, 6, 10}},
		{name: "time 0, others 62 leave one bit", layout: Layout{WorkerBits: 30, SequenceBits: 32}, bits: [4]int{1, 0, 30, 32}},
		{name: "only a time unit set", layout: Layout{TimeUnit: time.Second}, bits: [4]int{63, 0, 0, 0}},
		{
			name:   "time 0, others sum to 63",
			layout: Layout{DatacenterBits: 21, WorkerBits: 21, SequenceBits: 21},
			want:   ErrInvalidLayout,
			has:    []string{"= 63", "no time bits"},
		},
		{
			name:   "time 0, others sum past 63",
			layout: Layout{WorkerBits: 40, SequenceBits: 30},
			want:   ErrInvalidLayout,
			has:    []string{"= 70", "no time bits"},
		},
		{name: "negative time bits", layout: Layout{TimeBits: -1, SequenceBits: 12}, want: ErrInvalidLayout, has: []string{"time bits = -1"}},
		{name: "negative datacenter bits", layout: Layout{TimeBits: 41, DatacenterBits: -5}, want: ErrInvalidLayout, has: []string{"datacenter bits = -5"}},
		{name: "negative worker bits", layout: Layout{WorkerBits: -1}, want: ErrInvalidLayout, has: []string{"worker bits = -1"}},
		{name: "negative sequence bits", layout: Layout{SequenceBits: -12}, want: ErrInvalidLayout, has: []string{"sequence bits = -12"}},
		{name: "time bits 64", layout: Layout{TimeBits: 64}, want: ErrInvalidLayout, has: []string{"time bits = 64", "0–63"}},
		{name: "datacenter bits 100", layout: Layout{DatacenterBits: 100}, want: ErrInvalidLayout, has: []string{"datacenter bits = 100"}},
		{name: "worker bits 64", layout: Layout{TimeBits: 1, WorkerBits: 64}, want: ErrInvalidLayout, has: []string{"worker bits = 64"}},
		{name: "sequence bits 64", layout: Layout{SequenceBits: 64}, want: ErrInvalidLayout, has: []string{"sequence bits = 64"}},
		{name: "huge width does not overflow the sum", layout: Layout{TimeBits: math.MaxInt, WorkerBits: math.MaxInt}, want: ErrInvalidLayout, has: []string{"time bits"}},
		{name: "time bits 63 alone", layout: Layout{TimeBits: 63}, bits: [4]int{63, 0, 0, 0}},
		{name: "sequence 62 with 1 time bit", layout: Layout{TimeBits: 1, SequenceBits: 62}, bits: [4]int{1, 0, 0, 62}},
		{name: "unit 1µs", layout: Layout{TimeUnit: time.Microsecond, SequenceBits: 4}, bits: [4]int{59, 0, 0, 4}},
		{name: "unit 1h", layout: Layout{TimeUnit: time.Hour, SequenceBits: 4}, bits: [4]int{59, 0, 0, 4}},
		{name: "unit below 1µs", layout: Layout{TimeUnit: 999 * time.Nanosecond, SequenceBits: 4}, want: ErrInvalidLayout, has: []string{"time unit 999ns", "1µs"}},
		{name: "unit 1ns", layout: Layout{TimeUnit: time.Nanosecond, SequenceBits: 4}, want: ErrInvalidLayout, has: []string{"time unit 1ns"}},
		{name: "negative unit", layout: Layout{TimeUnit: -time.Millisecond, SequenceBits: 4}, want: ErrInvalidLayout, has: []string{"time unit -1ms"}},
		{name: "unit above 1h", layout: Layout{TimeUnit: time.Hour + time.Second, SequenceBits: 4}, want: ErrInvalidLayout, has: []string{"time unit 1h0m1s", "1h0m0s"}},
		{name: "unit 1 day", layout: Layout{TimeUnit: 24 * time.Hour, SequenceBits: 4}, want: ErrInvalidLayout, has: []string{"time unit 24h0m0s"}},
		{name: "epoch 1970", layout: Layout{Epoch: time.Unix(0, 0).UTC(), SequenceBits: 4}, bits: [4]int{59, 0, 0, 4}},
		{name: "epoch 2200", layout: Layout{Epoch: time.Date(2200, 12, 31, 0, 0, 0, 0, time.UTC), SequenceBits: 4}, bits: [4]int{59, 0, 0, 4}},
		{name: "epoch 1969", layout: Layout{Epoch: time.Date(1969, 12, 31, 0, 0, 0, 0, time.UTC), SequenceBits: 4}, want: ErrInvalidLayout, has: []string{"epoch 1969-12-31", "1970–2200"}},
		{name: "epoch 2201", layout: Layout{Epoch: time.Date(2201, 1, 1, 0, 0, 0, 0, time.UTC), SequenceBits: 4}, want: ErrInvalidLayout, has: []string{"epoch 2201-01-01", "1970–2200"}},
		{name: "epoch year 1 (not the zero time)", layout: Layout{Epoch: time.Date(1, 1, 1, 0, 0, 0, 1, time.UTC), SequenceBits: 4}, want: ErrInvalidLayout, has: []string{"epoch 0001-01-01"}},
		{name: "epoch 2020", layout: Layout{Epoch: epoch2020, TimeBits: 10}, bits: [4]int{10, 0, 0, 0}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n, err := tc.layout.Normalize()
			layoutCheckErr(t, "Normalize", err, tc.want, tc.has...)
			if tc.want != nil {
				if c := tc.layout.Capacity(); c != (Capacity{}) {
					t.Errorf("Capacity of an invalid layout = %+v, want the zero Capacity", c)
				}
				_, err := tc.layout.Compose(Parts{})
				layoutCheckErr(t, "Compose", err, ErrInvalidLayout)
				_, err = tc.layout.Decode(0)
				layoutCheckErr(t, "Decode", err, ErrInvalidLayout)
				_, err = tc.layout.tickAt(layoutNow)
				layoutCheckErr(t, "tickAt", err, ErrInvalidLayout)
				return
			}
			if got := [4]int{n.TimeBits, n.DatacenterBits, n.WorkerBits, n.SequenceBits}; got != tc.bits {
				t.Errorf("Normalize widths = %v, want %v", got, tc.bits)
			}
			if n.TimeUnit == 0 || n.Epoch.IsZero() {
				t.Errorf("Normalize left a default unfilled: %+v", n)
			}
			if tc.layout.TimeUnit == 0 && n.TimeUnit != time.Millisecond {
				t.Errorf("default unit = %v, want 1ms", n.TimeUnit)
			}
			if tc.layout.Epoch.IsZero() && !n.Epoch.Equal(defaultEpoch()) {
				t.Errorf("default epoch = %v, want %v", n.Epoch, defaultEpoch())
			}
			// Normalizing twice changes nothing.
			if n2, err := n.Normalize(); err != nil || !layoutEqual(n, n2) {
				t.Errorf("Normalize(Normalize(l)) = %+v, %v; want %+v", n2, err, n)
			}
		})
	}
}

func TestLayoutValidateAt(t *testing.T) {
	epoch2020 := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name   string
		layout Layout
		now    time.Time
		want   error
		has    []string
	}{
		{name: "default in 2026", layout: DefaultLayout(), now: layoutNow},
		{name: "zero layout in 2026", layout: Layout{}, now: layoutNow},
		{name: "epoch exactly now", layout: Layout{Epoch: layoutNow, SequenceBits: 12}, now: layoutNow},
		{
			name:   "epoch in the future",
			layout: Layout{Epoch: layoutNow.Add(time.Hour), SequenceBits: 12},
			now:    layoutNow,
			want:   ErrInvalidLayout,
			has:    []string{"future", "2026-03-01T13:00:00Z", "now 2026-03-01T12:00:00Z"},
		},
		{
			name:   "default epoch before 2025",
			layout: DefaultLayout(),
			now:    time.Date(2024, 6, 1, 0, 0, 0, 0, time.UTC),
			want:   ErrInvalidLayout,
			has:    []string{"future", "2025-01-01T00:00:00Z"},
		},
		{
			name:   "10 bits of ms since 2020 ran out long ago",
			layout: Layout{TimeBits: 10, Epoch: epoch2020, TimeUnit: time.Millisecond},
			now:    layoutNow,
			want:   ErrTimeExhausted,
			has:    []string{"10-bit", "1ms", "ran out on 2020-01-01"},
		},
		{
			name:   "default ran out in 2094",
			layout: DefaultLayout(),
			now:    time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC),
			want:   ErrTimeExhausted,
			has:    []string{"41-bit", "2094-09-07"},
		},
		{
			name:   "at the exact instant it runs out",
			layout: DefaultLayout(),
			now:    DefaultLayout().Capacity().RunsUntil,
			want:   ErrTimeExhausted,
			has:    []string{"2094-09-07"},
		},
		{
			name:   "one nanosecond before it runs out",
			layout: DefaultLayout(),
			now:    DefaultLayout().Capacity().RunsUntil.Add(-time.Nanosecond),
		},
		{
			name:   "a structural error comes first",
			layout: Layout{TimeBits: 37, WorkerBits: 20, SequenceBits: 16, Epoch: layoutNow.Add(time.Hour)},
			now:    layoutNow,
			want:   ErrInvalidLayout,
			has:    []string{"73 bits"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.layout.validateAt(tc.now)
			layoutCheckErr(t, "validateAt", err, tc.want, tc.has...)
			if tc.want == ErrTimeExhausted && errors.Is(err, ErrInvalidLayout) {
				t.Errorf("exhausted layout error %v also wraps ErrInvalidLayout", err)
			}
			// New applies the same check, in the same words, at its clock's
			// first reading.
			_, nerr := New(Settings{Layout: tc.layout, Now: func() time.Time { return tc.now }})
			if (err == nil) != (nerr == nil) || err != nil && nerr.Error() != err.Error() {
				t.Errorf("New at %v: %v; validateAt: %v", tc.now, nerr, err)
			}
		})
	}
}

func TestPresetsValidateNow(t *testing.T) {
	now := time.Now()
	for _, name := range PresetNames() {
		l, err := Preset(name)
		if err != nil {
			t.Fatalf("Preset(%q): %v", name, err)
		}
		if info, err := DescribePreset(name); err != nil || info.Name != name || info.Source == "" {
			t.Fatalf("DescribePreset(%q) = %+v, %v", name, info, err)
		} else if info.Predecessor {
			continue // decodes a predecessor's IDs: its time field may have run out (TestPredecessorPresets)
		}
		if err := l.validateAt(now); err != nil {
			t.Errorf("preset %q at %v: %v", name, now, err)
		}
		// Presets are already normalized.
		if n, err := l.Normalize(); err != nil || !layoutEqual(n, l) {
			t.Errorf("preset %q normalizes to %+v, %v", name, n, err)
		}
		if c := l.Capacity(); c.LifetimeYears < 60 {
			t.Errorf("preset %q lasts only %.1f years (until %v)", name, c.LifetimeYears, c.RunsUntil)
		}
	}
}

func layoutCheckDate(t *testing.T, what string, got time.Time, y int, m time.Month, d int) {
	t.Helper()
	got = got.UTC()
	if got.Year() != y || got.Month() != m || got.Day() != d {
		t.Errorf("%s = %v, want %04d-%02d-%02d", what, got, y, m, d)
	}
}

func TestPresetCapacity(t *testing.T) {
	t.Run("default", func(t *testing.T) {
		l := DefaultLayout()
		if got := [4]int{l.TimeBits, l.DatacenterBits, l.WorkerBits, l.SequenceBits}; got != [4]int{41, 5, 5, 12} {
			t.Errorf("widths %v, want 41/5/5/12", got)
		}
		if l.TimeUnit != time.Millisecond || !l.Epoch.Equal(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)) {
			t.Errorf("unit %v epoch %v", l.TimeUnit, l.Epoch)
		}
		c := l.Capacity()
		layoutCheckDate(t, "RunsUntil", c.RunsUntil, 2094, time.September, 7)
		if want := defaultEpoch().Add(time.Duration(1<<41) * time.Millisecond); !c.RunsUntil.Equal(want) {
			t.Errorf("RunsUntil = %v, want exactly %v", c.RunsUntil, want)
		}
		if c.IDsPerSecond != 4_096_000 || c.IDsPerTick != 4096 {
			t.Errorf("IDs/s %v per tick %d, want 4,096,000 and 4096", c.IDsPerSecond, c.IDsPerTick)
		}
		if c.Nodes != 1024 || c.Datacenters != 32 || c.WorkersPerDatacenter != 32 {
			t.Errorf("nodes %d = %d × %d, want 1024 = 32 × 32", c.Nodes, c.Datacenters, c.WorkersPerDatacenter)
		}
		if c.LifetimeYears < 69.6 || c.LifetimeYears > 69.8 {
			t.Errorf("LifetimeYears = %v, want ≈ 69.7", c.LifetimeYears)
		}
	})
	t.Run("twitter", func(t *testing.T) {
		l := twitterLayout()
		if !l.Epoch.Equal(time.UnixMilli(1288834974657)) {
			t.Errorf("epoch %v, want Twitter's 1288834974657 ms", l.Epoch)
		}
		c := l.Capacity()
		layoutCheckDate(t, "RunsUntil", c.RunsUntil, 2080, time.July, 10)
		if c.Nodes != 1024 || c.IDsPerSecond != 4_096_000 {
			t.Errorf("nodes %d IDs/s %v", c.Nodes, c.IDsPerSecond)
		}
		// A real tweet ID (Twitter's own example in its API docs of the era,
		// 2012): its time field decodes to a 2012 instant.
		p, err := l.Decode(ID(205282515685081088))
		if err != nil {
			t.Fatal(err)
		}
		if p.Time.Year() != 2012 {
			t.Errorf("tweet 205282515685081088 decodes to %v, want a 2012 time", p.Time)
		}
	})
	t.Run("jssafe", func(t *testing.T) {
		l := jsSafeLayout()
		c := l.Capacity()
		max, err := l.Compose(Parts{Tick: 1<<l.TimeBits - 1, Datacenter: c.Datacenters - 1,
			Worker: c.WorkersPerDatacenter - 1, Sequence: c.IDsPerTick - 1})
		if err != nil {
			t.Fatal(err)
		}
		if max >= 1<<53 {
			t.Errorf("largest ID %d ≥ 2^53", max)
		}
		if f := float64(max); int64(f) != int64(max) {
			t.Errorf("largest ID %d does not survive a float64 (%v)", max, f)
		}
		if c.LifetimeYears < 60 {
			t.Errorf("LifetimeYears = %v, want ≥ 60", c.LifetimeYears)
		}
		if c.RunsUntil.Year() < 2085 {
			t.Errorf("RunsUntil = %v, want past 2085", c.RunsUntil)
		}
	})
	t.Run("leaf", func(t *testing.T) {
		// Leaf's SnowflakeIDGenImpl: ((ms − 1288834974657) << 22) | (workerId << 12) | sequence.
		l := leafLayout()
		at := time.UnixMilli(1700000000123)
		tick, err := l.tickAt(at)
		if err != nil {
			t.Fatal(err)
		}
		id, err := l.Compose(Parts{Tick: tick, Worker: 1023, Sequence: 7})
		if err != nil {
			t.Fatal(err)
		}
		if want := ID((1700000000123-1288834974657)<<22 | 1023<<12 | 7); id != want {
			t.Errorf("Leaf ID = %d, want %d", id, want)
		}
		if c := l.Capacity(); c.Datacenters != 1 || c.WorkersPerDatacenter != 1024 || c.IDsPerTick != 4096 {
			t.Errorf("capacity %+v, want 1 datacenter, 1024 workers, 4096 IDs per tick", c)
		}
	})
	t.Run("sonyflake", func(t *testing.T) {
		l := sonyflakeLayout()
		if got := [4]int{l.TimeBits, l.DatacenterBits, l.WorkerBits, l.SequenceBits}; got != [4]int{39, 0, 16, 8} {
			t.Errorf("widths %v, want 39/0/16/8", got)
		}
		if l.TimeUnit != 10*time.Millisecond {
			t.Errorf("unit %v, want 10ms", l.TimeUnit)
		}
		c := l.Capacity()
		if c.IDsPerSecond != 25_600 {
			t.Errorf("IDs/s = %v, want 25,600", c.IDsPerSecond)
		}
		if c.Nodes != 65536 {
			t.Errorf("nodes = %d, want 65536", c.Nodes)
		}
		if c.LifetimeYears < 170 {
			t.Errorf("LifetimeYears = %v, want ≥ 170", c.LifetimeYears)
		}
		if c.RunsUntil.Year() < 2184 {
			t.Errorf("RunsUntil = %v, want ≥ 2184", c.RunsUntil)
		}
	})
}

func TestPresetLookup(t *testing.T) {
	for _, tc := range []struct {
		name string
		want Layout
	}{
		{"default", DefaultLayout()},
		{"DEFAULT", DefaultLayout()},
		{"", DefaultLayout()},
		{"twitter", twitterLayout()},
		{"Twitter", twitterLayout()},
		{" TWITTER ", twitterLayout()},
		{"sonyflake", sonyflakeLayout()},
		{"SonyFlake", sonyflakeLayout()},
		{"jssafe", jsSafeLayout()},
		{"JSSafe", jsSafeLayout()},
		{"js-safe", jsSafeLayout()},
		{"leaf", leafLayout()},
		{"Leaf", leafLayout()},
	} {
		got, err := Preset(tc.name)
		if err != nil {
			t.Errorf("Preset(%q): %v", tc.name, err)
			continue
		}
		if !layoutEqual(got, tc.want) {
			t.Errorf("Preset(%q) = %v, want %v", tc.name, got, tc.want)
		}
	}
	for _, name := range []string{"nope", "snowflake", "twitter2", "default layout"} {
		_, err := Preset(name)
		has := append([]string{"unknown preset", `"` + name + `"`}, PresetNames()...)
		layoutCheckErr(t, "Preset("+name+")", err, ErrInvalidLayout, has...)
	}
	// PresetNames is stable and every name resolves.
	if got := strings.Join(PresetNames(), ","); got != "default,twitter,sonyflake,jssafe,leaf,bwmarrin,sonyflake-v1,uid-generator,yitter" {
		t.Errorf("PresetNames = %s", got)
	}
	names := PresetNames()
	names[0] = "mutated"
	if PresetNames()[0] != "default" {
		t.Error("PresetNames returns a shared slice")
	}
}

func TestCapacityExtremes(t *testing.T) {
	limit := time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)
	t.Run("63 bits of hours", func(t *testing.T) {
		c := Layout{TimeBits: 63, TimeUnit: time.Hour}.Capacity()
		if !c.RunsUntil.Equal(limit) {
			t.Errorf("RunsUntil = %v, want the cap %v", c.RunsUntil, limit)
		}
		// 2^63 hours ≈ 1.05e15 years.
		if want := math.Ldexp(1, 63) / (365.2425 * 24); math.Abs(c.LifetimeYears-want)/want > 1e-9 {
			t.Errorf("LifetimeYears = %v, want ≈ %v", c.LifetimeYears, want)
		}
		if c.IDsPerTick != 1 || c.Nodes != 1 {
			t.Errorf("IDsPerTick %d Nodes %d, want 1 and 1", c.IDsPerTick, c.Nodes)
		}
		if want := 1.0 / 3600; math.Abs(c.IDsPerSecond-want) > 1e-12 {
			t.Errorf("IDsPerSecond = %v, want %v", c.IDsPerSecond, want)
		}
	})
	t.Run("63 bits of µs", func(t *testing.T) {
		c := Layout{TimeBits: 63, TimeUnit: time.Microsecond}.Capacity()
		// 2^63 µs ≈ 292,277 years: past 9999.
		if !c.RunsUntil.Equal(limit) {
			t.Errorf("RunsUntil = %v, want the cap %v", c.RunsUntil, limit)
		}
		if c.LifetimeYears < 292_000 || c.LifetimeYears > 293_000 {
			t.Errorf("LifetimeYears = %v, want ≈ 292,277", c.LifetimeYears)
		}
	})
	t.Run("epoch 2200 plus a long field", func(t *testing.T) {
		c := Layout{TimeBits: 40, TimeUnit: time.Hour, Epoch: time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC)}.Capacity()
		if !c.RunsUntil.Equal(limit) {
			t.Errorf("RunsUntil = %v, want the cap %v", c.RunsUntil, limit)
		}
	})
	t.Run("just below the cap", func(t *testing.T) {
		// 2^36 s ≈ 2177 years from 1970 ends in 4147, below the cap.
		l := Layout{TimeBits: 36, TimeUnit: time.Second, Epoch: time.Unix(0, 0)}
		c := l.Capacity()
		if want := time.Unix(1<<36, 0).UTC(); !c.RunsUntil.Equal(want) {
			t.Errorf("RunsUntil = %v, want %v", c.RunsUntil, want)
		}
	})
	t.Run("one bit of µs", func(t *testing.T) {
		l := Layout{TimeBits: 1, SequenceBits: 62, TimeUnit: time.Microsecond}
		c := l.Capacity()
		if want := defaultEpoch().Add(2 * time.Microsecond); !c.RunsUntil.Equal(want) {
			t.Errorf("RunsUntil = %v, want %v", c.RunsUntil, want)
		}
		if c.LifetimeYears <= 0 || c.LifetimeYears > 1e-12 {
			t.Errorf("LifetimeYears = %v, want a tiny positive number", c.LifetimeYears)
		}
		if c.IDsPerTick != 1<<62 {
			t.Errorf("IDsPerTick = %d, want 2^62", c.IDsPerTick)
		}
		if want := math.Ldexp(1, 62) * 1e6; c.IDsPerSecond != want {
			t.Errorf("IDsPerSecond = %v, want %v", c.IDsPerSecond, want)
		}
	})
	t.Run("epoch with sub-second part", func(t *testing.T) {
		l := Layout{TimeBits: 20, TimeUnit: time.Millisecond, Epoch: time.Date(2025, 1, 1, 0, 0, 0, 999_999_999, time.UTC)}
		if want := l.Epoch.Add(time.Duration(1<<20) * time.Millisecond); !l.Capacity().RunsUntil.Equal(want) {
			t.Errorf("RunsUntil = %v, want %v", l.Capacity().RunsUntil, want)
		}
	})
	t.Run("widest node and sequence fields", func(t *testing.T) {
		for _, l := range []Layout{
			{TimeBits: 1, DatacenterBits: 62},
			{TimeBits: 1, WorkerBits: 62},
			{TimeBits: 1, DatacenterBits: 31, WorkerBits: 31},
		} {
			if c := l.Capacity(); c.Nodes != 1<<62 {
				t.Errorf("%v: Nodes = %d, want 2^62", l, c.Nodes)
			}
		}
	})
}

// layoutDraw draws a valid layout: widths with total ≤ 63 (sometimes with
// TimeBits 0 for "the rest"), a unit from a small set and an epoch in range.
// It returns the layout as drawn and normalized.
func layoutDraw(t *rapid.T) (drawn, n Layout) {
	tb := rapid.IntRange(1, MaxBits).Draw(t, "timeBits")
	dc := rapid.IntRange(0, MaxBits-tb).Draw(t, "datacenterBits")
	wk := rapid.IntRange(0, MaxBits-tb-dc).Draw(t, "workerBits")
	sq := rapid.IntRange(0, MaxBits-tb-dc-wk).Draw(t, "sequenceBits")
	unit := rapid.SampledFrom([]time.Duration{time.Microsecond, 3 * time.Microsecond, time.Millisecond,
		10 * time.Millisecond, time.Second, time.Minute, time.Hour}).Draw(t, "unit")
	epoch := time.Unix(rapid.Int64Range(0, time.Date(2200, 12, 31, 0, 0, 0, 0, time.UTC).Unix()).Draw(t, "epoch"), 0).UTC()
	drawn = Layout{TimeBits: tb, DatacenterBits: dc, WorkerBits: wk, SequenceBits: sq, Epoch: epoch, TimeUnit: unit}
	n = drawn
	if rapid.Bool().Draw(t, "timeRest") {
		drawn.TimeBits = 0
		n.TimeBits = MaxBits - dc - wk - sq
	}
	got, err := drawn.Normalize()
	if err != nil {
		t.Fatalf("drawn layout %+v: %v", drawn, err)
	}
	if !layoutEqual(got, n) {
		t.Fatalf("Normalize(%+v) = %+v, want %+v", drawn, got, n)
	}
	return drawn, n
}

// layoutMaxTime is the latest instant Capacity and Decode report.
var layoutMaxTime = time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)

// layoutTickTime is epoch + tick × unit computed with math/big, capped at
// layoutMaxTime.
func layoutTickTime(n Layout, tick int64) time.Time {
	ns := new(big.Int).Mul(big.NewInt(tick), big.NewInt(int64(n.TimeUnit)))
	ns.Add(ns, big.NewInt(int64(n.Epoch.Nanosecond())))
	secs, nanos := new(big.Int).QuoRem(ns, big.NewInt(1e9), new(big.Int))
	secs.Add(secs, big.NewInt(n.Epoch.Unix()))
	if secs.Cmp(big.NewInt(layoutMaxTime.Unix())) >= 0 {
		return layoutMaxTime
	}
	return time.Unix(secs.Int64(), nanos.Int64()).UTC()
}

func layoutDrawParts(t *rapid.T, n Layout, maxTick int64) Parts {
	return Parts{
		Tick:       rapid.Int64Range(0, maxTick).Draw(t, "tick"),
		Datacenter: rapid.Int64Range(0, 1<<n.DatacenterBits-1).Draw(t, "datacenter"),
		Worker:     rapid.Int64Range(0, 1<<n.WorkerBits-1).Draw(t, "worker"),
		Sequence:   rapid.Int64Range(0, 1<<n.SequenceBits-1).Draw(t, "sequence"),
	}
}

func TestLayoutComposeDecodeRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		l, n := layoutDraw(t)
		total := n.TimeBits + n.DatacenterBits + n.WorkerBits + n.SequenceBits
		p := layoutDrawParts(t, n, int64(1)<<n.TimeBits-1)
		id, err := l.Compose(p)
		if err != nil {
			t.Fatalf("Compose(%+v) with %v: %v", p, n, err)
		}
		if id < 0 || (total < 63 && id >= 1<<total) {
			t.Fatalf("Compose(%+v) = %d, outside [0, 2^%d)", p, id, total)
		}
		got, err := l.Decode(id)
		if err != nil {
			t.Fatalf("Decode(%d) with %v: %v", id, n, err)
		}
		if got.Tick != p.Tick || got.Datacenter != p.Datacenter || got.Worker != p.Worker || got.Sequence != p.Sequence {
			t.Fatalf("Decode(Compose(%+v)) = %+v", p, got)
		}
		if got.Time.Location() != time.UTC {
			t.Fatalf("Parts.Time %v is not in UTC", got.Time)
		}
		// Time = epoch + tick × unit (capped at 9999-12-31T23:59:59Z).
		if want := layoutTickTime(n, p.Tick); !got.Time.Equal(want) {
			t.Fatalf("Decode(%d).Time = %v, want %v (tick %d × %v)", id, got.Time, want, p.Tick, n.TimeUnit)
		}
		// Where tick × unit fits a Duration, check it directly too, and that
		// the instant maps back to its tick.
		if p.Tick <= int64(math.MaxInt64)/int64(n.TimeUnit) && got.Time.Before(layoutMaxTime) {
			if want := n.Epoch.Add(time.Duration(p.Tick) * n.TimeUnit); !got.Time.Equal(want) {
				t.Fatalf("Decode(%d).Time = %v, want %v", id, got.Time, want)
			}
			if tk, err := l.tickAt(got.Time); err != nil || tk != p.Tick {
				t.Fatalf("Tick(%v) = %d, %v; want %d", got.Time, tk, err, p.Tick)
			}
		}
		// Parts.Time is ignored by Compose.
		p.Time = time.Date(1999, 1, 1, 0, 0, 0, 0, time.UTC)
		if id2, err := l.Compose(p); err != nil || id2 != id {
			t.Fatalf("Compose with a Time set = %d, %v; want %d", id2, err, id)
		}
	})
}

// TestLayoutDecodeComposeRoundTrip: every ID that fits the layout decodes and
// composes back to itself.
func TestLayoutDecodeComposeRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		l, n := layoutDraw(t)
		total := n.TimeBits + n.DatacenterBits + n.WorkerBits + n.SequenceBits
		hi := int64(math.MaxInt64)
		if total < 63 {
			hi = 1<<total - 1
		}
		id := ID(rapid.Int64Range(0, hi).Draw(t, "id"))
		p, err := l.Decode(id)
		if err != nil {
			t.Fatalf("Decode(%d) with %v: %v", id, n, err)
		}
		back, err := l.Compose(p)
		if err != nil || back != id {
			t.Fatalf("Compose(Decode(%d)) = %d, %v (parts %+v)", id, back, err, p)
		}
	})
}

func layoutCmpParts(a, b Parts) int {
	for _, d := range [4]int64{a.Tick - b.Tick, a.Datacenter - b.Datacenter, a.Worker - b.Worker, a.Sequence - b.Sequence} {
		if d != 0 {
			if d < 0 {
				return -1
			}
			return 1
		}
	}
	return 0
}

// TestLayoutComposeOrder: IDs sort as their (tick, datacenter, worker,
// sequence) tuples, over the full tick range, and each field sits in its own
// bits.
func TestLayoutComposeOrder(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		l, n := layoutDraw(t)
		maxTick := int64(1)<<n.TimeBits - 1
		a := layoutDrawParts(t, n, maxTick)
		b := a
		// Often change only one field, so ties in the higher fields are common.
		switch rapid.IntRange(0, 4).Draw(t, "vary") {
		case 0:
			b = layoutDrawParts(t, n, maxTick)
		case 1:
			b.Tick = rapid.Int64Range(0, maxTick).Draw(t, "tick2")
		case 2:
			b.Datacenter = rapid.Int64Range(0, 1<<n.DatacenterBits-1).Draw(t, "datacenter2")
		case 3:
			b.Worker = rapid.Int64Range(0, 1<<n.WorkerBits-1).Draw(t, "worker2")
		case 4:
			b.Sequence = rapid.Int64Range(0, 1<<n.SequenceBits-1).Draw(t, "sequence2")
		}
		ia, err := l.Compose(a)
		if err != nil {
			t.Fatalf("Compose(%+v): %v", a, err)
		}
		ib, err := l.Compose(b)
		if err != nil {
			t.Fatalf("Compose(%+v): %v", b, err)
		}
		want := layoutCmpParts(a, b)
		got := 0
		if ia < ib {
			got = -1
		} else if ia > ib {
			got = 1
		}
		if got != want {
			t.Fatalf("%v: IDs %d, %d compare %d but parts %+v, %+v compare %d", n, ia, ib, got, a, b, want)
		}
		// Bit placement, computed independently of the codec.
		sq, wk, dc := uint(n.SequenceBits), uint(n.WorkerBits), uint(n.DatacenterBits)
		v := uint64(ia)
		if v>>(sq+wk+dc) != uint64(a.Tick) || v>>(sq+wk)&(1<<dc-1) != uint64(a.Datacenter) ||
			v>>sq&(1<<wk-1) != uint64(a.Worker) || v&(1<<sq-1) != uint64(a.Sequence) {
			t.Fatalf("%v: Compose(%+v) = %#x puts a field in the wrong bits", n, a, v)
		}
	})
}

func TestLayoutComposeErrors(t *testing.T) {
	def := DefaultLayout()
	noDC := Layout{WorkerBits: 10, SequenceBits: 12}
	narrow := Layout{TimeBits: 20, WorkerBits: 4, SequenceBits: 4}
	tests := []struct {
		name   string
		layout Layout
		p      Parts
		want   error
		has    []string
	}{
		{"negative tick", def, Parts{Tick: -1}, ErrTimeExhausted, []string{"tick -1", "0–2199023255551"}},
		{"tick past the field", def, Parts{Tick: 1 << 41}, ErrTimeExhausted, []string{"tick 2199023255552"}},
		{"narrow tick past the field", narrow, Parts{Tick: 1 << 20}, ErrTimeExhausted, []string{"tick 1048576", "0–1048575"}},
		{"datacenter 32", def, Parts{Datacenter: 32}, ErrNodeOutOfRange, []string{"datacenter 32", "0–31"}},
		{"negative datacenter", def, Parts{Datacenter: -1}, ErrNodeOutOfRange, []string{"datacenter -1"}},
		{"datacenter in a layout without one", noDC, Parts{Datacenter: 1}, ErrNodeOutOfRange, []string{"datacenter 1", "0–0"}},
		{"worker 32", def, Parts{Worker: 32}, ErrNodeOutOfRange, []string{"worker 32", "0–31"}},
		{"negative worker", def, Parts{Worker: -7}, ErrNodeOutOfRange, []string{"worker -7"}},
		{"worker 1024 in 10 bits", noDC, Parts{Worker: 1024}, ErrNodeOutOfRange, []string{"worker 1024", "0–1023"}},
		{"sequence 4096", def, Parts{Sequence: 4096}, ErrInvalidID, []string{"sequence 4096", "0–4095"}},
		{"negative sequence", def, Parts{Sequence: -1}, ErrInvalidID, []string{"sequence -1"}},
		{"sequence in a layout without one", Layout{TimeBits: 63}, Parts{Sequence: 1}, ErrInvalidID, []string{"sequence 1", "0–0"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			id, err := tc.layout.Compose(tc.p)
			layoutCheckErr(t, "Compose", err, tc.want, tc.has...)
			if id != 0 {
				t.Errorf("Compose returned ID %d with an error", id)
			}
		})
	}
	// The largest values that fit compose to the largest ID.
	id, err := def.Compose(Parts{Tick: 1<<41 - 1, Datacenter: 31, Worker: 31, Sequence: 4095})
	if err != nil || id != math.MaxInt64 {
		t.Errorf("Compose(max parts) = %d, %v; want 2^63−1", id, err)
	}
}

func TestLayoutDecodeErrors(t *testing.T) {
	narrow := Layout{TimeBits: 20, WorkerBits: 4, SequenceBits: 4} // 28 bits
	tests := []struct {
		name   string
		layout Layout
		id     ID
		want   error
		has    []string
	}{
		{"negative", DefaultLayout(), -1, ErrInvalidID, []string{"-1", "negative"}},
		{"most negative", DefaultLayout(), math.MinInt64, ErrInvalidID, []string{"-9223372036854775808", "negative"}},
		{"negative in a narrow layout", narrow, -5, ErrInvalidID, []string{"negative"}},
		{"just above a narrow layout", narrow, 1 << 28, ErrInvalidID, []string{"268435456", "28 bits", "20/0/4/4"}},
		{"far above a narrow layout", narrow, math.MaxInt64, ErrInvalidID, []string{"28 bits"}},
		{"top of a narrow layout", narrow, 1<<28 - 1, nil, nil},
		{"largest ID in a full layout", DefaultLayout(), math.MaxInt64, nil, nil},
		{"zero", narrow, 0, nil, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := tc.layout.Decode(tc.id)
			layoutCheckErr(t, "Decode", err, tc.want, tc.has...)
			if err != nil && p != (Parts{}) {
				t.Errorf("Decode returned parts %+v with an error", p)
			}
		})
	}
	// The top of the narrow layout has every field at its maximum.
	p, err := narrow.Decode(1<<28 - 1)
	if err != nil || p.Tick != 1<<20-1 || p.Datacenter != 0 || p.Worker != 15 || p.Sequence != 15 {
		t.Errorf("Decode(2^28−1) = %+v, %v", p, err)
	}
}

// TestLayoutDecodeKnown pins Decode and Compose to hand-computed values.
func TestLayoutDecodeKnown(t *testing.T) {
	l := DefaultLayout()
	want := Parts{Tick: 1000, Datacenter: 3, Worker: 7, Sequence: 42}
	const id = ID(1000<<22 | 3<<17 | 7<<12 | 42)
	got, err := l.Compose(want)
	if err != nil || got != id {
		t.Fatalf("Compose(%+v) = %d, %v; want %d", want, got, err, id)
	}
	p, err := l.Decode(id)
	if err != nil {
		t.Fatal(err)
	}
	want.Time = time.Date(2025, 1, 1, 0, 0, 1, 0, time.UTC)
	if !p.Time.Equal(want.Time) || p.Tick != want.Tick || p.Datacenter != 3 || p.Worker != 7 || p.Sequence != 42 {
		t.Errorf("Decode(%d) = %+v, want %+v", id, p, want)
	}
	// The zero layout decodes as the default one.
	if p0, err := (Layout{}).Decode(id); err != nil || !p0.Time.Equal(p.Time) || p0.Tick != p.Tick || p0.Sequence != p.Sequence {
		t.Errorf("Layout{}.Decode(%d) = %+v, %v; want %+v", id, p0, err, p)
	}
}

func TestLayoutTick(t *testing.T) {
	l := DefaultLayout()
	e := l.Epoch
	l10 := Layout{SequenceBits: 8, TimeUnit: 10 * time.Millisecond}
	tests := []struct {
		layout Layout
		at     time.Time
		want   int64
	}{
		{l, e, 0},
		{l, e.Add(time.Nanosecond), 0},
		{l, e.Add(time.Millisecond - time.Nanosecond), 0},
		{l, e.Add(time.Millisecond), 1},
		{l, e.Add(time.Second + 500*time.Microsecond), 1000},
		{l, e.Add(-time.Nanosecond), -1},
		{l, e.Add(-time.Millisecond + time.Nanosecond), -1},
		{l, e.Add(-time.Millisecond), -1},
		{l, e.Add(-time.Millisecond - time.Nanosecond), -2},
		{l, e.Add(-time.Second), -1000},
		{l, e.In(time.FixedZone("UTC+9", 9*3600)).Add(2 * time.Millisecond), 2}, // zones do not matter
		{l, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), 365 * 24 * 3600 * 1000},
		{l, l.Capacity().RunsUntil.Add(-time.Nanosecond), 1<<41 - 1},
		{l, l.Capacity().RunsUntil, 1 << 41}, // past the field: Tick does not clamp
		{l10, e.Add(25 * time.Millisecond), 2},
		{l10, e.Add(-25 * time.Millisecond), -3},
		{l10, e.Add(-20 * time.Millisecond), -2},
		{Layout{TimeUnit: time.Hour, SequenceBits: 1}, e.Add(100*time.Hour - 1), 99},
		{Layout{TimeUnit: time.Microsecond, SequenceBits: 1}, e.Add(1500 * time.Nanosecond), 1},
	}
	for _, tc := range tests {
		got, err := tc.layout.tickAt(tc.at)
		if err != nil || got != tc.want {
			t.Errorf("%v: Tick(%v) = %d, %v; want %d", tc.layout, tc.at, got, err, tc.want)
		}
	}
}

// TestLayoutTickFarFromEpoch: Tick must be exact more than 292 years (the
// range of a time.Duration) from the epoch, which layouts with long units or
// wide time fields reach.
func TestLayoutTickFarFromEpoch(t *testing.T) {
	l := Layout{TimeBits: 40, SequenceBits: 8, TimeUnit: time.Hour} // lasts 125 million years
	at := time.Date(2400, 1, 1, 0, 0, 0, 0, time.UTC)
	want := (at.Unix() - defaultEpoch().Unix()) / 3600
	got, err := l.tickAt(at)
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("Tick(%v) = %d, want %d (t − epoch exceeds a Duration here)", at, got, want)
	}
}

// TestLayoutDecodeLargeTick: a large tick decodes to the right time (an
// earlier version added the tick in chunks, in time proportional to it).
func TestLayoutDecodeLargeTick(t *testing.T) {
	l := Layout{TimeBits: 55, SequenceBits: 8, TimeUnit: time.Microsecond}
	const tick = int64(1) << 44
	id := ID(tick << 8)
	p, err := l.Decode(id)
	if err != nil || p.Tick != tick {
		t.Fatalf("Decode(%d) = %+v, %v", id, p, err)
	}
	if want := defaultEpoch().Add(time.Duration(tick) * time.Microsecond); !p.Time.Equal(want) {
		t.Fatalf("Decode(%d).Time = %v, want %v", id, p.Time, want)
	}
}

// TestLayoutDecodeTimeCapped: times past year 9999 decode as
// 9999-12-31T23:59:59Z, as RunsUntil does, rather than overflowing.
func TestLayoutDecodeTimeCapped(t *testing.T) {
	for _, l := range []Layout{
		{TimeBits: 63, TimeUnit: time.Hour},
		{TimeBits: 63, TimeUnit: time.Microsecond},
		{TimeBits: 63, TimeUnit: time.Millisecond, Epoch: time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC)},
	} {
		p, err := l.Decode(math.MaxInt64)
		if err != nil {
			t.Fatalf("%v: Decode(2^63−1): %v", l, err)
		}
		if p.Tick != math.MaxInt64 || !p.Time.Equal(layoutMaxTime) {
			t.Errorf("%v: Decode(2^63−1) = %+v, want tick 2^63−1 at %v", l, p, layoutMaxTime)
		}
	}
	// 1.2 s past the cap: 0.7 s of ticks past the last whole second plus the
	// epoch's 0.5 s fraction.
	e := time.Date(2025, 1, 1, 0, 0, 0, 500_000_000, time.UTC)
	l := Layout{TimeBits: 58, TimeUnit: time.Microsecond, Epoch: e}
	tick := (layoutMaxTime.Unix()-e.Unix())*1_000_000 + 700_000
	id, err := l.Compose(Parts{Tick: tick})
	if err != nil {
		t.Fatal(err)
	}
	p, err := l.Decode(id)
	if err != nil {
		t.Fatal(err)
	}
	if p.Time.After(layoutMaxTime) {
		t.Errorf("tick %d of %v decodes to %v, past the cap %v",
			tick, l, p.Time, layoutMaxTime)
	}
}

func TestLayoutString(t *testing.T) {
	for _, tc := range []struct {
		l    Layout
		want string
	}{
		{DefaultLayout(), "41/5/5/12 × 1ms since 2025-01-01T00:00:00Z"},
		{Layout{}, "41/5/5/12 × 1ms since 2025-01-01T00:00:00Z"},
		{twitterLayout(), "41/5/5/12 × 1ms since 2010-11-04T01:42:54.657Z"},
		{sonyflakeLayout(), "39/0/16/8 × 10ms since 2014-09-01T00:00:00Z"},
		{jsSafeLayout(), "38/0/6/9 × 10ms since 2025-01-01T00:00:00Z"},
		{Layout{WorkerBits: 10, SequenceBits: 12}, "41/0/10/12 × 1ms since 2025-01-01T00:00:00Z"},
		{Layout{TimeBits: 30, TimeUnit: time.Hour, Epoch: time.Date(2020, 5, 6, 7, 8, 9, 0, time.FixedZone("X", 3600))},
			"30/0/0/0 × 1h0m0s since 2020-05-06T06:08:09Z"},
		{Layout{TimeBits: 63, TimeUnit: time.Microsecond}, "63/0/0/0 × 1µs since 2025-01-01T00:00:00Z"},
	} {
		if got := tc.l.String(); got != tc.want {
			t.Errorf("%+v.String() = %q, want %q", tc.l, got, tc.want)
		}
	}
	// An invalid layout still prints its widths rather than panicking.
	if got := (Layout{TimeBits: 37, WorkerBits: 20, SequenceBits: 16}).String(); !strings.HasPrefix(got, "37/0/20/16 × ") {
		t.Errorf("invalid layout String() = %q", got)
	}
}
