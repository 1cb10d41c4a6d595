// Command idclient measures the Go client (package client) with its local
// Snowflake buffer: -g goroutines call NextID in a loop against a running
// server for a fixed window and it prints IDs/s, like cmd/idload (same
// record, same -json lines). An op is a block of -block NextID calls, so the
// latency columns are per block, and a block that waited for a refill shows
// up in p99/max.
//
//	idclient -endpoint http://127.0.0.1:8080 -buffer 100000 -g 1 -d 10s
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"time"

	"github.com/flakeid/flakeid/bench/load"
	"github.com/flakeid/flakeid/client"
)

func main() {
	var (
		endpoint = flag.String("endpoint", "http://127.0.0.1:8080", "base URL of the server (loopback only)")
		buffer   = flag.Int("buffer", 100_000, "client.BufferConfig.Snowflake: IDs per prefetch")
		lowWater = flag.Float64("lowwater", 0, "client.BufferConfig.LowWater (0: the client's default)")
		g        = flag.Int("g", 1, "goroutines calling NextID, sharing one client")
		block    = flag.Int("block", 4096, "NextID calls per op (the time is read once per block)")
		warmup   = flag.Duration("warmup", time.Second, "unmeasured warm-up")
		dur      = flag.Duration("d", 10*time.Second, "measured window")
		label    = flag.String("label", "client", "label of the result")
		round    = flag.Int("round", 0, "round number")
		jsonOut  = flag.String("json", "", "append the result as a JSON line to this file")
		note     = flag.String("note", "", "free text stored with the result")
	)
	flag.Parse()
	if err := run(*endpoint, *buffer, *lowWater, *g, *block, *warmup, *dur, *label, *round, *jsonOut, *note); err != nil {
		fmt.Fprintln(os.Stderr, "idclient:", err)
		os.Exit(1)
	}
}

func run(endpoint string, buffer int, lowWater float64, g, block int, warmup, dur time.Duration, label string, round int, jsonOut, note string) error {
	u, err := url.Parse(endpoint)
	if err != nil {
		return err
	}
	if err := load.CheckLoopback(u.Host); err != nil {
		return err
	}
	if block < 1 {
		return errors.New("-block must be ≥ 1")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	cl, err := client.New(client.Config{
		Endpoints: []string{endpoint},
		Buffer:    client.BufferConfig{Snowflake: buffer, LowWater: lowWater},
	})
	if err != nil {
		return err
	}
	defer cl.Close()
	// Fill the buffer once before the clock starts.
	if _, err := cl.NextID(ctx); err != nil {
		return err
	}
	rec, _, err := load.Run(ctx, load.RunConfig{
		Workers:  g,
		Warmup:   warmup,
		Duration: dur,
		NewWorker: func(context.Context, int) (load.Worker, error) {
			var last int64
			return load.Worker{Op: func(ctx context.Context) (int64, error) {
				for range block {
					id, err := cl.NextID(ctx)
					if err != nil {
						return 0, err
					}
					last = id
				}
				if last <= 0 {
					return 0, fmt.Errorf("NextID returned %d", last)
				}
				return int64(block), nil
			}}, nil
		},
	})
	if err != nil {
		return err
	}
	rec.Label, rec.Round, rec.Mode, rec.Target = label, round, "client-buffer", fmt.Sprintf("%s buffer=%d block=%d", endpoint, buffer, block)
	if note != "" {
		rec.Note = note
	}
	fmt.Println(rec.String())
	if jsonOut != "" {
		return load.Append(jsonOut, &rec)
	}
	return nil
}
