// Package natsproc runs a private NATS server with JetStream: nats-server
// on a free loopback port, its store under a directory of the caller's, a
// process of the caller's own which it may pause (SIGSTOP), kill, or
// restart on the same port, with its store or without it, without
// disturbing anyone else's NATS. The NATS coordinator's tests and the
// nemesis of `flakeid verify --coordinator nats` use it.
package natsproc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/flakeid/flakeid/internal/procgroup"
)

// Options says how to run the server.
type Options struct {
	// Bin is the nats-server executable: a path, or a name looked up in
	// PATH; default "nats-server", then Debian's /usr/sbin/nats-server.
	Bin string
	// Dir holds the server's JetStream store and logs; it is created if
	// needed.
	Dir string
	// SysProcAttr, if not nil, is the process's (for example to make it
	// die with its parent, or to give it a process group of its own).
	SysProcAttr *syscall.SysProcAttr
}

// A Server is a running nats-server. Its methods are safe for concurrent
// use.
type Server struct {
	o    Options
	bin  string
	port int // stays the same across restarts

	procgroup.Running // the current process

}

// startWait bounds how long a start waits for JetStream to answer.
const startWait = 20 * time.Second

// Bin is the nats-server executable of bin (see Options.Bin).
func Bin(bin string) (string, error) {
	if bin != "" && bin != "nats-server" {
		return exec.LookPath(bin)
	}
	if p, err := exec.LookPath("nats-server"); err == nil {
		return p, nil
	}
	return exec.LookPath("/usr/sbin/nats-server")
}

// Start runs the server on a free loopback port and waits (up to 20 s)
// until JetStream answers. ctx bounds only the start: the server runs
// until Kill, which the caller must call.
func Start(ctx context.Context, o Options) (*Server, error) {
	bin, err := Bin(o.Bin)
	if err != nil {
		return nil, fmt.Errorf("starting a private NATS server: %w (install Debian's nats-server)", err)
	}
	if o.Dir == "" {
		return nil, errors.New("starting a private NATS server: no directory (Options.Dir)")
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, err
	}
	var errs []error
	// A free port may be taken by another process between probing it and
	// the server binding it: pick another, at most three times.
	for range 3 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		s := &Server{o: o, bin: bin, port: ln.Addr().(*net.TCPAddr).Port}
		ln.Close()
		if err = s.start(ctx); err == nil {
			return s, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, fmt.Errorf("starting a private NATS server in %s: %w", o.Dir, errors.Join(errs...))
}

// Addr is the client address, 127.0.0.1:port; it stays the same across
// restarts.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// URL is the client URL, nats://127.0.0.1:port.
func (s *Server) URL() string { return "nats://" + s.Addr() }

// start runs the server on s's port and waits until JetStream answers.
func (s *Server) start(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	cmd := exec.Command(s.bin, "-a", "127.0.0.1", "-p", strconv.Itoa(s.port), "-js", "-sd", filepath.Join(s.o.Dir, "store"))
	cmd.Dir = s.o.Dir
	cmd.SysProcAttr = s.o.SysProcAttr
	exited, err := s.Running.Start(cmd, filepath.Join(s.o.Dir, "nats.%d.log"))
	if err != nil {
		return err
	}
	return s.AwaitReady(ctx, exited, startWait, "nats-server", "serve JetStream", s.Addr(), func() error { return s.ready(ctx) })
}

// ready connects and asks JetStream for the account's information.
func (s *Server) ready(ctx context.Context) error {
	nc, err := natsgo.Connect(s.URL(), natsgo.Timeout(time.Second), natsgo.NoReconnect())
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	_, err = js.AccountInfo(ctx)
	return err
}

// Restart kills the server (SIGKILL) and starts it again on the same port:
// with its JetStream store, or, when wipe, after deleting it — a server
// that lost its disk, every bucket gone.
func (s *Server) Restart(ctx context.Context, wipe bool) error {
	s.Kill()
	if wipe {
		if err := os.RemoveAll(filepath.Join(s.o.Dir, "store")); err != nil {
			return err
		}
	}
	if err := procgroup.StartAgain(ctx, s.start); err != nil {
		return fmt.Errorf("restarting the private NATS server on %s: %w", s.Addr(), err)
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
