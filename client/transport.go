package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flakeid/flakeid/internal/backoff"
)

// maxBody bounds a response body the client reads: ranges are small (one
// per tick or segment), so even 10,000,000 IDs fit easily.
const maxBody = 32 << 20

// endpoint is one server and its health as this client has seen it.
type endpoint struct {
	index int
	base  string // without a trailing slash

	mu        sync.Mutex
	failures  int       // consecutive
	downUntil time.Time // passed over until then
}

// fail marks the endpoint down for the next backoff delay, or until the
// time the server said it serves again (its Retry-After), whichever is later.
func (e *endpoint) fail(bo backoff.Backoff, now time.Time, retryAfter time.Duration) {
	e.mu.Lock()
	e.downUntil = now.Add(max(bo.Next(e.failures), retryAfter))
	e.failures++
	e.mu.Unlock()
}

// ok marks the endpoint up.
func (e *endpoint) ok() {
	e.mu.Lock()
	e.failures, e.downUntil = 0, time.Time{}
	e.mu.Unlock()
}

func (e *endpoint) down(now time.Time) (bool, time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return now.Before(e.downUntil), e.downUntil
}

// transport sends GET requests with failover over the endpoints.
type transport struct {
	eps       []*endpoint
	preferred atomic.Int64  // index of the endpoint that answered last
	probes    atomic.Uint64 // calls that asked one endpoint only (see getWithHeader)
	hc        *http.Client
	own       *http.Transport // the dedicated transport, nil for a caller's client
	auth      string          // the Authorization header, or ""
	timeout   time.Duration
	attempts  int
	bo        backoff.Backoff
}

func newTransport(cfg Config) *transport {
	t := &transport{
		hc:       cfg.HTTPClient,
		timeout:  cfg.Timeout,
		attempts: cfg.MaxAttempts,
		bo:       backoff.Backoff{Min: cfg.BackoffMin, Max: cfg.BackoffMax},
	}
	if t.hc == nil {
		t.hc, t.own = newHTTPClient()
	}
	if cfg.Token != "" {
		t.auth = "Bearer " + cfg.Token
	}
	for i, e := range cfg.Endpoints {
		base, _ := parseEndpoint(e) // checked by Validate
		t.eps = append(t.eps, &endpoint{index: i, base: base})
	}
	return t
}

// order returns the endpoints in the order a call tries them: those that are
// up, in turn from the one that answered last, then those marked down, the
// soonest back first (so a call still tries them when every endpoint is
// down).
func (t *transport) order(now time.Time) []*endpoint {
	n := len(t.eps)
	start := int(t.preferred.Load())
	up := make([]*endpoint, 0, n)
	var down []*endpoint
	var until []time.Time
	for k := range n {
		e := t.eps[(start+k)%n]
		if d, u := e.down(now); d {
			down = append(down, e)
			until = append(until, u)
		} else {
			up = append(up, e)
		}
	}
	if len(down) > 1 {
		idx := make([]int, len(down))
		for i := range idx {
			idx[i] = i
		}
		slices.SortStableFunc(idx, func(a, b int) int { return until[a].Compare(until[b]) })
		for _, i := range idx {
			up = append(up, down[i])
		}
		return up
	}
	return append(up, down...)
}

// get sends GET path (with its query) to the endpoints in turn until one
// answers 2xx and decode accepts the body. A 4xx other than 408 and 429 is
// returned at once as an *APIError; other failures mark the endpoint down and
// move on, pausing for a backoff after each full round over the endpoints.
// The caller's ctx bounds everything; after MaxAttempts the last error is
// returned, wrapped with ErrUnavailable. The pause honours the servers'
// Retry-After (up to BackoffMax); when ctx's deadline would end before the
// next round, the call fails at once with ErrUnavailable rather than wait for
// its deadline — so that a caller who retries, or takes the next request,
// does so while the outage lasts instead of queueing behind it. A call whose
// deadline ends before any endpoint is back asks just one of them, the next
// in turn.
func (t *transport) get(ctx context.Context, path string, decode func(io.Reader) error) error {
	_, err := t.getFrom(ctx, path, decode)
	return err
}

// getFrom is get, and the endpoint that answered.
func (t *transport) getFrom(ctx context.Context, path string, decode func(io.Reader) error) (*endpoint, error) {
	return t.getWithHeader(ctx, path, func(_ http.Header, r io.Reader) error { return decode(r) })
}

