// Package verify is the engine of `flakeid verify`: it starts a cluster of
// real `flakeid serve` processes on loopback, in groups that lease worker
// ids from different coordinators (the main group on a private etcd,
// ZooKeeper or Consul agent; a private Redis, a table of PostgreSQL, files
// of their own) with distinct datacenter ids, all issuing into one ID space
// and keeping segments in PostgreSQL (one fault-injection proxy per link).
// It drives them with concurrent clients of every API while a nemesis
// jumps clocks, kills and restarts nodes, pauses the main group's
// coordinator, partitions a node from it, "restarts" PostgreSQL, wipes
// (ZooKeeper's disk, Consul's memory, Redis) or rolls back coordinators,
// truncates state files and starts misconfigured nodes (which must be
// refused), records every acknowledged ID with who answered it and when,
// and then checks the history: no ID twice, each process's IDs in order,
// each ID's worker id held by the process that issued it, nothing issued
// while a lease was lost, one holder per worker id, every misconfigured
// start refused, the cluster recovered after every fault. It can also
// verify a running cluster (Config.Targets) without injecting faults.
package verify

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flakeid/flakeid/internal/faultnet"
	"github.com/flakeid/flakeid/internal/zkproc"
	"github.com/flakeid/flakeid/snowflake"
)

// Config configures a run. Zero fields get the defaults of DefaultConfig.
type Config struct {
	// Duration is how long the clients run. The nemesis stops starting
	// faults a few seconds before the end, so the cluster's recovery is
	// observed too. A run whose required faults (MinFaults of each kind) no
	// longer fit, because recoveries took longer than their estimates, is
	// extended by up to half of Duration (extendFor) rather than end
	// without them.
	Duration time.Duration
	// Targets, when set, are running servers to verify: no cluster is
	// started and no fault injected.
	Targets []string
	// AllowOverlap lets targets that hold the same (datacenter, worker)
	// pair be verified (a test proving the checks catch what they issue);
	// otherwise such targets are refused before anything is sent.
	AllowOverlap bool
	// Coordinator is the main group's coordinator: "etcd" (the default),
	// "zk", "consul" or "nats" (Coordinators) — a private server the
	// verifier starts, and pauses, partitions and (zk, consul, nats) wipes.
	Coordinator string
	// Nodes is the size of the main group: the nodes that lease worker ids
	// from the private coordinator, in datacenter 0, whose clocks the
	// nemesis moves.
	Nodes int
	// RedisNodes, SQLNodes and FileNodes are the sizes of the other groups:
	// nodes on a private Redis (datacenter 1), on a fresh table of the
	// PostgreSQL (datacenter 2), and nodes with a file coordinator each
	// (datacenters 3, 4, …). Unlike the other fields, 0 is kept: no such
	// group (DefaultConfig has 2, 1 and 1).
	RedisNodes, SQLNodes, FileNodes int
	// Clients is the number of concurrent client goroutines; they cycle
	// through the APIs (HTTP count=1, HTTP count=1000, Connect unary,
	// Connect stream, HTTP segment, Connect segment).
	Clients int
	// Deadline is the answer time within which a call counts as answered
	// in the report's availability (what clients saw), and twice the Go
	// clients' per-attempt timeout. Range 1ms–1m; default 100ms.
	Deadline time.Duration
	// Rate is the calls per second of each fixed-rate client (paced.go):
	// the Go client without and with a buffer, and a plain HTTP and a plain
	// Redis-protocol client per node. Range 1–10,000; default 100.
	Rate int
	// Seed makes the nemesis's choices repeatable; 0 picks one.
	Seed uint64
	// LeaseTTL is the nodes' --lease-ttl: short, so faults bite fast.
	LeaseTTL time.Duration
	// SegmentDuration is the nodes' --segment-duration: short, so segments
	// are fetched often and a PostgreSQL restart can catch a fetch.
	SegmentDuration time.Duration
	// Postgres is the DSN of the PostgreSQL the segment store lives in (a
	// fresh table, dropped at the end).
	Postgres string
	// EtcdBin is the etcd executable, for the main group on etcd.
	EtcdBin string
	// ZKBin is ZooKeeper's zkServer.sh, for the main group on ZooKeeper
	// (default Debian's, zkproc.DefaultBin).
	ZKBin string
	// ConsulBin is the consul executable, for the main group on Consul
	// (default "consul" in PATH; ./scripts/consul-agent.sh builds one and
	// prints its path).
	ConsulBin string
	// NATSBin is the nats-server executable, for the main group on NATS
	// (default "nats-server" in PATH, then Debian's /usr/sbin/nats-server).
	NATSBin string
	// RedisBin is the redis-server executable, for the Redis group.
	RedisBin string
	// Bin is the flakeid executable the nodes run.
	Bin string
	// Tag is the segment tag the clients use.
	Tag string
	// Faults are the fault kinds to inject (nil: every kind of Kinds()
	// whose group has nodes).
	Faults []string
	// MinFaults: the run fails unless every fault kind was injected at
	// least this often — at most once for the kinds that cost a quarantine
	// or a start each (minFaults) — and the schedule tries that many rounds
	// first. 0: no such check. A Duration too short for those rounds at the
	// kinds' estimates is refused (validate names the duration they need).
	MinFaults int
	// Languages are the client languages whose clients the run drives
	// (Languages(): python, js, java): per language a caller with a
	// buffer at Rate, as the buffered Go client, and a local generator,
	// which the local-kill and local-stop faults hit (langs.go). Default
	// none.
	Languages []string
	// ClientsDir is the repository's clients directory, where the
	// languages' clients and their drivers are. Default "clients".
	ClientsDir string
	// Layout is the layout of the IDs; LayoutArgs the flags that give the
	// nodes the same layout.
	Layout     snowflake.Layout
	LayoutArgs []string
	// PollEvery is the period of the /v1/status polls.
	PollEvery time.Duration
	// Dir is the work directory (node data and logs); "" makes a temporary
	// one, removed at the end unless Keep.
	Dir  string
	Keep bool
	// Stdout receives the report, Stderr the progress.
	Stdout, Stderr io.Writer
}

