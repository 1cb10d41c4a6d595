package snowflake

import (
	"fmt"
	"math"
	"math/big"
	"math/bits"
	"strings"
	"time"
)

// MaxBits is the number of bits a layout may use: an int64 less its sign bit.
const MaxBits = 63

// Bounds of Layout.TimeUnit.
const (
	MinTimeUnit = time.Microsecond
	MaxTimeUnit = time.Hour
)

// defaultEpochUnixMilli is 2025-01-01T00:00:00Z in Unix milliseconds.
const defaultEpochUnixMilli = 1735689600000

// defaultEpoch is the epoch of DefaultLayout, 2025-01-01T00:00:00Z.
func defaultEpoch() time.Time { return time.UnixMilli(defaultEpochUnixMilli).UTC() }

// maxTime is the latest instant reported: RunsUntil and decoded times past
// it are capped to it.
func maxTime() time.Time { return time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC) }

// Layout is the bit layout of an ID: the widths of its fields, the epoch its
// time field counts from, and the unit it counts in.
//
// The zero Layout means DefaultLayout. In any other Layout a zero TimeBits
// means "every bit the other fields leave" (63 − DatacenterBits − WorkerBits −
// SequenceBits), a zero Epoch means 2025-01-01 UTC and a zero TimeUnit means
// one millisecond; zero DatacenterBits, WorkerBits or SequenceBits mean no such
// field.
//
// Normalize fills in those defaults and checks the result; New also refuses a
// layout whose epoch is in the future or whose time field has run out.
// Decode splits an ID into its Parts and Compose builds one from them.
type Layout struct {
	// TimeBits is the width of the time field. Range 1–63; 0 means the rest
	// of the 63 bits. Default 41.
	TimeBits int
	// DatacenterBits is the width of the datacenter field. Range 0–62.
	// Default 5 (32 datacenters).
	DatacenterBits int
	// WorkerBits is the width of the worker field. Range 0–62. Default 5
	// (32 workers per datacenter).
	WorkerBits int
	// SequenceBits is the width of the per-tick sequence. Range 0–62.
	// Default 12 (4096 IDs per tick).
	SequenceBits int
	// Epoch is the instant the time field counts from. It must not be in the
	// future when a Generator starts. Default 2025-01-01T00:00:00Z.
	Epoch time.Time
	// TimeUnit is the length of one tick of the time field. Range 1µs–1h.
	// Default 1ms.
	TimeUnit time.Duration
	// Order is the order of the fields below the time field. Default
	// OrderNodeSequence. OrderSequenceNode is Sonyflake's order, for
	// decoding its IDs: such a layout decodes and composes IDs, and New
	// refuses it.
	Order FieldOrder
}

// FieldOrder is the order of an ID's fields below the time field, from the
// high bits down.
type FieldOrder int

const (
	// OrderNodeSequence is time, datacenter, worker, sequence: the IDs of
	// one tick of one node are consecutive integers (Twitter's order, and
	// every flakeid generator's).
	OrderNodeSequence FieldOrder = iota
	// OrderSequenceNode is time, sequence, datacenter, worker: Sonyflake's
	// order (time, sequence, machine id).
	OrderSequenceNode
)

// DefaultLayout is 41 bits of milliseconds since 2025-01-01 UTC, 5 datacenter
// bits, 5 worker bits and 12 sequence bits: 1024 nodes, each up to 4,096,000
// IDs per second, until 2094-09-07.
func DefaultLayout() Layout {
	return Layout{TimeBits: 41, DatacenterBits: 5, WorkerBits: 5, SequenceBits: 12,
		Epoch: defaultEpoch(), TimeUnit: time.Millisecond}
}

// twitterLayout is the "twitter" preset.
func twitterLayout() Layout {
	return Layout{TimeBits: 41, DatacenterBits: 5, WorkerBits: 5, SequenceBits: 12,
		Epoch: time.UnixMilli(1288834974657).UTC(), TimeUnit: time.Millisecond}
}

