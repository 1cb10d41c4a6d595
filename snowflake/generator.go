package snowflake

import (
	"fmt"
	"iter"
	"math"
	"runtime"
	"sync/atomic"
	"time"
)

// Policy says what a Generator does when a tick's sequence is used up.
type Policy int

const (
	// Wait sleeps until the next tick (the default). It never holds a lock
	// while it sleeps, and only one waiting goroutine at a time spends the
	// last millisecond yielding (runtime.Gosched) instead of sleeping, so the
	// next tick is not missed to timer slack.
	Wait Policy = iota
	// Borrow moves on to the next tick at once, running ahead of the clock
	// by at most Settings.MaxBorrow, and waits like Wait beyond that. The
	// lead is reported in Stats.Lead; the ticks taken in Stats.BorrowedTicks.
	Borrow
)

// String returns "wait" or "borrow".
func (p Policy) String() string {
	switch p {
	case Wait:
		return "wait"
	case Borrow:
		return "borrow"
	}
	return fmt.Sprintf("Policy(%d)", int(p))
}

// Defaults of Settings, and the bound of Settings.MaxWait.
const (
	DefaultMaxWait   = 5 * time.Millisecond
	DefaultMaxBorrow = 100 * time.Millisecond
	// MaxMaxWait bounds Settings.MaxWait.
	MaxMaxWait = time.Minute
)

// maxMaxBorrow bounds Settings.MaxBorrow (see its doc: 1h).
const maxMaxBorrow = time.Hour

// spinWindow is how much of a wait is spent yielding rather than sleeping:
// Linux timer slack measured here is 0.2–1 ms (a sleep below 1 ms takes about
// 1 ms), so sleeping the last millisecond would miss ticks.
const spinWindow = 1500 * time.Microsecond

// Settings configure a Generator. The zero value is DefaultLayout with
// datacenter 0, worker 0, the Wait policy and the built-in clock.
type Settings struct {
	// Layout is the bit layout. Default (zero value) DefaultLayout.
	Layout Layout
	// DatacenterID is this generator's datacenter. Range 0 to
	// 2^DatacenterBits − 1. Default 0.
	DatacenterID int64
	// WorkerID is this generator's worker. Range 0 to 2^WorkerBits − 1.
	// Default 0. Two generators running with the same (datacenter, worker)
	// pair issue duplicates; lease worker ids with package worker.
	WorkerID int64
	// NotBefore is a high-water mark: no ID is issued in a tick that starts
	// before it. Give the instant after the last tick a previous holder of
	// this worker id may have used. Default (zero) none.
	NotBefore time.Time
	// MaxWait is how far the clock may be behind the last issued tick or
	// NotBefore for the generator to wait rather than fail with
	// ErrClockBehind. Range 0–1min; 0 means the default, 5ms; a negative
	// value means never wait for a clock that is behind. Waiting for the next
	// tick when a sequence is used up does not count against it.
	MaxWait time.Duration
	// Policy is what to do when a tick's sequence is used up. Default Wait.
	Policy Policy
	// MaxBorrow is how far ahead of the clock the Borrow policy may run.
	// Range one tick to 1h; 0 means the default, 100ms. Ignored with Wait.
	MaxBorrow time.Duration
	// Until is a fence: no ID is issued in a tick that starts at or after
	// it. A worker-id lease sets it to the high-water mark it has stored in
	// its coordinator and raises it with SetUntil as it renews, so nothing is
	// issued that a later holder of the worker id could issue again. Default
	// (zero) no fence.
	Until time.Time
	// Now, if set, replaces the built-in clock (Go's monotonic clock anchored
	// to the wall clock at New). It is for tests; a Now whose readings carry
	// no monotonic reading exposes its steps to the generator.
	Now func() time.Time
}

// cacheLinePad keeps the hot word on its own cache line.
type cacheLinePad [64]byte

