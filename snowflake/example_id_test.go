package snowflake_test

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/flakeid/flakeid/snowflake"
)

func ExampleParse() {
	id, err := snowflake.Parse("1234567890123456789")
	fmt.Println(id, err)

	_, err = snowflake.Parse("12a4")
	fmt.Println(err)
	fmt.Println(errors.Is(err, snowflake.ErrInvalidID))
	// Output:
	// 1234567890123456789 <nil>
	// snowflake: invalid ID: decimal "12a4": non-digit 'a' at position 3
	// true
}

func ExampleID_Base32() {
	for _, id := range []snowflake.ID{0, 32, 1234567890123456789, 9223372036854775807} {
		fmt.Println(id.Base32())
	}
	// Case and Crockford's aliases do not matter when parsing.
	id, _ := snowflake.ParseEncoded("l28ggyhyyko8n")
	fmt.Println(id)
	// Output:
	// 0000000000000
	// 0000000000010
	// 128GGYHYYK08N
	// 7ZZZZZZZZZZZZ
	// 1234567890123456789
}

func ExampleID_Base58() {
	for _, id := range []snowflake.ID{0, 58, 1234567890123456789, 9223372036854775807} {
		fmt.Println(id.Base58())
	}
	id, _ := snowflake.ParseEncoded("NQm6nKp8qFC")
	fmt.Println(id)
	// Output:
	// 11111111111
	// 11111111121
	// 3sDK21t5nHJ
	// NQm6nKp8qFC
	// 9223372036854775807
}

func ExampleID_MarshalJSON() {
	type event struct {
		ID   snowflake.ID `json:"id"`
		Name string       `json:"name"`
	}
	out, _ := json.Marshal(event{ID: 1234567890123456789, Name: "signup"})
	fmt.Println(string(out))

	// Both a JSON string and a JSON integer are accepted.
	var e event
	_ = json.Unmarshal([]byte(`{"id":42,"name":"login"}`), &e)
	fmt.Println(e.ID, e.Name)

	err := json.Unmarshal([]byte(`{"id":1.5}`), &e)
	fmt.Println(errors.Is(err, snowflake.ErrInvalidID))
	// Output:
	// {"id":"1234567890123456789","name":"signup"}
	// 42 login
	// true
}

// ParseEncoded tells base32 from base58 by length, so it reads every
// Base32 and Base58 form back, even one made only of digits.
func ExampleParseEncoded() {
	for _, s := range []string{"0000000000010", "11111111121", "128GGYHYYK08N", "3sDK21t5nHJ"} {
		id, err := snowflake.ParseEncoded(s)
		fmt.Println(id, err)
	}
	_, err := snowflake.ParseEncoded("1234567890123456789")
	fmt.Println(err)
	// Output:
	// 32 <nil>
	// 58 <nil>
	// 1234567890123456789 <nil>
	// 1234567890123456789 <nil>
	// snowflake: invalid ID: base32 or base58 "1234567890123456789": 19 bytes long, want 13 (base32) or 11 (base58) characters
}

// ParseAny reads what people type: decimal first, so an all-digit base32
// or base58 form reads as decimal (ParseEncoded reads it as encoded).
func ExampleParseAny() {
	for _, s := range []string{"1234567890123456789", "128GGYHYYK08N", "3sDK21t5nHJ", "0000000000010"} {
		id, err := snowflake.ParseAny(s)
		fmt.Println(id, err)
	}
	// Output:
	// 1234567890123456789 <nil>
	// 1234567890123456789 <nil>
	// 1234567890123456789 <nil>
	// 10 <nil>
}
