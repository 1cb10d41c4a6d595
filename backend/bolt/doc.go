// Package bolt keeps flakeid's state in embedded bbolt files: the worker-id
// coordinator for a single machine (Workers, the default of `flakeid next`
// and `flakeid serve`) and the segment store (Segments).
//
// # Opening
//
// OpenWorkers and OpenSegments open a file from its URL:
//
//	file:///abs/path/workers.db
//	file://relative/path/workers.db   (the host joined with the path)
//	file://localhost/abs/path         (the host "localhost" is none)
//
// A URL with a query parameter (it takes none), with no path ("no file
// path") or with any other scheme is refused.
//
// The files go through their data directory (the directory holding them:
// --data-dir for the defaults), which remembers the files it had
// (internal/datadir): a file that existed and is gone is refused rather than
// started afresh, a damaged one is refused here (ErrDamaged), and `flakeid
// recover` is the way back. The directory stays locked, shared, until the
// store's Close, so that a recovery cannot run beside it. `flakeid recover`
// itself, which holds the directory's exclusive lock, opens the files it
// re-creates with OpenWorkersForRecovery and OpenSegmentsForRecovery.
//
// Both stores open the file for each operation and close it again, so
// several processes on one machine share it safely: bbolt's file lock
// serialises them.
//
// Because every holder of a worker id is on this machine, a lease whose
// holder process is gone (its owner token names this host and a process id
// that no longer exists, as worker.Config's default owner does) is free at
// once instead of after its TTL, so a node killed with -9 restarts without
// waiting; the high-water mark still protects the IDs.
//
// # Data model of the worker coordinator
//
// The worker coordinator is the lease protocol of worker/protocol over the
// file: its Store reads a datacenter in one read-only transaction, and
// commits the driver's decision in one read-write transaction that reads
// the datacenter again and writes only if it is what was read
// (protocol.Same); every rule below is the driver's.
//
// One file is one namespace, and there is no datacenter registry: a second
// cluster on this machine uses a second file, which this one cannot see. The
// file holds the buckets
//
//   - "workers": one JSON record {holder, expires_ms, high_water_ms} per
//     worker id, keyed by the datacenter and the worker id (8 bytes each,
//     big-endian).
//   - "namespace": the namespace record of each datacenter used,
//     {incarnation, contract, floor_ms, initialised_ms}, keyed by the
//     datacenter (8 bytes, big-endian). Acquire writes it in the same
//     transaction as the slot when it is missing (a new file, or slots of
//     an older flakeid); it refuses a request whose contract differs
//     (worker.ErrContract, both contracts shown), or whose clock runs
//     ahead of this machine's past its worker.MarkBound (a node started
//     with another clock than the machine's), writing nothing.
//   - "registry": the file's ID space (worker.Request.Space: the layout)
//     under "space", written by the first Acquire. One file is one
//     namespace and claims every datacenter; worker.Admit refuses a request
//     with another ID space on any datacenter (worker.ErrContract), so that
//     a restart with another layout on another datacenter cannot reissue
//     the values the file's earlier nodes issued.
//   - "recovery": the floor `flakeid recover` set when it re-created the
//     file ({floor_ms} under "worker_floor", see Workers.RaiseFloor); a
//     namespace record initialised in this file never has a lower floor.
//
// A reset of this store is the file losing its records — buckets emptied, a
// file deleted and re-created by hand — or going back to an older copy (a
// restored backup, a snapshot of the disk). Renew and Release recognise it
// (worker.Diagnose): the namespace record is gone, it was initialised
// before the one the claim acquired under, or its incarnation is the
// claim's but the claim's slot is gone, its high-water mark is below the
// highest one the claim stored, or the slot is free, lapsed or held by
// another owner while this machine's clock is still before the end of the
// lease the claim was last granted (its last successful Acquire or Renew
// plus that call's TTL) — a newcomer that acquired from an old copy in
// which the claim's lease had lapsed. (A slot freed at once because its
// holder's process is gone is never a live claim's own; an owner naming
// another, dead, process on this host is left to the ordinary check.) They
// re-initialise the record (a new
// incarnation, a floor of now + the quarantine, never below the old floor)
// and fail with worker.ErrReset; a claim that finds a newer incarnation
// fails with ErrReset and changes nothing.
//
// The coordinator's clock is this machine's wall clock (Claim.Clock, never
// stale); a high-water mark persisted in the file is what makes a single
// node restarted after its clock went back never reissue an ID.
//
// # Damaged files
//
// A file that is empty, cut short, not a bbolt file or inconsistent is not
// a reset but damage, and starting afresh in its place could reissue IDs.
// bbolt maps the file and trusts its header, so such a file used to crash
// the process (SIGBUS past the end of a short file, panics on garbage).
// Every open here reads the size and both meta pages with plain reads
// first, runs bbolt with memory faults turned into errors, and the openers
// and CheckFile read every page once (files up to 64 MiB, with bbolt's
// consistency check): damage is an error wrapping ErrDamaged that names the
// file, what was found, the risk and the way to recover (`flakeid
// recover`). New files are created complete under a temporary name and
// linked in place, so an empty file is always damage, and a file is never
// created by a later operation: one deleted under a running process is an
// error. (A file lost while no process runs is noticed by the data
// directory, see Opening.)
package bolt
