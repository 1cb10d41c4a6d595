package idmask

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Form is a text form of a masked ID. Every text is
//
//	key-id character ‖ the masked ID in fixed width, most significant digit first ‖ check character
//
// The key-id character is the digit of the form's alphabet whose value is the
// key id (0–31), so texts of key id 0 start with '0'.
//
// Base32 uses Douglas Crockford's base32 alphabet
// "0123456789ABCDEFGHJKMNPQRSTVWXYZ": 13 digits for 63 bits, 11 for 53, so
// 15 and 13 characters in all. Texts are written in upper case; reading
// ignores case and takes Crockford's aliases I and L for 1 and O for 0, in
// every position. The check character is Crockford's mod-37 check symbol of
// the number whose base32 digits are the key-id character and the digits:
// one of the 32 digits or, for remainders 32–36, '*', '~', '$', '=' or 'U'
// ('u' is read as 'U'); those five are accepted only in the last position.
// Because 37 is a prime larger than the base, the check catches every single
// substitution of a character by one with a different value, and every swap
// of two adjacent characters before the check character. Of the check
// symbols, '*', '$' and '=' need escaping in a URL query string (not in a
// path segment).
//
// Base62 uses "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
// (digits, then upper case, then lower case, in ASCII order): 11 digits for
// 63 bits, 9 for 53, so 13 and 11 characters in all. It is case-sensitive:
// 'a' and 'A' are different digits. The check character is the base62 digit
// of
//
//	(d₀·3^k + d₁·3^(k−1) + … + d_k·3^0) mod 62
//
// where d₀ is the key-id character's value and d₁…d_k are the digits'. Each
// weight 3^j mod 62 is odd and not a multiple of 31, so it is invertible
// modulo 62, and the check catches every single substitution. It catches a
// swap of two adjacent characters before the check character unless the two
// differ by exactly 31 in value (such as '0' and 'V', or 'U' and 'z'): 31 of
// the 1,891 pairs of distinct characters. No mod-62 weighting catches those
// (the weights must be odd, so their differences are even); base32 is the
// form for people who retype IDs.
//
// The lengths of the two forms differ for each width (15 and 13 characters
// for 63 bits, 13 and 11 for 53 bits), so Keyring.UnmaskText tells them
// apart by length; Keyring.UnmaskTextAs reads only the form it is given.
type Form uint8

// The text forms.
const (
	Base32 Form = iota + 1
	Base62
)

// String returns "base32" or "base62".
func (f Form) String() string {
	switch f {
	case Base32:
		return "base32"
	case Base62:
		return "base62"
	}
	return "Form(" + strconv.Itoa(int(f)) + ")"
}

// ParseForm returns the Form named "base32" or "base62", in any case.
func ParseForm(name string) (Form, error) {
	switch strings.ToLower(name) {
	case "base32":
		return Base32, nil
	case "base62":
		return Base62, nil
	}
	return 0, fmt.Errorf("%w: %q, want base32 or base62", ErrInvalidForm, name)
}

// Alphabets, in digit order.
const (
	base32Alphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
	base32Check    = base32Alphabet + "*~$=U" // Crockford's check symbols, values 0–36
	base62Alphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
)

// maxTextLen is the longest text: base32 for 63 bits.
const maxTextLen = 15

// textWidth is the shape of one form at one width.
type textWidth struct {
	digits int    // digits of the masked ID
	length int    // digits + the key-id and check characters
	top    uint64 // base32: the first digit must be below this; unused for base62
	// keyWeight is what the key-id digit is multiplied by in the check sum:
	// 32^digits mod 37 for base32, 3^digits mod 62 for base62.
	keyWeight uint64
}

// newTextWidth returns the shape of form f for IDs of bits bits.
func newTextWidth(f Form, bits int) textWidth {
	var w textWidth
	switch f {
	case Base32:
		w.digits = (bits + 4) / 5
		w.top = 1 << (bits - 5*(w.digits-1))
		w.keyWeight = 1
		for range w.digits {
			w.keyWeight = w.keyWeight * 32 % 37
		}
	case Base62:
		// The fewest digits with 62^digits ≥ 2^bits.
		w.digits = 1
		for p, max := uint64(62), uint64(1)<<bits-1; p <= max; w.digits++ {
			if p > max/62 {
				w.digits++
				break
			}
			p *= 62
		}
		w.keyWeight = base62Weight[w.digits]
	}
	w.length = w.digits + 2
	return w
}

// base62Weight[j] is 3^j mod 62, the weight of the digit j places before the
// check character.
var base62Weight = func() (w [maxTextLen]uint64) {
	w[0] = 1
	for j := 1; j < len(w); j++ {
		w[j] = w[j-1] * 3 % 62
	}
	return w
}()

