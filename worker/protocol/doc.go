// Package protocol is the worker-id lease protocol written once: a Driver
// that implements worker.Coordinator (with worker.MarkLowerer and
// worker.Registry) over a Store, the small interface of atomic reads and
// writes a coordinator's adapter provides.
//
// Every decision lives here: admission (worker.Admit), the clock bound
// (worker.MarkBound), choosing a free worker id (Pick), the
// previous/mark arithmetic and its rounding, a namespace record's
// initialisation and re-initialisation after a lost state, why a renewal
// failed (worker.Diagnose), freeing a datacenter and lowering a mark, the
// retries after a lost race and every error's words. A Store only reads a
// datacenter's State and commits the next State the driver decided, guarded
// by what it read being unchanged:
//
//	Acquire:  Read(dc) → Acquisition(req, state) → Commit(state, next)
//	Renew:    Read(dc) → Renewal(hold, state)    → Commit(state, next)
//
// A Commit that finds the state changed since it was read fails with
// ErrConflict, and the driver reads and decides again. So a new coordinator
// is a Store: docs/ARCHITECTURE.md "Adding a coordinator" walks through one
// (backend/nats).
package protocol
