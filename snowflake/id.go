package snowflake

import (
	"fmt"
	"github.com/flakeid/flakeid/internal/quote"
	"math"
	"strconv"
)

// ID is a generated identifier: a non-negative int64 whose bits are laid out
// by a Layout.
//
// An ID has three text forms, each of which parses back to the same ID:
//
//   - decimal (String, MarshalText, MarshalJSON), read by Parse: the
//     canonical form, at most 19 digits;
//   - base32 (Base32), read by ParseEncoded: 13 characters of Crockford's
//     alphabet;
//   - base58 (Base58), read by ParseEncoded: 11 characters of Bitcoin's
//     alphabet.
//
// The base32 and base58 forms have a fixed width, so comparing two of them as
// strings (bytewise, as sort.Strings and databases using a binary collation
// do) orders them like the IDs. ParseAny reads any of the three, for input
// typed by people. Layout.Decode splits an ID into its fields.
//
// A negative ID is never produced by a Generator. String, Base32 and Base58
// still format one (Base32 and Base58 encode its two's-complement bits), but
// no parse function accepts the result, so MarshalText, AppendText and
// MarshalJSON refuse it with ErrInvalidID.
type ID int64

// Lengths of the text forms, and of inputs quoted in errors.
const (
	// maxDecimalLen is the most digits a decimal ID may have:
	// len("9223372036854775807").
	maxDecimalLen = 19
	// base32Len is the width of the base32 form: 13 × 5 = 65 ≥ 63 bits.
	base32Len = 13
	// base58Len is the width of the base58 form: 58^11 ≈ 2.4e19 > 2^64.
	base58Len = 11
)

// Alphabets of the text forms, in digit order. Both are in ascending ASCII
// order, which is what makes the fixed-width forms sort like the IDs.
const (
	// base32Alphabet is Douglas Crockford's base32 alphabet: digits and
	// upper-case letters less I, L, O and U.
	base32Alphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
	// base58Alphabet is Bitcoin's base58 alphabet: digits and letters less
	// 0, O, I and l.
	base58Alphabet = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
)

// text is what the parsers read, so that the []byte methods need not copy
// their input into a string.
type text interface{ ~string | ~[]byte }

// String returns the ID in decimal.
func (id ID) String() string { return strconv.FormatInt(int64(id), 10) }

// Parse reads an ID in decimal: 1 to 19 ASCII digits (leading zeros allowed)
// whose value fits in an int64. It accepts no sign, space, underscore or
// other character. Errors wrap ErrInvalidID, quote the input and say what is
// wrong: empty, a sign, a non-digit (with its 1-based byte position), too
// many digits, or a value past math.MaxInt64.
func Parse(s string) (ID, error) { return parseDecimal("decimal", s) }

// Base32 returns the ID as 13 characters of Crockford's base32 alphabet
// (0–9 and A–Z less I, L, O and U), most significant first and padded with
// '0'. The first character of a non-negative ID is 0–7; the largest ID is
// "7ZZZZZZZZZZZZ". For non-negative IDs, a < b exactly when
// a.Base32() < b.Base32().
func (id ID) Base32() string {
	var buf [base32Len]byte
	v := uint64(id)
	for i := base32Len - 1; i >= 0; i-- {
		buf[i] = base32Alphabet[v&31]
		v >>= 5
	}
	return string(buf[:])
}

// Base58 returns the ID as 11 characters of Bitcoin's base58 alphabet
// ("123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"), most
// significant first and padded with '1', the zero digit: ID 0 is
// "11111111111". For non-negative IDs, a < b exactly when
// a.Base58() < b.Base58().
func (id ID) Base58() string {
	var buf [base58Len]byte
	v := uint64(id)
	for i := base58Len - 1; i >= 0; i-- {
		buf[i] = base58Alphabet[v%58]
		v /= 58
	}
	return string(buf[:])
}

