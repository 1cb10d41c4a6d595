// Package coord holds what the worker-id coordinators of backend/ (bolt,
// consul, etcd, redis, sqldb, zk) share, so that each is written once:
// millisecond conversions of the marks and clocks they store, the JSON
// namespace record and datacenter registry entry of the key-value
// coordinators, the choice of a free worker id, and the wrapping of a
// store's failures in worker.ErrUnavailable.
//
// It is a leaf below package worker: it imports worker for its types and
// sentinels, and nothing of backend/. Errors keep each backend's words: a
// helper that fails is told the key, node or path to name.
package coord

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/flakeid/flakeid/worker"
	"github.com/flakeid/flakeid/worker/protocol"
)

// CeilMs is t in Unix milliseconds, rounded up, and 0 for the zero time: a
// high-water mark stored lower than a reservation could let the next holder
// start in a tick this one used.
func CeilMs(t time.Time) int64 { return protocol.CeilMs(t) }

// MsTime is the instant of a stored Unix-millisecond value, in UTC; 0 is the
// zero time (a mark never stored, no expiry).
func MsTime(ms int64) time.Time { return protocol.MsTime(ms) }

// CeilDurMs is d in whole milliseconds, rounded up (towards +∞): a TTL or a
// quarantine is never stored shorter than asked.
func CeilDurMs(d time.Duration) int64 { return protocol.CeilDurMs(d) }

// ParseID parses a worker id (or a datacenter id) written in canonical
// decimal: no sign, no leading zeros.
func ParseID(s string) (int64, bool) {
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id < 0 || strconv.FormatInt(id, 10) != s {
		return 0, false
	}
	return id, true
}

// Unavailable wraps a failure of a store or of the network in
// worker.ErrUnavailable, with what was being done (format and args), keeping
// err — and the context's error, when ctx has ended and err does not say so
// — visible to errors.Is.
func Unavailable(ctx context.Context, err error, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("%w: %s: %w (%w)", worker.ErrUnavailable, msg, err, cerr)
	}
	return fmt.Errorf("%w: %s: %w", worker.ErrUnavailable, msg, err)
}
