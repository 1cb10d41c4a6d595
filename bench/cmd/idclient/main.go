// Command idclient measures the Go client (package client) with its local
// Snowflake buffer: -g goroutines call NextID in a loop against a running
// server for a fixed window and it prints IDs/s, like cmd/idload (same
// record, same -json lines). An op is a block of -block NextID calls, so the
// latency columns are per block, and a block that waited for a refill shows
// up in p99/max. With -texts it calls NextText instead, whose buffer holds
// the server's texts (masked IDs from a server run with --mask-snowflake).
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
		texts    = flag.Bool("texts", false, "call NextText (the server's texts, masked or decimal) instead of NextID")
	)
	flag.Parse()
	if err := run(*endpoint, *buffer, *lowWater, *g, *block, *warmup, *dur, *label, *round, *jsonOut, *note, *texts); err != nil {
		fmt.Fprintln(os.Stderr, "idclient:", err)
		os.Exit(1)
	}
}

func run(endpoint string, buffer int, lowWater float64, g, block int, warmup, dur time.Duration, label string, round int, jsonOut, note string, texts bool) error {
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
	// next is one call; it fails on an ID that cannot be right.
	next := func(ctx context.Context) error {
		id, err := cl.NextID(ctx)
		if err == nil && id <= 0 {
			err = fmt.Errorf("NextID returned %d", id)
		}
		return err
	}
	mode := "client-buffer"
	if texts {
		mode = "client-text-buffer"
		next = func(ctx context.Context) error {
			s, err := cl.NextText(ctx)
			if err == nil && s == "" {
				err = errors.New("NextText returned an empty text")
			}
			return err
		}
	}
	// Fill the buffer once before the clock starts.
	if err := next(ctx); err != nil {
		return err
	}
	rec, _, err := load.Run(ctx, load.RunConfig{
		Workers:  g,
		Warmup:   warmup,
		Duration: dur,
		NewWorker: func(context.Context, int) (load.Worker, error) {
			return load.Worker{Op: func(ctx context.Context) (int64, error) {
				for range block {
					if err := next(ctx); err != nil {
						return 0, err
					}
				}
				return int64(block), nil
			}}, nil
		},
	})
	if err != nil {
		return err
	}
	rec.Label, rec.Round, rec.Mode, rec.Target = label, round, mode, fmt.Sprintf("%s buffer=%d block=%d", endpoint, buffer, block)
	if note != "" {
		rec.Note = note
	}
	fmt.Println(rec.String())
	if jsonOut != "" {
		return load.Append(jsonOut, &rec)
	}
	return nil
}
