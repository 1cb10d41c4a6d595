package snowflake_test

import (
	"fmt"
	"log"

	"github.com/flakeid/flakeid/snowflake"
)

func ExampleNew() {
	// The zero Settings is the default layout, datacenter 0, worker 0.
	// In production lease the worker id (package worker) instead.
	g, err := snowflake.New(snowflake.Settings{DatacenterID: 1, WorkerID: 7})
	if err != nil {
		log.Fatal(err)
	}
	a, _ := g.NextID()
	b, _ := g.NextID()
	p, _ := g.Layout().Decode(b)
	fmt.Println(b > a, p.Datacenter, p.Worker)
	// Output: true 1 7
}

func ExampleNew_invalid() {
	// A worker id must fit the layout's worker bits.
	_, err := snowflake.New(snowflake.Settings{WorkerID: 40})
	fmt.Println(err)
	// Output: snowflake: datacenter or worker id out of range: worker id 40, want 0–31 (5 worker bits)
}

func ExampleGenerator_NextN() {
	g, err := snowflake.New(snowflake.Settings{})
	if err != nil {
		log.Fatal(err)
	}
	// One call reserves up to a tick's worth of consecutive IDs.
	b, err := g.NextN(100)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(b.Count, b.Last()-b.First)
	// Output: 100 99
}

func ExampleGenerator_Stats() {
	g, err := snowflake.New(snowflake.Settings{Policy: snowflake.Borrow})
	if err != nil {
		log.Fatal(err)
	}
	for range 10 {
		if _, err := g.NextID(); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Println(g.Stats().Issued)
	// Output: 10
}
