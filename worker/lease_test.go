package worker

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// slowCoordinator hands out worker id 0 after spending prepare on its
// preparations (reading clocks, opening a session) and answer after it took
// the id; its claims renew at once.
type slowCoordinator struct {
	prepare, answer time.Duration
	reportTaken     bool // the claims implement TakenAt
	released        atomic.Int32
}

func (c *slowCoordinator) Acquire(ctx context.Context, req Request) (Claim, error) {
	time.Sleep(c.prepare)
	cl := &slowClaim{c: c, taken: time.Now()}
	time.Sleep(c.answer)
	if c.reportTaken {
		return takenClaim{cl}, nil
	}
	return cl, nil
}

func (c *slowCoordinator) List(context.Context, int64) ([]Info, error) { return nil, nil }

func (c *slowCoordinator) Namespace(context.Context, int64) (Namespace, bool, error) {
	return Namespace{}, false, nil
}

// Clock has no clock to report.
func (c *slowCoordinator) Clock(context.Context, Request) (time.Time, time.Duration, error) {
	return time.Time{}, 0, nil
}

type slowClaim struct {
	c     *slowCoordinator
	taken time.Time
}

func (cl *slowClaim) WorkerID() int64                                       { return 0 }
func (cl *slowClaim) Previous() time.Time                                   { return time.Time{} }
func (cl *slowClaim) Renew(context.Context, time.Duration, time.Time) error { return nil }
func (cl *slowClaim) Clock() (time.Time, time.Duration)                     { return time.Time{}, 0 }
func (cl *slowClaim) Release(context.Context, time.Time) error {
	cl.c.released.Add(1)
	return nil
}

type takenClaim struct{ *slowClaim }

func (cl takenClaim) TakenAt() time.Time { return cl.taken }

// leaseConfig: TTL 2 s − margin 500 ms = 1.5 s, and a first renewal
// 500 + 200 ms after a lease is taken.
func leaseConfig() Config {
	return Config{TTL: 2 * time.Second, RenewEvery: 500 * time.Millisecond, RetryEvery: 200 * time.Millisecond,
		SafetyMargin: 500 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
}

// TestAcquireRefusesLeaseDeadBeforeFirstRenewal: an answer so late that the
// lease would lapse before its first renewal is not handed out as a lease
// (it would be lost at once and keep the id from everyone): the id is
// released and the error says why.
func TestAcquireRefusesLeaseDeadBeforeFirstRenewal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		coord := &slowCoordinator{prepare: 900 * time.Millisecond}
		lr, err := NewLeaser(coord, leaseConfig())
		if err != nil {
			t.Fatal(err)
		}
		l, err := lr.Acquire(t.Context())
		if err == nil {
			l.Close()
			t.Fatal("Acquire answered after 900 ms (+ 700 ms to the first renewal > 1.5 s): got a lease")
		}
		if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "first renewal") {
			t.Fatalf("Acquire: %v, want ErrUnavailable naming the first renewal", err)
		}
		if n := coord.released.Load(); n != 1 {
			t.Fatalf("the late claim was released %d times, want 1", n)
		}
	})
}

// TestLeaseRunsFromTakenAt: a claim that reports when it took the id
// (TakenAt) leases from then, so a coordinator's slow preparations do not
// use the lease up; the lease then lives on through its renewals.
func TestLeaseRunsFromTakenAt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		coord := &slowCoordinator{prepare: 1200 * time.Millisecond, answer: 10 * time.Millisecond, reportTaken: true}
		lr, err := NewLeaser(coord, leaseConfig())
		if err != nil {
			t.Fatal(err)
		}
		l, err := lr.Acquire(t.Context())
		if err != nil {
			t.Fatalf("Acquire after 1.2 s of preparations, the id taken 10 ms before the answer: %v", err)
		}
		defer l.Close()
		time.Sleep(5 * time.Second)
		if err := l.Err(); err != nil {
			t.Fatalf("lease lost although every renewal succeeds: %v", err)
		}
		if n := coord.released.Load(); n != 0 {
			t.Fatalf("released %d times while held", n)
		}
	})
}

// TestLeaseWithoutTakenAtRunsFromAcquire: without TakenAt the lease runs
// from the start of Acquire: 600 ms of preparations leave 900 ms, enough for
// the first renewal at 700 ms.
func TestLeaseWithoutTakenAtRunsFromAcquire(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		coord := &slowCoordinator{prepare: 600 * time.Millisecond}
		lr, err := NewLeaser(coord, leaseConfig())
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		l, err := lr.Acquire(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		lw := l.(*lease)
		lw.mu.Lock()
		deadline := lw.deadline
		lw.mu.Unlock()
		if want := start.Add(1500 * time.Millisecond); !deadline.Equal(want) {
			t.Fatalf("deadline %v after Acquire began, want 1.5 s", deadline.Sub(start))
		}
		time.Sleep(3 * time.Second)
		if err := l.Err(); err != nil {
			t.Fatalf("lease lost: %v", err)
		}
	})
}

// hangingCoordinator never answers an Acquire before its context ends.
type hangingCoordinator struct{ slowCoordinator }

func (c *hangingCoordinator) Acquire(ctx context.Context, req Request) (Claim, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestAcquireAbandonsHangingAttempt: an attempt the coordinator never
// answers is abandoned after twice the TTL as ErrUnavailable (so a node
// waiting for a free id tries again rather than waiting forever).
func TestAcquireAbandonsHangingAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lr, err := NewLeaser(&hangingCoordinator{}, leaseConfig())
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		_, err = lr.Acquire(t.Context())
		if !errors.Is(err, ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "no answer within 4s") {
			t.Fatalf("Acquire from a coordinator that never answers: %v, want ErrUnavailable after 4s", err)
		}
		if took := time.Since(start); took != 4*time.Second {
			t.Fatalf("gave up after %v, want 2 × TTL = 4s", took)
		}
	})
}
