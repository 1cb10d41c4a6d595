package snowflake_test

import (
	"fmt"
	"time"

	"github.com/flakeid/flakeid/snowflake"
)

// Bounds gives the range of IDs of a time window, for a range scan on an
// ID-keyed table.
func ExampleLayout_Bounds() {
	l := snowflake.DefaultLayout()
	march := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	b, err := l.Bounds(march, march.AddDate(0, 1, 0))
	if err != nil {
		panic(err)
	}
	fmt.Printf("SELECT … WHERE id BETWEEN %d AND %d\n", b.Min, b.Max)
	// A window that no ID's time can lie in is refused, saying why.
	_, err = l.Bounds(march, march)
	fmt.Println(err)
	// Output:
	// SELECT … WHERE id BETWEEN 153652455014400000 AND 164886478847999999
	// snowflake: no ID's time lies in the window: it ends (2026-03-01T00:00:00Z) before it starts (2026-03-01T00:00:00Z)
}

// A UUIDView writes an ID as a UUIDv7 (and its TypeID and ULID texts) and
// reads it back: the time in unix_ts_ms, the datacenter, worker and
// sequence in the counter bits, random bits below.
func ExampleNewUUIDView() {
	l := snowflake.DefaultLayout()
	v, err := snowflake.NewUUIDView(l)
	if err != nil {
		panic(err)
	}
	id, _ := l.Compose(snowflake.Parts{Tick: 60_000_000_000, Datacenter: 3, Worker: 17, Sequence: 42})
	u, _ := v.UUID(id, [10]byte{}) // a server draws these 80 bits from a CSPRNG
	fmt.Println(u)                 // 71c4 82a0: version 7, then counter 0x7102a (dc 3, worker 17, sequence 42) over the variant bits 10
	fmt.Println(string(u.AppendForm(nil, snowflake.FormTypeID, "order")))
	fmt.Println(string(u.AppendForm(nil, snowflake.FormULID, "")))
	back, _ := v.ID(u)
	fmt.Println(back == id, v.CounterBits())
	// Output:
	// 01a21770-d400-71c4-82a0-000000000000
	// order_01m8bq1n00e728580000000000
	// 01M8BQ1N00E728580000000000
	// true 22
}
