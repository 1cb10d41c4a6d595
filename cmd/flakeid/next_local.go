package main

import (
	"bufio"
	"context"
	"errors"
	"log/slog"
	"strconv"
	"time"

	"github.com/flakeid/flakeid/node"
	"github.com/flakeid/flakeid/snowflake"
)

// local prints c.Count Snowflake IDs generated in this process, by a node
// that leases its worker id from the coordinator (or, with --worker, uses
// that one on trust).
func (c *nextCmd) local(ctx context.Context, out *streams) error {
	l, err := c.Layout.layout()
	if err != nil {
		return err
	}
	// A layout that cannot issue now (epoch in the future, time field run
	// out) is refused before a worker id is leased and its contract recorded.
	if _, err := snowflake.New(snowflake.Settings{Layout: l, Now: c.Coord.clock()}); err != nil {
		return err
	}
	s := snowflake.Settings{Layout: l, DatacenterID: c.Coord.Datacenter, MaxWait: c.MaxWait, Now: c.Coord.clock()}
	if c.MaxWait == 0 {
		s.MaxWait = -1 // never wait
	}
	if c.Policy == "borrow" {
		s.Policy = snowflake.Borrow
	}
	log := slog.New(slog.NewTextHandler(out.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	cfg := node.Config{Settings: s, Logger: log, StaticWorkerID: c.Worker}
	if c.Worker == nil {
		cfg.Lease = c.Coord.leaseConfig(c.WaitLease)
		coord, err := c.Coord.open(ctx, &c.Data)
		if err != nil {
			return err
		}
		defer coord.Close()
		cfg.Coordinator = coord
	}
	n, err := node.Start(ctx, cfg)
	if err != nil {
		return err
	}
	defer n.Close()
	return c.print(ctx, n, out)
}

// print writes the IDs.
func (c *nextCmd) print(ctx context.Context, g *node.Node, out *streams) error {
	w := bufio.NewWriterSize(out.stdout, 64<<10)
	var buf []byte
	first := true
	if c.Format == "json" {
		w.WriteString("[")
	}
	var uw *uuidWriter
	if f := c.uuidForm(); f != 0 {
		var err error
		if uw, err = newUUIDWriter(g.Layout(), f, c.Prefix); err != nil {
			return err
		}
	}
	var tick *time.Ticker
	if c.Every > 0 {
		tick = time.NewTicker(c.Every)
		defer tick.Stop()
	}
	for left := c.Count; left > 0; {
		if err := ctx.Err(); err != nil {
			w.Flush()
			return err
		}
		want := left
		if tick != nil {
			want = 1
			select {
			case <-ctx.Done():
				w.Flush()
				return ctx.Err()
			case <-tick.C:
			}
		}
		b, err := g.NextN(want)
		if err != nil && c.WaitLease && errors.Is(err, node.ErrNoLease) {
			// The lease was lost; the node is taking another. Wait for it.
			w.Flush()
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(20 * time.Millisecond):
			}
			continue
		}
		if err != nil {
			w.Flush()
			return err
		}
		left -= b.Count
		for id := range b.All() {
			if c.Format == "json" {
				buf = buf[:0]
				if !first {
					buf = append(buf, ',')
				}
				buf = append(buf, "\n  \""...)
				buf = strconv.AppendInt(buf, int64(id), 10)
				buf = append(buf, '"')
			} else if uw != nil {
				if buf, err = uw.appendText(buf[:0], int64(id)); err != nil {
					return err
				}
				buf = append(buf, '\n')
			} else {
				buf = c.appendLine(buf[:0], int64(id))
			}
			first = false
			if _, err := w.Write(buf); err != nil {
				return err
			}
		}
		if tick != nil {
			if err := w.Flush(); err != nil {
				return err
			}
		}
	}
	if c.Format == "json" {
		w.WriteString("\n]\n")
	}
	return w.Flush()
}
