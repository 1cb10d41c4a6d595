package segment

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"maps"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flakeid/flakeid/internal/backoff"
)

// Source is one store a tag is served from. With several sources (Tinyid's
// multi-database mode) each keeps its own row per tag and serves only the
// IDs of its range that are ≡ Remainder (mod Delta), so that the sources
// never collide and losing one database loses only its share.
type Source struct {
	Store Store
	// Delta and Remainder select the IDs this source serves: those ≡
	// Remainder (mod Delta). Default 1 and 0: every ID.
	Delta, Remainder int64
}

// Config configures an Allocator. Zero fields mean their defaults.
type Config struct {
	// Store is the single source of segments; or give Sources.
	Store Store
	// Sources are several stores for one tag set (see Source); all share
	// one Delta and have distinct Remainders in [0, Delta).
	Sources []Source
	// Prefetch is the fraction of the current segment handed out when the
	// next is fetched in the background. Range 0.01–0.99. Default 0.1 (as
	// Leaf; Tinyid uses 0.2).
	Prefetch float64
	// SegmentDuration is what the dynamic step aims for: a step should last
	// about this long. At each fetch, the rate measured over the last
	// segment used up says how long a step lasts now: less than this, the
	// step doubles (up to MaxStep); twice this or more, it halves (never
	// below the tag's configured step). Default 15m (Leaf's rule); negative
	// keeps every tag at its configured step.
	SegmentDuration time.Duration
	// MaxStep caps the dynamic step. Range 1–2^31−1. Default 1,000,000.
	MaxStep int64
	// MaxBatch bounds the n of Next. Range 1–10,000,000. Default 100,000.
	MaxBatch int
	// AutoCreate creates an unknown tag on first use, with DefaultStep.
	// Default false: an unknown tag is ErrUnknownTag.
	AutoCreate bool
	// DefaultStep is the step of tags created on first use. Default 1000.
	DefaultStep int64
	// FetchTimeout bounds one fetch from a store. Default 5s.
	FetchTimeout time.Duration
	// Logger receives fetch failures, and an error when a store is seen
	// going backwards (see ErrRegressed). Default slog.Default().
	Logger *slog.Logger
	// Now is the clock of the dynamic step. Default time.Now.
	Now func() time.Time
}

// Validate checks the fields and their relations, with defaults applied.
func (c Config) Validate() error {
	c = c.withDefaults()
	bad := func(format string, args ...any) error {
		return fmt.Errorf("segment: invalid config: "+format, args...)
	}
	switch {
	case len(c.Sources) == 0:
		return bad("no Store or Sources")
	case c.Prefetch < 0.01 || c.Prefetch > 0.99:
		return bad("prefetch %v, want 0.01–0.99", c.Prefetch)
	case c.MaxStep < 1 || c.MaxStep > 1<<31-1:
		return bad("max step %d, want 1–%d", c.MaxStep, 1<<31-1)
	case c.MaxBatch < 1 || c.MaxBatch > 10_000_000:
		return bad("max batch %d, want 1–10,000,000", c.MaxBatch)
	case c.DefaultStep < 1 || c.DefaultStep > c.MaxStep:
		return bad("default step %d, want 1–%d (max step)", c.DefaultStep, c.MaxStep)
	case c.FetchTimeout <= 0:
		return bad("fetch timeout %v, want > 0", c.FetchTimeout)
	}
	delta := c.Sources[0].Delta
	seen := map[int64]bool{}
	for i, s := range c.Sources {
		switch {
		case s.Store == nil:
			return bad("source %d has no Store", i)
		case s.Delta != delta:
			return bad("source %d has delta %d, source 0 has %d: all must share one", i, s.Delta, delta)
		case s.Remainder < 0 || s.Remainder >= s.Delta:
			return bad("source %d has remainder %d, want 0–%d", i, s.Remainder, s.Delta-1)
		case seen[s.Remainder]:
			return bad("sources share remainder %d: they would issue the same IDs", s.Remainder)
		}
		seen[s.Remainder] = true
	}
	return nil
}

