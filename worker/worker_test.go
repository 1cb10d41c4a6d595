package worker

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestConfigValidate(t *testing.T) {
	if err := (Config{}).Validate(); err != nil {
		t.Fatalf("zero Config: %v", err)
	}
	if err := (Config{TTL: 2 * time.Second}).Validate(); err != nil {
		t.Fatalf("TTL 2s with derived defaults: %v", err)
	}
	for _, tc := range []struct {
		c    Config
		want string
	}{
		{Config{Datacenter: -1}, "datacenter -1"},
		{Config{Workers: -3}, "workers -3"},
		{Config{TTL: 500 * time.Millisecond}, "TTL 500ms"},
		{Config{TTL: time.Hour}, "TTL 1h0m0s"},
		{Config{TTL: 10 * time.Second, RenewEvery: 6 * time.Second}, "renew every 6s"},
		{Config{RetryEvery: 5 * time.Second}, "retry every 5s"},
		{Config{ReserveAhead: 500 * time.Millisecond}, "reserve ahead 500ms"},
		{Config{ReserveAhead: time.Minute}, "reserve ahead 1m0s"},
		{Config{SafetyMargin: 6 * time.Second}, "safety margin 6s"},
		{Config{TTL: 2 * time.Second, RenewEvery: time.Second, SafetyMargin: time.Second, ReserveAhead: 1500 * time.Millisecond}, "leaves no time"},
	} {
		err := tc.c.Validate()
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate(%+v) = %v, want ErrInvalidConfig naming %q", tc.c, err, tc.want)
		}
	}
	if _, err := NewLeaser(nil, Config{}); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("NewLeaser(nil): %v", err)
	}
}

func TestCeilMilli(t *testing.T) {
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for in, want := range map[time.Duration]time.Duration{
		0: 0, 1: time.Millisecond, 999_999: time.Millisecond, time.Millisecond: time.Millisecond,
		time.Millisecond + 1: 2 * time.Millisecond,
	} {
		if got := ceilMilli(base.Add(in)); !got.Equal(base.Add(want)) {
			t.Errorf("ceilMilli(+%v) = +%v, want +%v", in, got.Sub(base), want)
		}
	}
}

type recorder struct {
	until   time.Time
	revoked bool
}

func (r *recorder) SetUntil(t time.Time) { r.until = t }
func (r *recorder) Revoke()              { r.revoked = true }
func (r *recorder) Now() time.Time       { return time.Now() }

func TestStaticWarnsAndNeverFences(t *testing.T) {
	var logs bytes.Buffer
	lr := Static(2, 7, slog.New(slog.NewTextHandler(&logs, nil)))
	l, err := lr.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "UNSAFE") || !strings.Contains(logs.String(), "worker=7") {
		t.Fatalf("no warning naming the static id: %q", logs.String())
	}
	var r recorder
	l.Bind(&r)
	if l.DatacenterID() != 2 || l.WorkerID() != 7 || !l.NotBefore().IsZero() || !r.until.IsZero() || r.revoked {
		t.Fatalf("static lease %d/%d not before %v; fencer %+v", l.DatacenterID(), l.WorkerID(), l.NotBefore(), r)
	}
	if err := l.Close(); err != nil || !r.revoked || !errors.Is(l.Err(), ErrReleased) {
		t.Fatalf("Close: %v; revoked %v; Err %v", err, r.revoked, l.Err())
	}
	<-l.Done()
	if _, err := lr.Acquire(canceled()); err == nil {
		t.Fatal("Acquire with a canceled context succeeded")
	}
}

func canceled() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

func TestDerived(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	a, err := Derived(FromHostname, 0, 32, log)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Derived(FromHostname, 0, 32, log)
	la, _ := a.Acquire(context.Background())
	lb, _ := b.Acquire(context.Background())
	if la.WorkerID() != lb.WorkerID() || la.WorkerID() < 0 || la.WorkerID() >= 32 {
		t.Fatalf("hostname-derived ids %d and %d: want the same id in [0, 32)", la.WorkerID(), lb.WorkerID())
	}
	if !strings.Contains(logs.String(), "UNSAFE") || !strings.Contains(logs.String(), "derived from the hostname") {
		t.Fatalf("no warning: %q", logs.String())
	}
	if _, err := Derived(FromMACPID, 0, 1024, log); err != nil {
		t.Fatalf("mac-pid: %v", err)
	}
	if _, err := Derived("uuid", 0, 32, log); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), `"uuid"`) {
		t.Fatalf("unknown source: %v", err)
	}
	if _, err := Derived(FromHostname, 0, 0, log); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("zero workers: %v", err)
	}
}
