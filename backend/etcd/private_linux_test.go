package etcd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/flakeid/flakeid/internal/testenv"
	"github.com/flakeid/flakeid/worker/workertest"
)

// privateEtcd is an etcd server of one test's own, so that the test can
// stop the process without disturbing the other packages' tests that share
// the etcd of scripts/services.sh.
type privateEtcd struct {
	addr string
	cmd  *exec.Cmd
	log  string

	mu      sync.Mutex
	stopped bool
}

// startPrivateEtcd runs `etcd` (FLAKEID_ETCD_BIN overrides the binary) on
// free loopback ports with its data in a temporary directory, waits until it
// serves, and kills it when the test ends. Without the binary the test fails
// under CI=true and is skipped elsewhere.
func startPrivateEtcd(t *testing.T) *privateEtcd {
	t.Helper()
	bin := os.Getenv("FLAKEID_ETCD_BIN")
	if bin == "" {
		bin = "etcd"
	}
	path, err := exec.LookPath(bin)
	if err != nil {
		msg := fmt.Sprintf("a private etcd server is needed to pause it: %v; install etcd-server (./scripts/services.sh does) or set FLAKEID_ETCD_BIN", err)
		if testenv.CI() {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	var errs []error
	for range 3 { // a free port may be taken between probing it and etcd binding it
		p, err := tryStartEtcd(t, path)
		if err == nil {
			return p
		}
		errs = append(errs, err)
	}
	t.Fatalf("starting a private etcd: %v", errors.Join(errs...))
	return nil
}

func freePort(t *testing.T) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func tryStartEtcd(t *testing.T, bin string) (*privateEtcd, error) {
	dir := t.TempDir()
	client, peer := freePort(t), freePort(t)
	clientURL := fmt.Sprintf("http://127.0.0.1:%d", client)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", peer)
	logPath := filepath.Join(dir, "etcd.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	cmd := exec.Command(bin,
		"--name", "private",
		"--data-dir", filepath.Join(dir, "data"),
		"--listen-client-urls", clientURL, "--advertise-client-urls", clientURL,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", "private="+peerURL,
	)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Die with the test binary even when it is killed (go test -timeout).
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	p := &privateEtcd{addr: fmt.Sprintf("127.0.0.1:%d", client), cmd: cmd, log: logPath}
	kill := func() {
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-exited
	}

	c := testClient(t, p.addr)
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		_, err := c.Get(ctx, "ready")
		cancel()
		if err == nil {
			break
		}
		select {
		case werr := <-exited:
			exited <- werr
			kill()
			return nil, fmt.Errorf("etcd exited (%v) before serving; log:\n%s", werr, tail(logPath))
		default:
		}
		if time.Now().After(deadline) {
			kill()
			return nil, fmt.Errorf("etcd did not serve on %s within 20s (%v); log:\n%s", p.addr, err, tail(logPath))
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Cleanup(func() {
		kill()
		if t.Failed() {
			t.Logf("private etcd log:\n%s", tail(logPath))
		}
	})
	requireMinTTL(t, c)
	return p, nil
}

// faultyServer gives the fencing test of the suite a server to pause: a
// private etcd that every client of the test uses.
func faultyServer(t *testing.T, shared string) (faulty, healthy string, fault workertest.Fault) {
	p := startPrivateEtcd(t)
	return p.addr, p.addr, p
}

func tail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// Cut pauses the etcd process (SIGSTOP): its connections stay open and every
// request hangs, as with a server that froze.
func (p *privateEtcd) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.stopped {
		_ = p.cmd.Process.Signal(syscall.SIGSTOP)
		p.stopped = true
	}
}

// Heal resumes it (SIGCONT).
func (p *privateEtcd) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		_ = p.cmd.Process.Signal(syscall.SIGCONT)
		p.stopped = false
	}
}
