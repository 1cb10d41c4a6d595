package node

import (
	"fmt"
	"io"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"pgregory.net/rapid"

	"github.com/flakeid/flakeid/snowflake"
	"github.com/flakeid/flakeid/worker"
	"github.com/flakeid/flakeid/worker/workertest"
)

// TestNodesNeverOverlapThroughOutages is a property test of the promise
// that a lost lease's reservation still fences: nodes on one coordinator,
// with random lease timings (reservations shorter and longer than the
// TTL) and as few worker ids as nodes and one or two more, go through
// random sequences of link cuts and heals, coordinator wipes, rollbacks to
// an older copy and the passing of time, taking IDs in between. No ID is
// ever issued twice, each node's IDs keep increasing, and once every fault
// has healed every node issues again within the quarantine and a few TTLs.
//
// A rollback is followed by a probation's worth of healthy links: a
// rollback together with a partition of the holder it hides is outside the
// guarantee (docs/GUARANTEES.md, "Probation").
func TestNodesNeverOverlapThroughOutages(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		// The whole plan is drawn first: the run happens in a synctest
		// bubble (a goroutine of its own, on a fake clock), which reports
		// what went wrong instead of failing rt.
		ttl := rapid.SampledFrom([]time.Duration{time.Second, 2 * time.Second, 4 * time.Second}).Draw(rt, "ttl")
		renew := ttl / 4
		ahead := rapid.SampledFrom([]time.Duration{renew + 10*time.Millisecond, ttl / 2, ttl, 2 * ttl, 5 * ttl}).Draw(rt, "reserveAhead")
		nodes := rapid.IntRange(2, 3).Draw(rt, "nodes")
		workerBits := rapid.IntRange(1, 2).Draw(rt, "workerBits")
		if 1<<workerBits < nodes {
			workerBits = 2
		}
		type step struct {
			action string
			node   int
			n      int64 // milliseconds to sleep, IDs to take
		}
		steps := rapid.SliceOfN(rapid.Custom(func(rt *rapid.T) step {
			s := step{action: rapid.SampledFrom([]string{"sleep", "sleep", "issue", "issue", "cut", "heal", "wipe", "snapshot", "rollback"}).Draw(rt, "action")}
			switch s.action {
			case "sleep":
				s.n = rapid.Int64Range(1, int64(4*ttl/time.Millisecond)).Draw(rt, "ms")
			case "issue":
				s.node, s.n = rapid.IntRange(0, nodes-1).Draw(rt, "node"), rapid.Int64Range(1, 50).Draw(rt, "ids")
			case "cut", "heal":
				s.node = rapid.IntRange(0, nodes-1).Draw(rt, "node")
			}
			return s
		}), 1, 25).Draw(rt, "steps")
		lease := worker.Config{TTL: ttl, RenewEvery: renew, ReserveAhead: ahead, WaitForFree: true}
		if err := lease.Validate(); err != nil {
			rt.Fatalf("lease config: %v", err)
		}

		var failed string
		synctest.Test(t, func(t *testing.T) {
			fail := func(format string, args ...any) {
				if failed == "" {
					failed = fmt.Sprintf(format, args...)
				}
			}
			log := slog.New(slog.NewTextHandler(io.Discard, nil))
			m := workertest.NewMemory(nil)
			links := make([]*workertest.Memory, nodes)
			var ns []*Node
			defer func() {
				for _, n := range ns {
					n.Close()
				}
			}()
			layout := layoutOf(workerBits)
			layout.Epoch = time.Date(1990, 1, 1, 0, 0, 0, 0, time.UTC) // the bubble's clock starts in 2000
			for i := range nodes {
				links[i] = m.Client()
				lc := lease
				lc.Owner = fmt.Sprintf("n%d", i)
				n, err := Start(t.Context(), Config{Coordinator: links[i], Lease: lc, Logger: log,
					Settings: snowflake.Settings{Layout: layout, Now: time.Now}})
				if err != nil {
					fail("start node %d: %v", i, err)
					return
				}
				ns = append(ns, n)
			}

			seen := make(map[snowflake.ID]int)
			last := make([]snowflake.ID, nodes)
			take := func(i int, k int64) (ok int64) {
				for range k {
					id, err := ns[i].NextID()
					if err != nil {
						continue // no lease, or past the reservation: refusing is allowed
					}
					if by, dup := seen[id]; dup {
						fail("ID %d issued by node %d and again by node %d at %v", id, by, i, time.Now())
					}
					if id <= last[i] {
						fail("node %d issued %d after %d", i, id, last[i])
					}
					seen[id], last[i] = i, id
					ok++
				}
				return ok
			}
			cut := make([]bool, nodes)
			healthy := func() bool {
				for _, c := range cut {
					if c {
						return false
					}
				}
				return true
			}
			var restore func()
			for _, s := range steps {
				switch s.action {
				case "sleep":
					time.Sleep(time.Duration(s.n) * time.Millisecond)
				case "issue":
					take(s.node, s.n)
				case "cut":
					links[s.node].Cut()
					cut[s.node] = true
				case "heal":
					links[s.node].Heal()
					cut[s.node] = false
				case "wipe":
					m.Wipe()
				case "snapshot":
					if healthy() {
						restore = m.Snapshot()
					}
				case "rollback":
					if restore != nil && healthy() {
						restore()
						restore = nil
						// A probation's worth with every link healthy.
						time.Sleep(renew + 200*time.Millisecond)
					}
				}
				// Every node takes a few IDs after every step, so that
				// whatever it may issue at that moment is seen.
				for i := range nodes {
					take(i, 3)
				}
				if failed != "" {
					return
				}
			}
			for i := range nodes {
				links[i].Heal()
			}
			settle := ahead + time.Second + 3*ttl // the quarantine and a few TTLs
			time.Sleep(settle)
			for i := range nodes {
				if take(i, 1) != 1 {
					_, err := ns[i].NextID()
					fail("node %d issues nothing %v after every fault healed: %v (%+v)", i, settle, err, ns[i].Status())
				}
			}
		})
		if failed != "" {
			rt.Fatal(failed)
		}
	})
}
