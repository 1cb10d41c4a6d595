package snowflake

import (
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// bubbleEpoch is an epoch before synctest's fake clock, which starts at
// 2000-01-01T00:00:00Z.
var bubbleEpoch = time.Date(1999, 1, 1, 0, 0, 0, 0, time.UTC)

func bubbleLayout() Layout {
	l := DefaultLayout()
	l.Epoch = bubbleEpoch
	return l
}

// shiftClock is a clock for tests: time.Now (fake inside a synctest bubble)
// plus an offset the test moves to simulate wall-clock steps. Its readings
// keep no monotonic part, so the generator sees the steps.
type shiftClock struct{ offset atomic.Int64 }

func (c *shiftClock) Now() time.Time {
	return time.Now().Round(0).Add(time.Duration(c.offset.Load()))
}
func (c *shiftClock) shift(d time.Duration) { c.offset.Add(int64(d)) }

func mustNew(t testing.TB, s Settings) *Generator {
	t.Helper()
	g, err := New(s)
	if err != nil {
		t.Fatalf("New(%+v): %v", s, err)
	}
	return g
}

func mustNext(t testing.TB, g *Generator) ID {
	t.Helper()
	id, err := g.NextID()
	if err != nil {
		t.Fatalf("NextID: %v", err)
	}
	return id
}

func TestNewValidation(t *testing.T) {
	now := time.Now()
	tests := []struct {
		name string
		s    Settings
		want error
		msg  string
	}{
		{"game server layout", Settings{Layout: Layout{TimeBits: 37, WorkerBits: 20, SequenceBits: 16}}, ErrInvalidLayout, "73 bits"},
		{"worker too large", Settings{WorkerID: 32}, ErrNodeOutOfRange, "worker id 32, want 0–31"},
		{"negative worker", Settings{WorkerID: -1}, ErrNodeOutOfRange, "worker id -1"},
		{"datacenter too large", Settings{DatacenterID: 32}, ErrNodeOutOfRange, "datacenter id 32"},
		{"worker with no worker bits", Settings{Layout: Layout{SequenceBits: 12}, WorkerID: 1}, ErrNodeOutOfRange, "0 worker bits"},
		{"epoch in the future", Settings{Layout: Layout{TimeBits: 41, SequenceBits: 12, Epoch: now.Add(time.Hour)}}, ErrInvalidLayout, "future"},
		{"time field ran out", Settings{Layout: Layout{TimeBits: 20, SequenceBits: 12, Epoch: time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)}}, ErrTimeExhausted, "ran out on 2020-01-01"},
		{"max wait too long", Settings{MaxWait: 2 * time.Minute}, ErrInvalidSettings, "max wait 2m0s"},
		{"unknown policy", Settings{Policy: Policy(7)}, ErrInvalidSettings, "unknown policy 7"},
		{"borrow below one tick", Settings{Policy: Borrow, MaxBorrow: time.Microsecond}, ErrInvalidSettings, "less than one tick"},
		{"negative borrow", Settings{Policy: Borrow, MaxBorrow: -time.Second}, ErrInvalidSettings, "max borrow -1s"},
		{"not before past the end", Settings{NotBefore: time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC)}, ErrTimeExhausted, "past the end"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g, err := New(tc.s)
			if !errors.Is(err, tc.want) {
				t.Fatalf("New: err = %v, want %v", err, tc.want)
			}
			if g != nil {
				t.Fatal("New returned a generator with an error")
			}
			if !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("error %q does not mention %q", err, tc.msg)
			}
		})
	}
	for _, s := range []Settings{{}, {WorkerID: 31, DatacenterID: 31}, {Policy: Borrow}, {MaxWait: -1}, {Layout: jsSafeLayout(), WorkerID: 63}} {
		if _, err := New(s); err != nil {
			t.Errorf("New(%+v): %v", s, err)
		}
	}
}

