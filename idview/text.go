package idview

import (
	"fmt"
	"strings"

	"github.com/flakeid/flakeid/internal/quote"
	"github.com/flakeid/flakeid/snowflake"
)

// Form is a text form of a UUID: see UUID.AppendForm.
type Form uint8

// The text forms of a UUID.
const (
	// FormUUID is RFC 9562's: 36 characters, lowercase hex in groups of 8,
	// 4, 4, 4 and 12 (0195f1a2-7c00-7000-8000-000000000000).
	FormUUID Form = iota + 1
	// FormTypeID is TypeID's (spec v0.3): a prefix of up to 63 lowercase
	// letters and underscores (not first or last), an underscore, and the
	// 128 bits in 26 lowercase Crockford base32 characters
	// (order_01jpgt4z000000000000000000); without a prefix, the 26
	// characters alone.
	FormTypeID
	// FormULID is ULID's: the 128 bits in 26 uppercase Crockford base32
	// characters (01JPGT4Z000000000000000000).
	FormULID
)

// String names the form as the APIs' format parameter does: "uuid7",
// "typeid" or "ulid".
func (f Form) String() string {
	switch f {
	case FormUUID:
		return "uuid7"
	case FormTypeID:
		return "typeid"
	case FormULID:
		return "ulid"
	}
	return fmt.Sprintf("Form(%d)", uint8(f))
}

// FormOf returns the form a format name names ("uuid7", "typeid",
// "ulid"; see Form.String), or 0 for any other name.
func FormOf(name string) Form {
	for _, f := range [...]Form{FormUUID, FormTypeID, FormULID} {
		if name == f.String() {
			return f
		}
	}
	return 0
}

// MaxTypeIDPrefix is the longest TypeID prefix: 63 characters.
const MaxTypeIDPrefix = 63

// CheckTypeIDPrefix fails with snowflake.ErrInvalidID, naming the problem, when p is
// not a TypeID prefix: at most 63 characters, each a lowercase ASCII letter
// or an underscore, not starting or ending with an underscore. The empty
// prefix is valid (a TypeID without one).
func CheckTypeIDPrefix(p string) error {
	if len(p) > MaxTypeIDPrefix {
		return fmt.Errorf("%w: TypeID prefix %s is %d characters long, want at most %d", snowflake.ErrInvalidID, quote.Input(p), len(p), MaxTypeIDPrefix)
	}
	for i := 0; i < len(p); i++ {
		if c := p[i]; (c < 'a' || c > 'z') && c != '_' {
			return fmt.Errorf("%w: TypeID prefix %s has %s at %d: want lowercase letters a–z and underscores", snowflake.ErrInvalidID, quote.Input(p), quote.CharAt(p, i), i)
		}
	}
	if p != "" && (p[0] == '_' || p[len(p)-1] == '_') {
		return fmt.Errorf("%w: TypeID prefix %s starts or ends with an underscore", snowflake.ErrInvalidID, quote.Input(p))
	}
	return nil
}

// crockford is the Crockford base32 alphabet, in uppercase (ULID) and
// lowercase (TypeID).
const (
	crockfordUpper = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
	crockfordLower = "0123456789abcdefghjkmnpqrstvwxyz"
	hexLower       = "0123456789abcdef"
)

// String returns the UUID's RFC 9562 text: 36 lowercase characters.
func (u UUID) String() string { return string(u.AppendForm(make([]byte, 0, 36), FormUUID, "")) }

// AppendForm appends the UUID's text in form f to dst: FormUUID's 36
// characters, FormULID's 26, or FormTypeID's prefix, '_' and 26 (the
// prefix alone is left out when empty). The caller checks the prefix
// (CheckTypeIDPrefix); other forms ignore it.
func (u UUID) AppendForm(dst []byte, f Form, prefix string) []byte {
	switch f {
	case FormULID:
		return appendBase32(dst, &u, crockfordUpper)
	case FormTypeID:
		if prefix != "" {
			dst = append(dst, prefix...)
			dst = append(dst, '_')
		}
		return appendBase32(dst, &u, crockfordLower)
	}
	for i, b := range u {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			dst = append(dst, '-')
		}
		dst = append(dst, hexLower[b>>4], hexLower[b&15])
	}
	return dst
}

// appendBase32 appends the 128 bits of u as 26 base32 characters of
// alphabet: 2 bits of padding at the top, then 5 bits a character.
func appendBase32(dst []byte, u *UUID, alphabet string) []byte {
	hi := uint64(u[0])<<56 | uint64(u[1])<<48 | uint64(u[2])<<40 | uint64(u[3])<<32 | uint64(u[4])<<24 | uint64(u[5])<<16 | uint64(u[6])<<8 | uint64(u[7])
	lo := uint64(u[8])<<56 | uint64(u[9])<<48 | uint64(u[10])<<40 | uint64(u[11])<<32 | uint64(u[12])<<24 | uint64(u[13])<<16 | uint64(u[14])<<8 | uint64(u[15])
	var out [26]byte
	for i := 25; i >= 0; i-- {
		out[i] = alphabet[lo&31]
		lo = lo>>5 | hi<<59
		hi >>= 5
	}
	return append(dst, out[:]...)
}

