// Package idview writes a Snowflake ID as a UUIDv7, and as the TypeID and
// ULID texts of that UUID, and reads it back: View maps one layout's IDs to
// UUIDs (the ID's time in unix_ts_ms, its datacenter, worker and sequence in
// the counter bits, random bits below), UUID.AppendForm and ParseText write
// and read the three texts. It lives beside package snowflake, whose
// generator needs none of it.
package idview

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/big"
	"math/bits"
	"time"

	"github.com/flakeid/flakeid/snowflake"
)

// UUID is a 128-bit value in RFC 9562 byte order (big-endian): the value
// behind the UUIDv7, TypeID and ULID texts of an ID (see View). The
// three texts are one value written three ways: a ULID or a TypeID suffix
// is the same 128 bits in Crockford base32.
type UUID [16]byte

// UUIDv7 field widths (RFC 9562, section 5.7): 48 bits of Unix
// milliseconds, the 4-bit version, 12 bits rand_a, the 2-bit variant and
// 62 bits rand_b. PayloadBits is rand_a and rand_b together.
const (
	// PayloadBits is the number of bits of a UUIDv7 that are neither its
	// time, version nor variant: rand_a (12) and rand_b (62).
	PayloadBits = 74
	// MaxUUIDMilli is the largest Unix-millisecond time a UUIDv7 holds.
	MaxUUIDMilli = 1<<48 - 1
)

// NewUUIDv7 returns the UUIDv7 with Unix-millisecond time ms (0 to
// MaxUUIDMilli; other bits are dropped) and the payload hi‖lo in rand_a and
// rand_b: the low 10 bits of hi, then the 64 bits of lo. The payload's top
// 12 bits are rand_a and its low 62 bits rand_b, so UUIDs of the same
// millisecond sort (as bytes and as text) by their payloads.
func NewUUIDv7(ms int64, hi uint16, lo uint64) UUID {
	var u UUID
	top := uint64(ms)<<16 | 0x7000 | (uint64(hi)&0x3ff)<<2 | lo>>62
	binary.BigEndian.PutUint64(u[:8], top)
	binary.BigEndian.PutUint64(u[8:], 1<<63|lo&(1<<62-1))
	return u
}

// UnixMilli returns the UUID's 48-bit time field: Unix milliseconds for a
// UUIDv7.
func (u UUID) UnixMilli() int64 { return int64(binary.BigEndian.Uint64(u[:8]) >> 16) }

// Version returns the UUID's version field (7 for a UUIDv7).
func (u UUID) Version() int { return int(u[6] >> 4) }

// RFCVariant reports whether the UUID's variant bits are 10, the variant of
// RFC 9562.
func (u UUID) RFCVariant() bool { return u[8]>>6 == 2 }

// Payload returns rand_a‖rand_b, the 74 bits NewUUIDv7 took: the top 10 in
// hi, the low 64 in lo.
func (u UUID) Payload() (hi uint16, lo uint64) {
	top, bottom := binary.BigEndian.Uint64(u[:8]), binary.BigEndian.Uint64(u[8:])
	return uint16(top>>2) & 0x3ff, top<<62 | bottom&(1<<62-1)
}

// CheckV7 fails with snowflake.ErrInvalidID, naming what is wrong, when u is not a
// UUIDv7 of the RFC 9562 variant.
func (u UUID) CheckV7() error {
	if v := u.Version(); v != 7 {
		return fmt.Errorf("%w: %s is a version %d UUID, not version 7", snowflake.ErrInvalidID, u, v)
	}
	if !u.RFCVariant() {
		return fmt.Errorf("%w: %s has variant bits %02b, not 10 (RFC 9562)", snowflake.ErrInvalidID, u, u[8]>>6)
	}
	return nil
}

