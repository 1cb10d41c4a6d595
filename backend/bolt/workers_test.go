package bolt

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
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
	return openW(t, c.path)
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

// Wipe empties every bucket of the file, as a file that lost its records
// would be.
func (c connector) Wipe(t *testing.T) {
	db, err := bbolt.Open(c.path, 0o600, &bbolt.Options{Timeout: 10 * time.Second})
	if err != nil {
		t.Fatalf("wipe: %v", err)
	}
	defer db.Close()
	err = db.Update(func(tx *bbolt.Tx) error {
		return tx.ForEach(func(_ []byte, b *bbolt.Bucket) error {
			var keys [][]byte
			if err := b.ForEach(func(k, _ []byte) error {
				keys = append(keys, bytes.Clone(k))
				return nil
			}); err != nil {
				return err
			}
			for _, k := range keys {
				if err := b.Delete(k); err != nil {
					return err
				}
			}
			return nil
		})
	})
	if err != nil {
		t.Fatalf("wipe: %v", err)
	}
}

// Snapshot copies the file's bytes; the restore writes them back, as
// copying an old backup over the file does. The coordinator opens the file
// per operation, so no transaction is open in between.
func (c connector) Snapshot(t *testing.T) func() {
	saved, err := os.ReadFile(c.path)
	if err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	return func() {
		if err := os.WriteFile(c.path, saved, 0o600); err != nil {
			t.Fatalf("restore: %v", err)
		}
	}
}

// OtherNamespace is nil: a file is one namespace.
func (connector) OtherNamespace(*testing.T) worker.Coordinator { return nil }

func TestWorkersConformance(t *testing.T) {
	workertest.Run(t, workertest.Harness{
		Open: func(t *testing.T) workertest.Connector {
			return connector{path: filepath.Join(t.TempDir(), "workers.db")}
		},
		// 2s, not 1s: LeaseRenewsBeyondTTL compares the reservation after 2×TTL
		// with the first one, which the new namespace's floor (now + the default
		// quarantine, TTL/4 + 1s) already pushed out; under about 1.2s it cannot pass.
		TTL: 2 * time.Second,
	})
}

// TestGoneHolderIsFree: a lease whose holder process on this host has exited
// is free at once, keeping its high-water mark; a live or foreign holder's
// lease is not.
func TestGoneHolderIsFree(t *testing.T) {
	host, err := os.Hostname()
	if err != nil {
		t.Skip(err)
	}
	exited := exec.Command("true")
	if err := exited.Run(); err != nil {
		t.Fatal(err)
	}
	deadPID := exited.Process.Pid
	reserve := time.Now().Add(time.Minute).Truncate(time.Millisecond)
	for _, tc := range []struct {
		owner string
		free  bool
	}{
		{fmt.Sprintf("%s/%d/abc", host, deadPID), true},
		{fmt.Sprintf("%s/%d/abc", host, os.Getppid()), false}, // alive
		{fmt.Sprintf("elsewhere/%d/abc", deadPID), false},     // another host: cannot tell
		{"custom-owner", false},
	} {
		t.Run(tc.owner, func(t *testing.T) {
			w := openW(t, filepath.Join(t.TempDir(), "workers.db"))
			if _, err := w.Acquire(t.Context(), worker.Request{Workers: 1, Owner: tc.owner, TTL: time.Minute, Reserve: reserve}); err != nil {
				t.Fatal(err)
			}
			c, err := w.Acquire(t.Context(), worker.Request{Workers: 1, Owner: "next", TTL: time.Minute, Reserve: time.Now()})
			if tc.free {
				if err != nil || !c.Previous().Equal(reserve) {
					t.Fatalf("Acquire after the holder exited: %v, %v; want the id with Previous %v", c, err, reserve)
				}
			} else if !errors.Is(err, worker.ErrExhausted) {
				t.Fatalf("Acquire of %q's id: %v, want ErrExhausted", tc.owner, err)
			}
		})
	}
}

func BenchmarkWorkers(b *testing.B) {
	workertest.Benchmark(b, func(b *testing.B) worker.Coordinator {
		return openW(b, filepath.Join(b.TempDir(), "workers.db"))
	})
}

