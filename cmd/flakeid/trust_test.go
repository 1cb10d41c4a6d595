package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestServeRefusesSkewedClock: a node whose clock is further from the
// coordinator's than --max-clock-skew is refused at start, with both times
// and the bound, instead of issuing.
func TestServeRefusesSkewedClock(t *testing.T) {
	t.Parallel()
	url := "file://" + filepath.Join(t.TempDir(), "workers.db")
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for _, tc := range []struct{ offset, want string }{
		{"-5s", "behind the coordinator's"},
		{"30s", "ahead of the coordinator's"},
	} {
		r := runCLIContext(t, ctx, "serve", "--listen", "127.0.0.1:0", "--coordinator", url, "--test-clock-offset="+tc.offset)
		mustFail(t, r, exitError, "clock skew", tc.want, "the bound is 1s")
	}
	// Within a wider bound the same node starts (here: next, which exits),
	// on a coordinator whose contract has the quarantine of that bound.
	url = "file://" + filepath.Join(t.TempDir(), "wide.db")
	r := runCLIContext(t, ctx, "next", "--coordinator", url, "--test-clock-offset=-5s", "--max-clock-skew=10s", "--max-wait=30s")
	if r.code != 0 {
		t.Fatalf("next with the clock 5 s behind and --max-clock-skew 10s: exit %d\n%s", r.code, r.stderr)
	}
}

// TestServeRefusesOtherLayout: the coordinator records the layout of the
// first node; a node with other bit widths is refused at start with both
// layouts shown, and the recorded one still works.
func TestServeRefusesOtherLayout(t *testing.T) {
	t.Parallel()
	url := "file://" + filepath.Join(t.TempDir(), "workers.db")
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if r := runCLIContext(t, ctx, "next", "--coordinator", url); r.code != 0 {
		t.Fatalf("first node: exit %d\n%s", r.code, r.stderr)
	}
	r := runCLIContext(t, ctx, "serve", "--listen", "127.0.0.1:0", "--coordinator", url, "--worker-bits", "4", "--sequence-bits", "13")
	mustFail(t, r, exitError, "contract", "41/5/5/12 × 1ms", "41/5/4/13 × 1ms")
	if strings.Count(r.stderr, "\n") > 5 {
		t.Errorf("the refusal takes %d lines:\n%s", strings.Count(r.stderr, "\n"), r.stderr)
	}
	r = runCLIContext(t, ctx, "next", "--coordinator", url, "--quarantine", "9s")
	mustFail(t, r, exitError, "quarantine 4s", "quarantine 9s")
	if r := runCLIContext(t, ctx, "next", "--coordinator", url); r.code != 0 {
		t.Fatalf("the recorded layout again: exit %d\n%s", r.code, r.stderr)
	}
}
