package snowflake_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/flakeid/flakeid/snowflake"
)

// Capacity tells how long a layout lasts and how fast each node can issue.
func ExampleLayout_Capacity() {
	c := snowflake.DefaultLayout().Capacity()
	fmt.Println("runs until:", c.RunsUntil.Format(time.DateOnly))
	fmt.Printf("%.0f IDs/s per node, %d nodes (%d datacenters × %d workers)\n",
		c.IDsPerSecond, c.Nodes, c.Datacenters, c.WorkersPerDatacenter)
	fmt.Printf("lifetime: %.1f years\n", c.LifetimeYears)
	// Output:
	// runs until: 2094-09-07
	// 4096000 IDs/s per node, 1024 nodes (32 datacenters × 32 workers)
	// lifetime: 69.7 years
}

// The classic "game server" layout asks for more bits than an int64 has.
func ExampleLayout_Normalize() {
	l := snowflake.Layout{TimeBits: 37, WorkerBits: 20, SequenceBits: 16}
	_, err := l.Normalize()
	fmt.Println(err)
	fmt.Println(errors.Is(err, snowflake.ErrInvalidLayout))

	// Leaving TimeBits at 0 gives the time field whatever is left.
	l.TimeBits = 0
	n, err := l.Normalize()
	fmt.Println(err, n.TimeBits, n)
	// Output:
	// snowflake: invalid layout: time 37 + datacenter 0 + worker 20 + sequence 16 = 73 bits overflows the 63 bits below the sign bit by 10
	// true
	// <nil> 27 27/0/20/16 × 1ms since 2025-01-01T00:00:00Z
}

// New also checks the layout against the clock: its epoch must not be in
// the future and its time field must not have run out.
func ExampleNew_exhausted() {
	l := snowflake.Layout{TimeBits: 10, Epoch: time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)}
	_, err := snowflake.New(snowflake.Settings{Layout: l})
	fmt.Println(err)
	fmt.Println(errors.Is(err, snowflake.ErrTimeExhausted))
	// Output:
	// snowflake: time field exhausted: the 10-bit time field in units of 1ms ran out on 2020-01-01T00:00:01Z
	// true
}

func ExamplePreset() {
	for _, name := range snowflake.PresetNames() {
		l, _ := snowflake.Preset(name)
		fmt.Printf("%-13s %v, until %s\n", name, l, l.Capacity().RunsUntil.Format(time.DateOnly))
	}
	_, err := snowflake.Preset("Instagram")
	fmt.Println(err)
	// Output:
	// default       41/5/5/12 × 1ms since 2025-01-01T00:00:00Z, until 2094-09-07
	// twitter       41/5/5/12 × 1ms since 2010-11-04T01:42:54.657Z, until 2080-07-10
	// sonyflake     39/0/16/8 × 10ms since 2014-09-01T00:00:00Z, until 2188-11-16
	// jssafe        38/0/6/9 × 10ms since 2025-01-01T00:00:00Z, until 2112-02-09
	// leaf          41/0/10/12 × 1ms since 2010-11-04T01:42:54.657Z, until 2080-07-10
	// bwmarrin      41/0/10/12 × 1ms since 2010-11-04T01:42:54.657Z, until 2080-07-10
	// sonyflake-v1  39/0/16/8 × 10ms since 2014-09-01T00:00:00Z, sequence above node, until 2188-11-16
	// uid-generator 28/0/22/13 × 1s since 2016-05-20T00:00:00Z, until 2024-11-20
	// yitter        51/0/6/6 × 1ms since 2020-02-19T18:20:02Z, until 9999-12-31
	// snowflake: invalid layout: unknown preset "Instagram" (known: default, twitter, sonyflake, jssafe, leaf, bwmarrin, sonyflake-v1, uid-generator, yitter)
}

func ExampleLayout_Compose() {
	l := snowflake.DefaultLayout()
	tick := int64(time.Second / l.TimeUnit) // one second after the epoch
	id, err := l.Compose(snowflake.Parts{Tick: tick, Datacenter: 3, Worker: 7, Sequence: 42})
	fmt.Println(tick, id, err)

	_, err = l.Compose(snowflake.Parts{Tick: tick, Datacenter: 32})
	fmt.Println(err)
	// Output:
	// 1000 4194725930 <nil>
	// snowflake: datacenter or worker id out of range: datacenter 32, want 0–31
}

func ExampleLayout_Decode() {
	l := snowflake.DefaultLayout()
	p, err := l.Decode(4194725930)
	fmt.Println(p.Time.Format(time.RFC3339Nano), p.Tick, p.Datacenter, p.Worker, p.Sequence, err)

	// A layout's decoding of IDs that cannot come from it fails.
	narrow := snowflake.Layout{TimeBits: 20, WorkerBits: 4, SequenceBits: 4}
	_, err = narrow.Decode(4194725930)
	fmt.Println(err)
	// Output:
	// 2025-01-01T00:00:01Z 1000 3 7 42 <nil>
	// snowflake: invalid ID: 4194725930 does not fit the 28 bits of layout 20/0/4/4 × 1ms since 2025-01-01T00:00:00Z
}