// View maps the IDs of a layout to UUIDv7 values and back. A UUID of an
// ID is, from the most significant bit:
//
//	unix_ts_ms (48) | ver 0111 | counter (C bits) and random (74 − C bits) | …
//
// with the variant bits 10 in place after rand_a, as RFC 9562 lays them
// out. unix_ts_ms is the ID's time (the start of its tick, in Unix
// milliseconds, rounded down); the counter is RFC 9562's "fixed bit-length
// dedicated counter" (its Method 1), from its top bit down:
//
//	sub-millisecond tick (S bits) | datacenter | worker | sequence
//
// S is 0 for time units of 1 ms or more, where every tick starts in a
// millisecond of its own; for finer units it counts the ticks that start
// in the same millisecond (10 bits for 1 µs). So two IDs never give the
// same UUID: the time and the counter together are the ID. The bits below
// the counter are random, from the caller (a CSPRNG). One generator's
// UUIDs sort, as bytes and as text, in the order it issued the IDs.
//
// A View is immutable and safe for concurrent use.
type View struct {
	layout       snowflake.Layout // normalized
	nodeBits     uint             // datacenter + worker + sequence: the bits under the time field
	totalBits    uint             // time + nodeBits
	maxTick      int64
	subBits      uint  // S
	counterBits  uint  // S + nodeBits, at most 72
	perMilli     int64 // ticks starting in one millisecond, at most (unit < 1 ms)
	fastMs       bool  // epoch and unit are whole milliseconds
	epochMs      int64
	unitMs       int64
	subUnitTicks bool     // unit < 1 ms
	epochNs      *big.Int // the epoch in Unix nanoseconds, for layouts that are not fastMs
}

// New returns the View of layout l. It fails with
// snowflake.ErrInvalidLayout for a layout that does not normalize.
func New(l snowflake.Layout) (*View, error) {
	n, err := l.Normalize()
	if err != nil {
		return nil, err
	}
	v := &View{layout: n, nodeBits: uint(n.DatacenterBits + n.WorkerBits + n.SequenceBits)}
	v.totalBits, v.maxTick = v.nodeBits+uint(n.TimeBits), int64(uint64(1)<<n.TimeBits-1)
	unitNs := int64(n.TimeUnit)
	if unitNs < int64(time.Millisecond) {
		v.subUnitTicks = true
		v.perMilli = (int64(time.Millisecond) + unitNs - 1) / unitNs
		v.subBits = uint(bits.Len64(uint64(v.perMilli - 1)))
	}
	v.counterBits = v.subBits + v.nodeBits
	if n.Epoch.Nanosecond()%int(time.Millisecond) == 0 && unitNs%int64(time.Millisecond) == 0 {
		v.fastMs, v.epochMs, v.unitMs = true, n.Epoch.UnixMilli(), unitNs/int64(time.Millisecond)
	}
	v.epochNs = new(big.Int).Add(new(big.Int).Mul(big.NewInt(n.Epoch.Unix()), big.NewInt(int64(time.Second))), big.NewInt(int64(n.Epoch.Nanosecond())))
	return v, nil
}

// Layout returns the view's normalized layout.
func (v *View) Layout() snowflake.Layout { return v.layout }

// tickTime is the start of tick (at most maxTick).
func (v *View) tickTime(tick int64) time.Time {
	if v.fastMs {
		return time.UnixMilli(v.epochMs + tick*v.unitMs)
	}
	p, _ := v.layout.Decode(snowflake.ID(tick << v.nodeBits)) // cannot fail: the tick fits
	return p.Time
}

// CounterBits returns the width of the counter under unix_ts_ms: the
// sub-millisecond tick, datacenter, worker and sequence bits (22 for the
// default layout). The other 74 − CounterBits bits of rand_a and rand_b are
// random.
func (v *View) CounterBits() int { return int(v.counterBits) }

// UnixMilli returns the time of id's tick in Unix milliseconds, rounded
// down: a UUIDv7's unix_ts_ms. The ID must fit the layout.
func (v *View) UnixMilli(id snowflake.ID) int64 {
	tick := int64(id) >> v.nodeBits
	if v.fastMs {
		return v.epochMs + tick*v.unitMs
	}
	return v.tickTime(tick).UnixMilli()
}

// UUID returns the UUIDv7 of id, with the bits below its counter taken
// from random (the low bits of its 80). It fails with snowflake.ErrInvalidID for an
// ID that does not fit the layout.
func (v *View) UUID(id snowflake.ID, random [10]byte) (UUID, error) {
	if id < 0 || v.totalBits < snowflake.MaxBits && uint64(id)>>v.totalBits != 0 {
		_, err := v.layout.Decode(id)
		return UUID{}, err
	}
	tick := int64(id) >> v.nodeBits
	ms := v.UnixMilli(id)
	var sub uint64
	if v.subUnitTicks {
		sub = uint64(tick - v.firstTickOf(ms))
	}
	// The counter sub‖node (at most 72 bits) left-aligned in the 74 bits
	// of the payload, over the random filler.
	chi, clo := shl128(0, sub, v.nodeBits)
	clo |= uint64(id) & (1<<v.nodeBits - 1)
	fill := PayloadBits - v.counterBits
	hi, lo := shl128(chi, clo, fill)
	fhi, flo := mask128(uint64(binary.BigEndian.Uint16(random[:2])), binary.BigEndian.Uint64(random[2:]), fill)
	return NewUUIDv7(ms, uint16(hi|fhi), lo|flo), nil
}

