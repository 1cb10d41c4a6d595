package sqldb

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/flakeid/flakeid/segment"
)

// TestSegmentOutage is the database-outage drill of docs/GUARANTEES.md, scaled
// down to fit CI: one tag consumed at 1,000 IDs/s, the dynamic step settled
// (SegmentDuration 2s instead of 15m), then the database cut off. Serving
// goes on from the two buffers for as long as the IDs they held last at that
// rate, requests then fail with ErrUnavailable, and after recovery serving
// resumes with nothing handed out twice.
func TestSegmentOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for about ten seconds")
	}
	forEach(t, func(t *testing.T, dsn string) {
		s, admin := newSegments(t, dsn)
		proxied, proxy := throughProxy(t, dsn)
		db, d := testDB(t, proxied)
		client, err := NewSegments(db, d, s.Table())
		if err != nil {
			t.Fatal(err)
		}
		_ = admin
		if err := s.Create(ctx10(t), segment.Tag{Name: "drill", Step: 100}); err != nil {
			t.Fatal(err)
		}
		const rate = 1000           // IDs per second
		const dur = 2 * time.Second // SegmentDuration, scaled down from 15m
		a, err := segment.New(segment.Config{Store: client, SegmentDuration: dur,
			FetchTimeout: 500 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelError}))})
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		h, err := a.Tag(ctx10(t), "drill")
		if err != nil {
			t.Fatal(err)
		}
		seen := map[int64]bool{}
		tick := time.NewTicker(time.Second / rate)
		defer tick.Stop()
		take := func(wait time.Duration) error {
			<-tick.C
			ctx, cancel := context.WithTimeout(context.Background(), wait)
			defer cancel()
			id, err := h.NextID(ctx)
			if err != nil {
				return err
			}
			if seen[id] {
				t.Fatalf("ID %d handed out twice", id)
			}
			seen[id] = true
			return nil
		}
		stats := func() segment.TagStats { return a.Stats()[0] }
		// Settle: the step stops changing once a step's worth lasts 2–4 s.
		// The ticker aims at 1,000 IDs/s, but a loaded machine delivers
		// fewer ticks, and the allocator sizes the step for the rate it
		// sees; so the check is on how long a step lasts at the rate the
		// IDs were taken: one segment (Size IDs) between the last two
		// fetches.
		var steps []int64
		var prevFetch, lastFetch time.Time
		for settled := 0; settled < 2; {
			before := stats().Fetches
			for stats().Fetches == before {
				if err := take(time.Second); err != nil {
					t.Fatal(err)
				}
			}
			prevFetch, lastFetch = lastFetch, time.Now()
			st := stats().Step
			if len(steps) > 0 && st == steps[len(steps)-1] {
				settled++
			} else {
				settled = 0
			}
			steps = append(steps, st)
			if len(steps) > 30 {
				t.Fatalf("step did not settle: %v", steps)
			}
		}
		step := stats().Step
		seg := lastFetch.Sub(prevFetch)
		taken := float64(stats().Size) / seg.Seconds() // IDs/s
		lastedStep := time.Duration(float64(step) / taken * float64(time.Second))
		if lastedStep < dur*8/10 || lastedStep > 2*dur*5/4 {
			t.Fatalf("settled step %d (history %v) lasts %v at the %.0f IDs/s taken: want about %v–%v",
				step, steps, lastedStep.Round(time.Millisecond), taken, dur, 2*dur)
		}
		// Cut when the next segment has landed, so no fetch is in flight
		// and the buffers hold exactly what the snapshot says.
		deadline := time.Now().Add(10 * time.Second)
		for stats().Next.Len() == 0 {
			if time.Now().After(deadline) {
				t.Fatal("the next segment never landed")
			}
			time.Sleep(5 * time.Millisecond)
		}
		proxy.Cut()
		st := stats()
		buffered := st.Size - st.Used + st.Next.Len()
		cutAt := time.Now()
		served := 0
		var lastErr error
		for {
			if lastErr = take(200 * time.Millisecond); lastErr != nil {
				break
			}
			served++
		}
		lasted := time.Since(cutAt)
		if !errors.Is(lastErr, segment.ErrUnavailable) {
			t.Fatalf("when the buffers ran dry: %v, want ErrUnavailable", lastErr)
		}
		// The buffers held `buffered` IDs; at 1,000/s they last buffered ms.
		want := time.Duration(buffered) * time.Second / rate
		if served < int(buffered)-2 || served > int(buffered)+2 || lasted < want*8/10 {
			t.Fatalf("served %d IDs over %v after the cut; the buffers held %d (%v at %d/s)", served, lasted, buffered, want, rate)
		}
		t.Logf("settled step %d (history %v, lasting %v); cut with %d IDs buffered; served %d IDs for %v, then ErrUnavailable",
			step, steps, lastedStep.Round(time.Millisecond), buffered, served, lasted.Round(time.Millisecond))
		proxy.Heal()
		for range 500 {
			if err := take(5 * time.Second); err != nil {
				t.Fatalf("after recovery: %v", err)
			}
		}
	})
}
