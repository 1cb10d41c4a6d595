package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/flakeid/flakeid/client"
)

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
		if c.uuidForm() != 0 {
			texts, err = cl.NextUUIDs(ctx, want, c.Format, c.Prefix)
		} else if !masked {
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
			buf = c.appendLine(buf[:0], id)
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
