package bolt

import (
	"context"
	"errors"
	"fmt"
	"time"

	bbolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/flakeid/flakeid/segment"
)

// lockSlice is how long one attempt to take another process's file lock
// lasts before the context is looked at again.
const lockSlice = 100 * time.Millisecond

func (s *Segments) update(ctx context.Context, fn func(*bbolt.Tx) error) error {
	return s.run(ctx, true, fn)
}

func (s *Segments) view(ctx context.Context, fn func(*bbolt.Tx) error) error {
	return s.run(ctx, false, fn)
}

// run runs fn in a transaction, writable or not, and wraps what fails in
// segment.ErrUnavailable.
func (s *Segments) run(ctx context.Context, writable bool, fn func(*bbolt.Tx) error) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return fmt.Errorf("%w: %s: the store is closed", segment.ErrUnavailable, s.file)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w: %s: %w", segment.ErrUnavailable, s.file, err)
	}
	err := s.tx(ctx, writable, fn)
	if err == nil || isStoreError(err) {
		return err
	}
	return fmt.Errorf("%w: %s: %w", segment.ErrUnavailable, s.file, err)
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

// tx opens the file, runs fn in a transaction and closes the file, after
// waiting for its turn in the store's queue (gate).
func (s *Segments) tx(ctx context.Context, writable bool, fn func(*bbolt.Tx) error) (err error) {
	defer onFault(s.file, &err)()
	ctx, cancel := lockCtx(ctx)
	defer cancel()
	start := time.Now()
	select {
	case s.gate <- struct{}{}:
	case <-ctx.Done():
		return lockErr(ctx, s.file, "this process's turn at the file", time.Since(start))
	}
	defer func() { <-s.gate }()
	db, err := s.open(ctx, writable, start)
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
func (s *Segments) open(ctx context.Context, writable bool, start time.Time) (*bbolt.DB, error) {
	if _, err := checkHeader(s.file); err != nil {
		return nil, fmt.Errorf("%w: %w", segment.ErrUnavailable, err)
	}
	deadline, _ := ctx.Deadline()
	for {
		if ctx.Err() != nil {
			return nil, lockErr(ctx, s.file, "the file lock", time.Since(start))
		}
		slice := min(time.Until(deadline), lockSlice)
		if slice <= 0 {
			return nil, lockErr(ctx, s.file, "the file lock", time.Since(start))
		}
		var db *bbolt.DB
		err := guard(s.file, "opening it", func() (err error) {
			db, err = bbolt.Open(s.file, 0o600, &bbolt.Options{Timeout: slice, ReadOnly: !writable, OpenFile: openNoCreate})
			return err
		})
		if err == nil {
			return db, nil
		}
		if errors.Is(err, ErrDamaged) {
			return nil, fmt.Errorf("%w: %w", segment.ErrUnavailable, err)
		}
		if !errors.Is(err, bolterrors.ErrTimeout) {
			return nil, fmt.Errorf("%w: opening %s: %w", segment.ErrUnavailable, s.file, err)
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