// DefaultConfig is the CI profile: seven nodes (three on etcd, two on
// Redis, one on PostgreSQL, one on a file), sixteen clients, three minutes,
// every fault kind at least twice (once for the kinds of minFaults).
func DefaultConfig() Config {
	return Config{
		Duration:        3*time.Minute + 30*time.Second,
		Nodes:           3,
		RedisNodes:      2,
		SQLNodes:        1,
		FileNodes:       1,
		Clients:         16,
		Deadline:        100 * time.Millisecond,
		Rate:            100,
		LeaseTTL:        2 * time.Second,
		SegmentDuration: 2 * time.Second,
		Postgres:        "postgres://postgres@127.0.0.1:5432/test?sslmode=disable",
		Coordinator:     groupEtcd,
		EtcdBin:         "etcd",
		ZKBin:           zkproc.DefaultBin,
		ConsulBin:       "consul",
		NATSBin:         "nats-server",
		RedisBin:        "redis-server",
		Tag:             "verify",
		MinFaults:       2,
		Layout:          snowflake.DefaultLayout(),
		PollEvery:       100 * time.Millisecond,
		Stdout:          io.Discard,
		Stderr:          io.Discard,
	}
}

// ErrViolations is returned when a check failed; the report says which.
var ErrViolations = errors.New("verify: the history violates the guarantees")

