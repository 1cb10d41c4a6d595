package verify

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/flakeid/flakeid/backend/sqldb"
)

// The groups of the cluster: each leases worker ids from a coordinator of
// its own kind, in a datacenter of its own, and all issue into one ID space,
// so that a coordinator that lost its state and handed a worker id out again
// would show as duplicates across the whole history. The main group
// (datacenter 0: its clocks are stepped, its coordinator paused, cut off
// and wiped) is on a private etcd, ZooKeeper or Consul agent
// (Config.Coordinator).
const (
	groupEtcd   = "etcd"   // the main group on a private etcd
	groupZK     = "zk"     // the main group on a private ZooKeeper
	groupConsul = "consul" // the main group on a private Consul dev agent
	groupNATS   = "nats"   // the main group on a private NATS server with JetStream
	groupRedis  = "redis"  // a private redis-server, datacenter 1
	groupSQL    = "sql"    // a fresh table of the PostgreSQL, datacenter 2
	groupFile   = "file"   // one file coordinator per node, datacenters 3, 4, …
	// groupMain, as the group of a fault kind, is the main group whichever
	// its coordinator.
	groupMain = "main"
	// groupLocal, as the group of a fault kind, is the languages' local
	// generators (Config.Languages), which lease from the main group.
	groupLocal = "local generators"
)

// Coordinators are the coordinators the main group can run on
// (Config.Coordinator).
func Coordinators() []string { return []string{groupEtcd, groupZK, groupConsul, groupNATS} }

const (
	// mainClockSkew is the main group's --max-clock-skew. Its clocks are
	// stepped by the clock faults, and a node whose clock differs from the
	// clock its coordinator checks it against (its peers' for etcd and
	// Consul; ZooKeeper's own, from its nodes' mtimes) by more than the
	// bound is refused its lease (the nemesis then could not see it recover
	// until it is restarted), so the bound covers the spread the nemesis
	// allows (clockSpread) plus the staleness of the readings (a renewal
	// period). The other groups keep the default bound (1 s) and
	// quarantine.
	mainClockSkew = 8 * time.Second
	// mainReserveAhead is the main group's --reserve-ahead: longer than the
	// coordinator faults' outages (a pause or a cut of TTL + 1.5 s, 3.5 s
	// with the default TTL; a ZooKeeper restart, that and the 1–2 s the
	// server takes to start) plus the 1–2 s a new lease takes once the
	// coordinator answers (an acquire and the probation), so that a node
	// rides them out on its reservation (issue 30; 6 s was measured short
	// for a 4.7 s ZooKeeper restart). Its quarantine is therefore
	// mainReserveAhead + mainClockSkew (mainQuarantine).
	mainReserveAhead = 10 * time.Second
	// clockSpread is the largest spread of the main group's clock offsets
	// (with 0 and behind, a restart's) that the nemesis creates when it can
	// choose the node to step.
	clockSpread = 7 * time.Second
	// defaultClockSkew is `serve`'s default --max-clock-skew.
	defaultClockSkew = time.Second
	// redisPrefix is the Redis group's key prefix; coordPrefix the main
	// group's (an etcd key prefix, a ZooKeeper path, a Consul KV prefix).
	redisPrefix = "flakeid-verify"
	coordPrefix = "/flakeid-verify"
)

// coordURL is the --coordinator of the main group on a coordinator of that
// kind at addr (its proxy's, or the server's own).
func coordURL(kind, addr string) string {
	if kind == groupNATS {
		// The bucket is the coordinator; the namespace ends the URL, so
		// that a suffix (secondNamespace's "-b") names another namespace
		// of it.
		return "nats://" + addr + "/flakeid?namespace=" + coordPrefix[1:]
	}
	return kind + "://" + addr + coordPrefix
}

// coordName is the main group's coordinator in words.
func coordName(kind string) string {
	switch kind {
	case groupZK:
		return "ZooKeeper"
	case groupConsul:
		return "Consul"
	case groupNATS:
		return "NATS"
	}
	return "etcd"
}

// group is a set of nodes that share a coordinator and a datacenter id (a
// file group's nodes each have a coordinator and a datacenter of their
// own: n.dc).
type group struct {
	kind  string
	dc    int64 // the first node's datacenter
	nodes []*node
}

// hasGroup reports whether the configuration has nodes in a group of that
// kind.
func (c Config) hasGroup(kind string) bool {
	switch kind {
	case groupMain:
		return c.Nodes > 0
	case groupEtcd, groupZK, groupConsul, groupNATS:
		return c.Nodes > 0 && c.Coordinator == kind
	case groupRedis:
		return c.RedisNodes > 0
	case groupSQL:
		return c.SQLNodes > 0
	case groupFile:
		return c.FileNodes > 0
	case groupLocal:
		return c.Nodes > 0 && len(c.Languages) > 0
	}
	return false
}

// groupSizes are the groups in order, with their sizes and first
// datacenter ids.
func (c Config) groupSizes() []struct {
	kind string
	n    int
	dc   int64
} {
	return []struct {
		kind string
		n    int
		dc   int64
	}{{c.Coordinator, c.Nodes, 0}, {groupRedis, c.RedisNodes, 1}, {groupSQL, c.SQLNodes, 2}, {groupFile, c.FileNodes, 3}}
}

