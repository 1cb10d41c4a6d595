package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/flakeid/flakeid/cmd/flakeid/internal/verify"
)

// verifyCmd is the fault-injection verifier: it starts a cluster of `flakeid
// serve` processes (this binary) in groups on a private etcd, ZooKeeper or
// Consul agent (--coordinator), a private Redis, a PostgreSQL table and
// files of their own, loads it through every API while a nemesis injects
// faults, and checks every acknowledged ID. The engine is cmd/flakeid/internal/verify;
// docs/GUARANTEES.md shows a run's tables.
type verifyCmd struct {
	Duration        time.Duration `default:"3m30s" placeholder:"DURATION" env:"FLAKEID_VERIFY_DURATION" help:"How long the clients run (3m30s: the CI profile; 30m: a soak)."`
	Target          string        `placeholder:"URL[,URL…]" env:"FLAKEID_VERIFY_TARGET" help:"Verify these running servers instead (no cluster started, no fault injected). Give their layout flags."`
	Coordinator     string        `default:"etcd" enum:"etcd,zk,consul,nats" placeholder:"etcd|zk|consul|nats" env:"FLAKEID_VERIFY_COORDINATOR" help:"The main group's coordinator, a private server the verifier starts, pauses, cuts off and (zk, consul, nats) wipes: etcd, zk (ZooKeeper), consul (a Consul dev agent) or nats (a NATS server with JetStream)."`
	Nodes           int           `default:"3" env:"FLAKEID_VERIFY_NODES" help:"Nodes of the main group, on the private --coordinator (datacenter 0), whose clocks the nemesis moves."`
	RedisNodes      int           `default:"2" env:"FLAKEID_VERIFY_REDIS_NODES" help:"Nodes on a private Redis without persistence (datacenter 1); 0: none, and no Redis faults."`
	SQLNodes        int           `name:"sql-nodes" default:"1" env:"FLAKEID_VERIFY_SQL_NODES" help:"Nodes on a fresh coordinator table of --postgres (datacenter 2); 0: none, and no sql-rollback."`
	FileNodes       int           `default:"1" env:"FLAKEID_VERIFY_FILE_NODES" help:"Nodes with a file coordinator each (datacenters 3, 4, …); 0: none, and no truncated-state."`
	Clients         int           `default:"16" env:"FLAKEID_VERIFY_CLIENTS" help:"Concurrent clients, cycling through HTTP count=1, HTTP count=1000, Connect unary and stream, HTTP and Connect segment calls."`
	Deadline        time.Duration `default:"100ms" env:"FLAKEID_VERIFY_DEADLINE" help:"A call counts as answered when its IDs arrive within this, 1ms–1m (the Go clients' per-attempt timeout is half of it); the report gives per API the share so answered, as nines, and latency p50/p99/p99.9/max."`
	Rate            int           `default:"100" env:"FLAKEID_VERIFY_RATE" help:"Calls per second of each fixed-rate client, 1–10000: the Go client with failover over the main group (without and with a buffer) and a plain HTTP and Redis-protocol client per node, timed from when their schedule meant to send (coordinated-omission corrected)."`
	Seed            uint64        `placeholder:"N" env:"FLAKEID_VERIFY_SEED" help:"Seed of the nemesis's choices (0: random; the report prints it)."`
	Faults          string        `default:"all" env:"FLAKEID_VERIFY_FAULTS" help:"Fault kinds to inject, comma-separated, or all (those whose groups have nodes, and the --coordinator's own), or none: clock-back, clock-forward, kill, restart-behind, etcd-pause, etcd-partition (--coordinator etcd), zk-pause, zk-partition, zk-restart, zk-data-loss (zk), consul-pause, consul-partition, consul-data-loss (consul), nats-pause, nats-partition, nats-data-loss (nats), pg-restart, redis-restart-nosave, redis-keys-deleted, sql-rollback, truncated-state, other-layout, other-space, clock-ahead, config-typo, local-kill, local-stop (--languages)."`
	MinFaults       int           `default:"2" env:"FLAKEID_VERIFY_MIN_FAULTS" help:"Fail unless every fault kind was injected at least this many times — at most once for the data-loss kinds and the last eight, which cost a quarantine or a refused start each (0: no such check). A --duration too short for that many at the kinds' estimates is refused, naming the duration needed; a run whose recoveries took longer than estimated is extended, by up to half of --duration, until they are all injected."`
	LeaseTTL        time.Duration `default:"2s" env:"FLAKEID_VERIFY_LEASE_TTL" help:"The nodes' --lease-ttl (short, so faults bite fast); with --target, at most the servers' TTL."`
	SegmentDuration time.Duration `default:"2s" env:"FLAKEID_VERIFY_SEGMENT_DURATION" help:"The nodes' --segment-duration (short, so segments are fetched often)."`
	Postgres        string        `default:"postgres://postgres@127.0.0.1:5432/test?sslmode=disable" env:"FLAKEID_TEST_POSTGRES" help:"PostgreSQL for the segment store (a fresh table, dropped at the end)."`
	EtcdBin         string        `default:"etcd" env:"FLAKEID_ETCD_BIN" help:"The etcd executable, for --coordinator etcd (Debian's etcd-server; ./scripts/services.sh installs it)."`
	ZKBin           string        `name:"zk-bin" default:"/usr/share/zookeeper/bin/zkServer.sh" env:"FLAKEID_ZK_BIN" help:"ZooKeeper's zkServer.sh, for --coordinator zk (Debian's zookeeper package; ./scripts/services.sh installs it)."`
	ConsulBin       string        `default:"consul" env:"FLAKEID_CONSUL_BIN" help:"The consul executable, for --coordinator consul. Consul has no Debian package: ./scripts/consul-agent.sh builds one (once per machine) and prints its path."`
	NATSBin         string        `default:"nats-server" env:"FLAKEID_NATS_BIN" help:"The nats-server executable, for --coordinator nats (Debian's nats-server package)."`
	RedisBin        string        `default:"redis-server" env:"FLAKEID_REDIS_BIN" help:"The redis-server executable, for the Redis group's private server."`
	Bin             string        `type:"path" placeholder:"FILE" env:"FLAKEID_VERIFY_BIN" help:"The flakeid executable the nodes run (default: this one)."`
	Languages       string        `env:"FLAKEID_VERIFY_LANGUAGES" placeholder:"python,js,java" help:"Client languages to drive, comma-separated (python, js, java, in that order): per language the client with a buffer at --rate over the main group, as the buffered Go client, and a local generator that local-kill kills -9 and local-stop stops past its reservation; every ID checked with the rest. The worker field then defaults to 3 bits, not 2. Needs python3, node, and a JDK's javac and java. Default none."`
	ClientsDir      string        `default:"clients" env:"FLAKEID_VERIFY_CLIENTS_DIR" help:"The repository's clients directory, with the clients --languages drives and their drivers."`
	Tag             string        `default:"verify" env:"FLAKEID_VERIFY_TAG" help:"Segment tag the clients use (created if missing)."`
	Dir             string        `type:"path" placeholder:"DIR" env:"FLAKEID_VERIFY_DIR" help:"Work directory for the nodes' data and logs (default: a temporary one)."`
	Keep            bool          `env:"FLAKEID_VERIFY_KEEP" help:"Keep the work directory (node logs) after the run."`
	TestOverlap     bool          `hidden:"" env:"FLAKEID_TEST_OVERLAP" help:"TEST ONLY: verify --target servers even when two hold the same worker id, to prove the checks catch what they issue."`

	Layout layoutFlags `embed:""`
}

