package snowflake

import (
	"encoding"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// Interfaces ID is meant to implement.
var (
	_ encoding.TextMarshaler   = ID(0)
	_ encoding.TextAppender    = ID(0)
	_ encoding.TextUnmarshaler = (*ID)(nil)
	_ json.Marshaler           = ID(0)
	_ json.Unmarshaler         = (*ID)(nil)
)

// idParseCase is one input to a parse function: want is the ID when errHas is
// empty, else errHas are substrings the error message must contain.
type idParseCase struct {
	in     string
	want   ID
	errHas []string
}

func runIDParseCases(t *testing.T, name string, parse func(string) (ID, error), cases []idParseCase) {
	t.Helper()
	for _, c := range cases {
		got, err := parse(c.in)
		if len(c.errHas) == 0 {
			if err != nil || got != c.want {
				t.Errorf("%s(%q) = %d, %v; want %d, nil", name, c.in, got, err, c.want)
			}
			continue
		}
		if err == nil {
			t.Errorf("%s(%q) = %d, nil; want an error containing %q", name, c.in, got, c.errHas)
			continue
		}
		if !errors.Is(err, ErrInvalidID) {
			t.Errorf("%s(%q) error %q does not wrap ErrInvalidID", name, c.in, err)
		}
		if got != 0 {
			t.Errorf("%s(%q) = %d with an error; want 0", name, c.in, got)
		}
		for _, sub := range c.errHas {
			if !strings.Contains(err.Error(), sub) {
				t.Errorf("%s(%q) error %q does not contain %q", name, c.in, err, sub)
			}
		}
	}
}

func idOK(in string, want ID) idParseCase           { return idParseCase{in: in, want: want} }
func idBad(in string, errHas ...string) idParseCase { return idParseCase{in: in, errHas: errHas} }

const idMax = ID(math.MaxInt64)

func TestParse(t *testing.T) {
	long := strings.Repeat("x", 1000)
	runIDParseCases(t, "Parse", Parse, []idParseCase{
		idOK("0", 0),
		idOK("1", 1),
		idOK("42", 42),
		idOK("007", 7),
		idOK("0000000000000000042", 42), // 19 digits
		idOK("1234567890123456789", 1234567890123456789),
		idOK("9223372036854775807", idMax),
		idBad("", "empty", `""`),
		idBad("-1", "negative", `"-1"`),
		idBad("-0", "negative"),
		idBad("-9223372036854775808", "negative"),
		idBad("+1", "'+'"),
		idBad(" 1", "non-digit ' ' at position 1"),
		idBad("1 ", "non-digit ' ' at position 2"),
		idBad("12a4", "non-digit 'a' at position 3", `"12a4"`),
		idBad("1_000", "non-digit '_' at position 2"),
		idBad("1.5", "non-digit '.' at position 2"),
		idBad("0x10", "non-digit 'x' at position 2"),
		idBad("１", "non-digit '１' at position 1"), // full-width digit one
		idBad("1\xff", "byte 0xff at position 2"),
		idBad("9223372036854775808", "overflows int64", "9223372036854775807"),
		idBad("9999999999999999999", "overflows int64"),
		idBad("00000000000000000000", "20 digits, want at most 19"),
		idBad("18446744073709551616", "20 digits"),
		idBad(strings.Repeat("9", 100), "100 digits", "... (100 bytes)"),
		idBad(long, "non-digit 'x' at position 1", `"`+strings.Repeat("x", 40)+`"... (1000 bytes)`),
	})

	// A long message is cut on a UTF-8 boundary.
	_, err := Parse(strings.Repeat("é", 100))
	if err == nil || !strings.Contains(err.Error(), `"`+strings.Repeat("é", 20)+`"... (200 bytes)`) {
		t.Errorf("Parse(200 bytes of é) error = %v; want the first 20 é quoted", err)
	}
	_, err = Parse("1" + strings.Repeat("é", 100))
	if err == nil || !strings.Contains(err.Error(), `"1`+strings.Repeat("é", 19)+`"... (201 bytes)`) {
		t.Errorf("Parse(1 + 200 bytes of é) error = %v; want the cut to back up to a rune start", err)
	}
}

// TestParseEncodedBase32 reads 13-character inputs, which ParseEncoded reads
// as base32: all-digit ones too, unlike ParseAny.
func TestParseEncodedBase32(t *testing.T) {
	runIDParseCases(t, "ParseEncoded", ParseEncoded, []idParseCase{
		idOK("0000000000000", 0),
		idOK("0000000000001", 1),
		idOK("000000000000Z", 31),
		idOK("0000000000010", 32),
		idOK("7ZZZZZZZZZZZZ", idMax),
		idOK("7zzzzzzzzzzzz", idMax),
		idOK("7zZzZzZzZzZzZ", idMax),
		idOK("000000000000a", 10),
		idOK("000000000000I", 1),
		idOK("000000000000i", 1),
		idOK("000000000000L", 1),
		idOK("000000000000l", 1),
		idOK("OOOOOOOOOOOOo", 0),
		idOK("0000000000OIL", 0<<10|1<<5|1),
		idOK("1000000000000", 1<<60),
		idBad("", "base32 or base58", "empty"),
		idBad("000000000000", "base32 or base58", "12 bytes long, want 13 (base32) or 11 (base58) characters"),
		idBad("00000000000000", "14 bytes long, want 13 (base32) or 11 (base58)"),
		idBad("abc", `"abc"`, "3 bytes long"),
		idBad("000000000000U", "base32", "'U' at position 13", "U is not in Crockford"),
		idBad("000000000000u", "'u' at position 13", "U is not in Crockford"),
		idBad("00000000000-0", "'-' at position 12"),
		idBad("-000000000001", "'-' at position 1"),
		idBad("000000000000 ", "' ' at position 13"),
		idBad("00000000000é", "'é' at position 12"), // 13 bytes
		idBad("8000000000000", "past '7'", "overflows int64", "7ZZZZZZZZZZZZ"),
		idBad("ZZZZZZZZZZZZZ", "past '7'"),
		idBad("fzzzzzzzzzzzz", "past '7'"),
		idBad("8000000000U00", "'U' at position 11"), // characters are checked first
	})
}

// TestParseEncodedBase58 reads 11-character inputs, which ParseEncoded reads
// as base58: all-digit ones too, unlike ParseAny.
func TestParseEncodedBase58(t *testing.T) {
	runIDParseCases(t, "ParseEncoded", ParseEncoded, []idParseCase{
		idOK("11111111111", 0),
		idOK("11111111112", 1),
		idOK("1111111111z", 57),
		idOK("11111111121", 58),
		idOK(idMax.Base58(), idMax),
		idBad("1111111111", "10 bytes long, want 13 (base32) or 11 (base58)"),
		idBad("1111111111O", "base58", "'O' at position 11", "not in the base58 alphabet"),
		idBad("11111111110", "'0' at position 11", "not in the base58 alphabet"),
		idBad("1111111111I", "'I' at position 11"),
		idBad("1111111111l", "'l' at position 11"),
		idBad("111111111-1", "'-' at position 10"),
		idBad("zzzzzzzzzzz", "overflows int64", idMax.Base58()),
		idBad("zzzzzzzzzz0", "'0' at position 11"), // characters are checked first
	})
	// Every value just past MaxInt64 overflows, however it is reached.
	next := "NQm6nKp8qFD" // MaxInt64 in base58 (checked below), plus one in the last digit
	if idMax.Base58() != "NQm6nKp8qFC" {
		t.Fatalf("Base58(MaxInt64) = %q; the test's constant is stale", idMax.Base58())
	}
	if _, err := ParseEncoded(next); !errors.Is(err, ErrInvalidID) || !strings.Contains(err.Error(), "overflows") {
		t.Errorf("ParseEncoded(%q) error = %v; want an overflow", next, err)
	}
}

func TestParseAny(t *testing.T) {
	runIDParseCases(t, "ParseAny", ParseAny, []idParseCase{
		idOK("0", 0),
		idOK("123", 123),
		idOK("9223372036854775807", idMax),
		idOK("7ZZZZZZZZZZZZ", idMax),
		idOK("000000000000z", 31),
		idOK("NQm6nKp8qFC", idMax),
		idOK("1111111111z", 57),
		// Ambiguous inputs read as decimal (see ParseAny's doc).
		idOK("0000000000010", 10),            // Base32 of 32
		idOK("11111111111", 11111111111),     // Base58 of 0
		idOK("1111111111112", 1111111111112), // 13 digits
		idBad("", "decimal", "empty"),
		idBad("-1", "decimal", "negative"),
		idBad("-000000000001", "decimal", "negative"), // 13 bytes, but a sign
		idBad("+0000000000", "decimal", "'+'"),        // 11 bytes, but a sign
		idBad("92233720368547758070", "decimal", "20 digits"),
		idBad("9223372036854775808", "decimal", "overflows"),
		idBad("000000000000U", "base32", "'U'"),
		idBad("8ZZZZZZZZZZZZ", "base32", "past '7'"),
		idBad("1111111111O", "base58", "'O'"),
		idBad("zzzzzzzzzzz", "base58", "overflows"),
		idBad("abc", "3 bytes long and not all digits"),
		idBad("12345678901234567890abc", "23 bytes long"),
	})
}

func TestIDKnownValues(t *testing.T) {
	for _, c := range []struct {
		id                  ID
		dec, base32, base58 string
	}{
		{0, "0", "0000000000000", "11111111111"},
		{1, "1", "0000000000001", "11111111112"},
		{31, "31", "000000000000Z", "1111111111Y"},
		{32, "32", "0000000000010", "1111111111Z"},
		{57, "57", "000000000001S", "1111111111z"},
		{58, "58", "000000000001T", "11111111121"},
		{1 << 60, "1152921504606846976", "1000000000000", "3gDmDv6tjHH"},
		{idMax, "9223372036854775807", "7ZZZZZZZZZZZZ", "NQm6nKp8qFC"},
	} {
		if got := c.id.String(); got != c.dec {
			t.Errorf("ID(%d).String() = %q; want %q", int64(c.id), got, c.dec)
		}
		if got := c.id.Base32(); got != c.base32 {
			t.Errorf("ID(%d).Base32() = %q; want %q", int64(c.id), got, c.base32)
		}
		if got := c.id.Base58(); got != c.base58 {
			t.Errorf("ID(%d).Base58() = %q; want %q", int64(c.id), got, c.base58)
		}
	}
	// Negative IDs encode their bits, which the parsers refuse.
	for _, id := range []ID{-1, math.MinInt64} {
		if _, err := ParseEncoded(id.Base32()); !errors.Is(err, ErrInvalidID) {
			t.Errorf("ParseEncoded(ID(%d).Base32() = %q) error = %v; want ErrInvalidID", int64(id), id.Base32(), err)
		}
		if _, err := ParseEncoded(id.Base58()); !errors.Is(err, ErrInvalidID) {
			t.Errorf("ParseEncoded(ID(%d).Base58() = %q) error = %v; want ErrInvalidID", int64(id), id.Base58(), err)
		}
		if _, err := Parse(id.String()); !errors.Is(err, ErrInvalidID) {
			t.Errorf("Parse(%q) error = %v; want ErrInvalidID", id.String(), err)
		}
	}
	if got := ID(-1).Base32(); got != "FZZZZZZZZZZZZ" {
		t.Errorf("ID(-1).Base32() = %q; want FZZZZZZZZZZZZ", got)
	}
}

// TestIDAlphabets checks the digit switches against the alphabet constants for
// every byte value.
func TestIDAlphabets(t *testing.T) {
	if len(base32Alphabet) != 32 || len(base58Alphabet) != 58 {
		t.Fatalf("alphabet lengths %d, %d", len(base32Alphabet), len(base58Alphabet))
	}
	for _, a := range []string{base32Alphabet, base58Alphabet} {
		for i := 1; i < len(a); i++ {
			if a[i-1] >= a[i] {
				t.Errorf("alphabet %q is not in ascending byte order at %d", a, i)
			}
		}
	}
	for c := range 256 {
		b := byte(c)
		want := strings.IndexByte(base32Alphabet, b)
		if up := strings.ToUpper(string(b)); want < 0 && b < 0x80 {
			want = strings.Index(base32Alphabet, up)
		}
		switch b {
		case 'I', 'i', 'L', 'l':
			want = 1
		case 'O', 'o':
			want = 0
		}
		if got := base32Digit(b); got != want {
			t.Errorf("base32Digit(%q) = %d; want %d", b, got, want)
		}
		if got, want := base58Digit(b), strings.IndexByte(base58Alphabet, b); got != want {
			t.Errorf("base58Digit(%q) = %d; want %d", b, got, want)
		}
	}
}

// idGen draws a non-negative ID, spread over all bit lengths so that small
// and large IDs are both common.
func idGen() *rapid.Generator[ID] {
	return rapid.Custom(func(t *rapid.T) ID {
		bits := rapid.IntRange(0, 63).Draw(t, "bits")
		if bits == 0 {
			return 0
		}
		hi := int64(math.MaxInt64)
		if bits < 63 {
			hi = int64(1)<<bits - 1
		}
		return ID(rapid.Int64Range(0, hi).Draw(t, "id"))
	})
}

func TestIDRoundTripRapid(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		id := idGen().Draw(t, "id")
		check := func(form, s string, parse func(string) (ID, error)) {
			got, err := parse(s)
			if err != nil || got != id {
				t.Fatalf("%s: parse(%q) = %d, %v; want %d", form, s, got, err, id)
			}
		}
		check("decimal", id.String(), Parse)
		check("base32", id.Base32(), ParseEncoded)
		check("base32 lower", strings.ToLower(id.Base32()), ParseEncoded)
		check("base58", id.Base58(), ParseEncoded)
		check("any decimal", id.String(), ParseAny)
		if s := id.Base32(); strings.ContainsFunc(s, func(r rune) bool { return r > '9' }) {
			check("any base32", s, ParseAny)
		}
		if s := id.Base58(); strings.ContainsFunc(s, func(r rune) bool { return r > '9' }) {
			check("any base58", s, ParseAny)
		}
		if n := len(id.Base32()); n != 13 {
			t.Fatalf("len(Base32) = %d", n)
		}
		if n := len(id.Base58()); n != 11 {
			t.Fatalf("len(Base58) = %d", n)
		}

		text, err := id.MarshalText()
		if err != nil || string(text) != id.String() {
			t.Fatalf("MarshalText = %q, %v; want %q", text, err, id.String())
		}
		var back ID
		if err := back.UnmarshalText(text); err != nil || back != id {
			t.Fatalf("UnmarshalText(%q) = %d, %v; want %d", text, back, err, id)
		}
		js, err := id.MarshalJSON()
		if err != nil || string(js) != `"`+id.String()+`"` {
			t.Fatalf("MarshalJSON = %s, %v", js, err)
		}
		back = 0
		if err := back.UnmarshalJSON(js); err != nil || back != id {
			t.Fatalf("UnmarshalJSON(%s) = %d, %v; want %d", js, back, err, id)
		}
		back = 0
		if err := back.UnmarshalJSON([]byte(id.String())); err != nil || back != id {
			t.Fatalf("UnmarshalJSON(%s) = %d, %v; want %d", id.String(), back, err, id)
		}
		prefix := []byte("id=")
		app, err := id.AppendText(prefix)
		if err != nil || string(app) != "id="+id.String() {
			t.Fatalf("AppendText = %q, %v", app, err)
		}
	})
}