func TestIDsCarryNodeAndTime(t *testing.T) {
	before := time.Now()
	g := mustNew(t, Settings{DatacenterID: 3, WorkerID: 17})
	id := mustNext(t, g)
	after := time.Now()
	p, err := g.Layout().Decode(id)
	if err != nil {
		t.Fatal(err)
	}
	if p.Datacenter != 3 || p.Worker != 17 {
		t.Fatalf("decoded node %d/%d, want 3/17", p.Datacenter, p.Worker)
	}
	if p.Time.Before(before.Truncate(time.Millisecond)) || p.Time.After(after) {
		t.Fatalf("decoded time %v outside [%v, %v]", p.Time, before, after)
	}
	if g.Layout() != DefaultLayout() {
		t.Fatalf("Layout() = %v", g.Layout())
	}
}

// TestConcurrentUnique issues millions of IDs from many goroutines through
// NextID and NextN and checks that each goroutine saw increasing IDs and that
// no ID was issued twice.
func TestConcurrentUnique(t *testing.T) {
	const goroutines = 64
	total := 2_000_000
	if testing.Short() {
		total = 200_000
	}
	for _, layout := range []Layout{DefaultLayout(), {TimeBits: 41, SequenceBits: 22}} {
		t.Run(layout.String(), func(t *testing.T) {
			g := mustNew(t, Settings{Layout: layout})
			per := total / goroutines
			out := make([][]ID, goroutines)
			var wg sync.WaitGroup
			for w := range goroutines {
				wg.Go(func() {
					ids := make([]ID, 0, per)
					for len(ids) < per {
						if w%4 == 0 { // a quarter of the goroutines take batches
							b, err := g.NextN(min(per-len(ids), 100))
							if err != nil {
								t.Error(err)
								return
							}
							ids = b.AppendTo(ids)
							continue
						}
						id, err := g.NextID()
						if err != nil {
							t.Error(err)
							return
						}
						ids = append(ids, id)
					}
					out[w] = ids
				})
			}
			wg.Wait()
			all := make([]ID, 0, per*goroutines)
			for w, ids := range out {
				if !slices.IsSorted(ids) {
					t.Fatalf("goroutine %d saw IDs out of order", w)
				}
				all = append(all, ids...)
			}
			slices.Sort(all)
			for i := 1; i < len(all); i++ {
				if all[i] == all[i-1] {
					t.Fatalf("duplicate ID %d", all[i])
				}
			}
			if got := g.Stats().Issued; got != uint64(len(all)) {
				t.Fatalf("Stats().Issued = %d, want %d", got, len(all))
			}
		})
	}
}

// TestWaitPolicyFillsEachTick: under Wait, a burst fills each tick to the
// last sequence and then sleeps until the next tick, which starts again at 0.
func TestWaitPolicyFillsEachTick(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := mustNew(t, Settings{Layout: bubbleLayout(), Now: time.Now})
		perTick := map[int64]int{}
		var prev ID
		for i := range 3 * 4096 {
			id := mustNext(t, g)
			if i > 0 && id <= prev {
				t.Fatalf("ID %d after %d", id, prev)
			}
			prev = id
			p, _ := g.Layout().Decode(id)
			perTick[p.Tick]++
		}
		if len(perTick) != 3 {
			t.Fatalf("IDs spread over %d ticks, want 3: %v", len(perTick), perTick)
		}
		for tick, n := range perTick {
			if n != 4096 {
				t.Fatalf("tick %d has %d IDs, want 4096", tick, n)
			}
		}
		st := g.Stats()
		if st.Waits < 2 || st.BorrowedTicks != 0 || st.Issued != 3*4096 {
			t.Fatalf("stats %+v: want ≥2 waits, 0 borrowed, 12288 issued", st)
		}
	})
}

