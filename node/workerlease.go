package node

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/flakeid/flakeid/worker"
)

// ErrStaticWorkerID means a node on a static worker id was asked for a
// worker-id lease to hand out: it has no coordinator to lease one from.
var ErrStaticWorkerID = errors.New("node: a static worker id: no coordinator to lease worker ids from")

// ErrInvalidOwner means LeaseWorkerID was given an owner it does not take.
var ErrInvalidOwner = errors.New("node: invalid lease owner")

// MaxOwnerLen is the longest owner LeaseWorkerID takes.
const MaxOwnerLen = 64

// handedLeases are the leases a node handed out (LeaseWorkerID) that are
// still open: Close closes them.
type handedLeases struct {
	mu     sync.Mutex
	open   map[*handedLease]struct{}
	closed bool
}

// handedLease is a lease LeaseWorkerID returned; its Close forgets it.
type handedLease struct {
	worker.Lease
	set *handedLeases
}

// Close releases the lease (see worker.Lease.Close).
func (h *handedLease) Close() error {
	h.set.mu.Lock()
	delete(h.set.open, h)
	h.set.mu.Unlock()
	return h.Lease.Close()
}

// ValidOwner checks an owner for LeaseWorkerID: 1 to MaxOwnerLen
// characters, each a letter, a digit or one of "-_.:/@".
func ValidOwner(owner string) error {
	if owner == "" || len(owner) > MaxOwnerLen {
		return fmt.Errorf("%w: %d characters, want 1–%d", ErrInvalidOwner, len(owner), MaxOwnerLen)
	}
	for _, r := range owner {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' ||
			r == '.' || r == ':' || r == '/' || r == '@'
		if !ok {
			return fmt.Errorf("%w: %q has %q; use letters, digits and -_.:/@", ErrInvalidOwner, owner, r)
		}
	}
	return nil
}

// LeaseConfig is the configuration of the node's worker-id leases with its
// defaults filled in (the TTL, the renewal period, the reservation): the
// leases LeaseWorkerID hands out have it too. It is the zero Config on a
// static worker id.
func (n *Node) LeaseConfig() worker.Config {
	if n.cfg.StaticWorkerID != nil {
		return worker.Config{}
	}
	return n.leaseCfg
}

// LeaseWorkerID leases a worker id of the node's datacenter from the node's
// coordinator for another process, one that generates IDs of the node's
// layout itself (a client's local generator): a lease like the node's own,
// with its reservation, high-water mark and fencing, renewed by this node
// until it is closed. The process may issue IDs in ticks that start at or
// after NotBefore and before the Until it was last told; whoever holds the
// worker id next starts past every Until the lease stored.
//
// It returns once the lease's probation is over (its first renewal found
// the coordinator's state unchanged), so that Until lies past NotBefore;
// ctx bounds that wait and the acquisition, which fails at once when every
// worker id is held (worker.ErrExhausted). owner names the process in the
// coordinator, after the node's own owner (see ValidOwner). The lease is the
// caller's to Close; Close of the node closes those still open. A node on a
// static worker id fails with ErrStaticWorkerID.
func (n *Node) LeaseWorkerID(ctx context.Context, owner string) (worker.Lease, error) {
	if n.cfg.StaticWorkerID != nil {
		return nil, ErrStaticWorkerID
	}
	if err := ValidOwner(owner); err != nil {
		return nil, err
	}
	cfg := n.leaseCfg
	cfg.Owner += "/for:" + owner
	cfg.WaitForFree = false
	lr, err := worker.NewLeaser(n.cfg.Coordinator, cfg)
	if err != nil {
		return nil, err
	}
	n.handed.mu.Lock()
	closed := n.handed.closed
	n.handed.mu.Unlock()
	if closed {
		return nil, fmt.Errorf("%w: the node is closed", ErrNoLease)
	}
	l, err := lr.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	if err := waitProbation(ctx, l); err != nil {
		l.Close()
		return nil, err
	}
	h := &handedLease{Lease: l, set: &n.handed}
	n.handed.mu.Lock()
	defer n.handed.mu.Unlock()
	if n.handed.closed {
		l.Close()
		return nil, fmt.Errorf("%w: the node is closed", ErrNoLease)
	}
	if n.handed.open == nil {
		n.handed.open = map[*handedLease]struct{}{}
	}
	n.handed.open[h] = struct{}{}
	return h, nil
}

// waitProbation waits until l reserves ticks past its high-water mark.
func waitProbation(ctx context.Context, l worker.Lease) error {
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for !l.Until().After(l.NotBefore()) {
		select {
		case <-ctx.Done():
			return fmt.Errorf("node: waiting for the lease's first renewal: %w", ctx.Err())
		case <-l.Done():
			return fmt.Errorf("node: the lease ended before its first renewal: %w", l.Err())
		case <-t.C:
		}
	}
	return nil
}

// closeHanded closes the leases handed out and still open, and refuses
// new ones.
func (n *Node) closeHanded() error {
	n.handed.mu.Lock()
	n.handed.closed = true
	open := n.handed.open
	n.handed.open = nil
	n.handed.mu.Unlock()
	var errs []error
	for h := range open {
		errs = append(errs, h.Lease.Close())
	}
	return errors.Join(errs...)
}
