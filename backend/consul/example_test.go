package consul_test

import (
	"context"
	"fmt"
	"log"
	"net/url"
	"time"

	consulapi "github.com/hashicorp/consul/api"

	"github.com/flakeid/flakeid/backend/consul"
	"github.com/flakeid/flakeid/worker"
)

// Every node of a cluster opens its Consul agent with the same key prefix,
// and leases its worker id through it.
func ExampleOpenWorkers() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	u, err := url.Parse("consul://127.0.0.1:8500/flakeid/workers")
	if err != nil {
		log.Fatal(err)
	}
	coord, err := consul.OpenWorkers(ctx, u)
	if err != nil {
		log.Fatal(err) // wraps worker.ErrUnavailable when the agent does not answer
	}
	defer coord.Close()

	// A 20s lease gets 20s sessions, which Consul keeps up to 40s: an
	// agent with the default session_ttl_min of 10s accepts them, and a dead
	// holder's id is free again at most 40s + the lock-delay after its last
	// renewal.
	leaser, err := worker.NewLeaser(coord, worker.Config{Datacenter: 1, Workers: 32, TTL: 20 * time.Second})
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

// Over HTTPS, with the lock-delay in the URL; the ACL token may
// also come from CONSUL_HTTP_TOKEN (the URL's wins).
func ExampleOpenWorkers_https() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	u, err := url.Parse("consuls://consul.example.com:8501/flakeid/workers?lock_delay=5s")
	if err != nil {
		log.Fatal(err)
	}
	coord, err := consul.OpenWorkers(ctx, u)
	if err != nil {
		log.Fatal(err)
	}
	defer coord.Close()
	fmt.Println(coord.Prefix(), coord.Registry())
}

// An application that already has a Consul client (TLS, ACL token) wraps
// it.
func ExampleNewWorkers() {
	cfg := consulapi.DefaultConfig()
	cfg.Address = "consul.example.com:8501"
	cfg.Scheme = "https"
	cfg.Token = "secret"
	client, err := consulapi.NewClient(cfg)
	if err != nil {
		log.Fatal(err)
	}
	// Two clusters sharing this Consul keep their worker ids under their
	// own prefixes; the datacenter registry they share (DefaultRegistry, one
	// per Consul cluster) refuses a datacenter id the other one claimed, and
	// a layout other than the one it records.
	var coord worker.Coordinator = consul.NewWorkers(client, "flakeid/workers")
	_ = coord
}

// What a coordinator has recorded for a datacenter: the incarnation every
// holder checks, the ID-space contract, and the floor no holder starts below
// (the initialising node's clock plus the quarantine). An operator reads the
// same with `consul kv get flakeid/workers/1/namespace`.
func ExampleWorkers_Namespace() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	u, err := url.Parse("consul://127.0.0.1:8500/flakeid/workers")
	if err != nil {
		log.Fatal(err)
	}
	coord, err := consul.OpenWorkers(ctx, u)
	if err != nil {
		log.Fatal(err)
	}
	defer coord.Close()
	ns, ok, err := coord.Namespace(ctx, 1)
	switch {
	case err != nil:
		log.Fatal(err)
	case !ok:
		fmt.Println("datacenter 1 was never used, or Consul lost its keys")
	default:
		fmt.Printf("incarnation %s, contract %q, no ID before %v\n", ns.Incarnation, ns.Contract, ns.Floor)
	}
}
