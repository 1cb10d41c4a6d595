package main

import "runtime/debug"

// serveGCPercent is the garbage collector's target (GOGC) `flakeid serve`
// runs with when the environment sets no GOGC. The service's live heap is
// small (about 2 MB) and steady, while every request leaves the same small
// garbage: at Go's default of 100 the collector runs every 2 MB and its
// marking is a visible share of a single-ID request (docs/BENCHMARKS.md,
// "Throughput at saturation"); at 400 the heap may grow to five times the
// live set — about 10 MB — and the marking costs a quarter as much.
const serveGCPercent = 400

// tuneGC sets the collector's target to serveGCPercent unless getenv("GOGC")
// is set (then the runtime already follows it), and returns the function that
// puts the previous target back.
func tuneGC(getenv func(string) string) (restore func()) {
	if getenv("GOGC") != "" {
		return func() {}
	}
	old := debug.SetGCPercent(serveGCPercent)
	return func() { debug.SetGCPercent(old) }
}