// sonyflakeLayout is the "sonyflake" preset.
func sonyflakeLayout() Layout {
	return Layout{TimeBits: 39, WorkerBits: 16, SequenceBits: 8,
		Epoch: time.Date(2014, 9, 1, 0, 0, 0, 0, time.UTC), TimeUnit: 10 * time.Millisecond}
}

// jsSafeLayout is the "jssafe" preset.
func jsSafeLayout() Layout {
	return Layout{TimeBits: 38, WorkerBits: 6, SequenceBits: 9,
		Epoch: defaultEpoch(), TimeUnit: 10 * time.Millisecond}
}

// leafLayout is the "leaf" preset.
func leafLayout() Layout {
	return Layout{TimeBits: 41, WorkerBits: 10, SequenceBits: 12,
		Epoch: time.UnixMilli(1288834974657).UTC(), TimeUnit: time.Millisecond}
}

// preset is a named layout and where it comes from.
type preset struct {
	names       []string // the first is the one PresetNames lists
	source      string
	layout      func() Layout
	predecessor bool
}

// presets are the layouts Preset knows, flakeid's own and its predecessors'.
func presets() []preset {
	return []preset{
		{[]string{"default", ""}, "flakeid's default", DefaultLayout, false},
		{[]string{"twitter"}, "Twitter's Snowflake (2010): 41/5/5/12 ms since 1288834974657", twitterLayout, false},
		{[]string{"sonyflake"}, "flakeid's Sonyflake-like layout (Sonyflake's widths, epoch and unit; the sequence lowest)", sonyflakeLayout, false},
		{[]string{"jssafe", "js-safe", "js"}, "flakeid's layout below 2^53 (JavaScript numbers)", jsSafeLayout, false},
		{[]string{"leaf"}, "Meituan Leaf's snowflake mode: 41/10/12 ms since Twitter's epoch", leafLayout, false},
		{[]string{"bwmarrin"}, "github.com/bwmarrin/snowflake's defaults (Epoch 1288834974657, NodeBits 10, StepBits 12)", leafLayout, true},
		{[]string{"sonyflake-v1"}, "github.com/sony/sonyflake v1: time 39 × 10 ms since 2014-09-01, then sequence 8, then machine id 16", func() Layout {
			return Layout{TimeBits: 39, WorkerBits: 16, SequenceBits: 8, Order: OrderSequenceNode,
				Epoch: time.Date(2014, 9, 1, 0, 0, 0, 0, time.UTC), TimeUnit: 10 * time.Millisecond}
		}, true},
		{[]string{"uid-generator"}, "Baidu uid-generator's DefaultUidGenerator: 1 sign bit, 28 bits of seconds since 2016-05-20, 22 worker bits, 13 sequence bits (its time field ran out on 2024-11-20: github.com/baidu/uid-generator/issues/100)", func() Layout {
			return Layout{TimeBits: 28, WorkerBits: 22, SequenceBits: 13,
				Epoch: time.Date(2016, 5, 20, 0, 0, 0, 0, time.UTC), TimeUnit: time.Second}
		}, true},
		{[]string{"yitter"}, "Yitter IdGenerator's defaults (BaseTime 1582136402000, WorkerIdBitLength 6, SeqBitLength 6; the time field takes the other 51 bits)", func() Layout {
			return Layout{TimeBits: 51, WorkerBits: 6, SequenceBits: 6,
				Epoch: time.UnixMilli(1582136402000).UTC(), TimeUnit: time.Millisecond}
		}, true},
	}
}

// PresetNames lists the names Preset accepts, in a stable order.
func PresetNames() []string {
	var names []string
	for _, p := range presets() {
		names = append(names, p.names[0])
	}
	return names
}

// PresetInfo describes a preset (see Preset).
type PresetInfo struct {
	// Name is the preset's name as PresetNames lists it.
	Name string
	// Source says where the layout comes from: flakeid's own, or the
	// system whose IDs it decodes, with that system's settings.
	Source string
	// Predecessor marks the layout of a system users leave: for decoding
	// its IDs and planning the move (its time field may have run out, its
	// field order may not be flakeid's), not for generating.
	Predecessor bool
}

