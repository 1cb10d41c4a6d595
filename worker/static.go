package worker

import (
	"context"
	"fmt"
	"hash/fnv"
	"log/slog"
	"net"
	"os"
	"strings"
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

// DerivedSource names what Derived hashes into a worker id.
type DerivedSource string

// The sources Derived accepts.
const (
	FromHostname DerivedSource = "hostname" // the host name (a pod name in Kubernetes)
	FromIP       DerivedSource = "ip"       // the first non-loopback IP address
	FromMACPID   DerivedSource = "mac-pid"  // the first hardware address and the process id
)

// Derived returns a Leaser whose worker id is a hash of the host name, the IP
// address or the MAC address and process id, modulo workers, as MyBatis-Plus
// and Hutool derive theirs. It is as unsafe as Static and more so: distinct
// hosts can hash to the same id, containers often share MACs and run as
// PID 1, and an IP that changes changes the id. A warning says so on every
// Acquire; use a coordinator.
func Derived(source DerivedSource, datacenter, workers int64, logger *slog.Logger) (Leaser, error) {
	if workers < 1 {
		return nil, fmt.Errorf("%w: workers %d, want at least 1", ErrInvalidConfig, workers)
	}
	if logger == nil {
		logger = slog.Default()
	}
	var key string
	switch source {
	case FromHostname:
		h, err := os.Hostname()
		if err != nil {
			return nil, fmt.Errorf("worker: deriving a worker id from the host name: %w", err)
		}
		key = h
	case FromIP:
		addrs, err := net.InterfaceAddrs()
		if err != nil {
			return nil, fmt.Errorf("worker: deriving a worker id from the IP address: %w", err)
		}
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && !ipn.IP.IsLoopback() {
				key = ipn.IP.String()
				break
			}
		}
		if key == "" {
			return nil, fmt.Errorf("%w: no non-loopback IP address to derive a worker id from", ErrInvalidConfig)
		}
	case FromMACPID:
		ifs, err := net.Interfaces()
		if err != nil {
			return nil, fmt.Errorf("worker: deriving a worker id from the MAC address: %w", err)
		}
		for _, i := range ifs {
			if len(i.HardwareAddr) > 0 {
				key = i.HardwareAddr.String()
				break
			}
		}
		key += fmt.Sprintf("/%d", os.Getpid())
	default:
		return nil, fmt.Errorf("%w: unknown derived source %q (want %s, %s or %s)", ErrInvalidConfig, source, FromHostname, FromIP, FromMACPID)
	}
	h := fnv.New64a()
	h.Write([]byte(key))
	id := int64(h.Sum64() % uint64(workers))
	return &staticLeaser{dc: datacenter, worker: id, log: logger,
		how: fmt.Sprintf("derived from the %s %q", strings.ReplaceAll(string(source), "-", " and "), key)}, nil
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