// Digit values of input bytes, or -1. base32Value reads either case and
// Crockford's aliases; base32CheckValue also reads the five check-only
// symbols.
var base32Value, base32CheckValue, base62Value = func() (b32, b32c, b62 [256]int8) {
	for i := range 256 {
		b32[i], b32c[i], b62[i] = -1, -1, -1
	}
	for i := range len(base32Alphabet) {
		c := base32Alphabet[i]
		b32[c], b32[c|0x20] = int8(i), int8(i) // | 0x20: lower case (a no-op for digits)
	}
	b32['I'], b32['i'], b32['L'], b32['l'] = 1, 1, 1, 1
	b32['O'], b32['o'] = 0, 0
	b32c = b32
	for i := len(base32Alphabet); i < len(base32Check); i++ {
		b32c[base32Check[i]] = int8(i)
	}
	b32c['u'] = b32c['U']
	for i := range len(base62Alphabet) {
		b62[base62Alphabet[i]] = int8(i)
	}
	return
}()

// textShape returns the shape of form f for m's width.
func (m *Masker) textShape(f Form) (textWidth, bool) {
	switch f {
	case Base32:
		return m.b32, true
	case Base62:
		return m.b62, true
	}
	return textWidth{}, false
}

// TextLen returns the length of form f's texts at m's width: 15 (base32) or
// 13 (base62) for 63 bits, 13 or 11 for 53 bits; 0 for an unknown form.
func (m *Masker) TextLen(f Form) int {
	w, _ := m.textShape(f)
	return w.length
}

