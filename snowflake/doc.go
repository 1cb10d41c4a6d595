// Package snowflake generates 63-bit, roughly time-ordered unique IDs in the
// Snowflake family and decodes them again.
//
// An ID is laid out, from the most significant bit down, as
//
//	0 | time (TimeBits) | datacenter (DatacenterBits) | worker (WorkerBits) | sequence (SequenceBits)
//
// The sign bit is always zero, so every ID is a non-negative int64. The
// [Layout] names the widths, the epoch and the time unit; [DefaultLayout] is
// 41 bits of milliseconds since 2025-01-01 UTC, 5 datacenter bits, 5 worker
// bits and 12 sequence bits, which lasts until 2094.
//
// A [Generator] is created by [New] from [Settings]; the zero Settings value
// means the default layout, datacenter 0 and worker 0. Its guarantees:
//
//   - IDs from one Generator are strictly increasing, across goroutines.
//   - Time is read from Go's monotonic clock, anchored to the wall clock when
//     the Generator is created: a wall-clock step backwards never moves IDs
//     backwards; a wall-clock step forwards is followed.
//   - Settings.NotBefore (a high-water mark persisted by a previous holder of
//     the same worker id) is never undercut: the Generator waits up to
//     Settings.MaxWait for its clock to pass it and fails with
//     [ErrClockBehind] beyond that.
//   - When a tick's sequence is used up, [Wait] sleeps until the next tick
//     and [Borrow] runs ahead of the clock by at most Settings.MaxBorrow.
//   - NextID is lock-free: one compare-and-swap on one packed word; it never
//     sleeps while holding a lock.
//
// [Layout.Decode] splits an ID into its [Parts] (time, datacenter, worker,
// sequence); [Generator.Layout] gives a generator's layout. [Parse] reads the
// decimal form, [ParseEncoded] the base32 and base58 forms, and [ParseAny]
// any of the three, for input typed by people.
//
// Uniqueness across machines additionally needs a unique (datacenter, worker)
// pair per running Generator; package worker leases those.
package snowflake
