// Package server is flakeid's ID service: HTTP/JSON (with Meituan Leaf's
// paths), Connect, gRPC and gRPC-Web on one port (Serve), the Redis
// protocol on another (ServeRESP: INCR and ID.NEXT for any Redis client),
// Prometheus metrics, health and readiness, bearer-token auth scoped to
// tags, TLS, graceful shutdown.
//
// The server hands out Snowflake IDs from a node.Node (a generator under a
// leased worker id) and segment IDs from a segment.Allocator; cmd/flakeid
// builds both from flags and runs the server (`flakeid serve`).
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flakeid/flakeid/idmask"
	"github.com/flakeid/flakeid/idview"
	"github.com/flakeid/flakeid/node"
	"github.com/flakeid/flakeid/segment"
	"github.com/flakeid/flakeid/snowflake"
)

// Config is the server's own configuration (the node, the segment store and
// the coordinator are configured by their packages). A zero field means its
// default, so the zero Config serves with every default; DefaultConfig
// returns them all. Validate checks a Config with its defaults applied.
type Config struct {
	// Listen is the address to serve on (host:port); Serve is given its
	// listener, this is for the caller that opens it. Default
	// 127.0.0.1:8080.
	Listen string `json:"listen"`
	// MaxCount is the most IDs one request may ask for. Range 1–10,000,000.
	// Default 100,000.
	MaxCount int `json:"max_count"`
	// StreamBatch is the most IDs per message of a stream. Range
	// 1–MaxCount. Default 4096, or MaxCount when that is smaller.
	StreamBatch int `json:"stream_batch"`
	// Tokens enable bearer-token auth when not empty: every ID and admin
	// request needs "Authorization: Bearer <token>" of a listed token, and
	// the token's Tags say which segment tags it may use. Health, readiness
	// and metrics stay open. Tokens of at least 16 characters, each listed
	// once. Default none (no auth).
	Tokens []Token `json:"tokens"`
	// TLSCert and TLSKey are PEM files; both set serves HTTPS (HTTP/2 with
	// ALPN), neither serves plain HTTP with h2c. Both or neither. Default
	// neither.
	TLSCert string `json:"tls_cert"`
	TLSKey  string `json:"tls_key"`
	// ShutdownTimeout bounds the graceful drain of in-flight requests (and
	// of the RESP connections' replies) once Serve's (ServeRESP's) context
	// ends. Range up to 5m; negative: do not wait (Serve returns at once,
	// ServeRESP closes its connections at once). Default 10s.
	ShutdownTimeout time.Duration `json:"shutdown_timeout"`
	// ReadHeaderTimeout bounds reading a request's headers. Range 1s–5m,
	// at most ReadTimeout. Default 10s, or ReadTimeout when that is shorter.
	ReadHeaderTimeout time.Duration `json:"read_header_timeout"`
	// ReadTimeout bounds reading a whole request, headers and body, from
	// its first byte: a client that sends slower has its connection closed
	// (HTTP/1) or its request body cut off (HTTP/2). Range 1s–5m. Default
	// 10s.
	ReadTimeout time.Duration `json:"read_timeout"`
	// WriteTimeout bounds handling and writing one request's answer, from
	// the end of reading its headers; an answer not written by then is cut
	// off. A stream
	// (StreamSnowflake, gRPC health Watch) instead has its deadline set to
	// now + WriteTimeout before each message and lifted once the message
	// is out, so it lasts as long as the client keeps reading. Range 1s–10m.
	// Default 30s.
	WriteTimeout time.Duration `json:"write_timeout"`
	// IdleTimeout is how long a keep-alive connection (HTTP/1.1, or
	// HTTP/2 with no request in flight) may stay idle before the server
	// closes it. Range 1s–1h. Default 30s.
	IdleTimeout time.Duration `json:"idle_timeout"`
	// MaxConns is the most connections open at once on a listener served by
	// Serve, idle keep-alive ones included. Beyond it a new connection is
	// accepted, answered "503 Service Unavailable" (JSON error code
	// unavailable, Retry-After: 1) and closed; with TLS it is closed at
	// once. Range 1–1,000,000. Default 1024.
	MaxConns int `json:"max_conns"`
	// MetricsMaxTags is how many distinct segment tags get a tag label of
	// their own in the metrics (first come, first served); the IDs and
	// buffers of the others are counted under tag="(other)", so that
	// auto-created tags cannot grow the metrics without bound. Range up to
	// 100,000; negative: none (every tag is counted under "(other)").
	// Default 1000.
	MetricsMaxTags int `json:"metrics_max_tags"`
	// CORSOrigins are the origins ("https://app.example.com", as a browser
	// sends them in Origin; "*" for any) whose pages may call this server
	// from a browser: the JSON API, Connect, gRPC-Web, the Leaf paths.
	// Their preflights are answered (204), their answers carry
	// Access-Control-Allow-Origin; a preflight from another origin is
	// answered 403. Default (empty): off, no CORS headers, OPTIONS is 405.
	// Tokens still apply: a page sends its own Authorization header.
	CORSOrigins []string `json:"cors_origins"`
	// Mask hands out masked (non-guessable) IDs, globally or per segment
	// tag, and lets decode read them; see MaskConfig. Default (zero) off.
	Mask MaskConfig `json:"mask"`
	// TypeIDPrefix is the prefix of the TypeIDs the server writes for
	// format=typeid when a request names none (order → order_01jpgt…): up
	// to 63 lowercase letters and underscores, not first or last. Default
	// none (the bare 26 characters).
	TypeIDPrefix string `json:"typeid_prefix"`
	// RESP configures the Redis-protocol listener (ServeRESP); see
	// RESPConfig. Default (zero): no listener, with the limits of
	// DefaultRESPConfig.
	RESP RESPConfig `json:"resp"`
}

