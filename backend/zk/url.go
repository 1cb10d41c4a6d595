package zk

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/flakeid/flakeid/worker"
)

// ParseURL reads a coordinator URL
//
//	zk://host:port[,host:port…]/path?registry=R&leaf=/snowflake/NAME&leaf_interval=D&leaf_margin=D
//
// into Dial's arguments: the servers, the namespace's path ("" or "/" for
// DefaultPrefix), and the options (WithRegistry for registry=, WithLeaf for
// leaf= with leaf_interval= and leaf_margin= as Go durations). Any other
// query key is an error naming it; every error wraps worker.ErrInvalidConfig.
func ParseURL(u *url.URL) (servers []string, prefix string, opts []Option, err error) {
	bad := func(format string, args ...any) ([]string, string, []Option, error) {
		return nil, "", nil, fmt.Errorf("%w: coordinator URL %s: "+format, append([]any{worker.ErrInvalidConfig, u.Redacted()}, args...)...)
	}
	if u.Scheme != "zk" {
		return bad("scheme %q, want zk://", u.Scheme)
	}
	if u.User != nil {
		return bad("credentials are not supported")
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
		case "registry":
			if err := validPath(strings.TrimRight(vals[0], "/")); err != nil {
				return bad("registry=%q: %v", vals[0], err)
			}
			opts = append(opts, WithRegistry(vals[0]))
		case "leaf", "leaf_interval", "leaf_margin":
			if leaf == nil {
				leaf = &LeafConfig{}
			}
		default:
			return bad("unknown parameter %q (known: registry, leaf, leaf_interval, leaf_margin)", key)
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

// OpenURL dials the coordinator a zk:// URL names (see ParseURL); extra
// options follow the URL's.
func OpenURL(ctx context.Context, u *url.URL, extra ...Option) (*Workers, error) {
	servers, prefix, opts, err := ParseURL(u)
	if err != nil {
		return nil, err
	}
	return Dial(ctx, servers, prefix, append(opts, extra...)...)
}
