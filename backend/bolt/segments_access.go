package bolt

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	bbolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/flakeid/flakeid/segment"
)

// lockSlice is how long one attempt to take another process's file lock
// lasts before the context is looked at again.
const lockSlice = 100 * time.Millisecond

// gates holds one in-process queue (a channel of capacity one) per file
// path, shared by every per-operation client of that path in this process,
// so that they wait for each other on a channel instead of polling bbolt's
// file lock (which bbolt retries every 50ms). Clients reaching one file by
// different paths (links) are still serialised by the file lock, only more
// slowly.
var gates sync.Map // absolute path → chan struct{}

func (s *Segments) update(ctx context.Context, fn func(*bbolt.Tx) error) error {
	return s.run(ctx, true, false, fn)
}

func (s *Segments) view(ctx context.Context, fn func(*bbolt.Tx) error) error {
	return s.run(ctx, false, false, fn)
}

// access is how a Segments reaches its file, one of the two modes (see
// Segments): fileAccess opens it per operation, heldAccess uses a DB the
// caller keeps open.
type access interface {
	// tx runs fn in a transaction, writable or not; create lets a
	// per-operation open create the file.
	tx(ctx context.Context, writable, create bool, fn func(*bbolt.Tx) error) error
	// path is the file's path.
	path() string
}

// fileAccess opens the file for each operation (OpenSegments).
type fileAccess struct {
	file string
	gate chan struct{} // this process's queue for file (see gates)
}

func (a *fileAccess) path() string { return a.file }

// heldAccess works on a DB the caller opened and keeps open (NewSegments).
type heldAccess struct{ db *bbolt.DB }

func (a *heldAccess) path() string { return a.db.Path() }

func (a *heldAccess) tx(ctx context.Context, writable, _ bool, fn func(*bbolt.Tx) error) error {
	if !writable {
		return a.db.View(fn) // readers never wait for a writer in bbolt
	}
	return a.update(ctx, fn)
}

// run runs fn in a transaction, writable or not, and wraps what fails in
// segment.ErrUnavailable. create lets a per-operation open create the file.
func (s *Segments) run(ctx context.Context, writable, create bool, fn func(*bbolt.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w: %s: %w", segment.ErrUnavailable, s.Path(), err)
	}
	err := s.acc.tx(ctx, writable, create, fn)
	if err == nil || isStoreError(err) {
		return err
	}
	return fmt.Errorf("%w: %s: %w", segment.ErrUnavailable, s.Path(), err)
}

// isStoreError reports whether err already carries one of segment's
// sentinels (a refusal or an ErrUnavailable made here).
func isStoreError(err error) bool {
	for _, e := range []error{segment.ErrUnknownTag, segment.ErrTagExists, segment.ErrInvalidTag,
		segment.ErrInvalidCount, segment.ErrUnavailable, segment.ErrExhausted} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// lockCtx bounds ctx by DefaultLockWait when it has no deadline.
func lockCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, DefaultLockWait)
}

// lockErr is the error of a wait for a lock of the file path that ctx ended.
func lockErr(ctx context.Context, path, what string, waited time.Duration) error {
	if errors.Is(ctx.Err(), context.Canceled) {
		return fmt.Errorf("%w: %s: waiting for %s: %w", segment.ErrUnavailable, path, what, ctx.Err())
	}
	return fmt.Errorf("%w: %s: %s not had within %v: %w", segment.ErrUnavailable, path, what,
		waited.Round(time.Millisecond), context.DeadlineExceeded)
}

// update runs fn in a write transaction of the open DB. bbolt's writer
// lock cannot be waited for with a context, so the transaction is begun on a
// goroutine; when ctx ends first, that goroutine rolls back the transaction
// it eventually gets.
func (a *heldAccess) update(ctx context.Context, fn func(*bbolt.Tx) error) error {
	ctx, cancel := lockCtx(ctx)
	defer cancel()
	start := time.Now()
	type begun struct {
		tx  *bbolt.Tx
		err error
	}
	ch := make(chan begun, 1)
	go func() {
		tx, err := a.db.Begin(true)
		ch <- begun{tx, err}
	}()
	var tx *bbolt.Tx
	select {
	case b := <-ch:
		if b.err != nil {
			return b.err
		}
		tx = b.tx
	case <-ctx.Done():
		go func() {
			if b := <-ch; b.tx != nil {
				_ = b.tx.Rollback()
			}
		}()
		return lockErr(ctx, a.path(), "the database's write lock", time.Since(start))
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

// tx opens the file, runs fn in a transaction and closes the file.
func (a *fileAccess) tx(ctx context.Context, writable, create bool, fn func(*bbolt.Tx) error) (err error) {
	defer onFault(a.file, &err)()
	ctx, cancel := lockCtx(ctx)
	defer cancel()
	start := time.Now()
	select {
	case a.gate <- struct{}{}:
	case <-ctx.Done():
		return lockErr(ctx, a.file, "this process's turn at the file", time.Since(start))
	}
	defer func() { <-a.gate }()
	db, err := a.open(ctx, writable, create, start)
	if err != nil {
		return err
	}
	// A failed close after a commit loses nothing: the data is on disk.
	defer db.Close()
	if writable {
		return db.Update(fn)
	}
	return db.View(fn)
}

// open opens the file, waiting for other processes' locks in slices so that
// a cancelled context is noticed.
func (a *fileAccess) open(ctx context.Context, writable, create bool, start time.Time) (*bbolt.DB, error) {
	if _, err := checkHeader(a.file); err != nil {
		return nil, fmt.Errorf("%w: %w", segment.ErrUnavailable, err)
	}
	deadline, _ := ctx.Deadline()
	openFile := func(name string, flag int, perm os.FileMode) (*os.File, error) {
		if !create {
			flag &^= os.O_CREATE
		}
		return os.OpenFile(name, flag, perm)
	}
	for {
		if ctx.Err() != nil {
			return nil, lockErr(ctx, a.file, "the file lock", time.Since(start))
		}
		slice := min(time.Until(deadline), lockSlice)
		if slice <= 0 {
			return nil, lockErr(ctx, a.file, "the file lock", time.Since(start))
		}
		var db *bbolt.DB
		err := guard(a.file, "opening it", func() (err error) {
			db, err = bbolt.Open(a.file, 0o600, &bbolt.Options{Timeout: slice, ReadOnly: !writable, OpenFile: openFile})
			return err
		})
		if err == nil {
			return db, nil
		}
		if errors.Is(err, ErrDamaged) {
			return nil, fmt.Errorf("%w: %w", segment.ErrUnavailable, err)
		}
		if !errors.Is(err, bolterrors.ErrTimeout) {
			return nil, fmt.Errorf("%w: opening %s: %w", segment.ErrUnavailable, a.file, err)
		}
		if slice < lockSlice {
			// bbolt gives up at once on a timeout under its poll interval;
			// wait out the rest here rather than spin.
			t := time.NewTimer(min(time.Until(deadline), 10*time.Millisecond))
			select {
			case <-ctx.Done():
			case <-t.C:
			}
			t.Stop()
		}
	}
}