// Generator issues IDs. It is safe for concurrent use; create it with New.
type Generator struct {
	_ cacheLinePad
	// state packs the newest issued position as
	//   tick << tickShift | start << seqBits | seq
	// where start is the sequence the tick began at (see nextStart).
	state atomic.Uint64
	_     cacheLinePad

	// Read-only after New.
	c         codec
	clk       *clock
	node      int64 // datacenter and worker fields, in place
	seqMask   uint64
	startMask uint64 // sequence starts cycle through 0..startMask
	seqBits   uint
	tickShift uint
	policy    Policy
	borrow    int64 // ticks Borrow may run ahead; 0 with Wait
	maxWait   time.Duration
	limit     atomic.Int64 // the last tick that may be issued; revoked: math.MinInt64
	nowFunc   func() time.Time

	_ cacheLinePad
	// Written on the slow path only.
	closed    atomic.Int64  // IDs issued in ticks no longer current
	issuedMax atomic.Uint64 // highest Issued reported, so Stats never falls
	waits     atomic.Uint64
	borrowed  atomic.Uint64
	spinning  atomic.Bool
}

// New validates s and returns a Generator. It fails with ErrInvalidLayout
// (including an epoch in the future), ErrTimeExhausted (the time field has
// already run out), ErrNodeOutOfRange or ErrInvalidSettings, each naming the
// offending value.
func New(s Settings) (*Generator, error) {
	c, err := newCodec(s.Layout)
	if err != nil {
		return nil, err
	}
	l := c.layout
	switch {
	case l.Order != OrderNodeSequence:
		return nil, fmt.Errorf("%w: layout %s puts the sequence above the node (Sonyflake's order): it decodes IDs, and flakeid generates with the sequence lowest", ErrInvalidLayout, l)
	case s.DatacenterID < 0 || s.DatacenterID > c.maxDatacenter:
		return nil, fmt.Errorf("%w: datacenter id %d, want 0–%d (%d datacenter bits)", ErrNodeOutOfRange, s.DatacenterID, c.maxDatacenter, l.DatacenterBits)
	case s.WorkerID < 0 || s.WorkerID > c.maxWorker:
		return nil, fmt.Errorf("%w: worker id %d, want 0–%d (%d worker bits)", ErrNodeOutOfRange, s.WorkerID, c.maxWorker, l.WorkerBits)
	case s.MaxWait > MaxMaxWait:
		return nil, fmt.Errorf("%w: max wait %v, want at most %v", ErrInvalidSettings, s.MaxWait, MaxMaxWait)
	case s.Policy != Wait && s.Policy != Borrow:
		return nil, fmt.Errorf("%w: unknown policy %d", ErrInvalidSettings, int(s.Policy))
	case s.MaxBorrow < 0 || s.MaxBorrow > maxMaxBorrow:
		return nil, fmt.Errorf("%w: max borrow %v, want %v–%v", ErrInvalidSettings, s.MaxBorrow, l.TimeUnit, maxMaxBorrow)
	}
	g := &Generator{c: c, policy: s.Policy, nowFunc: s.Now, seqBits: c.sequenceBits, seqMask: uint64(c.seqMask)}
	g.node = s.DatacenterID<<c.datacenterShift | s.WorkerID<<c.workerSh
	switch {
	case s.MaxWait == 0:
		g.maxWait = DefaultMaxWait
	case s.MaxWait > 0:
		g.maxWait = s.MaxWait
	}
	if s.Policy == Borrow {
		b := s.MaxBorrow
		if b == 0 {
			b = DefaultMaxBorrow
		}
		if g.borrow = int64(b / l.TimeUnit); g.borrow < 1 {
			return nil, fmt.Errorf("%w: max borrow %v is less than one tick (%v)", ErrInvalidSettings, b, l.TimeUnit)
		}
	}
	// The state word holds the tick, the tick's start and the sequence. The
	// start takes up to 4 bits of the 64 − TimeBits − SequenceBits spare ones
	// (always at least one: the sign bit).
	startBits := min(4, 64-uint(l.TimeBits)-uint(l.SequenceBits))
	g.startMask = min(uint64(1)<<startBits-1, g.seqMask)
	g.tickShift = startBits + g.seqBits

	g.clk = newClock(s.Now, c.epochNs, c.unitNs)
	now := g.clk.anchor
	if err := l.validateAt(now); err != nil {
		return nil, err
	}
	first := int64(1) // tick 0 is never used, so the initial state can sit below it
	if !s.NotBefore.IsZero() {
		nb, _ := l.tickAt(s.NotBefore)
		if s.NotBefore.After(c.tickTime(max(nb, 0))) {
			nb++ // the first tick that starts at or after NotBefore
		}
		if nb > c.maxTick {
			return nil, fmt.Errorf("%w: not-before %s is past the end of the time field (%s)", ErrTimeExhausted,
				s.NotBefore.UTC().Format(time.RFC3339Nano), l.Capacity().RunsUntil.Format(time.RFC3339))
		}
		first = max(first, nb)
	}
	g.limit.Store(c.maxTick)
	if !s.Until.IsZero() {
		g.SetUntil(s.Until)
	}
	// Pretend tick first−1 is full, and discount it from Issued.
	g.state.Store(uint64(first-1)<<g.tickShift | g.seqMask)
	g.closed.Store(-int64(g.seqMask + 1))
	return g, nil
}

