package suggest

import (
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestEditDistance(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"", "", 0},
		{"", "abc", 3},
		{"abc", "", 3},
		{"listen", "listen", 0},
		{"coordinater", "coordinator", 1}, // substitution
		{"listn", "listen", 1},            // insertion
		{"listeen", "listen", 1},          // deletion
		{"lsiten", "listen", 1},           // adjacent swap
		{"ca", "abc", 3},                  // OSA, not unrestricted Damerau (2)
		{"kitten", "sitting", 3},
		{"Listen", "listen", 1}, // case-sensitive
		{"µs", "ms", 1},         // runes, not bytes
	} {
		if got := EditDistance(tc.a, tc.b); got != tc.want {
			t.Errorf("EditDistance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
		if got := EditDistance(tc.b, tc.a); got != tc.want {
			t.Errorf("EditDistance(%q, %q) = %d, want %d (symmetry)", tc.b, tc.a, got, tc.want)
		}
	}
}

func TestNearest(t *testing.T) {
	t.Parallel()
	keys := []string{"coordinator", "listen", "max_count", "mask_bits", "mask_key", "max_wait", "tag", "tags", "token"}
	for _, tc := range []struct {
		name, want string
	}{
		{"coordinater", "coordinator"},
		{"cordinator", "coordinator"},
		{"COORDINATOR", "coordinator"}, // case is ignored
		{"listn", "listen"},
		{"max-count", "max_count"},
		{"maxcount", "max_count"},
		{"mask_bitz", "mask_bits"},
		{"tagz", "tag"},                    // a tie between tag and tags goes to the first in sort order
		{"tokn", "token"},                  // 1 edit
		{"coordinat", "coordinator"},       // 2 edits, within max(2, 9/3)
		{"bits", ""},                       // 3 edits from tags: too far for a 4-letter name
		{"zzzzzzzzzz", ""},                 // nothing near
		{"", ""},                           // 3 edits from tag: beyond max(2, 0)
		{"x_coordinator_y", "coordinator"}, // 4 edits, within max(2, 15/3)
	} {
		got, ok := Nearest(tc.name, keys)
		if got != tc.want || ok != (tc.want != "") {
			t.Errorf("Nearest(%q) = %q, %v; want %q", tc.name, got, ok, tc.want)
		}
	}
	if _, ok := Nearest("listen", nil); ok {
		t.Error("nearest with no candidates found one")
	}
}

// FuzzNearest: the edit distance is a symmetric measure bounded by the
// lengths, and nearest only suggests a candidate within the limit.
func FuzzNearest(f *testing.F) {
	f.Add("coordinater", "coordinator")
	f.Add("listn", "listen")
	f.Add("lsiten", "listen")
	f.Add("", "tag")
	f.Add("µs", "ms")
	f.Add("\xff\xfe", "a")
	f.Fuzz(func(t *testing.T, a, b string) {
		d := EditDistance(a, b)
		la, lb := utf8.RuneCountInString(a), utf8.RuneCountInString(b)
		if d != EditDistance(b, a) || d < max(la, lb)-min(la, lb) || d > max(la, lb) || (d == 0) != slices.Equal([]rune(a), []rune(b)) {
			t.Fatalf("EditDistance(%q, %q) = %d", a, b, d)
		}
		if got, ok := Nearest(a, []string{b}); ok {
			if got != b || EditDistance(strings.ToLower(a), strings.ToLower(b)) > MaxDistance(a) {
				t.Fatalf("Nearest(%q, [%q]) = %q", a, b, got)
			}
		}
	})
}
