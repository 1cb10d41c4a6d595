package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// NextText returns one Snowflake ID as the server writes it: a masked text
// when the server masks Snowflake IDs (serve --mask-snowflake), a decimal
// string otherwise. Use it, not NextID, against a masking server, which
// refuses the ranges NextID's buffer reads. With Buffer.Snowflake set it
// comes from a buffer of texts, refilled in the background like NextID's
// (one mutex-free atomic add per call when the buffer holds texts);
// otherwise it is one request.
func (c *Client) NextText(ctx context.Context) (string, error) {
	if c.closed.Load() {
		return "", ErrClosed
	}
	if b := c.texts; b != nil {
		return b.nextText(ctx)
	}
	texts, err := c.fetchTexts(ctx, "", 1)
	if err != nil {
		return "", err
	}
	return texts[0], nil
}

// NextTexts returns n Snowflake IDs, 1 ≤ n ≤ MaxCount, as NextText writes
// them. As with NextIDs, n up to half a batch comes from the text buffer
// when Buffer.Snowflake is set; a larger n is a request of its own.
func (c *Client) NextTexts(ctx context.Context, n int) ([]string, error) {
	if err := c.check(n); err != nil {
		return nil, err
	}
	if b := c.texts; b != nil && int64(n) <= b.batch/2 {
		return b.takeTexts(ctx, int64(n))
	}
	return c.fetchTexts(ctx, "", n)
}

// NextSegmentText returns the next ID of a segment tag as the server writes
// it: a masked text when the server masks the tag (--mask-tags), a decimal
// string otherwise. With Buffer.Segment set it comes from the tag's buffer
// of texts (created on first use, apart from NextSegment's buffer of IDs);
// otherwise it is one request.
func (c *Client) NextSegmentText(ctx context.Context, tag string) (string, error) {
	b, err := c.segmentTexts(tag)
	if err != nil {
		return "", err
	}
	if b != nil {
		return b.nextText(ctx)
	}
	texts, err := c.fetchTexts(ctx, tag, 1)
	if err != nil {
		return "", err
	}
	return texts[0], nil
}

// NextSegmentTexts returns n IDs of a segment tag, 1 ≤ n ≤ MaxCount, as
// NextSegmentText writes them: from the tag's buffer of texts when n is at
// most half a batch and Buffer.Segment is set, else one request.
func (c *Client) NextSegmentTexts(ctx context.Context, tag string, n int) ([]string, error) {
	if err := c.check(n); err != nil {
		return nil, err
	}
	b, err := c.segmentTexts(tag)
	if err != nil {
		return nil, err
	}
	if b != nil && int64(n) <= b.batch/2 {
		return b.takeTexts(ctx, int64(n))
	}
	return c.fetchTexts(ctx, tag, n)
}

// textsResponse is the body of /v1/…/next in its default form.
type textsResponse struct {
	Tag    string     `json:"tag"`
	Masked bool       `json:"masked"`
	Series bool       `json:"series"`
	IDs    []jsonText `json:"ids"`
}

// jsonText is an ID of a next answer as text: a JSON string's value, or a
// JSON number's digits (from an older server).
type jsonText string

// UnmarshalJSON reads a string, or a number as its text; a string without
// escapes (every ID's text) costs one allocation.
func (j *jsonText) UnmarshalJSON(b []byte) error {
	if len(b) >= 2 && b[0] == '"' && b[len(b)-1] == '"' && !bytes.ContainsRune(b, '\\') {
		*j = jsonText(b[1 : len(b)-1])
		return nil
	}
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*j = jsonText(s)
		return nil
	}
	*j = jsonText(b)
	return nil
}

// fetchTextSpan fetches n texts for a text buffer, as one span.
func (c *Client) fetchTextSpan(ctx context.Context, tag string, n int64) ([]span, error) {
	texts, err := c.fetchTexts(ctx, tag, int(n))
	if err != nil {
		return nil, err
	}
	return []span{{count: n, texts: texts}}, nil
}

