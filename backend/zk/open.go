package zk

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"time"

	gozk "github.com/go-zookeeper/zk"

	"github.com/flakeid/flakeid/backend/internal/coord"
	"github.com/flakeid/flakeid/worker"
	"github.com/flakeid/flakeid/worker/protocol"
)

// OpenWorkers opens the coordinator a zk:// URL names:
//
//	zk://host:port[,host:port…][/path][?leaf=/snowflake/NAME&leaf_interval=D&leaf_margin=D]
//
// The servers are "host:port", or "host" for port 2181. The path is the
// namespace's (DefaultPrefix when there is none, or "/"), and leaf= with
// leaf_interval= and leaf_margin= (Go durations) the Meituan Leaf cluster to
// take over (WithLeaf); opts come after the URL's. Any other query
// parameter, or credentials, is an error naming it, wrapping
// worker.ErrInvalidConfig (registry= with the reason: the registry is
// DefaultRegistry, one per ensemble), and so is a path inside it. It connects and checks that ZooKeeper
// answers, within ctx or DefaultDialTimeout when ctx has no deadline: an
// ensemble that does not is reported as worker.ErrUnavailable. The *Workers owns its connection: Close
// closes it; claims keep their own sessions, which Release closes.
func OpenWorkers(ctx context.Context, u *url.URL, opts ...Option) (*Workers, error) {
	servers, prefix, uopts, err := parseURL(u)
	if err != nil {
		return nil, err
	}
	return connectWorkers(ctx, servers, prefix, append(uopts, opts...)...)
}

// parseURL reads a URL of OpenWorkers into the servers, the namespace's path
// and the options (WithLeaf for leaf= with leaf_interval= and
// leaf_margin=). Every error wraps
// worker.ErrInvalidConfig, and none shows the URL: the caller does.
func parseURL(u *url.URL) (servers []string, prefix string, opts []Option, err error) {
	bad := func(format string, args ...any) ([]string, string, []Option, error) {
		return nil, "", nil, fmt.Errorf("%w: "+format, append([]any{worker.ErrInvalidConfig}, args...)...)
	}
	if u.Scheme != "zk" {
		return bad("scheme %q, want zk://", u.Scheme)
	}
	if u.User != nil {
		return bad("credentials are not supported")
	}
	if err := coord.RefuseRegistry(u, "the nodes under "+DefaultRegistry); err != nil {
		return nil, "", nil, err
	}
	for _, s := range strings.Split(u.Host, ",") {
		if s == "" {
			return bad("no ZooKeeper server (want zk://host:port[,host:port]/path)")
		}
		servers = append(servers, s)
	}
	prefix = strings.TrimRight(u.Path, "/")
	if prefix == "" {
		prefix = DefaultPrefix
	}
	if err := validPath(prefix); err != nil {
		return bad("path %q: %v", u.Path, err)
	}
	if err := coord.InsideRegistry(prefix, DefaultRegistry); err != nil {
		return nil, "", nil, err
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return bad("query: %v", err)
	}
	var leaf *LeafConfig
	dur := func(key string) (time.Duration, error) {
		d, err := time.ParseDuration(q.Get(key))
		if err != nil || d <= 0 {
			return 0, fmt.Errorf("%s=%q: want a positive duration such as 5s", key, q.Get(key))
		}
		return d, nil
	}
	for key, vals := range q {
		if len(vals) != 1 {
			return bad("%s= given %d times", key, len(vals))
		}
		switch key {
		case "leaf", "leaf_interval", "leaf_margin":
			if leaf == nil {
				leaf = &LeafConfig{}
			}
		default:
			return bad("%v", coord.UnknownParam(key, []string{"leaf", "leaf_interval", "leaf_margin"}))
		}
	}
	if leaf != nil {
		leaf.Path = strings.TrimRight(q.Get("leaf"), "/")
		if err := validPath(leaf.Path); err != nil {
			return bad("leaf=%q: %v (want leaf=/snowflake/<leaf.name>)", q.Get("leaf"), err)
		}
		if q.Has("leaf_interval") {
			if leaf.Interval, err = dur("leaf_interval"); err != nil {
				return bad("%v", err)
			}
		}
		if q.Has("leaf_margin") {
			if leaf.Margin, err = dur("leaf_margin"); err != nil {
				return bad("%v", err)
			}
		}
		opts = append(opts, WithLeaf(*leaf))
	}
	return servers, prefix, opts, nil
}

// DefaultDialTimeout bounds OpenWorkers's connection and check when its
// context has no deadline.
const DefaultDialTimeout = 5 * time.Second

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
	w := &Workers{servers: slices.Clone(servers), prefix: prefix, registry: DefaultRegistry, sessions: map[int64]*session{}}
	for _, o := range opts {
		o(w)
	}
	w.Driver = protocol.New(store{w})
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