// TestBorrowPolicy: Borrow runs ahead of the clock by at most MaxBorrow, shows
// the lead in Stats, and then waits.
func TestBorrowPolicy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		g := mustNew(t, Settings{Layout: bubbleLayout(), Now: time.Now, Policy: Borrow, MaxBorrow: 3 * time.Millisecond})
		for range 4 * 4096 { // the current tick and three borrowed ones
			mustNext(t, g)
		}
		st := g.Stats()
		if time.Since(start) != 0 {
			t.Fatalf("borrowing waited %v", time.Since(start))
		}
		if st.BorrowedTicks != 3 || st.Waits != 0 {
			t.Fatalf("stats %+v: want 3 borrowed ticks, no waits", st)
		}
		if st.Lead <= 2*time.Millisecond || st.Lead > 3*time.Millisecond {
			t.Fatalf("lead %v, want (2ms, 3ms]", st.Lead)
		}
		id := mustNext(t, g) // the fifth tick is past MaxBorrow: wait
		if g.Stats().Waits == 0 || time.Since(start) == 0 {
			t.Fatal("the fifth tick did not wait")
		}
		p, _ := g.Layout().Decode(id)
		if lead := time.Until(p.Time); lead > 3*time.Millisecond {
			t.Fatalf("ID is %v ahead of the clock, more than MaxBorrow", lead)
		}
	})
}

// TestClockBackwards: a clock that steps back does not move IDs back; the
// generator keeps issuing in its newest tick, refuses with ErrClockBehind
// once that tick is full and the clock is further behind than MaxWait, and
// resumes when the clock catches up.
func TestClockBackwards(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var clk shiftClock
		g := mustNew(t, Settings{Layout: bubbleLayout(), Now: clk.Now})
		time.Sleep(10 * time.Millisecond)
		before := mustNext(t, g)
		clk.shift(-5 * time.Second)
		var last ID = before
		var err error
		for range 5000 {
			var id ID
			if id, err = g.NextID(); err != nil {
				break
			}
			if id <= last {
				t.Fatalf("ID %d after %d: went backwards with the clock", id, last)
			}
			last = id
		}
		if !errors.Is(err, ErrClockBehind) {
			t.Fatalf("after the tick filled: err = %v, want ErrClockBehind", err)
		}
		if !strings.Contains(err.Error(), "behind tick") {
			t.Fatalf("error %q does not say how far behind", err)
		}
		if g.Stats().ClockBackwards == 0 {
			t.Fatal("Stats().ClockBackwards = 0 after a 5 s step back")
		}
		time.Sleep(5 * time.Second) // the clock catches up
		id := mustNext(t, g)
		if id <= last {
			t.Fatalf("after recovery ID %d ≤ %d", id, last)
		}
	})
}

// TestClockBackwardsSmallWaits: a step back shorter than MaxWait is waited out.
func TestClockBackwardsSmallWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var clk shiftClock
		g := mustNew(t, Settings{Layout: bubbleLayout(), Now: clk.Now, MaxWait: 5 * time.Millisecond})
		time.Sleep(10 * time.Millisecond)
		first := mustNext(t, g)
		clk.shift(-3 * time.Millisecond)
		for range 5000 { // more than a tick's worth: the generator must wait
			id := mustNext(t, g)
			if id <= first {
				t.Fatalf("ID %d ≤ %d", id, first)
			}
			first = id
		}
		if g.Stats().Waits == 0 {
			t.Fatal("no wait recorded")
		}
	})
}

// TestClockForwards: a forward step is followed at once.
func TestClockForwards(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var clk shiftClock
		g := mustNew(t, Settings{Layout: bubbleLayout(), Now: clk.Now})
		time.Sleep(time.Millisecond)
		a, _ := g.Layout().Decode(mustNext(t, g))
		clk.shift(10 * time.Second)
		b, _ := g.Layout().Decode(mustNext(t, g))
		if d := b.Time.Sub(a.Time); d < 10*time.Second || d > 10*time.Second+time.Millisecond {
			t.Fatalf("after a 10 s step IDs moved %v", d)
		}
	})
}