// Token is one bearer token and what it may do.
type Token struct {
	// Token is the secret, at least 16 characters.
	Token string `json:"token"`
	// Name identifies the token in logs and metrics (never the secret).
	Name string `json:"name"`
	// Tags are the segment tags the token may use; "*" means all. Empty
	// means none.
	Tags []string `json:"tags"`
	// Snowflake allows Snowflake IDs.
	Snowflake bool `json:"snowflake"`
	// Admin allows creating and changing tags (and unmasking IDs).
	Admin bool `json:"admin"`
	// Unmask allows decoding masked IDs into internal ones (see
	// MaskConfig): whoever may unmask learns the volumes masking hides.
	Unmask bool `json:"unmask"`
}

// DefaultConfig returns the defaults: what the zero Config means, with
// every field filled in.
func DefaultConfig() Config {
	return Config{
		Listen:            "127.0.0.1:8080",
		MaxCount:          100_000,
		StreamBatch:       4096,
		ShutdownTimeout:   10 * time.Second,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       30 * time.Second,
		MaxConns:          1024,
		MetricsMaxTags:    1000,
		RESP:              DefaultRESPConfig(),
	}
}

// withDefaults returns c with its zero fields set to their defaults.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.Listen == "" {
		c.Listen = d.Listen
	}
	if c.MaxCount == 0 {
		c.MaxCount = d.MaxCount
	}
	if c.StreamBatch == 0 {
		c.StreamBatch = d.StreamBatch
		if c.MaxCount > 0 {
			c.StreamBatch = min(c.StreamBatch, c.MaxCount)
		}
	}
	if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = d.ShutdownTimeout
	}
	if c.ReadTimeout == 0 {
		c.ReadTimeout = d.ReadTimeout
	}
	if c.ReadHeaderTimeout == 0 {
		c.ReadHeaderTimeout = d.ReadHeaderTimeout
		if c.ReadTimeout >= time.Second {
			c.ReadHeaderTimeout = min(c.ReadHeaderTimeout, c.ReadTimeout)
		}
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = d.WriteTimeout
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = d.IdleTimeout
	}
	if c.MaxConns == 0 {
		c.MaxConns = d.MaxConns
	}
	if c.MetricsMaxTags == 0 {
		c.MetricsMaxTags = d.MetricsMaxTags
	}
	c.RESP = c.RESP.withDefaults()
	return c
}

// ErrInvalidConfig is wrapped by every error of Validate.
var ErrInvalidConfig = errors.New("server: invalid config")

