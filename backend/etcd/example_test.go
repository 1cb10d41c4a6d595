package etcd_test

import (
	"context"
	"fmt"
	"log"
	"net/url"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/flakeid/flakeid/backend/etcd"
	"github.com/flakeid/flakeid/worker"
)

// Every node of a cluster opens the same etcd endpoints with the same key
// prefix, and leases its worker id through them.
func ExampleOpenWorkers() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	u, err := url.Parse("etcd://10.0.0.1:2379,10.0.0.2:2379,10.0.0.3:2379/flakeid/workers")
	if err != nil {
		log.Fatal(err)
	}
	coord, err := etcd.OpenWorkers(ctx, u)
	if err != nil {
		log.Fatal(err) // wraps worker.ErrUnavailable when etcd does not answer
	}
	defer coord.Close()

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

// An application that already has an etcd client (TLS, authentication)
// wraps it; the client stays the application's to close.
func ExampleNewWorkers() {
	client, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{"https://etcd.example.com:2379"},
		DialTimeout: 5 * time.Second,
		Username:    "flakeid",
		Password:    "secret",
	})
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	// Two clusters sharing this etcd keep their worker ids under their own
	// prefixes; the datacenter registry they share (DefaultRegistry, one per
	// etcd cluster) refuses a datacenter id the other one claimed, and a
	// layout other than the one it records.
	var coord worker.Coordinator = etcd.NewWorkers(client, "/flakeid/workers")
	_ = coord
}

// What a coordinator has recorded for a datacenter: the incarnation every
// holder checks, the ID-space contract, and the floor no holder starts below
// (the initialising node's clock plus the quarantine). An operator reads the
// same with `etcdctl get /flakeid/workers/1/namespace`.
func ExampleWorkers_Namespace() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	u, err := url.Parse("etcd://10.0.0.1:2379/flakeid/workers")
	if err != nil {
		log.Fatal(err)
	}
	coord, err := etcd.OpenWorkers(ctx, u)
	if err != nil {
		log.Fatal(err)
	}
	defer coord.Close()
	ns, ok, err := coord.Namespace(ctx, 1)
	switch {
	case err != nil:
		log.Fatal(err)
	case !ok:
		fmt.Println("datacenter 1 was never used, or etcd lost its keys")
	default:
		fmt.Printf("incarnation %s, contract %q, no ID before %v\n", ns.Incarnation, ns.Contract, ns.Floor)
	}
}
