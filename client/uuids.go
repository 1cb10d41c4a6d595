package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"time"

	"github.com/flakeid/flakeid/idview"
)

// NextUUIDs returns n Snowflake IDs as UUID-shaped texts, in the order the
// server issued them: format "uuid7" (RFC 9562 UUIDv7), "typeid" (with
// prefix, or the server's default prefix when prefix is "") or "ulid". They
// are unique by construction, not by chance, and one server's sort in issue
// order (see docs/API.md). One request, never buffered. A format or prefix
// the server would refuse is ErrInvalidArgument before any request.
func (c *Client) NextUUIDs(ctx context.Context, n int, format, prefix string) ([]string, error) {
	if c.closed.Load() {
		return nil, ErrClosed
	}
	if err := c.check(n); err != nil {
		return nil, err
	}
	switch {
	case idview.FormOf(format) == 0:
		return nil, fmt.Errorf("%w: format %q, want uuid7, typeid or ulid", ErrInvalidArgument, format)
	case prefix != "" && format != "typeid":
		return nil, fmt.Errorf("%w: a prefix is for format typeid (got %q)", ErrInvalidArgument, format)
	}
	if err := idview.CheckTypeIDPrefix(prefix); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidArgument, err)
	}
	q := url.Values{"count": {strconv.Itoa(n)}, "format": {format}}
	if prefix != "" {
		q.Set("prefix", prefix)
	}
	var out []string
	e, err := c.t.getFrom(ctx, "/v1/snowflake/next?"+q.Encode(), func(r io.Reader) error {
		var resp struct {
			IDs []string `json:"ids"`
		}
		if err := json.NewDecoder(r).Decode(&resp); err != nil {
			return err
		}
		if len(resp.IDs) != n {
			return fmt.Errorf("%d IDs, asked for %d", len(resp.IDs), n)
		}
		for i, s := range resp.IDs {
			u, _, _, err := idview.ParseText(s)
			if err == nil {
				err = u.CheckV7()
			}
			if err != nil {
				return fmt.Errorf("ID %d of the answer, %q: %v", i, s, err)
			}
		}
		out = resp.IDs
		return nil
	})
	if err == nil {
		err = c.spaces.vet(ctx, c.t, e)
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Bounds are the smallest and largest Snowflake IDs whose time lies in a
// window, as a server answers them (see snowflake.Layout.Bounds).
type Bounds struct {
	// Min and Max bound the IDs of the window, both included.
	Min, Max int64
	// From and To are the window the bounds cover exactly, [From, To).
	From, To time.Time
	// Layout is the server's layout.
	Layout string
	// Note is set by a server that masks Snowflake IDs: the bounds are
	// internal IDs.
	Note string
}

// Bounds asks a server for the smallest and largest Snowflake IDs whose
// time lies in [from, to): each RFC 3339, a date, Unix milliseconds, "now"
// or an offset from now ("-1h", "-7d"); "" means the layout's epoch (from)
// or end (to). A window with no ID in it is ErrInvalidArgument.
func (c *Client) Bounds(ctx context.Context, from, to string) (Bounds, error) {
	if c.closed.Load() {
		return Bounds{}, ErrClosed
	}
	q := url.Values{}
	if from != "" {
		q.Set("from", from)
	}
	if to != "" {
		q.Set("to", to)
	}
	path := "/v1/snowflake/bounds"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var b Bounds
	err := c.t.get(ctx, path, func(r io.Reader) error {
		var resp struct {
			Min, Max jsonInt
			From, To time.Time
			Layout   string
			Note     string
		}
		if err := json.NewDecoder(r).Decode(&resp); err != nil {
			return err
		}
		b = Bounds{Min: int64(resp.Min), Max: int64(resp.Max), From: resp.From, To: resp.To, Layout: resp.Layout, Note: resp.Note}
		return nil
	})
	return b, err
}
