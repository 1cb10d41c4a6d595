// Package client is the Go SDK of flakeid's ID service: it asks one of
// several servers for Snowflake IDs, segment IDs and ID decoding over the
// HTTP/JSON API, fails over between them, and can keep local buffers of
// prefetched IDs so that most calls never touch the network.
//
// # Failover
//
// A call goes to the endpoint that answered last. A network error, a
// timeout (Config.Timeout per attempt), or an answer of 408, 429 or 5xx
// marks that endpoint down for a jittered exponential backoff and the call
// moves on to the next endpoint (endpoints marked down come last, so a call
// still tries them when all are down); after a full round it pauses for a
// backoff, or until the soonest endpoint is back by its server's Retry-After.
// After Config.MaxAttempts requests the call fails with an error wrapping
// ErrUnavailable and the last failure; so it does at once when the caller's
// context would end before the next round (a server waiting out a new
// worker-id lease says, in Retry-After, when it issues again), so that a
// caller with a deadline never waits it out for nothing. While every
// endpoint is marked down until after the caller's deadline, a call asks
// just one of them, each call the next in turn: an outage costs a caller a
// request per call, and a node back early is still found. Any other 4xx
// answer is the caller's fault and is returned at once as an *APIError. The
// caller's context bounds the whole call.
//
// # Buffers
//
// With Config.Buffer.Snowflake (or .Segment) set, the client keeps prefetched
// ranges of IDs in-process. NextID then costs one atomic add (tens of
// millions of IDs per second from one goroutine); when the buffer falls below
// LowWater×batch, one background goroutine fetches the next batch. A call
// that finds the buffer empty waits for that refill, bounded by its context.
// NextText and NextSegmentText, which return IDs as the server writes them
// (masked texts, from a server that masks them), have buffers of their own
// that work the same way.
// Buffered Snowflake IDs keep the time they were issued at (they may be
// seconds old when used, and are still unique); buffered segment IDs not used
// before the process exits are lost (gaps, never duplicates). See
// BufferConfig.
//
// # Local generation
//
// NewLocalGenerator goes further: a server leases a worker id from its
// coordinator for this process, which then makes Snowflake IDs itself, with
// no request per ID, inside the reservation it was last told (see
// LocalGenerator).
//
// A Client is safe for concurrent use. Close it to stop the background
// refills.
package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Client asks flakeid servers for IDs; create it with New.
type Client struct {
	closed atomic.Bool
	t      *transport
	flake  *buffer  // nil when the Snowflake buffer is disabled
	texts  *buffer  // Snowflake texts (NextText); nil when flake is
	cfg    Config   // with defaults applied
	tags   sync.Map // segment tag → *buffer of IDs
	tagTxt sync.Map // segment tag → *buffer of texts
	spaces spaces   // what each endpoint issues Snowflake IDs from

	bg     context.Context // the refills' context: ends at Close
	cancel context.CancelFunc
	mu     sync.Mutex // guards shut and wg.Add
	shut   bool
	wg     sync.WaitGroup
}

// New checks cfg and returns a Client. It makes no request: buffers fill on
// first use.
func New(cfg Config) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	c := &Client{t: newTransport(cfg), cfg: cfg}
	c.bg, c.cancel = context.WithCancel(context.Background())
	if cfg.Buffer.Snowflake > 0 {
		c.flake = newBuffer(c, "", false, cfg.Buffer.Snowflake, cfg.Buffer.LowWater)
		c.texts = newBuffer(c, "", true, cfg.Buffer.Snowflake, cfg.Buffer.LowWater)
	}
	return c, nil
}

// NextID returns one Snowflake ID. From the buffer it neither blocks nor
// looks at ctx unless the buffer is empty; then it waits for the refill as
// long as ctx allows. Without a buffer it is one request.
func (c *Client) NextID(ctx context.Context) (int64, error) {
	if c.closed.Load() {
		return 0, ErrClosed
	}
	if b := c.flake; b != nil {
		return b.next(ctx)
	}
	spans, err := c.fetch(ctx, "", 1)
	if err != nil {
		return 0, err
	}
	return spans[0].first, nil
}

// NextIDs returns n Snowflake IDs, 1 ≤ n ≤ MaxCount (and at most the
// server's max count, 100,000 by default). When the buffer is enabled and n
// is at most half a batch, they come from the buffer; a larger n is one
// request of its own, which leaves the buffer for NextID.
func (c *Client) NextIDs(ctx context.Context, n int) ([]int64, error) {
	if err := c.check(n); err != nil {
		return nil, err
	}
	if b := c.flake; b != nil && int64(n) <= b.batch/2 {
		return b.take(ctx, int64(n))
	}
	spans, err := c.fetch(ctx, "", int64(n))
	if err != nil {
		return nil, err
	}
	return expand(make([]int64, 0, n), spans), nil
}

