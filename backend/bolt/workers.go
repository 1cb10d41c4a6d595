package bolt

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	bbolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/flakeid/flakeid/backend/internal/coord"
	"github.com/flakeid/flakeid/internal/datadir"
	"github.com/flakeid/flakeid/worker"
	"github.com/flakeid/flakeid/worker/protocol"
)

// The package's sentinel errors.
var (
	// ErrDamaged means a state file is damaged or gone: empty, shorter than
	// its header says, without a valid header, failing bbolt's consistency
	// check, or deleted while in use. Reusing it, or starting afresh in its
	// place, could reissue IDs; the error says what was found and how to
	// recover (`flakeid recover`, docs/OPERATIONS.md).
	ErrDamaged = errors.New("bolt: state file damaged")
)

// DefaultLockWait is how long an operation waits for another process's file
// lock when its context has no deadline.
const DefaultLockWait = 5 * time.Second

// The buckets of the worker coordinator.
const (
	// workersBucket holds one record per (datacenter, worker id).
	workersBucket = "workers"
	// namespaceBucket holds one namespace record per datacenter.
	namespaceBucket = "namespace"
	// recoveryBucket holds the floor `flakeid recover` set.
	recoveryBucket = "recovery"
	// registryBucket holds the file's ID space under spaceKey.
	registryBucket = "registry"
)

// spaceKey is the key of the ID space (worker.Request.Space) in
// registryBucket.
const spaceKey = "space"

// workerFloorKey is the key of the worker coordinator's floor in
// recoveryBucket (segmentFloorKey is the segment store's).
const workerFloorKey = "worker_floor"

// Workers is a worker.Coordinator over a bbolt file (see the package doc).
// It opens the file for each operation; what it holds between operations
// is its data directory's lock, which Close releases.
type Workers struct {
	path string
	now  func() time.Time

	// mu is held shared by every operation and exclusively by Close, so
	// that the directory stays locked until the operations in progress
	// have ended and none starts after.
	mu     sync.RWMutex
	closed bool
	dir    *datadir.Dir // locked shared; nil when opened for a recovery

	driver *protocol.Driver // the lease protocol, over fileStore{w}
}

var (
	_ worker.Coordinator = (*Workers)(nil)
	_ worker.MarkLowerer = (*Workers)(nil)
)

// openWorkers returns a coordinator that keeps its slots in the bbolt file
// at path. A missing file is created (complete, under a temporary name
// first, so that a crash never leaves an empty or half-written file at
// path); an existing one is checked before bbolt maps it — its size and
// both meta pages, then, for files up to 64 MiB, every page through bbolt's
// consistency check — and refused with an error wrapping ErrDamaged when it
// is empty, shorter than its header says, or corrupt. Later operations open
// the file again, check its header again, and never create it: a file
// deleted while in use is an error, not a new, empty coordinator.
func openWorkers(ctx context.Context, path string) (*Workers, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("%w: creating the directory of %s: %w", worker.ErrUnavailable, path, err)
	}
	if err := prepareFile(ctx, path); err != nil {
		if errors.Is(err, ErrDamaged) {
			return nil, err
		}
		return nil, fmt.Errorf("%w: %w", worker.ErrUnavailable, err)
	}
	w := &Workers{path: path, now: time.Now}
	w.driver = protocol.New(fileStore{w})
	if err := w.update(ctx, func(tx *bbolt.Tx) error {
		for _, name := range []string{workersBucket, namespaceBucket} {
			if _, err := tx.CreateBucketIfNotExists([]byte(name)); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return nil, err
	}
	return w, nil
}

// Close releases the data directory's lock (a Workers opened for a
// recovery holds none), after waiting for the operations in progress; an
// operation after Close fails with worker.ErrUnavailable. Claims acquired
// through w are not released: release them first.
func (w *Workers) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	w.closed = true
	if w.dir == nil {
		return nil
	}
	return w.dir.Close()
}

func key(dc, id int64) []byte {
	var k [16]byte
	binary.BigEndian.PutUint64(k[:8], uint64(dc))
	binary.BigEndian.PutUint64(k[8:], uint64(id))
	return k[:]
}

