package bolt

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"

	"github.com/flakeid/flakeid/backend/internal/coord"
	"github.com/flakeid/flakeid/internal/datadir"
)

// OpenWorkers opens the worker coordinator in the file the URL names (see
// the package doc for the form) through its data directory. A file the
// directory remembers and that is gone is refused. A missing file is
// created — complete, under a temporary name first, so that a crash never
// leaves an empty or half-written file at its path — and recorded in the
// directory; an existing one is checked before bbolt maps it (its size and
// both meta pages, then, for files up to 64 MiB, every page through bbolt's
// consistency check) and refused with an error wrapping ErrDamaged when it
// is empty, shorter than its header says, or corrupt. Later operations open
// the file again, check its header again, and never create it: a file
// deleted while in use is an error, not a new, empty coordinator.
//
// The *Workers holds the directory's lock, shared, until Close. The errors
// name what is wrong but not the URL, which the caller shows as it sees fit.
func OpenWorkers(ctx context.Context, u *url.URL) (*Workers, error) {
	path, err := filePath(u)
	if err != nil {
		return nil, err
	}
	var w *Workers
	d, err := openInDir(path, datadir.Workers, func() (err error) {
		w, err = openWorkers(ctx, path)
		return err
	})
	if err != nil {
		return nil, err
	}
	w.dir = d
	return w, nil
}

// OpenSegments opens the segment store in the file the URL names through
// its data directory, as OpenWorkers opens the coordinator's (the same URL
// form, checks and refusals; a damaged file is an error wrapping both
// ErrDamaged and segment.ErrUnavailable). The *Segments holds the
// directory's lock, shared, until Close.
func OpenSegments(ctx context.Context, u *url.URL) (*Segments, error) {
	path, err := filePath(u)
	if err != nil {
		return nil, err
	}
	var s *Segments
	d, err := openInDir(path, datadir.Segments, func() (err error) {
		s, err = openSegments(ctx, path)
		return err
	})
	if err != nil {
		return nil, err
	}
	s.dir = d
	return s, nil
}

// OpenWorkersForRecovery is for `flakeid recover` only: it opens the worker
// coordinator in the file name of the data directory d, which the caller
// has locked exclusively (datadir.Lock) and whose marker it updates itself
// (datadir.Dir.Recovered). The file is created when missing — the recovery
// moved the old one aside — and checked otherwise, as OpenWorkers does, but
// the marker is neither read nor written and no lock is taken. Close
// releases nothing: the lock is the caller's.
func OpenWorkersForRecovery(ctx context.Context, d *datadir.Dir, name string) (*Workers, error) {
	path, err := recoveryPath(d, name)
	if err != nil {
		return nil, err
	}
	return openWorkers(ctx, path)
}

// OpenSegmentsForRecovery is OpenWorkersForRecovery for the segment store
// in the file name of d.
func OpenSegmentsForRecovery(ctx context.Context, d *datadir.Dir, name string) (*Segments, error) {
	path, err := recoveryPath(d, name)
	if err != nil {
		return nil, err
	}
	return openSegments(ctx, path)
}

// recoveryPath is the path of the file name in the locked directory d.
func recoveryPath(d *datadir.Dir, name string) (string, error) {
	switch {
	case d == nil:
		return "", errors.New("recovery: no data directory (lock it with datadir.Lock)")
	case name == "" || filepath.Base(name) != name:
		return "", fmt.Errorf("recovery: %q is not a file name", name)
	}
	return filepath.Join(d.Path(), name), nil
}

// filePath is the path a file URL names: file:///abs/path, or
// file://relative/path (the host joined with the path); the host
// "localhost" is none.
func filePath(u *url.URL) (string, error) {
	if u == nil {
		return "", errors.New("no URL")
	}
	if !strings.EqualFold(u.Scheme, "file") {
		return "", fmt.Errorf("scheme %q, want file", u.Scheme)
	}
	path := u.Path
	if u.Host != "" && u.Host != "localhost" {
		path = filepath.Join(u.Host, u.Path) // file://relative/path
	}
	if path == "" {
		return "", errors.New("no file path")
	}
	if err := coord.CheckParams(u); err != nil {
		return "", err
	}
	return path, nil
}

// openInDir locks the data directory of path, shared with its other users
// (datadir.Open), and opens the file of kind through the directory's marker
// (datadir.Dir.Use): open runs unless the marker lists the file and it is
// gone, and a file it opened is recorded. The directory stays locked until
// the returned Dir is closed, so that `flakeid recover` cannot run beside
// the store.
func openInDir(path, kind string, open func() error) (*datadir.Dir, error) {
	d, err := datadir.Open(filepath.Dir(path))
	if err != nil {
		return nil, err
	}
	if err := d.Use(filepath.Base(path), kind, open); err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}
