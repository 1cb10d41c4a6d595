package segmenttest

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flakeid/flakeid/segment"
)

// Memory is an in-memory segment.Store: the reference the suite checks
// itself against, and a store for unit tests of allocator logic. It
// records a tag's stride (Tag.Delta, Tag.Remainder) as Tinyid's table does. It can be
// cut off (every call fails with segment.ErrUnavailable) to model an outage.
type Memory struct {
	mu   sync.Mutex
	tags map[string]segment.Tag
	// deleted are the tags Delete took out of service, with the row each
	// kept.
	deleted map[string]segment.Tag
	cut     atomic.Bool
	// Fetches counts successful fetches.
	Fetches atomic.Int64
}

// NewMemory returns an empty Memory store.
func NewMemory() *Memory {
	return &Memory{tags: map[string]segment.Tag{}, deleted: map[string]segment.Tag{}}
}

// Cut makes every call fail with segment.ErrUnavailable until Heal.
func (m *Memory) Cut() { m.cut.Store(true) }

// Heal ends a Cut.
func (m *Memory) Heal() { m.cut.Store(false) }

// Reset does nothing: a memory store has no connections to drop.
func (m *Memory) Reset() {}

func (m *Memory) check(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w: %w", segment.ErrUnavailable, err)
	}
	if m.cut.Load() {
		return fmt.Errorf("%w: memory store cut off", segment.ErrUnavailable)
	}
	return nil
}

// Fetch implements segment.Store.
func (m *Memory) Fetch(ctx context.Context, tag string, n int64) (segment.Range, error) {
	if err := m.check(ctx); err != nil {
		return segment.Range{}, err
	}
	if n < 1 {
		return segment.Range{}, fmt.Errorf("%w: fetch of %d IDs", segment.ErrInvalidTag, n)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.tags[tag]
	if !ok {
		return segment.Range{}, fmt.Errorf("%w: %q", segment.ErrUnknownTag, tag)
	}
	if t.MaxID > math.MaxInt64-n {
		return segment.Range{}, fmt.Errorf("%w: tag %q at %d cannot take %d more", segment.ErrExhausted, tag, t.MaxID, n)
	}
	r := segment.Range{Start: t.MaxID, End: t.MaxID + n, Delta: t.Delta, Remainder: t.Remainder}
	t.MaxID, t.Updated = r.End, time.Now()
	m.tags[tag] = t
	m.Fetches.Add(1)
	return r, nil
}

// SetMaxID sets a tag's max_id, lower or higher, as restoring an old backup
// or an operator's UPDATE would: for tests of what an allocator does then.
func (m *Memory) SetMaxID(tag string, maxID int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.tags[tag]
	if !ok {
		return fmt.Errorf("%w: %q", segment.ErrUnknownTag, tag)
	}
	t.MaxID, t.Updated = maxID, time.Now()
	m.tags[tag] = t
	return nil
}

// SetStride sets the delta and remainder a tag's row records, as an
// operator's UPDATE of Tinyid's columns would: for tests of what an
// allocator does then.
func (m *Memory) SetStride(tag string, delta, remainder int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.tags[tag]
	if !ok {
		return fmt.Errorf("%w: %q", segment.ErrUnknownTag, tag)
	}
	t.Delta, t.Remainder = delta, remainder
	m.tags[tag] = t
	return nil
}

// Get implements segment.Store.
func (m *Memory) Get(ctx context.Context, tag string) (segment.Tag, error) {
	if err := m.check(ctx); err != nil {
		return segment.Tag{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.tags[tag]
	if !ok {
		return segment.Tag{}, fmt.Errorf("%w: %q", segment.ErrUnknownTag, tag)
	}
	return t, nil
}

// List implements segment.Store.
func (m *Memory) List(ctx context.Context) ([]segment.Tag, error) {
	if err := m.check(ctx); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]segment.Tag, 0, len(m.tags))
	for _, t := range m.tags {
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b segment.Tag) int {
		if a.Name < b.Name {
			return -1
		}
		if a.Name > b.Name {
			return 1
		}
		return 0
	})
	return out, nil
}

// Create implements segment.Store.
func (m *Memory) Create(ctx context.Context, t segment.Tag) error {
	if err := m.check(ctx); err != nil {
		return err
	}
	if err := segment.ValidateTag(t); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.tags[t.Name]; ok {
		return fmt.Errorf("%w: %q", segment.ErrTagExists, t.Name)
	}
	if t.MaxID == 0 {
		t.MaxID = 1
	}
	if old, ok := m.deleted[t.Name]; ok {
		if err := segment.SameShare(old, t); err != nil {
			return err
		}
		t.MaxID = max(t.MaxID, old.MaxID) // continues above what it handed out
		delete(m.deleted, t.Name)
	}
	t.Updated = time.Now()
	m.tags[t.Name] = t
	return nil
}

// Delete implements segment.Store: the row moves aside with its max_id.
func (m *Memory) Delete(ctx context.Context, tag string) error {
	if err := m.check(ctx); err != nil {
		return err
	}
	if err := segment.ValidName(tag); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.tags[tag]
	if !ok {
		return fmt.Errorf("%w: %q", segment.ErrUnknownTag, tag)
	}
	delete(m.tags, tag)
	t.Updated = time.Now()
	m.deleted[tag] = t
	return nil
}

// Update implements segment.Store.
func (m *Memory) Update(ctx context.Context, tag string, step *int64, description *string) error {
	if err := m.check(ctx); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.tags[tag]
	if !ok {
		return fmt.Errorf("%w: %q", segment.ErrUnknownTag, tag)
	}
	if step != nil {
		if *step < 1 || *step > segment.MaxStep {
			return fmt.Errorf("%w: step %d", segment.ErrInvalidTag, *step)
		}
		t.Step = *step
	}
	if description != nil {
		t.Description = *description
	}
	t.Updated = time.Now()
	m.tags[tag] = t
	return nil
}
