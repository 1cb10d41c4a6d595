package etcd

import (
	"cmp"
	"os"
	"sync"
	"syscall"
	"testing"

	"github.com/flakeid/flakeid/internal/etcdproc"
	"github.com/flakeid/flakeid/internal/testenv"
	"github.com/flakeid/flakeid/worker/workertest"
)

// privateEtcd is an etcd server of one test's own, so that the test can
// stop the process without disturbing the other packages' tests that share
// the etcd of scripts/services.sh.
type privateEtcd struct {
	*etcdproc.Server

	mu      sync.Mutex
	stopped bool
}

// startPrivateEtcd runs `etcd` (FLAKEID_ETCD_BIN overrides the binary) on
// free loopback ports with its data in a temporary directory, waits until it
// serves, and kills it when the test ends. Without the binary the test fails
// under CI=true and is skipped elsewhere.
func startPrivateEtcd(t *testing.T) *privateEtcd {
	t.Helper()
	bin := testenv.Command(t, cmp.Or(os.Getenv("FLAKEID_ETCD_BIN"), "etcd"),
		"a private etcd server is needed to pause it; install etcd-server (./scripts/services.sh does) or set FLAKEID_ETCD_BIN")
	s, err := etcdproc.Start(t.Context(), etcdproc.Options{
		Bin: bin, Dir: t.TempDir(), Name: "private",
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
	return &privateEtcd{Server: s}
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
