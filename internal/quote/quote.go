// Package quote quotes bad input for error messages: short enough to read,
// exact enough to find.
package quote

import (
	"fmt"
	"strconv"
	"unicode/utf8"
)

// MaxQuoted is how many bytes of an input Input quotes.
const MaxQuoted = 40

// Input quotes s for an error message, cut after MaxQuoted bytes (at a
// rune boundary, with its length said).
func Input[T ~string | ~[]byte](s T) string {
	if len(s) <= MaxQuoted {
		return strconv.Quote(string(s))
	}
	n := MaxQuoted
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return fmt.Sprintf("%s... (%d bytes)", strconv.Quote(string(s[:n])), len(s))
}

// CharAt describes the character starting at byte i of s for an error
// message: the quoted rune, or the byte in hex if it is not valid UTF-8.
func CharAt[T ~string | ~[]byte](s T, i int) string {
	r, size := utf8.DecodeRuneInString(string(s[i:]))
	if r == utf8.RuneError && size <= 1 {
		return fmt.Sprintf("byte 0x%02x", s[i])
	}
	return strconv.QuoteRune(r)
}
