package bolt

import (
	"context"
	"encoding/json"
	"fmt"

	bbolt "go.etcd.io/bbolt"

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