// getWithHeader is getFrom with the answer's header given to decode too.
func (t *transport) getWithHeader(ctx context.Context, path string, decode func(http.Header, io.Reader) error) (*endpoint, error) {
	return t.call(ctx, http.MethodGet, path, nil, decode)
}

// call is getWithHeader for any method and body (nil: none; else sent as
// application/json).
func (t *transport) call(ctx context.Context, method, path string, body []byte, decode func(http.Header, io.Reader) error) (*endpoint, error) {
	now := time.Now()
	order := t.order(now)
	if dl, ok := ctx.Deadline(); ok {
		// Every endpoint is marked down until after the call's deadline
		// (order puts the soonest back first): the call asks one, each such
		// call the next in turn, so that one back early is found within as
		// many calls as there are endpoints — a circuit breaker's half-open
		// probe — instead of a round trip to each, which would put a caller
		// on a fixed schedule behind it for as long as the outage lasts.
		if down, until := order[0].down(now); down && !until.Before(dl) {
			order = []*endpoint{t.eps[(t.probes.Add(1)-1)%uint64(len(t.eps))]}
		}
	}
	var last error
	for a := range t.attempts {
		if a > 0 && a%len(order) == 0 {
			// The pause: a backoff, or until the soonest endpoint is back
			// by its server's word (capped at BackoffMax).
			d := t.bo.Next(a/len(order) - 1)
			if back := time.Until(t.soonestBack()); back > d {
				d = min(back, t.bo.Max)
			}
			if dl, ok := ctx.Deadline(); ok && time.Now().Add(d).After(dl) {
				return nil, fmt.Errorf("%w: every endpoint failed, and the call's deadline ends before the next round (in %v): %w",
					ErrUnavailable, d.Round(time.Millisecond), last)
			}
			if err := sleep(ctx, d); err != nil {
				return nil, ctxError(err, last)
			}
		}
		e := order[a%len(order)]
		err := t.once(ctx, e, method, path, body, decode)
		if err == nil {
			e.ok()
			t.preferred.Store(int64(e.index))
			return e, nil
		}
		if ctx.Err() != nil {
			return nil, ctxError(ctx.Err(), err)
		}
		if ae, ok := errors.AsType[*APIError](err); ok && !retryable(ae.Status) {
			return nil, err
		}
		if errors.Is(err, ErrInvalidArgument) {
			return nil, err // an answer of another kind than asked for (a series' numbers): every server gives it
		}
		var retryAfter time.Duration
		if ae, ok := errors.AsType[*APIError](err); ok {
			retryAfter = ae.RetryAfter
		}
		e.fail(t.bo, time.Now(), retryAfter)
		last = err
	}
	return nil, fmt.Errorf("%w after %d attempts: %w", ErrUnavailable, t.attempts, last)
}

// soonestBack is the earliest time an endpoint is no longer marked down:
// after a backoff of its own, or when its server said it serves again.
func (t *transport) soonestBack() time.Time {
	var soonest time.Time
	for i, e := range t.eps {
		if _, u := e.down(time.Time{}); i == 0 || u.Before(soonest) {
			soonest = u
		}
	}
	return soonest
}

// ctxError is the error of a call its context ended, with the last failure
// if there was one.
func ctxError(err, last error) error {
	if last == nil {
		return fmt.Errorf("client: %w", err)
	}
	return fmt.Errorf("client: %w (last failure: %w)", err, last)
}

// once is one attempt on one endpoint, bounded by the per-attempt timeout.
func (t *transport) once(ctx context.Context, e *endpoint, method, path string, body []byte, decode func(http.Header, io.Reader) error) error {
	actx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(actx, method, e.base+path, rd)
	if err != nil {
		return fmt.Errorf("client: %s: %w", e.base, err)
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if t.auth != "" {
		req.Header.Set("Authorization", t.auth)
	}
	resp, err := t.hc.Do(req)
	if err != nil {
		return fmt.Errorf("client: %s: %w", e.base, err)
	}
	defer resp.Body.Close()
	answer := io.LimitReader(resp.Body, maxBody)
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		ae := readAPIError(resp.StatusCode, answer, e.base)
		ae.RetryAfter = parseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
		return ae
	}
	if err := decode(resp.Header, answer); err != nil {
		var ae *APIError
		if errors.As(err, &ae) {
			ae.Endpoint = e.base
			return ae
		}
		return fmt.Errorf("client: %s: bad response: %w", e.base, err)
	}
	_, _ = io.Copy(io.Discard, answer) // let the connection be reused
	return nil
}