// ID returns the ID whose UUIDv7 u is (whatever its random bits). It fails
// with snowflake.ErrInvalidID, naming why, when u is not a UUIDv7 of the RFC variant,
// or not one of this layout's: its time is before the epoch, past the
// layout's end or (for units over 1 ms) not the start of a tick, or its
// sub-millisecond tick is not one that starts in that millisecond.
func (v *View) ID(u UUID) (snowflake.ID, error) {
	if err := u.CheckV7(); err != nil {
		return 0, err
	}
	ms := u.UnixMilli()
	phi, plo := u.Payload()
	chi, clo := shr128(uint64(phi), plo, PayloadBits-v.counterBits)
	node := int64(clo & (1<<v.nodeBits - 1))
	_, sl := shr128(chi, clo, v.nodeBits)
	sub := int64(sl & (1<<v.subBits - 1))
	first := v.firstTickOf(ms)
	tick := first + sub
	if first < 0 || first > v.maxTick || tick > v.maxTick {
		return 0, fmt.Errorf("%w: UUID %s: its time %s is outside layout %s", snowflake.ErrInvalidID, u,
			rfc3339(time.UnixMilli(ms)), v.layout)
	}
	if got := v.tickTime(tick).UnixMilli(); got != ms {
		if sub == 0 {
			return 0, fmt.Errorf("%w: UUID %s: its time %s is not the start of a tick of layout %s", snowflake.ErrInvalidID, u,
				rfc3339(time.UnixMilli(ms)), v.layout)
		}
		return 0, fmt.Errorf("%w: UUID %s: sub-millisecond tick %d does not start in its millisecond (%d ticks of %v do)",
			snowflake.ErrInvalidID, u, sub, v.perMilli, v.layout.TimeUnit)
	}
	return snowflake.ID(tick<<v.nodeBits | node), nil
}

// firstTickOf returns the first tick that starts at or after the start of
// Unix millisecond ms: ceil((ms − epoch) / unit), which may be negative.
func (v *View) firstTickOf(ms int64) int64 {
	if v.fastMs {
		d := ms - v.epochMs
		q := d / v.unitMs
		if d%v.unitMs != 0 && d > 0 {
			q++
		}
		return q
	}
	// In nanoseconds since the epoch, which may not fit an int64.
	d := new(big.Int).Sub(new(big.Int).Mul(big.NewInt(ms), big.NewInt(int64(time.Millisecond))), v.epochNs)
	unit := big.NewInt(int64(v.layout.TimeUnit))
	d.Add(d, unit).Sub(d, big.NewInt(1)) // ceil, as floor of d + unit − 1
	d.Div(d, unit)                       // Euclidean: floor for a positive divisor
	switch {
	case d.IsInt64():
		return d.Int64()
	case d.Sign() > 0:
		return math.MaxInt64
	}
	return math.MinInt64
}

// shl128 shifts the 128-bit hi‖lo left by n (< 128).
func shl128(hi, lo uint64, n uint) (uint64, uint64) {
	if n >= 64 {
		return lo << (n - 64), 0
	}
	if n == 0 {
		return hi, lo
	}
	return hi<<n | lo>>(64-n), lo << n
}

// shr128 shifts the 128-bit hi‖lo right by n (< 128).
func shr128(hi, lo uint64, n uint) (uint64, uint64) {
	if n >= 64 {
		return 0, hi >> (n - 64)
	}
	if n == 0 {
		return hi, lo
	}
	return hi >> n, lo>>n | hi<<(64-n)
}

// mask128 keeps the low n bits of hi‖lo.
func mask128(hi, lo uint64, n uint) (uint64, uint64) {
	switch {
	case n >= 128:
		return hi, lo
	case n >= 64:
		return hi & (1<<(n-64) - 1), lo
	}
	return 0, lo & (1<<n - 1)
}

// rfc3339 writes t for an error: RFC 3339 in UTC, with the fraction it has.
func rfc3339(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