// MaskText masks id and writes the result in form f with m's key id and a
// check character (see Form). It fails with ErrOutOfRange as Mask does, or
// with ErrInvalidForm.
func (m *Masker) MaskText(id int64, f Form) (string, error) {
	var buf [maxTextLen]byte
	b, err := m.AppendMaskText(buf[:0], id, f)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// AppendMaskText appends MaskText(id, f) to dst. It does not allocate when
// dst has room for TextLen(f) more bytes.
func (m *Masker) AppendMaskText(dst []byte, id int64, f Form) ([]byte, error) {
	w, ok := m.textShape(f)
	if !ok {
		return dst, errForm(f)
	}
	if !m.inRange(id) {
		return dst, m.errRange(id)
	}
	return appendText(dst, m.keyID, m.encrypt(uint64(id)), f, w), nil
}

// appendText appends the text of the masked value v in form f of shape w.
func appendText(dst []byte, keyID uint8, v uint64, f Form, w textWidth) []byte {
	n := len(dst)
	dst = slices.Grow(dst, w.length)[:n+w.length]
	putText(dst[n:], keyID, v, f, w.keyWeight)
	return dst
}

// putText writes the text of the masked value v in form f to t, which is
// as long as the text (textWidth.length); keyWeight is the textWidth's.
// Base62 digits are written two at a time, from a table of every pair.
func putText(t []byte, keyID uint8, v uint64, f Form, keyWeight uint64) {
	last := len(t) - 1
	i := last - 1 // the digit to write next, from the last one backwards
	if f == Base32 {
		t[0] = base32Alphabet[keyID]
		// The check symbol is the text's number, keyID·32^digits + v, mod 37.
		t[last] = base32Check[(uint64(keyID)*keyWeight+v)%37]
		for ; i > 0; i-- {
			t[i] = base32Alphabet[v&31]
			v >>= 5
		}
		return
	}
	t[0] = base62Alphabet[keyID]
	sum := uint64(keyID) * keyWeight
	// Two independent halves of the division chain: v = hi·62^6 + lo.
	const p2, p6 = 62 * 62, 62 * 62 * 62 * 62 * 62 * 62
	hi, lo := v/p6, v%p6
	j := 0 // the distance of digit i from the check character, minus one
	for ; i > 1; i -= 2 {
		var p uint64
		if j < 6 {
			p, lo = lo%p2, lo/p2
		} else {
			p, hi = hi%p2, hi/p2
		}
		binary.LittleEndian.PutUint16(t[i-1:], base62Pairs[p])
		sum += uint64(base62PairSums[p]) * base62Weight[j]
		j += 2
	}
	if i == 1 {
		d := hi % 62
		if j < 6 {
			d = lo % 62
		}
		t[1] = base62Alphabet[d]
		sum += d * base62Weight[j]
	}
	t[last] = base62Alphabet[sum%62]
}

// Tables of two-digit pairs for base62 in putText. base62Pairs[p] is the
// two characters of the pair of digits with value p = 62·d₁ + d₀, d₁ first,
// as a little-endian uint16; base62PairSums[p] is 3·d₁ + d₀, the pair's
// share of the check sum before it is multiplied by the weight of d₀'s
// position (d₁'s weight is 3 times d₀'s).
var base62Pairs, base62PairSums = func() (pairs [62 * 62]uint16, sums [62 * 62]uint8) {
	for p := range pairs {
		d1, d0 := p/62, p%62
		pairs[p] = uint16(base62Alphabet[d1]) | uint16(base62Alphabet[d0])<<8
		sums[p] = uint8(3*d1 + d0)
	}
	return
}()

// decodeText reads a text of form f and shape w for IDs of bits bits and
// returns its key id and masked value.
func decodeText(s string, f Form, w textWidth, bits uint8) (keyID uint8, v uint64, err error) {
	if len(s) != w.length {
		if len(s) == 0 {
			return 0, 0, errText(f, s, "empty")
		}
		return 0, 0, errText(f, s, fmt.Sprintf("%d bytes long, want %d characters for %d-bit IDs", len(s), w.length, bits))
	}
	last := len(s) - 1
	max := uint64(1)<<bits - 1
	overflow := false
	if f == Base32 {
		var check uint64
		for i := range last {
			d := base32Value[s[i]]
			if d < 0 {
				return 0, 0, errChar(f, s, i)
			}
			check = (check*32 + uint64(d)) % 37
			if i == 0 {
				keyID = uint8(d)
				continue
			}
			if i == 1 && uint64(d) >= w.top {
				overflow = true // the digits cannot be accumulated in 64 bits
			}
			v = v<<5 | uint64(d)
		}
		c := base32CheckValue[s[last]]
		if c < 0 {
			return 0, 0, errChar(f, s, last)
		}
		if uint64(c) != check {
			return 0, 0, errCheck(f, s)
		}
	} else {
		var sum uint64
		for i := range last {
			d := base62Value[s[i]]
			if d < 0 {
				return 0, 0, errChar(f, s, i)
			}
			sum += uint64(d) * base62Weight[last-1-i]
			if i == 0 {
				keyID = uint8(d)
				continue
			}
			if v > (max-uint64(d))/62 {
				overflow = true
			}
			v = v*62 + uint64(d)
		}
		c := base62Value[s[last]]
		if c < 0 {
			return 0, 0, errChar(f, s, last)
		}
		if uint64(c) != sum%62 {
			return 0, 0, errCheck(f, s)
		}
	}
	if overflow || v > max {
		return 0, 0, errText(f, s, fmt.Sprintf("the value is past 2^%d−1, the largest %d-bit ID: this text was not made by MaskText",
			bits, bits))
	}
	if keyID > MaxKeyID {
		return 0, 0, errText(f, s, fmt.Sprintf("key-id character %s is key id %d, past the largest, %d", charAt(s, 0), keyID, MaxKeyID))
	}
	return keyID, v, nil
}

func errForm(f Form) error {
	return fmt.Errorf("%w: %v, want Base32 or Base62", ErrInvalidForm, f)
}

// errText wraps ErrInvalidText with the form, the quoted text and why.
func errText(f Form, s, why string) error {
	return fmt.Errorf("%w: %v %s: %s", ErrInvalidText, f, quote(s), why)
}

// errChar reports the bad character at byte i of s.
func errChar(f Form, s string, i int) error {
	why := ""
	if f == Base32 {
		switch c := s[i]; {
		case base32CheckValue[c] >= 0: // only the check position takes it
			why = fmt.Sprintf(" (%c is a check symbol, allowed only as the last character)", c)
		}
	} else if b := s[i]; b < utf8.RuneSelf {
		why = " (base62 uses only 0–9, A–Z and a–z)"
	}
	return errText(f, s, fmt.Sprintf("bad character %s at position %d%s", charAt(s, i), i+1, why))
}

// errCheck reports a check character that does not match.
func errCheck(f Form, s string) error {
	return fmt.Errorf("%w: %v %s: %w: %s at position %d does not match the other characters; the text was mistyped or corrupted",
		ErrInvalidText, f, quote(s), ErrCheck, charAt(s, len(s)-1), len(s))
}

// maxQuoted is how much of a bad text an error message quotes.
const maxQuoted = 40

// quote quotes s for an error message, cutting it to about maxQuoted bytes
// (on a UTF-8 boundary) and noting the full length.
func quote(s string) string {
	if len(s) <= maxQuoted {
		return strconv.Quote(s)
	}
	n := maxQuoted
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return fmt.Sprintf("%s... (%d bytes)", strconv.Quote(s[:n]), len(s))
}

// charAt describes the character starting at byte i of s: the quoted rune,
// or the byte in hex if it is not valid UTF-8.
func charAt(s string, i int) string {
	r, size := utf8.DecodeRuneInString(s[i:])
	if r == utf8.RuneError && size <= 1 {
		return fmt.Sprintf("byte 0x%02x", s[i])
	}
	return strconv.QuoteRune(r)
}
