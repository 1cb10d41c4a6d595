package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/flakeid/flakeid/client"
	"github.com/flakeid/flakeid/internal/humanize"
	"github.com/flakeid/flakeid/node"
	"github.com/flakeid/flakeid/segment"
	"github.com/flakeid/flakeid/snowflake"
	"github.com/flakeid/flakeid/worker"
)

// maxCount bounds next -n: ten million IDs is about 200 MB of decimal text
// and a few seconds of a default-layout generator.
const maxCount = 10_000_000

// nextCmd generates IDs in this process, under a worker id leased from the
// coordinator (by default a file under the data directory), so that any
// number of `flakeid next` processes sharing a coordinator never collide and a
// restart never reissues an ID. --worker takes a fixed worker id instead, on
// trust (unsafe, and it says so).
type nextCmd struct {
	Count     int           `short:"n" default:"1" placeholder:"N" env:"FLAKEID_COUNT" help:"Number of IDs to print, 1–${max_count} (default 1)."`
	Worker    *int64        `placeholder:"W" env:"FLAKEID_WORKER" help:"UNSAFE: use this worker id instead of leasing one (0 to 2^worker-bits − 1); two processes with the same id issue duplicates."`
	Policy    string        `default:"wait" enum:"wait,borrow" env:"FLAKEID_POLICY" help:"When a tick's sequence is used up: wait for the next tick, or borrow up to ${max_borrow} from the future (${enum})."`
	Format    string        `short:"f" default:"decimal" enum:"decimal,base32,base58,json" env:"FLAKEID_FORMAT" help:"Output: decimal, base32 (13 Crockford chars), base58 (11 chars), one per line; or json, an array of decimal strings (${enum})."`
	Every     time.Duration `placeholder:"DURATION" env:"FLAKEID_EVERY" help:"Issue one ID per interval (printing each at once) instead of all at once."`
	WaitLease bool          `env:"FLAKEID_WAIT_LEASE" help:"Wait for a worker id while all are held, instead of failing."`
	MaxWait   time.Duration `default:"10s" placeholder:"DURATION" env:"FLAKEID_MAX_WAIT" help:"How long to wait for the clock to pass the worker id's high-water mark (a previous holder's reservation), 0–1m."`

	Tag       string `placeholder:"TAG" env:"FLAKEID_TAG" help:"Segment mode: print the next IDs of this tag (dense integers from --store, Leaf-style) instead of Snowflake IDs."`
	Server    string `placeholder:"URL[,URL…]" env:"FLAKEID_SERVER" help:"Ask running flakeid servers for the IDs (failing over between them) instead of generating them here; a server that masks its IDs gets its masked texts printed."`
	Token     string `placeholder:"TOKEN" env:"FLAKEID_TOKEN" help:"Bearer token for --server."`
	CreateTag bool   `env:"FLAKEID_CREATE_TAG" help:"Segment mode: create the tag (step 1000) if it does not exist."`

	Data   dataFlags   `embed:""`
	Store  storeFlags  `embed:""`
	Coord  coordFlags  `embed:""`
	Layout layoutFlags `embed:""`
}

