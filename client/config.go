package client

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Limits and defaults of Config.
const (
	// MaxCount is the most IDs the client asks for in one request (the
	// server's own limit, 100,000 by default, may be lower).
	MaxCount = 10_000_000
	// DefaultTimeout is the default per-attempt timeout.
	DefaultTimeout = 2 * time.Second
	// DefaultLowWater is the default BufferConfig.LowWater.
	DefaultLowWater = 0.5
	// DefaultBackoffMin and DefaultBackoffMax bound the default backoff of
	// an endpoint that failed.
	DefaultBackoffMin = 100 * time.Millisecond
	// DefaultBackoffMax is the default cap of an endpoint's backoff.
	DefaultBackoffMax = 5 * time.Second
)

// ErrInvalidConfig is wrapped by every error of Config.Validate.
var ErrInvalidConfig = errors.New("client: invalid config")

// Config configures a Client. A zero field means its default; Endpoints is
// required. The defaults buffer nothing (a zero Buffer size is its
// default: no buffer); DefaultConfig returns the recommended settings,
// which add the server's default endpoint and a Snowflake buffer.
type Config struct {
	// Endpoints are the base URLs of the servers, such as
	// "http://127.0.0.1:8080" or "https://ids.example.com/prefix". At least
	// one is required, each listed once. Calls go to the endpoint that
	// answered last and move on to the next when it fails. No default.
	Endpoints []string
	// Token, when set, is sent as "Authorization: Bearer <token>". Any
	// text without control characters. Default "" (none sent).
	Token string
	// Timeout bounds each attempt (one HTTP request to one endpoint); the
	// caller's context bounds the whole call. Range 0–5m; 0 means
	// DefaultTimeout (2s).
	Timeout time.Duration
	// HTTPClient sends the requests. Nil means a dedicated client with its
	// own keep-alive connection pool (64 idle connections per host), which
	// Close shuts. A client given here is never closed by Close; its own
	// Timeout, if any, applies on top of Timeout. Default nil.
	HTTPClient *http.Client
	// MaxAttempts is how many requests one call may make, over all
	// endpoints, before it fails with ErrUnavailable. Range 0–1000; 0 means
	// 2×len(Endpoints), at least 3.
	MaxAttempts int
	// BackoffMin and BackoffMax bound the jittered exponential backoff for
	// which an endpoint that failed (network error, timeout, 408, 429 or
	// 5xx) is passed over, and the pause of a call between two rounds over
	// all endpoints: after the n-th consecutive failure (from 0) the delay is
	// drawn from [d/2, d] with d = min(BackoffMax, BackoffMin·2^n). A server's
	// Retry-After lengthens both, the pause up to BackoffMax. Range
	// 0 or more, BackoffMin at most BackoffMax. Zero means
	// DefaultBackoffMin (100ms, or BackoffMax when that is shorter) and
	// DefaultBackoffMax (5s, or BackoffMin when that is longer).
	BackoffMin, BackoffMax time.Duration
	// Buffer configures the local prefetch buffers. Default (zero): none.
	Buffer BufferConfig
}

// BufferConfig configures the client's local ID buffers. A buffer holds
// prefetched ranges of IDs (or, for NextText and NextSegmentText, the
// server's texts) and hands them out in-process (one atomic add per ID); one
// background goroutine per buffer refills it before it runs dry. The sizes
// apply to the ID and the text buffers alike.
//
// Trade-offs: a buffered Snowflake ID keeps the time it was issued at, so it
// may be seconds (or, on an idle client, minutes) older than the moment it is
// used — it is still unique, but its timestamp says when the server issued
// it, and IDs from one client are only roughly time ordered. Buffered segment
// IDs that are not used before the process exits (or Close) are lost: the
// sequence gets gaps, never duplicates.
type BufferConfig struct {
	// Snowflake is how many Snowflake IDs one prefetch asks for. It must
	// not exceed the server's max count (100,000 by default). Range
	// 0–MaxCount. Default 0: no Snowflake buffer (every NextID is a
	// request); DefaultConfig sets 10,000.
	Snowflake int
	// Segment is how many IDs of one tag one prefetch asks for; every tag
	// gets its own buffer on first use. Range 0–MaxCount. Default 0: no
	// segment buffers (segment IDs stay dense).
	Segment int
	// LowWater is the fraction of a prefetch batch below which a buffer is
	// refilled in the background. Range 0–1; 0 means DefaultLowWater (0.5).
	// A buffer holds at most about (1+LowWater)×batch IDs. A refill that
	// fails is tried again in the background after the backoff, or when
	// the servers said they serve again (Retry-After), for as long as the
	// buffer holds IDs: a buffer rides out an outage of every server that
	// is shorter than the LowWater×batch IDs it holds when it asks, at the
	// caller's rate, less the time a refill takes to see the outage end —
	// up to 2×BackoffMax, or about a second when the servers send
	// Retry-After (as flakeid's do while they wait out a quarantine).
	LowWater float64
}

