package bolt

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sync"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/flakeid/flakeid/internal/datadir"
	"github.com/flakeid/flakeid/segment"
)

// segmentsBucket holds one record per tag, keyed by the tag's name (so a
// cursor walks the tags in name order).
const segmentsBucket = "segments"

// Segments is a segment.Store over a bbolt file: the embedded, single-node
// store.
//
// It opens the file for each operation and closes it again, as Workers
// does: several processes on one machine (several `flakeid next` runs, or
// servers sharing a data directory) share the file safely, bbolt's file
// lock serialising them, and the file may be the worker coordinator's own.
// Each operation pays an open, an mmap and, for a change, an fsync; the
// goroutines using one Segments queue in memory for the file instead of
// polling its lock. What it holds between operations is its data
// directory's lock, which Close releases.
//
// The tags are in the bucket "segments": the key is the tag's name, the
// value a JSON record {"max_id", "step", "description", "update_time_ms"}.
// The bucket "recovery" may hold the floor `flakeid recover` set
// ({"max_id"} under "segment_floor", see RaiseFloor): no tag created in the
// file starts below it.
//
// A file that is empty, shorter than its header says or corrupt is refused
// when the store is opened, and at every later open, with an error wrapping
// ErrDamaged (see the package doc) — never a crash, never a new, empty
// store.
//
// A Fetch is one read-write transaction (read max_id, check it, write
// max_id+n) committed with an fsync before the range is returned, so a
// range is never handed out twice, across processes and restarts.
//
// The context's deadline bounds the wait for a lock (DefaultLockWait when it
// has none); a cancelled context fails at once. A lock not had in time, a
// file that cannot be opened or written, a corrupt record and a call after
// Close are errors wrapping segment.ErrUnavailable.
type Segments struct {
	file string // absolute
	// gate is this store's queue for the file (a channel of capacity one):
	// its goroutines wait for each other here rather than all polling
	// bbolt's file lock, which bbolt retries every 50ms. Other stores of
	// the file, in this process or another, are serialised by the file
	// lock.
	gate chan struct{}
	now  func() time.Time

	// mu is held shared by every operation and exclusively by Close, so
	// that the directory stays locked until the operations in progress
	// have ended and none starts after.
	mu     sync.RWMutex
	closed bool
	dir    *datadir.Dir // locked shared; nil when opened for a recovery
}

// openSegments returns a store that keeps its tags in the bbolt file at
// path (see Segments). It creates the file and its directory when missing;
// afterwards a missing file is an error rather than a new, empty store, so
// that losing the file never starts the tags over. An existing file is
// checked as openWorkers checks its file, and refused with an error
// wrapping ErrDamaged when it is damaged.
func openSegments(ctx context.Context, path string) (*Segments, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", segment.ErrUnavailable, path, err)
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o700); err != nil {
		return nil, fmt.Errorf("%w: creating the directory of %s: %w", segment.ErrUnavailable, path, err)
	}
	if err := prepareFile(ctx, abs); err != nil {
		if errors.Is(err, ErrDamaged) {
			return nil, fmt.Errorf("%w: %w", segment.ErrUnavailable, err)
		}
		return nil, fmt.Errorf("%w: %s: %w", segment.ErrUnavailable, path, err)
	}
	s := &Segments{file: abs, gate: make(chan struct{}, 1), now: time.Now}
	err = s.update(ctx, func(tx *bbolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists([]byte(segmentsBucket))
		return err
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}

// Close releases the data directory's lock (a Segments opened for a
// recovery holds none), after waiting for the operations in progress; an
// operation after Close fails with segment.ErrUnavailable.
func (s *Segments) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	if s.dir == nil {
		return nil
	}
	return s.dir.Close()
}

// segRecord is a tag's value in the bucket; the name is the key.
type segRecord struct {
	MaxID       int64  `json:"max_id"`
	Step        int64  `json:"step"`
	Description string `json:"description,omitempty"`
	UpdatedMs   int64  `json:"update_time_ms,omitempty"`
	// Delta and Remainder are the tag's share of the IDs (segment.Range);
	// absent for every ID.
	Delta     int64 `json:"delta,omitempty"`
	Remainder int64 `json:"remainder,omitempty"`
	// Deleted marks a tag Delete took out of service; the record stays for
	// its max_id.
	Deleted bool `json:"deleted,omitempty"`
}