// topDatacenter is the largest datacenter id the groups use.
func (c Config) topDatacenter() int64 {
	var top int64
	for _, g := range c.groupSizes() {
		if g.n > 0 {
			top = g.dc
			if g.kind == groupFile {
				top += int64(g.n) - 1
			}
		}
	}
	return top
}

// describeGroups is the cluster in words, e.g. "7 nodes: n1–n3 on a
// private etcd (datacenter 0), …".
func (c Config) describeGroups() string {
	var parts []string
	first, total := 0, 0
	for _, g := range c.groupSizes() {
		if g.n == 0 {
			continue
		}
		names := nodeName(first)
		if g.n > 1 {
			names += "–" + nodeName(first+g.n-1)
		}
		dcs := fmt.Sprintf("datacenter %d", g.dc)
		var where string
		switch g.kind {
		case groupEtcd:
			where = "a private etcd"
		case groupZK:
			where = "a private ZooKeeper"
		case groupConsul:
			where = "a private Consul dev agent"
		case groupNATS:
			where = "a private NATS server"
		case groupRedis:
			where = "a private Redis without persistence"
		case groupSQL:
			where = "a PostgreSQL table"
		case groupFile:
			where = "a file coordinator each"
			if g.n > 1 {
				dcs = fmt.Sprintf("datacenters %d–%d", g.dc, g.dc+int64(g.n)-1)
			}
		}
		parts = append(parts, fmt.Sprintf("%s on %s (%s)", names, where, dcs))
		first += g.n
		total += g.n
	}
	return fmt.Sprintf("%d nodes: %s", total, strings.Join(parts, ", "))
}

// reserveAhead is the nodes' worker.Config.ReserveAhead for a TTL (its
// default: 3 s, capped at the TTL, above the renewal period).
func reserveAhead(ttl time.Duration) time.Duration {
	return max(min(3*time.Second, ttl), min(time.Second, ttl/4)+10*time.Millisecond)
}

// healthWait is how long the nemesis waits for the cluster to recover from
// a fault: 30 s, or longer when the main group's quarantine (after its
// first start, or a reset) and two lease TTLs need more, with 20 s to
// spare: on a loaded machine a coordinator write can take over a second,
// and a node whose new lease's first renewal came too late leases again
// (CI, stop 43: 1.4 s, and a node still without a steady lease 32 s after
// ZooKeeper lost its data). A cluster that does not recover at all is what
// this catches; how long each node was dark is measured, not bounded.
func (r *runner) healthWait() time.Duration {
	return max(30*time.Second, mainQuarantine+2*r.cfg.LeaseTTL+20*time.Second)
}

// mainQuarantine is the main group's quarantine, whatever the lease TTL.
const mainQuarantine = mainReserveAhead + mainClockSkew

// quarantine is the quarantine of the groups other than the main one for a lease
// TTL (serve's default: ReserveAhead + the default clock-skew bound): how
// long they issue nothing after their coordinator's state was lost.
func quarantine(ttl time.Duration) time.Duration {
	return reserveAhead(ttl) + defaultClockSkew
}

// freePort finds a free loopback TCP port.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// redisProc is the Redis group's private redis-server, without
// persistence: a restart empties it, as it does many installs.
type redisProc struct {
	bin, dir string
	port     int
	cmd      *exec.Cmd
	exited   chan struct{}
	starts   int
	client   *goredis.Client
}

func (p *redisProc) addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(p.port)) }