// runner is one run.
type runner struct {
	cfg    Config
	layout snowflake.Layout
	t0     time.Time
	dir    string

	coord    coordServer // the main group's coordinator server
	pgProxy  *faultnet.Proxy
	storeURL string
	table    string
	segments bool // the tag exists on the servers

	redis       *redisProc // the Redis group's server
	sqlCoordURL string     // the SQL group's --coordinator
	sqlSchema   string     // the SQL group's schema: its coordinator's database (dropped at the end)
	sqlTables   []string   // the SQL group's tables in it: workers, snapshot
	extraStarts int        // processes started to be refused, for their directories
	groups      []*group
	nodes       []*node
	logMu       sync.Mutex // serializes progress lines
	mu          sync.Mutex // guards incs, faults, refusals, samples
	incs        []*incarnation
	langs       *langRun // the languages' drivers (nil: none)

	faults   []fault
	refusals []refusal      // the starts that had to be refused
	samples  map[string]int // error samples: "api: class: message" → count

	hc     *http.Client // HTTP/1.1 for the JSON API
	h2c    *http.Client // HTTP/2 without TLS for Connect
	pollHC *http.Client

	// sleep is how the fixed-rate clients' schedules sleep until a send
	// (sleepCtx when nil; a test's oversleeps).
	sleep func(ctx context.Context, d time.Duration)

	// end is when the load stops (r.now()): Duration after it started,
	// moved later by extendFor, never past hardEnd.
	end     atomic.Int64
	hardEnd int64
}

func (r *runner) now() int64 { return int64(time.Since(r.t0)) }

// extendFor moves the run's end so that d more fits before it, up to the
// bound (half of Duration past the planned end), when the nemesis's
// required faults (kinds) would otherwise not fit: their recoveries took
// longer than their estimates, as they do on a loaded machine. It reports
// whether all of d fits now.
func (r *runner) extendFor(d time.Duration, kinds []string) bool {
	for {
		now, cur := r.now(), r.end.Load()
		to := extended(cur, r.hardEnd, now, d)
		if to == cur {
			return now+int64(d) <= cur
		}
		if r.end.CompareAndSwap(cur, to) {
			r.logf("the run is extended by %v for the required faults %v", time.Duration(to-cur).Round(100*time.Millisecond), kinds)
			return now+int64(d) <= to
		}
	}
}

// extended is a run's end moved so that d fits after now, but not past
// hardEnd and never earlier than end.
func extended(end, hardEnd, now int64, d time.Duration) int64 {
	return max(end, min(now+int64(d), hardEnd))
}

func (r *runner) logf(format string, args ...any) {
	r.logMu.Lock()
	defer r.logMu.Unlock()
	fmt.Fprintf(r.cfg.Stderr, "verify %7.1fs  %s\n", time.Duration(r.now()).Seconds(), fmt.Sprintf(format, args...))
}

func withDefaults(c Config) Config {
	d := DefaultConfig()
	if c.Duration == 0 {
		c.Duration = d.Duration
	}
	if c.Nodes == 0 {
		c.Nodes = d.Nodes
	}
	if c.Clients == 0 {
		c.Clients = d.Clients
	}
	if c.LeaseTTL == 0 {
		c.LeaseTTL = d.LeaseTTL
	}
	if c.Deadline == 0 {
		c.Deadline = d.Deadline
	}
	if c.Rate == 0 {
		c.Rate = d.Rate
	}
	if c.SegmentDuration == 0 {
		c.SegmentDuration = d.SegmentDuration
	}
	if c.Postgres == "" {
		c.Postgres = d.Postgres
	}
	if c.Coordinator == "" {
		c.Coordinator = d.Coordinator
	}
	if c.EtcdBin == "" {
		c.EtcdBin = d.EtcdBin
	}
	if c.ZKBin == "" {
		c.ZKBin = d.ZKBin
	}
	if c.ConsulBin == "" {
		c.ConsulBin = d.ConsulBin
	}
	if c.RedisBin == "" {
		c.RedisBin = d.RedisBin
	}
	if c.Tag == "" {
		c.Tag = d.Tag
	}
	if c.ClientsDir == "" {
		c.ClientsDir = "clients"
	}
	if c.Layout == (snowflake.Layout{}) {
		c.Layout = d.Layout
	}
	if c.PollEvery == 0 {
		c.PollEvery = d.PollEvery
	}
	if c.Stdout == nil {
		c.Stdout = d.Stdout
	}
	if c.Stderr == nil {
		c.Stderr = d.Stderr
	}
	if c.Seed == 0 {
		c.Seed = rand.Uint64()%1_000_000 + 1
	}
	if c.Faults == nil && len(c.Targets) == 0 {
		for _, k := range Kinds() {
			if c.hasGroup(kindInfo[k].group) {
				c.Faults = append(c.Faults, k)
			}
		}
	}
	return c
}

