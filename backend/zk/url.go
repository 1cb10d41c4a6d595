package zk

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/flakeid/flakeid/backend/internal/coord"
	"github.com/flakeid/flakeid/worker"
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
