package client

import (
	"context"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"pgregory.net/rapid"
)

// handlerTransport serves requests in-process, without a network, so that
// a client and its servers run inside one synctest bubble.
type handlerTransport struct{ h http.Handler }

func (ht handlerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	ht.h.ServeHTTP(rec, r)
	return rec.Result(), nil
}

// outage is a span of a run in which every server refuses.
type outage struct{ from, to time.Duration }

// TestBufferRidesOutOutages is the buffer's promise as a property: a caller
// at a fixed rate, each call bounded by a short deadline, never misses a
// call while each outage of every server is shorter than what the buffer
// holds at its low-water mark, less the time a refill takes to notice the
// end of the outage (a backoff, or the servers' Retry-After rounded up to
// a second) — however many outages come, and however close together. It
// runs in a synctest bubble over an in-process transport: random batch
// sizes, outages, gaps and servers with and without Retry-After.
func TestBufferRidesOutOutages(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		const period, deadline, latency = 10 * time.Millisecond, 100 * time.Millisecond, 2 * time.Millisecond
		const backoffMax = time.Second
		// A refill notices an outage's end within the servers' rounding
		// of Retry-After (1 s) or a backoff (≤ backoffMax), plus one more
		// round's pause (≤ backoffMax): the margin below.
		const margin = 3 * time.Second
		batch := rapid.IntRange(800, 3000).Draw(rt, "batch")
		low := int(math.Ceil(0.5 * float64(batch)))
		hold := time.Duration(low-1) * period // what the buffer holds when it asks for more
		retryAfter := rapid.Bool().Draw(rt, "retryAfter")
		var outages []outage
		// Outages start within twice what the buffer holds, and follow one
		// another within it: where a refill is due.
		ms := func(d time.Duration) int64 { return int64(d / time.Millisecond) }
		at := time.Duration(rapid.Int64Range(1000, ms(2*hold)).Draw(rt, "firstMs")) * time.Millisecond
		for range rapid.IntRange(1, 6).Draw(rt, "outages") {
			d := time.Duration(rapid.Int64Range(100, ms(hold-margin)).Draw(rt, "outageMs")) * time.Millisecond
			outages = append(outages, outage{at, at + d})
			at += d + time.Duration(rapid.Int64Range(ms(margin), ms(hold)).Draw(rt, "gapMs"))*time.Millisecond
		}
		run := at + hold

		// The fake's handler only (no request crosses the network), with
		// every batch one range: so that nothing but the buffer's own
		// schedule asks for a refill.
		f := newFake(t, newBackend(), func(f *fake) { f.tick = 1 << 50 })
		synctest.Test(t, func(t *testing.T) {
			start := time.Now()
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				time.Sleep(latency)
				el := time.Since(start)
				for _, o := range outages {
					if el >= o.from && el < o.to {
						if retryAfter {
							w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil((o.to - el).Seconds()))))
						}
						writeErr(w, http.StatusServiceUnavailable, "unavailable", "outage")
						return
					}
				}
				f.srv.Config.Handler.ServeHTTP(w, r)
			})
			c, err := New(Config{
				Endpoints:  []string{"http://a.invalid", "http://b.invalid", "http://c.invalid"},
				HTTPClient: &http.Client{Transport: handlerTransport{h}},
				Timeout:    deadline / 2, BackoffMax: backoffMax,
				Buffer: BufferConfig{Snowflake: batch, LowWater: 0.5},
			})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			var last int64
			next := start
			for time.Since(start) < run {
				ctx, cancel := context.WithTimeout(t.Context(), deadline)
				id, err := c.NextID(ctx)
				cancel()
				if err != nil {
					t.Fatalf("call at %v (outages %v, batch %d, Retry-After %v): %v", time.Since(start), outages, batch, retryAfter, err)
				}
				if id <= last {
					t.Fatalf("ID %d after %d", id, last)
				}
				last = id
				next = next.Add(period)
				time.Sleep(time.Until(next))
			}
		})
	})
}
