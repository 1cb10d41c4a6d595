package main

import (
	"context"
	"encoding/json"
	"fmt"
	"text/tabwriter"
	"time"
)

// workersCmd groups the worker-id lease commands.
type workersCmd struct {
	Ls     workersLsCmd     `cmd:"" help:"List the worker ids a coordinator has records of: holder, expiry, high-water mark."`
	Schema workersSchemaCmd `cmd:"" help:"Print the DDL of a SQL coordinator's table for a migration tool, or the nodes/keys and permissions of a ZooKeeper or Consul coordinator."`
}

// workersLsCmd lists leases from any backend.
type workersLsCmd struct {
	JSON  bool       `help:"One JSON object per worker id (NDJSON)."`
	Data  dataFlags  `embed:""`
	Coord coordFlags `embed:""`
}

// Run prints the datacenter's worker-id slots.
func (c *workersLsCmd) Run(ctx context.Context, out *streams) error {
	coord, err := c.Coord.open(ctx, &c.Data)
	if err != nil {
		return err
	}
	defer coord.Close()
	infos, err := coord.List(ctx, c.Coord.Datacenter)
	if err != nil {
		return err
	}
	now := time.Now()
	if c.JSON {
		enc := json.NewEncoder(out.stdout)
		for _, in := range infos {
			row := struct {
				Datacenter int64  `json:"datacenter"`
				Worker     int64  `json:"worker"`
				Held       bool   `json:"held"`
				Holder     string `json:"holder,omitempty"`
				Expires    string `json:"expires,omitempty"`
				HighWater  string `json:"high_water,omitempty"`
			}{Datacenter: in.Datacenter, Worker: in.Worker, Held: in.Held(now), Holder: in.Holder,
				Expires: stamp(in.Expires), HighWater: stamp(in.HighWater)}
			if err := enc.Encode(row); err != nil {
				return err
			}
		}
		return nil
	}
	if len(infos) == 0 {
		fmt.Fprintf(out.stdout, "no worker ids recorded in datacenter %d\n", c.Coord.Datacenter)
		return nil
	}
	tw := tabwriter.NewWriter(out.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "WORKER\tSTATE\tHOLDER\tEXPIRES\tHIGH-WATER")
	for _, in := range infos {
		state, holder, expires := "free", "-", "-"
		if in.Held(now) {
			state, holder, expires = "held", in.Holder, fmt.Sprintf("%s (in %v)", stamp(in.Expires), in.Expires.Sub(now).Round(time.Millisecond))
		} else if in.Holder != "" {
			state, holder, expires = "expired", in.Holder, stamp(in.Expires)
		}
		hw := "-"
		if !in.HighWater.IsZero() {
			hw = stamp(in.HighWater)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", in.Worker, state, holder, expires, hw)
	}
	return tw.Flush()
}

// stamp formats an instant as RFC 3339 with milliseconds in UTC; zero is "".
func stamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02T15:04:05.000Z07:00")
}