// Run prints c.Count IDs.
func (c *nextCmd) Run(ctx context.Context, out *streams) error {
	if c.Count < 1 || c.Count > maxCount {
		return fmt.Errorf("-n %d is out of range: want 1 to %s IDs", c.Count, humanize.Thousands(maxCount))
	}
	if c.MaxWait < 0 || c.MaxWait > snowflake.MaxMaxWait {
		return fmt.Errorf("--max-wait %v is out of range: want 0 to %v", c.MaxWait, snowflake.MaxMaxWait)
	}
	if c.Server != "" {
		return c.remote(ctx, out)
	}
	if c.Tag != "" {
		return c.segments(ctx, out)
	}
	l, err := c.Layout.layout()
	if err != nil {
		return err
	}
	// A layout that cannot issue now (epoch in the future, time field run
	// out) is refused before a worker id is leased and its contract recorded.
	if err := l.ValidateAt(c.Coord.now()); err != nil {
		return err
	}
	s := snowflake.Settings{Layout: l, MaxWait: c.MaxWait, Now: c.Coord.clock()}
	if c.MaxWait == 0 {
		s.MaxWait = -1 // never wait
	}
	if c.Policy == "borrow" {
		s.Policy = snowflake.Borrow
	}
	log := slog.New(slog.NewTextHandler(out.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	var leaser worker.Leaser
	if c.Worker != nil {
		leaser = worker.Static(c.Coord.Datacenter, *c.Worker, log)
	} else {
		coord, closeCoord, err := c.Coord.open(ctx, &c.Data)
		if err != nil {
			return err
		}
		defer closeCoord()
		if leaser, err = worker.NewLeaser(coord, c.Coord.leaseConfig(l, log, c.WaitLease)); err != nil {
			return err
		}
	}
	n, err := node.Start(ctx, node.Config{Leaser: leaser, Settings: s, Logger: log})
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

// segments prints c.Count IDs of c.Tag from the segment store.
func (c *nextCmd) segments(ctx context.Context, out *streams) error {
	if c.Format == "json" {
		return fmt.Errorf("--format json is for Snowflake IDs; segment IDs print as decimal, base32 or base58")
	}
	store, closeStore, err := c.Store.open(ctx, &c.Data)
	if err != nil {
		return err
	}
	defer closeStore()
	log := slog.New(slog.NewTextHandler(out.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	a, err := segment.New(segment.Config{Store: store, AutoCreate: c.CreateTag, Logger: log})
	if err != nil {
		return err
	}
	defer a.Close()
	h, err := a.Tag(ctx, c.Tag)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(out.stdout, 64<<10)
	defer w.Flush()
	var tick *time.Ticker
	if c.Every > 0 {
		tick = time.NewTicker(c.Every)
		defer tick.Stop()
	}
	var spans []segment.Span
	var buf []byte
	for left := c.Count; left > 0; {
		want := min(left, 100_000)
		if tick != nil {
			want = 1
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-tick.C:
			}
		}
		if spans, err = h.Next(ctx, want, spans[:0]); err != nil {
			return err
		}
		for _, sp := range spans {
			for id := range sp.All() {
				buf = buf[:0]
				switch c.Format {
				case "base32":
					buf = append(buf, snowflake.ID(id).Base32()...)
				case "base58":
					buf = append(buf, snowflake.ID(id).Base58()...)
				default:
					buf = strconv.AppendInt(buf, id, 10)
				}
				buf = append(buf, '\n')
				if _, err := w.Write(buf); err != nil {
					return err
				}
			}
		}
		left -= want
		if tick != nil {
			if err := w.Flush(); err != nil {
				return err
			}
		}
	}
	return nil
}

// serverWants is what --server takes, as its errors say.
const serverWants = "--server wants http://host:port or https://host:port (several separated by commas)"

// serverURLs turns --server into the servers' base URLs: a comma-separated
// list of http:// or https:// URLs, where host:port without a scheme means
// http://host:port. Anything else is an error saying what to write.
func serverURLs(list string) ([]string, error) {
	var urls []string
	for _, raw := range strings.Split(list, ",") {
		s := strings.TrimSpace(raw)
		if s == "" {
			return nil, fmt.Errorf("--server %q has an empty URL; %s", list, serverWants)
		}
		if !strings.Contains(s, "://") {
			s = "http://" + s
		}
		u, err := url.Parse(s)
		switch {
		case err != nil:
			var ue *url.Error
			if errors.As(err, &ue) {
				err = ue.Err
			}
			return nil, fmt.Errorf("--server %q: %v; %s", raw, err, serverWants)
		case u.Scheme != "http" && u.Scheme != "https":
			return nil, fmt.Errorf("--server %q: scheme %q; %s", raw, u.Scheme, serverWants)
		case u.Hostname() == "" || strings.HasSuffix(u.Host, ":"):
			return nil, fmt.Errorf("--server %q: no host:port; %s", raw, serverWants)
		case u.User != nil:
			return nil, fmt.Errorf("--server %q: a user or password in the URL is not used; give the token with --token", u.Redacted())
		}
		urls = append(urls, s)
	}
	return urls, nil
}

// fetchIDs asks the servers for n IDs (of --tag, if set).
func (c *nextCmd) fetchIDs(ctx context.Context, cl *client.Client, n int) ([]int64, error) {
	if c.Tag != "" {
		return cl.NextSegmentIDs(ctx, c.Tag, n)
	}
	return cl.NextIDs(ctx, n)
}

// fetchTexts asks the servers for n IDs as the texts they write.
func (c *nextCmd) fetchTexts(ctx context.Context, cl *client.Client, n int) ([]string, error) {
	if c.Tag != "" {
		return cl.NextSegmentTexts(ctx, c.Tag, n)
	}
	return cl.NextTexts(ctx, n)
}

// remote prints IDs from running servers. From a server that masks its IDs
// (which refuses the ranges NextIDs reads) it prints the masked texts as the
// server writes them.
func (c *nextCmd) remote(ctx context.Context, out *streams) error {
	if c.Format == "json" {
		return fmt.Errorf("--format json is not available with --server; use decimal, base32 or base58")
	}
	endpoints, err := serverURLs(c.Server)
	if err != nil {
		return err
	}
	cl, err := client.New(client.Config{Endpoints: endpoints, Token: c.Token})
	if err != nil {
		return fmt.Errorf("--server: %w", err)
	}
	defer cl.Close()
	w := bufio.NewWriterSize(out.stdout, 64<<10)
	defer w.Flush()
	var buf []byte
	masked := false // the server masks: print its texts
	for left := c.Count; left > 0; {
		want := min(left, 100_000)
		if c.Every > 0 {
			want = 1
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(c.Every):
			}
		}
		var ids []int64
		var texts []string
		if !masked {
			ids, err = c.fetchIDs(ctx, cl, want)
			var ae *client.APIError
			if errors.As(err, &ae) && ae.Status == 400 {
				// A server that masks its IDs refuses the ranges NextIDs
				// reads; if it hands out the same IDs as texts, it masks.
				if texts, err = c.fetchTexts(ctx, cl, want); err == nil {
					masked = true
					if c.Format != "decimal" {
						return fmt.Errorf("the server hands out masked IDs (%s…), which --format %s cannot re-encode; use the default format", texts[0], c.Format)
					}
				}
			}
		} else {
			texts, err = c.fetchTexts(ctx, cl, want)
		}
		if err != nil {
			return err
		}
		for _, t := range texts {
			if _, err := fmt.Fprintln(w, t); err != nil {
				return err
			}
		}
		for _, id := range ids {
			buf = buf[:0]
			switch c.Format {
			case "base32":
				buf = append(buf, snowflake.ID(id).Base32()...)
			case "base58":
				buf = append(buf, snowflake.ID(id).Base58()...)
			default:
				buf = strconv.AppendInt(buf, id, 10)
			}
			buf = append(buf, '\n')
			if _, err := w.Write(buf); err != nil {
				return err
			}
		}
		left -= len(ids) + len(texts)
		if c.Every > 0 {
			if err := w.Flush(); err != nil {
				return err
			}
		}
	}
	return nil
}
