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
	// A reservation may run past the TTL: a holder keeps issuing on it
	// after its lease ended (see Lease.Bind), the quarantine covers it.
	if err := (Config{TTL: 2 * time.Second, ReserveAhead: 30 * time.Second}).Validate(); err != nil {
		t.Fatalf("ReserveAhead 30s past a TTL of 2s: %v", err)
	}
	if q := (Config{TTL: 2 * time.Second, ReserveAhead: 30 * time.Second}).WithDefaults().Quarantine; q != 31*time.Second {
		t.Fatalf("the quarantine of a 30s reservation is %v, want 31s (reservation + max clock skew)", q)
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
		{Config{ReserveAhead: 11 * time.Minute}, "reserve ahead 11m0s, want more than the renewal period 1s and at most 10m"},
		{Config{SafetyMargin: 6 * time.Second}, "safety margin 6s"},
		{Config{TTL: 2 * time.Second, RenewEvery: time.Second, SafetyMargin: time.Second, ReserveAhead: 1500 * time.Millisecond}, "leaves no time"},
		{Config{TTL: 2 * time.Second, RenewEvery: time.Second, RetryEvery: 500 * time.Millisecond, SafetyMargin: 600 * time.Millisecond,
			ReserveAhead: 1500 * time.Millisecond}, "leaves no time for the first renewal"},
		{Config{MaxClockSkew: 2 * time.Minute}, "max clock skew 2m0s"},
		{Config{Quarantine: 2 * time.Second}, "quarantine 2s, want reserve ahead 3s + max clock skew 1s (4s)"},
		{Config{ReserveAhead: 5 * time.Second, Quarantine: 5 * time.Second}, "quarantine 5s"},
		{Config{Quarantine: 2 * time.Hour}, "quarantine 2h0m0s"},
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

func TestQuarantineDefault(t *testing.T) {
	c := Config{ReserveAhead: 5 * time.Second, MaxClockSkew: 2 * time.Second}.WithDefaults()
	if c.Quarantine != 7*time.Second {
		t.Fatalf("default quarantine %v, want reserve ahead + max clock skew = 7s", c.Quarantine)
	}
	if got := c.contract(); !strings.HasSuffix(got, "; quarantine 7s") {
		t.Fatalf("contract %q does not carry the quarantine", got)
	}
}

func TestCheckClock(t *testing.T) {
	base := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	bound := time.Second
	for _, tc := range []struct {
		name       string
		sent, recv time.Duration // local times, from base
		at         time.Duration // coordinator reading, from base
		stale      time.Duration
		want       string // "" ok, else a word of the error
		skew       time.Duration
	}{
		{"agree", 0, 10 * time.Millisecond, 5 * time.Millisecond, 0, "", 0},
		{"within the bound behind", 0, 0, 900 * time.Millisecond, 0, "", -900 * time.Millisecond},
		{"behind", 0, 0, 1500 * time.Millisecond, 0, "behind", -1500 * time.Millisecond},
		{"ahead", 0, 0, -1500 * time.Millisecond, 0, "ahead", 1500 * time.Millisecond},
		// A slow reply: the coordinator's reading may come from any moment
		// of the round trip, so 1.5s of round trip excuses 1.5s.
		{"slow round trip", 0, 2 * time.Second, 1500 * time.Millisecond, 0, "", -500 * time.Millisecond},
		// A stale peer reading (etcd) excuses being ahead by the staleness,
		// never being behind.
		{"stale peer", 0, 0, -5 * time.Second, 10 * time.Second, "", 0},
		{"behind a stale peer", 0, 0, 2 * time.Second, 10 * time.Second, "behind", -7 * time.Second},
		{"ahead of a stale peer", 0, 0, -12 * time.Second, 10 * time.Second, "ahead", 7 * time.Second},
	} {
		skew, err := checkClock(base.Add(tc.at), tc.stale, base.Add(tc.sent), base.Add(tc.recv), bound)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (!errors.Is(err, ErrClockSkew) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want ErrClockSkew saying %q", tc.name, err, tc.want)
		case skew != tc.skew:
			t.Errorf("%s: skew %v, want %v", tc.name, skew, tc.skew)
		}
	}
	if skew, err := checkClock(time.Time{}, 0, base, base, bound); err != nil || skew != 0 {
		t.Errorf("no reading: %v, %v; want no check", skew, err)
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
