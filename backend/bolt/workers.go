// Package bolt keeps flakeid's state in embedded bbolt files: the worker-id
// coordinator for a single machine (Workers, the default of `flakeid next`
// and `flakeid serve`) and the segment store (Segments; see OpenSegments for
// the per-operation mode several processes share, and NewSegments for one
// process holding the file open).
//
// The worker coordinator opens the file for each operation and closes it
// again, so several processes on one machine share it safely: bbolt's file
// lock serialises them. Because every holder is on this machine, a lease
// whose holder process is gone (its owner token names this host and a
// process id that no longer exists, as worker.Config's default owner does)
// is free at once instead of after its TTL, so a node killed with -9
// restarts without waiting; the high-water mark still protects the IDs. The coordinator's clock is this machine's wall
// clock; a high-water mark persisted in the file is what makes a single node
// restarted after its clock went back never reissue an ID.
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
	"syscall"
	"time"

	bbolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/flakeid/flakeid/worker"
)

// DefaultLockWait is how long an operation waits for another process's file
// lock when its context has no deadline.
const DefaultLockWait = 5 * time.Second

// workersBucket holds one record per (datacenter, worker id).
const workersBucket = "workers"

// Workers is a worker.Coordinator over a bbolt file.
type Workers struct {
	path string
	now  func() time.Time
}

// OpenWorkers returns a coordinator that keeps its slots in the bbolt file at
// path, creating the file and its directory when missing. It checks that the
// file can be opened.
func OpenWorkers(ctx context.Context, path string) (*Workers, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("%w: creating the directory of %s: %w", worker.ErrUnavailable, path, err)
	}
	w := &Workers{path: path, now: time.Now}
	if err := w.update(ctx, func(tx *bbolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists([]byte(workersBucket))
		return err
	}); err != nil {
		return nil, err
	}
	return w, nil
}

// Path is the file's path.
func (w *Workers) Path() string { return w.path }

type record struct {
	Holder    string `json:"holder,omitempty"`
	ExpiresMs int64  `json:"expires_ms,omitempty"`
	HighMs    int64  `json:"high_water_ms,omitempty"`
}

func key(dc, id int64) []byte {
	var k [16]byte
	binary.BigEndian.PutUint64(k[:8], uint64(dc))
	binary.BigEndian.PutUint64(k[8:], uint64(id))
	return k[:]
}

func (w *Workers) open(ctx context.Context) (*bbolt.DB, error) {
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
	db, err := bbolt.Open(w.path, 0o600, &bbolt.Options{Timeout: wait})
	if err != nil {
		if errors.Is(err, bolterrors.ErrTimeout) {
			return nil, fmt.Errorf("%w: %s is locked by another process for longer than %v", worker.ErrUnavailable, w.path, wait.Round(time.Millisecond))
		}
		return nil, fmt.Errorf("%w: opening %s: %w", worker.ErrUnavailable, w.path, err)
	}
	return db, nil
}

func (w *Workers) update(ctx context.Context, fn func(*bbolt.Tx) error) error {
	db, err := w.open(ctx)
	if err != nil {
		return err
	}
	defer db.Close()
	return db.Update(fn)
}

func (w *Workers) view(ctx context.Context, fn func(*bbolt.Tx) error) error {
	db, err := w.open(ctx)
	if err != nil {
		return err
	}
	defer db.Close()
	return db.View(fn)
}

func get(b *bbolt.Bucket, dc, id int64) (record, bool, error) {
	v := b.Get(key(dc, id))
	if v == nil {
		return record{}, false, nil
	}
	var r record
	if err := json.Unmarshal(v, &r); err != nil {
		return r, true, fmt.Errorf("worker %d/%d: corrupt record %q: %w", dc, id, v, err)
	}
	return r, true, nil
}

func put(b *bbolt.Bucket, dc, id int64, r record) error {
	v, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return b.Put(key(dc, id), v)
}

