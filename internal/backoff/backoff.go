// Package backoff computes jittered exponential retry delays.
package backoff

import (
	"context"
	"math/rand/v2"
	"time"
)

// Backoff is an exponential backoff with "equal jitter": the delay of attempt
// n (from 0) is drawn uniformly from [d/2, d] where d = min(Max, Min·2^n).
// The zero value uses Min 50ms and Max 5s.
type Backoff struct {
	Min time.Duration // the first delay's upper bound; default 50ms
	Max time.Duration // the cap on every delay; default 5s
}

// Next returns the delay before retry number attempt (0 for the first).
func (b Backoff) Next(attempt int) time.Duration {
	lo, hi := b.Min, b.Max
	if lo <= 0 {
		lo = 50 * time.Millisecond
	}
	if hi <= 0 {
		hi = 5 * time.Second
	}
	d := lo
	for i := 0; i < attempt && d < hi; i++ {
		d *= 2
	}
	d = min(d, hi)
	half := d / 2
	return half + rand.N(d-half+1)
}

// Sleep waits for d, or until ctx ends, and then returns ctx's error: the
// pause of a retry loop between two attempts.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
