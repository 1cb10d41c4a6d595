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

func (w *Workers) getNS(b *bbolt.Bucket, dc int64) (coord.Record, bool, error) {
	if b == nil {
		return coord.Record{}, false, nil
	}
	v := b.Get(dcKey(dc))
	if v == nil {
		return coord.Record{}, false, nil
	}
	var r coord.Record
	if err := json.Unmarshal(v, &r); err != nil {
		return r, true, fmt.Errorf("%w: %s: corrupt namespace record of datacenter %d: %q: %w", worker.ErrUnavailable, w.path, dc, v, err)
	}
	return r, true, nil
}

func putNS(b *bbolt.Bucket, dc int64, r coord.Record) error {
	return b.Put(dcKey(dc), r.Encode())
}

// recoveryFloor is the floor `flakeid recover` stored in tx, 0 when none.
func recoveryFloor(tx *bbolt.Tx) int64 {
	b := tx.Bucket([]byte(recoveryBucket))
	if b == nil {
		return 0
	}
	v := b.Get([]byte(workerFloorKey))
	if v == nil {
		return 0
	}
	var f struct {
		FloorMs int64 `json:"floor_ms"`
	}
	_ = json.Unmarshal(v, &f) // a corrupt floor is no floor; the quarantine still applies
	return f.FloorMs
}

