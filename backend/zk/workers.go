package zk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	gozk "github.com/go-zookeeper/zk"

	"github.com/flakeid/flakeid/backend/internal/coord"
	"github.com/flakeid/flakeid/worker"
	"github.com/flakeid/flakeid/worker/protocol"
)

// DefaultPrefix is the namespace's path when the URL has none (or "/").
const DefaultPrefix = "/flakeid/workers"

// DefaultRegistry is the path of the datacenter registry: one per ZooKeeper
// ensemble, shared by every namespace (path) on it.
const DefaultRegistry = "/flakeid/datacenters"

// DefaultDialTimeout bounds OpenWorkers's connection and check when its
// context has no deadline.
const DefaultDialTimeout = 5 * time.Second

// sharedSessionTimeout is the session timeout of a Workers' own connection,
// which reads and creates persistent nodes only.
const sharedSessionTimeout = 10 * time.Second

// maxAttempts is how many times a guarded write re-reads a slot that changed
// under it (Acquire retries as long as other nodes win the ids it picks).
const maxAttempts = 8

// stamp formats the times in errors.
const stamp = "2006-01-02T15:04:05.000Z07:00"

// Workers is a worker.Coordinator over ZooKeeper. It is safe for concurrent
// use.
type Workers struct {
	mu       sync.Mutex  // guards sh and closed; held while redialing
	sh       *sharedConn // the shared session: reads, persistent nodes
	closed   bool        // Close was called: no more redials
	servers  []string
	prefix   string
	registry string
	leaf     *LeafConfig
	log      *slog.Logger
	optErr   error
	hs       handshake // the wait for connect answers, over every connection
}

var (
	_ worker.Coordinator = (*Workers)(nil)
	_ worker.Registry    = (*Workers)(nil)
	_ worker.MarkLowerer = (*Workers)(nil)
)

// An Option configures OpenWorkers.
type Option func(*Workers)

// WithLogger sends go-zookeeper's log lines to l at debug level; by default
// they are discarded.
func WithLogger(l *slog.Logger) Option {
	return func(w *Workers) { w.log = l }
}

// connectWorkers connects to the ZooKeeper ensemble at servers ("host:port",
// or "host" for port 2181) and checks that it answers, within ctx or
// DefaultDialTimeout when ctx has no deadline. prefix is the namespace's
// path ("" or "/" for DefaultPrefix).
func connectWorkers(ctx context.Context, servers []string, prefix string, opts ...Option) (*Workers, error) {
	if len(servers) == 0 {
		return nil, fmt.Errorf("%w: no ZooKeeper servers", worker.ErrInvalidConfig)
	}
	prefix = strings.TrimRight(prefix, "/")
	if prefix == "" {
		prefix = DefaultPrefix
	}
	w := &Workers{servers: slices.Clone(servers), prefix: prefix, registry: DefaultRegistry}
	for _, o := range opts {
		o(w)
	}
	if w.optErr != nil {
		return nil, w.optErr
	}
	for what, p := range map[string]string{"prefix": w.prefix, "registry": w.registry} {
		if err := validPath(p); err != nil {
			return nil, fmt.Errorf("%w: ZooKeeper %s %q: %v", worker.ErrInvalidConfig, what, p, err)
		}
	}
	if w.leaf != nil {
		if err := validPath(w.leaf.Path); err != nil {
			return nil, fmt.Errorf("%w: Leaf path %q: %v", worker.ErrInvalidConfig, w.leaf.Path, err)
		}
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultDialTimeout)
		defer cancel()
	}
	sh, err := w.connect()
	if err != nil {
		return nil, fmt.Errorf("%w: connecting to ZooKeeper at %s: %w", worker.ErrUnavailable, strings.Join(w.servers, ","), err)
	}
	w.sh = sh
	conn := sh.conn
	for {
		_, err := await(ctx, func() (bool, error) { ok, _, err := conn.Exists(w.prefix); return ok, err })
		if err == nil {
			return w, nil
		}
		// A connection refused, or dropped before it had a session (a
		// server that is starting), is tried again until ctx ends:
		// go-zookeeper reconnects by itself, a round of the servers a
		// second.
		if !errors.Is(err, gozk.ErrNoServer) || ctx.Err() != nil {
			go conn.Close()
			return nil, w.unavailable(ctx, err, "reading %s from ZooKeeper at %s", w.prefix, strings.Join(w.servers, ","))
		}
	}
}

// validPath checks a ZooKeeper path: absolute, no empty, "." or ".."
// component, no trailing "/".
func validPath(p string) error {
	if !strings.HasPrefix(p, "/") || p == "/" {
		return errors.New("want an absolute path such as /flakeid/workers")
	}
	for _, c := range strings.Split(p[1:], "/") {
		if c == "" || c == "." || c == ".." || strings.ContainsRune(c, 0) {
			return fmt.Errorf("bad component %q", c)
		}
	}
	return nil
}

