package idview_test

import (
	"fmt"

	"github.com/flakeid/flakeid/idview"
	"github.com/flakeid/flakeid/snowflake"
)

// A View writes an ID as a UUIDv7 (and its TypeID and ULID texts) and
// reads it back: the time in unix_ts_ms, the datacenter, worker and
// sequence in the counter bits, random bits below.
func ExampleNew() {
	l := snowflake.DefaultLayout()
	v, err := idview.New(l)
	if err != nil {
		panic(err)
	}
	id, _ := l.Compose(snowflake.Parts{Tick: 60_000_000_000, Datacenter: 3, Worker: 17, Sequence: 42})
	u, _ := v.UUID(id, [10]byte{}) // a server draws these 80 bits from a CSPRNG
	fmt.Println(u)                 // 71c4 82a0: version 7, then counter 0x7102a (dc 3, worker 17, sequence 42) over the variant bits 10
	fmt.Println(string(u.AppendForm(nil, idview.FormTypeID, "order")))
	fmt.Println(string(u.AppendForm(nil, idview.FormULID, "")))
	back, _ := v.ID(u)
	fmt.Println(back == id, v.CounterBits())
	// Output:
	// 01a21770-d400-71c4-82a0-000000000000
	// order_01m8bq1n00e728580000000000
	// 01M8BQ1N00E728580000000000
	// true 22
}
