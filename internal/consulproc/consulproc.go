// Package consulproc runs a private Consul agent: `consul agent -dev` (a
// single server that keeps everything in memory) on free loopback ports,
// a process of the caller's own which it may pause (SIGSTOP), kill, or
// restart on the same ports — empty, since a dev agent has no disk —
// without disturbing anyone else's Consul. The nemesis of `flakeid verify
// --coordinator consul` and its tests use it.
//
// Consul has no Debian package: ./scripts/consul-agent.sh builds the agent
// once per machine and prints its path. The agent runs with
// session_ttl_min lowered to 1 s, so that leases of a few seconds can be
// tried.
package consulproc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/flakeid/flakeid/internal/procgroup"
)

// Options says how to run the agent.
type Options struct {
	// Bin is the consul executable: a path, or a name looked up in PATH;
	// default "consul".
	Bin string
	// Dir receives the agent's logs; it is created if needed.
	Dir string
	// Node is the agent's node name; default "private".
	Node string
	// SysProcAttr, if not nil, is the process's (for example to make it
	// die with its parent, or to give it a process group of its own).
	SysProcAttr *syscall.SysProcAttr
}

// A Server is a running dev agent. Its methods are safe for concurrent
// use.
type Server struct {
	o   Options
	bin string
	// The ports: HTTP (the API), serf LAN and WAN, server RPC. They stay
	// the same across restarts.
	http, serfLAN, serfWAN, server int

	procgroup.Running // the current process

}

// startWait bounds how long a start waits for the agent to elect itself.
const startWait = 30 * time.Second

// Start runs the agent on free loopback ports and waits (up to 30 s) until
// /v1/status/leader names a leader. ctx bounds only the start: the agent
// runs until Kill, which the caller must call.
func Start(ctx context.Context, o Options) (*Server, error) {
	if o.Bin == "" {
		o.Bin = "consul"
	}
	if o.Node == "" {
		o.Node = "private"
	}
	bin, err := exec.LookPath(o.Bin)
	if err != nil {
		return nil, fmt.Errorf("starting a private Consul agent: %w (./scripts/consul-agent.sh builds one and prints its path)", err)
	}
	if o.Dir == "" {
		return nil, errors.New("starting a private Consul agent: no directory (Options.Dir)")
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, err
	}
	var errs []error
	// A free port may be taken by another process between probing it and
	// the agent binding it: pick others, at most three times.
	for attempt := 0; attempt < 3; attempt++ {
		s := &Server{o: o, bin: bin}
		if err := s.pickPorts(); err != nil {
			return nil, err
		}
		err := s.start(ctx)
		if err == nil {
			return s, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, fmt.Errorf("starting a private Consul agent in %s: %w", o.Dir, errors.Join(errs...))
}

// pickPorts picks four distinct free ports, each free for TCP and UDP
// (serf uses both).
func (s *Server) pickPorts() error {
	var ports []int
	var held []io.Closer
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	for len(ports) < 4 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		held = append(held, ln)
		p := ln.Addr().(*net.TCPAddr).Port
		u, err := net.ListenPacket("udp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			continue // taken for UDP: keep the TCP one held, try another
		}
		held = append(held, u)
		ports = append(ports, p)
	}
	s.http, s.serfLAN, s.serfWAN, s.server = ports[0], ports[1], ports[2], ports[3]
	return nil
}

// Args are the agent's command-line arguments.
func (s *Server) Args() []string {
	return []string{"agent", "-dev", "-node", s.o.Node, "-bind", "127.0.0.1", "-client", "127.0.0.1",
		"-hcl", `session_ttl_min = "1s"`,
		"-http-port", strconv.Itoa(s.http), "-dns-port", "-1", "-grpc-port", "-1", "-grpc-tls-port", "-1",
		"-serf-lan-port", strconv.Itoa(s.serfLAN), "-serf-wan-port", strconv.Itoa(s.serfWAN),
		"-server-port", strconv.Itoa(s.server)}
}

// start runs the agent on s's ports and waits until it has a leader.
func (s *Server) start(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	cmd := exec.Command(s.bin, s.Args()...)
	cmd.Dir = s.o.Dir
	cmd.SysProcAttr = s.o.SysProcAttr
	exited, err := s.Running.Start(cmd, filepath.Join(s.o.Dir, "consul.%d.log"))
	if err != nil {
		return err
	}

	hc := &http.Client{Timeout: time.Second}
	defer hc.CloseIdleConnections()
	return s.AwaitReady(ctx, exited, startWait, "consul", "elect a leader", s.Addr(), func() error { _, err := s.leader(ctx, hc); return err })
}

// leader returns the agent's answer to /v1/status/leader, an error when it
// names none.
func (s *Server) leader(ctx context.Context, hc *http.Client) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+s.Addr()+"/v1/status/leader", nil)
	if err != nil {
		return "", err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if err != nil {
		return "", err
	}
	l := strings.Trim(strings.TrimSpace(string(b)), `"`)
	if resp.StatusCode != http.StatusOK || l == "" {
		return "", fmt.Errorf("/v1/status/leader: %s %q", resp.Status, b)
	}
	return l, nil
}

// Leader is the agent's answer to /v1/status/leader (its own server
// address once it has elected itself), waiting at most a second.
func (s *Server) Leader(ctx context.Context) (string, error) {
	hc := &http.Client{Timeout: time.Second}
	defer hc.CloseIdleConnections()
	return s.leader(ctx, hc)
}

// Addr is the HTTP API's address, 127.0.0.1:port; it stays the same across
// restarts.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.http)) }

// Restart kills the agent (SIGKILL) and starts it again on the same ports.
// A dev agent keeps everything in memory: it comes back empty — every key
// and session is gone, and its indexes start again.
func (s *Server) Restart(ctx context.Context) error {
	s.Kill()
	if err := procgroup.StartAgain(ctx, s.start); err != nil {
		return fmt.Errorf("restarting the private Consul agent on %s: %w", s.Addr(), err)
	}
	return nil
}

// Kill kills the process, even a stopped one, and waits until it has
// exited. It may be called more than once, and on a nil *Server.
func (s *Server) Kill() {
	if s != nil {
		s.Running.Kill()
	}
}
