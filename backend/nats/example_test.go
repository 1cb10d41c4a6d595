package nats_test

import (
	"context"
	"fmt"
	"log"
	"net/url"
	"time"

	"github.com/flakeid/flakeid/backend/nats"
	"github.com/flakeid/flakeid/worker"
)

// Every node of a cluster opens the same bucket with the same namespace,
// and leases its worker id through it.
func ExampleOpenWorkers() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	u, err := url.Parse("nats://10.0.0.1:4222/flakeid?namespace=orders")
	if err != nil {
		log.Fatal(err)
	}
	coord, err := nats.OpenWorkers(ctx, u)
	if err != nil {
		log.Fatal(err) // wraps worker.ErrInvalidConfig (the URL) or worker.ErrUnavailable (the server)
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
