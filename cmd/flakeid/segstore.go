package main

import (
	"context"
	"path/filepath"
)

// storeFlags say where segment mode keeps its tags; next --tag, tags and
// serve embed them.
type storeFlags struct {
	Store string `placeholder:"URL" env:"FLAKEID_STORE" help:"Where segment tags live: file:///path/segments.db (the default, under --data-dir), postgres://user@host:port/db[?table=leaf_alloc], mysql://user[:password]@host:port/db[?table=leaf_alloc]. A SQL table is Meituan Leaf's leaf_alloc, created when missing; add ?format=tinyid for Didi Tinyid's tiny_id_info (and its tiny_id_token tokens)."`
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

// open opens the segment store the flags name (see backends in open.go); the
// default is a file under the data directory. Close releases it.
func (f *storeFlags) open(ctx context.Context, data *dataFlags) (store, error) {
	raw, err := f.url(data)
	if err != nil {
		return nil, err
	}
	return openStore(ctx, raw)
}
