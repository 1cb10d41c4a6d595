package main

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	goredis "github.com/redis/go-redis/v9"

	"github.com/flakeid/flakeid/backend/redis"
	"github.com/flakeid/flakeid/worker"
)

// openRemote opens a coordinator on a network service, from its URL:
//
//	redis://[:password@]host:port[/db][?prefix=P]   (go-redis URL options pass through)
func openRemote(ctx context.Context, u *url.URL) (worker.Coordinator, func() error, error) {
	switch strings.ToLower(u.Scheme) {
	case "redis", "rediss":
		q := u.Query()
		prefix := q.Get("prefix")
		q.Del("prefix")
		v := *u
		v.RawQuery = q.Encode()
		opts, err := goredis.ParseURL(v.String())
		if err != nil {
			return nil, nil, fmt.Errorf("--coordinator %q: %w", u.Redacted(), err)
		}
		opts.ContextTimeoutEnabled = true
		client := goredis.NewClient(opts)
		return redis.NewWorkers(client, prefix), client.Close, nil
	}
	return nil, nil, fmt.Errorf("--coordinator %q: unknown scheme %q (want file, etcd, redis, postgres or mysql)", u.Redacted(), u.Scheme)
}