// DescribePreset describes the named preset, or fails as Preset does.
func DescribePreset(name string) (PresetInfo, error) {
	p, err := findPreset(name)
	if err != nil {
		return PresetInfo{}, err
	}
	return PresetInfo{Name: p.names[0], Source: p.source, Predecessor: p.predecessor}, nil
}

func findPreset(name string) (preset, error) {
	key := strings.ToLower(strings.TrimSpace(name))
	for _, p := range presets() {
		for _, n := range p.names {
			if n == key {
				return p, nil
			}
		}
	}
	return preset{}, fmt.Errorf("%w: unknown preset %q (known: %s)", ErrInvalidLayout, name, strings.Join(PresetNames(), ", "))
}

// Preset returns the named preset layout (the name is case-insensitive):
//
//   - "default" (or ""): DefaultLayout.
//   - "twitter": Twitter's original Snowflake layout, 41/5/5/12 in
//     milliseconds since 1288834974657 (2010-11-04T01:42:54.657Z). IDs decode
//     the same way as Twitter's; the time field runs out on 2080-07-10.
//   - "sonyflake": a Sonyflake-like layout, 39 bits of 10 ms units since
//     2014-09-01 UTC, 16 worker bits (65,536 machines) and 8 sequence bits
//     (25,600 IDs per second per machine), lasting 174 years. Unlike Sonyflake
//     the sequence is the lowest field, so consecutive IDs of one tick are
//     consecutive integers ("sonyflake-v1" decodes Sonyflake's own IDs).
//   - "jssafe" (or "js-safe", "js"): every ID below 2^53, so it survives a
//     JavaScript number: 38 bits of 10 ms units since 2025-01-01 UTC (until
//     2112), 6 worker bits (64 workers) and 9 sequence bits (51,200 IDs per
//     second per worker).
//   - "leaf": Meituan Leaf's snowflake mode, 41 bits of milliseconds since
//     Twitter's epoch, 10 worker bits (Leaf's worker id, the sequence number
//     of its ZooKeeper node) and 12 sequence bits, with no datacenter field.
//     IDs decode the same way as Leaf's; a cluster that takes over Leaf's
//     worker ids (backend/zk's Leaf takeover) must use it.
//
// And the layouts of the systems users leave, to decode their IDs and plan
// the move (PresetSource says where each comes from):
//
//   - "bwmarrin": github.com/bwmarrin/snowflake's defaults, the same as
//     "leaf" (its 10-bit node id is the worker field).
//   - "sonyflake-v1": github.com/sony/sonyflake v1, in its own order (time,
//     sequence, machine id: OrderSequenceNode); it decodes, New refuses it.
//   - "uid-generator": Baidu uid-generator's default, 28 bits of seconds
//     since 2016-05-20 (taken as UTC), 22 worker bits, 13 sequence bits; its
//     time field ran out on 2024-11-20.
//   - "yitter": Yitter IdGenerator's defaults, milliseconds since
//     1582136402000, 6 worker bits, 6 sequence bits.
//
// Any other name fails with ErrInvalidLayout.
func Preset(name string) (Layout, error) {
	p, err := findPreset(name)
	if err != nil {
		return Layout{}, err
	}
	return p.layout(), nil
}