// Close closes the shared connection. Claims have sessions of their own:
// Release ends them, and a claim nobody renews ends its session after its
// TTL.
func (w *Workers) Close() error {
	w.mu.Lock()
	w.closed = true
	conn := w.sh.conn
	w.mu.Unlock()
	conn.Close()
	return nil
}

// sharedConn is a Workers' own connection, and since when it has been
// without a session.
type sharedConn struct {
	conn   *gozk.Conn
	opened time.Time

	mu     sync.Mutex
	lostAt time.Time // when it last lost its session (or was opened without one); zero while it has one
}

// event is the connection's event callback (it must not block).
func (s *sharedConn) event(ev gozk.Event) {
	if ev.Type != gozk.EventSession {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case ev.State == gozk.StateHasSession:
		s.lostAt = time.Time{}
	case s.lostAt.IsZero():
		s.lostAt = time.Now()
	}
}

// stuck reports whether the connection should be replaced: it has no
// session, and has had none for longer than redialAfter, or for longer than
// redialPause when a request on it found no server (noServer).
func (s *sharedConn) stuck(noServer bool) bool {
	s.mu.Lock()
	lostAt := s.lostAt
	s.mu.Unlock()
	if lostAt.IsZero() || s.conn.State() == gozk.StateHasSession {
		return false
	}
	return time.Since(lostAt) > redialAfter || noServer && time.Since(s.opened) > redialPause
}

// redialAfter is how long a shared connection may be without a session
// before it is replaced: a few seconds, so that nodes lease again soon after
// a ZooKeeper that lost its data is back (behind a proxy or a load balancer,
// where connecting always succeeds, no request fails with "no server").
// A new connection of a healthy ensemble has its session within
// milliseconds, and dropping the shared session loses nothing.
const redialAfter = 3 * time.Second

// redialPause is the least age of a shared connection replaced because a
// request on it found no server: go-zookeeper's own pause between rounds of
// the servers, so that an outage costs at most one new connection a second.
const redialPause = time.Second

// connect opens a shared connection (it connects in the background).
func (w *Workers) connect() (*sharedConn, error) {
	now := time.Now()
	sh := &sharedConn{opened: now, lostAt: now}
	conn, _, err := gozk.Connect(w.servers, sharedSessionTimeout, gozk.WithLogger(zkLogger{w.log}), gozk.WithLogInfo(false),
		gozk.WithDialer(w.hs.dialer(nil)), gozk.WithEventCallback(sh.event))
	if err != nil {
		return nil, err
	}
	sh.conn = conn
	return sh, nil
}

// shared returns the shared connection, first replacing it when it is
// stuck without a session (see redial).
func (w *Workers) shared() *gozk.Conn {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.closed && w.sh.stuck(false) {
		w.redialLocked()
	}
	return w.sh.conn
}

