// Package segment hands out dense, increasing integers per business tag
// (order numbers per shop, message ids per chat) from ranges ("segments")
// fetched from a database row, in the manner of Meituan Leaf's segment mode
// and Didi Tinyid, and compatible with Leaf's leaf_alloc table.
//
// An Allocator keeps two buffers per tag: while the current segment is being
// used, the next is fetched in the background once a fraction of the current
// one is consumed. The hot path is one atomic add on the current segment; a
// switch to the next segment never blocks readers of the current one.
//
// Guarantees (see docs/GUARANTEES.md):
//
//   - An ID is handed out at most once, by any number of allocators in any
//     number of processes sharing a Store: a fetch is one atomic step on the
//     tag's row (max_id += step), so fetched ranges never overlap.
//   - IDs of one tag from one allocator increase; across allocators they
//     increase roughly (each allocator works in its own ranges).
//   - Gaps are allowed: a restart, a crash or a graceful shutdown loses the
//     unused rest of the buffered segments — at most one step per tag
//     (each of the two buffers holds half a step).
//   - A database outage is ridden out from the buffers; a request that
//     cannot be served waits for the next fetch as long as its context
//     allows and then fails with an error wrapping ErrUnavailable.
//   - Segments never go backwards: a store seen below what the allocator
//     already fetched of a tag (a database restored from an old backup)
//     gets the tag refused with ErrRegressed, and nothing is issued from it
//     until an operator calls Allocator.Resume. The memory is per
//     Allocator: a restarted node trusts the store.
package segment

import (
	"context"
	"errors"
	"time"
)

// Sentinel errors; every error of the package and of its stores wraps one.
var (
	// ErrUnknownTag means the tag has no row in the store (and the
	// allocator does not create tags on first use).
	ErrUnknownTag = errors.New("segment: unknown tag")
	// ErrTagExists means Create found the tag already there.
	ErrTagExists = errors.New("segment: tag already exists")
	// ErrInvalidTag means a tag name or a tag's settings are out of range.
	ErrInvalidTag = errors.New("segment: invalid tag")
	// ErrInvalidCount means Next was asked for fewer than one ID or more
	// than the allocator's maximum batch.
	ErrInvalidCount = errors.New("segment: invalid count")
	// ErrUnavailable means the store could not be reached or failed, and
	// the buffers could not serve the request.
	ErrUnavailable = errors.New("segment: store unavailable")
	// ErrExhausted means the tag's IDs would pass the int64 range.
	ErrExhausted = errors.New("segment: tag exhausted")
	// ErrClosed means the allocator was closed.
	ErrClosed = errors.New("segment: allocator closed")
	// ErrRegressed means a tag is refused: a store's max_id was seen below
	// the end of a segment the allocator had already fetched (a database
	// restored from an old backup, a truncated table, max_id lowered by
	// hand), so the store would hand out IDs again. The tag issues nothing
	// until Allocator.Resume; the error names the tag and both values.
	ErrRegressed = errors.New("segment: the store's max_id went backwards")
	// ErrInvalidConfig means New (or Config.Validate) refused a Config; the
	// error names the field and its value.
	ErrInvalidConfig = errors.New("segment: invalid config")
	// ErrSeries means plain IDs were asked of a series tag, whose numbers
	// come from NextNumber.
	ErrSeries = errors.New("segment: the tag is a series")
	// ErrNotSeries means numbers were asked of (or decoded for) a tag that
	// is not a series.
	ErrNotSeries = errors.New("segment: the tag is not a series")
	// ErrPeriodFull means a series' current period has handed out every
	// number its counter can show; the next period starts again.
	ErrPeriodFull = errors.New("segment: the series' period is full")
	// ErrNoKey means a masked series' key is not among the allocator's
	// CounterKeys.
	ErrNoKey = errors.New("segment: the series' mask key is missing")
)

// Tag is one row of the store: Leaf's leaf_alloc (biz_tag, max_id, step,
// description, update_time).
type Tag struct {
	// Name is the business tag (Leaf's biz_tag): 1–128 characters of
	// A–Z a–z 0–9 - _ . : and not "." or ".." (see ValidName). A name
	// stored before this rule that breaks it is still listed, but cannot be
	// served or changed.
	Name string `json:"tag"`
	// MaxID is the first ID not yet handed to any allocator: the end of the
	// newest fetched range. A new tag starts at 1, as in Leaf.
	MaxID int64 `json:"max_id"`
	// Step is the tag's configured step: how many IDs a fetch takes by
	// default, and the least the dynamic step goes down to. Range 1–2^31−1.
	Step int64 `json:"step"`
	// Description is free text, up to 256 bytes.
	Description string `json:"description,omitempty"`
	// Updated is when the row last changed, by the store's clock.
	Updated time.Time `json:"update_time,omitzero"`
	// Delta and Remainder are the stride the store records for the tag
	// (see Range); 0 and 0 when it records none.
	Delta     int64 `json:"delta,omitempty"`
	Remainder int64 `json:"remainder,omitempty"`
	// Series makes the tag a series of business numbers (see Series); nil
	// for a tag of plain IDs. Stores do not see it: the Allocator keeps it
	// in the description.
	Series *Series `json:"series,omitempty"`
}

// Range is a fetched segment: the IDs Start, Start+1, …, End−1, or, when
// the store records a stride for the tag (Tinyid's delta and remainder
// columns), those of them ≡ Remainder (mod Delta).
type Range struct {
	Start, End int64
	// Delta and Remainder are the stride the store records for the tag:
	// Delta 1 or more, Remainder 0 to Delta−1. Delta 0 means the store
	// records none, and the Source's Delta and Remainder apply.
	Delta, Remainder int64
}

// Len is the number of IDs in the range.
func (r Range) Len() int64 { return r.End - r.Start }

// Store is the persistent side: one row per tag. Implementations live in
// backend/<name>; segment/segmenttest checks them all the same way.
type Store interface {
	// Fetch advances the tag's max_id by n in one atomic step and returns
	// the range [old max_id, new max_id). It fails with ErrUnknownTag for a
	// tag without a row, ErrExhausted past the int64 range, ErrUnavailable
	// when the store cannot be reached.
	Fetch(ctx context.Context, tag string, n int64) (Range, error)
	// Get returns a tag's row, or ErrUnknownTag.
	Get(ctx context.Context, tag string) (Tag, error)
	// List returns every tag, ordered by name.
	List(ctx context.Context) ([]Tag, error)
	// Create adds a tag with t's Name, Step, Description, MaxID (0 means
	// 1) and share (Delta and Remainder, see Range: Get, List and Fetch
	// return them), or fails with ErrTagExists. A deleted tag of that name
	// comes back with t's Step and Description and a max_id of at least the
	// one it kept (the larger of the two): it continues above every ID it
	// handed out. Its share cannot change (SameShare): with several stores,
	// another share could be one another store served.
	Create(ctx context.Context, t Tag) error
	// Delete takes a tag out of service and keeps its max_id: Fetch, Get
	// and Update then fail with ErrUnknownTag, List leaves it out, and a
	// later Create of the name continues above it, so no ID is ever handed
	// out twice. It fails with ErrUnknownTag for a tag without a row or
	// already deleted.
	Delete(ctx context.Context, tag string) error
	// Update changes a tag's step and description (a nil pointer leaves the
	// field), or fails with ErrUnknownTag.
	Update(ctx context.Context, tag string, step *int64, description *string) error
}
