package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/flakeid/flakeid/client"
	"github.com/flakeid/flakeid/snowflake"
)

// boundsCmd prints the smallest and largest Snowflake IDs whose time lies
// in a window: for range scans and partition pruning on ID-keyed tables,
// pagination cursors, archiving everything before a date.
type boundsCmd struct {
	From   string `placeholder:"TIME" help:"Start of the window, included: RFC 3339 (2026-03-01T00:00:00Z), a date (2026-03-01, midnight UTC), Unix milliseconds, now, or an offset from now (--from=-1h, --from=-7d: with =, as it starts with a dash). Default: the layout's epoch."`
	To     string `placeholder:"TIME" help:"End of the window, excluded, in the same forms. Default: the end of the layout's time field."`
	JSON   bool   `name:"json" env:"FLAKEID_JSON" help:"Print a JSON object (IDs as strings)."`
	Server string `placeholder:"URL[,URL…]" env:"FLAKEID_SERVER" help:"Ask a running flakeid server (its layout) instead of computing with the layout flags."`
	Token  string `placeholder:"TOKEN" env:"FLAKEID_TOKEN" help:"Bearer token for --server."`

	Layout layoutFlags `embed:""`
}

// boundsRecord is what bounds prints.
type boundsRecord struct {
	Min    string `json:"min"`
	Max    string `json:"max"`
	From   string `json:"from"`
	To     string `json:"to"`
	Layout string `json:"layout"`
	Note   string `json:"note,omitempty"`
}

// Run prints the bounds.
func (c *boundsCmd) Run(ctx context.Context, out *streams) error {
	rec, err := c.bounds(ctx)
	if err != nil {
		return err
	}
	if c.JSON {
		enc := json.NewEncoder(out.stdout)
		enc.SetEscapeHTML(false)
		return enc.Encode(rec)
	}
	fields := [][2]string{{"min", rec.Min}, {"max", rec.Max}, {"from", rec.From}, {"to", rec.To}, {"layout", rec.Layout}}
	if rec.Note != "" {
		fields = append(fields, [2]string{"note", rec.Note})
	}
	return writeFields(out.stdout, fields)
}

func (c *boundsCmd) bounds(ctx context.Context) (boundsRecord, error) {
	if c.Server != "" {
		if c.Layout.overridden() || c.Layout.Preset != "default" {
			return boundsRecord{}, errors.New("--server answers by the server's layout: leave out the layout flags")
		}
		endpoints, err := serverURLs(c.Server)
		if err != nil {
			return boundsRecord{}, err
		}
		cl, err := client.New(client.Config{Endpoints: endpoints, Token: c.Token})
		if err != nil {
			return boundsRecord{}, fmt.Errorf("--server: %w", err)
		}
		defer cl.Close()
		b, err := cl.Bounds(ctx, c.From, c.To)
		if err != nil {
			return boundsRecord{}, err
		}
		return boundsRecord{Min: strconv.FormatInt(b.Min, 10), Max: strconv.FormatInt(b.Max, 10),
			From: b.From.UTC().Format(time.RFC3339Nano), To: b.To.UTC().Format(time.RFC3339Nano), Layout: b.Layout, Note: b.Note}, nil
	}
	l, err := c.Layout.layout()
	if err != nil {
		return boundsRecord{}, err
	}
	now := time.Now()
	from, to := l.Epoch, l.Capacity().RunsUntil
	if c.From != "" {
		if from, err = snowflake.ParseTime(c.From, now); err != nil {
			return boundsRecord{}, fmt.Errorf("--from: %w", err)
		}
	}
	if c.To != "" {
		if to, err = snowflake.ParseTime(c.To, now); err != nil {
			return boundsRecord{}, fmt.Errorf("--to: %w", err)
		}
	}
	b, err := l.Bounds(from, to)
	if err != nil {
		return boundsRecord{}, err
	}
	return boundsRecord{Min: b.Min.String(), Max: b.Max.String(), From: b.From.UTC().Format(time.RFC3339Nano),
		To: b.To.UTC().Format(time.RFC3339Nano), Layout: l.String()}, nil
}