// Acquire implements worker.Coordinator.
func (w *Workers) Acquire(ctx context.Context, req worker.Request) (worker.Claim, error) {
	if req.Workers < 1 || req.Datacenter < 0 || req.Owner == "" || req.TTL <= 0 {
		return nil, fmt.Errorf("%w: bad request %+v", worker.ErrInvalidConfig, req)
	}
	var c *claim
	err := w.update(ctx, func(tx *bbolt.Tx) error {
		b := tx.Bucket([]byte(workersBucket))
		nowMs := w.now().UnixMilli()
		// Walk the records of this datacenter in worker order; a gap in
		// the ids is a never-used slot.
		best, bestHigh, held := int64(-1), int64(0), int64(0)
		consider := func(id, high int64) {
			switch {
			case best < 0:
				best, bestHigh = id, high
			case bestHigh > nowMs && high < bestHigh:
				best, bestHigh = id, high // prefer a passed or lower mark
			}
		}
		next := int64(0) // the lowest id not yet seen
		cur := b.Cursor()
		prefix := key(req.Datacenter, 0)[:8]
		for k, v := cur.Seek(prefix); k != nil && string(k[:8]) == string(prefix); k, v = cur.Next() {
			id := int64(binary.BigEndian.Uint64(k[8:]))
			if id >= req.Workers {
				break
			}
			if next < id {
				consider(next, 0) // never used: its mark is zero
			}
			next = id + 1
			var r record
			if err := json.Unmarshal(v, &r); err != nil {
				return fmt.Errorf("worker %d/%d: corrupt record: %w", req.Datacenter, id, err)
			}
			if r.Holder != "" && r.ExpiresMs > nowMs && !holderGone(r.Holder) {
				held++
				continue
			}
			consider(id, r.HighMs)
		}
		if next < req.Workers {
			consider(next, 0)
		}
		if best < 0 {
			return fmt.Errorf("%w: all %d worker ids of datacenter %d are held", worker.ErrExhausted, held, req.Datacenter)
		}
		r, _, err := get(b, req.Datacenter, best)
		if err != nil {
			return err
		}
		prev := r.HighMs
		r.Holder = req.Owner
		r.ExpiresMs = nowMs + req.TTL.Milliseconds()
		r.HighMs = max(r.HighMs, req.Reserve.UnixMilli())
		if err := put(b, req.Datacenter, best, r); err != nil {
			return err
		}
		c = &claim{w: w, dc: req.Datacenter, id: best, owner: req.Owner, prev: msTime(prev)}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return c, nil
}

func msTime(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

// List implements worker.Coordinator.
func (w *Workers) List(ctx context.Context, datacenter int64) ([]worker.Info, error) {
	infos := []worker.Info{}
	err := w.view(ctx, func(tx *bbolt.Tx) error {
		cur := tx.Bucket([]byte(workersBucket)).Cursor()
		prefix := key(datacenter, 0)[:8]
		for k, v := cur.Seek(prefix); k != nil && string(k[:8]) == string(prefix); k, v = cur.Next() {
			var r record
			if err := json.Unmarshal(v, &r); err != nil {
				return fmt.Errorf("corrupt record %x: %w", k, err)
			}
			in := worker.Info{Datacenter: datacenter, Worker: int64(binary.BigEndian.Uint64(k[8:])), HighWater: msTime(r.HighMs)}
			if r.Holder != "" {
				in.Holder, in.Expires = r.Holder, msTime(r.ExpiresMs)
			}
			infos = append(infos, in)
		}
		return nil
	})
	return infos, err
}

type claim struct {
	w      *Workers
	dc, id int64
	owner  string
	prev   time.Time
}

func (c *claim) WorkerID() int64     { return c.id }
func (c *claim) Previous() time.Time { return c.prev }

// change applies fn to the record if this owner still holds it.
func (c *claim) change(ctx context.Context, fn func(r *record, nowMs int64)) error {
	return c.w.update(ctx, func(tx *bbolt.Tx) error {
		b := tx.Bucket([]byte(workersBucket))
		r, ok, err := get(b, c.dc, c.id)
		if err != nil {
			return err
		}
		nowMs := c.w.now().UnixMilli()
		if !ok || r.Holder != c.owner || r.ExpiresMs <= nowMs {
			return fmt.Errorf("%w: worker %d of datacenter %d is held by %q until %s", worker.ErrNotHeld,
				c.id, c.dc, r.Holder, msTime(r.ExpiresMs).Format(time.RFC3339Nano))
		}
		fn(&r, nowMs)
		return put(b, c.dc, c.id, r)
	})
}

func (c *claim) Renew(ctx context.Context, ttl time.Duration, reserve time.Time) error {
	return c.change(ctx, func(r *record, nowMs int64) {
		r.ExpiresMs = nowMs + ttl.Milliseconds()
		r.HighMs = max(r.HighMs, reserve.UnixMilli())
	})
}

func (c *claim) Release(ctx context.Context, reserve time.Time) error {
	return c.change(ctx, func(r *record, _ int64) {
		r.Holder, r.ExpiresMs = "", 0
		r.HighMs = max(r.HighMs, reserve.UnixMilli())
	})
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
