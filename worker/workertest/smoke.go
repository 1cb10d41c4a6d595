package workertest

import (
	"testing"
	"time"

	"github.com/flakeid/flakeid/worker"
)

// Smoke acquires a worker id of datacenter 0 with a lease of ttl, sees it
// listed as held by its owner, and releases it: the quick check that a
// coordinator a backend opened from its URL works, for the backend's opener
// tests (Run checks the guarantees). The namespace must hold no lease.
func Smoke(t *testing.T, c worker.Coordinator, ttl time.Duration) {
	t.Helper()
	const owner = "workertest-smoke"
	cl, err := c.Acquire(t.Context(), worker.Request{Workers: 1, Owner: owner, TTL: ttl, Reserve: time.Now()})
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	if infos, err := c.List(t.Context(), 0); err != nil || len(infos) != 1 || infos[0].Worker != cl.WorkerID() || infos[0].Holder != owner {
		t.Fatalf("List = %+v, %v; want worker %d held by %q", infos, err, cl.WorkerID(), owner)
	}
	if err := cl.Release(t.Context(), time.Now()); err != nil {
		t.Fatalf("Release: %v", err)
	}
}
