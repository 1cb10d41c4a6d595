package segment

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Create adds a tag to every source. A tag with Series set is a series of
// business numbers: its settings are checked (CompileSeries; a masked one
// needs its key in Config.CounterKeys) and kept in the row's description
// (see Series), its name is at most MaxSeriesNameLen characters, and its
// periods get rows of their own, <tag>::<label>, as they start. Names with
// "::" are kept for those rows.
func (a *Allocator) Create(ctx context.Context, t Tag) error {
	if t.Step == 0 {
		t.Step = a.cfg.DefaultStep
	}
	if err := ValidateTag(t); err != nil {
		return err
	}
	if isPeriodRow(t.Name) {
		return fmt.Errorf("%w: tag %q: names with %q are kept for the periods of series", ErrInvalidTag, clip(t.Name), periodSep)
	}
	if t.Series != nil {
		if len(t.Name) > MaxSeriesNameLen {
			return fmt.Errorf("%w: series tag %q is %d characters long, want at most %d (its periods' rows add their label)", ErrInvalidTag, clip(t.Name), len(t.Name), MaxSeriesNameLen)
		}
		if _, err := CompileSeries(*t.Series, t.Step); err != nil {
			return fmt.Errorf("tag %q: %w", t.Name, err)
		}
		if t.Series.Masked {
			if a.cfg.CounterKeys == nil {
				return fmt.Errorf("%w: series %q is to be masked, and this allocator has no mask keys", ErrNoKey, t.Name)
			}
			if _, err := a.cfg.CounterKeys(t.Series.KeyID); err != nil {
				return fmt.Errorf("%w: series %q is to be masked with key %d: %v", ErrNoKey, t.Name, t.Series.KeyID, err)
			}
		} else if t.Series.KeyID != 0 {
			return fmt.Errorf("%w: series %q: a key id (%d) without masking", ErrInvalidTag, t.Name, t.Series.KeyID)
		}
		d, err := encodeSeries(*t.Series, t.Description)
		if err != nil {
			return fmt.Errorf("tag %q: %w", t.Name, err)
		}
		if err := a.sameAsBefore(ctx, t.Name, *t.Series); err != nil {
			return err
		}
		t.Description, t.Series = d, nil
	} else if strings.HasPrefix(t.Description, seriesMark) {
		return fmt.Errorf("%w: tag %q: a description starting %q is kept for series settings", ErrInvalidTag, t.Name, seriesMark)
	}
	return a.createRow(ctx, t)
}

// sameAsBefore checks that a series about to be created has the settings
// of the periods' rows its name already has (a series deleted earlier):
// other settings could print, in a period that kept its counter, a number
// the old ones printed. A name without such rows is free.
func (a *Allocator) sameAsBefore(ctx context.Context, name string, s Series) error {
	for _, src := range a.cfg.Sources {
		rows, err := src.Store.List(ctx)
		if err != nil {
			return err
		}
		for _, r := range rows {
			if !strings.HasPrefix(r.Name, name+periodSep) {
				continue
			}
			old, _, err := decodeSeries(r.Description)
			if err != nil || old == nil {
				return fmt.Errorf("%w: tag %q: the store has the period row %q, whose settings do not read; choose another name", ErrInvalidTag, name, r.Name)
			}
			if *old != s {
				return fmt.Errorf("%w: series %q existed before with the settings %+v, and its periods' rows are kept: create it again with the same settings (or choose another name), so that no number is printed twice", ErrInvalidTag, name, *old)
			}
			break
		}
	}
	return nil
}

// createRow creates the row t in every source, each with its share (see
// rowShare).
func (a *Allocator) createRow(ctx context.Context, t Tag) error {
	n := len(a.cfg.Sources)
	if n > 1 && a.cfg.recorded() && (t.Delta != 0 || t.Remainder != 0) {
		return fmt.Errorf("%w: tag %q: delta %d and remainder %d for all %d stores would collide: "+
			"leave them 0 (store i of n then serves the IDs ≡ i (mod n)), or create the tag in one store at a time",
			ErrInvalidTag, t.Name, t.Delta, t.Remainder, n)
	}
	period := n > 1 && a.cfg.recorded() && isPeriodRow(t.Name)
	created := 0
	var errs []error
	for si, src := range a.cfg.Sources {
		row, err := a.rowShare(ctx, si, t)
		if err == nil {
			err = src.Store.Create(ctx, row)
		}
		switch {
		case err == nil, period && errors.Is(err, ErrTagExists):
			created++
		case period && (errors.Is(err, ErrUnavailable) || errors.Is(err, ErrUnknownTag)):
			// A store that is down (or lost the series) gets no row for
			// the period: it serves no share of it, which is safe.
			errs = append(errs, err)
		default:
			return err
		}
	}
	if created == 0 {
		return errors.Join(errs...)
	}
	return nil
}

