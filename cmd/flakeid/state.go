package main

import (
	"context"
	"path/filepath"

	"github.com/flakeid/flakeid/backend/bolt"
	"github.com/flakeid/flakeid/internal/datadir"
)

// The embedded state files go through their data directory (the directory
// holding them; --data-dir for the defaults), which remembers the files it
// had: a file that existed and is gone is refused rather than started
// afresh, a damaged one is refused by the bolt package, and `flakeid
// recover` (recover.go) is the way back. The directory stays locked, shared,
// until the returned close function runs, so that a recovery cannot run
// beside this process.

// openWorkersFile opens the file coordinator at path through its data
// directory.
func openWorkersFile(ctx context.Context, path string) (*bolt.Workers, func() error, error) {
	var w *bolt.Workers
	closeDir, err := useStateFile(path, datadir.Workers, func() (err error) {
		w, err = bolt.OpenWorkers(ctx, path)
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	return w, closeDir, nil
}

// openSegmentsFile opens the file segment store at path through its data
// directory.
func openSegmentsFile(ctx context.Context, path string) (*bolt.Segments, func() error, error) {
	var s *bolt.Segments
	closeDir, err := useStateFile(path, datadir.Segments, func() (err error) {
		s, err = bolt.OpenSegments(ctx, path)
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	return s, closeDir, nil
}

// useStateFile locks the data directory of path and opens the file of kind
// through its marker (datadir.Dir.Use); the returned function unlocks the
// directory.
func useStateFile(path, kind string, open func() error) (func() error, error) {
	d, err := datadir.Open(filepath.Dir(path))
	if err != nil {
		return nil, err
	}
	if err := d.Use(filepath.Base(path), kind, open); err != nil {
		d.Close()
		return nil, err
	}
	return d.Close, nil
}