func TestIDBaseOrderRapid(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a := idGen().Draw(t, "a")
		var b ID
		if rapid.Bool().Draw(t, "near") && a < idMax {
			// Neighbours exercise carries between digits.
			b = a + ID(rapid.Int64Range(1, min(1<<12, int64(idMax-a))).Draw(t, "delta"))
		} else {
			b = idGen().Draw(t, "b")
		}
		if a > b {
			a, b = b, a
		}
		if got, want := strings.Compare(a.Base32(), b.Base32()), idCmp(a, b); got != want {
			t.Fatalf("Compare(Base32 %q, %q) = %d; IDs %d, %d compare %d", a.Base32(), b.Base32(), got, a, b, want)
		}
		if got, want := strings.Compare(a.Base58(), b.Base58()), idCmp(a, b); got != want {
			t.Fatalf("Compare(Base58 %q, %q) = %d; IDs %d, %d compare %d", a.Base58(), b.Base58(), got, a, b, want)
		}
	})
}

func idCmp(a, b ID) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func TestIDJSON(t *testing.T) {
	type record struct {
		ID   ID            `json:"id"`
		Ref  *ID           `json:"ref,omitempty"`
		Tags map[ID]string `json:"tags,omitempty"`
	}
	ref := ID(7)
	out, err := json.Marshal(record{ID: idMax, Ref: &ref, Tags: map[ID]string{12: "x"}})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"id":"9223372036854775807","ref":"7","tags":{"12":"x"}}`; string(out) != want {
		t.Errorf("json.Marshal = %s; want %s", out, want)
	}
	var r record
	if err := json.Unmarshal(out, &r); err != nil || r.ID != idMax || r.Ref == nil || *r.Ref != 7 || r.Tags[12] != "x" {
		t.Errorf("json.Unmarshal(%s) = %+v, %v", out, r, err)
	}

	for _, c := range []struct {
		in   string
		want ID
	}{
		{`{"id":"123"}`, 123},
		{`{"id":123}`, 123},
		{`{"id":0}`, 0},
		{`{"id":"0"}`, 0},
		{`{"id":"007"}`, 7},
		{`{"id": 9223372036854775807 }`, idMax},
		{`{"id":"9223372036854775807"}`, idMax},
	} {
		var r record
		if err := json.Unmarshal([]byte(c.in), &r); err != nil || r.ID != c.want {
			t.Errorf("json.Unmarshal(%s) = %d, %v; want %d", c.in, r.ID, err, c.want)
		}
	}

	// null leaves the ID unchanged, directly and through encoding/json.
	r = record{ID: 99}
	if err := json.Unmarshal([]byte(`{"id":null}`), &r); err != nil || r.ID != 99 {
		t.Errorf(`json.Unmarshal({"id":null}) = %d, %v; want 99 unchanged`, r.ID, err)
	}
	id := ID(5)
	if err := id.UnmarshalJSON([]byte("null")); err != nil || id != 5 {
		t.Errorf("UnmarshalJSON(null) = %d, %v; want 5 unchanged", id, err)
	}

	for _, c := range []struct {
		in     string
		errHas []string
	}{
		{`1.5`, []string{"fraction"}},
		{`1.0`, []string{"fraction"}},
		{`1e3`, []string{"exponent"}},
		{`1E3`, []string{"exponent"}},
		{`-1`, []string{"JSON number", "negative"}},
		{`-1.5`, []string{"negative"}},
		{`"-1"`, []string{"JSON string", "negative"}},
		{`"abc"`, []string{"JSON string", `"abc"`, "non-digit 'a' at position 1"}},
		{`""`, []string{"JSON string", "empty"}},
		{`" 1"`, []string{"non-digit ' '"}},
		{`"\u0031"`, []string{"non-digit '\\\\'"}},
		{`"1.5"`, []string{"non-digit '.'"}},
		{`"1`, []string{"unterminated string"}},
		{`"`, []string{"unterminated string"}},
		{`true`, []string{"JSON boolean", "not an ID"}},
		{`false`, []string{"JSON boolean"}},
		{`{}`, []string{"JSON object"}},
		{`[1]`, []string{"JSON array"}},
		{`nul`, []string{"JSON value"}},
		{``, []string{"empty JSON value"}},
		{`  `, []string{"empty JSON value"}},
		{`9223372036854775808`, []string{"overflows int64"}},
		{`"9223372036854775808"`, []string{"overflows int64"}},
		{`12345678901234567890123`, []string{"23 digits"}},
		{`012`, []string{"leading zero"}},
		{`12abc`, []string{"non-digit 'a' at position 3"}},
	} {
		id := ID(42)
		err := id.UnmarshalJSON([]byte(c.in))
		if err == nil {
			t.Errorf("UnmarshalJSON(%s) = %d, nil; want an error", c.in, id)
			continue
		}
		if !errors.Is(err, ErrInvalidID) {
			t.Errorf("UnmarshalJSON(%s) error %q does not wrap ErrInvalidID", c.in, err)
		}
		if id != 42 {
			t.Errorf("UnmarshalJSON(%s) changed the ID to %d on error", c.in, id)
		}
		for _, sub := range c.errHas {
			if !strings.Contains(err.Error(), sub) {
				t.Errorf("UnmarshalJSON(%s) error %q does not contain %q", c.in, err, sub)
			}
		}
	}

	// Through encoding/json the error still wraps ErrInvalidID.
	for _, in := range []string{`{"id":1.5}`, `{"id":"abc"}`, `{"id":-1}`, `{"id":""}`, `{"id":true}`, `{"id":{}}`} {
		var r record
		err := json.Unmarshal([]byte(in), &r)
		if !errors.Is(err, ErrInvalidID) {
			t.Errorf("json.Unmarshal(%s) error = %v; want ErrInvalidID", in, err)
		}
	}

	// Negative IDs do not marshal.
	if _, err := json.Marshal(record{ID: -1}); !errors.Is(err, ErrInvalidID) {
		t.Errorf("json.Marshal(ID -1) error = %v; want ErrInvalidID", err)
	}
	if _, err := ID(-1).MarshalText(); !errors.Is(err, ErrInvalidID) {
		t.Errorf("MarshalText(-1) error = %v; want ErrInvalidID", err)
	}
	if b, err := ID(-1).AppendText([]byte("x")); !errors.Is(err, ErrInvalidID) || string(b) != "x" {
		t.Errorf("AppendText(-1) = %q, %v; want \"x\", ErrInvalidID", b, err)
	}
}