func dcKey(dc int64) []byte { return key(dc, 0)[:8] }

// open opens the file for one operation; the caller holds w.mu shared.
func (w *Workers) open(ctx context.Context) (*bbolt.DB, error) {
	if w.closed {
		return nil, fmt.Errorf("%w: %s: the coordinator is closed", worker.ErrUnavailable, w.path)
	}
	wait := DefaultLockWait
	if d, ok := ctx.Deadline(); ok {
		wait = time.Until(d)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if wait <= 0 {
		return nil, fmt.Errorf("%w: %s: %w", worker.ErrUnavailable, w.path, context.DeadlineExceeded)
	}
	if _, err := checkHeader(w.path); err != nil {
		if errors.Is(err, ErrDamaged) {
			return nil, err
		}
		return nil, fmt.Errorf("%w: %w", worker.ErrUnavailable, err)
	}
	db, err := openGuarded(w.path, &bbolt.Options{Timeout: wait})
	if err != nil {
		if errors.Is(err, ErrDamaged) {
			return nil, err
		}
		if errors.Is(err, bolterrors.ErrTimeout) {
			return nil, fmt.Errorf("%w: %s is locked by another process for longer than %v", worker.ErrUnavailable, w.path, wait.Round(time.Millisecond))
		}
		return nil, fmt.Errorf("%w: opening %s: %w", worker.ErrUnavailable, w.path, err)
	}
	return db, nil
}

func (w *Workers) update(ctx context.Context, fn func(*bbolt.Tx) error) error {
	return w.tx(ctx, (*bbolt.DB).Update, fn)
}

func (w *Workers) view(ctx context.Context, fn func(*bbolt.Tx) error) error {
	return w.tx(ctx, (*bbolt.DB).View, fn)
}

// tx opens the file, runs fn in a transaction of kind (DB.Update or
// DB.View) and closes the file.
func (w *Workers) tx(ctx context.Context, kind func(*bbolt.DB, func(*bbolt.Tx) error) error, fn func(*bbolt.Tx) error) (err error) {
	w.mu.RLock()
	defer w.mu.RUnlock()
	db, err := w.open(ctx)
	if err != nil {
		return err
	}
	defer onFault(w.path, &err)()
	defer db.Close()
	return kind(db, fn)
}

// buckets returns the slot and namespace buckets of tx, creating them in a
// writable transaction (a file emptied under a running coordinator has
// none); in a read-only one a missing bucket is nil.
func buckets(tx *bbolt.Tx) (slots, ns *bbolt.Bucket, err error) {
	if !tx.Writable() {
		return tx.Bucket([]byte(workersBucket)), tx.Bucket([]byte(namespaceBucket)), nil
	}
	if slots, err = tx.CreateBucketIfNotExists([]byte(workersBucket)); err != nil {
		return nil, nil, err
	}
	ns, err = tx.CreateBucketIfNotExists([]byte(namespaceBucket))
	return slots, ns, err
}

// Acquire implements worker.Coordinator (see protocol.Driver).
func (w *Workers) Acquire(ctx context.Context, req worker.Request) (worker.Claim, error) {
	return w.driver.Acquire(ctx, req)
}

// List implements worker.Coordinator.
func (w *Workers) List(ctx context.Context, dc int64) ([]worker.Info, error) {
	return w.driver.List(ctx, dc)
}

// Namespace implements worker.Coordinator.
func (w *Workers) Namespace(ctx context.Context, dc int64) (worker.Namespace, bool, error) {
	return w.driver.Namespace(ctx, dc)
}

// Clock implements worker.Coordinator: this machine's clock, which is the
// file's.
func (w *Workers) Clock(ctx context.Context, req worker.Request) (time.Time, time.Duration, error) {
	return w.driver.Clock(ctx, req)
}

// LowerMark implements worker.MarkLowerer. A holder whose process on this
// host is gone does not hold the id.
func (w *Workers) LowerMark(ctx context.Context, dc, id int64, to time.Time) (time.Time, error) {
	return w.driver.LowerMark(ctx, dc, id, to)
}

// fileStore is the file as a protocol.Store: one namespace, which claims every
// datacenter; Commit re-reads the datacenter in its transaction and writes
// only if it is what Read saw.
type fileStore struct{ w *Workers }

func (s fileStore) Names() protocol.Names {
	return protocol.Names{Registry: "the file " + s.w.path, Namespace: s.w.path, Place: s.w.path, Store: "the file"}
}

// HolderGone implements protocol.HolderChecker.
func (fileStore) HolderGone(owner string) bool { return holderGone(owner) }

func (s fileStore) Read(ctx context.Context, dc int64) (st protocol.State, err error) {
	err = s.w.view(ctx, func(tx *bbolt.Tx) error {
		st, err = s.read(tx, dc)
		return err
	})
	return st, err
}

func (s fileStore) Commit(ctx context.Context, read, next protocol.State) error {
	return s.w.update(ctx, func(tx *bbolt.Tx) error {
		cur, err := s.read(tx, read.Datacenter)
		if err != nil {
			return err
		}
		if !protocol.Same(cur, read) {
			return protocol.ErrConflict
		}
		if next.HasSpace && !read.HasSpace {
			rb, err := tx.CreateBucketIfNotExists([]byte(registryBucket))
			if err != nil {
				return err
			}
			if err := rb.Put([]byte(spaceKey), []byte(next.Space)); err != nil {
				return err
			}
		}
		slots, nsb, err := buckets(tx)
		if err != nil {
			return err
		}
		if next.Record != nil && (read.Record == nil || *next.Record != *read.Record) {
			if err := nsb.Put(dcKey(read.Datacenter), next.Record.Encode()); err != nil {
				return err
			}
		}
		for id, sl := range next.Slots {
			if old, ok := read.Slots[id]; ok && old == sl {
				continue
			}
			v, err := json.Marshal(sl)
			if err != nil {
				return err
			}
			if err := slots.Put(key(read.Datacenter, id), v); err != nil {
				return err
			}
		}
		return nil
	})
}

// read reads datacenter dc in tx: the space, the namespace record, the
// slots and the recovery floor, by this machine's clock.
func (s fileStore) read(tx *bbolt.Tx, dc int64) (protocol.State, error) {
	st := protocol.State{Datacenter: dc, Now: s.w.now().Round(0), Claim: protocol.Claim{Namespace: s.w.path},
		Slots: map[int64]protocol.Slot{}, FloorMs: recoveryFloor(tx)}
	if rb := tx.Bucket([]byte(registryBucket)); rb != nil {
		if v := rb.Get([]byte(spaceKey)); v != nil {
			st.Space, st.HasSpace = string(v), true
		}
	}
	if nsb := tx.Bucket([]byte(namespaceBucket)); nsb != nil {
		if v := nsb.Get(dcKey(dc)); v != nil {
			r, err := coord.ParseRecord(fmt.Sprintf("%s: namespace record of datacenter %d", s.w.path, dc), v)
			if err != nil {
				return st, err
			}
			st.Record = &r
		}
	}
	b := tx.Bucket([]byte(workersBucket))
	if b == nil {
		return st, nil
	}
	cur := b.Cursor()
	prefix := dcKey(dc)
	for k, v := cur.Seek(prefix); k != nil && string(k[:8]) == string(prefix); k, v = cur.Next() {
		id := int64(binary.BigEndian.Uint64(k[8:]))
		var sl protocol.Slot
		if err := json.Unmarshal(v, &sl); err != nil {
			return st, fmt.Errorf("%w: %s: corrupt record of worker %d/%d: %q", worker.ErrUnavailable, s.w.path, dc, id, v)
		}
		st.Slots[id] = sl
	}
	return st, nil
}

// holderGone reports whether owner ("host/pid/…", worker.Config's default
// form) names a process of this host that no longer exists.
func holderGone(owner string) bool {
	parts := strings.SplitN(owner, "/", 3)
	if len(parts) < 3 {
		return false
	}
	host, err := os.Hostname()
	if err != nil || parts[0] != host {
		return false
	}
	pid, err := strconv.Atoi(parts[1])
	if err != nil || pid <= 0 || pid == os.Getpid() {
		return false
	}
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}