func (c Config) validate() error {
	switch {
	case !slices.Contains(Coordinators(), c.Coordinator):
		return fmt.Errorf("coordinator %q: want one of %s", c.Coordinator, strings.Join(Coordinators(), ", "))
	case c.Duration < time.Second:
		return fmt.Errorf("duration %v: want at least 1s", c.Duration)
	case c.Nodes < 1 || c.Nodes > 100:
		return fmt.Errorf("nodes %d: want 1–100", c.Nodes)
	case c.RedisNodes < 0 || c.RedisNodes > 20 || c.SQLNodes < 0 || c.SQLNodes > 20 || c.FileNodes < 0 || c.FileNodes > 20:
		return fmt.Errorf("redis nodes %d, SQL nodes %d, file nodes %d: want 0–20 each", c.RedisNodes, c.SQLNodes, c.FileNodes)
	case c.Nodes+c.RedisNodes+c.SQLNodes+c.FileNodes > 100:
		return fmt.Errorf("%d nodes in all: want at most 100", c.Nodes+c.RedisNodes+c.SQLNodes+c.FileNodes)
	case len(c.Targets) > 100:
		return fmt.Errorf("%d targets: want at most 100", len(c.Targets))
	case c.Clients < 1 || c.Clients > 10_000:
		return fmt.Errorf("clients %d: want 1–10000", c.Clients)
	case c.Deadline < time.Millisecond || c.Deadline > time.Minute:
		return fmt.Errorf("deadline %v: want 1ms–1m", c.Deadline)
	case c.Rate < 1 || c.Rate > 10_000:
		return fmt.Errorf("rate %d calls/s: want 1–10000", c.Rate)
	case c.PollEvery < 10*time.Millisecond:
		return fmt.Errorf("poll period %v: want at least 10ms", c.PollEvery)
	case c.MinFaults < 0:
		return fmt.Errorf("min faults %d: want 0 or more", c.MinFaults)
	}
	for _, l := range c.Languages {
		if _, ok := languageInfo[l]; !ok {
			return fmt.Errorf("language %q: want some of %s", l, strings.Join(Languages(), ", "))
		}
		if len(c.Targets) > 0 {
			return errors.New("languages drive the main group's nodes: not for targets")
		}
	}
	if l := c.Languages; len(l) != len(slices.Compact(slices.Clone(l))) || !slices.IsSortedFunc(l, func(a, b string) int {
		return slices.Index(Languages(), a) - slices.Index(Languages(), b)
	}) {
		return fmt.Errorf("languages %v: each once, in the order %s", l, strings.Join(Languages(), ", "))
	}
	for _, k := range c.Faults {
		info, ok := kindInfo[k]
		if !ok {
			return fmt.Errorf("fault kind %q: want one of %v", k, Kinds())
		}
		if len(c.Targets) > 0 {
			continue
		}
		switch info.group {
		case groupEtcd, groupZK, groupConsul, groupNATS:
			if c.Coordinator != info.group {
				return fmt.Errorf("fault kind %q is for the main group on %s (--coordinator %s); it runs on %s, whose kinds are %s",
					k, coordName(info.group), info.group, coordName(c.Coordinator), strings.Join(c.coordKinds(), ", "))
			}
		}
		if !c.hasGroup(info.group) {
			group := info.group
			if group == groupMain || group == c.Coordinator {
				group = "main (" + coordName(c.Coordinator) + ")"
			}
			return fmt.Errorf("fault kind %q needs the %s group, which has no nodes", k, group)
		}
	}
	if len(c.Targets) == 0 && c.Bin == "" {
		return errors.New("no flakeid binary for the nodes")
	}
	if need := c.minRun(); c.MinFaults > 0 && need > c.Duration {
		return fmt.Errorf("duration %v is too short for the faults every run must inject (%v, at least %d of each, once of those marked once): "+
			"at their estimates, with the lead-in and the quiet end, they need %v; give a duration of at least that, fewer kinds, or --min-faults 0",
			c.Duration, c.Faults, c.MinFaults, need.Round(time.Second))
	}
	return nil
}