func TestIDUnmarshalText(t *testing.T) {
	var id ID
	if err := id.UnmarshalText([]byte("123")); err != nil || id != 123 {
		t.Errorf("UnmarshalText(123) = %d, %v", id, err)
	}
	for _, in := range []string{"", "-1", "1.5", "abc", "9223372036854775808", "7ZZZZZZZZZZZZ"} {
		id := ID(42)
		if err := id.UnmarshalText([]byte(in)); !errors.Is(err, ErrInvalidID) || id != 42 {
			t.Errorf("UnmarshalText(%q) = %d, %v; want 42 unchanged and ErrInvalidID", in, id, err)
		}
	}
}

// TestDecodeTime checks Parts.Time, the time of an ID: Layout.Decode is the
// one way to read it.
func TestDecodeTime(t *testing.T) {
	l := DefaultLayout()
	at := defaultEpoch().Add(1234567 * time.Millisecond)
	id, err := l.Compose(Parts{Tick: 1234567, Datacenter: 3, Worker: 17, Sequence: 99})
	if err != nil {
		t.Fatal(err)
	}
	p, err := l.Decode(id)
	if err != nil || p.Tick != 1234567 || p.Datacenter != 3 || p.Worker != 17 || p.Sequence != 99 ||
		!p.Time.Equal(at) || p.Time.Location() != time.UTC {
		t.Errorf("Decode = %+v, %v; want tick 1234567 at %v in UTC", p, err, at)
	}
	if z, err := (Layout{}).Decode(id); err != nil || z != p {
		t.Errorf("zero Layout Decode = %+v, %v; want %+v (the default layout)", z, err, p)
	}
	if p, err := l.Decode(0); err != nil || !p.Time.Equal(defaultEpoch()) {
		t.Errorf("Decode(0) = %+v, %v; want the epoch", p, err)
	}
	if _, err := l.Decode(-1); !errors.Is(err, ErrInvalidID) {
		t.Errorf("Decode(-1) error = %v; want ErrInvalidID", err)
	}
	if _, err := (Layout{TimeBits: 60, SequenceBits: 10}).Decode(id); !errors.Is(err, ErrInvalidLayout) {
		t.Errorf("Decode(invalid layout) error = %v; want ErrInvalidLayout", err)
	}
	// An ID wider than the layout has no time under it.
	js := jsSafeLayout()
	if _, err := js.Decode(1 << 53); !errors.Is(err, ErrInvalidID) {
		t.Errorf("JSSafe Decode(2^53) error = %v; want ErrInvalidID", err)
	}
	if p, err := js.Decode(1<<53 - 1); err != nil || !p.Time.Equal(js.Epoch.Add(time.Duration(1<<38-1)*js.TimeUnit)) {
		t.Errorf("JSSafe Decode(2^53-1) = %+v, %v", p, err)
	}
	// The largest tick of an hour-unit layout exceeds int64 nanoseconds.
	hours := Layout{TimeBits: 63, TimeUnit: time.Hour, Epoch: defaultEpoch()}
	if p, err := hours.Decode(1 << 20); err != nil || !p.Time.Equal(defaultEpoch().Add(1<<20*time.Hour)) {
		t.Errorf("hours Decode(2^20) = %+v, %v", p, err)
	}
}