// TestNewcomerWhileLeaseRunsIsRollback: the file goes back to a copy in
// which the live holder's lease has lapsed and a newcomer takes the id; the
// holder's next Renew, still before the end of the lease it was granted,
// finds the rollback, re-initialises the namespace, and the newcomer's
// Renew then fails too.
func TestNewcomerWhileLeaseRunsIsRollback(t *testing.T) {
	const ttl = time.Second
	conn := connector{path: filepath.Join(t.TempDir(), "workers.db")}
	w := conn.Connect(t)
	req := func(owner string) worker.Request {
		return worker.Request{Workers: 1, Owner: owner, TTL: ttl, Reserve: time.Now().Truncate(time.Millisecond), Contract: "c"}
	}
	a, err := w.Acquire(t.Context(), req("holder"))
	if err != nil {
		t.Fatal(err)
	}
	restore := conn.Snapshot(t)
	for end := time.Now().Add(ttl + ttl/2); time.Now().Before(end); {
		time.Sleep(ttl / 5)
		if err := a.Renew(t.Context(), ttl, time.Now().Truncate(time.Millisecond)); err != nil {
			t.Fatalf("Renew while holding: %v", err)
		}
	}
	restore()
	before, _, err := w.Namespace(t.Context(), 0)
	if err != nil {
		t.Fatal(err)
	}
	b, err := w.Acquire(t.Context(), req("newcomer"))
	if err != nil {
		t.Fatalf("newcomer's Acquire from the old copy: %v", err)
	}
	err = a.Renew(t.Context(), ttl, time.Now().Truncate(time.Millisecond))
	if !errors.Is(err, worker.ErrReset) || errors.Is(err, worker.ErrNotHeld) {
		t.Fatalf("holder's Renew after the newcomer took its id: %v, want ErrReset", err)
	}
	t.Log(err)
	after, ok, err := w.Namespace(t.Context(), 0)
	if err != nil || !ok || after.Incarnation == before.Incarnation {
		t.Fatalf("namespace after the rollback: %+v, %v, %v; want a new incarnation (was %s)", after, ok, err, before.Incarnation)
	}
	if err := b.Renew(t.Context(), ttl, time.Now().Truncate(time.Millisecond)); !errors.Is(err, worker.ErrReset) {
		t.Fatalf("newcomer's Renew after the reset: %v, want ErrReset", err)
	}
}

// TestLapsedAfterLeaseIsNotHeld: a Renew after the end of the granted lease
// that finds a newcomer is the ordinary expiry (ErrNotHeld); so is one by an
// owner naming another, dead, process of this host, whose slot is free at
// once; and the Release of a released claim.
func TestLapsedAfterLeaseIsNotHeld(t *testing.T) {
	const ttl = 300 * time.Millisecond
	host, err := os.Hostname()
	if err != nil {
		t.Skip(err)
	}
	exited := exec.Command("true")
	if err := exited.Run(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, owner string
		wait        time.Duration
	}{
		{"expired", "holder", ttl + ttl/2},
		{"dead process", fmt.Sprintf("%s/%d/abc", host, exited.Process.Pid), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := connector{path: filepath.Join(t.TempDir(), "workers.db")}.Connect(t)
			req := func(owner string, ttl time.Duration) worker.Request {
				return worker.Request{Workers: 1, Owner: owner, TTL: ttl, Reserve: time.Now().Truncate(time.Millisecond), Contract: "c"}
			}
			a, err := w.Acquire(t.Context(), req(tc.owner, ttl))
			if err != nil {
				t.Fatal(err)
			}
			time.Sleep(tc.wait)
			// The newcomer's lease must outlive the steps below even on a
			// loaded machine: only a's lapsing is under test.
			b, err := w.Acquire(t.Context(), req("newcomer", 10*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			if err := a.Renew(t.Context(), ttl, time.Now().Truncate(time.Millisecond)); !errors.Is(err, worker.ErrNotHeld) {
				t.Fatalf("Renew after losing the id: %v, want ErrNotHeld", err)
			}
			if err := b.Release(t.Context(), time.Now().Truncate(time.Millisecond)); err != nil {
				t.Fatal(err)
			}
			if _, err := w.Acquire(t.Context(), req("third", 10*time.Second)); err != nil {
				t.Fatal(err)
			}
			if err := b.Release(t.Context(), time.Now().Truncate(time.Millisecond)); !errors.Is(err, worker.ErrNotHeld) {
				t.Fatalf("second Release: %v, want ErrNotHeld", err)
			}
		})
	}
}
