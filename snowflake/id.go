package snowflake

import "strconv"

// ID is a generated identifier: a non-negative int64 whose bits are laid out
// by a Layout.
type ID int64

// Int64 returns the ID as an int64.
func (id ID) Int64() int64 { return int64(id) }

// String returns the ID in decimal.
func (id ID) String() string { return strconv.FormatInt(int64(id), 10) }
