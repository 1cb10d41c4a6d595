package verify

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/flakeid/flakeid/backend/sqldb"
	"github.com/flakeid/flakeid/gen/flakeid/v1/flakeidv1connect"
	"github.com/flakeid/flakeid/internal/faultnet"
)

// node is one member of the cluster: its processes come and go (kill -9,
// restart), its data directory, its group and its link to its coordinator
// stay.
type node struct {
	idx        int
	dir        string
	grp        *group          // nil for a target
	dc         int64           // its datacenter id
	ns         string          // appended to the main group's namespace (see secondNamespace); "" for the group's own
	coordProxy *faultnet.Proxy // the main group's, to its coordinator; nil otherwise
	cur        atomic.Pointer[incarnation]
	target     *incarnation // the server of --target mode
}

// tail is the end of a log file.
func tail(path string, n int) string {
	b, _ := os.ReadFile(path)
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// setupPostgres checks PostgreSQL, picks a fresh table for the segment
// store, and puts a proxy in front of it (the nemesis "restarts" the
// database by resetting and cutting the proxy).
func (r *runner) setupPostgres() error {
	u, err := url.Parse(r.cfg.Postgres)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") || u.Host == "" {
		return fmt.Errorf("--postgres %q: want postgres://user@host:port/db?…", r.cfg.Postgres)
	}
	host := u.Host
	if u.Port() == "" {
		host = net.JoinHostPort(u.Hostname(), "5432")
	}
	c, err := net.DialTimeout("tcp", host, 2*time.Second)
	if err != nil {
		return fmt.Errorf("PostgreSQL is not reachable at %s (%v); start it with ./scripts/services.sh or set --postgres / FLAKEID_TEST_POSTGRES", host, err)
	}
	c.Close()
	var b [4]byte
	rand.Read(b[:])
	r.table = "flakeid_verify_" + hex.EncodeToString(b[:])
	if r.pgProxy, err = faultnet.Listen(host); err != nil {
		return err
	}
	v := *u
	v.Host = r.pgProxy.Addr()
	q := v.Query()
	q.Set("table", r.table)
	v.RawQuery = q.Encode()
	r.storeURL = v.String()
	return nil
}

// dropTable removes the run's segment table and the SQL group's schema.
func (r *runner) dropTable() {
	if r.table == "" {
		return
	}
	db, _, err := sqldb.OpenDB(r.cfg.Postgres)
	if err != nil {
		return
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	db.ExecContext(ctx, `DROP TABLE IF EXISTS "`+r.table+`"`)
	if r.sqlSchema != "" {
		db.ExecContext(ctx, `DROP SCHEMA IF EXISTS "`+r.sqlSchema+`" CASCADE`)
	}
}

// servingRE finds the address in `flakeid serve`'s "serving" log line,
// servingRESPRE the Redis-protocol listener's in the line after it.
var (
	servingRE     = regexp.MustCompile(`msg="flakeid: serving" addr=(\S+)`)
	servingRESPRE = regexp.MustCompile(`msg="flakeid: serving RESP" addr=(\S+)`)
)

// nodeArgs are the flags of every process of node n: its group's
// coordinator and datacenter, the shared segment store.
func (r *runner) nodeArgs(n *node) []string {
	args := r.serveArgs(n.dir)
	args = append(args, "--datacenter", strconv.FormatInt(n.dc, 10), "--resp-listen", "127.0.0.1:0")
	switch n.grp.kind {
	case groupEtcd, groupZK, groupConsul, groupNATS:
		args = append(args, "--coordinator", coordURL(n.grp.kind, n.coordProxy.Addr())+n.ns,
			"--max-clock-skew", mainClockSkew.String(), "--reserve-ahead", mainReserveAhead.String(), "--test-clock-admin")
	case groupRedis:
		args = append(args, "--coordinator", "redis://"+r.redis.addr()+"/0?prefix="+redisPrefix)
	case groupSQL:
		args = append(args, "--coordinator", r.sqlCoordURL)
	case groupFile: // the default: file://<data dir>/workers.db
	}
	return append(args, r.cfg.LayoutArgs...)
}

// serveArgs are the flags every `flakeid serve` the verifier starts shares.
func (r *runner) serveArgs(dir string) []string {
	return []string{"serve", "--listen", "127.0.0.1:0", "--data-dir", dir,
		"--store", r.storeURL,
		"--lease-ttl", r.cfg.LeaseTTL.String(),
		"--segment-duration", r.cfg.SegmentDuration.String(),
		"--shutdown-timeout", "1s",
		"--log-format", "text", "--log-level", "info"}
}

// stateFile is the file coordinator's state file of a node of the file
// group.
func stateFile(n *node) string { return filepath.Join(n.dir, "workers.db") }

// childEnv is the environment without FLAKEID_* variables, so that a
// developer's settings (a config file, a coordinator) cannot leak into the
// nodes.
func childEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "FLAKEID_") {
			env = append(env, kv)
		}
	}
	return env
}

