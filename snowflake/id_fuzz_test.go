package snowflake

import (
	"encoding/json"
	"errors"
	"math"
	"math/big"
	"strconv"
	"strings"
	"testing"
)

// Seed IDs shared by the fuzz targets: edges of every form and of int64.
var idFuzzSeeds = []ID{0, 1, 9, 10, 31, 32, 57, 58, 1<<53 - 1, 1 << 53, 1<<60 - 1, 1 << 60,
	1234567890123456789, math.MaxInt64 - 1, math.MaxInt64}

// idFuzzCheckErr fails unless a parse error wraps ErrInvalidID.
func idFuzzCheckErr(t *testing.T, name, in string, err error) {
	t.Helper()
	if !errors.Is(err, ErrInvalidID) {
		t.Fatalf("%s(%q) error %q does not wrap ErrInvalidID", name, in, err)
	}
}

// idRefDecode decodes s digit by digit with strings.IndexByte on alphabet in
// arbitrary precision, independently of the package's digit switches. It
// reports false for a character outside the alphabet.
func idRefDecode(s, alphabet string) (*big.Int, bool) {
	v, base := new(big.Int), big.NewInt(int64(len(alphabet)))
	for i := range len(s) {
		d := strings.IndexByte(alphabet, s[i])
		if d < 0 {
			return nil, false
		}
		v.Mul(v, base).Add(v, big.NewInt(int64(d)))
	}
	return v, true
}

func FuzzParse(f *testing.F) {
	for _, id := range idFuzzSeeds {
		f.Add(id.String())
	}
	for _, s := range []string{"", "-1", "-0", "+1", " 1", "1 ", "007", "1_000", "0x1F", "1e3", "1.5",
		"9223372036854775808", "18446744073709551616", "00000000000000000001", "0000000000000000001", "１", "1\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, err := Parse(s)
		// Reference: 1–19 ASCII digits that strconv reads as a non-negative int64.
		digits := len(s) > 0 && len(s) <= maxDecimalLen && strings.Trim(s, "0123456789") == ""
		ref, refErr := strconv.ParseInt(s, 10, 64)
		wantOK := digits && refErr == nil
		if err != nil {
			idFuzzCheckErr(t, "Parse", s, err)
			if wantOK {
				t.Fatalf("Parse(%q) error %v; strconv reads %d", s, err, ref)
			}
			return
		}
		if !wantOK || int64(id) != ref {
			t.Fatalf("Parse(%q) = %d; strconv gives %d, %v (digits only: %v)", s, id, ref, refErr, digits)
		}
		if back, err := Parse(id.String()); err != nil || back != id {
			t.Fatalf("Parse(String(%d) = %q) = %d, %v", id, id.String(), back, err)
		}
	})
}

func FuzzParseBase32(f *testing.F) {
	for _, id := range idFuzzSeeds {
		f.Add(id.Base32())
		f.Add(strings.ToLower(id.Base32()))
	}
	for _, s := range []string{"", "000000000000", "00000000000000", "000000000000U", "000000000000u",
		"OOOOOOOOOOOOO", "iIlLoO0000000", "8000000000000", "ZZZZZZZZZZZZZ", "FZZZZZZZZZZZZ", "-000000000001",
		"00000000000é", "0000000000000\x00"} {
		f.Add(s)
	}
	// canonical upper-cases ASCII letters and maps Crockford's aliases,
	// byte by byte.
	canonical := func(s string) string {
		b := []byte(s)
		for i, c := range b {
			if c >= 'a' && c <= 'z' {
				c -= 'a' - 'A'
			}
			switch c {
			case 'I', 'L':
				c = '1'
			case 'O':
				c = '0'
			}
			b[i] = c
		}
		return string(b)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, err := parseBase32(s)
		// ParseEncoded reads every length but base58's as base32 would.
		if len(s) != base58Len {
			if eid, eerr := ParseEncoded(s); eid != id || (eerr == nil) != (err == nil) {
				t.Fatalf("ParseEncoded(%q) = %d, %v; the base32 parser gives %d, %v", s, eid, eerr, id, err)
			}
		}
		// Reference: normalize case and aliases, then decode with the alphabet.
		canon := canonical(s)
		ref, refOK := idRefDecode(canon, base32Alphabet)
		wantOK := len(s) == base32Len && refOK && ref.IsInt64()
		if err != nil {
			idFuzzCheckErr(t, "parseBase32", s, err)
			if wantOK {
				t.Fatalf("parseBase32(%q) error %v; reference reads %v", s, err, ref)
			}
			return
		}
		if !wantOK || ref.Int64() != int64(id) {
			t.Fatalf("parseBase32(%q) = %d; reference gives %v, %v", s, id, ref, refOK)
		}
		if enc := id.Base32(); enc != canon {
			t.Fatalf("parseBase32(%q) = %d, whose Base32 %q is not the canonical %q", s, id, enc, canon)
		}
		if back, err := ParseEncoded(id.Base32()); err != nil || back != id {
			t.Fatalf("ParseEncoded(Base32(%d) = %q) = %d, %v", id, id.Base32(), back, err)
		}
	})
}

