package server

import (
	"context"
	"errors"
	"net"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestZeroConfig: the zero Config is valid and means DefaultConfig, the
// zero RESPConfig means DefaultRESPConfig, and a server made with the zero
// Config serves with the defaults.
func TestZeroConfig(t *testing.T) {
	t.Parallel()
	if err := (Config{}).Validate(); err != nil {
		t.Fatalf("the zero Config: %v", err)
	}
	if got, want := (Config{}).withDefaults(), DefaultConfig(); !reflect.DeepEqual(got, want) {
		t.Fatalf("the zero Config means %+v, want DefaultConfig %+v", got, want)
	}
	if got, want := (RESPConfig{}).withDefaults(), DefaultRESPConfig(); got != want {
		t.Fatalf("the zero RESPConfig means %+v, want DefaultRESPConfig %+v", got, want)
	}
	// Defaults that follow another field.
	if c := (Config{MaxCount: 100}).withDefaults(); c.StreamBatch != 100 {
		t.Errorf("max count 100: stream batch %d, want 100", c.StreamBatch)
	}
	if c := (Config{ReadTimeout: 5 * time.Second}).withDefaults(); c.ReadHeaderTimeout != 5*time.Second {
		t.Errorf("read timeout 5s: read header timeout %v, want 5s", c.ReadHeaderTimeout)
	}
	for _, c := range []Config{{MaxCount: 100}, {ReadTimeout: 5 * time.Second}} {
		if err := c.Validate(); err != nil {
			t.Errorf("%+v: %v", c, err)
		}
	}

	f := newFixture(t, func(c *Config) { *c = Config{} })
	if !reflect.DeepEqual(f.srv.cfg, DefaultConfig()) {
		t.Fatalf("New with the zero Config serves with %+v, want %+v", f.srv.cfg, DefaultConfig())
	}
	if r := f.do(t, "GET", "/v1/snowflake/next?count=100000", ""); r.status != 200 {
		t.Fatalf("count=100000 (the default max count): %d %s", r.status, r.body)
	}
	if r := f.do(t, "GET", "/v1/snowflake/next?count=100001", ""); r.status != 400 || !strings.Contains(r.body, "1 to 100000") {
		t.Fatalf("count=100001: %d %s, want 400 naming the default max count", r.status, r.body)
	}
}

// TestConfigValidateNames: every error of Validate wraps ErrInvalidConfig
// and names the field, also on a Config whose other fields are zero
// (defaults); negative ShutdownTimeout and MetricsMaxTags mean none.
func TestConfigValidateNames(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		c    Config
		want string
	}{
		{Config{Listen: "nope"}, `listen address "nope"`},
		{Config{MaxCount: -1}, "max count -1, want 1–10,000,000"},
		{Config{MaxCount: 10_000_001}, "max count 10000001"},
		{Config{StreamBatch: -1}, "stream batch -1, want 1–100000 (max count)"},
		{Config{MaxCount: 100, StreamBatch: 101}, "stream batch 101, want 1–100 (max count)"},
		{Config{TLSKey: "k.pem"}, "TLS needs both a certificate and a key"},
		{Config{ShutdownTimeout: 6 * time.Minute}, "shutdown timeout 6m0s, want at most 5m"},
		{Config{ReadHeaderTimeout: -1}, "read header timeout -1ns, want 1s–5m"},
		{Config{ReadHeaderTimeout: 20 * time.Second}, "read header timeout 20s is longer than the read timeout 10s"},
		{Config{ReadTimeout: 500 * time.Millisecond}, "read timeout 500ms, want 1s–5m"},
		{Config{WriteTimeout: -1}, "write timeout -1ns, want 1s–10m"},
		{Config{IdleTimeout: -1}, "idle timeout -1ns, want 1s–1h"},
		{Config{MaxConns: -1}, "max conns -1, want 1–1,000,000"},
		{Config{MetricsMaxTags: 100_001}, "metrics max tags 100001, want at most 100,000"},
		{Config{Mask: MaskConfig{Form: "base64"}}, `mask form "base64"`},
		{Config{RESP: RESPConfig{Listen: "nope"}}, `resp listen address "nope"`},
		{Config{RESP: RESPConfig{MaxConns: -1}}, "resp max conns -1, want 1–1,000,000"},
		{Config{RESP: RESPConfig{MaxArgs: -1}}, "resp max args -1, want 1–1,048,576"},
		{Config{RESP: RESPConfig{MaxRequest: 1023}}, "resp max request 1023 bytes, want 1024–67,108,864"},
		{Config{RESP: RESPConfig{IdleTimeout: time.Millisecond}}, "resp idle timeout 1ms, want 0 (never) or 1s–24h"},
		{Config{Tokens: []Token{{Name: "a", Token: "short"}}}, `token 0 ("a") is shorter than 16 characters`},
	} {
		err := tc.c.Validate()
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: Validate = %v, want ErrInvalidConfig naming %q", tc.c, err, tc.want)
		}
	}
	for _, c := range []Config{{ShutdownTimeout: -1}, {MetricsMaxTags: -1}, {ShutdownTimeout: 5 * time.Minute, MetricsMaxTags: 100_000}} {
		if err := c.Validate(); err != nil {
			t.Errorf("%+v: %v", c, err)
		}
	}
}

// TestMetricsMaxTagsNone: with a negative MetricsMaxTags no tag gets a
// label of its own; every segment ID is counted under tag="(other)".
func TestMetricsMaxTagsNone(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(c *Config) { c.MetricsMaxTags = -1 })
	if r := f.do(t, "GET", "/v1/segment/orders/next?count=3", ""); r.status != 200 {
		t.Fatalf("orders: %d %s", r.status, r.body)
	}
	text := f.do(t, "GET", "/metrics", "").body
	if got, ok := sample(t, text, `flakeid_ids_issued_total{kind="segment",tag="(other)"}`); !ok || got != 3 {
		t.Errorf(`flakeid_ids_issued_total{kind="segment",tag="(other)"} = %v, %v; want 3`, got, ok)
	}
	if strings.Contains(text, `tag="orders"`) {
		t.Error(`the metrics have tag="orders"`)
	}
}

// TestShutdownTimeoutNone: a negative ShutdownTimeout makes Serve return as
// soon as its context ends, without waiting for a connection that is in
// the middle of a request; a positive one waits for it (up to the timeout).
func TestShutdownTimeoutNone(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		timeout  time.Duration
		min, max time.Duration
	}{
		{-1, 0, 1500 * time.Millisecond},
		{2 * time.Second, 2 * time.Second, 30 * time.Second},
	} {
		f := newFixture(t, func(c *Config) { c.ShutdownTimeout = tc.timeout })
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- f.srv.Serve(ctx, ln) }()
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		// Half a request's headers: the connection is not idle.
		if _, err := c.Write([]byte("GET /healthz HTTP/1.1\r\nHost: x\r\n")); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
		start := time.Now()
		cancel()
		select {
		case err := <-done:
			if took := time.Since(start); took < tc.min || took > tc.max {
				t.Errorf("shutdown timeout %v: Serve returned after %v (%v), want %v–%v", tc.timeout, took, err, tc.min, tc.max)
			}
		case <-time.After(time.Minute):
			t.Fatalf("shutdown timeout %v: Serve still running a minute after its context ended", tc.timeout)
		}
		c.Close()
	}
}