// startNode starts a process of node n (with extra flags) on a fresh port,
// waits until it serves, and makes it the node's current incarnation.
// Each process gets its own port, so every answer is attributed to exactly
// one process.
func (r *runner) startNode(ctx context.Context, n *node, offset time.Duration) (*incarnation, error) {
	args := r.nodeArgs(n)
	if offset != 0 {
		args = append(args, "--test-clock-offset="+offset.String())
	}
	r.mu.Lock()
	inc := &incarnation{id: int32(len(r.incs)), node: n.idx, offset: offset, exited: make(chan struct{})}
	inc.setClock(offset)
	for _, c := range r.incs {
		if c.node == n.idx {
			inc.n = max(inc.n, c.n)
		}
	}
	inc.n++
	r.incs = append(r.incs, inc)
	r.mu.Unlock()

	inc.log = filepath.Join(n.dir, fmt.Sprintf("log.%d", inc.n))
	logFile, err := os.Create(inc.log)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(r.cfg.Bin, args...)
	cmd.Env = childEnv()
	cmd.Stdout = logFile
	cmd.SysProcAttr = procAttr()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		logFile.Close()
		return nil, err
	}
	inc.started = r.now()
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, err
	}
	inc.cmd, inc.pid = cmd, cmd.Process.Pid
	addr := make(chan [2]string, 1) // HTTP, RESP
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		br := bufio.NewReader(stderr)
		var found [2]string
		for {
			line, err := br.ReadString('\n')
			logFile.WriteString(line)
			if found[1] == "" {
				if m := servingRE.FindStringSubmatch(line); m != nil {
					found[0] = m[1]
				} else if m := servingRESPRE.FindStringSubmatch(line); m != nil && found[0] != "" {
					found[1] = m[1]
					addr <- found
				}
			}
			if err != nil {
				return
			}
		}
	}()
	go func() {
		<-copied
		cmd.Wait()
		logFile.Close()
		if !inc.killed.Load() {
			inc.crashed = true
			inc.ended = r.now()
			r.logf("%s (pid %d) exited without being killed; log:\n%s", inc.name(), inc.pid, tail(inc.log, 2000))
		}
		close(inc.exited)
	}()

	timer := time.NewTimer(60 * time.Second)
	defer timer.Stop()
	select {
	case a := <-addr:
		inc.url, inc.resp = "http://"+a[0], a[1]
	case <-inc.exited:
		return nil, fmt.Errorf("%s exited before serving; log:\n%s", inc.name(), tail(inc.log, 3000))
	case <-timer.C:
		r.killInc(inc)
		return nil, fmt.Errorf("%s did not serve within 60s; log:\n%s", inc.name(), tail(inc.log, 3000))
	case <-ctx.Done():
		r.killInc(inc)
		return nil, ctx.Err()
	}
	inc.serving = r.now()
	inc.rpc = flakeidv1connect.NewIDServiceClient(r.h2c, inc.url)
	r.startPoller(inc)
	n.cur.Store(inc)
	return inc, nil
}

// killNode kills node n's current process with SIGKILL and waits for it to
// exit; the node has no process until the next startNode.
func (r *runner) killNode(n *node) *incarnation {
	inc := n.cur.Swap(nil)
	if inc != nil {
		r.killInc(inc)
	}
	return inc
}

func (r *runner) killInc(inc *incarnation) {
	if inc.cmd == nil || inc.cmd.Process == nil {
		return
	}
	inc.killed.Store(true)
	_ = inc.cmd.Process.Signal(syscall.SIGKILL)
	<-inc.exited
	if inc.ended == 0 {
		inc.ended = r.now()
	}
	if inc.stopPoll != nil {
		inc.stopPoll()
		<-inc.pollDone
	}
}

// statusJSON is the part of GET /v1/status the verifier reads.
type statusJSON struct {
	Held          bool      `json:"lease_held"`
	OnReservation bool      `json:"on_reservation"`
	ReservedUntil time.Time `json:"reserved_until"`
	Datacenter    int64     `json:"datacenter_id"`
	Worker        int64     `json:"worker_id"`
	Leases        int64     `json:"leases"`
	Layout        string    `json:"layout"`
}

func (r *runner) status(ctx context.Context, base string) (statusJSON, error) {
	var st statusJSON
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/status", nil)
	if err != nil {
		return st, err
	}
	resp, err := r.pollHC.Do(req)
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return st, err
	}
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("GET %s/v1/status: %s: %s", base, resp.Status, bytes.TrimSpace(b))
	}
	return st, json.Unmarshal(b, &st)
}

