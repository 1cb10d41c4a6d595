package main

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"

	"github.com/flakeid/flakeid/backend/sqldb"
	"github.com/flakeid/flakeid/segment"
)

// storeFlags say where segment mode keeps its tags; next --tag, tags and
// serve embed them.
type storeFlags struct {
	Store string `placeholder:"URL" env:"FLAKEID_STORE" help:"Where segment tags live: file:///path/segments.db (the default, under --data-dir), postgres://user@host:port/db[?table=leaf_alloc], mysql://user[:password]@host:port/db[?table=leaf_alloc]. A SQL table is Meituan Leaf's leaf_alloc, created when missing."`
}

// url is --store, or the default: segments.db under the data directory.
func (f *storeFlags) url(data *dataFlags) (string, error) {
	if f.Store != "" {
		return f.Store, nil
	}
	dir, err := data.dir()
	if err != nil {
		return "", err
	}
	return "file://" + filepath.Join(dir, "segments.db"), nil
}

// open returns the segment store the flags name and a function that closes
// it.
func (f *storeFlags) open(ctx context.Context, data *dataFlags) (segment.Store, func() error, error) {
	raw, err := f.url(data)
	if err != nil {
		return nil, nil, err
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, nil, fmt.Errorf("--store is not a URL: %w", urlParseError(err))
	}
	switch strings.ToLower(u.Scheme) {
	case "file":
		path := u.Path
		if u.Host != "" && u.Host != "localhost" {
			path = filepath.Join(u.Host, u.Path)
		}
		if path == "" {
			return nil, nil, fmt.Errorf("--store %q: no file path", raw)
		}
		s, closeDir, err := openSegmentsFile(ctx, path)
		if err != nil {
			return nil, nil, err
		}
		return s, closeDir, nil
	case "postgres", "postgresql", "mysql":
		dsn, table, err := sqlDSN("--store", u)
		if err != nil {
			return nil, nil, err
		}
		if table == "" {
			table = "leaf_alloc"
		}
		db, d, err := sqldb.OpenDB(dsn)
		if err != nil {
			return nil, nil, fmt.Errorf("--store %q: %w", redactedURL(u), err)
		}
		s, err := sqldb.NewSegments(db, d, table)
		if err != nil {
			db.Close()
			return nil, nil, fmt.Errorf("--store %q: %w", redactedURL(u), err)
		}
		if err := s.CreateSegmentSchema(ctx); err != nil {
			db.Close()
			return nil, nil, fmt.Errorf("--store %q: %w", redactedURL(u), err)
		}
		return s, db.Close, nil
	}
	return nil, nil, fmt.Errorf("--store %q: unknown scheme %q (want file, postgres or mysql)", redactedURL(u), u.Scheme)
}