// ParseText reads a UUID in any of its text forms, told apart by their
// shape: 36 characters with hyphens (a UUID, either case), a text with an
// underscore (a TypeID), 26 characters with lowercase letters and no
// uppercase ones (a TypeID without a prefix), or other 26 characters (a
// ULID, either case). It returns the form and, for a TypeID,
// its prefix. It fails with snowflake.ErrInvalidID naming what is wrong; it does not
// look at the version or variant (View.ID does).
func ParseText(s string) (u UUID, f Form, prefix string, err error) {
	switch {
	case strings.IndexByte(s, '_') >= 0:
		u, prefix, err = ParseTypeID(s)
		return u, FormTypeID, prefix, err
	case len(s) == 36:
		u, err = parseUUID(s)
		return u, FormUUID, "", err
	case len(s) == 26 && strings.ContainsAny(s, crockfordLower[10:]) && !strings.ContainsAny(s, crockfordUpper[10:]):
		u, _, err = ParseTypeID(s) // lowercase: a TypeID without a prefix
		return u, FormTypeID, "", err
	case len(s) == 26:
		u, err = ParseULID(s)
		return u, FormULID, "", err
	}
	return u, 0, "", fmt.Errorf("%w: %s is %d characters long: a UUID has 36, a ULID 26, a TypeID a prefix, '_' and 26", snowflake.ErrInvalidID, quote.Input(s), len(s))
}

// LooksLikeText reports whether s has the shape of a UUID text form
// (see ParseText) rather than of a plain or masked ID: 26 or 36
// characters, or an underscore.
func LooksLikeText(s string) bool {
	return len(s) == 26 || len(s) == 36 || strings.IndexByte(s, '_') >= 0
}

// parseUUID reads the 36-character RFC 9562 text, in either case.
func parseUUID(s string) (UUID, error) {
	var u UUID
	j := 0
	for i := 0; i < len(s); i++ {
		if i == 8 || i == 13 || i == 18 || i == 23 {
			if s[i] != '-' {
				return u, fmt.Errorf("%w: UUID %s has %s at %d, want '-' (8-4-4-4-12 hex digits)", snowflake.ErrInvalidID, quote.Input(s), quote.CharAt(s, i), i)
			}
			continue
		}
		d := hexDigit(s[i])
		if d < 0 {
			return u, fmt.Errorf("%w: UUID %s has %s at %d, not a hex digit", snowflake.ErrInvalidID, quote.Input(s), quote.CharAt(s, i), i)
		}
		u[j/2] |= byte(d) << (4 * (1 - j%2))
		j++
	}
	return u, nil
}

func hexDigit(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

// ParseULID reads a ULID: 26 Crockford base32 characters, either case,
// without Crockford's read-alikes (I, L, O, U) or hyphens, the first 0–7
// (128 bits). It fails with snowflake.ErrInvalidID naming what is wrong.
func ParseULID(s string) (UUID, error) {
	return parseBase32UUID("ULID", s, true)
}

// ParseTypeID reads a TypeID (spec v0.3): prefix_suffix, or the suffix
// alone, where the prefix passes CheckTypeIDPrefix and is not empty when
// the underscore is there, and the suffix is 26 lowercase Crockford base32
// characters, the first 0–7. It fails with snowflake.ErrInvalidID naming what is
// wrong. Any UUID version passes: View.ID checks for version 7.
func ParseTypeID(s string) (u UUID, prefix string, err error) {
	suffix := s
	if i := strings.LastIndexByte(s, '_'); i >= 0 {
		prefix, suffix = s[:i], s[i+1:]
		if prefix == "" {
			return u, "", fmt.Errorf("%w: TypeID %s has an empty prefix before its '_' (leave both out)", snowflake.ErrInvalidID, quote.Input(s))
		}
		if err := CheckTypeIDPrefix(prefix); err != nil {
			return u, "", err
		}
	}
	u, err = parseBase32UUID("TypeID suffix", suffix, false)
	return u, prefix, err
}

// parseBase32UUID reads 26 Crockford base32 characters (lowercase only
// unless anyCase) as 128 bits.
func parseBase32UUID(what, s string, anyCase bool) (UUID, error) {
	var u UUID
	if len(s) != 26 {
		return u, fmt.Errorf("%w: %s %s is %d characters long, want 26", snowflake.ErrInvalidID, what, quote.Input(s), len(s))
	}
	var hi, lo uint64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if anyCase && c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		d := strings.IndexByte(crockfordLower, c)
		if d < 0 {
			why := "not a Crockford base32 digit (0–9 and a–z without i, l, o, u)"
			if !anyCase && s[i] >= 'A' && s[i] <= 'Z' {
				why = "an uppercase letter: TypeID suffixes are lowercase"
			}
			return u, fmt.Errorf("%w: %s %s has %s at %d: %s", snowflake.ErrInvalidID, what, quote.Input(s), quote.CharAt(s, i), i, why)
		}
		if i == 0 && d > 7 {
			return u, fmt.Errorf("%w: %s %s starts with %q: more than 128 bits (the first character is 0–7)", snowflake.ErrInvalidID, what, quote.Input(s), s[0])
		}
		hi = hi<<5 | lo>>59
		lo = lo<<5 | uint64(d)
	}
	for i := range 8 {
		u[i], u[8+i] = byte(hi>>(56-8*i)), byte(lo>>(56-8*i))
	}
	return u, nil
}