// startPoller polls the incarnation's /v1/status every PollEvery until it
// is stopped, recording each answer with when it was asked and answered.
func (r *runner) startPoller(inc *incarnation) {
	ctx, cancel := context.WithCancel(context.Background())
	inc.stopPoll, inc.pollDone = cancel, make(chan struct{})
	go func() {
		defer close(inc.pollDone)
		t := time.NewTicker(r.cfg.PollEvery)
		defer t.Stop()
		for {
			t0 := r.now()
			st, err := r.status(ctx, inc.url)
			p := poll{t0: t0, t1: r.now(), ok: err == nil}
			if err == nil {
				p.held, p.dc, p.worker, p.leases = st.Held, st.Datacenter, st.Worker, st.Leases
				p.onRes, p.until = st.OnReservation, st.ReservedUntil.UnixNano()
			}
			if ctx.Err() == nil || p.ok {
				inc.polls = append(inc.polls, p)
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
}

// createTag creates the run's segment tag on the server at base; an
// existing tag is fine. It reports false when the server has no segment
// mode.
func (r *runner) createTag(ctx context.Context, base string) (bool, error) {
	return r.postTag(ctx, base, r.cfg.Tag, fmt.Sprintf(`{"tag":%q,"step":1000}`, r.cfg.Tag))
}

// postTag creates tag with the JSON body on the server at base, while the
// server is starting too; an existing tag is fine. It reports false when
// the server has no segment mode.
func (r *runner) postTag(ctx context.Context, base, tag, body string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/segment/tags", strings.NewReader(body))
		if err != nil {
			return false, err
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := r.pollHC.Do(req)
		if err != nil {
			return false, fmt.Errorf("creating tag %q on %s: %w", tag, base, err)
		}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		switch {
		case resp.StatusCode == http.StatusCreated || resp.StatusCode == http.StatusConflict:
			return true, nil
		case resp.StatusCode == http.StatusNotFound && bytes.Contains(b, []byte("not enabled")):
			return false, nil
		case resp.StatusCode == http.StatusServiceUnavailable && ctx.Err() == nil:
			time.Sleep(200 * time.Millisecond)
			continue
		}
		return false, fmt.Errorf("creating tag %q on %s: %s: %s", tag, base, resp.Status, bytes.TrimSpace(b))
	}
}

// setupCluster starts the main group's coordinator, Redis, the proxies and
// the nodes of every group, and creates the tag.
func (r *runner) setupCluster(ctx context.Context) error {
	if err := r.startCoord(ctx); err != nil {
		return err
	}
	if err := r.setupPostgres(); err != nil {
		return err
	}
	if r.cfg.RedisNodes > 0 {
		if err := r.startRedis(ctx); err != nil {
			return err
		}
	}
	if r.cfg.SQLNodes > 0 {
		if err := r.setupSQLGroup(ctx); err != nil {
			return err
		}
	}
	for _, gs := range r.cfg.groupSizes() {
		if gs.n == 0 {
			continue
		}
		g := &group{kind: gs.kind, dc: gs.dc}
		r.groups = append(r.groups, g)
		for k := range gs.n {
			i := len(r.nodes)
			n := &node{idx: i, dir: filepath.Join(r.dir, nodeName(i)), grp: g, dc: g.dc}
			if g.kind == groupFile {
				n.dc += int64(k)
			}
			if err := os.MkdirAll(n.dir, 0o755); err != nil {
				return err
			}
			if g.kind == r.cfg.Coordinator {
				p, err := faultnet.Listen(r.coord.addr())
				if err != nil {
					return err
				}
				n.coordProxy = p
			}
			g.nodes = append(g.nodes, n)
			r.nodes = append(r.nodes, n)
		}
		if g.kind == r.cfg.Coordinator {
			r.secondNamespace(g)
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, len(r.nodes))
	for i, n := range r.nodes {
		wg.Go(func() { _, errs[i] = r.startNode(ctx, n, 0) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	ok, err := r.createTag(ctx, r.nodes[0].cur.Load().url)
	if err != nil {
		return err
	}
	r.segments = ok
	if ok {
		return r.createSeries(ctx, r.nodes[0].cur.Load().url)
	}
	return nil
}

// secondNamespace moves the main group's last node, when it has three or
// more, into a second namespace of the group's coordinator (the key prefix
// or path with "-b" appended), which shares its datacenter registry, on a
// datacenter the seed picks among those no group uses. One registry, one
// layout, another namespace and datacenter: a configuration the
// coordinator must admit, whose IDs every check then holds against the
// rest of the cluster's (issue 25).
func (r *runner) secondNamespace(g *group) {
	top, limit := r.cfg.topDatacenter(), int64(1)<<r.cfg.Layout.DatacenterBits
	if len(g.nodes) < 3 || top+1 >= limit {
		return
	}
	n := g.nodes[len(g.nodes)-1]
	n.ns, n.dc = "-b", top+1+int64(r.cfg.Seed%uint64(limit-top-1))
	r.logf("%s runs in the namespace %s-b on datacenter %d of the group's %s, which shares its datacenter registry", nodeName(n.idx), coordPrefix, n.dc, coordName(g.kind))
}

// setupTargets checks the servers of --target mode: their layout must be
// the verifier's, no two may hold the same (datacenter, worker) pair (they
// would share no coordinator: see overlappingTargets), and the tag is
// created on each (servers that share a store answer 409, which is fine).
func (r *runner) setupTargets(ctx context.Context) error {
	r.segments = true
	if !r.cfg.AllowOverlap {
		if err := r.overlappingTargets(ctx); err != nil {
			return err
		}
	}
	for i, t := range r.cfg.Targets {
		base := strings.TrimRight(t, "/")
		st, err := r.status(ctx, base)
		if err != nil {
			return fmt.Errorf("--target %s: %w", t, err)
		}
		if want := r.cfg.Layout.String(); st.Layout != want {
			return fmt.Errorf("--target %s uses layout %s, the verifier %s: give the same layout flags", t, st.Layout, want)
		}
		inc := &incarnation{id: int32(i), node: i, url: base}
		inc.rpc = flakeidv1connect.NewIDServiceClient(r.h2c, base)
		r.incs = append(r.incs, inc)
		n := &node{idx: i, target: inc}
		n.cur.Store(inc)
		r.nodes = append(r.nodes, n)
		ok, err := r.createTag(ctx, base)
		if err != nil {
			return err
		}
		r.segments = r.segments && ok
		if ok {
			if err := r.createSeries(ctx, base); err != nil {
				return err
			}
		}
		r.startPoller(inc)
	}
	return nil
}

// overlappingTargets refuses targets that can issue the same IDs: two that
// hold the same (datacenter, worker) pair at once share no coordinator
// (two servers on files of their own, say), which no coordinator can see
// but the verifier, talking to both, can. A pair found is read again
// before it is refused, in case a lease moved between the reads.
func (r *runner) overlappingTargets(ctx context.Context) error {
	read := func() ([]statusJSON, error) {
		sts := make([]statusJSON, len(r.cfg.Targets))
		for i, t := range r.cfg.Targets {
			st, err := r.status(ctx, strings.TrimRight(t, "/"))
			if err != nil {
				return nil, fmt.Errorf("--target %s: %w", t, err)
			}
			sts[i] = st
		}
		return sts, nil
	}
	same := func(sts []statusJSON) (int, int, bool) {
		for i := range sts {
			for j := range i {
				a, b := sts[i], sts[j]
				if a.Held && b.Held && a.Layout == b.Layout && a.Datacenter == b.Datacenter && a.Worker == b.Worker {
					return j, i, true
				}
			}
		}
		return 0, 0, false
	}
	for attempt := 0; ; attempt++ {
		sts, err := read()
		if err != nil {
			return err
		}
		i, j, found := same(sts)
		if !found {
			return nil
		}
		if attempt > 0 {
			return fmt.Errorf("--target %s and --target %s both issue from datacenter %d, worker %d of the layout %s: "+
				"they share no coordinator and issue the same IDs. Point both at one coordinator (--coordinator), or give each its own --datacenter",
				r.cfg.Targets[i], r.cfg.Targets[j], sts[i].Datacenter, sts[i].Worker, sts[i].Layout)
		}
		sleepCtx(ctx, 200*time.Millisecond)
	}
}

// teardown stops every process and proxy and drops the table.
func (r *runner) teardown() {
	for _, n := range r.nodes {
		if n.target != nil {
			continue
		}
		r.killNode(n)
	}
	r.mu.Lock()
	incs := append([]*incarnation(nil), r.incs...)
	r.mu.Unlock()
	for _, inc := range incs {
		if inc.stopPoll != nil {
			inc.stopPoll()
			<-inc.pollDone
		}
		if inc.cmd != nil {
			r.killInc(inc)
		}
	}
	if r.coord != nil {
		r.coord.kill()
	}
	r.redis.close()
	for _, n := range r.nodes {
		if n.coordProxy != nil {
			n.coordProxy.Close()
		}
	}
	if r.pgProxy != nil {
		r.pgProxy.Close()
	}
	r.dropTable()
}
