package workertest

import (
	"cmp"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/flakeid/flakeid/worker"
)

// Takeover is the scenario of the suite's FencingWhenUnreachable, which a
// backend's own fault tests run with the faults only they can make (a
// partition of a client from the shared server, say): a lease holder, A,
// is cut off from the coordinator while another node, B, keeps trying to
// take its worker id.
//
// Run fails the test unless A's lease ends with worker.ErrLeaseLost within
// the TTL of the cut, before B holds the id; A's generator keeps its last
// reservation as its fence (not revoked: the reservation still stands) and
// the fence never moves again; B starts at or past it; and, once the fault
// heals and A's held requests arrive, B's lease runs on and the
// coordinator lists the id as B's with a high-water mark at least B's
// reservation.
type Takeover struct {
	// Faulty is A's client; Fault cuts and heals its link.
	Faulty worker.Coordinator
	Fault  Fault
	// Healthy is B's client, of the same coordinator and namespace.
	Healthy worker.Coordinator
	// TTL is the lease TTL: at least the backend's minimum.
	TTL time.Duration
	// Partition says the fault cuts A alone: each of B's attempts must be
	// answered, with worker.ErrExhausted until A's lease lapses. Without
	// it the fault may be a full outage (a paused server), which Run
	// heals once A has given up and the TTL has passed, so that B can get
	// through.
	Partition bool
	// Within is how long after the cut B must hold the id. Default
	// 3×TTL + 10s.
	Within time.Duration
}

// Run runs the scenario; t fails if fencing does not hold.
func (tk Takeover) Run(t *testing.T) {
	within := cmp.Or(tk.Within, 3*tk.TTL+10*time.Second)
	cfg := leaseConfig(t, tk.TTL)
	cfg.Workers = 1 // B can take nothing but A's id
	a := acquireLease(t, newLeaser(t, tk.Faulty, cfg))
	defer a.Close()
	var f fencer
	a.Bind(&f)
	time.Sleep(3 * cfg.RenewEvery) // a renewal or two

	cutAt := time.Now()
	tk.Fault.Cut()
	healed := false
	heal := func() {
		if !healed {
			tk.Fault.Heal()
			healed = true
		}
	}
	defer heal()

	cfgB := cfg
	cfgB.Owner = "taker"
	lrB := newLeaser(t, tk.Healthy, cfgB)
	var b worker.Lease
	var takenAt, endedAt time.Time
	var untilAtEnd time.Time // A's fence when its lease was seen to end
	for b == nil {
		if endedAt.IsZero() {
			select {
			case <-a.Done():
				endedAt = time.Now()
				untilAtEnd, _ = f.state()
			default:
			}
		}
		if time.Since(cutAt) > within {
			t.Fatalf("nobody took the worker id within %v of the cut (A: %v)", within, a.Err())
		}
		ctx, cancel := context.WithTimeout(t.Context(), tk.TTL/2)
		l, err := lrB.Acquire(ctx)
		cancel()
		switch {
		case err == nil:
			b, takenAt = l, time.Now()
			continue
		case tk.Partition && !errors.Is(err, worker.ErrExhausted):
			t.Fatalf("B's Acquire on the healthy side: %v, want ErrExhausted until A's lease lapses", err)
		}
		select {
		case <-a.Done():
			if !tk.Partition && time.Since(cutAt) > tk.TTL {
				heal() // a full outage: let B through now that A gave up
			}
		default:
		}
		time.Sleep(10 * time.Millisecond)
	}
	defer b.Close()
	select {
	case <-a.Done():
	default:
		t.Fatalf("B took worker %d %v after the cut while A still holds it", b.WorkerID(), takenAt.Sub(cutAt))
	}
	if !errors.Is(a.Err(), worker.ErrLeaseLost) {
		t.Fatalf("A's Err = %v, want ErrLeaseLost", a.Err())
	}
	until, revoked := f.state()
	if endedAt.IsZero() || !endedAt.Before(takenAt) {
		t.Fatalf("A's lease seen ended at %v, B took the id at %v: want A's end first", endedAt, takenAt)
	}
	if endedAt.Sub(cutAt) > tk.TTL+100*time.Millisecond {
		t.Fatalf("A's lease ended %v after the cut, more than the TTL %v", endedAt.Sub(cutAt), tk.TTL)
	}
	if !revoked.IsZero() {
		t.Fatalf("A's generator was revoked at %v: a lease lost for want of renewals keeps its reservation", revoked)
	}
	if !until.Equal(untilAtEnd) || !until.Equal(a.Until()) {
		t.Fatalf("A's fence moved after its lease ended: %v then, %v now (Until %v)", untilAtEnd, until, a.Until())
	}
	if b.NotBefore().Before(until) {
		t.Fatalf("B starts at %v, before A's last reservation %v", b.NotBefore(), until)
	}
	t.Logf("A gave up %v after the cut; B took the id %v after the cut",
		endedAt.Sub(cutAt).Round(time.Millisecond), takenAt.Sub(cutAt).Round(time.Millisecond))

	// A's link is back and its held requests arrive; its lease stays lost,
	// B's renewals go on.
	heal()
	time.Sleep(5 * cfg.RenewEvery)
	select {
	case <-b.Done():
		t.Fatalf("B's lease ended after the fault healed: %v", b.Err())
	default:
	}
	if after, _ := f.state(); !after.Equal(until) {
		t.Fatalf("A's fence moved to %v after the heal, from %v", after, until)
	}
	reserved := b.Until()
	infos, err := tk.Healthy.List(ctxT(t), 0)
	if err != nil || len(infos) != 1 || !strings.HasPrefix(infos[0].Holder, "taker/") ||
		!infos[0].Held(time.Now()) || infos[0].HighWater.Before(reserved) {
		t.Fatalf("after the heal List = %+v, %v; want held by taker/… with high-water ≥ %v", infos, err, reserved)
	}
}