// Validate checks every field and their relations, with defaults applied.
// Every error wraps ErrInvalidConfig and names the field.
func (c Config) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...)
	}
	c = c.withDefaults()
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		return bad("listen address %q: %v", c.Listen, err)
	}
	switch {
	case c.MaxCount < 1 || c.MaxCount > 10_000_000:
		return bad("max count %d, want 1–10,000,000", c.MaxCount)
	case c.StreamBatch < 1 || c.StreamBatch > c.MaxCount:
		return bad("stream batch %d, want 1–%d (max count)", c.StreamBatch, c.MaxCount)
	case (c.TLSCert == "") != (c.TLSKey == ""):
		return bad("TLS needs both a certificate and a key (cert %q, key %q)", c.TLSCert, c.TLSKey)
	case c.ShutdownTimeout > 5*time.Minute:
		return bad("shutdown timeout %v, want at most 5m (or negative: do not wait)", c.ShutdownTimeout)
	case c.ReadHeaderTimeout < time.Second || c.ReadHeaderTimeout > 5*time.Minute:
		return bad("read header timeout %v, want 1s–5m", c.ReadHeaderTimeout)
	case c.ReadTimeout < time.Second || c.ReadTimeout > 5*time.Minute:
		return bad("read timeout %v, want 1s–5m", c.ReadTimeout)
	case c.ReadHeaderTimeout > c.ReadTimeout:
		return bad("read header timeout %v is longer than the read timeout %v, which bounds the whole request", c.ReadHeaderTimeout, c.ReadTimeout)
	case c.WriteTimeout < time.Second || c.WriteTimeout > 10*time.Minute:
		return bad("write timeout %v, want 1s–10m", c.WriteTimeout)
	case c.IdleTimeout < time.Second || c.IdleTimeout > time.Hour:
		return bad("idle timeout %v, want 1s–1h", c.IdleTimeout)
	case c.MaxConns < 1 || c.MaxConns > 1_000_000:
		return bad("max conns %d, want 1–1,000,000", c.MaxConns)
	case c.MetricsMaxTags > 100_000:
		return bad("metrics max tags %d, want at most 100,000 (or negative: none)", c.MetricsMaxTags)
	case validateCORSOrigins(c.CORSOrigins) != nil:
		return bad("%v", validateCORSOrigins(c.CORSOrigins))
	}
	if err := c.Mask.validate(); err != nil {
		return bad("%v", err)
	}
	if err := idview.CheckTypeIDPrefix(c.TypeIDPrefix); err != nil {
		return bad("typeid prefix: %v", err)
	}
	if err := c.RESP.validate(); err != nil {
		return bad("%v", err)
	}
	seen := map[string]bool{}
	for i, t := range c.Tokens {
		switch {
		case len(t.Token) < 16:
			return bad("token %d (%q) is shorter than 16 characters", i, t.Name)
		case seen[t.Token]:
			return bad("token %d (%q) is listed twice", i, t.Name)
		}
		seen[t.Token] = true
		for _, tag := range t.Tags {
			if tag != "*" {
				if err := segment.ValidName(tag); err != nil {
					return bad("token %d (%q): %v", i, t.Name, err)
				}
			}
		}
	}
	return nil
}

