package zkproc

import (
	"cmp"
	"context"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/flakeid/flakeid/internal/testenv"
)

// zkBin is the zkServer.sh the tests run, or the test is skipped (failed
// under CI).
func zkBin(t *testing.T) string {
	t.Helper()
	return testenv.Command(t, cmp.Or(os.Getenv("FLAKEID_ZK_BIN"), DefaultBin),
		"the test starts a private ZooKeeper; install Debian's zookeeper package (./scripts/services.sh does) or set FLAKEID_ZK_BIN")
}

// start starts a server for the test, killed at its end.
func start(t *testing.T) *Server {
	t.Helper()
	s, err := Start(t.Context(), Options{Bin: zkBin(t), Dir: t.TempDir(),
		SysProcAttr: &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Kill)
	return s
}

// connect opens a client session and waits until it is connected.
func connect(t *testing.T, addr string) *zk.Conn {
	t.Helper()
	c, events, err := zk.Connect([]string{addr}, 4*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	deadline := time.After(10 * time.Second)
	for {
		select {
		case ev := <-events:
			if ev.State == zk.StateHasSession {
				return c
			}
		case <-deadline:
			t.Fatalf("no session with %s within 10s", addr)
		}
	}
}

func TestServeRestartKill(t *testing.T) {
	t.Parallel()
	s := start(t)
	if out, err := s.FourLetter(t.Context(), "ruok"); err != nil || out != "imok" {
		t.Fatalf("ruok: %q, %v", out, err)
	}
	c := connect(t, s.Addr())
	if _, err := c.Create("/zkproc-test", []byte("x"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	c.Close()
	addr, pid := s.Addr(), s.Process().Pid

	// A restart keeps the port and, without wipe, the data.
	if err := s.Restart(t.Context(), false); err != nil {
		t.Fatal(err)
	}
	if s.Addr() != addr || s.Process().Pid == pid {
		t.Fatalf("after Restart: %s (pid %d), before %s (pid %d)", s.Addr(), s.Process().Pid, addr, pid)
	}
	c = connect(t, s.Addr())
	if ok, _, err := c.Exists("/zkproc-test"); err != nil || !ok {
		t.Fatalf("the node is gone after a restart without wipe: %v %v", ok, err)
	}
	c.Close()

	// With wipe, the data is gone.
	if err := s.Restart(t.Context(), true); err != nil {
		t.Fatal(err)
	}
	if s.Addr() != addr {
		t.Fatalf("after Restart with wipe: %s, before %s", s.Addr(), addr)
	}
	c = connect(t, s.Addr())
	if ok, _, err := c.Exists("/zkproc-test"); err != nil || ok {
		t.Fatalf("the node is still there after a restart with wipe: %v %v", ok, err)
	}
	c.Close()

	p := s.Process()
	s.Kill()
	s.Kill() // a second Kill returns at once
	if err := p.Signal(syscall.Signal(0)); err == nil {
		t.Fatal("the process is alive after Kill")
	}
	if _, err := s.FourLetter(t.Context(), "ruok"); err == nil {
		t.Fatal("the server answers after Kill")
	}
	var none *Server
	none.Kill()
}

func TestPauseResume(t *testing.T) {
	t.Parallel()
	s := start(t)
	if err := s.Pause(); err != nil {
		t.Fatal(err)
	}
	if out, err := s.FourLetter(t.Context(), "ruok"); err == nil && out == "imok" {
		s.Resume()
		t.Fatal("a paused server answered ruok")
	}
	if err := s.Resume(); err != nil {
		t.Fatal(err)
	}
	if out, err := s.FourLetter(t.Context(), "ruok"); err != nil || out != "imok" {
		t.Fatalf("ruok after Resume: %q, %v", out, err)
	}
	// A paused server dies of Kill too.
	if err := s.Pause(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { s.Kill(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Kill of a paused server did not return")
	}
}

func TestStartFails(t *testing.T) {
	t.Parallel()
	if _, err := Start(t.Context(), Options{Bin: "false", Dir: t.TempDir()}); err == nil || !strings.Contains(err.Error(), "exited before serving") {
		t.Fatalf("Start of a program that exits at once: %v", err)
	}
	if _, err := Start(t.Context(), Options{Bin: "/nonexistent/zkServer.sh", Dir: t.TempDir()}); err == nil || !strings.Contains(err.Error(), "zookeeper package") {
		t.Fatalf("Start of a missing program: %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := Start(ctx, Options{Bin: "sleep", Dir: t.TempDir()}); err == nil || !strings.Contains(err.Error(), context.Canceled.Error()) {
		t.Fatalf("Start with a cancelled context: %v", err)
	}
}