func (c Config) withDefaults() Config {
	if len(c.Sources) == 0 && c.Store != nil {
		c.Sources = []Source{{Store: c.Store}}
	}
	c.Sources = append([]Source(nil), c.Sources...)
	for i := range c.Sources {
		if c.Sources[i].Delta == 0 {
			c.Sources[i].Delta = 1
		}
	}
	if c.Prefetch == 0 {
		c.Prefetch = 0.1
	}
	if c.SegmentDuration == 0 {
		c.SegmentDuration = 15 * time.Minute
	}
	if c.MaxStep == 0 {
		c.MaxStep = 1_000_000
	}
	if c.MaxBatch == 0 {
		c.MaxBatch = 100_000
	}
	if c.DefaultStep == 0 {
		c.DefaultStep = min(1000, c.MaxStep)
	}
	if c.FetchTimeout == 0 {
		c.FetchTimeout = 5 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

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
	mu   sync.Mutex
	rr   atomic.Uint64 // round robin over sources

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

// segment is a fetched range being handed out: the IDs first + i·delta for
// i in [0, count).
type segment struct {
	_     [64]byte
	pos   atomic.Int64 // the next i to hand out; may run past count
	_     [56]byte
	first int64
	delta int64
	count int64
	// prefetchAt is the i whose taker starts the next fetch.
	prefetchAt int64
	r          Range // the store's range
	source     int
	fetched    time.Time
	step       int64
	current    time.Time // when it became the current segment
	dropped    bool      // given up when its tag was refused; guarded by the buffer's mu
}

func newSegment(r Range, src Source, source int, prefetch float64, fetched time.Time, step int64) *segment {
	first := r.Start + ((src.Remainder-r.Start%src.Delta)%src.Delta+src.Delta)%src.Delta
	s := &segment{first: first, delta: src.Delta, r: r, source: source, fetched: fetched, step: step}
	if first < r.End {
		s.count = (r.End - first + src.Delta - 1) / src.Delta
	}
	s.prefetchAt = min(int64(float64(s.count)*prefetch), s.count-1)
	return s
}

// buffer is the double buffer of one tag.
type buffer struct {
	a    *Allocator
	name string
	cur  atomic.Pointer[segment]

	mu        sync.Mutex
	next      *segment
	fetching  bool
	fetchDone chan struct{} // closed when the fetch in flight ends
	fetchErr  error
	step      int64     // the dynamic step
	minStep   int64     // the tag's configured step
	rate      float64   // IDs per second over the last segment used up; 0 before one is
	stepRead  time.Time // when minStep was last read from the store
	// high[i] is the end of the newest segment fetched from source i: the
	// source's max_id must never be seen below it again.
	high []int64
	// refused is why the tag is refused (it wraps ErrRegressed), nil while
	// it is served. Once set, no fetch starts and no ID is handed out
	// until Resume clears it.
	refused error
	// epoch counts refusals and resumptions: a fetch that started in an
	// earlier epoch answered from a store state the operator has dealt
	// with since, and is discarded rather than judged.
	epoch uint64
	// regressions counts the times a source was seen going backwards.
	regressions atomic.Int64

	fetches, waits, failures atomic.Int64
	fetchNanos               atomic.Int64 // total latency of successful fetches
	lastLatency              atomic.Int64
	issued                   atomic.Int64
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

// nextID is the hot path: one atomic add on the current segment.
func (b *buffer) nextID(ctx context.Context) (int64, error) {
	for {
		s := b.cur.Load()
		i := s.pos.Add(1) - 1
		if i < s.count {
			if i == s.prefetchAt {
				b.prefetch()
			}
			return s.first + i*s.delta, nil
		}
		if err := b.advance(ctx, s); err != nil {
			return 0, err
		}
	}
}

// NextID returns one ID of tag.
func (a *Allocator) NextID(ctx context.Context, tag string) (int64, error) {
	if b, ok := (*a.tags.Load())[tag]; ok {
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

// buffer returns the tag's buffer, creating it and fetching its first
// segment on first use.
func (a *Allocator) buffer(ctx context.Context, name string) (*buffer, error) {
	if b, ok := (*a.tags.Load())[name]; ok {
		return b, nil
	}
	if err := ValidName(name); err != nil {
		return nil, err
	}
	if a.ctx.Err() != nil {
		return nil, ErrClosed
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if b, ok := (*a.tags.Load())[name]; ok {
		return b, nil
	}
	b := &buffer{a: a, name: name, high: make([]int64, len(a.cfg.Sources))}
	t, err := a.tagRow(ctx, name)
	if err != nil {
		return nil, err
	}
	b.minStep, b.step, b.stepRead = t.Step, t.Step, time.Now()
	seg, err := b.fetch(ctx)
	if err != nil {
		return nil, err
	}
	seg.current = a.cfg.Now()
	b.cur.Store(seg)
	old := *a.tags.Load()
	next := make(map[string]*buffer, len(old)+1)
	for k, v := range old {
		next[k] = v
	}
	next[name] = b
	a.tags.Store(&next)
	return b, nil
}

// tagRow reads the tag from the first source that answers, creating it when
// AutoCreate says so.
func (a *Allocator) tagRow(ctx context.Context, name string) (Tag, error) {
	var lastErr error
	for _, src := range a.cfg.Sources {
		t, err := src.Store.Get(ctx, name)
		if err == nil {
			return t, nil
		}
		if errors.Is(err, ErrUnknownTag) && a.cfg.AutoCreate {
			if err := a.Create(ctx, Tag{Name: name, Step: a.cfg.DefaultStep, Description: "created on first use"}); err != nil && !errors.Is(err, ErrTagExists) {
				return Tag{}, err
			}
			return src.Store.Get(ctx, name)
		}
		if errors.Is(err, ErrUnknownTag) {
			return Tag{}, err
		}
		lastErr = err
	}
	return Tag{}, lastErr
}

// nextStep applies the dynamic-step rule; b.mu is held. The rate is
// measured over the last segment used up, from when it became current to
// when it ran out, so a step just changed does not skew it (Leaf measures
// the time between fetches instead, which mixes segments of different sizes
// and makes the step oscillate).
func (b *buffer) nextStep() int64 {
	d := b.a.cfg.SegmentDuration
	if d < 0 || b.rate == 0 {
		return b.step
	}
	lasts := time.Duration(float64(b.step) / b.rate * float64(time.Second)) // how long a step lasts now
	switch {
	case lasts < d && b.step*2 <= b.a.cfg.MaxStep:
		b.step *= 2
	case lasts >= 2*d:
		b.step = max(b.step/2, b.minStep)
	}
	return b.step
}

// refreshStep rereads the tag's configured step at most once a minute, so a
// step changed on another node (or in the database) reaches this one within
// a minute of its next fetch.
func (b *buffer) refreshStep(ctx context.Context) {
	b.mu.Lock()
	due := time.Since(b.stepRead) >= time.Minute
	if due {
		b.stepRead = time.Now()
	}
	b.mu.Unlock()
	if !due {
		return
	}
	for _, src := range b.a.cfg.Sources {
		t, err := src.Store.Get(ctx, b.name)
		if err != nil {
			continue
		}
		b.mu.Lock()
		if t.Step != b.minStep {
			b.minStep = t.Step
			b.step = max(min(b.step, max(b.a.cfg.MaxStep, t.Step)), t.Step)
		}
		b.mu.Unlock()
		return
	}
}

// usedUp records the lifetime of segment s, which ran out at now; b.mu is
// held. A segment given up when its tag was refused did not run out and
// tells nothing about the rate.
func (b *buffer) usedUp(s *segment, now time.Time) {
	if s.dropped {
		return
	}
	if life := now.Sub(s.current); life > 0 {
		b.rate = float64(s.count) / life.Seconds()
	} else {
		b.rate = math.Inf(1)
	}
}

// fetch takes the next segment from the sources, trying each in turn
// (starting at the round-robin position).
func (b *buffer) fetch(ctx context.Context) (*segment, error) {
	a := b.a
	b.refreshStep(ctx)
	b.mu.Lock()
	now := a.cfg.Now()
	step := b.nextStep()
	epoch := b.epoch
	b.mu.Unlock()
	size := max((step+1)/2, 1) // half a step: two buffers hold at most one
	var errs []error
	start := int(a.rr.Add(1))
	for k := range a.cfg.Sources {
		si := (start + k) % len(a.cfg.Sources)
		src := a.cfg.Sources[si]
		fctx, cancel := context.WithTimeout(ctx, a.cfg.FetchTimeout)
		t0 := time.Now()
		r, err := src.Store.Fetch(fctx, b.name, size)
		cancel()
		if err != nil {
			errs = append(errs, err)
			if errors.Is(err, ErrUnknownTag) || errors.Is(err, ErrExhausted) || ctx.Err() != nil {
				break
			}
			continue
		}
		lat := time.Since(t0)
		b.fetches.Add(1)
		b.fetchNanos.Add(int64(lat))
		b.lastLatency.Store(int64(lat))
		if r.Start < 0 || r.Start > math.MaxInt64-size || r.End != r.Start+size {
			errs = append(errs, fmt.Errorf("%w: tag %q%s: the store answered the range [%d, %d) to a fetch of %d IDs; nothing is issued from it",
				ErrUnavailable, b.name, b.source(si), r.Start, r.End, size))
			continue
		}
		if err := b.advanceHigh(si, r, epoch); err != nil {
			return nil, err
		}
		seg := newSegment(r, src, si, a.cfg.Prefetch, now, step)
		if seg.count == 0 {
			errs = append(errs, fmt.Errorf("range %v of tag %q holds no ID ≡ %d (mod %d)", r, b.name, src.Remainder, src.Delta))
			continue
		}
		return seg, nil
	}
	b.failures.Add(1)
	err := errors.Join(errs...)
	if errors.Is(err, ErrUnknownTag) || errors.Is(err, ErrExhausted) || errors.Is(err, ErrUnavailable) {
		return nil, err
	}
	return nil, fmt.Errorf("%w: fetching a segment of tag %q: %w", ErrUnavailable, b.name, err)
}

// source names source si in messages when there are several.
func (b *buffer) source(si int) string { return sourceOf(len(b.a.cfg.Sources), si) }

// sourceOf names source si of n in messages: nothing when n is 1.
func sourceOf(n, si int) string {
	if n == 1 {
		return ""
	}
	return fmt.Sprintf(" (source %d)", si)
}

// advanceHigh checks a range r just fetched from source si against the
// newest segment fetched from it before, and records r as the newest. A
// range that starts below it means the store went backwards: the tag is
// refused, its buffered segments are given up (waste, never a duplicate),
// and the error, wrapping ErrRegressed, is logged once and returned.
func (b *buffer) advanceHigh(si int, r Range, epoch uint64) error {
	b.mu.Lock()
	high := b.high[si]
	if r.Start >= high {
		b.high[si] = r.End
		b.mu.Unlock()
		return nil
	}
	if b.epoch != epoch || b.refused != nil {
		b.mu.Unlock()
		return fmt.Errorf("%w: tag %q%s: a fetch that started before the tag was refused or resumed answered [%d, %d); discarded",
			ErrUnavailable, b.name, b.source(si), r.Start, r.End)
	}
	b.epoch++
	err := fmt.Errorf("%w: tag %q%s: fetched up to %d, store now at %d: "+
		"restored from an old backup? no ID is issued from this tag until an operator resumes it",
		ErrRegressed, b.name, b.source(si), high, r.Start)
	b.refused = err
	if s := b.cur.Load(); s != nil {
		s.dropped = true
		s.pos.Store(s.count) // takers after this see it used up and stop in advance
	}
	b.next = nil
	b.regressions.Add(1)
	b.mu.Unlock()
	b.a.cfg.Logger.Error("segment: a store went backwards; refusing the tag until an operator resumes it",
		"tag", b.name, "source", si, "fetched_to", high, "store_at", r.Start, "err", err)
	return err
}

// prefetch starts a background fetch of the next segment unless one is in
// flight or done.
func (b *buffer) prefetch() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.startFetchLocked()
}

// startFetchLocked starts the background fetch; b.mu is held.
func (b *buffer) startFetchLocked() {
	if b.fetching || b.next != nil || b.refused != nil || b.a.ctx.Err() != nil {
		return
	}
	b.fetching = true
	b.fetchDone = make(chan struct{})
	b.a.wg.Add(1)
	go b.fetchLoop(b.fetchDone)
}

// fetchLoop fetches until it succeeds or the allocator closes, publishing
// every failure to waiters.
func (b *buffer) fetchLoop(done chan struct{}) {
	defer b.a.wg.Done()
	bo := backoff.Backoff{Min: 20 * time.Millisecond, Max: 2 * time.Second}
	for attempt := 0; ; attempt++ {
		seg, err := b.fetch(b.a.ctx)
		b.mu.Lock()
		if err == nil {
			b.next, b.fetching, b.fetchErr = seg, false, nil
			close(done)
			b.mu.Unlock()
			return
		}
		if errors.Is(err, ErrRegressed) && b.refused == nil {
			// Resumed between the refusal and here: the refusal is dealt
			// with; a later fetch starts afresh.
			b.fetching = false
			close(done)
			b.mu.Unlock()
			return
		}
		b.fetchErr = err
		if b.a.ctx.Err() != nil || errors.Is(err, ErrUnknownTag) || errors.Is(err, ErrExhausted) || errors.Is(err, ErrRegressed) {
			b.fetching = false
			close(done)
			b.mu.Unlock()
			return
		}
		if b.refused != nil {
			// Refused meanwhile: no fetch runs until Resume.
			b.fetching = false
			close(done)
			b.mu.Unlock()
			return
		}
		// Wake the waiters with the error, keep trying for later ones.
		close(done)
		done = make(chan struct{})
		b.fetchDone = done
		b.mu.Unlock()
		b.a.cfg.Logger.Warn("segment: fetching a segment failed; retrying", "tag", b.name, "attempt", attempt+1, "err", err)
		t := time.NewTimer(bo.Next(attempt))
		select {
		case <-b.a.ctx.Done():
			t.Stop()
		case <-t.C:
		}
	}
}

// advance makes the next segment current once s is used up, waiting for a
// fetch when none is ready. A refused tag fails at once.
func (b *buffer) advance(ctx context.Context, s *segment) error {
	for {
		b.mu.Lock()
		if err := b.refused; err != nil {
			b.mu.Unlock()
			return err
		}
		if b.cur.Load() != s {
			b.mu.Unlock()
			return nil // another caller switched
		}
		if b.next != nil {
			now := b.a.cfg.Now()
			b.usedUp(s, now)
			b.next.current = now
			b.cur.Store(b.next)
			b.next = nil
			b.mu.Unlock()
			return nil
		}
		b.startFetchLocked()
		done, lastErr := b.fetchDone, b.fetchErr
		b.mu.Unlock()
		if b.a.ctx.Err() != nil {
			return ErrClosed
		}
		b.waits.Add(1)
		select {
		case <-ctx.Done():
			if lastErr != nil {
				return fmt.Errorf("%w: tag %q: both segments used up and the next fetch failed: %w (waiting: %w)", ErrUnavailable, b.name, lastErr, ctx.Err())
			}
			return fmt.Errorf("%w: tag %q: both segments used up, waiting for the next: %w", ErrUnavailable, b.name, ctx.Err())
		case <-done:
		}
		b.mu.Lock()
		err := b.fetchErr
		ready := b.next != nil
		fetching := b.fetching
		b.mu.Unlock()
		if !ready && !fetching && err != nil {
			return err // unknown tag, exhausted, refused, or closed
		}
	}
}

// Create adds a tag to every source.
func (a *Allocator) Create(ctx context.Context, t Tag) error {
	if t.Step == 0 {
		t.Step = a.cfg.DefaultStep
	}
	if err := ValidateTag(t); err != nil {
		return err
	}
	for _, src := range a.cfg.Sources {
		if err := src.Store.Create(ctx, t); err != nil {
			return err
		}
	}
	return nil
}

// Tags lists the tags of the first source that answers.
func (a *Allocator) Tags(ctx context.Context) ([]Tag, error) {
	var lastErr error
	for _, src := range a.cfg.Sources {
		ts, err := src.Store.List(ctx)
		if err == nil {
			return ts, nil
		}
		lastErr = err
	}
	return nil, lastErr
}

// Update changes a tag's step or description in every source; a loaded
// tag's step applies from its next fetch.
func (a *Allocator) Update(ctx context.Context, tag string, step *int64, description *string) error {
	if step != nil && (*step < 1 || *step > MaxStep) {
		return fmt.Errorf("%w: step %d, want 1–%d", ErrInvalidTag, *step, MaxStep)
	}
	if description != nil && len(*description) > 256 {
		return fmt.Errorf("%w: description of %d bytes, want at most 256", ErrInvalidTag, len(*description))
	}
	for _, src := range a.cfg.Sources {
		if err := src.Store.Update(ctx, tag, step, description); err != nil {
			return err
		}
	}
	if b, ok := (*a.tags.Load())[tag]; ok && step != nil {
		b.mu.Lock()
		b.minStep, b.step = *step, *step
		b.mu.Unlock()
	}
	return nil
}

// Resume serves again a tag refused because a store went backwards (see
// ErrRegressed), once every source's max_id for it is at or above what this
// allocator fetched. It is the operator's step after fixing the store:
//
//   - floor 0 only checks: for an operator who raised max_id in the
//     database (UPDATE leaf_alloc SET max_id = … WHERE biz_tag = …) above
//     every ID the tag may have issued.
//   - floor > 0 first raises the tag's max_id in every source to at least
//     floor, by fetching the difference and discarding it, then checks. A
//     floor below what this allocator fetched is refused (ErrInvalidTag):
//     the floor must be above every ID any node issued, which this node
//     cannot know; the largest ID the tag's data holds, plus a margin, is.
//
// With several nodes, each remembers its own fetches: resume the tag on each
// (the store raised once, the same floor is a no-op on the others). A store
// still behind fails with an error wrapping ErrRegressed and leaves the tag
// refused. Resume of a tag that is not refused (or not loaded) raises and
// checks the same way. Restarting the node also clears the refusal, and the
// memory that caught it: only do it after fixing the store.
func (a *Allocator) Resume(ctx context.Context, tag string, floor int64) error {
	if err := ValidName(tag); err != nil {
		return err
	}
	b := (*a.tags.Load())[tag]
	high := make([]int64, len(a.cfg.Sources))
	var refused error // the refusal checked here; one found meanwhile stays
	if b != nil {
		b.mu.Lock()
		copy(high, b.high)
		refused = b.refused
		b.mu.Unlock()
	}
	if top := slices.Max(high); floor < 0 || floor > 0 && floor < top {
		return fmt.Errorf("%w: tag %q: floor %d, want 0 (only check the store) or at least %d (what this node fetched up to)",
			ErrInvalidTag, tag, floor, top)
	}
	for si, src := range a.cfg.Sources {
		t, err := src.Store.Get(ctx, tag)
		if err != nil {
			return err
		}
		if floor > t.MaxID {
			if _, err := src.Store.Fetch(ctx, tag, floor-t.MaxID); err != nil {
				return err
			}
			if t, err = src.Store.Get(ctx, tag); err != nil {
				return err
			}
		}
		if t.MaxID < high[si] || t.MaxID < floor {
			return fmt.Errorf("%w: tag %q%s: not resumed: the store is at %d, below %d, what this node fetched up to; "+
				"raise max_id above every ID the tag issued (in SQL: UPDATE <table> SET max_id = … WHERE biz_tag = '%s'), or resume with a floor",
				ErrRegressed, tag, sourceOf(len(a.cfg.Sources), si), t.MaxID, max(high[si], floor), tag)
		}
	}
	if refused == nil {
		return nil
	}
	b.mu.Lock()
	if b.refused == refused { // no fetch ran while refused, so high is as checked
		b.refused, b.fetchErr = nil, nil
		b.epoch++
	}
	b.mu.Unlock()
	a.cfg.Logger.Warn("segment: tag resumed by the operator", "tag", tag, "floor", floor, "fetched_to", slices.Max(high))
	return nil
}

// Refused returns the errors of the tags this allocator refuses to serve,
// one per tag, ordered by tag; each wraps ErrRegressed and names the tag.
// It is empty while every loaded tag is served.
func (a *Allocator) Refused() []error {
	tags := *a.tags.Load()
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(tags)) {
		b := tags[name]
		b.mu.Lock()
		if b.refused != nil {
			errs = append(errs, b.refused)
		}
		b.mu.Unlock()
	}
	return errs
}

// TagStats is a snapshot of one loaded tag.
type TagStats struct {
	Tag string `json:"tag"`
	// Current is the segment being handed out and Used how many of its IDs
	// are gone; Next is the prefetched one (zero when none).
	Current Range `json:"current"`
	Used    int64 `json:"used"`
	Size    int64 `json:"size"` // IDs in the current segment
	Next    Range `json:"next"`
	// Step is the dynamic step now; MinStep the tag's configured step.
	Step    int64 `json:"step"`
	MinStep int64 `json:"min_step"`
	// Fetches and Failures count fetches from the stores; Waits the times a
	// request waited for a fetch.
	Fetches  int64 `json:"fetches"`
	Failures int64 `json:"failures"`
	Waits    int64 `json:"waits"`
	// LastFetch and MeanFetch are fetch latencies.
	LastFetch time.Duration `json:"last_fetch_ns"`
	MeanFetch time.Duration `json:"mean_fetch_ns"`
	// Issued counts IDs handed out by Next (NextID is not counted: it
	// stays one atomic add).
	Issued int64 `json:"issued"`
	// HighMark is the end of the newest segment fetched (the largest over
	// the sources): the store's max_id is never accepted below it.
	HighMark int64 `json:"high_mark"`
	// Refused is why the tag is refused (a store went backwards; see
	// Resume), empty while it is served. Regressions counts the times a
	// store was seen going backwards.
	Refused     string `json:"refused,omitempty"`
	Regressions int64  `json:"regressions"`
}

// Stats returns a snapshot of every loaded tag, in no particular order.
func (a *Allocator) Stats() []TagStats {
	var out []TagStats
	for _, b := range *a.tags.Load() {
		out = append(out, b.stats())
	}
	return out
}

func (b *buffer) stats() TagStats {
	s := b.cur.Load()
	st := TagStats{Tag: b.name, Current: s.r, Used: min(s.pos.Load(), s.count), Size: s.count,
		Fetches: b.fetches.Load(), Failures: b.failures.Load(), Waits: b.waits.Load(),
		LastFetch: time.Duration(b.lastLatency.Load()), Issued: b.issued.Load()}
	if st.Fetches > 0 {
		st.MeanFetch = time.Duration(b.fetchNanos.Load() / st.Fetches)
	}
	b.mu.Lock()
	if b.next != nil {
		st.Next = b.next.r
	}
	st.Step, st.MinStep = b.step, b.minStep
	st.HighMark = slices.Max(b.high)
	if b.refused != nil {
		st.Refused = b.refused.Error()
	}
	b.mu.Unlock()
	st.Regressions = b.regressions.Load()
	return st
}
