package segment

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"iter"
	"sync"
	"sync/atomic"
)

// Allocator hands out IDs per tag from double-buffered segments. It is safe
// for concurrent use; create it with New and Close it when done.
//
// An Allocator remembers, per tag and source, the end of the newest segment
// it fetched, and checks every later fetch against it: a store whose max_id
// is seen below it (restored from an old backup, truncated, lowered by hand)
// gets the tag refused with ErrRegressed until Resume. The memory is the
// Allocator's own: a new Allocator (a restarted node) trusts the store.
type Allocator struct {
	cfg Config
	// tags maps a tag name to its buffer. It is copied on write (under mu),
	// so the hot path reads it with one atomic load and no lock.
	tags atomic.Pointer[map[string]*buffer]
	// series maps a series tag to its state, copied on write as tags is.
	series atomic.Pointer[map[string]*series]
	mu     sync.Mutex
	rr     atomic.Uint64 // round robin over sources

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// New validates cfg and returns an Allocator. Tags are loaded on first use.
func New(cfg Config) (*Allocator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	a := &Allocator{cfg: cfg.withDefaults()}
	a.tags.Store(&map[string]*buffer{})
	a.series.Store(&map[string]*series{})
	a.ctx, a.cancel = context.WithCancel(context.Background())
	return a, nil
}

// Close stops background fetches and waits for them. The unused rest of
// every buffer is given up (IDs stay unique; the gap is documented).
func (a *Allocator) Close() error {
	a.cancel()
	a.wg.Wait()
	return nil
}

// Span is a run of IDs from one segment: First, First+Stride, …, Count of
// them. Stride is 1 unless the tag is served from several sources.
type Span struct {
	First, Count, Stride int64
}

// All yields the span's IDs.
func (s Span) All() iter.Seq[int64] {
	return func(yield func(int64) bool) {
		for i := range s.Count {
			if !yield(s.First + i*s.Stride) {
				return
			}
		}
	}
}

// Last is the span's last ID.
func (s Span) Last() int64 { return s.First + (s.Count-1)*s.Stride }

// Handle serves one tag without looking it up again; get it from
// Allocator.Tag. It is safe for concurrent use.
type Handle struct{ b *buffer }

// Tag returns the handle of a tag, loading its first segment if needed (so
// an unknown tag fails here).
func (a *Allocator) Tag(ctx context.Context, name string) (*Handle, error) {
	b, err := a.buffer(ctx, name)
	if err != nil {
		return nil, err
	}
	return &Handle{b: b}, nil
}

// NextID returns one ID of the handle's tag.
func (h *Handle) NextID(ctx context.Context) (int64, error) { return h.b.nextID(ctx) }

// NextID returns one ID of tag.
func (a *Allocator) NextID(ctx context.Context, tag string) (int64, error) {
	if b, ok := (*a.tags.Load())[tag]; ok && !b.pinned {
		return b.nextID(ctx)
	}
	b, err := a.buffer(ctx, tag)
	if err != nil {
		return 0, err
	}
	return b.nextID(ctx)
}

// Next returns n IDs of tag as spans, in increasing order. A burst larger
// than the buffers waits for fetches, as long as ctx allows.
func (a *Allocator) Next(ctx context.Context, tag string, n int) ([]Span, error) {
	return a.AppendNext(ctx, tag, n, nil)
}

// AppendNext is Next appending the spans to dst; it does not allocate when
// dst has room for them (one span, unless the IDs cross segments).
func (a *Allocator) AppendNext(ctx context.Context, tag string, n int, dst []Span) ([]Span, error) {
	if n < 1 || n > a.cfg.MaxBatch {
		return dst, fmt.Errorf("%w: asked for %d IDs, want 1–%d", ErrInvalidCount, n, a.cfg.MaxBatch)
	}
	b, err := a.buffer(ctx, tag)
	if err != nil {
		return dst, err
	}
	h := Handle{b: b}
	return h.Next(ctx, n, dst)
}

// Next appends n IDs of the handle's tag to dst as spans.
func (h *Handle) Next(ctx context.Context, n int, dst []Span) ([]Span, error) {
	b := h.b
	if n < 1 || n > b.a.cfg.MaxBatch {
		return dst, fmt.Errorf("%w: asked for %d IDs, want 1–%d", ErrInvalidCount, n, b.a.cfg.MaxBatch)
	}
	left := int64(n)
	for left > 0 {
		s := b.cur.Load()
		end := s.pos.Add(left)
		i := end - left
		if i < s.count {
			k := min(left, s.count-i)
			if i <= s.prefetchAt && s.prefetchAt < i+k {
				b.prefetch()
			}
			dst = append(dst, Span{First: s.first + i*s.delta, Count: k, Stride: s.delta})
			left -= k
			if left == 0 {
				break
			}
		}
		if err := b.advance(ctx, s); err != nil {
			return dst, err
		}
	}
	b.issued.Add(int64(n))
	return dst, nil
}

// TakeSegment fetches a segment of the tag's configured step from the
// sources and hands all of it to the caller, to issue its IDs itself
// (Tinyid's nextSegmentId, which its clients use locally): the IDs
// span.All() yields are the caller's alone, and are never handed out by
// this or any other allocator. The allocator's own buffers are not
// touched. A series tag is refused (ErrSeries), as is a tag refused after a
// store went backwards (ErrRegressed) — a segment fetched from such a
// store is checked as the buffers' fetches are.
func (a *Allocator) TakeSegment(ctx context.Context, tag string) (Span, error) {
	b, err := a.buffer(ctx, tag)
	if err != nil {
		return Span{}, err
	}
	b.mu.Lock()
	err = cmp.Or(b.gone, b.refused)
	step := b.minStep
	b.mu.Unlock()
	if err != nil {
		return Span{}, err
	}
	s, err := b.fetchSize(ctx, step, step)
	if err != nil {
		return Span{}, err
	}
	b.issued.Add(s.count)
	return Span{First: s.first, Count: s.count, Stride: s.delta}, nil
}

// tagRow reads the tag from the first source that answers, creating it when
// AutoCreate says so, or from create (a series' period row) when that is
// not nil. A series tag's settings are read from its description.
func (a *Allocator) tagRow(ctx context.Context, name string, create *Tag) (Tag, error) {
	var lastErr error
	for _, src := range a.cfg.Sources {
		t, err := src.Store.Get(ctx, name)
		if err == nil {
			return readSeries(t)
		}
		if errors.Is(err, ErrUnknownTag) && create != nil {
			if err := a.createRow(ctx, *create); err != nil && !errors.Is(err, ErrTagExists) {
				return Tag{}, err
			}
			t, err := src.Store.Get(ctx, name)
			if err != nil {
				return Tag{}, err
			}
			return readSeries(t)
		}
		if errors.Is(err, ErrUnknownTag) && a.cfg.AutoCreate {
			if err := a.Create(ctx, Tag{Name: name, Step: a.cfg.DefaultStep, Description: "created on first use"}); err != nil && !errors.Is(err, ErrTagExists) {
				return Tag{}, err
			}
			t, err := src.Store.Get(ctx, name)
			if err != nil {
				return Tag{}, err
			}
			return readSeries(t)
		}
		if errors.Is(err, ErrUnknownTag) {
			return Tag{}, err
		}
		lastErr = err
	}
	return Tag{}, lastErr
}
