package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/flakeid/flakeid/worker"
)

// coordFlags say where worker ids are leased; next, workers and serve embed
// them.
type coordFlags struct {
	Coordinator  string        `placeholder:"URL" env:"FLAKEID_COORDINATOR" help:"Where worker ids are leased: file:///path/workers.db (the default, under --data-dir), etcd://host:port[,host:port…][/prefix], redis://[:password@]host:port[/db][?prefix=P], postgres://user@host:port/db[?table=T], mysql://user[:password]@host:port/db[?table=T], zk://host:port[,host:port…][/path][?leaf=/snowflake/NAME], consul://host:port[/prefix]. Every namespace (prefix, path, table) of one coordinator shares its one datacenter registry, which records the layout and which namespace claimed each datacenter id, so two clusters on it never issue the same IDs."`
	Datacenter   int64         `default:"0" placeholder:"D" env:"FLAKEID_DATACENTER" help:"Datacenter id, 0 to 2^datacenter-bits − 1; clusters sharing a coordinator never collide when their datacenter ids differ."`
	LeaseTTL     time.Duration `default:"10s" placeholder:"DURATION" env:"FLAKEID_LEASE_TTL" help:"Worker-id lease TTL, 1s–10m (default 10s): how long a crashed node's worker id stays taken."`
	MaxClockSkew time.Duration `default:"1s" placeholder:"DURATION" env:"FLAKEID_MAX_CLOCK_SKEW" help:"How far this node's clock may differ from the coordinator's (etcd: from its live peers') before the node refuses to issue, 1ms–1m (default 1s); a new lease starts this far past its worker id's mark. Every node of a datacenter should use the same."`
	ReserveAhead time.Duration `placeholder:"DURATION" env:"FLAKEID_RESERVE_AHEAD" help:"How far ahead of the clock each renewal reserves: how long the node keeps issuing after its last successful renewal, whatever happens to the lease — a coordinator outage shorter than it, less the second or two a new lease takes once the coordinator answers again, costs the node nothing. It is also how long a restart landing on the same worker id waits at most, and part of --quarantine. Above the renewal period (1s, or a quarter of --lease-ttl), at most 10m; may exceed --lease-ttl (default 3s, or --lease-ttl when shorter)."`
	Quarantine   time.Duration `placeholder:"DURATION" env:"FLAKEID_QUARANTINE" help:"How long after a coordinator's state is first created or found lost nothing is issued: at least --reserve-ahead + --max-clock-skew, at most 1h (default their sum, 4s). Every node of a datacenter must use the same."`

	// TestClockOffset shifts this process's clock, for the fault-injection
	// tests (a node whose clock is behind). Hidden, and never set by default.
	TestClockOffset time.Duration `hidden:"" env:"FLAKEID_TEST_CLOCK_OFFSET" help:"TEST ONLY: run with the clock shifted by this much."`
	// TestClockAdmin serves POST /admin/test/clock, which shifts this
	// node's clock at run time (the verifier's clock jumps). Hidden; never
	// on by default.
	TestClockAdmin bool `hidden:"" env:"FLAKEID_TEST_CLOCK_ADMIN" help:"TEST ONLY: let POST /admin/test/clock shift this node's clock."`

	shift *shiftClock // the shiftable clock, made on first use
}

// shiftClock is time.Now shifted by an offset that the test admin endpoint
// moves. Its readings keep Go's monotonic part (shifted too), so the
// generator sees every shift as a clock jump.
type shiftClock struct{ offset atomic.Int64 }

// Now is the shifted time.
func (c *shiftClock) Now() time.Time { return time.Now().Add(time.Duration(c.offset.Load())) }

// Shift moves the clock by d and returns the new offset.
func (c *shiftClock) Shift(d time.Duration) time.Duration {
	return time.Duration(c.offset.Add(int64(d)))
}

// dataFlags name the directory of the embedded state (the default file
// coordinator and segment store).
type dataFlags struct {
	DataDir string `placeholder:"DIR" env:"FLAKEID_DATA_DIR" help:"Directory for the embedded state (default: XDG_STATE_HOME/flakeid, or ~/.local/state/flakeid)."`
}

// dir is --data-dir or the default under the user's state directory.
func (f *dataFlags) dir() (string, error) {
	if f.DataDir != "" {
		return f.DataDir, nil
	}
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "flakeid"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("no --data-dir and no home directory: %w", err)
	}
	return filepath.Join(home, ".local", "state", "flakeid"), nil
}

// clock is nil (the built-in clock) unless a hidden test flag asks for a
// shifted or shiftable one.
func (f *coordFlags) clock() func() time.Time {
	if c := f.testClock(); c != nil {
		return c.Now
	}
	return nil
}

// testClock is the shiftable clock of the test flags, or nil.
func (f *coordFlags) testClock() *shiftClock {
	if f.TestClockOffset == 0 && !f.TestClockAdmin {
		return nil
	}
	if f.shift == nil {
		f.shift = &shiftClock{}
		f.shift.offset.Store(int64(f.TestClockOffset))
	}
	return f.shift
}

// open opens the coordinator the flags name (see backends in open.go); the
// default is a file under the data directory. Close releases it.
func (f *coordFlags) open(ctx context.Context, data *dataFlags) (coordinator, error) {
	raw, err := f.url(data)
	if err != nil {
		return nil, err
	}
	return openCoordinator(ctx, raw)
}

// url is --coordinator, or the default: workers.db under the data
// directory.
func (f *coordFlags) url(data *dataFlags) (string, error) {
	if f.Coordinator != "" {
		return f.Coordinator, nil
	}
	dir, err := data.dir()
	if err != nil {
		return "", err
	}
	return "file://" + filepath.Join(dir, "workers.db"), nil
}

// leaseConfig is the node's lease settings from the flags: the lease's TTL,
// reservation, clock-skew bound and quarantine, and whether to wait while every worker id
// is held. The node derives the rest — the datacenter, the worker ids and
// the ID-space contract — from the layout and the datacenter id it is given.
func (f *coordFlags) leaseConfig(wait bool) worker.Config {
	return worker.Config{
		TTL:          f.LeaseTTL,
		ReserveAhead: f.ReserveAhead,
		MaxClockSkew: f.MaxClockSkew,
		Quarantine:   f.Quarantine,
		WaitForFree:  wait,
	}
}