// fetchTexts asks the servers for n IDs of tag (Snowflake IDs when tag is
// "") as texts.
func (c *Client) fetchTexts(ctx context.Context, tag string, n int) ([]string, error) {
	var out []string
	e, err := c.t.getFrom(ctx, idsPath(tag)+"?count="+strconv.Itoa(n), func(r io.Reader) error {
		var err error
		out, err = parseTexts(r, n, tag, false)
		return err
	})
	if err == nil && tag == "" {
		err = c.spaces.vet(ctx, c.t, e)
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

// parseTexts decodes a next answer of IDs and checks it holds exactly n (of
// tag, when the answer names one). Plain IDs are decimal JSON strings (or
// numbers, from an older server); masked IDs are strings.
func parseTexts(r io.Reader, n int, tag string, series bool) ([]string, error) {
	// Room for the n IDs asked for: the decoder appends to it.
	resp := textsResponse{IDs: make([]jsonText, 0, n)}
	if err := json.NewDecoder(r).Decode(&resp); err != nil {
		return nil, err
	}
	if tag != "" && resp.Tag != "" && resp.Tag != tag {
		return nil, fmt.Errorf("IDs of tag %q, asked for %q", resp.Tag, tag)
	}
	switch {
	case resp.Series && !series:
		return nil, fmt.Errorf("%w: tag %q is a series of business numbers: take them with NextNumbers", ErrInvalidArgument, tag)
	case series && !resp.Series:
		return nil, fmt.Errorf("%w: tag %q is not a series of business numbers: take its IDs with NextSegment", ErrInvalidArgument, tag)
	}
	if len(resp.IDs) != n {
		return nil, fmt.Errorf("%d IDs, asked for %d", len(resp.IDs), n)
	}
	out := make([]string, len(resp.IDs))
	for i, t := range resp.IDs {
		s := string(t)
		if s == "" {
			return nil, fmt.Errorf("ID %d of the answer is empty", i)
		}
		if resp.Series {
			if strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
				return nil, fmt.Errorf("number %d of the answer, %q, has a control character", i, s)
			}
		} else if resp.Masked {
			// Digits and letters, and the symbols of Crockford's base32
			// check character (*~$=), which ends one base32 text in nine.
			if strings.ContainsFunc(s, func(r rune) bool {
				return !('0' <= r && r <= '9' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || strings.ContainsRune("*~$=", r))
			}) {
				return nil, fmt.Errorf("masked ID %d of the answer, %q, is not base32 or base62 text", i, s)
			}
		} else if _, err := strconv.ParseInt(s, 10, 64); err != nil {
			return nil, fmt.Errorf("ID %d of the answer, %q, is not a decimal int64 and the answer is not masked", i, s)
		}
		out[i] = s
	}
	return out, nil
}

// NextNumber returns the next number of a series tag (ORD-20261128-000123):
// one request, never buffered — a number carries the period the server
// issued it in, which a buffer could hand out after the period ended.
// A tag that is not a series is ErrInvalidArgument (the IDs the server
// answered are lost: a gap, never a duplicate).
func (c *Client) NextNumber(ctx context.Context, tag string) (string, error) {
	nums, err := c.NextNumbers(ctx, tag, 1)
	if err != nil {
		return "", err
	}
	return nums[0], nil
}

// NextNumbers returns n numbers of a series tag, 1 ≤ n ≤ MaxCount, in the
// order the server issued them, with one request (see NextNumber).
func (c *Client) NextNumbers(ctx context.Context, tag string, n int) ([]string, error) {
	if err := c.check(n); err != nil {
		return nil, err
	}
	if c.closed.Load() {
		return nil, ErrClosed
	}
	if tag == "" {
		return nil, fmt.Errorf("%w: empty tag", ErrInvalidArgument)
	}
	var out []string
	_, err := c.t.getFrom(ctx, idsPath(tag)+"?count="+strconv.Itoa(n), func(r io.Reader) error {
		var err error
		out, err = parseTexts(r, n, tag, true)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