// Normalize returns the layout with its defaults filled in (see Layout) and
// checks its structure: widths in range, at most 63 bits in all, a time unit
// in range, an epoch year in 1970–2200. It fails with ErrInvalidLayout naming
// the offending field. It does not look at the clock: New also refuses an
// epoch in the future and a time field that has already run out.
func (l Layout) Normalize() (Layout, error) {
	if l == (Layout{}) {
		return DefaultLayout(), nil
	}
	if l.Epoch.IsZero() {
		l.Epoch = defaultEpoch()
	}
	if l.TimeUnit == 0 {
		l.TimeUnit = time.Millisecond
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"time", l.TimeBits}, {"datacenter", l.DatacenterBits}, {"worker", l.WorkerBits}, {"sequence", l.SequenceBits}} {
		if f.v < 0 || f.v > MaxBits {
			return l, fmt.Errorf("%w: %s bits = %d, want 0–%d", ErrInvalidLayout, f.name, f.v, MaxBits)
		}
	}
	others := l.DatacenterBits + l.WorkerBits + l.SequenceBits
	if l.TimeBits == 0 {
		if others >= MaxBits {
			return l, fmt.Errorf("%w: datacenter %d + worker %d + sequence %d bits = %d leave no time bits (at most %d bits fit below the sign bit)",
				ErrInvalidLayout, l.DatacenterBits, l.WorkerBits, l.SequenceBits, others, MaxBits)
		}
		l.TimeBits = MaxBits - others
	}
	if total := l.TimeBits + others; total > MaxBits {
		return l, fmt.Errorf("%w: time %d + datacenter %d + worker %d + sequence %d = %d bits overflows the %d bits below the sign bit by %d",
			ErrInvalidLayout, l.TimeBits, l.DatacenterBits, l.WorkerBits, l.SequenceBits, total, MaxBits, total-MaxBits)
	}
	if l.TimeUnit < MinTimeUnit || l.TimeUnit > MaxTimeUnit {
		return l, fmt.Errorf("%w: time unit %v, want %v–%v", ErrInvalidLayout, l.TimeUnit, MinTimeUnit, MaxTimeUnit)
	}
	if l.Order != OrderNodeSequence && l.Order != OrderSequenceNode {
		return l, fmt.Errorf("%w: field order %d, want %d (node, sequence) or %d (sequence, node)", ErrInvalidLayout, l.Order, OrderNodeSequence, OrderSequenceNode)
	}
	if y := l.Epoch.Year(); y < 1970 || y > 2200 {
		return l, fmt.Errorf("%w: epoch %s, want a year in 1970–2200", ErrInvalidLayout, l.Epoch.Format(time.RFC3339))
	}
	return l, nil
}