// minRun is how long a run must be for c's minimum schedule (MinFaults of
// every kind) to fit at the kinds' estimates: the nemesis's lead-in, the
// estimates, and the quiet end in which no fault starts — for the
// nemesis's kinds and for the local generators', which run beside them.
func (c Config) minRun() time.Duration {
	need := func(kinds []string) time.Duration {
		d := min(nemesisLead, c.Duration/10) + quiet
		for _, k := range kinds {
			d += time.Duration(minFaults(k, c.MinFaults)) * kindInfo[k].est(c.LeaseTTL)
		}
		return d
	}
	return max(need(c.mainKinds()), need(c.localKinds())) // the local generators' faults run beside the others
}

// Run runs the verification and writes its report; it returns
// ErrViolations when a check failed, another error when the run itself
// could not be done.
func Run(ctx context.Context, cfg Config) error {
	cfg = withDefaults(cfg)
	if err := cfg.validate(); err != nil {
		return err
	}
	layout, err := cfg.Layout.Normalize()
	if err != nil {
		return err
	}
	if len(cfg.Targets) == 0 {
		if top := cfg.topDatacenter(); top >= int64(1)<<layout.DatacenterBits {
			return fmt.Errorf("the groups need datacenter ids 0–%d, the layout has %d datacenter bits: give --datacenter-bits or fewer groups", top, layout.DatacenterBits)
		}
	}
	// The history is a few large pointer-free slices: collecting garbage
	// early costs little and keeps the peak near the live size (a
	// 10-minute run holds ~7 M requests and ~3 G IDs as ranges).
	defer debug.SetGCPercent(debug.SetGCPercent(25))
	r := &runner{cfg: cfg, layout: layout, t0: time.Now(), samples: map[string]int{}}
	dial := &net.Dialer{Timeout: time.Second, KeepAlive: 30 * time.Second}
	r.hc = &http.Client{Transport: &http.Transport{DialContext: dial.DialContext,
		MaxIdleConns: 4 * cfg.Clients, MaxIdleConnsPerHost: 2 * cfg.Clients, DisableCompression: true}}
	h2 := &http.Transport{DialContext: dial.DialContext, Protocols: new(http.Protocols)}
	h2.Protocols.SetUnencryptedHTTP2(true)
	r.h2c = &http.Client{Transport: h2}
	r.pollHC = &http.Client{Transport: &http.Transport{DialContext: dial.DialContext, MaxIdleConnsPerHost: 4}}
	defer r.hc.CloseIdleConnections()
	defer r.h2c.CloseIdleConnections()
	defer r.pollHC.CloseIdleConnections()

	if len(cfg.Targets) > 0 {
		fmt.Fprintf(cfg.Stderr, "verify: %d target servers, %d clients, %v, no faults injected\n", len(cfg.Targets), cfg.Clients, cfg.Duration)
		if err := r.setupTargets(ctx); err != nil {
			r.teardown()
			return err
		}
	} else {
		r.dir = cfg.Dir
		if r.dir == "" {
			if r.dir, err = os.MkdirTemp("", "flakeid-verify-"); err != nil {
				return err
			}
			if !cfg.Keep {
				defer os.RemoveAll(r.dir)
			}
		} else if err := os.MkdirAll(r.dir, 0o755); err != nil {
			return err
		}
		fmt.Fprintf(cfg.Stderr, "verify: %s; %d clients, %v, seed %d, work directory %s\n",
			cfg.describeGroups(), cfg.Clients, cfg.Duration, cfg.Seed, r.dir)
		err := r.setupCluster(ctx)
		if err != nil {
			r.teardown()
			return err
		}
		for _, n := range r.nodes {
			inc := n.cur.Load()
			r.logf("%s (%s group, datacenter %d) serving on %s (pid %d)", inc.name(), n.grp.kind, n.grp.dc, inc.url, inc.pid)
		}
	}

	if err := r.startLanguages(ctx); err != nil {
		r.stopLanguages()
		r.teardown()
		return err
	}
	// The load, and the nemesis beside it.
	loadStart := r.now()
	r.end.Store(loadStart + int64(cfg.Duration))
	r.hardEnd = loadStart + int64(cfg.Duration+cfg.Duration/2)
	loadCtx, stopLoad := context.WithCancel(ctx)
	recs := make([]*recorder, cfg.Clients+1)
	var wg sync.WaitGroup
	for i := range cfg.Clients {
		rec := &recorder{}
		recs[i] = rec
		wg.Go(func() { r.client(loadCtx, i, rec) })
	}
	probes := &recorder{} // the nemesis's health probes
	recs[cfg.Clients] = probes
	pacedRecs, late, stopPaced, err := r.pacedClients(loadCtx, &wg)
	if err != nil {
		stopLoad()
		wg.Wait()
		r.stopLanguages()
		r.teardown()
		return err
	}
	recs = append(recs, pacedRecs...)
	r.runLocals(loadCtx, &wg)
	// Two more clients take numbers of the run's series (HTTP, Connect).
	srec := &seriesRecorder{}
	if r.segments {
		for i, viaRPC := range []bool{false, true} {
			wg.Go(func() { r.seriesClient(loadCtx, i, viaRPC, srec) })
		}
	}
	nemesisDone := make(chan struct{})
	go func() {
		defer close(nemesisDone)
		if len(cfg.Targets) == 0 && len(cfg.Faults) > 0 {
			var nwg sync.WaitGroup
			nwg.Go(func() { r.localNemesis(loadCtx) })
			r.nemesis(loadCtx, probes)
			nwg.Wait()
		}
	}()
	// Until the end, which the nemeses may move later.
wait:
	for left := time.Duration(r.end.Load() - r.now()); left > 0; left = time.Duration(r.end.Load() - r.now()) {
		select {
		case <-time.After(left):
		case <-ctx.Done():
			r.logf("interrupted: checking what was recorded so far")
			break wait
		}
	}
	stopLoad()
	wg.Wait()
	stopPaced()
	<-nemesisDone
	r.stopLanguages()
	if r.langs != nil {
		recs = append(recs, r.langs.recs...)
	}
	loadEnd := r.now()
	r.logf("load stopped; stopping the cluster")
	r.teardown()

	h := &history{incs: r.incs, faults: r.faults, refusals: r.refusals, wall0: r.t0, length: loadEnd}
	h.reqs, h.sf, h.seg = merge(recs)
	r.logf("checking %d requests", len(h.reqs))
	rep := r.check(h, loadStart, loadEnd, late.wakes)
	if r.segments {
		rep.addSeries(r.seriesTag(), r.checkSeries(srec, h.incs))
	}
	rep.write(cfg.Stdout)
	if cfg.Keep && r.dir != "" {
		fmt.Fprintf(cfg.Stdout, "\nnode logs kept in %s\n", filepath.Join(r.dir))
	}
	if rep.failed {
		return ErrViolations
	}
	return nil
}
