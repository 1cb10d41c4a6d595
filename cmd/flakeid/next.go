package main

import (
	"bufio"
	"context"
	"fmt"
	"strconv"

	"github.com/flakeid/flakeid/snowflake"
)

// maxCount bounds next -n: ten million IDs is about 200 MB of decimal text
// and a few seconds of a default-layout generator.
const maxCount = 10_000_000

// nextCmd generates IDs with a generator local to this process, so the
// (datacenter, worker) pair must not be in use by any other running
// generator of the same layout, or IDs will collide.
//
// Planned: --coordinator (lease the worker id from the coordinator instead of
// taking --datacenter/--worker on trust) and --server (ask a running flakeid
// server for IDs instead of generating them here). They are deliberately not
// stubbed out here.
type nextCmd struct {
	Count      int    `short:"n" default:"1" placeholder:"N" env:"FLAKEID_COUNT" help:"Number of IDs to print, 1–${max_count} (default 1)."`
	Datacenter int64  `default:"0" placeholder:"D" env:"FLAKEID_DATACENTER" help:"Datacenter id, 0 to 2^datacenter-bits − 1."`
	Worker     int64  `default:"0" placeholder:"W" env:"FLAKEID_WORKER" help:"Worker id, 0 to 2^worker-bits − 1. Must be unique per running generator within its datacenter."`
	Policy     string `default:"wait" enum:"wait,borrow" env:"FLAKEID_POLICY" help:"When a tick's sequence is used up: wait for the next tick, or borrow up to ${max_borrow} from the future (${enum})."`
	Format     string `short:"f" default:"decimal" enum:"decimal,base32,base58,json" env:"FLAKEID_FORMAT" help:"Output: decimal, base32 (13 Crockford chars), base58 (11 chars), one per line; or json, an array of decimal strings (${enum})."`

	Layout layoutFlags `embed:""`
}

// Run prints c.Count IDs.
func (c *nextCmd) Run(ctx context.Context, out *streams) error {
	if c.Count < 1 || c.Count > maxCount {
		return fmt.Errorf("-n %d is out of range: want 1 to %s IDs", c.Count, group(maxCount))
	}
	l, err := c.Layout.layout()
	if err != nil {
		return err
	}
	s := snowflake.Settings{Layout: l, DatacenterID: c.Datacenter, WorkerID: c.Worker}
	if c.Policy == "borrow" {
		s.Policy = snowflake.Borrow
	}
	g, err := snowflake.New(s)
	if err != nil {
		return err
	}

	w := bufio.NewWriterSize(out.stdout, 64<<10)
	var buf []byte
	first := true
	if c.Format == "json" {
		w.WriteString("[")
	}
	for left := c.Count; left > 0; {
		if err := ctx.Err(); err != nil {
			w.Flush()
			return err
		}
		b, err := g.NextN(left)
		if err != nil {
			w.Flush()
			return err
		}
		left -= b.Count
		for id := range b.All() {
			buf = buf[:0]
			switch c.Format {
			case "base32":
				buf = append(buf, id.Base32()...)
			case "base58":
				buf = append(buf, id.Base58()...)
			case "json":
				if !first {
					buf = append(buf, ',')
				}
				buf = append(buf, "\n  \""...)
				buf = strconv.AppendInt(buf, id.Int64(), 10)
				buf = append(buf, '"')
			default:
				buf = strconv.AppendInt(buf, id.Int64(), 10)
			}
			if c.Format != "json" {
				buf = append(buf, '\n')
			}
			first = false
			if _, err := w.Write(buf); err != nil {
				return err
			}
		}
	}
	if c.Format == "json" {
		w.WriteString("\n]\n")
	}
	return w.Flush()
}
