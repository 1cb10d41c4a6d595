package node

import (
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"pgregory.net/rapid"

	"github.com/flakeid/flakeid/snowflake"
	"github.com/flakeid/flakeid/worker"
	"github.com/flakeid/flakeid/worker/workertest"
)

// layoutGen draws a layout: a preset, or random widths, epoch and time unit.
func layoutGen() *rapid.Generator[snowflake.Layout] {
	return rapid.Custom(func(t *rapid.T) snowflake.Layout {
		if rapid.Bool().Draw(t, "preset") {
			l, err := snowflake.Preset(rapid.SampledFrom([]string{"default", "twitter", "sonyflake", "jssafe"}).Draw(t, "name"))
			if err != nil {
				t.Fatal(err)
			}
			return l
		}
		dc := rapid.IntRange(0, 4).Draw(t, "datacenter bits")
		w := rapid.IntRange(1, 4).Draw(t, "worker bits")
		seq := rapid.IntRange(2, 12).Draw(t, "sequence bits")
		epochs := []time.Time{
			time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC),
			time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC),
			time.Date(2010, 11, 4, 1, 42, 54, 657_000_000, time.UTC),
		}
		return snowflake.Layout{
			TimeBits: 41, DatacenterBits: dc, WorkerBits: w, SequenceBits: seq,
			Epoch:    rapid.SampledFrom(epochs).Draw(t, "epoch"),
			TimeUnit: rapid.SampledFrom([]time.Duration{time.Millisecond, 10 * time.Millisecond}).Draw(t, "unit"),
		}
	})
}

// TestAdmittedNodesNeverOverlap is the property behind worker.Admit: on one
// coordinator, nodes of random layouts, datacenter ids and namespaces,
// started in random order, are either refused — leaving the coordinator as
// it was — or admitted, and every pair of admitted nodes issues disjoint
// IDs: checked on the IDs they issue, and on why (one layout, and another
// datacenter or worker id).
func TestAdmittedNodesNeverOverlap(t *testing.T) {
	wallNow := time.Now()
	rapid.Check(t, func(rt *rapid.T) {
		layouts := rapid.SliceOfN(layoutGen(), 1, 3).Draw(rt, "layouts")
		type plan struct {
			layout int
			dc     int64
			ns     string
		}
		plans := rapid.SliceOfN(rapid.Custom(func(t *rapid.T) plan {
			i := rapid.IntRange(0, len(layouts)-1).Draw(t, "layout")
			l, _ := layouts[i].Normalize()
			return plan{
				layout: i,
				dc:     rapid.Int64Range(0, min(int64(1)<<l.DatacenterBits-1, 3)).Draw(t, "datacenter"),
				ns:     rapid.SampledFrom([]string{"a", "b"}).Draw(t, "namespace"),
			}
		}), 2, 6).Draw(rt, "nodes")
		// A failure inside the bubble is kept and reported by rapid outside
		// it, where rapid can shrink it.
		var failure string
		fail := func(format string, args ...any) {
			if failure == "" {
				failure = fmt.Sprintf(format, args...)
			}
		}
		synctest.Test(t, func(t *testing.T) {
			// The bubble's clock starts in 2000: move it to now, past
			// every epoch drawn.
			offset := time.Until(wallNow)
			now := func() time.Time { return time.Now().Add(offset) }
			coord := workertest.NewMemory(now)
			type admitted struct {
				plan
				n *Node
			}
			var up []admitted
			defer func() {
				for _, a := range up {
					a.n.Close()
				}
			}()
			for i, p := range plans {
				cfg := Config{
					Coordinator: coord.InNamespace(p.ns),
					Lease: worker.Config{TTL: 3 * time.Second, RenewEvery: 100 * time.Millisecond,
						ReserveAhead: 300 * time.Millisecond, SafetyMargin: 500 * time.Millisecond, RetryEvery: 50 * time.Millisecond},
					Settings: snowflake.Settings{Layout: layouts[p.layout], DatacenterID: p.dc, Now: now},
					Logger:   quiet(t),
				}
				before := coord.Dump()
				n, err := Start(t.Context(), cfg)
				if err != nil {
					if failure != "" {
						return
					}
					if !errors.Is(err, worker.ErrContract) && !errors.Is(err, worker.ErrExhausted) {
						fail("node %d (%+v): %v, want admitted, or refused with ErrContract or ErrExhausted", i, p, err)
						return
					}
					if after := coord.Dump(); after != before {
						fail("node %d (%+v) was refused (%v) but changed the coordinator:\n%s\nwas\n%s", i, p, err, after, before)
						return
					}
					continue
				}
				up = append(up, admitted{p, n})
			}
			// Why they cannot overlap: one layout, and distinct
			// (datacenter, worker) pairs.
			for i, a := range up {
				for _, b := range up[:i] {
					la, lb := layouts[a.layout].String(), layouts[b.layout].String()
					if la != lb {
						fail("admitted side by side: layout %s (namespace %s, datacenter %d) and %s (namespace %s, datacenter %d)",
							la, a.ns, a.dc, lb, b.ns, b.dc)
						return
					}
					sa, sb := a.n.Status(), b.n.Status()
					if sa.DatacenterID == sb.DatacenterID && sa.WorkerID == sb.WorkerID {
						fail("two admitted nodes on datacenter %d worker %d", sa.DatacenterID, sa.WorkerID)
						return
					}
				}
			}
			// And on the IDs themselves, once the quarantine has passed.
			time.Sleep(2 * time.Second)
			seen := map[snowflake.ID]int{}
			for i, a := range up {
				for range 3 {
					b, err := a.n.NextN(500)
					if err != nil {
						fail("node %d: NextN: %v", i, err)
						return
					}
					for id := range b.All() {
						if j, dup := seen[id]; dup && j != i {
							fail("ID %d issued by node %d (%+v) and node %d (%+v)", id, j, up[j].plan, i, a.plan)
							return
						}
						seen[id] = i
					}
					time.Sleep(time.Millisecond)
				}
			}
		})
		if failure != "" {
			rt.Fatal(failure)
		}
	})
}