// validateAt checks the structure and, against the instant now, that the
// epoch is not in the future and the time field has not already run out. New
// applies it at the generator clock's first reading.
func (l Layout) validateAt(now time.Time) error {
	n, err := l.Normalize()
	if err != nil {
		return err
	}
	if n.Epoch.After(now) {
		return fmt.Errorf("%w: epoch %s is in the future (now %s)", ErrInvalidLayout,
			n.Epoch.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	}
	if c := n.Capacity(); !now.Before(c.RunsUntil) {
		return fmt.Errorf("%w: the %d-bit time field in units of %v ran out on %s", ErrTimeExhausted,
			n.TimeBits, n.TimeUnit, c.RunsUntil.UTC().Format(time.RFC3339))
	}
	return nil
}

// Capacity is what a layout can address.
type Capacity struct {
	// IDsPerTick is how many IDs one node can issue in one tick (2^SequenceBits).
	IDsPerTick int64
	// IDsPerSecond is how many IDs one node can issue per second.
	IDsPerSecond float64
	// Datacenters is the number of datacenter ids (2^DatacenterBits).
	Datacenters int64
	// WorkersPerDatacenter is the number of worker ids (2^WorkerBits).
	WorkersPerDatacenter int64
	// Nodes is Datacenters × WorkersPerDatacenter: how many generators may
	// run at once.
	Nodes int64
	// Lifetime is how long the time field lasts from the epoch, in years of
	// 365.2425 days.
	LifetimeYears float64
	// RunsUntil is the first instant the time field cannot represent. Past
	// year 9999 it is reported as 9999-12-31T23:59:59Z.
	RunsUntil time.Time
}

// Capacity reports what the layout can address. A layout that does not
// normalize reports the zero Capacity; check Normalize first.
func (l Layout) Capacity() Capacity {
	n, err := l.Normalize()
	if err != nil {
		return Capacity{}
	}
	perTick := int64(1) << n.SequenceBits
	c := Capacity{
		IDsPerTick:           perTick,
		IDsPerSecond:         float64(perTick) * float64(time.Second) / float64(n.TimeUnit),
		Datacenters:          int64(1) << n.DatacenterBits,
		WorkersPerDatacenter: int64(1) << n.WorkerBits,
	}
	c.Nodes = c.Datacenters * c.WorkersPerDatacenter
	// 2^TimeBits × unit can exceed int64 nanoseconds, so count in big integers.
	life := new(big.Int).Lsh(big.NewInt(int64(n.TimeUnit)), uint(n.TimeBits))
	secs := new(big.Int).Quo(life, big.NewInt(int64(time.Second)))
	c.LifetimeYears, _ = new(big.Float).Quo(new(big.Float).SetInt(life), big.NewFloat(365.2425*24*3600*1e9)).Float64()
	if limit := maxTime(); secs.IsInt64() && secs.Int64() < limit.Unix()-n.Epoch.Unix() {
		nanos := new(big.Int).Rem(life, big.NewInt(int64(time.Second))).Int64()
		c.RunsUntil = time.Unix(n.Epoch.Unix()+secs.Int64(), int64(n.Epoch.Nanosecond())+nanos).UTC()
	} else {
		c.RunsUntil = maxTime()
	}
	return c
}

// String draws the layout as "41/5/5/12 × 1ms since 2025-01-01T00:00:00Z"
// (time/datacenter/worker/sequence bits), with ", sequence above node" for
// OrderSequenceNode.
func (l Layout) String() string {
	n, err := l.Normalize()
	if err != nil {
		n = l
	}
	order := ""
	if n.Order == OrderSequenceNode {
		order = ", sequence above node"
	}
	return fmt.Sprintf("%d/%d/%d/%d × %v since %s%s", n.TimeBits, n.DatacenterBits, n.WorkerBits, n.SequenceBits,
		n.TimeUnit, n.Epoch.UTC().Format(time.RFC3339Nano), order)
}

// Parts are the fields of an ID.
type Parts struct {
	// Time is the start of the ID's tick: Epoch + Tick × TimeUnit, in UTC.
	Time time.Time `json:"time"`
	// Tick is the raw time field: units since the epoch.
	Tick int64 `json:"tick"`
	// Datacenter is the datacenter field.
	Datacenter int64 `json:"datacenter"`
	// Worker is the worker field.
	Worker int64 `json:"worker"`
	// Sequence is the per-tick sequence field.
	Sequence int64 `json:"sequence"`
}

// codec is a normalized layout compiled to shifts and masks.
type codec struct {
	layout                               Layout
	epochNs, unitNs                      int64
	maxTick, maxDatacenter, maxWorker    int64
	seqMask                              int64
	timeShift, datacenterShift, workerSh uint
	totalBits, sequenceBits, seqShift    uint
}

func newCodec(l Layout) (codec, error) {
	n, err := l.Normalize()
	if err != nil {
		return codec{}, err
	}
	c := codec{
		layout:          n,
		epochNs:         n.Epoch.UnixNano(),
		unitNs:          int64(n.TimeUnit),
		maxTick:         int64(1)<<n.TimeBits - 1,
		maxDatacenter:   int64(1)<<n.DatacenterBits - 1,
		maxWorker:       int64(1)<<n.WorkerBits - 1,
		seqMask:         int64(1)<<n.SequenceBits - 1,
		sequenceBits:    uint(n.SequenceBits),
		workerSh:        uint(n.SequenceBits),
		datacenterShift: uint(n.SequenceBits + n.WorkerBits),
		timeShift:       uint(n.SequenceBits + n.WorkerBits + n.DatacenterBits),
		totalBits:       uint(n.TimeBits + n.DatacenterBits + n.WorkerBits + n.SequenceBits),
	}
	if n.Order == OrderSequenceNode {
		c.workerSh, c.datacenterShift, c.seqShift = 0, uint(n.WorkerBits), uint(n.WorkerBits+n.DatacenterBits)
	}
	return c, nil
}

func (c *codec) decode(id ID) (Parts, error) {
	if id < 0 {
		return Parts{}, fmt.Errorf("%w: %d is negative (the sign bit is never set)", ErrInvalidID, int64(id))
	}
	if c.totalBits < MaxBits && uint64(id)>>c.totalBits != 0 {
		return Parts{}, fmt.Errorf("%w: %d does not fit the %d bits of layout %s", ErrInvalidID, int64(id), c.totalBits, c.layout)
	}
	v := int64(id)
	p := Parts{
		Tick:       v >> c.timeShift,
		Datacenter: v >> c.datacenterShift & c.maxDatacenter,
		Worker:     v >> c.workerSh & c.maxWorker,
		Sequence:   v >> c.seqShift & c.seqMask,
	}
	p.Time = c.tickTime(p.Tick)
	return p, nil
}

func (c *codec) tickTime(tick int64) time.Time {
	// tick × unit can exceed int64 nanoseconds for long units, so multiply
	// in 128 bits and split into seconds and nanoseconds.
	hi, lo := bits.Mul64(uint64(tick), uint64(c.unitNs))
	if hi >= 1e9 {
		return maxTime()
	}
	secs, nanos := bits.Div64(hi, lo, 1e9)
	e, limit := c.layout.Epoch, maxTime()
	if secs > uint64(limit.Unix()-e.Unix()) {
		return limit
	}
	if t := time.Unix(e.Unix()+int64(secs), int64(e.Nanosecond())+int64(nanos)).UTC(); t.Before(limit) {
		return t
	}
	return limit
}

func (c *codec) compose(p Parts) (ID, error) {
	switch {
	case p.Tick < 0 || p.Tick > c.maxTick:
		return 0, fmt.Errorf("%w: tick %d, want 0–%d", ErrTimeExhausted, p.Tick, c.maxTick)
	case p.Datacenter < 0 || p.Datacenter > c.maxDatacenter:
		return 0, fmt.Errorf("%w: datacenter %d, want 0–%d", ErrNodeOutOfRange, p.Datacenter, c.maxDatacenter)
	case p.Worker < 0 || p.Worker > c.maxWorker:
		return 0, fmt.Errorf("%w: worker %d, want 0–%d", ErrNodeOutOfRange, p.Worker, c.maxWorker)
	case p.Sequence < 0 || p.Sequence > c.seqMask:
		return 0, fmt.Errorf("%w: sequence %d, want 0–%d", ErrInvalidID, p.Sequence, c.seqMask)
	}
	return ID(p.Tick<<c.timeShift | p.Datacenter<<c.datacenterShift | p.Worker<<c.workerSh | p.Sequence<<c.seqShift), nil
}

// Decode splits id into its fields. It fails with ErrInvalidID for a negative
// ID or one with bits above the layout's width, and with ErrInvalidLayout for
// a layout that does not normalize.
func (l Layout) Decode(id ID) (Parts, error) {
	c, err := newCodec(l)
	if err != nil {
		return Parts{}, err
	}
	return c.decode(id)
}

// Compose builds the ID with the given Tick, Datacenter, Worker and Sequence
// (Parts.Time is ignored). Every field must fit its width. The tick of an
// instant t is the number of whole TimeUnits from the normalized layout's
// Epoch to t.
func (l Layout) Compose(p Parts) (ID, error) {
	c, err := newCodec(l)
	if err != nil {
		return 0, err
	}
	return c.compose(p)
}

// tickAt returns the tick of the time field that t falls in, which is
// negative before the epoch. Ticks beyond the int64 range are clamped to it.
func (l Layout) tickAt(t time.Time) (int64, error) {
	n, err := l.Normalize()
	if err != nil {
		return 0, err
	}
	// t − epoch can exceed a Duration (292 years), so count in big integers.
	ns := new(big.Int).Mul(big.NewInt(t.Unix()-n.Epoch.Unix()), big.NewInt(int64(time.Second)))
	ns.Add(ns, big.NewInt(int64(t.Nanosecond()-n.Epoch.Nanosecond())))
	tick, rem := new(big.Int).QuoRem(ns, big.NewInt(int64(n.TimeUnit)), new(big.Int))
	if rem.Sign() < 0 {
		tick.Sub(tick, big.NewInt(1)) // floor, not truncation, before the epoch
	}
	switch {
	case !tick.IsInt64() && tick.Sign() > 0:
		return math.MaxInt64, nil
	case !tick.IsInt64():
		return math.MinInt64, nil
	}
	return tick.Int64(), nil
}