// startRedis starts the Redis group's server on a free port.
func (r *runner) startRedis(ctx context.Context) error {
	bin, err := exec.LookPath(r.cfg.RedisBin)
	if err != nil {
		return fmt.Errorf("the Redis group needs a private redis-server to restart: %w; install redis-server or set --redis-bin, or --redis-nodes 0", err)
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	p := &redisProc{bin: bin, dir: filepath.Join(r.dir, "redis"), port: port}
	if err := os.MkdirAll(p.dir, 0o755); err != nil {
		return err
	}
	p.client = goredis.NewClient(&goredis.Options{Addr: p.addr(), DialTimeout: time.Second, ReadTimeout: 2 * time.Second,
		WriteTimeout: 2 * time.Second, MaxRetries: -1, ContextTimeoutEnabled: true})
	r.redis = p
	return p.start(ctx)
}

// start runs redis-server on p.port (again) and waits until it answers.
func (p *redisProc) start(ctx context.Context) error {
	p.starts++
	log := filepath.Join(p.dir, fmt.Sprintf("redis.%d.log", p.starts))
	var err error
	for attempt := 0; attempt < 20 && ctx.Err() == nil; attempt++ {
		cmd := exec.Command(p.bin, "--port", strconv.Itoa(p.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
			"--dir", p.dir, "--logfile", log, "--daemonize", "no")
		cmd.SysProcAttr = procAttr()
		if err := cmd.Start(); err != nil {
			return fmt.Errorf("starting %s: %w", p.bin, err)
		}
		exited := make(chan struct{})
		go func() { cmd.Wait(); close(exited) }()
		p.cmd, p.exited = cmd, exited
		if err = p.waitUp(ctx, log); err == nil {
			return nil
		}
		select {
		case <-exited: // the port may take a moment to be free again
			sleepCtx(ctx, 250*time.Millisecond)
		default: // running, not answering
			p.kill()
			return fmt.Errorf("redis-server on %s did not answer: %w", p.addr(), err)
		}
	}
	return fmt.Errorf("redis-server on %s did not come up: %w", p.addr(), errors.Join(err, ctx.Err()))
}

// waitUp waits up to 10 s for the server to answer PING.
func (p *redisProc) waitUp(ctx context.Context, log string) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case <-p.exited:
			return fmt.Errorf("redis-server exited at start; log:\n%s", tail(log, 1500))
		default:
		}
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		err := p.client.Ping(pctx).Err()
		cancel()
		if err == nil || ctx.Err() != nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// kill stops the server with SIGKILL and waits for it.
func (p *redisProc) kill() {
	if p == nil || p.cmd == nil {
		return
	}
	_ = p.cmd.Process.Kill()
	<-p.exited
}

// restartNoSave is SHUTDOWN NOSAVE, then a start on the same port: the
// server comes back empty.
func (p *redisProc) restartNoSave(ctx context.Context) error {
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	err := p.client.ShutdownNoSave(sctx).Err()
	cancel()
	select {
	case <-p.exited:
	case <-time.After(5 * time.Second):
		p.kill()
		if err == nil {
			err = errors.New("it did not exit within 5 s: killed")
		}
		return fmt.Errorf("SHUTDOWN NOSAVE: %w", err)
	}
	return p.start(ctx)
}

// deleteKeys deletes every key of the Redis group's prefix and returns how
// many there were.
func (p *redisProc) deleteKeys(ctx context.Context) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var keys []string
	iter := p.client.Scan(ctx, 0, redisPrefix+"*", 1000).Iterator()
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		return 0, err
	}
	if len(keys) == 0 {
		return 0, nil
	}
	n, err := p.client.Del(ctx, keys...).Result()
	return int(n), err
}

// close stops the server and its client.
func (p *redisProc) close() {
	if p == nil {
		return
	}
	p.kill()
	p.client.Close()
}

// randomSuffix is 8 hex digits, for fresh table names.
func randomSuffix() string {
	var b [4]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// setupSQLGroup makes the SQL group's coordinator a database of its own —
// a fresh schema, which the nodes' search_path creates the tables in — and
// names its coordinator URL, through the PostgreSQL proxy (so that
// pg-restart hits its leases too). A coordinator has one datacenter
// registry, shared by every table of it: on the shared database the group
// would meet the claims and layouts of every other user (and of earlier
// runs), and its own would stay behind. The nodes create the tables; the
// schema is dropped at the end.
func (r *runner) setupSQLGroup(ctx context.Context) error {
	u, err := url.Parse(r.storeURL)
	if err != nil {
		return err
	}
	sfx := randomSuffix()
	schema := "flakeid_verify_" + sfx
	if _, err := r.sqlExec(ctx, `CREATE SCHEMA "`+schema+`"`); err != nil {
		return fmt.Errorf("the SQL group's schema: %w", err)
	}
	r.sqlSchema = schema
	r.sqlTables = []string{"flakeid_workers", "flakeid_snapshot"}
	q := u.Query()
	q.Set("table", r.sqlTables[0])
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	r.sqlCoordURL = u.String()
	return nil
}

// sqlTable is the quoted name of the SQL group's table t in its schema.
func (r *runner) sqlTable(t string) string { return `"` + r.sqlSchema + `"."` + t + `"` }

// sqlExec runs statements on the PostgreSQL directly (not through the
// proxy), in one transaction, and returns the rows the last one affected.
func (r *runner) sqlExec(ctx context.Context, stmts ...string) (int64, error) {
	db, _, err := sqldb.OpenDB(r.cfg.Postgres)
	if err != nil {
		return 0, err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	var n int64
	for _, s := range stmts {
		res, err := tx.ExecContext(ctx, s)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", s, err)
		}
		n, _ = res.RowsAffected()
	}
	return n, tx.Commit()
}

// snapshotSQL copies the SQL group's coordinator table, and restoreSQL puts
// that copy back in its place in one transaction, as a restore from a
// backup would.
func (r *runner) snapshotSQL(ctx context.Context) (int64, error) {
	w, snap := r.sqlTable(r.sqlTables[0]), r.sqlTable(r.sqlTables[1])
	return r.sqlExec(ctx, `DROP TABLE IF EXISTS `+snap, `CREATE TABLE `+snap+` AS SELECT * FROM `+w)
}

func (r *runner) restoreSQL(ctx context.Context) (int64, error) {
	w, snap := r.sqlTable(r.sqlTables[0]), r.sqlTable(r.sqlTables[1])
	return r.sqlExec(ctx, `DELETE FROM `+w, `INSERT INTO `+w+` SELECT * FROM `+snap)
}
