package zk_test

import (
	"context"
	"fmt"
	"log"
	"net/url"
	"time"

	"github.com/flakeid/flakeid/backend/zk"
	"github.com/flakeid/flakeid/snowflake"
	"github.com/flakeid/flakeid/worker"
)

// Every node of a cluster opens the same ZooKeeper ensemble with the same
// path, and leases its worker id through it.
func ExampleOpenWorkers() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	u, err := url.Parse("zk://10.0.0.1:2181,10.0.0.2:2181,10.0.0.3:2181/flakeid/workers")
	if err != nil {
		log.Fatal(err)
	}
	coord, err := zk.OpenWorkers(ctx, u)
	if err != nil {
		log.Fatal(err) // wraps worker.ErrUnavailable when ZooKeeper does not answer
	}
	defer coord.Close()

	// The TTL is the claim's ZooKeeper session timeout: it must lie within
	// the servers' [minSessionTimeout, maxSessionTimeout].
	leaser, err := worker.NewLeaser(coord, worker.Config{Datacenter: 1, Workers: 32, TTL: 10 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	lease, err := leaser.Acquire(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer lease.Close()
	fmt.Println("worker id", lease.WorkerID(), "issue from", lease.NotBefore())
}

// Taking over the worker ids of a Meituan Leaf cluster (snowflake mode,
// leaf.name=myapp) registered on the same ZooKeeper: the Leaf layout,
// datacenter 0, and Leaf's 1024 worker ids. Live Leaf servers keep theirs;
// a dead one's id is taken above its last timestamp, and its node fenced.
func ExampleWithLeaf() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	u, _ := url.Parse("zk://10.0.0.1:2181,10.0.0.2:2181/flakeid/workers?leaf=/snowflake/myapp&leaf_margin=5s")
	coord, err := zk.OpenWorkers(ctx, u) // leaf=… is the same as the option zk.WithLeaf(zk.LeafConfig{Path: "/snowflake/myapp", Margin: 5 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	defer coord.Close()
	leaf, err := snowflake.Preset("leaf")
	if err != nil {
		log.Fatal(err)
	}
	leaser, err := worker.NewLeaser(coord, worker.Config{Workers: zk.MaxLeafWorkers, Contract: leaf.String()})
	if err != nil {
		log.Fatal(err)
	}
	lease, err := leaser.Acquire(ctx)
	if err != nil {
		log.Fatal(err) // ErrExhausted while every Leaf server is alive
	}
	defer lease.Close()
	fmt.Println("took Leaf worker id", lease.WorkerID())
}
