package main

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flakeid/flakeid/server"
)

// TestConfigServeExplicitZero: --shutdown-timeout 0 (do not wait) and
// --metrics-max-tags 0 (no tag labels), given as flags, in the config file
// or as variables, reach server.Config as its "none" (negative), not as a
// zero field (which would mean the defaults, 10s and 1000); unset, they
// are the defaults. A flag whose range excludes 0 is refused at 0 in the
// server's words, not taken as the server's default.
func TestConfigServeExplicitZero(t *testing.T) {
	// Not parallel: it sets variables.
	parse := func(args ...string) (server.Config, error) {
		t.Helper()
		var c cli
		p, err := newParser(t.Context(), &c, io.Discard, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.Parse(append([]string{"serve"}, args...)); err != nil {
			t.Fatal(err)
		}
		return c.Serve.config()
	}
	none := func(how string, cfg server.Config, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", how, err)
		}
		if cfg.ShutdownTimeout >= 0 || cfg.MetricsMaxTags >= 0 {
			t.Errorf("%s: shutdown timeout %v and metrics max tags %d, want both negative (none)", how, cfg.ShutdownTimeout, cfg.MetricsMaxTags)
		}
		if err := cfg.Validate(); err != nil {
			t.Errorf("%s: %v", how, err)
		}
	}

	cfg, err := parse()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ShutdownTimeout != 10*time.Second || cfg.MetricsMaxTags != 1000 {
		t.Errorf("unset: shutdown timeout %v and metrics max tags %d, want 10s and 1000", cfg.ShutdownTimeout, cfg.MetricsMaxTags)
	}
	cfg, err = parse("--shutdown-timeout", "0s", "--metrics-max-tags", "0")
	none("flags", cfg, err)
	file := filepath.Join(t.TempDir(), "flakeid.json")
	if err := os.WriteFile(file, []byte(`{"shutdown_timeout": "0s", "metrics_max_tags": 0}`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err = parse("--config", file)
	none("config file", cfg, err)
	t.Setenv("FLAKEID_SHUTDOWN_TIMEOUT", "0")
	t.Setenv("FLAKEID_METRICS_MAX_TAGS", "0")
	cfg, err = parse()
	none("variables", cfg, err)
	os.Unsetenv("FLAKEID_SHUTDOWN_TIMEOUT") // t.Setenv restores them
	os.Unsetenv("FLAKEID_METRICS_MAX_TAGS")

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--max-count", "0"}, "max count 0, want 1–10,000,000"},
		{[]string{"--stream-batch", "0"}, "stream batch 0, want 1–100000 (max count)"},
		{[]string{"--read-timeout", "0s"}, "read timeout 0s, want 1s–5m"},
		{[]string{"--write-timeout", "0s"}, "write timeout 0s, want 1s–10m"},
		{[]string{"--idle-timeout", "0s"}, "idle timeout 0s, want 1s–1h"},
		{[]string{"--max-conns", "0"}, "max conns 0, want 1–1,000,000"},
		{[]string{"--resp-max-conns", "0"}, "resp max conns 0, want 1–1,000,000"},
		{[]string{"--resp-max-args", "0"}, "resp max args 0, want 1–1,048,576"},
		{[]string{"--resp-max-request", "0"}, "resp max request 0 bytes, want 1024–67,108,864"},
		{[]string{"--shutdown-timeout=-1s"}, "shutdown timeout -1s, want 0–5m"},
		{[]string{"--shutdown-timeout", "6m"}, "shutdown timeout 6m0s, want 0–5m"},
		{[]string{"--metrics-max-tags=-1"}, "metrics max tags -1, want 0–100,000"},
		{[]string{"--metrics-max-tags", "100001"}, "metrics max tags 100001, want 0–100,000"},
	} {
		_, err := parse(tc.args...)
		if !errors.Is(err, server.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want an error naming %q", tc.args, err, tc.want)
		}
	}
}
