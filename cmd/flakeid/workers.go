package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/flakeid/flakeid/worker"
)

// workersCmd groups the worker-id lease commands.
type workersCmd struct {
	Ls      workersLsCmd      `cmd:"" help:"List the worker ids a coordinator has records of: holder, expiry, high-water mark."`
	Schema  workersSchemaCmd  `cmd:"" help:"Print the DDL of a SQL coordinator's table for a migration tool, or the nodes/keys and permissions of a ZooKeeper or Consul coordinator."`
	Claims  workersClaimsCmd  `cmd:"" help:"List a coordinator's datacenter registry: the ID space (layout) every namespace on it shares, and which namespace claimed each datacenter id."`
	Unclaim workersUnclaimCmd `cmd:"" help:"Free --datacenter in the registry for another namespace, when this --coordinator's namespace claimed it, none of its worker ids is held and every high-water mark has passed."`
	Lower   workersLowerCmd   `cmd:"" name:"lower-mark" help:"UNSAFE unless no ID of --worker was issued at or after --to: lower a free worker id's high-water mark (pushed ahead by a node whose clock ran ahead, say) to --to, which may not be before the coordinator's clock."`
}

// workersLowerCmd lowers one worker id's high-water mark.
type workersLowerCmd struct {
	Worker int64      `required:"" placeholder:"W" help:"The worker id whose mark to lower."`
	To     time.Time  `required:"" placeholder:"RFC3339" help:"The new mark, e.g. 2026-11-28T10:00:00Z: not before the coordinator's clock, below the mark. No ID of the worker id may have been issued at or after it."`
	Data   dataFlags  `embed:""`
	Coord  coordFlags `embed:""`
}

// Run lowers the mark, or says why not.
func (c *workersLowerCmd) Run(ctx context.Context, out *streams) error {
	return withCoordinator(ctx, &c.Coord, &c.Data, func(coord coordinator) error {
		ml, ok := coord.(worker.MarkLowerer)
		if !ok {
			return fmt.Errorf("the coordinator %T cannot lower a mark", coord)
		}
		from, err := ml.LowerMark(ctx, c.Coord.Datacenter, c.Worker, c.To)
		if err != nil {
			return err
		}
		fmt.Fprintf(out.stdout, "lowered the mark of worker %d of datacenter %d from %s to %s\n", c.Worker, c.Coord.Datacenter, stamp(from), stamp(c.To))
		return nil
	})
}

// withCoordinator opens the --coordinator of c (under d's data directory),
// runs fn with it and closes it.
func withCoordinator(ctx context.Context, c *coordFlags, d *dataFlags, fn func(coordinator) error) error {
	coord, err := c.open(ctx, d)
	if err != nil {
		return err
	}
	defer coord.Close()
	return fn(coord)
}

// registryOf is the datacenter registry of coord, or an error saying that
// the file coordinator has none.
func registryOf(coord coordinator) (worker.Registry, error) {
	reg, ok := coord.(worker.Registry)
	if !ok {
		return nil, errors.New("the file coordinator has no datacenter registry: its one file is its one namespace, and its ID space is the layout its nodes started with")
	}
	return reg, nil
}

// workersClaimsCmd lists a coordinator's datacenter registry.
type workersClaimsCmd struct {
	JSON  bool       `help:"The registry as one JSON object."`
	Data  dataFlags  `embed:""`
	Coord coordFlags `embed:""`
}

// Run prints the registry's ID space and claims.
func (c *workersClaimsCmd) Run(ctx context.Context, out *streams) error {
	var claims worker.Claims
	err := withCoordinator(ctx, &c.Coord, &c.Data, func(coord coordinator) error {
		reg, err := registryOf(coord)
		if err == nil {
			claims, err = reg.Claims(ctx)
		}
		return err
	})
	if err != nil {
		return err
	}
	if c.JSON {
		row := struct {
			Space       *string                  `json:"space"`
			Datacenters []worker.DatacenterClaim `json:"datacenters"`
		}{Datacenters: claims.Datacenters}
		if claims.HasSpace {
			row.Space = &claims.Space
		}
		if row.Datacenters == nil {
			row.Datacenters = []worker.DatacenterClaim{}
		}
		return json.NewEncoder(out.stdout).Encode(row)
	}
	space := "none recorded yet"
	if claims.HasSpace {
		space = claims.Space
	}
	fmt.Fprintf(out.stdout, "ID space: %s\n", space)
	if len(claims.Datacenters) == 0 {
		fmt.Fprintln(out.stdout, "no datacenter id claimed")
		return nil
	}
	tw := tabwriter.NewWriter(out.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "DATACENTER\tNAMESPACE")
	for _, d := range claims.Datacenters {
		fmt.Fprintf(tw, "%d\t%s\n", d.Datacenter, d.Namespace)
	}
	return tw.Flush()
}

// workersUnclaimCmd frees a datacenter claim of the coordinator's namespace.
type workersUnclaimCmd struct {
	Data  dataFlags  `embed:""`
	Coord coordFlags `embed:""`
}

// Run frees --datacenter, or says why not.
func (c *workersUnclaimCmd) Run(ctx context.Context, out *streams) error {
	return withCoordinator(ctx, &c.Coord, &c.Data, func(coord coordinator) error {
		reg, err := registryOf(coord)
		if err != nil {
			return err
		}
		if err := reg.Unclaim(ctx, c.Coord.Datacenter); err != nil {
			return err
		}
		fmt.Fprintf(out.stdout, "freed datacenter %d: another namespace may claim it now\n", c.Coord.Datacenter)
		return nil
	})
}

// workersLsCmd lists leases from any backend.
type workersLsCmd struct {
	JSON  bool       `help:"One JSON object per worker id (NDJSON)."`
	Data  dataFlags  `embed:""`
	Coord coordFlags `embed:""`
}

// Run prints the datacenter's worker-id slots.
func (c *workersLsCmd) Run(ctx context.Context, out *streams) error {
	var infos []worker.Info
	err := withCoordinator(ctx, &c.Coord, &c.Data, func(coord coordinator) (err error) {
		infos, err = coord.List(ctx, c.Coord.Datacenter)
		return err
	})
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
