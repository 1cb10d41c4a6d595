package coord

import (
	"context"
	"errors"

	"strings"
	"testing"
	"time"

	"github.com/flakeid/flakeid/worker"
)

func TestMilliseconds(t *testing.T) {
	base := time.UnixMilli(1_700_000_000_123)
	for in, want := range map[time.Time]int64{
		base:                                     1_700_000_000_123,
		base.Add(time.Nanosecond):                1_700_000_000_124,
		base.Add(999 * time.Microsecond):         1_700_000_000_124,
		base.Add(-time.Nanosecond):               1_700_000_000_123,
		time.UnixMilli(-5).Add(-time.Nanosecond): -5,
		{}:                                       0, // not the zero time's Unix milliseconds
	} {
		if got := CeilMs(in); got != want {
			t.Errorf("CeilMs(%v) = %d, want %d", in, got, want)
		}
	}
	if got := MsTime(0); !got.IsZero() {
		t.Errorf("MsTime(0) = %v, want the zero time", got)
	}
	if got := MsTime(1_700_000_000_123); !got.Equal(base) || got.Location() != time.UTC {
		t.Errorf("MsTime = %v, want %v in UTC", got, base)
	}
	for d, want := range map[time.Duration]int64{
		0: 0, time.Nanosecond: 1, time.Millisecond: 1, 1500 * time.Microsecond: 2, time.Second: 1000,
		-time.Nanosecond: 0, -1500 * time.Microsecond: -1, 1<<63 - 1: 9_223_372_036_855,
	} {
		if got := CeilDurMs(d); got != want {
			t.Errorf("CeilDurMs(%v) = %d, want %d", d, got, want)
		}
	}
}

func TestParseID(t *testing.T) {
	for s, want := range map[string]int64{"0": 0, "7": 7, "9223372036854775807": 1<<63 - 1} {
		if got, ok := ParseID(s); !ok || got != want {
			t.Errorf("ParseID(%q) = %d, %v; want %d", s, got, ok, want)
		}
	}
	for _, s := range []string{"", "-1", "+1", "01", " 1", "1x", "namespace", "9223372036854775808"} {
		if got, ok := ParseID(s); ok {
			t.Errorf("ParseID(%q) = %d, want refused", s, got)
		}
	}
}

func TestUnavailable(t *testing.T) {
	cause := errors.New("connection refused")
	err := Unavailable(t.Context(), cause, "reading %s", "k")
	if !errors.Is(err, worker.ErrUnavailable) || !errors.Is(err, cause) || err.Error() != "worker: coordinator unavailable: reading k: connection refused" {
		t.Errorf("Unavailable = %q", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := Unavailable(ctx, cause, "reading"); !errors.Is(err, context.Canceled) || !errors.Is(err, cause) {
		t.Errorf("Unavailable after the context ended = %v, want it to wrap context.Canceled and the cause", err)
	}
	if err := Unavailable(ctx, ctx.Err(), "reading"); strings.Count(err.Error(), "context canceled") != 1 {
		t.Errorf("Unavailable of the context's own error = %q, want it said once", err)
	}
}

func TestRecord(t *testing.T) {
	r := Record{Incarnation: "0123456789abcdef", Contract: "41/5 × 1ms", InitialisedMs: 1_700_000_000_000, FloorMs: 1_700_000_000_002}
	want := `{"incarnation":"` + r.Incarnation + `","contract":"41/5 × 1ms","floor_ms":1700000000002,"initialised_ms":1700000000000}`
	if got := string(r.Encode()); got != want {
		t.Errorf("Encode = %s, want %s", got, want)
	}
	back, err := ParseRecord("k", r.Encode())
	if err != nil || back != r {
		t.Errorf("ParseRecord(Encode()) = %+v, %v; want %+v", back, err, r)
	}
	ns := r.Namespace()
	if ns.Incarnation != r.Incarnation || ns.Contract != r.Contract || !ns.Floor.Equal(time.UnixMilli(r.FloorMs)) ||
		!ns.Initialised.Equal(time.UnixMilli(r.InitialisedMs)) {
		t.Errorf("Namespace = %+v, want the record's %+v", ns, r)
	}
	for _, v := range []string{"", "{", `{"contract":"c"}`, `{"incarnation":""}`, `[]`} {
		_, err := ParseRecord("/p/3/namespace", []byte(v))
		if !errors.Is(err, worker.ErrUnavailable) || !strings.Contains(err.Error(), "corrupt namespace record /p/3/namespace") {
			t.Errorf("ParseRecord(%q) = %v, want a corrupt record error naming the key", v, err)
		}
	}
}

func TestRegistration(t *testing.T) {
	ours := Registration{Namespace: "/a", Contract: "c"}.Encode()
	if string(ours) != `{"namespace":"/a","contract":"c"}` {
		t.Errorf("Encode = %s", ours)
	}
	if r, err := ParseRegistration("/reg/3", ours); err != nil || r != (Registration{Namespace: "/a", Contract: "c"}) {
		t.Errorf("ParseRegistration of our own entry = %+v, %v", r, err)
	}
	for _, v := range []string{"", "x", `{"contract":"c"}`} {
		if _, err := ParseRegistration("/reg/3", []byte(v)); !errors.Is(err, worker.ErrUnavailable) ||
			!strings.Contains(err.Error(), "corrupt datacenter registry entry /reg/3") {
			t.Errorf("ParseRegistration(%q) = %v, want a corrupt entry error naming the key", v, err)
		}
	}
}