// readAPIError builds the *APIError of a non-2xx answer.
func readAPIError(status int, body io.Reader, base string) *APIError {
	raw, _ := io.ReadAll(io.LimitReader(body, 64<<10))
	var env struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	ae := &APIError{Status: status, Endpoint: base}
	if json.Unmarshal(raw, &env) == nil {
		ae.Code, ae.Message = env.Error.Code, env.Error.Message
	}
	if ae.Code == "" {
		ae.Code = codeOf(status)
	}
	if ae.Message == "" {
		msg := strings.TrimSpace(string(bytes.ToValidUTF8(raw, nil)))
		if len(msg) > 200 {
			msg = msg[:200] + "…"
		}
		if msg == "" {
			msg = http.StatusText(status)
		}
		ae.Message = msg
	}
	return ae
}

// parseRetryAfter reads a Retry-After header: whole seconds, or an HTTP
// date. Anything else, or a time already past, is zero.
func parseRetryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n <= 0 || n > 24*3600 {
			return 0
		}
		return time.Duration(n) * time.Second
	}
	if at, err := http.ParseTime(v); err == nil && at.After(now) {
		return min(at.Sub(now), 24*time.Hour)
	}
	return 0
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// jsonInt is an int64 that the API writes as a JSON string (IDs exceed
// JavaScript's 2^53); a JSON number is accepted too.
type jsonInt int64

// UnmarshalJSON implements json.Unmarshaler.
func (j *jsonInt) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	if len(b) >= 2 && b[0] == '"' && b[len(b)-1] == '"' {
		b = b[1 : len(b)-1]
	}
	v, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		return fmt.Errorf("not an integer: %q", b)
	}
	*j = jsonInt(v)
	return nil
}

// span is a run of IDs: first, first+stride, …, count of them; or, in a
// text buffer, the texts, with count = len(texts).
type span struct {
	first, count, stride int64
	texts                []string
}

// rangesResponse is the body of /v1/…/next, in either form.
type rangesResponse struct {
	Tag    string `json:"tag"`
	Ranges []struct {
		First  jsonInt `json:"first"`
		Count  jsonInt `json:"count"`
		Stride jsonInt `json:"stride"`
	} `json:"ranges"`
	IDs   []jsonInt `json:"ids"`
	Count jsonInt   `json:"count"`
}

// parseRanges decodes a next answer and checks it holds exactly n IDs (of
// tag, when the answer names one).
func parseRanges(r io.Reader, n int64, tag string) ([]span, error) {
	var resp rangesResponse
	if err := json.NewDecoder(r).Decode(&resp); err != nil {
		return nil, err
	}
	if tag != "" && resp.Tag != "" && resp.Tag != tag {
		return nil, fmt.Errorf("IDs of tag %q, asked for %q", resp.Tag, tag)
	}
	spans := make([]span, 0, len(resp.Ranges)+len(resp.IDs))
	var total int64
	for _, rg := range resp.Ranges {
		s := span{first: int64(rg.First), count: int64(rg.Count), stride: int64(rg.Stride)}
		if s.stride == 0 {
			s.stride = 1
		}
		if s.count < 1 || s.stride < 1 || s.count > n {
			return nil, fmt.Errorf("bad range %+v", rg)
		}
		if (s.count-1) > (1<<63-1)/s.stride || (s.first >= 0 && (s.count-1)*s.stride > 1<<63-1-s.first) {
			return nil, fmt.Errorf("range %+v overflows int64", rg)
		}
		spans = append(spans, s)
		total += s.count
		if total > n {
			break
		}
	}
	for _, id := range resp.IDs {
		if k := len(spans) - 1; k >= 0 && spans[k].stride == 1 && spans[k].first+spans[k].count == int64(id) {
			spans[k].count++
		} else {
			spans = append(spans, span{first: int64(id), count: 1, stride: 1})
		}
		total++
	}
	if total != n {
		return nil, fmt.Errorf("%d IDs, asked for %d", total, n)
	}
	return spans, nil
}

// expand appends the IDs of spans to dst.
func expand(dst []int64, spans []span) []int64 {
	for _, s := range spans {
		for i := range s.count {
			dst = append(dst, s.first+i*s.stride)
		}
	}
	return dst
}