// ParseEncoded reads the fixed-width forms written by Base32 and Base58,
// told apart by their length, so no input is read two ways:
//
//   - 13 characters: Crockford base32. Case is ignored and Crockford's
//     aliases I and L read as 1 and O as 0; U, any other character outside
//     the alphabet and a value of 2^63 or more (a first character past '7')
//     are rejected.
//   - 11 characters: base58. It is case-sensitive; characters outside the
//     alphabet (among them 0, O, I and l) and a value past math.MaxInt64 are
//     rejected.
//
// Any other length is rejected too. Errors wrap ErrInvalidID.
func ParseEncoded(s string) (ID, error) { return parseEncoded(s) }

// ParseAny reads an ID in any of its text forms, chosen by this rule:
//
//  1. 1 to 19 ASCII digits: decimal (Parse);
//  2. otherwise 13 characters: base32 (ParseEncoded);
//  3. otherwise 11 characters: base58 (ParseEncoded);
//  4. anything else is an error; an input starting with a sign or made only
//     of digits is reported as bad decimal.
//
// The rule is ambiguous for some strings, and rule 1 wins. A 13-digit string
// is valid decimal, and it is also valid base32 when its first digit is 0–7:
// the base32 form of an ID whose every 5-bit group is below 10 — for
// example ID 32, "0000000000010" — is read by ParseAny as a different
// (decimal) ID. Likewise base58 has no digit 0, so an 11-character string of
// digits 1–9 is both decimal and base58: Base58 of ID 0, "11111111111", is
// read as the ID 11111111111. Such collisions are rare for generated IDs
// (about 1 in a million base32 forms and 3 in a billion base58 forms of
// random 63-bit values) but not impossible, so ParseAny is for people typing
// IDs of an unknown form; a program that knows the form should call Parse or
// ParseEncoded.
func ParseAny(s string) (ID, error) { return parseAny(s) }

// AppendText appends the decimal form of the ID to b, implementing
// encoding.TextAppender. It fails with ErrInvalidID for a negative ID.
func (id ID) AppendText(b []byte) ([]byte, error) {
	if id < 0 {
		return b, errNegative(id)
	}
	return strconv.AppendInt(b, int64(id), 10), nil
}

// MarshalText returns the decimal form of the ID, implementing
// encoding.TextMarshaler. It fails with ErrInvalidID for a negative ID.
func (id ID) MarshalText() ([]byte, error) {
	return id.AppendText(make([]byte, 0, maxDecimalLen))
}

// UnmarshalText reads the decimal form of an ID as Parse does, implementing
// encoding.TextUnmarshaler. On error the ID is left unchanged.
func (id *ID) UnmarshalText(b []byte) error {
	v, err := parseDecimal("decimal", b)
	if err != nil {
		return err
	}
	*id = v
	return nil
}

// MarshalJSON returns the ID as a JSON string of decimal digits, such as
// "123", so that JavaScript and other readers that hold JSON numbers in a
// float64 do not round IDs above 2^53. It fails with ErrInvalidID for a
// negative ID.
func (id ID) MarshalJSON() ([]byte, error) {
	if id < 0 {
		return nil, errNegative(id)
	}
	b := make([]byte, 0, maxDecimalLen+2)
	b = append(b, '"')
	b = strconv.AppendInt(b, int64(id), 10)
	return append(b, '"'), nil
}

// UnmarshalJSON reads an ID from a JSON string of decimal digits (as Parse
// reads it, with no escapes) or from a bare JSON integer: "123" and 123 both
// give ID 123. A number with a fraction or an exponent (1.5, 1.0, 1e3), a
// negative number, a boolean, an object, an array and any other value fail
// with ErrInvalidID and a message naming what was wrong. JSON null is a no-op
// that leaves the ID unchanged, as encoding/json does for other types; on
// error the ID is also left unchanged.
func (id *ID) UnmarshalJSON(b []byte) error {
	b = trimJSONSpace(b)
	if len(b) == 0 {
		return fmt.Errorf("%w: empty JSON value", ErrInvalidID)
	}
	var (
		v   ID
		err error
	)
	switch c := b[0]; {
	case c == '"':
		if len(b) < 2 || b[len(b)-1] != '"' {
			return fmt.Errorf("%w: JSON value %s: unterminated string", ErrInvalidID, quote.Input(b))
		}
		v, err = parseDecimal("JSON string", b[1:len(b)-1])
	case c == '-':
		v, err = parseDecimal("JSON number", b) // reports the sign
	case c >= '0' && c <= '9':
		for i := 1; i < len(b); i++ {
			switch b[i] {
			case '.':
				return fmt.Errorf("%w: JSON number %s has a fraction; an ID must be an integer", ErrInvalidID, quote.Input(b))
			case 'e', 'E':
				return fmt.Errorf("%w: JSON number %s has an exponent; an ID must be written as a plain integer", ErrInvalidID, quote.Input(b))
			}
		}
		if c == '0' && len(b) > 1 {
			return fmt.Errorf("%w: JSON number %s has a leading zero, which JSON does not allow", ErrInvalidID, quote.Input(b))
		}
		v, err = parseDecimal("JSON number", b)
	case string(b) == "null":
		return nil
	default:
		return fmt.Errorf("%w: JSON %s %s is not an ID; want a string of decimal digits or an integer",
			ErrInvalidID, jsonKind(b), quote.Input(b))
	}
	if err != nil {
		return err
	}
	*id = v
	return nil
}

