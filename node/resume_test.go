package node

import (
	"errors"
	"io"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/flakeid/flakeid/snowflake"
	"github.com/flakeid/flakeid/worker"
	"github.com/flakeid/flakeid/worker/workertest"
)

// TestRefusalSaysWhenItResumes: after the coordinator lost its state, a node
// that has used up its reservation refuses calls until the new lease's start
// (the quarantine's floor), and each refusal is a *ResumeError whose
// RetryAfter is that start as the node's clock sees it — never sooner than the
// node issues again, and not much later — and the whole stop lasts no more
// than the quarantine less the reservation, and a renewal period.
func TestRefusalSaysWhenItResumes(t *testing.T) {
	for _, q := range []time.Duration{0, 7 * time.Second} { // the default quarantine, and a longer one
		synctest.Test(t, func(t *testing.T) {
			m := workertest.NewMemory(nil)
			link := m.Client()
			lease := worker.Config{TTL: 2 * time.Second, RenewEvery: 500 * time.Millisecond, ReserveAhead: time.Second, Quarantine: q}
			layout := layoutOf(4)
			layout.Epoch = time.Date(1990, 1, 1, 0, 0, 0, 0, time.UTC)
			n, err := Start(t.Context(), Config{Coordinator: link, Lease: lease, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
				Settings: snowflake.Settings{Layout: layout, Now: time.Now}})
			if err != nil {
				t.Fatal(err)
			}
			defer n.Close()
			if _, err := n.NextID(); err != nil {
				t.Fatal(err)
			}
			m.Wipe()
			// The reset shows at the next renewal; the node goes on on its
			// reservation (at most ReserveAhead past that renewal), then
			// refuses until the floor.
			var re *ResumeError
			deadline := time.Now().Add(lease.TTL + lease.ReserveAhead)
			for {
				_, err := n.NextID()
				if errors.As(err, &re) {
					break
				}
				if err != nil && !errors.Is(err, ErrNoLease) {
					t.Fatalf("refused with %v, want ErrNoLease", err)
				}
				if time.Now().After(deadline) {
					t.Fatalf("no ResumeError %v after the wipe (last: %v, %+v)", lease.TTL+lease.ReserveAhead, err, n.Status())
				}
				time.Sleep(time.Millisecond)
			}
			if !errors.Is(re, ErrNoLease) || !errors.Is(re, worker.ErrReset) {
				t.Fatalf("%v: want ErrNoLease and worker.ErrReset wrapped", re)
			}
			// The node stops at the end of its reservation, ReserveAhead after
			// its last renewal; the floor lies Quarantine after the
			// re-initialisation, which follows the next renewal: so a loss of
			// the coordinator's state costs a node Quarantine − ReserveAhead
			// (the clock bound, with the default quarantine) and a renewal
			// period.
			quarantine := lease.ReserveAhead + time.Second // the default: ReserveAhead + MaxClockSkew (1 s)
			if q != 0 {
				quarantine = q
			}
			if most := quarantine - lease.ReserveAhead + lease.RenewEvery + 10*time.Millisecond; re.RetryAfter <= 0 || re.RetryAfter > most {
				t.Fatalf("RetryAfter %v at the first refusal, want in (0, %v]", re.RetryAfter, most)
			}
			resumes := time.Now().Add(re.RetryAfter)
			// Refused until then, with a RetryAfter that counts down to it.
			for time.Now().Add(10 * time.Millisecond).Before(resumes) {
				_, err := n.NextID()
				if err == nil {
					t.Fatalf("issued at %v, %v before the announced start", time.Now(), time.Until(resumes))
				}
				var e *ResumeError
				if !errors.As(err, &e) || time.Now().Add(e.RetryAfter).Sub(resumes).Abs() > time.Millisecond {
					t.Fatalf("refusal %v at %v: want RetryAfter to the same start %v", err, time.Now(), resumes)
				}
				time.Sleep(97 * time.Millisecond)
			}
			// And issuing again right after it.
			time.Sleep(time.Until(resumes) + 20*time.Millisecond)
			if _, err := n.NextID(); err != nil {
				t.Fatalf("20 ms after the announced start: %v (%+v)", err, n.Status())
			}
		})
	}
}
