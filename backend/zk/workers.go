package zk

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
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

// stamp formats the times in errors.
const stamp = "2006-01-02T15:04:05.000Z07:00"

// Workers is a worker.Coordinator, worker.MarkLowerer and worker.Registry
// over ZooKeeper: protocol.Driver over the nodes of one path. It is safe
// for concurrent use.
type Workers struct {
	*protocol.Driver
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

	smu      sync.Mutex
	sessions map[int64]*session // the holders' sessions this Workers opened, by session id, until they end

	cmu       sync.Mutex
	clockMs   int64     // the latest reading of ZooKeeper's clock: a write's Mtime
	clockSent time.Time // when that write was sent; zero before the first
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

// Prefix is the namespace's path, without a trailing "/".
func (w *Workers) Prefix() string { return w.prefix }

// Registry is the path of the datacenter registry, without a trailing "/".
func (w *Workers) Registry() string { return w.registry }

// keys names the nodes of this namespace and of the registry.
func (w *Workers) keys() coord.KVKeys { return coord.KVKeys{Prefix: w.prefix, Registry: w.registry} }

// dcPath is the node of datacenter dc.
func (w *Workers) dcPath(dc int64) string { return w.prefix + "/" + strconv.FormatInt(dc, 10) }

// slotPath is the node of worker id of datacenter dc: its holder and high
// nodes' parent.
func (w *Workers) slotPath(dc, id int64) string {
	return w.dcPath(dc) + "/" + strconv.FormatInt(id, 10)
}

// clockPath is the scratch node written to read ZooKeeper's clock.
func (w *Workers) clockPath() string { return w.prefix + "/clock" }

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

// clockFresh is how long a reading of ZooKeeper's clock (a write's Mtime)
// stands for it: a Read within it estimates the clock from the reading and
// the time since, instead of writing the scratch node. Only the two
// clocks' rates can part the estimate from the truth within it.
const clockFresh = 10 * time.Second

// sawClock keeps a reading of ZooKeeper's clock: the Mtime ms of a write sent
// at sent, if it is the latest.
func (w *Workers) sawClock(ms int64, sent time.Time) {
	w.cmu.Lock()
	defer w.cmu.Unlock()
	if sent.After(w.clockSent) {
		w.clockMs, w.clockSent = ms, sent
	}
}

// zkClock is ZooKeeper's clock for a Read, in Unix ms, and brings the
// shared session up to the leader, so that its reads after it see every
// write committed before: from a reading younger than clockFresh, its Mtime
// plus a millisecond (Mtimes are truncated) plus the time since its write
// was sent (an upper bound), after a Sync; else a new reading (zkNow).
func (w *Workers) zkClock(ctx context.Context) (int64, error) {
	w.cmu.Lock()
	ms, sent := w.clockMs, w.clockSent
	w.cmu.Unlock()
	if !sent.IsZero() && time.Since(sent) < clockFresh {
		conn := w.shared()
		_, err := await(ctx, func() (string, error) { return conn.Sync(w.prefix) })
		if err == nil {
			return ms + 1 + coord.CeilDurMs(time.Since(sent)), nil
		}
		if !errors.Is(err, gozk.ErrNoNode) {
			return 0, w.unavailable(ctx, err, "syncing %s with the leader", w.prefix)
		}
	}
	sent = time.Now()
	ms, err := w.zkNow(ctx)
	if err == nil {
		w.sawClock(ms, sent)
	}
	return ms, err
}

// zkNow writes the scratch node <prefix>/clock on the shared session and
// returns its Mtime: ZooKeeper's clock (the leader's, when it prepared the
// write), read while the write was under way. The shared session's reads
// after it see every write committed before it (ZooKeeper answers a
// session in order, and its server applied the write first), so it also
// brings them up to the leader's state.
func (w *Workers) zkNow(ctx context.Context) (int64, error) {
	conn := w.shared()
	stat, err := await(ctx, func() (*gozk.Stat, error) {
		st, err := conn.Set(w.clockPath(), nil, -1)
		if errors.Is(err, gozk.ErrNoNode) {
			if err := ensurePath(context.Background(), conn, w.prefix); err != nil {
				return nil, err
			}
			if _, err := conn.Create(w.clockPath(), nil, gozk.FlagPersistent, acl()); err != nil && !errors.Is(err, gozk.ErrNodeExists) {
				return nil, err
			}
			st, err = conn.Set(w.clockPath(), nil, -1)
		}
		return st, err
	})
	if err != nil {
		return 0, w.unavailable(ctx, err, "writing %s to read ZooKeeper's clock", w.clockPath())
	}
	return stat.Mtime, nil
}

// acl is the ACL of every node flakeid creates: open to all, as Leaf's.
func acl() []gozk.ACL { return gozk.WorldACL(gozk.PermAll) }

// Acquire implements worker.Coordinator: the driver's, after a Workers
// taking over Leaf's worker ids checked the request against Leaf's layout.
func (w *Workers) Acquire(ctx context.Context, req worker.Request) (worker.Claim, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	if err := w.checkLeafRequest(req); err != nil {
		return nil, err
	}
	return w.Driver.Acquire(ctx, req)
}

// Claims implements worker.Registry: the children of the registry node.
func (s store) Claims(ctx context.Context) (worker.Claims, error) {
	w := s.w
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
	return coord.ParseClaims(w.keys(), entries)
}