// TestNotBefore: a high-water mark a little ahead is waited for, one further
// ahead than MaxWait is refused until the clock passes it.
func TestNotBefore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		nb := start.Add(3 * time.Millisecond)
		g := mustNew(t, Settings{Layout: bubbleLayout(), Now: time.Now, NotBefore: nb})
		id := mustNext(t, g)
		p, _ := g.Layout().Decode(id)
		if p.Time.Before(nb) {
			t.Fatalf("ID time %v before NotBefore %v", p.Time, nb)
		}
		if time.Since(start) < 3*time.Millisecond || g.Stats().Waits == 0 {
			t.Fatalf("did not wait for NotBefore (waited %v)", time.Since(start))
		}
	})
	synctest.Test(t, func(t *testing.T) {
		nb := time.Now().Add(2 * time.Second)
		g := mustNew(t, Settings{Layout: bubbleLayout(), Now: time.Now, NotBefore: nb})
		if st := g.Stats(); st.Lead < time.Second {
			t.Fatalf("Lead %v before the first ID, want ~2s", st.Lead)
		}
		_, err := g.NextID()
		if !errors.Is(err, ErrClockBehind) {
			t.Fatalf("err = %v, want ErrClockBehind", err)
		}
		if _, err := g.NextN(10); !errors.Is(err, ErrClockBehind) {
			t.Fatalf("NextN err = %v, want ErrClockBehind", err)
		}
		time.Sleep(2 * time.Second)
		p, _ := g.Layout().Decode(mustNext(t, g))
		if p.Time.Before(nb) {
			t.Fatalf("ID time %v before NotBefore %v", p.Time, nb)
		}
	})
	// A NotBefore inside a tick skips that tick: the previous holder may
	// have used it.
	synctest.Test(t, func(t *testing.T) {
		time.Sleep(5 * time.Millisecond)
		nb := time.Now().Add(-1500 * time.Microsecond)
		g := mustNew(t, Settings{Layout: bubbleLayout(), Now: time.Now, NotBefore: nb})
		p, _ := g.Layout().Decode(mustNext(t, g))
		if p.Time.Before(nb) {
			t.Fatalf("ID tick starts %v, before NotBefore %v", p.Time, nb)
		}
	})
}

func TestTimeExhausted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// A 10-bit millisecond field whose last tick is 2 ms away.
		epoch := time.Now().Add(-1022 * time.Millisecond)
		g := mustNew(t, Settings{Layout: Layout{TimeBits: 10, SequenceBits: 12, Epoch: epoch}, Now: time.Now})
		mustNext(t, g)
		time.Sleep(3 * time.Millisecond)
		if _, err := g.NextID(); !errors.Is(err, ErrTimeExhausted) {
			t.Fatalf("NextID err = %v, want ErrTimeExhausted", err)
		}
		if _, err := g.NextN(3); !errors.Is(err, ErrTimeExhausted) {
			t.Fatalf("NextN err = %v, want ErrTimeExhausted", err)
		}
	})
}

// TestLowTrafficParity: at one ID per millisecond IDs are not all even and
// id%16 is uniform, while a burst that follows still gets every tick's full
// capacity after the first.
func TestLowTrafficParity(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := mustNew(t, Settings{Layout: bubbleLayout(), Now: time.Now})
		var buckets [16]int
		const n = 1600
		for range n {
			time.Sleep(time.Millisecond)
			buckets[mustNext(t, g)%16]++
		}
		for r, c := range buckets {
			if c != n/16 {
				t.Fatalf("id%%16 == %d for %d of %d IDs, want %d: %v", r, c, n, n/16, buckets)
			}
		}
		// The burst: no tick after the first loses capacity.
		time.Sleep(time.Millisecond)
		perTick := map[int64]int{}
		for range 4 * 4096 {
			p, _ := g.Layout().Decode(mustNext(t, g))
			perTick[p.Tick]++
		}
		ticks := slices.Sorted(func(yield func(int64) bool) {
			for k := range perTick {
				if !yield(k) {
					return
				}
			}
		})
		if first := perTick[ticks[0]]; first < 4096-15 {
			t.Fatalf("first burst tick has %d IDs, want ≥ %d", first, 4096-15)
		}
		for _, tick := range ticks[1 : len(ticks)-1] {
			if perTick[tick] != 4096 {
				t.Fatalf("burst tick %d has %d IDs, want 4096", tick, perTick[tick])
			}
		}
	})
}

