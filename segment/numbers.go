package segment

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// CounterMasker permutes a period's counters for a masked series;
// *idmask.Masker implements it (MaskCounter, UnmaskCounter).
type CounterMasker interface {
	MaskCounter(x, n, tweak uint64) (uint64, error)
	UnmaskCounter(y, n, tweak uint64) (uint64, error)
}

// Number is one number of a series.
type Number struct {
	// Text is the number as its template shows it: ORD-20261128-000123.
	Text string
	// Numeric is its numeric form, the period's label and then the counter
	// as shown: 20261128000123.
	Numeric int64
	// Label is the period's label (20261128) and Seq the real counter,
	// from the series' Start (it differs from the shown one when masked).
	Label, Seq int64
}

// prefetchLead is how long before a period ends its successor's first
// segment is fetched (a sixth of the period when that is shorter).
const prefetchLead = 10 * time.Second

// keptPeriods is how many periods a series keeps loaded: the current one,
// the one before (a clock stepped back a little goes on with it rather than
// fetching again) and the next, prefetched.
const keptPeriods = 3

// series is a loaded series tag.
type series struct {
	a    *Allocator
	name string
	f    *Format
	step int64
	mask CounterMasker // nil unless the series is masked
	cur  atomic.Pointer[period]

	mu     sync.Mutex
	loaded []int64 // labels whose rows' buffers are in a.tags, oldest first
	// full is the label of the newest period found full, and fullErr why.
	full    atomic.Int64
	fullErr atomic.Pointer[error]
}

// period is one period of a loaded series.
type period struct {
	label       int64
	from, until int64 // Unix ns: the instants known to have this label
	prefetchAt  int64 // Unix ns: when the next period is fetched
	b           *buffer
	before      string // the text before the counter
	after       string // the text after it
	nextStarted atomic.Bool
}

// Format returns the compiled series of a series tag, loading the tag if
// needed; a plain tag is ErrNotSeries.
func (a *Allocator) Format(ctx context.Context, tag string) (*Format, error) {
	s, err := a.seriesOf(ctx, tag)
	if err != nil {
		return nil, err
	}
	return s.f, nil
}

// NextNumber returns one number of a series tag. The period is the one the
// allocator's clock (Config.Now) is in. A period whose counters are used up
// fails with ErrPeriodFull until the next period starts; a plain tag is
// ErrNotSeries.
func (a *Allocator) NextNumber(ctx context.Context, tag string) (Number, error) {
	var n Number
	_, err := a.appendNumbers(ctx, tag, 1, nil, func(x Number) { n = x })
	return n, err
}

// NextNumbers returns n numbers of a series tag, in the order issued (all
// of one period unless the period ends while they are taken).
func (a *Allocator) NextNumbers(ctx context.Context, tag string, n int) ([]Number, error) {
	if n < 1 || n > a.cfg.MaxBatch {
		return nil, fmt.Errorf("%w: asked for %d numbers, want 1–%d", ErrInvalidCount, n, a.cfg.MaxBatch)
	}
	out := make([]Number, 0, n)
	_, err := a.appendNumbers(ctx, tag, n, nil, func(x Number) { out = append(out, x) })
	if err != nil {
		return nil, err
	}
	return out, nil
}

// AppendNumberText appends the text of one number of a series tag to dst:
// the hot path, which allocates nothing when dst has room.
func (a *Allocator) AppendNumberText(ctx context.Context, tag string, dst []byte) ([]byte, error) {
	return a.appendNumbers(ctx, tag, 1, dst, nil)
}

// appendNumbers takes n numbers; each is appended to dst, or given to each
// as a Number when each is not nil.
func (a *Allocator) appendNumbers(ctx context.Context, tag string, n int, dst []byte, each func(Number)) ([]byte, error) {
	s, err := a.seriesOf(ctx, tag)
	if err != nil {
		return dst, err
	}
	for n > 0 {
		p, err := s.period(ctx)
		if err != nil {
			return dst, err
		}
		var k int64 // the position in the period, from 0
		if n == 1 {
			id, err := p.b.nextID(ctx)
			if err != nil {
				return dst, err
			}
			k = id - 1
			if dst, err = s.emit(p, k, dst, each); err != nil {
				return dst, err
			}
			n--
			continue
		}
		spans, err := (&Handle{b: p.b}).Next(ctx, min(n, int(s.f.cap)), nil)
		if err != nil {
			return dst, err
		}
		for _, sp := range spans {
			for id := range sp.All() {
				if dst, err = s.emit(p, id-1, dst, each); err != nil {
					return dst, err
				}
				n--
			}
		}
	}
	return dst, nil
}

