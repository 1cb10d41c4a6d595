package snowflake

import "errors"

// Sentinel errors. Every error returned by this package wraps exactly one of
// them (test with [errors.Is]) and adds the values that were wrong.
var (
	// ErrInvalidLayout means a Layout cannot be used: its fields do not fit
	// in 63 bits, a width or the time unit is out of range, or its epoch is
	// in the future.
	ErrInvalidLayout = errors.New("snowflake: invalid layout")

	// ErrTimeExhausted means the layout's time field has run out: the clock
	// is past Layout.Capacity().RunsUntil.
	ErrTimeExhausted = errors.New("snowflake: time field exhausted")

	// ErrNodeOutOfRange means a datacenter or worker id does not fit in the
	// bits the layout gives it.
	ErrNodeOutOfRange = errors.New("snowflake: datacenter or worker id out of range")

	// ErrInvalidSettings means a Settings field other than the layout and the
	// node ids is out of range.
	ErrInvalidSettings = errors.New("snowflake: invalid settings")

	// ErrClockBehind means the generator's clock is behind the last tick it
	// issued (or Settings.NotBefore) by more than Settings.MaxWait, so it
	// refuses to issue rather than wait that long or reissue an ID.
	ErrClockBehind = errors.New("snowflake: clock is behind the high-water mark")

	// ErrFenced means the generator may not issue the ID: it would fall in a
	// tick at or past Settings.Until (the reservation its worker-id lease has
	// stored), or the generator was revoked: its lease ended (released, lost
	// for clock skew, or replaced by a new one).
	ErrFenced = errors.New("snowflake: fenced")

	// ErrInvalidID means a text or JSON form could not be parsed as an ID,
	// or an ID does not fit the layout it is decoded with.
	ErrInvalidID = errors.New("snowflake: invalid ID")

	// ErrEmptyWindow means Layout.Bounds was given a time window in which
	// no ID's time can lie: it is empty, ends before the epoch, starts past
	// the end of the time field, or holds no tick's start.
	ErrEmptyWindow = errors.New("snowflake: no ID's time lies in the window")

	// ErrInvalidTime means ParseTime could not read an instant.
	ErrInvalidTime = errors.New("snowflake: invalid time")

	// ErrInvalidCount means NextN was asked for fewer than one ID.
	ErrInvalidCount = errors.New("snowflake: invalid count")
)