// Run runs the verification; violations make it fail.
func (c *verifyCmd) Run(ctx context.Context, out *streams) error {
	cfg := verify.DefaultConfig()
	cfg.Duration, cfg.Nodes, cfg.Clients, cfg.Seed = c.Duration, c.Nodes, c.Clients, c.Seed
	cfg.Deadline, cfg.Rate = c.Deadline, c.Rate
	if c.Deadline <= 0 || c.Rate <= 0 { // zero would read as the default
		return fmt.Errorf("--deadline %v, --rate %d: want a deadline of 1ms–1m and a rate of 1–10000 calls/s", c.Deadline, c.Rate)
	}
	cfg.RedisNodes, cfg.SQLNodes, cfg.FileNodes, cfg.RedisBin = c.RedisNodes, c.SQLNodes, c.FileNodes, c.RedisBin
	cfg.MinFaults, cfg.LeaseTTL, cfg.SegmentDuration = c.MinFaults, c.LeaseTTL, c.SegmentDuration
	cfg.Postgres, cfg.EtcdBin, cfg.Tag, cfg.Dir, cfg.Keep = c.Postgres, c.EtcdBin, c.Tag, c.Dir, c.Keep
	cfg.Coordinator, cfg.ZKBin, cfg.ConsulBin, cfg.NATSBin = c.Coordinator, c.ZKBin, c.ConsulBin, c.NATSBin
	cfg.Stdout, cfg.Stderr = out.stdout, out.stderr
	if c.Languages != "" {
		for _, l := range strings.Split(c.Languages, ",") {
			cfg.Languages = append(cfg.Languages, strings.TrimSpace(l))
		}
		dir, err := filepath.Abs(c.ClientsDir)
		if err != nil {
			return err
		}
		if _, err := os.Stat(filepath.Join(dir, "python", "verify")); err != nil {
			return fmt.Errorf("--clients-dir %s: not the repository's clients directory (%v); run from the repository's root or give it", c.ClientsDir, err)
		}
		cfg.ClientsDir = dir
	}
	cfg.AllowOverlap = c.TestOverlap
	if c.Target != "" {
		for _, t := range strings.Split(c.Target, ",") {
			if t = strings.TrimSpace(t); t != "" {
				cfg.Targets = append(cfg.Targets, t)
			}
		}
	}
	switch c.Faults {
	case "all":
		cfg.Faults = nil // every kind whose group has nodes
	case "none", "":
		cfg.Faults = []string{}
	default:
		for _, k := range strings.Split(c.Faults, ",") {
			cfg.Faults = append(cfg.Faults, strings.TrimSpace(k))
		}
	}
	if len(cfg.Targets) > 0 {
		cfg.Faults, cfg.MinFaults = []string{}, 0
	}
	// The cluster runs with 4 worker ids unless the layout flags say
	// otherwise: worker ids then change hands between nodes often, which is
	// what the high-water marks must survive. With --languages, 8: the
	// languages' local generators lease from the main group too.
	if cfg.Targets == nil && c.Layout.WorkerBits == nil {
		bits := 2
		if len(cfg.Languages) > 0 {
			bits = 3
		}
		c.Layout.WorkerBits = &bits
	}
	l, err := c.Layout.layout()
	if err != nil {
		return err
	}
	cfg.Layout, cfg.LayoutArgs = l, c.Layout.args()
	cfg.Bin = c.Bin
	if cfg.Bin == "" && cfg.Targets == nil {
		if cfg.Bin, err = os.Executable(); err != nil {
			return fmt.Errorf("finding this executable for the nodes (give --bin): %w", err)
		}
	}
	err = verify.Run(ctx, cfg)
	if errors.Is(err, verify.ErrViolations) {
		return errors.New("violations found (see the report above)")
	}
	return err
}

// args are the command-line flags that give another flakeid process the
// same layout.
func (f *layoutFlags) args() []string {
	args := []string{"--preset", f.Preset}
	add := func(name string, v *int) {
		if v != nil {
			args = append(args, "--"+name, strconv.Itoa(*v))
		}
	}
	add("time-bits", f.TimeBits)
	add("datacenter-bits", f.DatacenterBits)
	add("worker-bits", f.WorkerBits)
	add("sequence-bits", f.SequenceBits)
	if f.Epoch != nil {
		args = append(args, "--epoch", time.Time(*f.Epoch).UTC().Format(time.RFC3339Nano))
	}
	if f.TimeUnit != nil {
		args = append(args, "--time-unit", f.TimeUnit.String())
	}
	return args
}