// DefaultConfig returns the recommended settings: the server's default
// address (http://127.0.0.1:8080), a 2s per-attempt timeout, a Snowflake
// buffer of 10,000 IDs refilled at half, and no segment buffering (segment
// IDs stay dense unless the caller opts in with Buffer.Segment).
func DefaultConfig() Config {
	return Config{
		Endpoints:  []string{"http://127.0.0.1:8080"},
		Timeout:    DefaultTimeout,
		BackoffMin: DefaultBackoffMin,
		BackoffMax: DefaultBackoffMax,
		Buffer:     BufferConfig{Snowflake: 10_000, LowWater: DefaultLowWater},
	}
}

// Validate checks every field.
func (c Config) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...)
	}
	if len(c.Endpoints) == 0 {
		return bad("no endpoints")
	}
	seen := map[string]bool{}
	for i, e := range c.Endpoints {
		base, err := parseEndpoint(e)
		if err != nil {
			return bad("endpoint %d (%q): %v", i, e, err)
		}
		if seen[base] {
			return bad("endpoint %d (%q) is listed twice", i, e)
		}
		seen[base] = true
	}
	if strings.ContainsFunc(c.Token, func(r rune) bool { return r < ' ' || r == 0x7f }) {
		return bad("token has control characters")
	}
	switch {
	case c.Timeout < 0 || c.Timeout > 5*time.Minute:
		return bad("timeout %v, want 0–5m", c.Timeout)
	case c.MaxAttempts < 0 || c.MaxAttempts > 1000:
		return bad("max attempts %d, want 0–1000", c.MaxAttempts)
	case c.BackoffMin < 0 || c.BackoffMax < 0:
		return bad("negative backoff (%v, %v)", c.BackoffMin, c.BackoffMax)
	case c.BackoffMax > 0 && c.BackoffMin > c.BackoffMax:
		return bad("backoff min %v exceeds max %v", c.BackoffMin, c.BackoffMax)
	case c.Buffer.Snowflake < 0 || c.Buffer.Snowflake > MaxCount:
		return bad("snowflake buffer %d, want 0–%d", c.Buffer.Snowflake, MaxCount)
	case c.Buffer.Segment < 0 || c.Buffer.Segment > MaxCount:
		return bad("segment buffer %d, want 0–%d", c.Buffer.Segment, MaxCount)
	case !(c.Buffer.LowWater >= 0 && c.Buffer.LowWater <= 1): // also rejects NaN
		return bad("low water %v, want 0–1", c.Buffer.LowWater)
	}
	return nil
}

// withDefaults returns c with the zero fields set to their defaults.
func (c Config) withDefaults() Config {
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.MaxAttempts == 0 {
		c.MaxAttempts = max(3, 2*len(c.Endpoints))
	}
	if c.BackoffMin == 0 {
		c.BackoffMin = DefaultBackoffMin
		if c.BackoffMax > 0 {
			c.BackoffMin = min(c.BackoffMin, c.BackoffMax)
		}
	}
	if c.BackoffMax == 0 {
		c.BackoffMax = max(DefaultBackoffMax, c.BackoffMin)
	}
	if c.Buffer.LowWater == 0 {
		c.Buffer.LowWater = DefaultLowWater
	}
	return c
}

// parseEndpoint checks a base URL and returns it without a trailing slash.
func parseEndpoint(e string) (string, error) {
	u, err := url.Parse(e)
	if err != nil {
		return "", err
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return "", fmt.Errorf("scheme %q, want http or https", u.Scheme)
	case u.Host == "":
		return "", errors.New("no host")
	case u.User != nil:
		return "", errors.New("user info is not supported (use Token)")
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return "", errors.New("a base URL has no query or fragment")
	}
	if _, _, err := net.SplitHostPort(u.Host); err != nil && !strings.Contains(err.Error(), "missing port") {
		return "", fmt.Errorf("host %q: %v", u.Host, err)
	}
	return strings.TrimRight(u.String(), "/"), nil
}

// newHTTPClient returns the dedicated client used when Config.HTTPClient is
// nil: HTTP/1.1 keep-alive (HTTP/2 over TLS) with a deep idle pool, since
// every call is a short request to one of a few hosts.
func newHTTPClient() (*http.Client, *http.Transport) {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = 256
	t.MaxIdleConnsPerHost = 64
	t.IdleConnTimeout = 90 * time.Second
	t.ForceAttemptHTTP2 = true
	return &http.Client{Transport: t}, t
}
