package redis_test

import (
	"context"
	"fmt"
	"log"
	"net/url"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/flakeid/flakeid/backend/redis"
	"github.com/flakeid/flakeid/worker"
)

// Every node of a cluster opens the same Redis with the same key prefix, and
// leases its worker id through it.
func ExampleOpenWorkers() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	u, err := url.Parse("redis://:secret@10.0.0.1:6379/0?prefix=flakeid:workers")
	if err != nil {
		log.Fatal(err)
	}
	coord, err := redis.OpenWorkers(ctx, u)
	if err != nil {
		log.Fatal(err) // wraps worker.ErrInvalidConfig: the URL is wrong
	}
	defer coord.Close()

	leaser, err := worker.NewLeaser(coord, worker.Config{Datacenter: 1, Workers: 32, TTL: 10 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	lease, err := leaser.Acquire(ctx)
	if err != nil {
		log.Fatal(err) // wraps worker.ErrUnavailable when Redis does not answer
	}
	defer lease.Close()
	fmt.Println("worker id", lease.WorkerID(), "issue from", lease.NotBefore())
}

// An application that already has a go-redis client (a cluster, Sentinel)
// wraps it; the client stays the application's to close.
func ExampleNewWorkers() {
	client := goredis.NewFailoverClient(&goredis.FailoverOptions{
		MasterName:            "flakeid",
		SentinelAddrs:         []string{"10.0.0.1:26379", "10.0.0.2:26379", "10.0.0.3:26379"},
		ContextTimeoutEnabled: true, // renewals end with their context's deadline
	})
	defer client.Close()
	var coord worker.Coordinator = redis.NewWorkers(client, "flakeid:workers")
	_ = coord
}