// Options are what a Server serves from.
type Options struct {
	// Config is the server's configuration; its zero fields mean their
	// defaults (see Config).
	Config Config
	// Node issues Snowflake IDs. Required.
	Node *node.Node
	// Segments issues segment IDs; nil answers segment requests with 404.
	Segments *segment.Allocator
	// TinyidTokens reads Didi Tinyid's token table (tiny_id_token: each
	// token with the biz_types it may use), which Tinyid's paths then
	// accept; read again at most once a minute. Set it when Segments is on
	// Tinyid's tables (sqldb's Segments.TinyidTokens). Default nil: those
	// paths take only Config.Tokens, or are open when there are none.
	TinyidTokens func(context.Context) (map[string][]string, error)
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Registry receives the metrics; nil makes a new one (served at
	// /metrics either way, with the Go and process collectors).
	Registry *prometheus.Registry
	// TestClock, when set, serves POST /admin/test/clock?shift=DURATION,
	// which shifts the node's clock (for the fault-injection verifier).
	// Never set it in production; `flakeid serve` sets it only with a hidden
	// test flag.
	TestClock ClockShifter
}

// Server is a running ID service; create it with New.
type Server struct {
	cfg      Config
	node     *node.Node
	segs     *segment.Allocator
	log      *slog.Logger
	reg      *prometheus.Registry
	metrics  *metrics
	tokens   map[string]*Token
	clock    ClockShifter
	handler  http.Handler
	mask     *masking // nil: nothing masked, masked IDs not read
	uuids    *uuidMaker
	resp     *respCommands
	tinyid   *tinyidTokens // nil: no Tinyid token table
	leases   leaseSessions // worker-id leases handed to clients
	started  time.Time
	draining chan struct{}

	// Hot-path helpers: answer buffers, and Content-Type values shared by
	// every answer (net/http only reads header values).
	bufs           sync.Pool
	ctJSON, ctText []string
}

// New checks o and builds the server's handlers.
func New(o Options) (*Server, error) {
	if err := o.Config.Validate(); err != nil {
		return nil, err
	}
	o.Config = o.Config.withDefaults()
	if o.Node == nil {
		return nil, fmt.Errorf("%w: no node", ErrInvalidConfig)
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Registry == nil {
		o.Registry = prometheus.NewRegistry()
	}
	s := &Server{cfg: o.Config, node: o.Node, segs: o.Segments, log: o.Logger, reg: o.Registry,
		clock: o.TestClock, started: time.Now(), draining: make(chan struct{}),
		ctJSON: []string{"application/json"}, ctText: []string{"text/plain; charset=utf-8"}}
	if o.TinyidTokens != nil {
		s.tinyid = &tinyidTokens{load: o.TinyidTokens}
	}
	if len(o.Config.Tokens) > 0 {
		s.tokens = map[string]*Token{}
		for i := range o.Config.Tokens {
			s.tokens[o.Config.Tokens[i].Token] = &o.Config.Tokens[i]
		}
	}
	bits := maskBits(o.Node.Layout())
	if b := o.Config.Mask.Bits; b != 0 && b != bits {
		return nil, fmt.Errorf("%w: mask bits %d, but the layout's IDs are masked in %d bits (%d for a layout whose IDs all stay below 2^53, such as jssafe)",
			ErrInvalidConfig, b, bits, idmask.Bits53)
	}
	mk, err := newMasking(o.Config.Mask, bits)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	if s.uuids, err = newUUIDMaker(o.Node.Layout(), o.Config.TypeIDPrefix); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	s.mask = mk
	m, err := newMetrics(s)
	if err != nil {
		return nil, err
	}
	s.metrics = m
	s.resp = newRESPCommands(m)
	s.handler = cors(s.cfg.CORSOrigins, s.streamDeadlines(s.routes()))
	return s, nil
}

// Handler is the server's whole HTTP handler: the JSON API, the Leaf paths,
// the Connect/gRPC services, health, readiness and metrics. A streaming
// RPC's writer moves the connection's write deadline to now + WriteTimeout
// before each message and lifts it once the message is out (see
// Config.WriteTimeout), so a stream is not cut off at WriteTimeout by a
// server that sets one.
func (s *Server) Handler() http.Handler { return s.handler }

// Serve serves on ln until ctx ends, then drains in-flight requests (up to
// ShutdownTimeout; not at all when it is negative). The caller closes the node afterwards, which releases
// the lease.
//
// Connections are bounded as Config says: a request must arrive within
// ReadTimeout (its headers within ReadHeaderTimeout), an answer be written
// within WriteTimeout, and a keep-alive connection is closed after
// IdleTimeout idle, over HTTP/1.1 and HTTP/2 (h2c included) alike. A stream
// (StreamSnowflake, gRPC health Watch) holds the write deadline only while
// it writes a message, each time for WriteTimeout from the start of the
// write, so it runs as long as the client reads. The timeouts take effect
// within 100 ms after they pass: one ticker cuts off the connections past
// their deadline, instead of a runtime timer per deadline. At most MaxConns
// connections are open on ln at once; those beyond are answered 503 and
// closed (under TLS, closed).
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	dl := newDeadlines(time.Now)
	dl.start(deadlineGrain)
	defer dl.close()
	lim := newConnLimiter(ln, s.cfg.MaxConns, s.cfg.TLSCert != "", dl, s.metrics, s.log)
	defer lim.wait()
	hs := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: s.cfg.ReadHeaderTimeout,
		ReadTimeout:       s.cfg.ReadTimeout,
		WriteTimeout:      s.cfg.WriteTimeout,
		IdleTimeout:       s.cfg.IdleTimeout, // HTTP/2 takes it too
		// HTTP/2 bounds each stream's answer by WriteTimeout; a connection
		// on which nothing can be written for as long is closed.
		HTTP2:     &http.HTTP2Config{WriteByteTimeout: s.cfg.WriteTimeout},
		ErrorLog:  slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
		Protocols: new(http.Protocols),
	}
	hs.Protocols.SetHTTP1(true)
	if s.cfg.TLSCert != "" {
		hs.Protocols.SetHTTP2(true)
	} else {
		hs.Protocols.SetUnencryptedHTTP2(true) // h2c, for gRPC without TLS
	}
	errc := make(chan error, 1)
	go func() {
		var err error
		if s.cfg.TLSCert != "" {
			err = hs.ServeTLS(lim, s.cfg.TLSCert, s.cfg.TLSKey)
		} else {
			err = hs.Serve(lim)
		}
		errc <- err
	}()
	s.log.Info("server: serving", "addr", ln.Addr().String(), "tls", s.cfg.TLSCert != "")
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	close(s.draining) // readiness turns 503 so balancers stop sending
	sctx, cancel := context.WithTimeout(context.Background(), max(s.cfg.ShutdownTimeout, 0))
	defer cancel()
	err := hs.Shutdown(sctx)
	<-errc
	s.log.Info("server: drained", "err", err)
	return err
}