// Layout returns the generator's layout with its defaults filled in; its
// Decode splits the generator's IDs into their parts.
func (g *Generator) Layout() Layout { return g.c.layout }

func (g *Generator) compose(state uint64) ID {
	return ID(int64(state>>g.tickShift)<<g.c.timeShift | g.node | int64(state&g.seqMask))
}

// nextStart is the sequence a new tick begins at: one past where the last
// tick ended, modulo startMask+1 (16 with room for 4 bits). A full tick ends
// at seqMask, so the next begins at 0 and loses no capacity; at low traffic
// the starts rotate, so IDs are neither all even nor skewed modulo 16.
func (g *Generator) nextStart(old uint64) uint64 { return (old&g.seqMask + 1) & g.startMask }

// advance returns the state for the first ID of tick now after state old.
func (g *Generator) advance(old uint64, now int64) uint64 {
	s := g.nextStart(old)
	return uint64(now)<<g.tickShift | s<<g.seqBits | s
}

// newTick does the bookkeeping after a CAS moved the state from old to next
// in a later tick, with the clock at tick now: it adds the IDs of old's tick
// to the closed count, counts a borrowed tick and checks the wall clock.
func (g *Generator) newTick(old, next uint64, now int64) {
	start := old >> g.seqBits & g.startMask
	g.closed.Add(int64(old&g.seqMask-start) + 1)
	if int64(next>>g.tickShift) > now {
		g.borrowed.Add(1)
	}
	g.clk.checkWall(now * g.c.unitNs)
}

// NextID returns the next ID. It fails only with ErrClockBehind (the clock is
// further behind the last issued tick or NotBefore than MaxWait),
// ErrTimeExhausted (the layout's time field has run out) or ErrFenced (the
// next tick is past Until, or the generator was revoked).
func (g *Generator) NextID() (ID, error) {
	id, _, err := g.reserve(1)
	return id, err
}

// reserve is the state machine behind NextID and NextN. It takes up to want
// (at least 1) consecutive IDs in one tick: as many as are left in the
// newest issued tick, or in the next tick the clock and policy allow. It
// returns the first ID taken and how many it took (1 to min(want,
// seqMask+1)), or fails with ErrClockBehind, ErrTimeExhausted or ErrFenced.
// It composes the ID itself so that NextID stays small enough to inline.
func (g *Generator) reserve(want uint64) (ID, uint64, error) {
	more := want - 1 // positions wanted after the first
	now := g.clk.tickOf(g.clk.ns())
	for {
		old := g.state.Load()
		last := int64(old >> g.tickShift)
		var first uint64
		switch {
		case now > last:
			if now > g.c.maxTick {
				return 0, 0, g.exhaustedErr()
			}
			first = g.advance(old, now)
		case old&g.seqMask != g.seqMask:
			first = old + 1
			if now < last { // borrowing, or the clock stepped back: look
				g.clk.checkWall(now * g.c.unitNs)
			}
		default:
			var ok bool
			var err error
			if first, ok, err = g.full(old, now); err != nil {
				return 0, 0, err
			} else if !ok {
				now = g.clk.tickOf(g.clk.ns())
				continue
			}
		}
		if int64(first>>g.tickShift) > g.limit.Load() {
			return 0, 0, g.fencedErr(int64(first >> g.tickShift))
		}
		// The last position taken: up to more past first, but not past the
		// end of first's tick. (Not min(first+more, first|seqMask): near the
		// end of a wide time field first+more can overflow.)
		end := first + min(more, g.seqMask-first&g.seqMask)
		if g.state.CompareAndSwap(old, end) {
			if first>>g.tickShift != old>>g.tickShift {
				g.newTick(old, first, now)
			}
			if g.limit.Load() == math.MinInt64 {
				// Revoked between the check above and the step: what
				// the step took is never handed out, so that Stats read
				// after Revoke bounds every ID the generator returned.
				return 0, 0, g.fencedErr(int64(first >> g.tickShift))
			}
			return g.compose(first), end - first + 1, nil
		}
	}
}

