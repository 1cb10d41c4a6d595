package etcd

import (
	"cmp"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/flakeid/flakeid/worker"

	"github.com/flakeid/flakeid/internal/etcdproc"
	"github.com/flakeid/flakeid/internal/testenv"
	"github.com/flakeid/flakeid/worker/workertest"
)

// privateEtcd is an etcd server of one test's own, so that the test can
// stop the process without disturbing the other packages' tests that share
// the etcd of scripts/services.sh.
type privateEtcd struct {
	*etcdproc.Server

	dir string // etcdproc.Options.Dir

	mu      sync.Mutex
	stopped bool
}

// startPrivateEtcd runs `etcd` (FLAKEID_ETCD_BIN overrides the binary) on
// free loopback ports with its data in a temporary directory, waits until it
// serves, and kills it when the test ends. Without the binary the test fails
// under CI=true and is skipped elsewhere.
func startPrivateEtcd(t *testing.T) *privateEtcd { return startPrivateEtcdIn(t, t.TempDir()) }

// startPrivateEtcdIn is startPrivateEtcd with the server's files in dir
// (etcdproc.Options.Dir): a data directory already in dir/etcd-0/data is
// started from.
func startPrivateEtcdIn(t *testing.T, dir string) *privateEtcd {
	t.Helper()
	bin := testenv.Command(t, cmp.Or(os.Getenv("FLAKEID_ETCD_BIN"), "etcd"),
		"a private etcd server is needed to pause it; install etcd-server (./scripts/services.sh does) or set FLAKEID_ETCD_BIN")
	s, err := etcdproc.Start(t.Context(), etcdproc.Options{
		Bin: bin, Dir: dir, Name: "private",
		// Die with the test binary even when it is killed (go test -timeout).
		SysProcAttr: &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Kill()
		if t.Failed() {
			t.Logf("private etcd log:\n%s", s.Tail(4000))
		}
	})
	requireMinTTL(t, testClient(t, s.Addr()))
	return &privateEtcd{Server: s, dir: dir}
}

// faultyServer gives the fencing test of the suite a server to pause: a
// private etcd that every client of the test uses.
func faultyServer(t *testing.T, shared string) (faulty, healthy string, fault workertest.Fault) {
	p := startPrivateEtcd(t)
	return p.Addr(), p.Addr(), p
}

// Cut pauses the etcd process (SIGSTOP): its connections stay open and every
// request hangs, as with a server that froze.
func (p *privateEtcd) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.stopped {
		_ = p.Cmd().Process.Signal(syscall.SIGSTOP)
		p.stopped = true
	}
}

// Heal resumes it (SIGCONT).
func (p *privateEtcd) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		_ = p.Cmd().Process.Signal(syscall.SIGCONT)
		p.stopped = false
	}
}

// dataDir is the data directory the server runs on: that of etcdproc's last
// (successful) attempt.
func (p *privateEtcd) dataDir(t *testing.T) string {
	dirs, err := filepath.Glob(filepath.Join(p.dir, "etcd-*", "data"))
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no data directory under %s: %v", p.dir, err)
	}
	return slices.Max(dirs)
}

// renewAnswered renews cl until etcd answers (a client whose endpoints just
// changed reconnects first).
func renewAnswered(t *testing.T, cl worker.Claim, reserve time.Time) error {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		err := cl.Renew(ctx, testTTL, reserve)
		cancel()
		if !errors.Is(err, worker.ErrUnavailable) || errors.Is(err, worker.ErrReset) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestNewClusterBehindEndpoints: the etcd behind a holder's endpoints is
// replaced by a new, empty cluster (its data directory lost). The holder's
// keep-alive finds its lease gone — alone, that would mean it expired — and
// the missing namespace record tells that the state was lost.
func TestNewClusterBehindEndpoints(t *testing.T) {
	a := startPrivateEtcd(t)
	c := testClient(t, a.Addr())
	w := NewWorkers(c, "")
	cl, err := w.Acquire(t.Context(), worker.Request{Workers: 2, Owner: "holder", TTL: testTTL,
		Reserve: time.Now().Add(time.Second), Contract: "c", Quarantine: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	a.Kill()
	b := startPrivateEtcd(t)
	c.SetEndpoints(b.Addr())
	wantReset(t, w, renewAnswered(t, cl, time.Now().Add(time.Second)), "is gone", true)
	ns, ok, err := w.Namespace(t.Context(), 0)
	if err != nil || !ok || ns.Contract != "c" {
		t.Fatalf("the new cluster's record: %+v, %v, %v", ns, ok, err)
	}
	nearNow(t, "floor − quarantine", ns.Floor.Add(-3*time.Second))
	if reg, err := c.Get(t.Context(), w.keys().Registration(0)); err != nil || len(reg.Kvs) != 1 {
		t.Fatalf("the new cluster's registry entry: %v, %v", reg, err)
	}
}

// TestRestoredCopy: etcd goes back to an older copy of its data (here a copy
// of the data directory taken while the server was paused, as a disk
// snapshot or a backup restored with etcdutl would be). The copy brings back
// the holder's lease under its old id, so its keep-alive and its holder
// compares pass; the high-water mark below the one it stored tells the
// rollback. The copy also rewinds etcd's revision.
func TestRestoredCopy(t *testing.T) {
	a := startPrivateEtcd(t)
	c := testClient(t, a.Addr())
	w := NewWorkers(c, "")
	cl, err := w.Acquire(t.Context(), worker.Request{Workers: 2, Owner: "holder", TTL: 5 * time.Second,
		Reserve: time.Now().Add(time.Second), Contract: "c", Quarantine: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	old, _, err := w.Namespace(t.Context(), 0)
	if err != nil {
		t.Fatal(err)
	}
	copyDir := t.TempDir()
	a.Cut()
	err = os.CopyFS(filepath.Join(copyDir, "etcd-0", "data"), os.DirFS(a.dataDir(t)))
	a.Heal()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(copyDir, "etcd-0", "data"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := cl.Renew(t.Context(), testTTL, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	after, err := c.Get(t.Context(), w.keys().High(0, cl.WorkerID()))
	if err != nil {
		t.Fatal(err)
	}
	a.Kill()

	b := startPrivateEtcdIn(t, copyDir)
	c.SetEndpoints(b.Addr())
	var holder *clientv3.GetResponse
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		holder, err = c.Get(ctx, w.keys().Holder(0, cl.WorkerID()))
		cancel()
		if err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil || len(holder.Kvs) != 1 {
		t.Fatalf("the copy has no holder key (%v, %v): it did not come back", holder, err)
	}
	t.Logf("the restored holder key is on lease %x; etcd's revision went from %d to %d",
		holder.Kvs[0].Lease, after.Header.Revision, holder.Header.Revision)
	if holder.Header.Revision >= after.Header.Revision {
		t.Fatalf("revision %d after the restore, %d before: the copy is not older", holder.Header.Revision, after.Header.Revision)
	}
	wantReset(t, w, renewAnswered(t, cl, time.Now().Add(time.Second)), "high-water mark", true)
	ns, ok, err := w.Namespace(t.Context(), 0)
	if err != nil || !ok || ns.Incarnation == old.Incarnation || ns.Contract != "c" {
		t.Fatalf("the record after the rollback: %+v, %v, %v (was %+v)", ns, ok, err, old)
	}
	nearNow(t, "floor − quarantine", ns.Floor.Add(-3*time.Second))
}
