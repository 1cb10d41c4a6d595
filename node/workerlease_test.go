package node

import (
	"errors"
	"strings"
	"testing"

	"github.com/flakeid/flakeid/worker"
)

// TestLeaseWorkerID: a handed-out lease is another worker id of the node's
// datacenter, past its probation; released, the next lease of that id
// starts past its reservation; with every id held the node says so at once;
// Close of the node releases what is still open.
func TestLeaseWorkerID(t *testing.T) {
	coord := boltCoordinator(t, "")
	n, err := Start(t.Context(), config(t, coord, 1, nil, 0))
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	l, err := n.LeaseWorkerID(t.Context(), "test/1")
	if err != nil {
		t.Fatal(err)
	}
	if l.WorkerID() == n.Status().WorkerID || !l.Until().After(l.NotBefore()) {
		t.Fatalf("lease of worker %d [%v, %v) beside the node's worker %d", l.WorkerID(), l.NotBefore(), l.Until(), n.Status().WorkerID)
	}
	if _, err := n.LeaseWorkerID(t.Context(), "test/2"); !errors.Is(err, worker.ErrExhausted) {
		t.Fatalf("with both worker ids held: %v", err)
	}
	until := l.Until()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l2, err := n.LeaseWorkerID(t.Context(), "test/2")
	if err != nil {
		t.Fatal(err)
	}
	if l2.WorkerID() != l.WorkerID() || l2.NotBefore().Before(until) {
		t.Fatalf("the next lease of worker %d starts at %v, before %v", l2.WorkerID(), l2.NotBefore(), until)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-l2.Done():
	default:
		t.Fatal("a handed-out lease still held after the node closed")
	}
	if _, err := n.LeaseWorkerID(t.Context(), "late"); !errors.Is(err, ErrNoLease) {
		t.Fatalf("from a closed node: %v", err)
	}
}

func TestLeaseWorkerIDRefused(t *testing.T) {
	for _, owner := range []string{"", strings.Repeat("x", MaxOwnerLen+1), "a b", "ü", "a\x00"} {
		if err := ValidOwner(owner); !errors.Is(err, ErrInvalidOwner) {
			t.Errorf("ValidOwner(%q) = %v", owner, err)
		}
	}
	if err := ValidOwner("svc-1_a.b:c/d@e"); err != nil {
		t.Error(err)
	}
	static := int64(1)
	n, err := Start(t.Context(), Config{StaticWorkerID: &static, Logger: quiet(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if _, err := n.LeaseWorkerID(t.Context(), "x"); !errors.Is(err, ErrStaticWorkerID) {
		t.Fatalf("a static node: %v", err)
	}
	if c := n.LeaseConfig(); c.TTL != 0 {
		t.Fatalf("a static node's lease config %+v", c)
	}
}