// Batch is a run of consecutive IDs from one tick: First, First+1, …,
// First+Count−1.
type Batch struct {
	First ID
	Count int
}

// Last returns the last ID of the batch.
func (b Batch) Last() ID { return b.First + ID(b.Count) - 1 }

// All yields the batch's IDs in order.
func (b Batch) All() iter.Seq[ID] {
	return func(yield func(ID) bool) {
		for i := range b.Count {
			if !yield(b.First + ID(i)) {
				return
			}
		}
	}
}

// AppendTo appends the batch's IDs to dst.
func (b Batch) AppendTo(dst []ID) []ID {
	for i := range b.Count {
		dst = append(dst, b.First+ID(i))
	}
	return dst
}

// NextN reserves up to n consecutive IDs in one step: as many as are left in
// the current tick, or in the next tick if this one is used up, so Count is
// between 1 and min(n, 2^SequenceBits). Call it again for the rest. It fails
// with ErrInvalidCount for n < 1 and otherwise as NextID.
func (g *Generator) NextN(n int) (Batch, error) {
	if n < 1 {
		return Batch{}, fmt.Errorf("%w: asked for %d IDs, want at least 1", ErrInvalidCount, n)
	}
	first, k, err := g.reserve(uint64(n))
	if err != nil {
		return Batch{}, err
	}
	return Batch{First: first, Count: int(k)}, nil
}

// full handles a state whose tick is used up while the clock is not past it.
// It returns the next state to try when Borrow may run ahead, or waits and
// returns ok=false so the caller reads the clock again, or fails when the
// clock is further behind than MaxWait.
func (g *Generator) full(old uint64, now int64) (next uint64, ok bool, err error) {
	target := int64(old>>g.tickShift) + 1
	if target > g.c.maxTick {
		return 0, false, g.exhaustedErr()
	}
	g.clk.checkWall(now * g.c.unitNs)
	if target-now <= g.borrow {
		return uint64(target) << g.tickShift, true, nil
	}
	// Wait until the clock reaches the first tick we may use.
	until := (target-g.borrow)*g.c.unitNs - g.clk.ns()
	if behind := time.Duration(until - g.c.unitNs); behind > g.maxWait {
		return 0, false, fmt.Errorf("%w: the clock is %v behind tick %d (%s), more than the %v this generator waits",
			ErrClockBehind, behind.Round(time.Microsecond), target-1,
			g.c.tickTime(target-1).Format(time.RFC3339Nano), g.maxWait)
	}
	g.waits.Add(1)
	g.sleep(time.Duration(until))
	return 0, false, nil
}

// sleep waits about d. With the built-in clock the last spinWindow of a wait
// is spent yielding by at most one goroutine at a time; the others sleep.
func (g *Generator) sleep(d time.Duration) {
	if d <= 0 {
		return
	}
	if g.nowFunc != nil {
		time.Sleep(d)
		return
	}
	if d > spinWindow {
		time.Sleep(d - spinWindow)
		return
	}
	if !g.spinning.CompareAndSwap(false, true) {
		time.Sleep(d)
		return
	}
	defer g.spinning.Store(false)
	deadline := g.clk.ns() + int64(d)
	for g.clk.ns() < deadline {
		runtime.Gosched()
	}
}

// SetUntil moves the fence: from now on no ID is issued in a tick that
// starts at or after until (see Settings.Until). A revoked generator stays
// revoked.
func (g *Generator) SetUntil(until time.Time) {
	last, _ := g.c.layout.tickAt(until) // the tick until falls in
	if !until.After(g.c.tickTime(max(last, 0))) {
		last-- // until is that tick's start, so the tick is not allowed
	}
	last = min(last, g.c.maxTick)
	for {
		cur := g.limit.Load()
		if cur == math.MinInt64 || g.limit.CompareAndSwap(cur, last) {
			return
		}
	}
}

