package backoff

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestNextBounds(t *testing.T) {
	b := Backoff{Min: 10 * time.Millisecond, Max: 300 * time.Millisecond}
	for attempt, cap := range []time.Duration{10, 20, 40, 80, 160, 300, 300, 300} {
		cap *= time.Millisecond
		if attempt >= 5 {
			cap = 300 * time.Millisecond
		}
		seen := map[time.Duration]bool{}
		for range 200 {
			d := b.Next(attempt)
			if d < cap/2 || d > cap {
				t.Fatalf("attempt %d: delay %v outside [%v, %v]", attempt, d, cap/2, cap)
			}
			seen[d] = true
		}
		if len(seen) < 10 {
			t.Fatalf("attempt %d: only %d distinct delays: no jitter", attempt, len(seen))
		}
	}
	if d := (Backoff{}).Next(1000); d < 2500*time.Millisecond || d > 5*time.Second {
		t.Fatalf("zero Backoff, attempt 1000: %v, want within [2.5s, 5s]", d)
	}
}

func TestSleep(t *testing.T) {
	if err := Sleep(t.Context(), time.Millisecond); err != nil {
		t.Fatalf("Sleep = %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	start := time.Now()
	if err := Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) || time.Since(start) > time.Minute {
		t.Fatalf("Sleep on an ended context = %v after %v, want context.Canceled at once", err, time.Since(start))
	}
}