// rawRecord tells a missing field from a zero one.
type rawRecord struct {
	MaxID       *int64 `json:"max_id"`
	Step        *int64 `json:"step"`
	Description string `json:"description"`
	UpdatedMs   int64  `json:"update_time_ms"`
	Delta       int64  `json:"delta"`
	Remainder   int64  `json:"remainder"`
	Deleted     bool   `json:"deleted"`
}

func (s *Segments) corrupt(name string, v []byte, why string) error {
	return fmt.Errorf("%w: %s: corrupt record of tag %q in bucket %q: %s: %.200q",
		segment.ErrUnavailable, s.file, name, segmentsBucket, why, v)
}

// decode reads a tag's record, checking it is one this store could have
// written; a deleted tag's record is ErrUnknownTag.
func (s *Segments) decode(name string, v []byte) (segment.Tag, error) {
	t, deleted, err := s.decodeRecord(name, v)
	if err == nil && deleted {
		return segment.Tag{}, fmt.Errorf("%w: %q was deleted (its max_id %d is kept: creating it again continues above)", segment.ErrUnknownTag, name, t.MaxID)
	}
	return t, err
}

// decodeRecord is decode telling a deleted tag's record (and its row) apart.
func (s *Segments) decodeRecord(name string, v []byte) (segment.Tag, bool, error) {
	if v == nil {
		return segment.Tag{}, false, s.corrupt(name, v, "a nested bucket, not a record")
	}
	if err := segment.ValidName(name); err != nil {
		return segment.Tag{}, false, s.corrupt(name, v, err.Error())
	}
	var r rawRecord
	if err := json.Unmarshal(v, &r); err != nil {
		return segment.Tag{}, false, s.corrupt(name, v, err.Error())
	}
	switch {
	case r.MaxID == nil || r.Step == nil:
		return segment.Tag{}, false, s.corrupt(name, v, "max_id or step missing")
	case *r.MaxID < 0:
		return segment.Tag{}, false, s.corrupt(name, v, fmt.Sprintf("max_id %d < 0", *r.MaxID))
	case *r.Step < 1 || *r.Step > segment.MaxStep:
		return segment.Tag{}, false, s.corrupt(name, v, fmt.Sprintf("step %d out of 1–%d", *r.Step, segment.MaxStep))
	case r.Delta < 0 || r.Delta > segment.MaxStep || r.Remainder < 0 || r.Remainder >= max(r.Delta, 1):
		return segment.Tag{}, false, s.corrupt(name, v, fmt.Sprintf("delta %d and remainder %d, want a delta of 1–%d and a remainder below it", r.Delta, r.Remainder, segment.MaxStep))
	}
	t := segment.Tag{Name: name, MaxID: *r.MaxID, Step: *r.Step, Description: r.Description, Delta: r.Delta, Remainder: r.Remainder}
	if r.UpdatedMs != 0 {
		t.Updated = time.UnixMilli(r.UpdatedMs).UTC()
	}
	return t, r.Deleted, nil
}

func putTag(b *bbolt.Bucket, t segment.Tag) error {
	return putRecord(b, t, false)
}

// putRecord writes a tag's record, deleted or not.
func putRecord(b *bbolt.Bucket, t segment.Tag, deleted bool) error {
	rec := segRecord{MaxID: t.MaxID, Step: t.Step, Description: t.Description, UpdatedMs: t.Updated.UnixMilli(), Deleted: deleted}
	if t.Delta > 1 {
		rec.Delta, rec.Remainder = t.Delta, t.Remainder
	}
	v, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	return b.Put([]byte(t.Name), v)
}

// load returns the tag's row from b (which may be nil: no bucket, no tags).
func (s *Segments) load(b *bbolt.Bucket, name string) (segment.Tag, error) {
	var v []byte
	if b != nil {
		v = b.Get([]byte(name))
	}
	if v == nil {
		if b != nil && b.Bucket([]byte(name)) != nil {
			return segment.Tag{}, s.corrupt(name, nil, "a nested bucket, not a record")
		}
		return segment.Tag{}, fmt.Errorf("%w: %q", segment.ErrUnknownTag, name)
	}
	return s.decode(name, v)
}

