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