// NextSegment returns the next ID of a segment tag. With Buffer.Segment set
// it comes from the tag's buffer (created on first use), as NextID's do;
// otherwise it is one request. An unknown tag fails with an *APIError
// matching ErrNotFound.
func (c *Client) NextSegment(ctx context.Context, tag string) (int64, error) {
	b, err := c.segment(tag)
	if err != nil {
		return 0, err
	}
	if b != nil {
		return b.next(ctx)
	}
	spans, err := c.fetch(ctx, tag, 1)
	if err != nil {
		return 0, err
	}
	return spans[0].first, nil
}

// NextSegmentIDs returns n IDs of a segment tag, 1 ≤ n ≤ MaxCount (and at
// most the server's max count). As with NextIDs, n up to half a batch comes
// from the tag's buffer when segment buffering is on, a larger n is a
// request of its own.
func (c *Client) NextSegmentIDs(ctx context.Context, tag string, n int) ([]int64, error) {
	if err := c.check(n); err != nil {
		return nil, err
	}
	b, err := c.segment(tag)
	if err != nil {
		return nil, err
	}
	if b != nil && int64(n) <= b.batch/2 {
		return b.take(ctx, int64(n))
	}
	spans, err := c.fetch(ctx, tag, int64(n))
	if err != nil {
		return nil, err
	}
	return expand(make([]int64, 0, n), spans), nil
}

// Parts are the fields of a decoded Snowflake ID.
type Parts struct {
	// ID is the ID itself (the internal ID, when the input was masked).
	ID int64
	// Masked is the input text when the server read it as a masked ID,
	// else "". KeyID is then the id of the key that unmasked it (0–31).
	Masked string
	KeyID  int
	// Time is when the ID was issued, to the layout's time unit.
	Time time.Time
	// Tick is the time field: time units since the layout's epoch.
	Tick int64
	// Datacenter, Worker and Sequence are the other fields.
	Datacenter, Worker, Sequence int64
	// Form is "uuid7", "typeid" or "ulid" when the input was a UUID-shaped
	// text of the ID, else ""; UUID is then the UUID it is, and Prefix a
	// TypeID's prefix.
	Form, UUID, Prefix string
}

// Reading says how a masking server reads a text to decode: see DecodeAs.
type Reading string

// The readings of DecodeAs.
const (
	// ReadAuto: the one reading the text has on the server — masked when
	// the server has mask keys and the text unmasks (right length, a known
	// key id, a valid check character), plain when it parses as a plain ID.
	// A text with both readings is refused as ambiguous
	// (ErrInvalidArgument): with base62 texts or 53-bit IDs most masked
	// texts are also valid plain base32, so decode those with ReadMasked.
	ReadAuto Reading = ""
	// ReadPlain: a plain ID only (decimal or another plain text form).
	ReadPlain Reading = "plain"
	// ReadMasked: a masked text only.
	ReadMasked Reading = "masked"
)

// Decode asks a server to split id (decimal, any text form the server
// accepts, or a masked text when the server masks) into its fields, by the
// server's layout. It is DecodeAs with ReadAuto. An invalid ID fails with
// an *APIError matching ErrInvalidArgument.
func (c *Client) Decode(ctx context.Context, id string) (Parts, error) {
	return c.DecodeAs(ctx, id, ReadAuto)
}

