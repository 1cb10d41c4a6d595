package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/flakeid/flakeid/segment"
)

// segments prints c.Count IDs of c.Tag from the segment store.
func (c *nextCmd) segments(ctx context.Context, out *streams) error {
	if c.Format == "json" {
		return fmt.Errorf("--format json is for Snowflake IDs; segment IDs print as decimal, base32 or base58")
	}
	store, err := c.Store.open(ctx, &c.Data)
	if err != nil {
		return err
	}
	defer store.Close()
	log := slog.New(slog.NewTextHandler(out.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	keys, _, err := c.Mask.counterKeys() // a masked series' key
	if err != nil {
		return err
	}
	a, err := store.allocator(segment.Config{AutoCreate: c.CreateTag, Logger: log, CounterKeys: keys})
	if err != nil {
		return err
	}
	defer a.Close()
	h, err := a.Tag(ctx, c.Tag)
	if errors.Is(err, segment.ErrSeries) {
		return c.numbers(ctx, a, out)
	}
	if err != nil {
		return err
	}
	var spans []segment.Span
	var buf []byte
	return c.batches(ctx, out, func(w *bufio.Writer, want int) error {
		if spans, err = h.Next(ctx, want, spans[:0]); err != nil {
			return err
		}
		for _, sp := range spans {
			for id := range sp.All() {
				buf = c.appendLine(buf[:0], id)
				if _, err := w.Write(buf); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// batches runs write for c.Count items in batches of up to 100,000 — or one
// at a time every c.Every, each flushed at once — on a buffered stdout.
func (c *nextCmd) batches(ctx context.Context, out *streams, write func(w *bufio.Writer, n int) error) error {
	w := bufio.NewWriterSize(out.stdout, 64<<10)
	defer w.Flush()
	var tick *time.Ticker
	if c.Every > 0 {
		tick = time.NewTicker(c.Every)
		defer tick.Stop()
	}
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
		if err := write(w, want); err != nil {
			return err
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

// numbers prints c.Count numbers of the series tag c.Tag, one per line, in
// their template form (--format is for plain IDs).
func (c *nextCmd) numbers(ctx context.Context, a *segment.Allocator, out *streams) error {
	if c.Format != "" && c.Format != "decimal" {
		return fmt.Errorf("tag %s is a series of business numbers: they print as their template shows them; drop --format", c.Tag)
	}
	return c.batches(ctx, out, func(w *bufio.Writer, want int) error {
		nums, err := a.NextNumbers(ctx, c.Tag, want)
		if err != nil {
			return err
		}
		for _, n := range nums {
			if _, err := fmt.Fprintln(w, n.Text); err != nil {
				return err
			}
		}
		return nil
	})
}
