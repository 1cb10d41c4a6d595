package segment

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// share is the IDs of a tag one source serves: those ≡ remainder (mod
// delta). The zero share is unknown (or none recorded).
type share struct{ delta, remainder int64 }

func (s share) String() string {
	if s.delta <= 1 {
		return "every ID"
	}
	return fmt.Sprintf("the IDs ≡ %d (mod %d)", s.remainder, s.delta)
}

// gcd is the greatest common divisor of two positive numbers.
func gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// overlaps reports whether two shares hold a common ID: by the Chinese
// remainder theorem, exactly when their remainders agree modulo the
// greatest common divisor of their deltas.
func (s share) overlaps(o share) bool {
	g := gcd(max(s.delta, 1), max(o.delta, 1))
	return (s.remainder-o.remainder)%g == 0
}

// collision returns a source other than si whose known share overlaps s.
func collision(shares []share, si int, s share) (int, share, bool) {
	for sj, o := range shares {
		if sj != si && o.delta != 0 && s.overlaps(o) {
			return sj, o, true
		}
	}
	return 0, share{}, false
}

// errNoShare is the error of a tag that a store, one of n serving it,
// records no share of: it would serve every ID, as every other store does.
func errNoShare(tag, source string, n int) error {
	return fmt.Errorf("%w: tag %q: %s records no delta and remainder for it, and it is one of %d stores serving it: "+
		"it would serve every ID, colliding with the others; nothing is issued from it (create the tag in each store with its own remainder)",
		ErrInvalidConfig, tag, source, n)
}

// readShares reads the shares every source records for a tag, before the
// allocator issues from any of them, and refuses a tag whose shares
// collide (naming both sources) or that a store serves without a share. A
// source that is down, or has no row for the tag, is left unknown (zero):
// its share is checked when a fetch from it returns it.
func (a *Allocator) readShares(ctx context.Context, tag string) ([]share, error) {
	shares := make([]share, len(a.cfg.Sources))
	for si, src := range a.cfg.Sources {
		t, err := src.Store.Get(ctx, tag)
		if err != nil {
			continue
		}
		if t.Delta == 0 {
			return nil, errNoShare(tag, a.cfg.sourceName(si), len(a.cfg.Sources))
		}
		s := share{t.Delta, t.Remainder}
		if sj, o, ok := collision(shares, si, s); ok {
			return nil, errCollide(tag, a.cfg.sourceName(sj), o, a.cfg.sourceName(si), s)
		}
		shares[si] = s
	}
	return shares, nil
}

func errCollide(tag, a string, as share, b string, bs share) error {
	return fmt.Errorf("%w: tag %q: %s serves %s and %s %s: they would issue the same IDs; nothing is issued from this tag until one of them is corrected",
		ErrInvalidConfig, tag, a, as, b, bs)
}

// rowShare is the row t to create in source si: with several sources that
// record their shares, store i of n serves the IDs ≡ i (mod n) of a new
// tag, and a series' period row the share its series has in that store;
// with configured shares, the source's; else t as given.
func (a *Allocator) rowShare(ctx context.Context, si int, t Tag) (Tag, error) {
	src, n := a.cfg.Sources[si], len(a.cfg.Sources)
	switch {
	case n > 1 && a.cfg.recorded() && isPeriodRow(t.Name):
		parent, err := src.Store.Get(ctx, t.Name[:strings.Index(t.Name, periodSep)])
		if err != nil {
			return Tag{}, err
		}
		if parent.Delta == 0 {
			return Tag{}, errNoShare(parent.Name, a.cfg.sourceName(si), n)
		}
		t.Delta, t.Remainder = parent.Delta, parent.Remainder
	case n > 1 && a.cfg.recorded():
		t.Delta, t.Remainder = int64(n), int64(si)
	case src.Delta > 1:
		t.Delta, t.Remainder = src.Delta, src.Remainder
	}
	return t, nil
}