// Ready reports why the server cannot serve Snowflake IDs now, or nil: it
// is draining, the node holds no worker-id lease, its clock has not yet
// passed the high-water mark it started from, or its reservation ran out
// (renewals are failing). A segment tag refused because its store went
// backwards also makes the server not ready, naming the tag, until an
// operator resumes it.
func (s *Server) Ready() error {
	select {
	case <-s.draining:
		return errors.New("shutting down")
	default:
	}
	st := s.node.Status()
	switch {
	case !st.Held && !st.OnReservation:
		return fmt.Errorf("no worker-id lease: %v", st.Err)
	case st.Stats.Lead > snowflake.DefaultMaxWait:
		return fmt.Errorf("the clock is %v behind the worker id's high-water mark", st.Stats.Lead.Round(time.Millisecond))
	case !st.Until.IsZero() && !st.Until.After(st.NotBefore):
		return fmt.Errorf("the worker-id lease is new: nothing is issued before its first renewal")
	case !st.Until.IsZero() && !st.Now.Before(st.Until):
		return fmt.Errorf("the reservation ran out at %s: renewals with the coordinator are failing", st.Until.Format(time.RFC3339Nano))
	}
	return s.segmentsRefused()
}

// nextSnowflake returns n Snowflake IDs as batches.
func (s *Server) nextSnowflake(n int64, dst []snowflake.Batch) ([]snowflake.Batch, error) {
	if n < 1 || n > int64(s.cfg.MaxCount) {
		return dst, apiErrorf(http.StatusBadRequest, codeInvalid, "count %d is out of range: want 1 to %d", n, s.cfg.MaxCount)
	}
	for left := n; left > 0; {
		b, err := s.node.NextN(int(left))
		if err != nil {
			return dst, err
		}
		dst = append(dst, b)
		left -= int64(b.Count)
	}
	s.metrics.issuedSnowflake.Add(float64(n))
	return dst, nil
}

// nextSegment returns n IDs of tag as spans.
func (s *Server) nextSegment(ctx context.Context, tag string, n int64, dst []segment.Span) ([]segment.Span, error) {
	if s.segs == nil {
		return nil, apiErrorf(http.StatusNotFound, codeNotFound, "segment mode is not enabled on this server")
	}
	if n < 1 || n > int64(s.cfg.MaxCount) {
		return nil, apiErrorf(http.StatusBadRequest, codeInvalid, "count %d is out of range: want 1 to %d", n, s.cfg.MaxCount)
	}
	spans, err := s.segs.AppendNext(ctx, tag, int(n), dst)
	if err != nil {
		return nil, err
	}
	s.metrics.segmentIssued(tag).Add(float64(n))
	return spans, nil
}

// decode reads an ID in any plain text form, or a masked one (see
// readID; as is "", "plain" or "masked"; mayUnmask says whether the caller
// may read a masked one), and splits it with the node's layout.
func (s *Server) decode(text, as string, mayUnmask func() error) (decodeInput, snowflake.Parts, error) {
	in, err := s.readID(text, as, mayUnmask)
	if err != nil {
		return in, snowflake.Parts{}, err
	}
	p, err := s.node.Decode(in.id)
	return in, p, err
}