// Fetch implements segment.Store: one read-write transaction advances the
// tag's max_id by n.
func (s *Segments) Fetch(ctx context.Context, tag string, n int64) (segment.Range, error) {
	if err := segment.ValidName(tag); err != nil {
		return segment.Range{}, err
	}
	if n < 1 {
		return segment.Range{}, fmt.Errorf("%w: fetch of %d IDs of tag %q, want at least 1", segment.ErrInvalidCount, n, tag)
	}
	var r segment.Range
	err := s.update(ctx, func(tx *bbolt.Tx) error {
		b := tx.Bucket([]byte(segmentsBucket))
		t, err := s.load(b, tag)
		if err != nil {
			return err
		}
		if t.MaxID > math.MaxInt64-n {
			return fmt.Errorf("%w: tag %q at %d cannot take %d more IDs", segment.ErrExhausted, tag, t.MaxID, n)
		}
		r = segment.Range{Start: t.MaxID, End: t.MaxID + n, Delta: t.Delta, Remainder: t.Remainder}
		t.MaxID, t.Updated = r.End, s.now()
		return putTag(b, t)
	})
	if err != nil {
		return segment.Range{}, err
	}
	return r, nil
}

// Get implements segment.Store.
func (s *Segments) Get(ctx context.Context, tag string) (segment.Tag, error) {
	if err := segment.ValidName(tag); err != nil {
		return segment.Tag{}, err
	}
	var t segment.Tag
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		var err error
		t, err = s.load(tx.Bucket([]byte(segmentsBucket)), tag)
		return err
	})
	return t, err
}

// List implements segment.Store: bbolt keeps the keys in byte order, which
// is the order of the names.
func (s *Segments) List(ctx context.Context) ([]segment.Tag, error) {
	tags := []segment.Tag{}
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		b := tx.Bucket([]byte(segmentsBucket))
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			t, deleted, err := s.decodeRecord(string(k), v)
			if err != nil {
				return err
			}
			if !deleted {
				tags = append(tags, t)
			}
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	return tags, nil
}

// Create implements segment.Store.
func (s *Segments) Create(ctx context.Context, t segment.Tag) error {
	if err := segment.ValidateTag(t); err != nil {
		return err
	}
	if t.MaxID == 0 {
		t.MaxID = 1
	}
	return s.update(ctx, func(tx *bbolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists([]byte(segmentsBucket))
		if err != nil {
			return err
		}
		if v := b.Get([]byte(t.Name)); v != nil {
			old, deleted, err := s.decodeRecord(t.Name, v)
			if err != nil || !deleted { // a record, live or damaged, is never written over
				return fmt.Errorf("%w: %q", segment.ErrTagExists, t.Name)
			}
			if err := segment.SameShare(old, t); err != nil {
				return err
			}
			t.MaxID = max(t.MaxID, old.MaxID) // continues above what it handed out
		} else if b.Bucket([]byte(t.Name)) != nil {
			return fmt.Errorf("%w: %q", segment.ErrTagExists, t.Name)
		}
		t.Updated = s.now()
		t.MaxID = max(t.MaxID, segmentFloor(tx))
		return putTag(b, t)
	})
}

// Update implements segment.Store. With both pointers nil it only checks
// that the tag exists.
func (s *Segments) Update(ctx context.Context, tag string, step *int64, description *string) error {
	if err := segment.ValidName(tag); err != nil {
		return err
	}
	if step != nil && (*step < 1 || *step > segment.MaxStep) {
		return fmt.Errorf("%w: tag %q: step %d, want 1–%d", segment.ErrInvalidTag, tag, *step, segment.MaxStep)
	}
	if description != nil && len(*description) > 256 {
		return fmt.Errorf("%w: tag %q: description of %d bytes, want at most 256", segment.ErrInvalidTag, tag, len(*description))
	}
	return s.update(ctx, func(tx *bbolt.Tx) error {
		b := tx.Bucket([]byte(segmentsBucket))
		t, err := s.load(b, tag)
		if err != nil || (step == nil && description == nil) {
			return err
		}
		if step != nil {
			t.Step = *step
		}
		if description != nil {
			t.Description = *description
		}
		t.Updated = s.now()
		return putTag(b, t)
	})
}

// Delete implements segment.Store: the record stays, marked deleted, with
// its max_id.
func (s *Segments) Delete(ctx context.Context, tag string) error {
	if err := segment.ValidName(tag); err != nil {
		return err
	}
	return s.update(ctx, func(tx *bbolt.Tx) error {
		b := tx.Bucket([]byte(segmentsBucket))
		t, err := s.load(b, tag)
		if err != nil {
			return err
		}
		t.Updated = s.now()
		return putRecord(b, t, true)
	})
}