// CheckStrides reads every tag of every source and checks the shares of
// each tag's IDs the sources serve, so that a configuration that could
// issue an ID twice is refused before it serves (a server runs it at
// start):
//
//   - every recorded share agrees with a configured one (Source.Delta);
//   - with several sources that record their shares: every store records
//     one; no two stores' shares of a tag overlap (the error names both);
//     and, when every source could be read, the stores' shares of each
//     tag together cover every ID (all share one delta, each remainder
//     served once), so that a store left out of the list is noticed. The
//     rows of series' periods need not cover: a store down when a period
//     began has none.
//
// Problems are returned joined, wrapping ErrInvalidConfig, each naming the
// tag and the sources. A source that could not be read adds an error
// wrapping ErrUnavailable (and no ErrInvalidConfig of its own): the tags it
// holds are checked when the allocator first reads them.
func (a *Allocator) CheckStrides(ctx context.Context) error {
	type entry struct {
		si int
		s  share
	}
	byTag := map[string][]entry{}
	var unavailable []error
	for si, src := range a.cfg.Sources {
		ts, err := src.Store.List(ctx)
		if err != nil {
			unavailable = append(unavailable, fmt.Errorf("%s not checked: %w", a.cfg.sourceName(si), err))
			continue
		}
		for _, t := range ts {
			byTag[t.Name] = append(byTag[t.Name], entry{si, share{t.Delta, t.Remainder}})
		}
	}
	n := len(a.cfg.Sources)
	var problems []error
	for _, tag := range slices.Sorted(func(yield func(string) bool) {
		for k := range byTag {
			if !yield(k) {
				return
			}
		}
	}) {
		es := byTag[tag]
		if !a.cfg.recorded() {
			for _, e := range es {
				src := a.cfg.Sources[e.si]
				if e.s.delta > 0 && src.Delta > 1 && e.s != (share{src.Delta, src.Remainder}) {
					problems = append(problems, fmt.Errorf("%w: tag %q: %s records %s, and is configured to serve %s",
						ErrInvalidConfig, tag, a.cfg.sourceName(e.si), e.s, share{src.Delta, src.Remainder}))
				}
			}
			continue
		}
		if n == 1 {
			continue
		}
		bad := false
		for i, e := range es {
			if e.s.delta == 0 {
				problems = append(problems, errNoShare(tag, a.cfg.sourceName(e.si), n))
				bad = true
				continue
			}
			for _, o := range es[:i] {
				if o.s.delta != 0 && e.s.overlaps(o.s) {
					problems = append(problems, errCollide(tag, a.cfg.sourceName(o.si), o.s, a.cfg.sourceName(e.si), e.s))
					bad = true
				}
			}
		}
		if bad || len(unavailable) > 0 || isPeriodRow(tag) {
			continue
		}
		if err := a.covers(tag, func(yield func(int, share) bool) {
			for _, e := range es {
				if !yield(e.si, e.s) {
					return
				}
			}
		}); err != nil {
			problems = append(problems, err)
		}
	}
	const most = 20
	if len(problems) > most {
		problems = append(problems[:most], fmt.Errorf("%w: and %d more", ErrInvalidConfig, len(problems)-most))
	}
	return errors.Join(append(problems, unavailable...)...)
}

// covers checks that the shares of a tag, which do not overlap, serve
// every ID: one delta for all, and as many stores as the delta.
func (a *Allocator) covers(tag string, shares func(yield func(int, share) bool)) error {
	var delta int64
	first := -1
	served := map[int64]bool{}
	var list []string
	for si, s := range shares {
		list = append(list, fmt.Sprintf("%s: %s", a.cfg.sourceName(si), s))
		if first < 0 {
			first, delta = si, s.delta
		} else if s.delta != delta {
			return fmt.Errorf("%w: tag %q: %s has delta %d and %s delta %d: every store of a tag must share one",
				ErrInvalidConfig, tag, a.cfg.sourceName(first), delta, a.cfg.sourceName(si), s.delta)
		}
		served[s.remainder] = true
	}
	if r := int64(0); int64(len(served)) < delta {
		for served[r] {
			r++
		}
		return fmt.Errorf("%w: tag %q: no store serves the IDs ≡ %d (mod %d) (%s): is a store missing from the list, or the tag from a store?",
			ErrInvalidConfig, tag, r, delta, strings.Join(list, "; "))
	}
	return nil
}
