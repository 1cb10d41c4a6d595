package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/flakeid/flakeid/segment"
)

// storeFlags say where segment mode keeps its tags; next --tag, decode,
// tags and serve embed them.
type storeFlags struct {
	Store []string `placeholder:"URL" sep:"none" env:"FLAKEID_STORE" help:"Where segment tags live: file:///path/segments.db (the default, under --data-dir), postgres://user@host:port/db[?table=leaf_alloc], mysql://user[:password]@host:port/db[?table=leaf_alloc]. A SQL table is Meituan Leaf's leaf_alloc, created when missing; add ?format=tinyid for Didi Tinyid's tiny_id_info (and its tiny_id_token tokens). Give --store once per database to serve each tag from several (Tinyid's delta and remainder, Flickr's ticket servers): each serves the share of a tag's IDs it records, whatever the order of the flags; tags create with all of them gives store i of n the IDs ≡ i (mod n)."`
}

// urls are the --store URLs, or the default: segments.db under the data
// directory.
func (f *storeFlags) urls(data *dataFlags) ([]string, error) {
	if len(f.Store) > 0 {
		return f.Store, nil
	}
	dir, err := data.dir()
	if err != nil {
		return nil, err
	}
	return []string{"file://" + filepath.Join(dir, "segments.db")}, nil
}

// redacted is the --store URLs without passwords, for logs.
func (f *storeFlags) redacted(data *dataFlags) string {
	urls, err := f.urls(data)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	out := make([]string, len(urls))
	for i, u := range urls {
		out[i] = redactURL(u)
	}
	return strings.Join(out, " ")
}

// stores are the segment stores the flags name, opened, with the names
// they go by in messages.
type stores struct {
	list  []store
	names []string
}

// open opens every store the flags name (see backends in open.go); the
// default is a file under the data directory. Close releases them.
func (f *storeFlags) open(ctx context.Context, data *dataFlags) (*stores, error) {
	urls, err := f.urls(data)
	if err != nil {
		return nil, err
	}
	s := &stores{}
	seen := map[string]bool{}
	for _, raw := range urls {
		name := redactURL(raw)
		if seen[raw] {
			s.Close()
			return nil, fmt.Errorf("--store %s is given twice: each database serves its share of a tag once", name)
		}
		seen[raw] = true
		st, err := openStore(ctx, raw)
		if err != nil {
			s.Close()
			return nil, err
		}
		s.list, s.names = append(s.list, st), append(s.names, name)
	}
	return s, nil
}

// Close closes every store.
func (s *stores) Close() error {
	var errs []error
	for _, st := range s.list {
		errs = append(errs, st.Close())
	}
	return errors.Join(errs...)
}

// config is cfg with the stores as its sources: each serves the share of a
// tag it records (segment.Source).
func (s *stores) config(cfg segment.Config) segment.Config {
	cfg.Store, cfg.Sources = nil, nil
	if len(s.list) == 1 {
		cfg.Store = s.list[0]
		return cfg
	}
	for i, st := range s.list {
		cfg.Sources = append(cfg.Sources, segment.Source{Store: st, Name: s.names[i]})
	}
	return cfg
}

// allocator is an allocator over the stores, for one administrative call.
func (s *stores) allocator(cfg segment.Config) (*segment.Allocator, error) {
	if cfg.Logger == nil {
		cfg.Logger = discardLogger()
	}
	return segment.New(s.config(cfg))
}