// Revoke stops the generator for good: every later call fails with
// ErrFenced, and so does every call in flight that has not returned its
// IDs yet, so that Stats read after Revoke bounds every ID the generator
// ever returned (node.Node starts its next generator there). A worker-id
// lease revokes its generator when it is released or its clock is out of
// bounds.
func (g *Generator) Revoke() { g.limit.Store(math.MinInt64) }

// Now returns the generator's clock reading: the time its next tick is
// taken from. It never goes back when the wall clock does.
func (g *Generator) Now() time.Time {
	ns := g.clk.ns()
	return time.Unix(0, g.c.epochNs).Add(time.Duration(ns)).UTC()
}

func (g *Generator) fencedErr(tick int64) error {
	limit := g.limit.Load()
	if limit == math.MinInt64 {
		return fmt.Errorf("%w: the generator was revoked (its worker-id lease ended)", ErrFenced)
	}
	return fmt.Errorf("%w: tick %d (%s) is past the reservation, which ends with tick %d", ErrFenced,
		tick, g.c.tickTime(max(tick, 0)).Format(time.RFC3339Nano), limit)
}

func (g *Generator) exhaustedErr() error {
	return fmt.Errorf("%w: the %d-bit time field ran out on %s", ErrTimeExhausted,
		g.c.layout.TimeBits, g.c.tickTime(g.c.maxTick+1).Format(time.RFC3339))
}

// Stats is a snapshot of a Generator's counters.
type Stats struct {
	// Issued is the number of IDs issued. While other goroutines are issuing
	// it may lag by the IDs of the ticks being closed; it never decreases.
	Issued uint64 `json:"issued"`
	// Waits counts the times a call slept or yielded for the clock: a used-up
	// tick under Wait, a lead past MaxBorrow under Borrow, or a clock behind
	// NotBefore.
	Waits uint64 `json:"waits"`
	// BorrowedTicks counts the ticks the Borrow policy entered ahead of the
	// clock.
	BorrowedTicks uint64 `json:"borrowed_ticks"`
	// Lead is how far the newest issued tick is ahead of the clock now: the
	// borrowed drift (or the distance to NotBefore). Zero when not ahead.
	Lead time.Duration `json:"lead_ns"`
	// LastTick is the tick of the newest ID issued (or just below NotBefore
	// before the first ID).
	LastTick int64 `json:"last_tick"`
	// HighWater is the end of tick LastTick: a successor generator with the
	// same node ids that starts at or after it (Settings.NotBefore) cannot
	// reissue an ID of this one.
	HighWater time.Time `json:"high_water"`
	// ClockBackwards counts the times the wall clock was seen to have
	// stepped back by a tick or more since the previous check (checks run at
	// most once per millisecond, when a new tick starts). IDs do not follow it.
	ClockBackwards uint64 `json:"clock_backwards"`
	// ClockForwards counts the forward wall-clock steps of a tick or more
	// that the generator followed.
	ClockForwards uint64 `json:"clock_forwards"`
	// ClockOffset is the wall clock minus the generator's clock at the last
	// check: negative after the wall clock stepped back.
	ClockOffset time.Duration `json:"clock_offset_ns"`
	// Revoked says Revoke was called: the generator issues nothing more.
	Revoked bool `json:"revoked"`
}

// Stats returns a snapshot of the generator's counters.
func (g *Generator) Stats() Stats {
	closed := g.closed.Load()
	st := g.state.Load()
	start := st >> g.seqBits & g.startMask
	issued := uint64(max(closed+int64(st&g.seqMask-start)+1, 0))
	for {
		prev := g.issuedMax.Load()
		if issued <= prev {
			issued = prev
			break
		}
		if g.issuedMax.CompareAndSwap(prev, issued) {
			break
		}
	}
	last := int64(st >> g.tickShift)
	s := Stats{
		Issued:         issued,
		Waits:          g.waits.Load(),
		BorrowedTicks:  g.borrowed.Load(),
		LastTick:       last,
		HighWater:      g.c.tickTime(last + 1),
		ClockBackwards: g.clk.backwards.Load(),
		ClockForwards:  g.clk.forwards.Load(),
		ClockOffset:    time.Duration(g.clk.offset.Load()),
		Revoked:        g.limit.Load() == math.MinInt64,
	}
	if lead := last*g.c.unitNs - g.clk.ns(); lead > 0 && last <= math.MaxInt64/g.c.unitNs {
		s.Lead = time.Duration(lead)
	}
	return s
}
