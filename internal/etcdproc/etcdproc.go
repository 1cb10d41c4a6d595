// Package etcdproc runs a private etcd server: a process of the caller's own
// on free loopback ports, which it may pause (SIGSTOP) or kill without
// disturbing anyone else's etcd. The fault tests of backend/etcd and the
// nemesis of `flakeid verify` use it.
package etcdproc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// Options says how to run the server.
type Options struct {
	// Bin is the etcd executable: a path, or a name looked up in PATH.
	Bin string
	// Dir is where the server keeps its data and log: each attempt to
	// start it uses a subdirectory etcd-N of its own, created if needed.
	Dir string
	// Name is the member's name; default "private".
	Name string
	// SysProcAttr, if not nil, is the process's (for example to make it
	// die with its parent).
	SysProcAttr *syscall.SysProcAttr
}

// A Server is a running etcd process.
type Server struct {
	addr   string
	cmd    *exec.Cmd
	log    string
	exited chan struct{} // closed when the process has exited
	kill   sync.Once
}

// startAttempts bounds the retries of Start: a free port may be taken by
// another process between probing it and etcd binding it.
const startAttempts = 3

// Start runs etcd with a single-member cluster on free loopback ports and
// waits (up to 20s an attempt) until it answers /health. ctx bounds only
// the start: the server runs until Kill. The caller must Kill it.
func Start(ctx context.Context, o Options) (*Server, error) {
	if o.Name == "" {
		o.Name = "private"
	}
	var errs []error
	for attempt := range startAttempts {
		s, err := start(ctx, o, filepath.Join(o.Dir, "etcd-"+strconv.Itoa(attempt)))
		if err == nil {
			return s, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, fmt.Errorf("starting a private etcd: %w", errors.Join(errs...))
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func start(ctx context.Context, o Options, dir string) (*Server, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	client, err := freePort()
	if err != nil {
		return nil, err
	}
	peer, err := freePort()
	if err != nil {
		return nil, err
	}
	clientURL := fmt.Sprintf("http://127.0.0.1:%d", client)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", peer)
	logPath := filepath.Join(dir, "etcd.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	cmd := exec.Command(o.Bin,
		"--name", o.Name,
		"--data-dir", filepath.Join(dir, "data"),
		"--listen-client-urls", clientURL, "--advertise-client-urls", clientURL,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", o.Name+"="+peerURL,
	)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = o.SysProcAttr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &Server{addr: fmt.Sprintf("127.0.0.1:%d", client), cmd: cmd, log: logPath, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(s.exited) }()
	hc := &http.Client{Timeout: 500 * time.Millisecond}
	deadline := time.Now().Add(20 * time.Second)
	for {
		if healthy(ctx, hc, clientURL) {
			return s, nil
		}
		if err := ctx.Err(); err != nil { // before exited: a cancelled start is reported as such
			s.Kill()
			return nil, err
		}
		select {
		case <-s.exited:
			return nil, fmt.Errorf("etcd exited before serving; log:\n%s", s.Tail(2000))
		default:
		}
		if time.Now().After(deadline) {
			s.Kill()
			return nil, fmt.Errorf("etcd did not serve on %s within 20s; log:\n%s", s.addr, s.Tail(2000))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// healthy reports whether the etcd at base answers /health with health
// "true".
func healthy(ctx context.Context, hc *http.Client, base string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/health", nil)
	if err != nil {
		return false
	}
	resp, err := hc.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	var h struct {
		Health string `json:"health"`
	}
	return resp.StatusCode == http.StatusOK && json.NewDecoder(resp.Body).Decode(&h) == nil && h.Health == "true"
}

// Addr is the server's client address, host:port.
func (s *Server) Addr() string { return s.addr }

// Cmd is the server's command, whose Process the caller may signal
// (SIGSTOP pauses the server: its connections stay open and every request
// hangs; SIGCONT resumes it). The caller must not Wait for it: Kill does.
func (s *Server) Cmd() *exec.Cmd { return s.cmd }

// Kill kills the process, even a stopped one, and waits until it has
// exited. It may be called more than once, and on a nil *Server.
func (s *Server) Kill() {
	if s == nil {
		return
	}
	s.kill.Do(func() {
		_ = s.cmd.Process.Kill()
		<-s.exited
	})
}

// Tail is the last n bytes of the server's log.
func (s *Server) Tail(n int) string {
	b, _ := os.ReadFile(s.log)
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
