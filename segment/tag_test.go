package segment_test

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/flakeid/flakeid/segment"
)

// rule is the rule every refusal of ValidName states.
const rule = `a tag is 1–128 of A–Z a–z 0–9 - _ . : (not "." or "..")`

// TestTagValidName: the characters, the length and the names "." and ".."
// are checked, and a refusal names what broke the rule as a character.
func TestTagValidName(t *testing.T) {
	for _, ok := range []string{"a", "orders", "A.b_c", "shop-1:orders:2026", "...", ".a", "a..b",
		"-", "_", ":", "0", strings.Repeat("x", 128), strings.Repeat(".", 128)} {
		if err := segment.ValidName(ok); err != nil {
			t.Errorf("ValidName(%q): %v", ok, err)
		}
	}
	for _, tc := range []struct {
		name string
		want string // the message, after "segment: invalid tag: " and before "; " + rule
	}{
		{"订单", `tag "订单" has '订' (U+8BA2) at character 1`},
		{"ab订单", `tag "ab订单" has '订' (U+8BA2) at character 3`},
		{"/", `tag "/" has '/' (U+002F) at character 1`},
		{"a/b", `tag "a/b" has '/' (U+002F) at character 2`},
		{".", `tag "." is not allowed`},
		{"..", `tag ".." is not allowed`},
		{"", `the tag is empty`},
		{strings.Repeat("x", 129), `tag "` + strings.Repeat("x", 40) + `…" is 129 characters long`},
		{"\xe8", `tag "\xe8" has byte 0xE8 at byte 1, not UTF-8`},
		{"ab\xe8\x80", `tag "ab\xe8\x80" has byte 0xE8 at byte 3, not UTF-8`},
		{"a b", `tag "a b" has ' ' (U+0020) at character 2`},
		{"a\x00", `tag "a\x00" has '\x00' (U+0000) at character 2`},
		{"%2F", `tag "%2F" has '%' (U+0025) at character 1`},
		{"ü", `tag "ü" has 'ü' (U+00FC) at character 1`},
		{strings.Repeat("订", 50), `tag "` + strings.Repeat("订", 40) + `…" has '订' (U+8BA2) at character 1`},
	} {
		err := segment.ValidName(tc.name)
		if !errors.Is(err, segment.ErrInvalidTag) {
			t.Errorf("ValidName(%q) = %v, want ErrInvalidTag", tc.name, err)
			continue
		}
		if want := "segment: invalid tag: " + tc.want + "; " + rule; err.Error() != want {
			t.Errorf("ValidName(%q):\n got %s\nwant %s", tc.name, err, want)
		}
	}
}

// allowed reports whether c may appear in a tag name, independently of the
// package's own table.
func allowed(c byte) bool {
	return strings.IndexByte("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.:", c) >= 0
}

// FuzzTagName: ValidName never panics; a name it accepts is 1–128 allowed
// bytes and not "." or ".."; it refuses every other name with ErrInvalidTag
// and the rule, and the refusal of a UTF-8 name with a disallowed character
// names the first one (quoted and as U+XXXX).
func FuzzTagName(f *testing.F) {
	for _, s := range []string{"", "a", "orders", "订单", "/", ".", "..", "...", "a/b", "\xe8", "a\x00",
		strings.Repeat("x", 128), strings.Repeat("x", 129), "shop-1:orders", "\u2028", "a b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		err := segment.ValidName(name)
		bad := -1 // the byte offset of the first disallowed byte
		for i := 0; i < len(name); i++ {
			if !allowed(name[i]) {
				bad = i
				break
			}
		}
		if err == nil {
			if len(name) < 1 || len(name) > 128 || bad >= 0 || name == "." || name == ".." {
				t.Fatalf("ValidName(%q) accepted it", name)
			}
			return
		}
		if !errors.Is(err, segment.ErrInvalidTag) || !strings.HasSuffix(err.Error(), "; "+rule) {
			t.Fatalf("ValidName(%q) = %v, want ErrInvalidTag stating the rule", name, err)
		}
		if bad < 0 && len(name) >= 1 && len(name) <= 128 && name != "." && name != ".." {
			t.Fatalf("ValidName(%q) refused a valid name: %v", name, err)
		}
		if bad >= 0 && utf8.ValidString(name) {
			r, _ := utf8.DecodeRuneInString(name[bad:])
			pos := utf8.RuneCountInString(name[:bad]) + 1
			want := fmt.Sprintf("has %s (%U) at character %d;", strconv.QuoteRune(r), r, pos)
			if !strings.Contains(err.Error(), want) {
				t.Fatalf("ValidName(%q) = %v, want it to say %q", name, err, want)
			}
		}
	})
}

// TestReserved: "snowflake" and "snowflake:…" in any case are reserved for
// Snowflake IDs and refused at creation; names that only start alike are not.
func TestReserved(t *testing.T) {
	for name, want := range map[string]bool{
		"snowflake": true, "SNOWFLAKE": true, "SnowFlake:orders": true, "snowflake:": true,
		"snowflakes": false, "snow": false, "orders:snowflake": false, "snowflake_x": false, "": false,
	} {
		if got := segment.Reserved(name); got != want {
			t.Errorf("Reserved(%q) = %v, want %v", name, got, want)
		}
		if name == "" {
			continue
		}
		err := segment.ValidateTag(segment.Tag{Name: name, Step: 1})
		if want && (!errors.Is(err, segment.ErrInvalidTag) || !strings.Contains(err.Error(), "reserved")) {
			t.Errorf("ValidateTag(%q) = %v, want ErrInvalidTag naming the reservation", name, err)
		}
		if !want && err != nil {
			t.Errorf("ValidateTag(%q) = %v, want nil", name, err)
		}
	}
}
