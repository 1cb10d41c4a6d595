package snowflake_test

import (
	"math/rand/v2"
	"testing"
	"time"

	bwsnowflake "github.com/bwmarrin/snowflake"
	"github.com/sony/sonyflake"
	"github.com/yitter/idgenerator-go/idgen"

	"github.com/flakeid/flakeid/snowflake"
)

// The predecessor presets decode IDs the real systems made: bwmarrin/snowflake,
// sony/sonyflake v1 and Yitter's IdGenerator (their Go modules are the
// judges), and uid-generator by its published bit layout (it is Java). Each
// decodes every field as the system reports it, and composes the ID back.
func TestPredecessorPresets(t *testing.T) {
	layout := func(name string) snowflake.Layout {
		l, err := snowflake.Preset(name)
		if err != nil {
			t.Fatal(err)
		}
		info, err := snowflake.DescribePreset(name)
		if err != nil || !info.Predecessor || info.Source == "" {
			t.Fatalf("DescribePreset(%q) = %+v, %v", name, info, err)
		}
		return l
	}
	roundTrip := func(l snowflake.Layout, id int64) snowflake.Parts {
		t.Helper()
		p, err := l.Decode(snowflake.ID(id))
		if err != nil {
			t.Fatalf("%v: Decode(%d): %v", l, id, err)
		}
		if back, err := l.Compose(p); err != nil || int64(back) != id {
			t.Fatalf("%v: Compose(%+v) = %d, %v; want %d", l, p, back, err, id)
		}
		return p
	}

	t.Run("bwmarrin", func(t *testing.T) {
		l := layout("bwmarrin")
		for _, nodeID := range []int64{0, 1, 777, 1023} {
			node, err := bwsnowflake.NewNode(nodeID)
			if err != nil {
				t.Fatal(err)
			}
			for range 500 {
				id := node.Generate()
				p := roundTrip(l, id.Int64())
				if p.Worker != id.Node() || p.Sequence != id.Step() || p.Time.UnixMilli() != id.Time() || p.Datacenter != 0 {
					t.Fatalf("bwmarrin ID %d (node %d, step %d, time %d) decodes to %+v", id, id.Node(), id.Step(), id.Time(), p)
				}
			}
		}
	})

	t.Run("sonyflake-v1", func(t *testing.T) {
		l := layout("sonyflake-v1")
		if _, err := snowflake.New(snowflake.Settings{Layout: l}); err == nil {
			t.Fatal("New accepted Sonyflake's field order")
		}
		for _, machine := range []uint16{0, 1, 0xBEEF, 0xFFFF} {
			sf, err := sonyflake.New(sonyflake.Settings{MachineID: func() (uint16, error) { return machine, nil }})
			if err != nil {
				t.Fatal(err)
			}
			for range 300 {
				id, err := sf.NextID()
				if err != nil {
					t.Fatal(err)
				}
				want := sonyflake.Decompose(id)
				p := roundTrip(l, int64(id))
				if uint64(p.Tick) != want["time"] || uint64(p.Sequence) != want["sequence"] || uint64(p.Worker) != want["machine-id"] {
					t.Fatalf("Sonyflake ID %d (%v) decodes to %+v", id, want, p)
				}
				if d := time.Since(p.Time); d < -time.Second || d > time.Minute {
					t.Fatalf("Sonyflake ID %d decodes to the time %v", id, p.Time)
				}
			}
		}
	})

	t.Run("yitter", func(t *testing.T) {
		l := layout("yitter")
		for _, worker := range []uint16{1, 42, 63} {
			gen := idgen.NewDefaultIdGenerator(idgen.NewIdGeneratorOptions(worker))
			for range 300 {
				id := gen.NewLong()
				p := roundTrip(l, id)
				if p.Worker != int64(worker) || !p.Time.Equal(gen.ExtractTime(id).UTC()) {
					t.Fatalf("Yitter ID %d (worker %d, time %v) decodes to %+v", id, worker, gen.ExtractTime(id), p)
				}
			}
		}
	})

	t.Run("uid-generator", func(t *testing.T) {
		l := layout("uid-generator")
		epoch := time.Date(2016, 5, 20, 0, 0, 0, 0, time.UTC)
		if got := l.Capacity().RunsUntil; got.Format(time.DateOnly) != "2024-11-20" {
			t.Fatalf("uid-generator runs until %v, want 2024-11-20 (uid-generator#100)", got)
		}
		// DefaultUidGenerator: sign 1 | deltaSeconds 28 | workerId 22 | sequence 13.
		for range 1000 {
			delta, worker, seq := rand.Int64N(1<<28), rand.Int64N(1<<22), rand.Int64N(1<<13)
			id := delta<<35 | worker<<13 | seq
			p := roundTrip(l, id)
			if p.Tick != delta || p.Worker != worker || p.Sequence != seq || !p.Time.Equal(epoch.Add(time.Duration(delta)*time.Second)) {
				t.Fatalf("uid-generator ID %d (seconds %d, worker %d, sequence %d) decodes to %+v", id, delta, worker, seq, p)
			}
		}
	})
}
