package segment

import (
	"fmt"
	"unicode/utf8"
)

// MaxStep is the largest step a tag may have (Leaf's step column is an INT).
const MaxStep = 1<<31 - 1

// MaxNameLen is the longest tag name, in bytes (Leaf's biz_tag is a
// VARCHAR(128)); every allowed character is one byte.
const MaxNameLen = 128

// nameRule is the rule ValidName enforces, as its errors state it.
const nameRule = `a tag is 1–128 of A–Z a–z 0–9 - _ . : (not "." or "..")`

// ValidName checks a tag name: 1–128 characters (bytes) of A–Z a–z 0–9
// - _ . : (Redis-style keys), and not "." or "..". The set keeps a name the
// same in URL paths, SQL rows, etcd and Redis keys and logs; '/' is not in it
// (a tag must be one path segment). The error wraps ErrInvalidTag, states the
// rule and names the first character that breaks it as a character (its
// position counted in characters), or, in a name that is not UTF-8, the byte.
// It does not allocate when the name is valid.
func ValidName(name string) error {
	if len(name) == 0 {
		return fmt.Errorf("%w: the tag is empty; %s", ErrInvalidTag, nameRule)
	}
	for i := 0; i < len(name); i++ {
		if !nameByte(name[i]) {
			return badChar(name, i)
		}
	}
	if len(name) > MaxNameLen {
		return fmt.Errorf("%w: tag %q is %d characters long; %s", ErrInvalidTag, clip(name), len(name), nameRule)
	}
	if name == "." || name == ".." {
		return fmt.Errorf("%w: tag %q is not allowed; %s", ErrInvalidTag, name, nameRule)
	}
	return nil
}

// nameByte reports whether c may appear in a tag name.
func nameByte(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return true
	case c == '.', c == '_', c == '-', c == ':':
		return true
	}
	return false
}

// badChar is ValidName's error for the disallowed byte at i of name (every
// byte before it is an allowed ASCII character, so i starts a character).
func badChar(name string, i int) error {
	r, size := utf8.DecodeRuneInString(name[i:])
	if r == utf8.RuneError && size <= 1 {
		return fmt.Errorf("%w: tag %q has byte 0x%02X at byte %d, not UTF-8; %s", ErrInvalidTag, clip(name), name[i], i+1, nameRule)
	}
	return fmt.Errorf("%w: tag %q has %q (%U) at character %d; %s", ErrInvalidTag, clip(name), r, r, i+1, nameRule)
}

// Reserved reports whether name is reserved for Snowflake IDs: "snowflake"
// or "snowflake:" followed by anything, in any case of ASCII letters. The
// Redis-protocol front answers INCR on such a key with a Snowflake ID, so no
// segment tag may be created under it (a tag created before the rule keeps
// working over HTTP and the RPCs).
func Reserved(name string) bool {
	const word = "snowflake"
	if len(name) < len(word) || !asciiEqualFold(name[:len(word)], word) {
		return false
	}
	return len(name) == len(word) || name[len(word)] == ':'
}

// asciiEqualFold reports whether a and b are equal ignoring the case of
// ASCII letters.
func asciiEqualFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// ValidateTag checks a tag about to be created: its name (ValidName, and
// not Reserved), a step in 1–MaxStep, a description of at most 256 bytes
// a MaxID ≥ 0, and a Delta of 0 (none) or 1–MaxStep with a Remainder below
// it.
func ValidateTag(t Tag) error {
	if err := ValidName(t.Name); err != nil {
		return err
	}
	if Reserved(t.Name) {
		return fmt.Errorf(`%w: tag %q is reserved: "snowflake" and "snowflake:…" (any case) name Snowflake IDs on the Redis-protocol listener (INCR snowflake), so no tag is created under them`,
			ErrInvalidTag, clip(t.Name))
	}
	switch {
	case t.Step < 1 || t.Step > MaxStep:
		return fmt.Errorf("%w: tag %q: step %d, want 1–%d", ErrInvalidTag, t.Name, t.Step, MaxStep)
	case len(t.Description) > 256:
		return fmt.Errorf("%w: tag %q: description of %d bytes, want at most 256", ErrInvalidTag, t.Name, len(t.Description))
	case t.MaxID < 0:
		return fmt.Errorf("%w: tag %q: max id %d, want ≥ 0", ErrInvalidTag, t.Name, t.MaxID)
	case t.Delta < 0 || t.Delta > MaxStep:
		return fmt.Errorf("%w: tag %q: delta %d, want 1–%d (or 0: none)", ErrInvalidTag, t.Name, t.Delta, MaxStep)
	case t.Remainder < 0 || t.Remainder >= max(t.Delta, 1):
		return fmt.Errorf("%w: tag %q: remainder %d, want 0–%d (below the delta, %d)", ErrInvalidTag, t.Name, t.Remainder, max(t.Delta, 1)-1, t.Delta)
	}
	return nil
}

// SameShare is what a store answers a Create of a tag it kept deleted
// (old) that asks for another share of the IDs (t's Delta and Remainder;
// Delta 0 or 1 with Remainder 0 is every ID): an error wrapping
// ErrInvalidTag, or nil when the share is the same. With several stores, a
// store's new share could be one another store already served above this
// store's max_id.
func SameShare(old, t Tag) error {
	was, is := share{max(old.Delta, 1), old.Remainder}, share{max(t.Delta, 1), t.Remainder}
	if was != is {
		return fmt.Errorf("%w: tag %q was deleted here while serving %s, and cannot come back serving %s (with several stores that could be IDs another one issued): create it with delta %d and remainder %d, or use another name",
			ErrInvalidTag, t.Name, was, is, was.delta, was.remainder)
	}
	return nil
}

// clip shortens s to at most 40 characters for an error message, on a
// character boundary, marking the cut with "…".
func clip(s string) string {
	n := 0
	for i := range s {
		if n == 40 {
			return s[:i] + "…"
		}
		n++
	}
	return s
}
