package protocol

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/flakeid/flakeid/worker"
)

// A backend is a Store (here the tests' in-memory one; backend/nats and
// backend/bolt are real ones); the driver over it is the coordinator.
func ExampleNew() {
	now := time.Date(2027, 1, 15, 8, 0, 0, 0, time.UTC)
	coord := New(newMemStore(now))
	claim, err := coord.Acquire(context.Background(), worker.Request{Datacenter: 0, Workers: 32, Owner: "node-1",
		TTL: 10 * time.Second, Reserve: now.Add(3 * time.Second), Quarantine: 5 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	// A new namespace's first holder starts at its floor: the
	// coordinator's clock plus the quarantine.
	fmt.Println("worker", claim.WorkerID(), "from", claim.Previous().Format(time.RFC3339))
	// Output: worker 0 from 2027-01-15T08:00:05Z
}
