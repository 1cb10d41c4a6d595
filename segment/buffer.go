package segment

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flakeid/flakeid/internal/backoff"
)

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

// newSegment is the segment of range r, whose IDs ≡ rem (mod delta) are
// handed out.
func newSegment(r Range, delta, rem int64, source int, prefetch float64, fetched time.Time, step int64) *segment {
	first := r.Start + ((rem-r.Start%delta)%delta+delta)%delta
	s := &segment{first: first, delta: delta, r: r, source: source, fetched: fetched, step: step}
	if first < r.End {
		s.count = (r.End - first + delta - 1) / delta
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
	// strides[i] is the share source i's store records for the tag, zero
	// until a read or a fetch from it returned one (see stride).
	strides []share
	// refused is why the tag is refused (it wraps ErrRegressed), nil while
	// it is served. Once set, no fetch starts and no ID is handed out
	// until Resume clears it.
	refused error
	// epoch counts refusals and resumptions: a fetch that started in an
	// earlier epoch answered from a store state the operator has dealt
	// with since, and is discarded rather than judged.
	epoch uint64
	// gone is why the buffer no longer serves (it wraps ErrUnknownTag):
	// its tag was deleted (Allocator.Delete). Set once; a Handle that still
	// holds the buffer fails with it, and the tag, created again, gets a
	// new buffer.
	gone error
	// regressions counts the times a source was seen going backwards.
	regressions atomic.Int64
	// pinned keeps the step at the row's (a series' period row).
	pinned bool

	fetches, waits, failures atomic.Int64
	fetchNanos               atomic.Int64 // total latency of successful fetches
	lastLatency              atomic.Int64
	issued                   atomic.Int64
}

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

// buffer returns the tag's buffer, creating it and fetching its first
// segment on first use. A series tag or a series' period row is refused:
// their numbers come from NextNumber.
func (a *Allocator) buffer(ctx context.Context, name string) (*buffer, error) {
	if b, ok := (*a.tags.Load())[name]; ok && !b.pinned {
		return b, nil
	}
	if err := ValidName(name); err != nil {
		return nil, err
	}
	if isPeriodRow(name) {
		return nil, fmt.Errorf("%w: %q is a period of a series, not a tag", ErrUnknownTag, name)
	}
	return a.loadBuffer(ctx, name, nil)
}

// loadBuffer is buffer for a name already checked. A series' period row
// (create not nil) is created from create when it does not exist, and
// keeps its step (no dynamic step: the waste at a period's end stays
// within one step).
func (a *Allocator) loadBuffer(ctx context.Context, name string, create *Tag) (*buffer, error) {
	if b, ok := (*a.tags.Load())[name]; ok {
		return b, nil
	}
	if a.ctx.Err() != nil {
		return nil, ErrClosed
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if b, ok := (*a.tags.Load())[name]; ok {
		return b, nil
	}
	b := &buffer{a: a, name: name, high: make([]int64, len(a.cfg.Sources)), pinned: create != nil}
	t, err := a.tagRow(ctx, name, create)
	if err != nil {
		return nil, err
	}
	if t.Series != nil && create == nil {
		return nil, errIsSeries(name)
	}
	if src := a.cfg.Sources[0]; len(a.cfg.Sources) == 1 && t.Delta > 0 && src.Delta > 1 && (t.Delta != src.Delta || t.Remainder != src.Remainder) {
		return nil, fmt.Errorf("%w: tag %q: the store records delta %d and remainder %d, the source is configured with delta %d and remainder %d; nothing is issued from it",
			ErrInvalidConfig, name, t.Delta, t.Remainder, src.Delta, src.Remainder)
	}
	if len(a.cfg.Sources) > 1 && a.cfg.recorded() {
		if b.strides, err = a.readShares(ctx, name); err != nil {
			return nil, err
		}
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

// nextStep applies the dynamic-step rule; b.mu is held. The rate is
// measured over the last segment used up, from when it became current to
// when it ran out, so a step just changed does not skew it (Leaf measures
// the time between fetches instead, which mixes segments of different sizes
// and makes the step oscillate).
func (b *buffer) nextStep() int64 {
	d := b.a.cfg.SegmentDuration
	if d < 0 || b.rate == 0 || b.pinned {
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
	b.refreshStep(ctx)
	b.mu.Lock()
	step := b.nextStep()
	b.mu.Unlock()
	return b.fetchSize(ctx, max((step+1)/2, 1), step) // half a step: two buffers hold at most one
}

// fetchSize fetches a range of size IDs from the sources, trying each in
// turn; step is the dynamic step the segment is recorded with.
func (b *buffer) fetchSize(ctx context.Context, size, step int64) (*segment, error) {
	a := b.a
	b.mu.Lock()
	now := a.cfg.Now()
	epoch := b.epoch
	b.mu.Unlock()
	var errs []error
	start := int(a.rr.Add(1))
	for k := range a.cfg.Sources {
		si := (start + k) % len(a.cfg.Sources)
		src := a.cfg.Sources[si]
		fctx, cancel := context.WithTimeout(ctx, a.cfg.FetchTimeout)
		t0 := time.Now()
		size := max(size, b.knownDelta(si)) // a range of delta IDs holds one of every share
		floor := b.highOf(si)
		r, err := src.Store.Fetch(fctx, b.name, size)
		if errors.Is(err, ErrUnknownTag) && a.cfg.AutoCreate {
			// Deleted since this buffer began: created again on use, as a
			// new tag is. The store kept the deleted tag's max_id, so it
			// continues above (and a row lost instead is caught below as a
			// store gone backwards).
			if cerr := a.Create(fctx, Tag{Name: b.name, Step: a.cfg.DefaultStep, Description: "created on first use"}); cerr == nil || errors.Is(cerr, ErrTagExists) {
				r, err = src.Store.Fetch(fctx, b.name, size)
			}
		}
		cancel()
		if err != nil {
			errs = append(errs, err)
			if errors.Is(err, ErrUnknownTag) && len(a.cfg.Sources) == 1 || errors.Is(err, ErrExhausted) || ctx.Err() != nil {
				break // (with several stores, one may lack a tag, or a series' period begun while it was down)
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
		if err := b.advanceHigh(si, r, epoch, floor); err != nil {
			return nil, err
		}
		delta, rem, err := b.stride(si, r)
		if errors.Is(err, ErrRegressed) {
			return nil, err
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		seg := newSegment(r, delta, rem, si, a.cfg.Prefetch, now, step)
		if seg.count == 0 && size < delta {
			// The share was not known before this fetch: the range (a gap)
			// was narrower than the delta. One more, as wide as the delta.
			fctx, cancel := context.WithTimeout(ctx, a.cfg.FetchTimeout)
			floor := b.highOf(si)
			r, err = src.Store.Fetch(fctx, b.name, delta)
			cancel()
			if err == nil {
				err = b.advanceHigh(si, r, epoch, floor)
				if errors.Is(err, ErrRegressed) {
					return nil, err
				}
			}
			if err == nil && (r.End != r.Start+delta || r.Delta != 0 && (r.Delta != delta || r.Remainder != rem)) {
				err = fmt.Errorf("%w: tag %q%s: the store answered [%d, %d) with delta %d and remainder %d to a fetch of %d IDs with delta %d and remainder %d; nothing is issued from it",
					ErrUnavailable, b.name, b.source(si), r.Start, r.End, r.Delta, r.Remainder, delta, delta, rem)
			}
			if err != nil {
				errs = append(errs, err)
				continue
			}
			seg = newSegment(r, delta, rem, si, a.cfg.Prefetch, now, step)
		}
		if seg.count == 0 {
			errs = append(errs, fmt.Errorf("range [%d, %d) of tag %q holds no ID ≡ %d (mod %d)", r.Start, r.End, b.name, rem, delta))
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

// stride is the delta and remainder of the IDs a range r fetched from
// source si holds: the ones the store records for the tag (Range.Delta),
// else the Source's configured ones, else every ID when the source is the
// only one. Refused, the fetch's range is given up, never handed out: a
// recorded share that contradicts the Source's configured one; none
// recorded in one of several sources that record theirs; a share that
// changed since an earlier fetch of this buffer, or that collides with
// another source's (these two also refuse the tag until Resume).
func (b *buffer) stride(si int, r Range) (delta, rem int64, err error) {
	cfg := &b.a.cfg
	src := cfg.Sources[si]
	if r.Delta == 0 {
		switch {
		case src.Delta > 0:
			return src.Delta, src.Remainder, nil
		case len(cfg.Sources) == 1:
			return 1, 0, nil
		}
		return 0, 0, errNoShare(b.name, cfg.sourceName(si), len(cfg.Sources))
	}
	if r.Delta < 1 || r.Remainder < 0 || r.Remainder >= r.Delta {
		return 0, 0, fmt.Errorf("%w: tag %q%s: the store records delta %d and remainder %d, want delta ≥ 1 and remainder 0–delta−1",
			ErrUnavailable, b.name, b.source(si), r.Delta, r.Remainder)
	}
	if src.Delta > 1 && (src.Delta != r.Delta || src.Remainder != r.Remainder) {
		return 0, 0, fmt.Errorf("%w: tag %q%s: the store records delta %d and remainder %d, the source is configured with delta %d and remainder %d; nothing is issued from it",
			ErrInvalidConfig, b.name, b.source(si), r.Delta, r.Remainder, src.Delta, src.Remainder)
	}
	got := share{r.Delta, r.Remainder}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.strides == nil {
		b.strides = make([]share, len(cfg.Sources))
	}
	var err2 error
	if old := b.strides[si]; old.delta != 0 && old != got {
		err2 = fmt.Errorf("%w: %w: tag %q%s: the store's delta and remainder changed from %d, %d to %d, %d while it was served: "+
			"no ID is issued from this tag until an operator resumes it (then the new ones are served)",
			ErrRegressed, ErrInvalidConfig, b.name, b.source(si), old.delta, old.remainder, got.delta, got.remainder)
	} else if sj, other, ok := collision(b.strides, si, got); ok {
		err2 = fmt.Errorf("%w: %w: tag %q: %s serves the IDs ≡ %d (mod %d) and %s those ≡ %d (mod %d): they would issue the same IDs; "+
			"no ID is issued from this tag until its shares are corrected and an operator resumes it",
			ErrRegressed, ErrInvalidConfig, b.name, cfg.sourceName(sj), other.remainder, other.delta, cfg.sourceName(si), got.remainder, got.delta)
	}
	if err2 != nil {
		if b.refused == nil {
			b.refuseLocked(err2)
			b.a.cfg.Logger.Error("segment: a store's share of a tag changed or collides with another's; refusing the tag until an operator resumes it", "tag", b.name, "err", err2)
		}
		return 0, 0, err2
	}
	b.strides[si] = got
	return got.delta, got.remainder, nil
}

// knownDelta is the delta of the share source si serves, as far as this
// buffer knows it yet (configured, or read from the store); 1 if unknown.
func (b *buffer) knownDelta(si int) int64 {
	if d := b.a.cfg.Sources[si].Delta; d > 0 {
		return d
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.strides != nil && b.strides[si].delta > 0 {
		return b.strides[si].delta
	}
	return 1
}

// source names source si in messages when there are several.
func (b *buffer) source(si int) string { return b.a.cfg.sourceLabel(si) }

// sourceLabel names source si in messages, " (name)", when there are
// several; nothing when there is one.
func (c Config) sourceLabel(si int) string {
	if len(c.Sources) == 1 {
		return ""
	}
	return " (" + c.sourceName(si) + ")"
}

// highOf is the end of the newest range fetched from source si so far: a
// fetch that starts now must answer at or above it (see advanceHigh).
func (b *buffer) highOf(si int) int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.high[si]
}

// advanceHigh checks a range r just fetched from source si against floor,
// the end of the newest range fetched from it before this fetch began
// (highOf), and records r's end as the newest when it is. A range that
// starts below floor means the store went backwards: the tag is refused,
// its buffered segments are given up (waste, never a duplicate), and the
// error, wrapping ErrRegressed, is logged once and returned. Fetches in
// flight together (a TakeSegment beside the buffer's own refill) may
// finish in either order: only a fetch that finished before this one began
// bounds it.
func (b *buffer) advanceHigh(si int, r Range, epoch uint64, floor int64) error {
	b.mu.Lock()
	high := floor
	if r.Start >= high {
		b.high[si] = max(b.high[si], r.End)
		b.mu.Unlock()
		return nil
	}
	if b.epoch != epoch || b.refused != nil {
		b.mu.Unlock()
		return fmt.Errorf("%w: tag %q%s: a fetch that started before the tag was refused or resumed answered [%d, %d); discarded",
			ErrUnavailable, b.name, b.source(si), r.Start, r.End)
	}
	err := fmt.Errorf("%w: tag %q%s: fetched up to %d, store now at %d: "+
		"restored from an old backup? no ID is issued from this tag until an operator resumes it",
		ErrRegressed, b.name, b.source(si), high, r.Start)
	b.refuseLocked(err)
	b.mu.Unlock()
	b.a.cfg.Logger.Error("segment: a store went backwards; refusing the tag until an operator resumes it",
		"tag", b.name, "source", si, "fetched_to", high, "store_at", r.Start, "err", err)
	return err
}

// refuseLocked refuses the tag with err (wrapping ErrRegressed) until
// Resume: its buffered segments are given up (waste, never a duplicate).
// b.mu is held.
func (b *buffer) refuseLocked(err error) {
	b.epoch++
	b.refused = err
	if s := b.cur.Load(); s != nil {
		s.dropped = true
		s.pos.Store(s.count) // takers after this see it used up and stop in advance
	}
	b.next = nil
	b.regressions.Add(1)
}

// retire stops the buffer for good: its tag was deleted. The rest of its
// segments is given up (a gap, never a duplicate); takers fail with err.
func (b *buffer) retire(err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.gone = err
	if s := b.cur.Load(); s != nil {
		s.dropped = true
		s.pos.Store(s.count) // takers after this see it used up and stop in advance
	}
	b.next = nil
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
	if b.fetching || b.next != nil || b.refused != nil || b.gone != nil || b.a.ctx.Err() != nil {
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
		if err := b.gone; err != nil {
			b.mu.Unlock()
			return err
		}
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