// emit formats the number at position k of period p.
func (s *series) emit(p *period, k int64, dst []byte, each func(Number)) ([]byte, error) {
	f := s.f
	if k < 0 || k >= f.cap {
		return dst, s.fullError(p.label)
	}
	shown := f.s.Start + k
	if s.mask != nil {
		m, err := s.mask.MaskCounter(uint64(k), uint64(f.cap), uint64(p.label))
		if err != nil {
			return dst, fmt.Errorf("%w: series %q: masking counter %d: %v", ErrInvalidTag, s.name, k, err)
		}
		shown = f.s.Start + int64(m)
	}
	if each == nil {
		dst = append(dst, p.before...)
		dst = appendPadded(dst, shown, f.width)
		return append(dst, p.after...), nil
	}
	buf := make([]byte, 0, f.size)
	buf = append(appendPadded(append(buf, p.before...), shown, f.width), p.after...)
	each(Number{Text: string(buf), Numeric: f.Numeric(p.label, shown), Label: p.label, Seq: f.s.Start + k})
	return dst, nil
}

// fullError is the error of a full period, recorded for Full.
func (s *series) fullError(label int64) error {
	err := fmt.Errorf("%w: series %q: period %d has issued all its %s numbers (%s); the next starts the counter again",
		ErrPeriodFull, s.name, label, groupDigits(s.f.cap), s.f.CapacityText())
	s.full.Store(label)
	s.fullErr.Store(&err)
	return err
}

// period returns the period the clock is in, loading it when it starts,
// and starts fetching the next one when it is near.
func (s *series) period(ctx context.Context) (*period, error) {
	now := s.a.cfg.Now()
	ns := now.UnixNano()
	p := s.cur.Load()
	if p == nil || ns < p.from || ns >= p.until {
		var err error
		if p, err = s.switchTo(ctx, now); err != nil {
			return nil, err
		}
	}
	if ns >= p.prefetchAt && !p.nextStarted.Load() && p.nextStarted.CompareAndSwap(false, true) {
		s.prefetchNext(p)
	}
	return p, nil
}

// switchTo makes the period of now current, loading its row's buffer.
func (s *series) switchTo(ctx context.Context, now time.Time) (*period, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ns := now.UnixNano()
	if p := s.cur.Load(); p != nil && ns >= p.from && ns < p.until {
		return p, nil
	}
	label := s.f.label(now)
	b, err := s.load(ctx, label)
	if err != nil {
		return nil, err
	}
	start, end, _ := s.f.bounds(label)
	p := &period{label: label, from: start.UnixNano(), until: end.UnixNano(), b: b}
	if ns < p.from || ns >= p.until {
		// A local time the zone's rules make odd (a repeated or skipped
		// hour): this instant's label is right, the bounds are not known.
		p.from, p.until = ns, ns+1
	}
	p.prefetchAt = p.until - min(int64(prefetchLead), (p.until-p.from)/6)
	p.before, p.after = s.f.render(label)
	s.cur.Store(p)
	return p, nil
}

// load returns the buffer of period label's row, creating the row when the
// period has none yet; s.mu is held. It keeps at most keptPeriods rows
// loaded, dropping the oldest (a gap, never a duplicate: its row keeps
// max_id, and a later use fetches above it).
func (s *series) load(ctx context.Context, label int64) (*buffer, error) {
	row := periodRow(s.name, label)
	// The row keeps the series' settings too, so that the series, deleted
	// and created again, can only come back with them (see Create).
	desc, err := encodeSeries(s.f.s, "period "+strconv.FormatInt(label, 10))
	if err != nil {
		return nil, err
	}
	b, err := s.a.loadBuffer(ctx, row, &Tag{Name: row, Step: s.step, MaxID: 1, Description: desc})
	if err != nil {
		return nil, err
	}
	for i, l := range s.loaded {
		if l == label {
			s.loaded = append(s.loaded[:i], s.loaded[i+1:]...)
			break
		}
	}
	s.loaded = append(s.loaded, label)
	if len(s.loaded) > keptPeriods {
		drop := s.loaded[0]
		s.loaded = s.loaded[1:]
		s.a.forget(periodRow(s.name, drop))
	}
	return b, nil
}

