package consulproc

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flakeid/flakeid/internal/testenv"
)

// consulBin is the agent the tests run: $FLAKEID_TEST_CONSUL_BIN, or the
// one ./scripts/consul-agent.sh builds into its cache; else the test is
// skipped (failed under CI).
func consulBin(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("FLAKEID_TEST_CONSUL_BIN")
	if bin == "" {
		cache := os.Getenv("FLAKEID_TEST_CONSUL_CACHE")
		if cache == "" {
			dir, _ := os.UserCacheDir()
			cache = filepath.Join(dir, "flakeid")
		}
		bin = filepath.Join(cache, "consul-v1.22.5", "consul")
	}
	return testenv.Command(t, bin, "the test starts a private Consul agent; ./scripts/consul-agent.sh builds one, or set FLAKEID_TEST_CONSUL_BIN")
}

func start(t *testing.T) *Server {
	t.Helper()
	s, err := Start(t.Context(), Options{Bin: consulBin(t), Dir: t.TempDir(), Node: "consulproc-test",
		SysProcAttr: &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Kill)
	return s
}

// kv puts (value != "") or gets a key, returning the status and body.
func kv(t *testing.T, s *Server, key, value string) (int, string) {
	t.Helper()
	method, body := http.MethodGet, io.Reader(nil)
	if value != "" {
		method, body = http.MethodPut, strings.NewReader(value)
	}
	req, _ := http.NewRequestWithContext(t.Context(), method, "http://"+s.Addr()+"/v1/kv/"+key+"?raw", body)
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestServeRestartKill(t *testing.T) {
	t.Parallel()
	s := start(t)
	l, err := s.Leader(t.Context())
	if err != nil || l == "" {
		t.Fatalf("leader %q, %v", l, err)
	}
	if code, body := kv(t, s, "consulproc-test", "x"); code != http.StatusOK || body != "true" {
		t.Fatalf("PUT: %d %s", code, body)
	}
	if code, body := kv(t, s, "consulproc-test", ""); code != http.StatusOK || body != "x" {
		t.Fatalf("GET: %d %s", code, body)
	}
	addr, pid := s.Addr(), s.Process().Pid
	if err := s.Restart(t.Context()); err != nil {
		t.Fatal(err)
	}
	if s.Addr() != addr || s.Process().Pid == pid {
		t.Fatalf("after Restart: %s (pid %d), before %s (pid %d)", s.Addr(), s.Process().Pid, addr, pid)
	}
	if code, body := kv(t, s, "consulproc-test", ""); code != http.StatusNotFound {
		t.Fatalf("the key survived a restart of the dev agent: %d %s", code, body)
	}
	if !strings.Contains(s.Tail(1<<20), "consulproc-test") {
		t.Errorf("the log does not name the node consulproc-test:\n%s", s.Tail(2000))
	}
	p := s.Process()
	s.Kill()
	s.Kill() // a second Kill returns at once
	if err := p.Signal(syscall.Signal(0)); err == nil {
		t.Fatal("the process is alive after Kill")
	}
	if _, err := s.Leader(t.Context()); err == nil {
		t.Fatal("the agent answers after Kill")
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
	if _, err := s.Leader(t.Context()); err == nil {
		s.Resume()
		t.Fatal("a paused agent answered")
	}
	if err := s.Resume(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Leader(t.Context()); err != nil {
		t.Fatalf("after Resume: %v", err)
	}
	if err := s.Pause(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { s.Kill(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Kill of a paused agent did not return")
	}
}

func TestStartFails(t *testing.T) {
	t.Parallel()
	if _, err := Start(t.Context(), Options{Bin: "false", Dir: t.TempDir()}); err == nil || !strings.Contains(err.Error(), "exited before serving") {
		t.Fatalf("Start of a program that exits at once: %v", err)
	}
	if _, err := Start(t.Context(), Options{Bin: "/nonexistent/consul", Dir: t.TempDir()}); err == nil || !strings.Contains(err.Error(), "consul-agent.sh") {
		t.Fatalf("Start of a missing program: %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := Start(ctx, Options{Bin: "sleep", Dir: t.TempDir()}); err == nil || !strings.Contains(err.Error(), context.Canceled.Error()) {
		t.Fatalf("Start with a cancelled context: %v", err)
	}
}
