//go:build !linux

package etcd

import (
	"testing"

	"github.com/flakeid/flakeid/internal/faultnet"
	"github.com/flakeid/flakeid/worker/workertest"
)

// faultyServer: away from Linux the fencing test of the suite partitions the
// faulty client from the shared etcd with a proxy instead of pausing a
// private server.
func faultyServer(t *testing.T, shared string) (faulty, healthy string, fault workertest.Fault) {
	p, err := faultnet.Listen(shared)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p.Addr(), shared, p
}
