package client_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/flakeid/flakeid/client"
)

// A client of two servers, with the recommended local Snowflake buffer and
// a segment buffer of 1,000 IDs per tag.
func ExampleNew() {
	cfg := client.DefaultConfig()
	cfg.Endpoints = []string{"http://ids-1.internal:8080", "http://ids-2.internal:8080"}
	cfg.Token = "0123456789abcdef-secret"
	cfg.Buffer.Segment = 1000
	c, err := client.New(cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	id, err := c.NextID(ctx) // from the buffer: no request most of the time
	if err != nil {
		log.Fatal(err)
	}
	order, err := c.NextSegment(ctx, "orders")
	if err != nil {
		log.Fatal(err)
	}
	p, err := c.Decode(ctx, fmt.Sprint(id))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(id, order, p.Time, p.Worker)
}

// A generator in this process under a worker-id lease one of the servers
// holds for it: no request per ID.
func ExampleClient_NewLocalGenerator() {
	c, err := client.New(client.Config{Endpoints: []string{"http://ids-1.internal:8080", "http://ids-2.internal:8080"}})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	g, err := c.NewLocalGenerator(ctx, "billing")
	if err != nil {
		log.Fatal(err)
	}
	defer g.Close() // releases the lease
	for range 3 {
		id, err := g.NextID(ctx)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(id)
	}
}