// Delete takes a tag out of service in every source and keeps its max_id
// there (Store.Delete): creating the name again continues above every ID
// it handed out. This allocator stops serving the tag at once and gives up
// what it buffered (a gap, never a duplicate); another allocator on the
// same store stops at its next fetch, after at most its buffered IDs. A
// tag no source has (or had deleted already) is ErrUnknownTag.
//
// A series tag's periods keep their rows, so that the series, created
// again, continues every period's counter above what it issued.
func (a *Allocator) Delete(ctx context.Context, tag string) error {
	if err := ValidName(tag); err != nil {
		return err
	}
	if isPeriodRow(tag) {
		return fmt.Errorf("%w: %q is a period of a series; delete the series", ErrInvalidTag, tag)
	}
	var unknown error
	deleted := 0
	for _, src := range a.cfg.Sources {
		err := src.Store.Delete(ctx, tag)
		switch {
		case err == nil:
			deleted++
		case errors.Is(err, ErrUnknownTag):
			unknown = err // a source that lost the tag, or an earlier partial Delete
		default:
			return err
		}
	}
	a.mu.Lock()
	if b, ok := (*a.tags.Load())[tag]; ok {
		next := maps.Clone(*a.tags.Load())
		delete(next, tag)
		a.tags.Store(&next)
		b.retire(fmt.Errorf("%w: %q was deleted", ErrUnknownTag, tag))
	}
	if _, ok := (*a.series.Load())[tag]; ok {
		next := maps.Clone(*a.series.Load())
		delete(next, tag)
		a.series.Store(&next)
		gone := fmt.Errorf("%w: series %q was deleted", ErrUnknownTag, tag)
		tags := maps.Clone(*a.tags.Load())
		for name, b := range tags {
			if strings.HasPrefix(name, tag+periodSep) {
				delete(tags, name)
				b.retire(gone)
			}
		}
		a.tags.Store(&tags)
	}
	a.mu.Unlock()
	if deleted == 0 {
		return unknown
	}
	return nil
}

// Tags lists the tags of the first source that answers, with each series
// tag's settings in Series (and its own description in Description). The
// rows of series' periods are left out. A series whose stored settings do
// not read is listed as it is stored, without Series.
func (a *Allocator) Tags(ctx context.Context) ([]Tag, error) {
	var lastErr error
	for _, src := range a.cfg.Sources {
		ts, err := src.Store.List(ctx)
		if err == nil {
			out := ts[:0]
			for _, t := range ts {
				if isPeriodRow(t.Name) {
					continue
				}
				if st, err := readSeries(t); err == nil {
					t = st
				}
				out = append(out, t)
			}
			return out, nil
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
	if isPeriodRow(tag) {
		return fmt.Errorf("%w: %q is a period of a series; update the series", ErrInvalidTag, tag)
	}
	if description != nil && strings.HasPrefix(*description, seriesMark) {
		return fmt.Errorf("%w: tag %q: a description starting %q is kept for series settings", ErrInvalidTag, tag, seriesMark)
	}
	if t, err := a.tagRow(ctx, tag, nil); err != nil {
		return err
	} else if t.Series != nil {
		// A series keeps its settings in the description: write them again
		// with the new description, and check the step against a period.
		f, err := CompileSeries(*t.Series, 1)
		if err != nil {
			return fmt.Errorf("tag %q's stored series: %w", tag, err)
		}
		if step != nil && *step > f.Capacity() {
			return fmt.Errorf("%w: series %q: step %d is more than the %s numbers a period holds", ErrInvalidTag, tag, *step, groupDigits(f.Capacity()))
		}
		if description != nil {
			d, err := encodeSeries(*t.Series, *description)
			if err != nil {
				return fmt.Errorf("tag %q: %w", tag, err)
			}
			description = &d
		}
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
				ErrRegressed, tag, a.cfg.sourceLabel(si), t.MaxID, max(high[si], floor), tag)
		}
	}
	var shares []share // a store's changed delta and remainder are served from now on
	if len(a.cfg.Sources) > 1 && a.cfg.recorded() {
		var err error
		if shares, err = a.readShares(ctx, tag); err != nil {
			return fmt.Errorf("not resumed: %w", err)
		}
	}
	if refused == nil {
		return nil
	}
	b.mu.Lock()
	if b.refused == refused { // no fetch ran while refused, so high is as checked
		b.refused, b.fetchErr = nil, nil
		b.strides = shares
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
