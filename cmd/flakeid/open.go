package main

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"strings"

	"github.com/flakeid/flakeid/backend/bolt"
	"github.com/flakeid/flakeid/backend/consul"
	"github.com/flakeid/flakeid/backend/etcd"
	"github.com/flakeid/flakeid/backend/nats"
	"github.com/flakeid/flakeid/backend/redis"
	"github.com/flakeid/flakeid/backend/sqldb"
	"github.com/flakeid/flakeid/backend/zk"
	"github.com/flakeid/flakeid/segment"
	"github.com/flakeid/flakeid/worker"
)

// coordinator is a worker-id coordinator that owns its connection (or file)
// and releases it on Close.
type coordinator interface {
	worker.Coordinator
	io.Closer
}

// store is a segment store that owns its database (or file) and releases
// it on Close.
type store interface {
	segment.Store
	io.Closer
}

// backend is one row of the scheme table: the URL schemes a backend
// package answers to and its openers (segments is nil where the backend
// keeps no segment store). Each package opens itself from the parsed URL;
// its doc lists the URL's form and query parameters.
type backend struct {
	schemes  []string
	workers  opener[coordinator]
	segments opener[store]
}

// backends is the table from URL scheme to backend: the only place the
// command knows which packages exist.
func backends() []backend {
	return []backend{
		{[]string{"file"}, opened[coordinator](bolt.OpenWorkers), opened[store](bolt.OpenSegments)},
		{[]string{"postgres", "postgresql", "mysql"}, opened[coordinator](sqldb.OpenWorkers), opened[store](sqldb.OpenSegments)},
		{[]string{"etcd"}, opened[coordinator](etcd.OpenWorkers), nil},
		{[]string{"redis", "rediss"}, opened[coordinator](redis.OpenWorkers), nil},
		{[]string{"zk"}, openedWith[coordinator](zk.OpenWorkers), nil},
		{[]string{"consul", "consuls"}, openedWith[coordinator](consul.OpenWorkers), nil},
		{[]string{"nats", "tls"}, opened[coordinator](nats.OpenWorkers), nil},
	}
}

// The table's rows, checked at compile time (opened converts at run time).
var (
	_ coordinator = (*bolt.Workers)(nil)
	_ store       = (*bolt.Segments)(nil)
	_ coordinator = (*sqldb.Workers)(nil)
	_ store       = (*sqldb.Segments)(nil)
	_ coordinator = (*etcd.Workers)(nil)
	_ coordinator = (*redis.Workers)(nil)
	_ coordinator = (*zk.Workers)(nil)
	_ coordinator = (*consul.Workers)(nil)
	_ coordinator = (*nats.Workers)(nil)
)

// opener is how every backend package opens itself: from the parsed URL.
type opener[T any] func(context.Context, *url.URL) (T, error)

// opened adapts an opener returning its package's concrete type to the
// table's interface I (never an interface holding a nil pointer).
func opened[I any, T any](open opener[T]) opener[I] {
	return func(ctx context.Context, u *url.URL) (I, error) {
		v, err := open(ctx, u)
		if err != nil {
			var none I
			return none, err
		}
		return any(v).(I), nil
	}
}

// openedWith is opened for an opener that takes its package's options
// (the command passes none).
func openedWith[I any, T any, O any](open func(context.Context, *url.URL, ...O) (T, error)) opener[I] {
	return opened[I](func(ctx context.Context, u *url.URL) (T, error) { return open(ctx, u) })
}

// openURL parses raw, the value of flag, and opens it with the opener pick
// takes from the scheme's row; what (e.g. "segment store") names the role
// in the error of a scheme that has no such opener.
func openURL[T any](ctx context.Context, flag, raw, what string, pick func(backend) opener[T]) (T, error) {
	var none T
	u, err := url.Parse(raw)
	if err != nil {
		return none, fmt.Errorf("%s is not a URL: %w", flag, urlParseError(err))
	}
	var known []string
	for _, b := range backends() {
		open := pick(b)
		if open == nil {
			continue
		}
		for _, s := range b.schemes {
			if strings.EqualFold(u.Scheme, s) {
				v, err := open(ctx, u)
				if err != nil {
					return none, fmt.Errorf("%s %q: %w", flag, redactedURL(u), err)
				}
				return v, nil
			}
		}
		known = append(known, b.schemes...)
	}
	return none, fmt.Errorf("%s %q: unknown scheme %q (want %s as the %s)", flag, redactedURL(u), u.Scheme, orList(known), what)
}

// openCoordinator opens the worker-id coordinator raw names.
func openCoordinator(ctx context.Context, raw string) (coordinator, error) {
	return openURL(ctx, "--coordinator", raw, "coordinator", func(b backend) opener[coordinator] { return b.workers })
}

// openStore opens the segment store raw names.
func openStore(ctx context.Context, raw string) (store, error) {
	return openURL(ctx, "--store", raw, "segment store", func(b backend) opener[store] { return b.segments })
}

// orList joins names as "a, b or c".
func orList(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}