// parseDecimal implements Parse; form names the input in error messages.
func parseDecimal[T text](form string, s T) (ID, error) {
	if len(s) == 0 {
		return 0, errInvalid(form, s, "empty")
	}
	switch s[0] {
	case '-':
		return 0, errInvalid(form, s, "negative: IDs have no sign and are never negative")
	case '+':
		return 0, errInvalid(form, s, "a leading '+' is not allowed")
	}
	var v uint64
	for i := range len(s) {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, errInvalid(form, s, fmt.Sprintf("non-digit %s at position %d", quote.CharAt(s, i), i+1))
		}
		if i < maxDecimalLen { // 19 digits cannot overflow a uint64
			v = v*10 + uint64(c-'0')
		}
	}
	if len(s) > maxDecimalLen {
		return 0, errInvalid(form, s, fmt.Sprintf("%d digits, want at most %d", len(s), maxDecimalLen))
	}
	if v > math.MaxInt64 {
		return 0, errInvalid(form, s, fmt.Sprintf("overflows int64 (max %d)", int64(math.MaxInt64)))
	}
	return ID(v), nil
}

// base32Digit returns the value of the Crockford base32 character c, reading
// either case and the aliases I, L (1) and O (0), or -1 if it has none.
func base32Digit(c byte) int {
	if c >= 'a' && c <= 'z' {
		c -= 'a' - 'A'
	}
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'A' && c <= 'H':
		return int(c-'A') + 10
	case c == 'J' || c == 'K':
		return int(c-'J') + 18
	case c == 'M' || c == 'N':
		return int(c-'M') + 20
	case c >= 'P' && c <= 'T':
		return int(c-'P') + 22
	case c >= 'V' && c <= 'Z':
		return int(c-'V') + 27
	case c == 'I' || c == 'L':
		return 1
	case c == 'O':
		return 0
	}
	return -1
}

// parseBase32 reads the base32 form (see ParseEncoded).
func parseBase32[T text](s T) (ID, error) {
	const form = "base32"
	if len(s) != base32Len {
		return 0, errLength(form, s, base32Len)
	}
	var v uint64
	for i := range len(s) {
		d := base32Digit(s[i])
		if d < 0 {
			why := ""
			if s[i] == 'U' || s[i] == 'u' {
				why = " (U is not in Crockford's alphabet)"
			}
			return 0, errInvalid(form, s, fmt.Sprintf("invalid character %s at position %d%s", quote.CharAt(s, i), i+1, why))
		}
		v = v<<5 | uint64(d)
	}
	// 13 × 5 = 65 bits: the first character holds bits 60–64, and only bits
	// 60–62 fit below the sign bit.
	if d := base32Digit(s[0]); d > 7 {
		return 0, errInvalid(form, s, fmt.Sprintf("first character %s is past '7', so the value is at least 2^63 and overflows int64 (max %q)",
			quote.CharAt(s, 0), ID(math.MaxInt64).Base32()))
	}
	return ID(v), nil
}

