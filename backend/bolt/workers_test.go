package bolt

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/flakeid/flakeid/worker"
	"github.com/flakeid/flakeid/worker/workertest"
)

type connector struct{ path string }

func (c connector) Connect(t *testing.T) worker.Coordinator {
	w, err := OpenWorkers(context.Background(), c.path)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// ConnectFaulty's fault holds the file's lock, as a hung process would:
// every other operation waits for it until its deadline.
func (c connector) ConnectFaulty(t *testing.T) (worker.Coordinator, workertest.Fault) {
	return c.Connect(t), &lockFault{t: t, path: c.path}
}

type lockFault struct {
	t    *testing.T
	path string
	mu   sync.Mutex
	db   *bbolt.DB
}

func (f *lockFault) Cut() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.db != nil {
		return
	}
	db, err := bbolt.Open(f.path, 0o600, &bbolt.Options{Timeout: 10 * time.Second})
	if err != nil {
		f.t.Errorf("holding the lock of %s: %v", f.path, err)
		return
	}
	f.db = db
}

func (f *lockFault) Heal() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.db != nil {
		f.db.Close()
		f.db = nil
	}
}

func TestWorkersConformance(t *testing.T) {
	workertest.Run(t, workertest.Harness{
		Open: func(t *testing.T) workertest.Connector {
			return connector{path: filepath.Join(t.TempDir(), "workers.db")}
		},
		TTL: time.Second,
	})
}
