package bolt

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/flakeid/flakeid/backend/internal/coord"
	"github.com/flakeid/flakeid/segment"
)

// segmentFloorKey is the key of the segment store's floor in recoveryBucket:
// {"max_id": N}, set by `flakeid recover --tag-floor-all N`.
const segmentFloorKey = "segment_floor"

// segmentFloor is the lowest first ID of a tag created in tx's file, 0 when
// none was set.
func segmentFloor(tx *bbolt.Tx) int64 {
	b := tx.Bucket([]byte(recoveryBucket))
	if b == nil {
		return 0
	}
	v := b.Get([]byte(segmentFloorKey))
	if v == nil {
		return 0
	}
	var f struct {
		MaxID int64 `json:"max_id"`
	}
	_ = json.Unmarshal(v, &f)
	return f.MaxID
}

// RaiseFloor makes floor the lowest ID every tag of the store hands out
// next: a tag below it is raised to it, and a tag created later (tags
// create, --auto-create-tags) starts at it or above. `flakeid recover
// --tag-floor-all` calls it on the store it re-creates.
func (s *Segments) RaiseFloor(ctx context.Context, floor int64) error {
	if floor < 1 {
		return fmt.Errorf("%w: floor %d, want at least 1", segment.ErrInvalidTag, floor)
	}
	return s.update(ctx, func(tx *bbolt.Tx) error {
		rb, err := tx.CreateBucketIfNotExists([]byte(recoveryBucket))
		if err != nil {
			return err
		}
		v, err := json.Marshal(struct {
			MaxID int64 `json:"max_id"`
		}{max(floor, segmentFloor(tx))})
		if err != nil {
			return err
		}
		if err := rb.Put([]byte(segmentFloorKey), v); err != nil {
			return err
		}
		b, err := tx.CreateBucketIfNotExists([]byte(segmentsBucket))
		if err != nil {
			return err
		}
		type raised struct {
			t       segment.Tag
			deleted bool
		}
		var raise []raised
		err = b.ForEach(func(k, v []byte) error {
			t, deleted, err := s.decodeRecord(string(k), v)
			if err != nil {
				return err
			}
			if t.MaxID < floor {
				t.MaxID, t.Updated = floor, s.now()
				raise = append(raise, raised{t, deleted}) // a deleted tag's kept mark too
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, r := range raise {
			if err := putRecord(b, r.t, r.deleted); err != nil {
				return err
			}
		}
		return nil
	})
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