func FuzzParseBase58(f *testing.F) {
	for _, id := range idFuzzSeeds {
		f.Add(id.Base58())
	}
	for _, s := range []string{"", "1111111111", "111111111111", "11111111110", "1111111111O", "1111111111I",
		"1111111111l", "NQm6nKp8qFD", "zzzzzzzzzzz", "NQm6nKp8qFC", "-1111111111", "111111111é"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, err := parseBase58(s)
		// ParseEncoded reads every length but base32's as base58 would.
		if len(s) != base32Len {
			if eid, eerr := ParseEncoded(s); eid != id || (eerr == nil) != (err == nil) {
				t.Fatalf("ParseEncoded(%q) = %d, %v; the base58 parser gives %d, %v", s, eid, eerr, id, err)
			}
		}
		ref, refOK := idRefDecode(s, base58Alphabet)
		wantOK := len(s) == base58Len && refOK && ref.IsInt64()
		if err != nil {
			idFuzzCheckErr(t, "parseBase58", s, err)
			if wantOK {
				t.Fatalf("parseBase58(%q) error %v; reference reads %v", s, err, ref)
			}
			return
		}
		if !wantOK || ref.Int64() != int64(id) {
			t.Fatalf("parseBase58(%q) = %d; reference gives %v, %v", s, id, ref, refOK)
		}
		if enc := id.Base58(); enc != s {
			t.Fatalf("parseBase58(%q) = %d, whose Base58 is %q", s, id, enc)
		}
	})
}

func FuzzParseAny(f *testing.F) {
	for _, id := range idFuzzSeeds {
		f.Add(id.String())
		f.Add(id.Base32())
		f.Add(id.Base58())
	}
	for _, s := range []string{"", "-1", "+1", "abc", "0000000000010", "11111111111", "-000000000001",
		"+0000000000", "8ZZZZZZZZZZZZ", "000000000000U", "1111111111O", "92233720368547758070"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, err := ParseAny(s)
		// ParseAny must agree with the parser its rule picks.
		var want ID
		var wantErr error
		switch {
		case len(s) > 0 && len(s) <= maxDecimalLen && strings.Trim(s, "0123456789") == "":
			want, wantErr = Parse(s)
		case (len(s) == base32Len || len(s) == base58Len) && s[0] != '-' && s[0] != '+':
			want, wantErr = ParseEncoded(s)
		default:
			wantErr = errors.New("no form")
		}
		if err != nil {
			idFuzzCheckErr(t, "ParseAny", s, err)
			if wantErr == nil {
				t.Fatalf("ParseAny(%q) error %v; the chosen form reads %d", s, err, want)
			}
			return
		}
		if wantErr != nil || id != want {
			t.Fatalf("ParseAny(%q) = %d; the chosen form gives %d, %v", s, id, want, wantErr)
		}
		// Decimal always wins, so the decimal form reads back exactly; the
		// fixed-width forms read back unless they are all digits (see ParseAny).
		if back, err := ParseAny(id.String()); err != nil || back != id {
			t.Fatalf("ParseAny(String(%d) = %q) = %d, %v", id, id.String(), back, err)
		}
		for _, enc := range []string{id.Base32(), id.Base58()} {
			back, err := ParseAny(enc)
			if err != nil {
				t.Fatalf("ParseAny(%q) (from ID %d) error %v", enc, id, err)
			}
			if back != id && strings.Trim(enc, "0123456789") != "" {
				t.Fatalf("ParseAny(%q) = %d; want %d", enc, back, id)
			}
		}
	})
}

func FuzzUnmarshalJSON(f *testing.F) {
	for _, id := range idFuzzSeeds {
		f.Add([]byte(`"` + id.String() + `"`))
		f.Add([]byte(id.String()))
	}
	for _, s := range []string{``, ` `, `null`, ` null `, `nul`, `true`, `false`, `{}`, `[]`, `[1]`, `""`, `"`,
		`"1`, `1"`, `"abc"`, `"-1"`, `-1`, `-0`, `0`, `00`, `012`, `"012"`, `1.5`, `1.0`, `1e3`, `1E+3`,
		`"\u0031"`, `" 1"`, ` 1 `, "\t\"7\"\n", `9223372036854775808`, `"9223372036854775808"`,
		`12345678901234567890123`, `"7ZZZZZZZZZZZZ"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		const sentinel = ID(424242)
		id := sentinel
		err := id.UnmarshalJSON(b)
		if err != nil {
			idFuzzCheckErr(t, "UnmarshalJSON", string(b), err)
			if id != sentinel {
				t.Fatalf("UnmarshalJSON(%q) changed the ID to %d on error", b, id)
			}
			return
		}
		trimmed := strings.Trim(string(b), " \t\r\n")
		if trimmed == "null" {
			if id != sentinel {
				t.Fatalf("UnmarshalJSON(null) changed the ID to %d", id)
			}
			return
		}
		if id < 0 {
			t.Fatalf("UnmarshalJSON(%q) = negative %d", b, id)
		}
		// Whatever is accepted is valid JSON holding the same integer.
		var v any
		dec := json.NewDecoder(strings.NewReader(string(b)))
		dec.UseNumber()
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("UnmarshalJSON(%q) = %d, but encoding/json rejects it: %v", b, id, err)
		}
		var text string
		switch v := v.(type) {
		case string:
			text = v
		case json.Number:
			text = string(v)
		default:
			t.Fatalf("UnmarshalJSON(%q) = %d from a JSON %T", b, id, v)
		}
		if n, err := strconv.ParseInt(text, 10, 64); err != nil || n != int64(id) {
			t.Fatalf("UnmarshalJSON(%q) = %d; the JSON holds %q", b, id, text)
		}
		// Round trip.
		out, err := id.MarshalJSON()
		if err != nil {
			t.Fatalf("MarshalJSON(%d): %v", id, err)
		}
		var back ID
		if err := back.UnmarshalJSON(out); err != nil || back != id {
			t.Fatalf("UnmarshalJSON(MarshalJSON(%d) = %s) = %d, %v", id, out, back, err)
		}
	})
}