// DecodeAs is Decode with the reading of id said: ReadMasked or ReadPlain
// settle a text that a masking server finds ambiguous, because it is both a
// masked text and a valid plain ID. Unmasking needs a token with the unmask
// (or admin) right when the server checks tokens. Any other reading fails
// with ErrInvalidArgument.
func (c *Client) DecodeAs(ctx context.Context, id string, as Reading) (Parts, error) {
	if c.closed.Load() {
		return Parts{}, ErrClosed
	}
	id = strings.TrimSpace(id)
	if id == "" {
		return Parts{}, fmt.Errorf("%w: empty ID", ErrInvalidArgument)
	}
	path := "/v1/decode/" + url.PathEscape(id)
	switch as {
	case ReadAuto:
	case ReadPlain, ReadMasked:
		path += "?as=" + string(as)
	default:
		return Parts{}, fmt.Errorf("%w: reading %q, want %q, %q or %q", ErrInvalidArgument, string(as), ReadAuto, ReadPlain, ReadMasked)
	}
	var p Parts
	err := c.t.get(ctx, path, func(r io.Reader) error {
		var resp struct {
			ID         jsonInt   `json:"id"`
			Masked     string    `json:"masked"`
			KeyID      jsonInt   `json:"key_id"`
			Time       time.Time `json:"time"`
			UnixMS     *jsonInt  `json:"unix_ms"`
			Tick       jsonInt   `json:"tick"`
			Datacenter jsonInt   `json:"datacenter"`
			Worker     jsonInt   `json:"worker"`
			Sequence   jsonInt   `json:"sequence"`
			Form       string    `json:"form"`
			UUID       string    `json:"uuid"`
			Prefix     string    `json:"prefix"`
		}
		if err := json.NewDecoder(r).Decode(&resp); err != nil {
			return err
		}
		p = Parts{ID: int64(resp.ID), Masked: resp.Masked, KeyID: int(resp.KeyID), Time: resp.Time, Tick: int64(resp.Tick),
			Datacenter: int64(resp.Datacenter), Worker: int64(resp.Worker), Sequence: int64(resp.Sequence),
			Form: resp.Form, UUID: resp.UUID, Prefix: resp.Prefix}
		if p.Time.IsZero() && resp.UnixMS != nil {
			p.Time = time.UnixMilli(int64(*resp.UnixMS)).UTC()
		}
		return nil
	})
	if err != nil {
		return Parts{}, err
	}
	return p, nil
}

// Close stops the background refills and waits for them, then closes the
// idle connections of the client's own HTTP transport. Calls in flight are
// not interrupted; later calls fail with ErrClosed. IDs left in the buffers
// are dropped. Close is idempotent and always returns nil.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.shut {
		c.mu.Unlock()
		return nil
	}
	c.shut = true
	c.closed.Store(true)
	c.mu.Unlock()
	c.cancel()
	c.wg.Wait()
	if c.t.own != nil {
		c.t.own.CloseIdleConnections()
	}
	return nil
}

// spawn runs f in a goroutine that Close waits for, unless the client is
// closed.
func (c *Client) spawn(f func()) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.shut {
		return false
	}
	c.wg.Go(f)
	return true
}

// check validates a count and that the client is open.
func (c *Client) check(n int) error {
	if c.closed.Load() {
		return ErrClosed
	}
	if n < 1 || n > MaxCount {
		return fmt.Errorf("%w: count %d, want 1–%d", ErrInvalidArgument, n, MaxCount)
	}
	return nil
}

// segment returns the tag's buffer of IDs (nil when segment buffering is
// off).
func (c *Client) segment(tag string) (*buffer, error) {
	return c.segmentBuffer(tag, false)
}

// segmentTexts returns the tag's buffer of texts (nil when segment
// buffering is off).
func (c *Client) segmentTexts(tag string) (*buffer, error) {
	return c.segmentBuffer(tag, true)
}

// segmentBuffer returns the tag's buffer of IDs or of texts, created on
// first use (nil when segment buffering is off).
func (c *Client) segmentBuffer(tag string, texts bool) (*buffer, error) {
	if c.closed.Load() {
		return nil, ErrClosed
	}
	if tag == "" {
		return nil, fmt.Errorf("%w: empty tag", ErrInvalidArgument)
	}
	if c.cfg.Buffer.Segment == 0 {
		return nil, nil
	}
	home := c.segmentBuffers(texts)
	if b, ok := home.Load(tag); ok {
		return b.(*buffer), nil
	}
	v, _ := home.LoadOrStore(tag, newBuffer(c, tag, texts, c.cfg.Buffer.Segment, c.cfg.Buffer.LowWater))
	return v.(*buffer), nil
}

// segmentBuffers is the map of the tags' buffers of texts, or of IDs.
func (c *Client) segmentBuffers(texts bool) *sync.Map {
	if texts {
		return &c.tagTxt
	}
	return &c.tags
}

// idsPath is the path that hands out the IDs of a segment tag, or Snowflake
// IDs when tag is "".
func idsPath(tag string) string {
	if tag == "" {
		return "/v1/snowflake/next"
	}
	return "/v1/segment/" + url.PathEscape(tag) + "/next"
}

// fetch asks the servers for n IDs of tag (Snowflake IDs when tag is "")
// as ranges.
func (c *Client) fetch(ctx context.Context, tag string, n int64) ([]span, error) {
	var spans []span
	e, err := c.t.getFrom(ctx, idsPath(tag)+"?count="+strconv.FormatInt(n, 10)+"&format=ranges", func(r io.Reader) error {
		var err error
		spans, err = parseRanges(r, n, tag)
		return err
	})
	if err == nil && tag == "" {
		err = c.spaces.vet(ctx, c.t, e)
	}
	if err != nil {
		return nil, err
	}
	return spans, nil
}
