// Package suggest finds what a misspelt name was meant to be: the
// candidate fewest edits away, when it is near enough to help. The flakeid
// command uses it for flags, config keys and environment variables, and the
// backends for the query parameters of their URLs.
package suggest

import (
	"strings"
	"unicode/utf8"
)

// EditDistance is the number of single-rune edits (insertions, deletions,
// substitutions, and swaps of two adjacent runes) that turn a into b: the
// optimal-string-alignment variant of the Damerau–Levenshtein distance. It
// is case-sensitive; callers that want otherwise fold case first.
func EditDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	// Three rows of the dynamic-programming table: two back (for swaps),
	// one back, and the one being filled.
	prev2 := make([]int, len(rb)+1)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d := min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d = min(d, prev2[j-2]+1)
			}
			cur[j] = d
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(rb)]
}

// MaxDistance is how many edits away a candidate may be from name and
// still be offered as what name was meant to be: max(2, a third of name's
// length). Further than that, a suggestion is more likely to mislead than to
// help.
func MaxDistance(name string) int {
	return max(2, utf8.RuneCountInString(name)/3)
}

// Nearest returns the candidate most likely meant by name, a misspelt or
// mistyped one: the candidate fewest edits away (comparing without regard to
// case), if that is at most MaxDistance(name). Ties go to the
// candidate first in sort order, so the answer does not depend on the
// candidates' order. ok is false when no candidate is that near.
func Nearest(name string, candidates []string) (best string, ok bool) {
	limit := MaxDistance(name)
	lname := strings.ToLower(name)
	n := utf8.RuneCountInString(lname)
	bestDist := limit + 1
	for _, c := range candidates {
		lc := strings.ToLower(c)
		// The lengths alone bound the distance from below; skipping far
		// candidates also keeps a huge name from costing len×len work.
		if m := utf8.RuneCountInString(lc); m-n > limit || n-m > limit {
			continue
		}
		d := EditDistance(lname, lc)
		if d < bestDist || (d == bestDist && ok && c < best) {
			best, bestDist, ok = c, d, true
		}
	}
	return best, ok
}