func TestNextN(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := mustNew(t, Settings{Layout: bubbleLayout(), Now: time.Now})
		if _, err := g.NextN(0); !errors.Is(err, ErrInvalidCount) {
			t.Fatalf("NextN(0) err = %v", err)
		}
		if _, err := g.NextN(-5); !errors.Is(err, ErrInvalidCount) {
			t.Fatalf("NextN(-5) err = %v", err)
		}
		b, err := g.NextN(10_000)
		if err != nil {
			t.Fatal(err)
		}
		if b.Count != 4096 { // a fresh tick starts at sequence 0
			t.Fatalf("first batch has %d IDs, want a whole tick (4096)", b.Count)
		}
		ids := slices.Collect(b.All())
		if len(ids) != b.Count || ids[0] != b.First || ids[len(ids)-1] != b.Last() {
			t.Fatalf("All() = %d IDs from %d, batch %+v", len(ids), ids[0], b)
		}
		first, _ := g.Layout().Decode(b.First)
		last, _ := g.Layout().Decode(b.Last())
		if first.Tick != last.Tick || first.Sequence != 0 || last.Sequence != 4095 {
			t.Fatalf("batch spans %+v to %+v", first, last)
		}
		next := mustNext(t, g)
		if next <= b.Last() {
			t.Fatalf("NextID %d after batch ending %d", next, b.Last())
		}
		small, err := g.NextN(3)
		if err != nil || small.Count != 3 || small.First != next+1 {
			t.Fatalf("NextN(3) = %+v, %v; want 3 IDs from %d", small, err, next+1)
		}
		if got := g.Stats().Issued; got != 4096+1+3 {
			t.Fatalf("Issued = %d, want 4100", got)
		}
	})
}

func TestStatsNeverDecrease(t *testing.T) {
	g := mustNew(t, Settings{})
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
					if _, err := g.NextID(); err != nil {
						t.Error(err)
						return
					}
				}
			}
		})
	}
	var prev uint64
	for range 2000 {
		if n := g.Stats().Issued; n < prev {
			t.Fatalf("Issued fell from %d to %d", prev, n)
		} else {
			prev = n
		}
	}
	close(stop)
	wg.Wait()
	if got, want := g.Stats().Issued, prev; got < want {
		t.Fatalf("final Issued %d < %d", got, want)
	}
}

func TestPolicyString(t *testing.T) {
	for p, want := range map[Policy]string{Wait: "wait", Borrow: "borrow", Policy(9): "Policy(9)"} {
		if got := p.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", int(p), got, want)
		}
	}
}

// TestFence: no ID in a tick at or past Until; SetUntil moves the fence;
// Revoke stops the generator at once, even inside a tick.
func TestFence(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		time.Sleep(time.Millisecond)
		until := time.Now().Add(2 * time.Millisecond) // a tick boundary
		g := mustNew(t, Settings{Layout: bubbleLayout(), Now: time.Now, Until: until})
		for range 2 {
			p, _ := g.Layout().Decode(mustNext(t, g))
			if !p.Time.Before(until) {
				t.Fatalf("ID in tick starting %v, at or past Until %v", p.Time, until)
			}
			time.Sleep(time.Millisecond)
		}
		if _, err := g.NextID(); !errors.Is(err, ErrFenced) || !strings.Contains(err.Error(), "past the reservation") {
			t.Fatalf("at Until: err = %v, want ErrFenced past the reservation", err)
		}
		if _, err := g.NextN(5); !errors.Is(err, ErrFenced) {
			t.Fatalf("NextN at Until: err = %v, want ErrFenced", err)
		}
		g.SetUntil(time.Now().Add(time.Second))
		before := mustNext(t, g)
		if g.Stats().Revoked {
			t.Fatal("Stats.Revoked before Revoke")
		}
		g.Revoke()
		if !g.Stats().Revoked {
			t.Fatal("Stats.Revoked false after Revoke")
		}
		if _, err := g.NextID(); !errors.Is(err, ErrFenced) || !strings.Contains(err.Error(), "revoked") {
			t.Fatalf("after Revoke in the same tick: err = %v, want ErrFenced (revoked)", err)
		}
		g.SetUntil(time.Now().Add(time.Hour)) // a revoked generator stays revoked
		if id, err := g.NextID(); err == nil {
			t.Fatalf("revoked generator issued %d (after %d)", id, before)
		}
		if now := g.Now(); time.Until(now).Abs() > time.Millisecond {
			t.Fatalf("Now() = %v, clock %v", now, time.Now())
		}
	})
}
