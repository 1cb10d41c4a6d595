package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/url"
)

// Segment is a whole segment of a tag that a server handed to this client
// alone: the IDs First, First+Stride, …, Last (Count of them). Stride is
// above 1 when the tag is served from several databases, each with its
// share of the IDs.
type Segment struct {
	Tag                 string
	First, Last, Stride int64
}

// Count is the number of IDs in the segment.
func (s Segment) Count() int64 { return (s.Last-s.First)/s.Stride + 1 }

// All yields the segment's IDs in increasing order.
func (s Segment) All() iter.Seq[int64] {
	return func(yield func(int64) bool) {
		for id := s.First; id <= s.Last; id += s.Stride {
			if !yield(id) || id > s.Last-s.Stride {
				return
			}
		}
	}
}

// tinyidCodeHeader is the header in which flakeid gives, on a failed
// answer of Tinyid's paths, the code its own API would answer.
const tinyidCodeHeader = "X-Flakeid-Error-Code"

// TakeSegment asks a server for a whole segment of tag for this client
// alone, as Didi Tinyid's client does (GET /tinyid/id/nextSegmentId): the
// caller then hands out its IDs itself, with no request per ID. A segment
// is the tag's configured step (its share of it, with several databases);
// the IDs the caller does not use are lost (a gap, never a duplicate), and
// no other client or server ever hands them out.
//
// The token, if the server needs one, is Config.Token (a flakeid token, or
// one of Tinyid's tiny_id_token). Errors are as elsewhere: an unknown tag
// is an *APIError matching ErrNotFound; a store that is down moves the call
// to the next endpoint. It works against a Tinyid server too, whose errors
// (codes 5 and 6) read as permission_denied and unavailable.
func (c *Client) TakeSegment(ctx context.Context, tag string) (Segment, error) {
	if c.closed.Load() {
		return Segment{}, ErrClosed
	}
	if tag == "" {
		return Segment{}, fmt.Errorf("%w: no tag", ErrInvalidArgument)
	}
	var seg Segment
	_, err := c.t.getWithHeader(ctx, "/tinyid/id/nextSegmentId?bizType="+url.QueryEscape(tag), func(h http.Header, r io.Reader) error {
		var ans struct {
			Data *struct {
				CurrentID jsonInt `json:"currentId"`
				MaxID     jsonInt `json:"maxId"`
				Delta     jsonInt `json:"delta"`
				Remainder jsonInt `json:"remainder"`
			} `json:"data"`
			Code    int    `json:"code"`
			Message string `json:"message"`
		}
		if err := json.NewDecoder(r).Decode(&ans); err != nil {
			return err
		}
		if ans.Code != 200 || ans.Data == nil {
			return tinyidError(h.Get(tinyidCodeHeader), ans.Code, ans.Message)
		}
		d := ans.Data
		seg = Segment{Tag: tag, First: int64(d.CurrentID) + int64(d.Delta), Last: int64(d.MaxID), Stride: int64(d.Delta)}
		switch {
		case seg.Stride < 1 || d.Remainder < 0 || d.Remainder >= d.Delta:
			return fmt.Errorf("segment of %q with delta %d and remainder %d", tag, d.Delta, d.Remainder)
		case seg.First > seg.Last || (seg.Last-seg.First)%seg.Stride != 0 || seg.First%seg.Stride != int64(d.Remainder):
			return fmt.Errorf("segment of %q: currentId %d, maxId %d, delta %d, remainder %d do not make a run of IDs", tag, d.CurrentID, d.MaxID, d.Delta, d.Remainder)
		}
		return nil
	})
	if err != nil {
		return Segment{}, err
	}
	return seg, nil
}

// tinyidError is the *APIError of a failed answer of Tinyid's paths: by
// flakeid's code when the server gave one, else by Tinyid's (5: the token
// is refused; anything else: the server failed).
func tinyidError(code string, tinyidCode int, message string) *APIError {
	status := map[string]int{"invalid_argument": 400, "unauthenticated": 401, "permission_denied": 403, "not_found": 404,
		"unavailable": 503, "resource_exhausted": 507, "internal": 500}[code]
	switch {
	case status != 0:
	case tinyidCode == 5:
		status, code = 403, "permission_denied"
	default:
		status, code = 503, "unavailable"
	}
	return &APIError{Status: status, Code: code, Message: fmt.Sprintf("%s (Tinyid code %d)", message, tinyidCode)}
}