// Acquire implements worker.Coordinator.
func (w *Workers) Acquire(ctx context.Context, req worker.Request) (worker.Claim, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	incarnation := coord.NewIncarnation()
	var c *claim
	err := w.update(ctx, func(tx *bbolt.Tx) error {
		b, nsb, err := buckets(tx)
		if err != nil {
			return err
		}
		now := w.now().Round(0)
		nowMs := now.UnixMilli()
		ns, ok, err := w.getNS(nsb, req.Datacenter)
		if err != nil {
			return err
		}
		rb, err := tx.CreateBucketIfNotExists([]byte(registryBucket))
		if err != nil {
			return err
		}
		space := rb.Get([]byte(spaceKey))
		// One file is one namespace: it claims every datacenter.
		if err := worker.Admit(req, worker.Recorded{
			Registry: "the file " + w.path, Namespace: w.path,
			Space: string(space), HasSpace: space != nil,
			Contract: ns.Contract, Initialised: coord.MsTime(ns.InitialisedMs), HasRecord: ok,
		}); err != nil {
			return err
		}
		if err := req.MarkBound().Check("acquiring", req.Reserve, now); err != nil {
			return err
		}
		// The records of this datacenter, in worker order; an id without
		// one was never used.
		var slots []coord.Slot
		cur := b.Cursor()
		prefix := dcKey(req.Datacenter)
		for k, v := cur.Seek(prefix); k != nil && string(k[:8]) == string(prefix); k, v = cur.Next() {
			id := int64(binary.BigEndian.Uint64(k[8:]))
			if id >= req.Workers {
				break
			}
			var r record
			if err := json.Unmarshal(v, &r); err != nil {
				return fmt.Errorf("worker %d/%d: corrupt record: %w", req.Datacenter, id, err)
			}
			busy := r.Holder != "" && r.ExpiresMs > nowMs && !holderGone(r.Holder)
			slots = append(slots, coord.Slot{ID: id, Held: busy, HighMs: r.HighMs})
		}
		best, held, free := coord.Pick(slots, nil, req.Workers, nowMs)
		if !free {
			return fmt.Errorf("%w: all %d worker ids of datacenter %d are held", worker.ErrExhausted, held, req.Datacenter)
		}
		// Admitted: create what is missing, in this transaction.
		if space == nil {
			if err := rb.Put([]byte(spaceKey), []byte(req.Space)); err != nil {
				return err
			}
		}
		if !ok {
			// A new file, a file that lost its records, or slots of an
			// older flakeid: the slots are kept, their marks honoured.
			ns = coord.Record{Incarnation: incarnation, Contract: req.Contract, InitialisedMs: nowMs,
				FloorMs: max(nowMs+coord.CeilDurMs(req.Quarantine), recoveryFloor(tx))}
			if err := putNS(nsb, req.Datacenter, ns); err != nil {
				return err
			}
		}
		r, _, err := get(b, req.Datacenter, best)
		if err != nil {
			return err
		}
		prev := r.HighMs
		r.Holder = req.Owner
		r.ExpiresMs = nowMs + req.TTL.Milliseconds()
		r.HighMs = max(r.HighMs, coord.CeilMs(req.Reserve))
		if err := put(b, req.Datacenter, best, r); err != nil {
			return err
		}
		c = &claim{w: w, dc: req.Datacenter, id: best, owner: req.Owner, prev: coord.MsTime(max(prev, ns.FloorMs)),
			incarnation: ns.Incarnation, initMs: ns.InitialisedMs, contract: ns.Contract, quarantine: req.Quarantine,
			storedMs: r.HighMs, clock: now, leaseMs: r.ExpiresMs, bound: req.MarkBound()}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return c, nil
}

// List implements worker.Coordinator.
func (w *Workers) List(ctx context.Context, datacenter int64) ([]worker.Info, error) {
	infos := []worker.Info{}
	err := w.view(ctx, func(tx *bbolt.Tx) error {
		b := tx.Bucket([]byte(workersBucket))
		if b == nil {
			return nil
		}
		cur := b.Cursor()
		prefix := dcKey(datacenter)
		for k, v := cur.Seek(prefix); k != nil && string(k[:8]) == string(prefix); k, v = cur.Next() {
			var r record
			if err := json.Unmarshal(v, &r); err != nil {
				return fmt.Errorf("corrupt record %x: %w", k, err)
			}
			in := worker.Info{Datacenter: datacenter, Worker: int64(binary.BigEndian.Uint64(k[8:])), HighWater: coord.MsTime(r.HighMs)}
			if r.Holder != "" {
				in.Holder, in.Expires = r.Holder, coord.MsTime(r.ExpiresMs)
			}
			infos = append(infos, in)
		}
		return nil
	})
	return infos, err
}

// LowerMark implements worker.MarkLowerer, in one transaction. A holder
// whose process on this host is gone does not hold the id.
func (w *Workers) LowerMark(ctx context.Context, dc, id int64, to time.Time) (time.Time, error) {
	var from time.Time
	toMs := coord.CeilMs(to)
	err := w.update(ctx, func(tx *bbolt.Tx) error {
		b, _, err := buckets(tx)
		if err != nil {
			return err
		}
		r, _, err := get(b, dc, id)
		if err != nil {
			return err
		}
		info := worker.Info{Datacenter: dc, Worker: id, HighWater: coord.MsTime(r.HighMs)}
		if r.Holder != "" && !holderGone(r.Holder) {
			info.Holder, info.Expires = r.Holder, coord.MsTime(r.ExpiresMs)
		}
		if err := worker.CheckLowerMark(info, coord.MsTime(toMs), w.now()); err != nil {
			return err
		}
		from, r.HighMs = info.HighWater, toMs
		return put(b, dc, id, r)
	})
	return from, err
}

// Clock implements worker.Coordinator: this machine's clock, which is the
// file's.
func (w *Workers) Clock(context.Context, worker.Request) (time.Time, time.Duration, error) {
	return w.now().Round(0), 0, nil
}

// Namespace implements worker.Coordinator.
func (w *Workers) Namespace(ctx context.Context, datacenter int64) (worker.Namespace, bool, error) {
	var ns coord.Record
	var ok bool
	err := w.view(ctx, func(tx *bbolt.Tx) error {
		var err error
		ns, ok, err = w.getNS(tx.Bucket([]byte(namespaceBucket)), datacenter)
		return err
	})
	if err != nil || !ok {
		return worker.Namespace{}, false, err
	}
	return ns.Namespace(), true, nil
}

// RaiseFloor makes floor the lowest high-water mark of every worker id of
// every datacenter in the file: the namespace records there are raised to
// it, and one initialised later never starts below it. `flakeid recover`
// calls it on the file it re-creates.
func (w *Workers) RaiseFloor(ctx context.Context, floor time.Time) error {
	floorMs := coord.CeilMs(floor)
	return w.update(ctx, func(tx *bbolt.Tx) error {
		rb, err := tx.CreateBucketIfNotExists([]byte(recoveryBucket))
		if err != nil {
			return err
		}
		v, err := json.Marshal(struct {
			FloorMs int64 `json:"floor_ms"`
		}{max(floorMs, recoveryFloor(tx))})
		if err != nil {
			return err
		}
		if err := rb.Put([]byte(workerFloorKey), v); err != nil {
			return err
		}
		_, nsb, err := buckets(tx)
		if err != nil {
			return err
		}
		type raised struct {
			k []byte
			r coord.Record
		}
		var todo []raised
		err = nsb.ForEach(func(k, v []byte) error {
			var r coord.Record
			if err := json.Unmarshal(v, &r); err != nil {
				return fmt.Errorf("%s: corrupt namespace record %x: %w", w.path, k, err)
			}
			if r.FloorMs < floorMs {
				r.FloorMs = floorMs
				todo = append(todo, raised{append([]byte(nil), k...), r})
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, t := range todo {
			v, err := json.Marshal(t.r)
			if err != nil {
				return err
			}
			if err := nsb.Put(t.k, v); err != nil {
				return err
			}
		}
		return nil
	})
}

type claim struct {
	w      *Workers
	dc, id int64
	owner  string
	prev   time.Time

	// What the claim acquired under, and what it stored since.
	incarnation string
	initMs      int64
	contract    string
	quarantine  time.Duration
	storedMs    int64     // the highest mark this claim stored
	clock       time.Time // the coordinator's clock at the last Acquire or Renew
	// leaseMs is the end of the lease the coordinator granted at the last
	// successful Acquire or Renew (its clock then + that call's TTL, as
	// stored in the slot); 0 once released.
	leaseMs int64
	bound   worker.MarkBound // of the request: what a renewal may reserve
}

func (c *claim) WorkerID() int64     { return c.id }
func (c *claim) Previous() time.Time { return c.prev }

// Clock implements worker.Claim: this machine's clock, never stale.
func (c *claim) Clock() (time.Time, time.Duration) { return c.clock, 0 }

// change checks the namespace record and the slot (worker.Diagnose) and, if
// this owner still holds the slot, applies fn to it. A lost or rolled-back
// namespace is re-initialised (in the same transaction, committed) and
// reported with worker.ErrReset.
func (c *claim) change(ctx context.Context, renew bool, reserve time.Time, fn func(r *record, nowMs int64)) error {
	incarnation := coord.NewIncarnation()
	var reset error
	var stored, expires int64
	var clock time.Time
	err := c.w.update(ctx, func(tx *bbolt.Tx) error {
		b, nsb, err := buckets(tx)
		if err != nil {
			return err
		}
		now := c.w.now().Round(0)
		nowMs := now.UnixMilli()
		ns, ok, err := c.w.getNS(nsb, c.dc)
		if err != nil {
			return err
		}
		r, slotOK, err := get(b, c.dc, c.id)
		if err != nil {
			return err
		}
		found := worker.Found{Where: fmt.Sprintf("datacenter %d in %s", c.dc, c.w.path), Store: "the file", Now: coord.MsTime(nowMs)}
		if ok {
			found.Record = &worker.Namespace{Incarnation: ns.Incarnation, Contract: ns.Contract, Initialised: coord.MsTime(ns.InitialisedMs)}
		}
		if slotOK {
			found.Slot = &worker.Info{Datacenter: c.dc, Worker: c.id, Holder: r.Holder, Expires: coord.MsTime(r.ExpiresMs), HighWater: coord.MsTime(r.HighMs)}
		}
		d := worker.Diagnose(worker.Hold{Owner: c.owner, WorkerID: c.id, Incarnation: c.incarnation, Initialised: coord.MsTime(c.initMs),
			Stored: coord.MsTime(c.storedMs), LeaseEnd: coord.MsTime(c.leaseMs), OwnerGone: holderGone(c.owner)}, found)
		switch d.Verdict {
		case worker.Lost:
			fresh := coord.Record{Incarnation: incarnation, Contract: c.contract, InitialisedMs: nowMs,
				FloorMs: max(nowMs+coord.CeilDurMs(c.quarantine), recoveryFloor(tx))}
			if ok {
				fresh.Contract, fresh.FloorMs = ns.Contract, max(fresh.FloorMs, ns.FloorMs)
			}
			if err := putNS(nsb, c.dc, fresh); err != nil {
				return err
			}
			reset = fmt.Errorf("%w: %s; the namespace is re-initialised (incarnation %s): no worker id issues before %s",
				worker.ErrReset, d.Found, fresh.Incarnation, coord.FormatMs(fresh.FloorMs))
			return nil
		case worker.ResetBefore:
			reset = fmt.Errorf("%w: %s", worker.ErrReset, d.Found)
			return nil
		case worker.NotHeld:
			return fmt.Errorf("%w: %s", worker.ErrNotHeld, d.Found)
		}
		if renew {
			if err := c.bound.Check("renewing", reserve, now); err != nil {
				return err
			}
		}
		fn(&r, nowMs)
		stored, expires, clock = r.HighMs, r.ExpiresMs, now
		return put(b, c.dc, c.id, r)
	})
	if err != nil {
		return err
	}
	if reset != nil {
		return reset
	}
	c.storedMs = max(c.storedMs, stored)
	if renew {
		c.clock, c.leaseMs = clock, expires
	} else {
		c.leaseMs = 0 // released: the claim holds no lease any more
	}
	return nil
}

func (c *claim) Renew(ctx context.Context, ttl time.Duration, reserve time.Time) error {
	return c.change(ctx, true, reserve, func(r *record, nowMs int64) {
		r.ExpiresMs = nowMs + ttl.Milliseconds()
		r.HighMs = max(r.HighMs, coord.CeilMs(reserve))
	})
}

func (c *claim) Release(ctx context.Context, reserve time.Time) error {
	return c.change(ctx, false, reserve, func(r *record, _ int64) {
		r.Holder, r.ExpiresMs = "", 0
		r.HighMs = max(r.HighMs, coord.CeilMs(reserve))
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
