package main

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	goredis "github.com/redis/go-redis/v9"

	"github.com/flakeid/flakeid/backend/consul"
	"github.com/flakeid/flakeid/backend/etcd"
	"github.com/flakeid/flakeid/backend/redis"
	"github.com/flakeid/flakeid/backend/sqldb"
	"github.com/flakeid/flakeid/backend/zk"
	"github.com/flakeid/flakeid/worker"
)

// openRemote opens a coordinator on a network service, from its URL:
//
//	etcd://host:port[,host:port…][/prefix][?registry=R]  (default prefix /flakeid/workers, registry /flakeid/datacenters)
//	redis://[:password@]host:port[/db][?prefix=P&registry=R]   (default registry flakeid:datacenters; go-redis URL options pass through)
//	postgres://user[:password]@host:port/db[?table=T&registry=R&…]  (pgx options pass through)
//	mysql://user[:password]@host:port/db[?table=T&registry=R&…]     (go-sql-driver/mysql options pass through)
//	zk://host:port[,host:port…][/path][?registry=R&leaf=/snowflake/NAME&leaf_margin=D]  (default path /flakeid/workers)
//	consul://host:port[/prefix][?registry=R&lock_delay=D&token=T]   (consuls:// for HTTPS; default prefix flakeid/workers)
//
// A SQL coordinator's table (default flakeid_workers) and its datacenter
// registry table (default flakeid_datacenters) are created when missing;
// `flakeid workers schema` prints their DDL for a migration tool.
func openRemote(ctx context.Context, u *url.URL) (worker.Coordinator, func() error, error) {
	switch strings.ToLower(u.Scheme) {
	case "etcd":
		if u.Host == "" {
			return nil, nil, fmt.Errorf("--coordinator %q: no etcd endpoint", redactedURL(u))
		}
		var endpoints []string
		for _, h := range strings.Split(u.Host, ",") {
			endpoints = append(endpoints, "http://"+h)
		}
		w, err := etcd.Dial(ctx, endpoints, u.Path, etcd.WithRegistry(u.Query().Get("registry")))
		if err != nil {
			return nil, nil, fmt.Errorf("--coordinator %q: %w", redactedURL(u), err)
		}
		return w, w.Close, nil
	case "postgres", "postgresql", "mysql":
		w, closeDB, err := openSQL(ctx, u)
		if err != nil {
			return nil, nil, err
		}
		if err := w.CreateSchema(ctx); err != nil {
			closeDB()
			return nil, nil, err
		}
		return w, closeDB, nil
	case "redis", "rediss":
		q := u.Query()
		prefix, registry := q.Get("prefix"), q.Get("registry")
		q.Del("prefix")
		q.Del("registry")
		v := *u
		v.RawQuery = q.Encode()
		opts, err := goredis.ParseURL(v.String())
		if err != nil {
			return nil, nil, fmt.Errorf("--coordinator %q: %w", redactedURL(u), err)
		}
		opts.ContextTimeoutEnabled = true
		client := goredis.NewClient(opts)
		return redis.NewWorkers(client, prefix, redis.WithRegistry(registry)), client.Close, nil
	case "zk", "zookeeper":
		w, err := zk.OpenURL(ctx, u)
		if err != nil {
			return nil, nil, fmt.Errorf("--coordinator %q: %w", redactedURL(u), err)
		}
		return w, w.Close, nil
	case "consul", "consuls":
		w, err := consul.OpenURL(ctx, u)
		if err != nil {
			return nil, nil, fmt.Errorf("--coordinator %q: %w", redactedURL(u), err)
		}
		return w, w.Close, nil
	}
	return nil, nil, fmt.Errorf("--coordinator %q: unknown scheme %q (want file, etcd, redis, postgres, mysql, zk or consul)", redactedURL(u), u.Scheme)
}

// sqlDSN turns a postgres:// or mysql:// URL of the flag (--coordinator,
// --store) into the driver's DSN and the table name it names (?table=,
// default "").
func sqlDSN(flag string, u *url.URL) (dsn, table string, err error) {
	if strings.TrimPrefix(u.Path, "/") == "" {
		return "", "", fmt.Errorf("%s %q: no database name in the path", flag, redactedURL(u))
	}
	q := u.Query()
	table = q.Get("table")
	q.Del("table")
	v := *u
	v.RawQuery = q.Encode()
	if !strings.EqualFold(u.Scheme, "mysql") {
		return v.String(), table, nil
	}
	// go-sql-driver/mysql: user:password@tcp(host:port)/db?params
	var userinfo string
	if u.User != nil {
		userinfo = u.User.Username()
		if p, ok := u.User.Password(); ok {
			userinfo += ":" + p
		}
		userinfo += "@"
	}
	host := u.Host
	if u.Port() == "" {
		host += ":3306"
	}
	dsn = userinfo + "tcp(" + host + ")/" + strings.TrimPrefix(u.Path, "/")
	if v.RawQuery != "" {
		dsn += "?" + v.RawQuery
	}
	return dsn, table, nil
}

// openSQL opens the SQL coordinator a URL names, and a function that closes
// its database.
func openSQL(ctx context.Context, u *url.URL) (*sqldb.Workers, func() error, error) {
	q := u.Query() // ?registry= names the datacenter registry table; not for the driver
	registry := q.Get("registry")
	q.Del("registry")
	v := *u
	v.RawQuery = q.Encode()
	dsn, table, err := sqlDSN("--coordinator", &v)
	if err != nil {
		return nil, nil, err
	}
	db, d, err := sqldb.OpenDB(dsn)
	if err != nil {
		return nil, nil, fmt.Errorf("--coordinator %q: %w", redactedURL(u), err)
	}
	w, err := sqldb.NewWorkers(db, d, table, sqldb.WithRegistry(registry))
	if err != nil {
		db.Close()
		return nil, nil, fmt.Errorf("--coordinator %q: %w", redactedURL(u), err)
	}
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, nil, fmt.Errorf("%w: --coordinator %q: %w", worker.ErrUnavailable, redactedURL(u), err)
	}
	return w, db.Close, nil
}