// prefetchNext loads the period after p in the background, so that the
// first number of the next period does not wait for the store.
func (s *series) prefetchNext(p *period) {
	a := s.a
	if a.ctx.Err() != nil {
		return
	}
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		next := s.f.label(time.Unix(0, p.until))
		if next == p.label {
			return
		}
		ctx, cancel := context.WithTimeout(a.ctx, a.cfg.FetchTimeout)
		defer cancel()
		s.mu.Lock()
		defer s.mu.Unlock()
		if _, err := s.load(ctx, next); err != nil {
			a.cfg.Logger.Warn("segment: prefetching the next period of a series failed; its first number will fetch", "tag", s.name, "period", next, "err", err)
		}
	}()
}

// forget drops a row's buffer from the loaded tags; holders of it go on.
func (a *Allocator) forget(row string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := (*a.tags.Load())[row]; ok {
		next := maps.Clone(*a.tags.Load())
		delete(next, row)
		a.tags.Store(&next)
	}
}

// seriesOf returns the loaded series tag, loading it on first use.
func (a *Allocator) seriesOf(ctx context.Context, tag string) (*series, error) {
	if s, ok := (*a.series.Load())[tag]; ok {
		return s, nil
	}
	if err := ValidName(tag); err != nil {
		return nil, err
	}
	if isPeriodRow(tag) {
		return nil, fmt.Errorf("%w: %q is a period of a series, not a tag", ErrNotSeries, tag)
	}
	t, err := a.tagRow(ctx, tag, nil)
	if err != nil {
		return nil, err
	}
	if t.Series == nil {
		return nil, fmt.Errorf("%w: tag %q hands out plain IDs (it has no period and template)", ErrNotSeries, tag)
	}
	f, err := CompileSeries(*t.Series, t.Step)
	if err != nil {
		return nil, fmt.Errorf("tag %q's stored series: %w", tag, err)
	}
	s := &series{a: a, name: tag, f: f, step: t.Step}
	s.full.Store(-1)
	if t.Series.Masked {
		if a.cfg.CounterKeys == nil {
			return nil, fmt.Errorf("%w: series %q is masked with key %d, and this allocator has no keys", ErrNoKey, tag, t.Series.KeyID)
		}
		m, err := a.cfg.CounterKeys(t.Series.KeyID)
		if err != nil {
			return nil, fmt.Errorf("%w: series %q is masked with key %d: %v", ErrNoKey, tag, t.Series.KeyID, err)
		}
		s.mask = m
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if s, ok := (*a.series.Load())[tag]; ok {
		return s, nil
	}
	next := maps.Clone(*a.series.Load())
	next[tag] = s
	a.series.Store(&next)
	return s, nil
}

// DecodeNumber reads a number of a series tag (its text or numeric form):
// the period and the counter, unmasked when the series is masked.
func (a *Allocator) DecodeNumber(ctx context.Context, tag, text string) (Decoded, error) {
	s, err := a.seriesOf(ctx, tag)
	if err != nil {
		return Decoded{}, err
	}
	f := s.f
	label, shown, err := f.Parse(text)
	if err != nil {
		return Decoded{}, err
	}
	seq := shown
	if s.mask != nil {
		k, err := s.mask.UnmaskCounter(uint64(shown-f.s.Start), uint64(f.cap), uint64(label))
		if err != nil {
			return Decoded{}, fmt.Errorf("%w: series %q: %v", ErrInvalidTag, tag, err)
		}
		seq = f.s.Start + int64(k)
	}
	start, end, _ := f.bounds(label)
	before, after := f.render(label)
	return Decoded{Label: label, Start: start, End: end, Counter: shown, Seq: seq,
		Numeric: f.Numeric(label, shown), Text: before + string(appendPadded(nil, shown, f.width)) + after}, nil
}

// Full lists the series whose current period is full: one error per series
// (wrapping ErrPeriodFull), for readiness and logs. A series leaves the
// list when its next period starts.
func (a *Allocator) Full() []error {
	var out []error
	now := a.cfg.Now()
	for _, s := range *a.series.Load() {
		if l := s.full.Load(); l >= 0 && l == s.f.label(now) {
			out = append(out, *s.fullErr.Load())
		}
	}
	return out
}

// errIsSeries is the error for plain IDs asked of a series tag.
func errIsSeries(tag string) error {
	return fmt.Errorf("%w: tag %q is a series of business numbers: ask for its numbers, not plain IDs", ErrSeries, tag)
}