// base58Digit returns the value of the base58 character c, or -1 if it has
// none.
func base58Digit(c byte) int {
	switch {
	case c >= '1' && c <= '9':
		return int(c - '1')
	case c >= 'A' && c <= 'H':
		return int(c-'A') + 9
	case c >= 'J' && c <= 'N':
		return int(c-'J') + 17
	case c >= 'P' && c <= 'Z':
		return int(c-'P') + 22
	case c >= 'a' && c <= 'k':
		return int(c-'a') + 33
	case c >= 'm' && c <= 'z':
		return int(c-'m') + 44
	}
	return -1
}

// parseBase58 reads the base58 form (see ParseEncoded).
func parseBase58[T text](s T) (ID, error) {
	const form = "base58"
	if len(s) != base58Len {
		return 0, errLength(form, s, base58Len)
	}
	var v uint64
	overflow := false
	for i := range len(s) {
		d := base58Digit(s[i])
		if d < 0 {
			why := ""
			switch s[i] {
			case '0', 'O', 'I', 'l':
				why = " (0, O, I and l are not in the base58 alphabet)"
			}
			return 0, errInvalid(form, s, fmt.Sprintf("invalid character %s at position %d%s", quote.CharAt(s, i), i+1, why))
		}
		// v×58 + d ≤ MaxInt64 exactly when v ≤ (MaxInt64 − d) / 58.
		if v > (math.MaxInt64-uint64(d))/58 {
			overflow = true // keep checking the characters
		}
		v = v*58 + uint64(d)
	}
	if overflow {
		return 0, errInvalid(form, s, fmt.Sprintf("overflows int64 (max %q)", ID(math.MaxInt64).Base58()))
	}
	return ID(v), nil
}

// parseEncoded implements ParseEncoded.
func parseEncoded[T text](s T) (ID, error) {
	const form = "base32 or base58"
	switch len(s) {
	case base32Len:
		return parseBase32(s)
	case base58Len:
		return parseBase58(s)
	case 0:
		return 0, errInvalid(form, s, "empty")
	}
	return 0, errInvalid(form, s, fmt.Sprintf("%d bytes long, want %d (base32) or %d (base58) characters",
		len(s), base32Len, base58Len))
}

// parseAny implements ParseAny.
func parseAny[T text](s T) (ID, error) {
	digits := len(s) > 0
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			digits = false
			break
		}
	}
	switch {
	case digits && len(s) <= maxDecimalLen:
		return parseDecimal("decimal", s)
	case len(s) > 0 && (s[0] == '-' || s[0] == '+'):
		return parseDecimal("decimal", s)
	case len(s) == base32Len:
		return parseBase32(s)
	case len(s) == base58Len:
		return parseBase58(s)
	case len(s) == 0 || digits:
		return parseDecimal("decimal", s)
	}
	return 0, errInvalid("text", s, fmt.Sprintf("%d bytes long and not all digits; want 1–%d decimal digits, %d base32 or %d base58 characters",
		len(s), maxDecimalLen, base32Len, base58Len))
}

// errInvalid wraps ErrInvalidID with the form, the quoted input and why it is
// not an ID.
func errInvalid[T text](form string, s T, why string) error {
	return fmt.Errorf("%w: %s %s: %s", ErrInvalidID, form, quote.Input(s), why)
}

// errLength reports an input of the wrong length for a fixed-width form.
func errLength[T text](form string, s T, want int) error {
	if len(s) == 0 {
		return errInvalid(form, s, "empty")
	}
	return errInvalid(form, s, fmt.Sprintf("%d bytes long, want %d characters", len(s), want))
}

// errNegative reports a negative ID being marshaled.
func errNegative(id ID) error {
	return fmt.Errorf("%w: %d is negative and has no text form that parses back", ErrInvalidID, int64(id))
}

// trimJSONSpace strips the whitespace JSON allows around a value.
func trimJSONSpace(b []byte) []byte {
	isSpace := func(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
	for len(b) > 0 && isSpace(b[0]) {
		b = b[1:]
	}
	for len(b) > 0 && isSpace(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return b
}

// jsonKind names the kind of JSON value b starts, for an error message.
func jsonKind(b []byte) string {
	switch {
	case string(b) == "true" || string(b) == "false":
		return "boolean"
	case b[0] == '{':
		return "object"
	case b[0] == '[':
		return "array"
	}
	return "value"
}
