package snowflake

import (
	"errors"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// TestGeneratorStateMachine drives one generator with random calls, sleeps
// and clock steps and checks after every step that IDs only grow, that Issued
// counts exactly what was handed out, and that an error is only
// ErrClockBehind for a clock that is really behind. Each case runs in its own
// synctest bubble, so time passes only when the test or the generator sleeps;
// the generator's clock is the bubble's plus the steps (a shiftClock).
func TestGeneratorStateMachine(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) { rapid.SyncTest(rt, stateMachine) })
}

func stateMachine(rt *rapid.T) {
	clk := &shiftClock{}
	policy := rapid.SampledFrom([]Policy{Wait, Borrow}).Draw(rt, "policy")
	layout := Layout{TimeBits: 41, WorkerBits: 3, SequenceBits: rapid.IntRange(0, 5).Draw(rt, "seqBits"), Epoch: bubbleEpoch}
	worker := rapid.Int64Range(0, 7).Draw(rt, "worker")
	maxWait := 5 * time.Millisecond
	g, err := New(Settings{Layout: layout, WorkerID: worker, Now: clk.Now, Policy: policy, MaxBorrow: 3 * time.Millisecond, MaxWait: maxWait})
	if err != nil {
		rt.Fatal(err)
	}
	var last ID = -1
	var issued uint64
	check := func(id ID) {
		if id <= last {
			rt.Fatalf("ID %d after %d", id, last)
		}
		p, err := g.Layout().Decode(id)
		if err != nil || p.Worker != worker {
			rt.Fatalf("Decode(%d) = %+v, %v; want worker %d", id, p, err, worker)
		}
		last = id
	}
	behind := func(err error) {
		if !errors.Is(err, ErrClockBehind) {
			rt.Fatalf("unexpected error %v", err)
		}
		p, _ := g.Layout().Decode(last)
		if lag := p.Time.Sub(clk.Now()); lag < maxWait {
			rt.Fatalf("ErrClockBehind with the clock only %v behind the last ID", lag)
		}
	}
	rt.Repeat(map[string]func(*rapid.T){
		"next": func(rt *rapid.T) {
			id, err := g.NextID()
			if err != nil {
				behind(err)
				return
			}
			check(id)
			issued++
		},
		"nextN": func(rt *rapid.T) {
			n := rapid.IntRange(1, 40).Draw(rt, "n")
			b, err := g.NextN(n)
			if err != nil {
				behind(err)
				return
			}
			if b.Count < 1 || b.Count > n || b.Count > 1<<layout.SequenceBits {
				rt.Fatalf("NextN(%d) gave %d IDs", n, b.Count)
			}
			for id := range b.All() {
				check(id)
			}
			issued += uint64(b.Count)
		},
		"sleep": func(rt *rapid.T) {
			time.Sleep(max(time.Duration(rapid.IntRange(0, 3000).Draw(rt, "µs"))*time.Microsecond, 1))
		},
		"step": func(rt *rapid.T) {
			clk.shift(time.Duration(rapid.IntRange(-20, 20).Draw(rt, "ms")) * time.Millisecond)
		},
		"": func(rt *rapid.T) {
			if got := g.Stats().Issued; got != issued {
				rt.Fatalf("Stats().Issued = %d, want %d", got, issued)
			}
		},
	})
}
