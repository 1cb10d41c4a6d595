package worker

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// Static returns a Leaser that always hands out the configured datacenter
// and worker id, for compatibility with configurations that set them by hand.
//
// It is unsafe, and says so in a warning on every Acquire: two processes
// configured alike issue duplicate IDs, and nothing stops a restart after the
// clock went back from reissuing IDs (no high-water mark is kept). Its leases
// never end until closed and fence nothing.
func Static(datacenter, workerID int64, logger *slog.Logger) Leaser {
	if logger == nil {
		logger = slog.Default()
	}
	return &staticLeaser{dc: datacenter, worker: workerID, log: logger, how: "configured statically"}
}

type staticLeaser struct {
	dc, worker int64
	log        *slog.Logger
	how        string
}

func (s *staticLeaser) Acquire(ctx context.Context) (Lease, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.log.Warn("worker: UNSAFE worker id: two processes with the same id issue duplicate IDs, and a restart after the clock went back can reissue IDs; lease worker ids from a coordinator instead",
		"datacenter", s.dc, "worker", s.worker, "source", s.how)
	return &staticLease{dc: s.dc, worker: s.worker, done: make(chan struct{})}, nil
}

type staticLease struct {
	dc, worker int64
	mu         sync.Mutex
	fencer     Fencer
	done       chan struct{}
	err        error
}

func (l *staticLease) DatacenterID() int64   { return l.dc }
func (l *staticLease) WorkerID() int64       { return l.worker }
func (l *staticLease) NotBefore() time.Time  { return time.Time{} }
func (l *staticLease) Until() time.Time      { return time.Time{} }
func (l *staticLease) Done() <-chan struct{} { return l.done }

func (l *staticLease) Bind(f Fencer) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.fencer = f
	if l.err != nil {
		f.Revoke()
	}
}

func (l *staticLease) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

func (l *staticLease) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err == nil {
		l.err = fmt.Errorf("%w: static worker id %d", ErrReleased, l.worker)
		if l.fencer != nil {
			l.fencer.Revoke()
		}
		close(l.done)
	}
	return nil
}

// ClockSkew is zero: a static lease has no coordinator to compare with.
func (l *staticLease) ClockSkew() time.Duration { return 0 }
