package main

import (
	"runtime/debug"
	"testing"
)

// gcPercent reads the collector's target.
func gcPercent() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
}

func TestTuneGC(t *testing.T) {
	before := gcPercent()
	restore := tuneGC(func(string) string { return "" })
	if got := gcPercent(); got != serveGCPercent {
		t.Errorf("without GOGC: target %d, want %d", got, serveGCPercent)
	}
	restore()
	if got := gcPercent(); got != before {
		t.Errorf("after restore: target %d, want %d", got, before)
	}
	restore = tuneGC(func(k string) string {
		if k == "GOGC" {
			return "50"
		}
		return ""
	})
	if got := gcPercent(); got != before {
		t.Errorf("with GOGC=50 set: target %d changed from %d (the runtime follows GOGC itself)", got, before)
	}
	restore()
}
