package sqldb_test

import (
	"context"
	"fmt"
	"log"
	"net/url"
	"time"

	"github.com/flakeid/flakeid/backend/sqldb"
	"github.com/flakeid/flakeid/segment"
	"github.com/flakeid/flakeid/worker"
)

// Every node of a cluster opens the same table of the same database, and
// leases its worker id through it. The tables are created when missing.
func ExampleOpenWorkers() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	u, err := url.Parse("postgres://flakeid:secret@db.example.com:5432/app?sslmode=require&table=flakeid_workers")
	if err != nil {
		log.Fatal(err)
	}
	coord, err := sqldb.OpenWorkers(ctx, u)
	if err != nil {
		log.Fatal(err) // wraps worker.ErrUnavailable when the database does not answer
	}
	defer coord.Close() // closes the database it opened

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

// A segment store on Meituan Leaf's leaf_alloc table of a MySQL database
// (port 3306 unless the URL says otherwise); Leaf servers may share it.
func ExampleOpenSegments() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	u, err := url.Parse("mysql://flakeid:secret@db.example.com/app?table=leaf_alloc")
	if err != nil {
		log.Fatal(err)
	}
	store, err := sqldb.OpenSegments(ctx, u)
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	alloc, err := segment.New(segment.Config{Store: store})
	if err != nil {
		log.Fatal(err)
	}
	defer alloc.Close()
	id, err := alloc.NextID(ctx, "orders")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("order", id)
}

// An application that manages its own database pool (and its migrations)
// hands it over; the pool stays the application's to close.
func ExampleNewWorkers() {
	db, d, err := sqldb.OpenDB("flakeid:secret@tcp(db.example.com:3306)/app")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	coord, err := sqldb.NewWorkers(db, d, "flakeid_workers")
	if err != nil {
		log.Fatal(err)
	}
	// The migration tool applied coord.SchemaSQL(); otherwise:
	// err = coord.CreateSchema(ctx)
	var _ worker.Coordinator = coord
}