// noServer is told of every request that failed with err: one that found
// no server to connect to replaces a shared connection stuck without a
// session (see redial) without waiting for its session timeout.
func (w *Workers) noServer(err error) {
	if !errors.Is(err, gozk.ErrNoServer) {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.closed && w.sh.stuck(true) {
		w.redialLocked()
	}
}

// redialLocked replaces the shared connection by a new one, closing the old
// one in the background; w.mu is held, so there is one redial at a time.
//
// go-zookeeper reconnects a connection by itself, but with the last zxid it
// saw, and a ZooKeeper that lost its data (wiped and restarted, its zxids
// starting again from 0) refuses such a client until its own zxids have
// caught up, which an idle ensemble may never do. A new connection has seen
// no zxid. The shared session owns no ephemeral node and no watch, so
// nothing is lost with it; only the guarantee that it never reads older
// state than it read before, which nothing relies on (see the package
// documentation: reads on the shared session may lag).
func (w *Workers) redialLocked() {
	old := w.sh
	old.mu.Lock()
	since := old.lostAt
	old.mu.Unlock()
	sh, err := w.connect()
	if err != nil {
		// The servers' names do not resolve now: try again a session
		// timeout later.
		zkLogger{w.log}.Printf("flakeid: replacing the shared ZooKeeper connection, without a session since %s: %v", since.Format(stamp), err)
		old.mu.Lock()
		old.lostAt = time.Now()
		old.mu.Unlock()
		return
	}
	zkLogger{w.log}.Printf("flakeid: replaced the shared ZooKeeper connection (session %#x), without a session since %s", old.conn.SessionID(), since.Format(stamp))
	w.sh = sh
	go old.conn.Close()
}

// Prefix is the namespace's path, without a trailing "/".
func (w *Workers) Prefix() string { return w.prefix }

// Registry is the path of the datacenter registry, without a trailing "/".
func (w *Workers) Registry() string { return w.registry }

func (w *Workers) dcPath(dc int64) string { return w.prefix + "/" + strconv.FormatInt(dc, 10) }

func (w *Workers) slotPath(dc, id int64) string {
	return w.dcPath(dc) + "/" + strconv.FormatInt(id, 10)
}

func (w *Workers) holderPath(dc, id int64) string { return w.slotPath(dc, id) + "/holder" }

func (w *Workers) highPath(dc, id int64) string { return w.slotPath(dc, id) + "/high" }

func (w *Workers) nsPath(dc int64) string { return w.dcPath(dc) + "/namespace" }

func (w *Workers) regPath(dc int64) string { return w.registry + "/" + strconv.FormatInt(dc, 10) }

func (w *Workers) clockPath() string { return w.prefix + "/clock" }

// spacePath is the registry node of the ID space.
func (w *Workers) spacePath() string { return w.registry + "/space" }

// unavailable wraps a ZooKeeper or network failure in worker.ErrUnavailable,
// keeping err and the context's error visible to errors.Is.
func (w *Workers) unavailable(ctx context.Context, err error, format string, args ...any) error {
	w.noServer(err)
	return coord.Unavailable(ctx, err, format, args...)
}

// guardFailed reports whether err from a Multi means that one of its checks
// failed (the state changed since it was read), rather than that ZooKeeper
// could not be asked.
func guardFailed(err error) bool {
	return errors.Is(err, gozk.ErrBadVersion) || errors.Is(err, gozk.ErrNodeExists) || errors.Is(err, gozk.ErrNoNode) ||
		errors.Is(err, gozk.ErrNotEmpty)
}

// node is a znode as read: its data and Stat.
type node struct {
	path string
	data []byte
	stat *gozk.Stat
}

// get reads path on conn; nil when it does not exist.
func get(ctx context.Context, conn *gozk.Conn, path string) (*node, error) {
	return await(ctx, func() (*node, error) {
		data, stat, err := conn.Get(path)
		switch {
		case errors.Is(err, gozk.ErrNoNode):
			return nil, nil
		case err != nil:
			return nil, err
		}
		return &node{path: path, data: data, stat: stat}, nil
	})
}

// getMany reads paths on conn, a few at a time; nil entries are missing.
func getMany(ctx context.Context, conn *gozk.Conn, paths []string) ([]*node, error) {
	out := make([]*node, len(paths))
	errs := make([]error, len(paths))
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	for i, p := range paths {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			out[i], errs[i] = get(ctx, conn, p)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// children lists path's children on conn; none when it does not exist.
func children(ctx context.Context, conn *gozk.Conn, path string) ([]string, error) {
	return await(ctx, func() ([]string, error) {
		c, _, err := conn.Children(path)
		if errors.Is(err, gozk.ErrNoNode) {
			return nil, nil
		}
		return c, err
	})
}

// ensurePath creates path and its missing parents as empty persistent nodes.
func ensurePath(ctx context.Context, conn *gozk.Conn, path string) error {
	ok, err := await(ctx, func() (bool, error) { ok, _, err := conn.Exists(path); return ok, err })
	if err != nil || ok {
		return err
	}
	for i := 1; i <= len(path); i++ {
		if i < len(path) && path[i] != '/' {
			continue
		}
		p := path[:i]
		_, err := await(ctx, func() (string, error) { return conn.Create(p, nil, gozk.FlagPersistent, gozk.WorldACL(gozk.PermAll)) })
		if err != nil && !errors.Is(err, gozk.ErrNodeExists) {
			return fmt.Errorf("creating %s: %w", p, err)
		}
	}
	return nil
}

// zkNow writes the scratch node <prefix>/clock and returns its Mtime:
// ZooKeeper's clock (the leader's, when it prepared the write), which lies
// before the reply arrived, and when the write was sent.
func (w *Workers) zkNow(ctx context.Context) (int64, time.Time, error) {
	sent := time.Now()
	conn := w.shared()
	stat, err := await(ctx, func() (*gozk.Stat, error) {
		st, err := conn.Set(w.clockPath(), nil, -1)
		if errors.Is(err, gozk.ErrNoNode) {
			if err := ensurePath(context.Background(), conn, w.prefix); err != nil {
				return nil, err
			}
			if _, err := conn.Create(w.clockPath(), nil, gozk.FlagPersistent, gozk.WorldACL(gozk.PermAll)); err != nil && !errors.Is(err, gozk.ErrNodeExists) {
				return nil, err
			}
			st, err = conn.Set(w.clockPath(), nil, -1)
		}
		return st, err
	})
	if err != nil {
		return 0, time.Time{}, w.unavailable(ctx, err, "writing %s to read ZooKeeper's clock", w.clockPath())
	}
	return stat.Mtime, sent, nil
}

// zkEstimate is an upper bound of ZooKeeper's clock now, from a reading ms
// (a Mtime, which ZooKeeper truncates to whole milliseconds) of a write sent
// at sent: the reading plus a millisecond plus the time since.
func zkEstimate(ms int64, sent time.Time) int64 { return ms + 1 + coord.CeilDurMs(time.Since(sent)) }

// slot is what the nodes of one (datacenter, worker id) say.
type slot struct {
	holder *node // nil when free
	high   *node // nil when never used
	highMs int64
}

// dcState is a datacenter's nodes as read.
type dcState struct {
	rec   *node
	reg   *node
	space *node // the registry's ID space
	slots map[int64]*slot
}

// readDC reads the record, the registry entry and the slots of ids below
// limit (every id when limit < 0) of datacenter dc on the shared session.
func (w *Workers) readDC(ctx context.Context, dc, limit int64) (*dcState, error) {
	conn := w.shared()
	kids, err := children(ctx, conn, w.dcPath(dc))
	if err != nil {
		return nil, w.unavailable(ctx, err, "listing %s", w.dcPath(dc))
	}
	paths := []string{w.nsPath(dc), w.regPath(dc), w.spacePath()}
	var ids []int64
	for _, k := range kids {
		if id, ok := coord.ParseID(k); ok && (limit < 0 || id < limit) {
			ids = append(ids, id)
			paths = append(paths, w.holderPath(dc, id), w.highPath(dc, id))
		}
	}
	nodes, err := getMany(ctx, conn, paths)
	if err != nil {
		return nil, w.unavailable(ctx, err, "reading the worker ids of datacenter %d in %s", dc, w.prefix)
	}
	st := &dcState{rec: nodes[0], reg: nodes[1], space: nodes[2], slots: make(map[int64]*slot, len(ids))}
	for i, id := range ids {
		s := &slot{holder: nodes[3+2*i], high: nodes[4+2*i]}
		if s.holder == nil && s.high == nil {
			continue // a bare id node: never used
		}
		if s.high != nil {
			if s.highMs, err = parseMs(s.high); err != nil {
				return nil, err
			}
		}
		st.slots[id] = s
	}
	return st, nil
}

func parseMs(n *node) (int64, error) {
	ms, err := strconv.ParseInt(string(n.data), 10, 64)
	if err != nil || ms < 0 {
		return 0, fmt.Errorf("%w: corrupt high-water mark %s = %q", worker.ErrUnavailable, n.path, n.data)
	}
	return ms, nil
}

// holderData is the data of a holder node.
type holderData struct {
	Owner string `json:"owner"`
	TTLMs int64  `json:"ttl_ms"`
}

func parseHolder(n *node) (holderData, error) {
	var h holderData
	if err := json.Unmarshal(n.data, &h); err != nil || h.Owner == "" {
		return holderData{}, fmt.Errorf("%w: corrupt holder node %s = %q", worker.ErrUnavailable, n.path, n.data)
	}
	return h, nil
}

// record is the namespace record of a datacenter (see coord.Record), the
// data of its namespace node.
type record struct{ coord.Record }

// newRecord is a fresh namespace record (coord.NewRecord).
func newRecord(contract string, nowMs int64, quarantine time.Duration) record {
	return record{coord.NewRecord(contract, nowMs, quarantine)}
}

func (r record) encode() []byte { return r.Encode() }

func parseRecord(n *node) (record, error) {
	r, err := coord.ParseRecord(n.path, n.data)
	return record{r}, err
}

// registration is the registry entry of this namespace, with contract.
func (w *Workers) registration(contract string) []byte {
	return coord.Registration{Namespace: w.prefix, Contract: contract}.Encode()
}

// entry is n as coord.Admit reads it; nil when n is.
func entry(n *node) *coord.Entry {
	if n == nil {
		return nil
	}
	return &coord.Entry{Key: n.path, Value: n.data}
}

// Claims implements worker.Registry: the children of the registry node.
func (w *Workers) Claims(ctx context.Context) (worker.Claims, error) {
	conn := w.shared()
	kids, err := children(ctx, conn, w.registry)
	if err != nil {
		return worker.Claims{}, w.unavailable(ctx, err, "listing %s", w.registry)
	}
	paths := make([]string, len(kids))
	for i, k := range kids {
		paths[i] = w.registry + "/" + k
	}
	nodes, err := getMany(ctx, conn, paths)
	if err != nil {
		return worker.Claims{}, w.unavailable(ctx, err, "reading %s", w.registry)
	}
	var entries []coord.Entry
	for _, n := range nodes {
		if n != nil { // deleted since it was listed
			entries = append(entries, coord.Entry{Key: n.path, Value: n.data})
		}
	}
	return coord.ParseClaims(coord.KVKeys{Prefix: w.prefix, Registry: w.registry}, entries)
}

// Unclaim implements worker.Registry. ZooKeeper cannot guard a write by a
// whole subtree, so it marks the registry node as being freed first (a
// version-checked write: an Acquire that read it before fails its own
// version check, and one that reads it after is refused); then it reads
// the datacenter, decides by worker.CheckUnclaim against ZooKeeper's clock,
// and deletes the node or puts it back, again version-checked. A holder
// that took an id before the mark is seen by that read.
func (w *Workers) Unclaim(ctx context.Context, dc int64) error {
	conn, rk := w.shared(), w.regPath(dc)
	n, err := get(ctx, conn, rk)
	if err != nil {
		return w.unavailable(ctx, err, "reading %s", rk)
	}
	var e coord.Registration
	if n != nil {
		if e, err = coord.ParseRegistration(rk, n.data); err != nil {
			return err
		}
	}
	if n == nil || e.Namespace != w.prefix {
		return fmt.Errorf("%w: datacenter %d is not claimed by %s in the registry %s (claimed by: %q)", worker.ErrContract, dc, w.prefix, w.registry, e.Namespace)
	}
	freeing := e
	freeing.Freeing = true
	st, err := await(ctx, func() (*gozk.Stat, error) { return conn.Set(rk, freeing.Encode(), n.stat.Version) })
	if err != nil {
		return w.unavailable(ctx, err, "marking %s as being freed", rk)
	}
	restore := func(why error) error {
		if _, err := await(ctx, func() (*gozk.Stat, error) { return conn.Set(rk, e.Encode(), st.Version) }); err != nil {
			return fmt.Errorf("%w (and putting the registry node %s back failed: %v; run unclaim again, or restore it by hand)", why, rk, err)
		}
		return why
	}
	infos, err := w.List(ctx, dc)
	if err != nil {
		return restore(err)
	}
	nowMs, _, err := w.zkNow(ctx)
	if err != nil {
		return restore(err)
	}
	if err := worker.CheckUnclaim(w.prefix, dc, infos, coord.MsTime(nowMs)); err != nil {
		return restore(err)
	}
	if _, err := await(ctx, func() (struct{}, error) { return struct{}{}, conn.Delete(rk, st.Version) }); err != nil {
		return restore(w.unavailable(ctx, err, "deleting %s", rk))
	}
	return nil
}

// LowerMark implements worker.MarkLowerer: it reads the slot, decides by
// worker.CheckLowerMark against ZooKeeper's clock, and writes the high node
// guarded by its version (an Acquire writes it too, so one that came in
// between makes the write fail).
func (w *Workers) LowerMark(ctx context.Context, dc, id int64, to time.Time) (time.Time, error) {
	conn, wk := w.shared(), w.highPath(dc, id)
	infos, err := w.List(ctx, dc)
	if err != nil {
		return time.Time{}, err
	}
	info := worker.Info{Datacenter: dc, Worker: id}
	for _, in := range infos {
		if in.Worker == id {
			info = in
		}
	}
	high, err := get(ctx, conn, wk)
	if err != nil {
		return time.Time{}, w.unavailable(ctx, err, "reading %s", wk)
	}
	nowMs, _, err := w.zkNow(ctx)
	if err != nil {
		return time.Time{}, err
	}
	toMs := coord.CeilMs(to)
	if err := worker.CheckLowerMark(info, coord.MsTime(toMs), coord.MsTime(nowMs)); err != nil {
		return time.Time{}, err
	}
	if high == nil {
		return time.Time{}, fmt.Errorf("%w: %s is gone", worker.ErrInUse, wk)
	}
	if _, err := await(ctx, func() (*gozk.Stat, error) {
		return conn.Set(wk, []byte(strconv.FormatInt(toMs, 10)), high.stat.Version)
	}); err != nil {
		if errors.Is(err, gozk.ErrBadVersion) {
			return time.Time{}, fmt.Errorf("%w: worker %d of datacenter %d in %s changed while its mark was being lowered (taken?): look again", worker.ErrInUse, id, dc, w.prefix)
		}
		return time.Time{}, w.unavailable(ctx, err, "writing %s", wk)
	}
	return info.HighWater, nil
}

// Clock implements worker.Coordinator: ZooKeeper's clock, read as the Mtime
// of a write of the empty node <prefix>/clock — ZooKeeper has no other way
// to tell its time, and this node holds no state (see zkNow) — stale by the
// write's round trip.
func (w *Workers) Clock(ctx context.Context, _ worker.Request) (time.Time, time.Duration, error) {
	ms, sent, err := w.zkNow(ctx)
	if err != nil {
		return time.Time{}, 0, err
	}
	return coord.MsTime(ms), time.Since(sent) + time.Millisecond, nil
}

// candidate is a worker id as pick sees it.
type candidate struct {
	held   bool
	highMs int64
}

// pick chooses a free id in [0, workers) as protocol.Pick does.
func pick(c map[int64]candidate, workers, nowMs int64) (id, held int64, ok bool) {
	return protocol.Pick(protocol.Candidates(c, func(c candidate) (bool, int64) { return c.held, c.highMs }), nil, workers, nowMs)
}

// ceilMs and msTime are coord.CeilMs and coord.MsTime, under the names
// leaf.go and the tests use.
func ceilMs(t time.Time) int64  { return coord.CeilMs(t) }
func msTime(ms int64) time.Time { return coord.MsTime(ms) }

// acl is the ACL of every node flakeid creates: open to all, as Leaf's.
func acl() []gozk.ACL { return gozk.WorldACL(gozk.PermAll) }

// Acquire implements worker.Coordinator.
func (w *Workers) Acquire(ctx context.Context, req worker.Request) (worker.Claim, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	if err := w.checkLeafRequest(req); err != nil {
		return nil, err
	}
	dc := req.Datacenter
	nk, rk := w.nsPath(dc), w.regPath(dc)
	reserveMs := coord.CeilMs(req.Reserve)
	bound := req.MarkBound()
	var sess *session
	fail := func(err error) (worker.Claim, error) {
		if sess != nil {
			sess.end(errors.New("the Acquire that opened it failed"))
		}
		return nil, err
	}
	var lastErr error // the last lost race
	var zkMs int64    // ZooKeeper's clock, read by the first attempt
	var zkSent time.Time
	for attempt := 1; ; attempt++ {
		// Another node claimed the id first (or changed its mark, the
		// record, or a Leaf node). Each lost race is an id won by someone
		// else, so nodes starting all at once (who all pick the same
		// lowest id) get through in turn; more losses than ids mean churn
		// this call gives up on.
		if int64(attempt) > req.Workers+maxAttempts {
			return fail(fmt.Errorf("%w: other nodes won the worker ids of datacenter %d in %s %d times in a row (last: %v)",
				worker.ErrUnavailable, dc, w.prefix, attempt-1, lastErr))
		}
		// ZooKeeper's clock before anything is read: the Leaf nodes' age
		// is measured against it (an earlier clock only makes them look
		// younger), and a new record's initialisation starts from it.
		// Later attempts advance the first reading by the time passed.
		if attempt == 1 {
			var err error
			if zkMs, zkSent, err = w.zkNow(ctx); err != nil {
				return fail(err)
			}
		}
		clockMs := zkMs + time.Since(zkSent).Milliseconds()
		st, err := w.readDC(ctx, dc, req.Workers)
		if err != nil {
			return fail(err)
		}
		r, err := coord.Admit(req, "the registry "+w.registry+" of this ZooKeeper", w.prefix, entry(st.reg), entry(st.space), entry(st.rec))
		rec := record{r}
		if err != nil {
			return fail(err)
		}
		if err := bound.Check(fmt.Sprintf("acquiring in datacenter %d of %s", dc, w.prefix), req.Reserve, coord.MsTime(zkEstimate(zkMs, zkSent))); err != nil {
			return fail(err)
		}
		var leaf map[int64]*leafID
		if w.leaf != nil {
			if leaf, err = w.readLeaf(ctx, clockMs); err != nil {
				return fail(err)
			}
		}
		cands := make(map[int64]candidate, len(st.slots)+len(leaf))
		for id, s := range st.slots {
			cands[id] = candidate{held: s.holder != nil, highMs: s.highMs}
		}
		leafHeld := 0
		for id, l := range leaf {
			c := cands[id]
			if l.taken() && !c.held {
				leafHeld++
			}
			c.held = c.held || l.taken()
			c.highMs = max(c.highMs, l.highMs)
			cands[id] = c
		}
		id, held, ok := pick(cands, req.Workers, clockMs)
		if !ok {
			msg := fmt.Sprintf("all %d worker ids of datacenter %d in %s are held", held, dc, w.prefix)
			if leafHeld > 0 {
				msg += fmt.Sprintf(" (%d of them by live Leaf servers under %s, or by Leaf nodes that cannot be read)", leafHeld, w.leaf.forever())
			}
			return fail(fmt.Errorf("%w: %s", worker.ErrExhausted, msg))
		}
		if sess == nil {
			if sess, err = w.openSession(ctx, req.TTL); err != nil {
				return nil, err
			}
		}
		s := st.slots[id]
		if s == nil {
			s = &slot{}
			if err := ensurePath(ctx, w.shared(), w.slotPath(dc, id)); err != nil {
				return fail(w.unavailable(ctx, err, "creating %s", w.slotPath(dc, id)))
			}
		}
		if st.reg == nil {
			if err := ensurePath(ctx, w.shared(), w.registry); err != nil {
				return fail(w.unavailable(ctx, err, "creating %s", w.registry))
			}
		}
		l := leaf[id]
		high := max(s.highMs, reserveMs, l.high())
		highData := []byte(strconv.FormatInt(high, 10))
		hk, wk := w.holderPath(dc, id), w.highPath(dc, id)
		sess.mu.Lock()
		ttlMs := max(req.TTL, sess.timeout).Milliseconds()
		sess.mu.Unlock()
		hd, _ := json.Marshal(holderData{Owner: req.Owner, TTLMs: ttlMs})

		var ops []any
		idx := func(op any) int { ops = append(ops, op); return len(ops) - 1 }
		createdRec := st.rec == nil
		recIdx := -1
		if createdRec {
			// A new datacenter, or one whose record is gone while its
			// slots are not: initialise it; the slots and their marks
			// stay. Its initialisation is ZooKeeper's clock now: the
			// scratch write's plus the time since it was sent (checked
			// against the Multi's own time below).
			rec = newRecord(req.Contract, zkEstimate(zkMs, zkSent), req.Quarantine)
			idx(&gozk.CreateRequest{Path: nk, Data: rec.encode(), Acl: acl(), Flags: gozk.FlagPersistent})
			recIdx = idx(&gozk.SetDataRequest{Path: nk, Data: rec.encode(), Version: 0})
		} else {
			idx(&gozk.CheckVersionRequest{Path: nk, Version: st.rec.stat.Version})
		}
		if st.reg == nil {
			idx(&gozk.CreateRequest{Path: rk, Data: w.registration(rec.Contract), Acl: acl(), Flags: gozk.FlagPersistent})
		} else {
			idx(&gozk.CheckVersionRequest{Path: rk, Version: st.reg.stat.Version})
		}
		if st.space == nil {
			idx(&gozk.CreateRequest{Path: w.spacePath(), Data: []byte(req.Space), Acl: acl(), Flags: gozk.FlagPersistent})
		} else {
			idx(&gozk.CheckVersionRequest{Path: w.spacePath(), Version: st.space.stat.Version})
		}
		idx(&gozk.CreateRequest{Path: hk, Data: hd, Acl: acl(), Flags: gozk.FlagEphemeral})
		holderIdx := idx(&gozk.SetDataRequest{Path: hk, Data: hd, Version: 0})
		var highIdx int
		if s.high == nil {
			idx(&gozk.CreateRequest{Path: wk, Data: highData, Acl: acl(), Flags: gozk.FlagPersistent})
			highIdx = idx(&gozk.SetDataRequest{Path: wk, Data: highData, Version: 0})
		} else {
			highIdx = idx(&gozk.SetDataRequest{Path: wk, Data: highData, Version: s.high.stat.Version})
		}
		leafIdx := make([]int, len(l.nodes()))
		for i, n := range l.nodes() {
			if n.fenced {
				leafIdx[i] = idx(&gozk.CheckVersionRequest{Path: n.path, Version: n.stat.Version})
			} else {
				leafIdx[i] = idx(&gozk.SetDataRequest{Path: n.path, Data: n.fence(), Version: n.stat.Version})
			}
		}
		sent := time.Now()
		res, err := await(ctx, func() ([]gozk.MultiResponse, error) { return sess.conn.Multi(ops...) })
		recv := time.Now()
		if err != nil && !guardFailed(err) {
			// The Multi may have been applied: ending the session
			// deletes the holder node (a raised mark errs on the safe
			// side).
			return fail(w.unavailable(ctx, err, "claiming worker id %d of datacenter %d in %s", id, dc, w.prefix))
		}
		if err == nil && len(res) == len(ops) {
			hs, ws := res[holderIdx].Stat, res[highIdx].Stat
			sess.mu.Lock()
			sid := sess.id
			sess.mu.Unlock()
			if hs == nil || ws == nil || hs.EphemeralOwner != sid {
				return fail(fmt.Errorf("%w: claiming worker id %d of datacenter %d in %s: ZooKeeper's answer lacks the holder node's state, or names session %#x, not %#x",
					worker.ErrUnavailable, id, dc, w.prefix, ownerOf(hs), sid))
			}
			c := &claim{
				w: w, dc: dc, id: id, owner: req.Owner, prev: coord.MsTime(max(s.highMs, rec.FloorMs, l.high())),
				contract: req.Contract, quarantine: req.Quarantine, sess: sess, taken: sent,
				holderVersion: hs.Version, holderCzxid: hs.Czxid,
				highMs: high, highVersion: ws.Version, highCzxid: ws.Czxid, maxMs: high,
				rec: rec, clockAt: coord.MsTime(ws.Mtime), clockStale: recv.Sub(sent), clockSent: sent, bound: bound,
			}
			if createdRec {
				c.recVersion, c.recCzxid = res[recIdx].Stat.Version, res[recIdx].Stat.Czxid
			} else {
				c.recVersion, c.recCzxid = st.rec.stat.Version, st.rec.stat.Czxid
			}
			// The record checked by version must be the one read: one
			// deleted and re-created in between (a wipe) could have the
			// same version.
			same, err := c.sameNodes(ctx)
			if err != nil {
				return fail(w.unavailable(ctx, err, "claiming worker id %d of datacenter %d in %s: reading its nodes back", id, dc, w.prefix))
			}
			if !same {
				sess.end(errors.New("acquired under a record re-created since it was read"))
				sess, lastErr = nil, fmt.Errorf("the namespace record %s was re-created between the read and the claim", nk)
				continue
			}
			if createdRec {
				if err := c.fixInit(ctx, res[recIdx].Stat.Mtime); err != nil {
					return fail(err)
				}
				c.prev = coord.MsTime(max(s.highMs, c.rec.FloorMs, l.high()))
			}
			for i, n := range l.nodes() {
				v := n.stat.Version
				if st := res[leafIdx[i]].Stat; st != nil {
					v = st.Version
				}
				c.leaf = append(c.leaf, leafFence{path: n.path, addr: n.addr, version: v})
			}
			if !sess.arm(sent, req.TTL) {
				return fail(fmt.Errorf("%w: claiming worker id %d of datacenter %d in %s: its session ended meanwhile (%v)",
					worker.ErrUnavailable, id, dc, w.prefix, sess.err()))
			}
			return c, nil
		}
		lastErr = err
	}
}

func ownerOf(s *gozk.Stat) int64 {
	if s == nil {
		return 0
	}
	return s.EphemeralOwner
}

// List implements worker.Coordinator. Expires is the holder node's last
// renewal by ZooKeeper's clock (its Mtime) plus the TTL the holder stored
// (or its session's negotiated timeout, when longer). With WithLeaf,
// datacenter 0 also lists the Leaf worker ids (see LeafConfig).
func (w *Workers) List(ctx context.Context, datacenter int64) ([]worker.Info, error) {
	st, err := w.readDC(ctx, datacenter, -1)
	if err != nil {
		return nil, err
	}
	var leaf map[int64]*leafID
	if w.leaf != nil && datacenter == 0 {
		if leaf, err = w.readLeaf(ctx, 0); err != nil {
			return nil, err
		}
	}
	ids := make([]int64, 0, len(st.slots)+len(leaf))
	for id := range st.slots {
		ids = append(ids, id)
	}
	for id := range leaf {
		if st.slots[id] == nil {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	infos := make([]worker.Info, 0, len(ids))
	for _, id := range ids {
		in := worker.Info{Datacenter: datacenter, Worker: id}
		if s := st.slots[id]; s != nil {
			in.HighWater = coord.MsTime(s.highMs)
			if s.holder != nil {
				h, err := parseHolder(s.holder)
				if err != nil {
					return nil, err
				}
				// Every renewal writes the high node: its Mtime is the
				// last renewal by ZooKeeper's clock.
				last := s.holder.stat.Mtime
				if s.high != nil {
					last = max(last, s.high.stat.Mtime)
				}
				in.Holder = h.Owner
				in.Expires = coord.MsTime(last + h.TTLMs)
			}
		}
		if l := leaf[id]; l != nil {
			in.HighWater = maxTime(in.HighWater, coord.MsTime(l.highMs))
			if in.Holder == "" || !in.Expires.After(time.Now()) {
				if h, exp, ok := l.holder(); ok {
					in.Holder, in.Expires = h, exp
				}
			}
		}
		infos = append(infos, in)
	}
	return infos, nil
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// Namespace implements worker.Coordinator.
func (w *Workers) Namespace(ctx context.Context, datacenter int64) (worker.Namespace, bool, error) {
	n, err := get(ctx, w.shared(), w.nsPath(datacenter))
	if err != nil {
		return worker.Namespace{}, false, w.unavailable(ctx, err, "reading the namespace record of datacenter %d in %s", datacenter, w.prefix)
	}
	if n == nil {
		return worker.Namespace{}, false, nil
	}
	rec, err := parseRecord(n)
	if err != nil {
		return worker.Namespace{}, false, err
	}
	return rec.Namespace(), true, nil
}

func isNoNode(err error) bool { return errors.Is(err, gozk.ErrNoNode) }