func TestIDAllocs(t *testing.T) {
	id := ID(1234567890123456789)
	js := []byte(`"1234567890123456789"`)
	num := []byte(`1234567890123456789`)
	var sink ID
	for _, c := range []struct {
		name string
		max  float64
		f    func()
	}{
		{"String", 1, func() { _ = id.String() }},
		{"Base32", 1, func() { _ = id.Base32() }},
		{"Base58", 1, func() { _ = id.Base58() }},
		{"MarshalJSON", 1, func() { _, _ = id.MarshalJSON() }},
		{"MarshalText", 1, func() { _, _ = id.MarshalText() }},
		{"Parse", 0, func() { sink, _ = Parse("1234567890123456789") }},
		{"ParseEncoded base32", 0, func() { sink, _ = ParseEncoded("12AB34CD56EF7") }},
		{"ParseEncoded base58", 0, func() { sink, _ = ParseEncoded("3gDmDv6tjHH") }},
		{"ParseAny", 0, func() { sink, _ = ParseAny("3gDmDv6tjHH") }},
		{"UnmarshalJSON string", 0, func() { _ = sink.UnmarshalJSON(js) }},
		{"UnmarshalJSON number", 0, func() { _ = sink.UnmarshalJSON(num) }},
		{"UnmarshalText", 0, func() { _ = sink.UnmarshalText(num) }},
	} {
		if got := testing.AllocsPerRun(100, c.f); got > c.max {
			t.Errorf("%s: %v allocations per run; want at most %v", c.name, got, c.max)
		}
	}
	_ = sink
}
