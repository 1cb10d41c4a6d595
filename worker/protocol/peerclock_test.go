package protocol

import (
	"testing"
	"time"

	"github.com/flakeid/flakeid/worker"
)

func TestNodeClock(t *testing.T) {
	wall := time.UnixMilli(1_700_000_000_000)
	now := func() time.Time { return wall }
	req := worker.Request{Now: wall.Add(-time.Second), Reserve: wall.Add(2 * time.Second)}
	ms, ahead := nodeClock(req, now)
	if ms != wall.Add(-time.Second).UnixMilli() || ahead != 3*time.Second {
		t.Errorf("nodeClock = %d, %v; want the request's Now and 3s ahead", ms, ahead)
	}
	if got := nodeMs(ahead, wall.Add(time.Minute), now); got != wall.Add(time.Minute-3*time.Second).UnixMilli() {
		t.Errorf("nodeMs = %d, want the reservation less 3s", got)
	}
	if got := nodeMs(ahead, time.Time{}, now); got != wall.UnixMilli() {
		t.Errorf("nodeMs of no reservation = %d, want now", got)
	}
	ms, ahead = nodeClock(worker.Request{Reserve: wall.Add(time.Hour)}, now)
	if ms != wall.UnixMilli() || ahead >= 0 {
		t.Errorf("nodeClock without Now = %d, %v; want now and ahead < 0", ms, ahead)
	}
	if got := nodeMs(ahead, wall.Add(time.Hour), now); got != wall.UnixMilli() {
		t.Errorf("nodeMs without ahead = %d, want now", got)
	}
}

func TestPeerClock(t *testing.T) {
	var p peerTime
	if at, stale := p.Clock(); !at.IsZero() || stale != 0 {
		t.Fatalf("zero peerTime = %v, %v", at, stale)
	}
	t0 := time.Now()
	p.Update(t0, t0.Add(time.Millisecond), false, time.Second)
	if at, _ := p.Clock(); !at.IsZero() {
		t.Fatalf("no peer read: Clock = %v, want zero", at)
	}
	// A read sent at t0 and answered 10ms later found a peer at 1_700_000_000_000.
	p.Read(1_700_000_000_000, t0, t0.Add(10*time.Millisecond))
	p.Update(t0, t0.Add(10*time.Millisecond), true, time.Second)
	if at, stale := p.Clock(); at.UnixMilli() != 1_700_000_000_000 || stale != time.Second {
		t.Errorf("fresh Clock = %v, %v; want the peer's value, stale the key age", at, stale)
	}
	// An operation sent 1s after the read was answered, and answered 20ms
	// after it was sent: at least 1s passed since the read was served, at
	// most 1s + 10ms + 20ms.
	sent := t0.Add(10*time.Millisecond + time.Second)
	p.Update(sent, sent.Add(20*time.Millisecond), false, time.Second)
	at, stale := p.Clock()
	if at.UnixMilli() != 1_700_000_001_000 || stale != time.Second+30*time.Millisecond {
		t.Errorf("advanced Clock = %v (%d), %v; want 1s later, stale key age + 30ms", at, at.UnixMilli(), stale)
	}
	p.Read(0, sent, sent)
	p.Update(sent, sent, true, time.Second)
	if at, stale := p.Clock(); !at.IsZero() || stale != 0 {
		t.Errorf("no live peer any more: Clock = %v, %v; want zero", at, stale)
	}
}
