// Package zkproc runs a private ZooKeeper server: a standalone process of
// the caller's own on a loopback port, with an explicit zoo.cfg and its data
// under a directory of the caller's, which it may pause (SIGSTOP), kill, or
// restart on the same port with or without its data (a ZooKeeper that lost
// its disk) without disturbing anyone else's ZooKeeper. The nemesis of
// `flakeid verify --coordinator zk` and its tests use it.
//
// The server is Debian's: `zkServer.sh start-foreground <dir>/zoo.cfg`,
// which execs java, so the process started is the server itself (and, with
// Setpgid in Options.SysProcAttr, the leader of a process group of its own).
package zkproc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/flakeid/flakeid/internal/procgroup"
)

// DefaultBin is Debian's ZooKeeper start script (package zookeeper).
const DefaultBin = "/usr/share/zookeeper/bin/zkServer.sh"

// Options says how to run the server.
type Options struct {
	// Bin is zkServer.sh (a path, or a name looked up in PATH); default
	// DefaultBin. It is run as `Bin start-foreground <Dir>/zoo.cfg` and must
	// exec the server.
	Bin string
	// Dir holds zoo.cfg, the data directory (data), the logs and the pid
	// file; it is created if needed.
	Dir string
	// Port is the client port on 127.0.0.1; 0 picks a free one.
	Port int
	// SysProcAttr, if not nil, is the process's (for example to make it
	// die with its parent, or to give it a process group of its own).
	SysProcAttr *syscall.SysProcAttr
}

// A Server is a running ZooKeeper process. Its methods are safe for
// concurrent use.
type Server struct {
	o    Options
	bin  string
	port int

	procgroup.Running // the current process

}

// startWait bounds how long a start waits for the server to answer.
const startWait = 30 * time.Second

// Start writes <Dir>/zoo.cfg and runs the server, waiting (up to 30 s)
// until it answers `ruok` with `imok` and serves. ctx bounds only the
// start: the server runs until Kill, which the caller must call.
func Start(ctx context.Context, o Options) (*Server, error) {
	if o.Bin == "" {
		o.Bin = DefaultBin
	}
	bin, err := exec.LookPath(o.Bin)
	if err != nil {
		return nil, fmt.Errorf("starting a private ZooKeeper: %w (install Debian's zookeeper package, which ./scripts/services.sh does)", err)
	}
	if o.Dir == "" {
		return nil, errors.New("starting a private ZooKeeper: no directory (Options.Dir)")
	}
	if err := os.MkdirAll(filepath.Join(o.Dir, "log"), 0o755); err != nil {
		return nil, err
	}
	s := &Server{o: o, bin: bin, port: o.Port}
	var errs []error
	// A free port may be taken by another process between probing it and
	// the server binding it: pick another, at most three times.
	for attempt := 0; attempt < 3; attempt++ {
		if o.Port == 0 {
			if s.port, err = freePort(); err != nil {
				return nil, err
			}
		}
		err := s.start(ctx)
		if err == nil {
			return s, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil || o.Port != 0 {
			break
		}
	}
	return nil, fmt.Errorf("starting a private ZooKeeper in %s: %w", o.Dir, errors.Join(errs...))
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// Config is the zoo.cfg of a server on port with its data in dataDir:
// loopback only, a 500 ms tick (so sessions of a second or two are
// allowed), no admin server, only the four-letter words ruok, srvr and
// stat, and no fsync of the transaction log (forceSync=no). A private
// server is killed and restarted but never loses power: ZooKeeper writes
// each transaction to the kernel before it answers, which a kill -9 keeps,
// and a sync to the disk would only make every write (a session's
// creation, a lease's renewal) wait on the other tests' disk traffic.
func Config(dataDir string, port int) string {
	return fmt.Sprintf(`tickTime=500
initLimit=10
syncLimit=5
dataDir=%s
clientPort=%d
clientPortAddress=127.0.0.1
admin.enableServer=false
4lw.commands.whitelist=ruok,srvr,stat
maxSessionTimeout=60000
forceSync=no
`, dataDir, port)
}

// jvmFlags keep the server's start light on a machine it shares with what
// it serves: a test's or the verifier's nodes on two cores. By default the
// JVM starts 31 threads and spends 0.9–1.2 s of CPU, parallel compilers and
// collectors at once, before it answers, and the nodes beside it stalled up
// to 130 ms in each restart of the verifier's zk-restart; C1 alone on one
// compiler thread and the serial collector (23 threads) spend 0.67–0.73 s.
// A private server's load is small, its heap at most 256 MB.
const jvmFlags = "-Xmx256m -XX:TieredStopAtLevel=1 -XX:CICompilerCount=1 -XX:+UseSerialGC"

// start runs the server on s.port and waits until it serves.
func (s *Server) start(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	cfg := filepath.Join(s.o.Dir, "zoo.cfg")
	if err := os.WriteFile(cfg, []byte(Config(s.DataDir(), s.port)), 0o644); err != nil {
		return err
	}
	if err := os.MkdirAll(s.DataDir(), 0o755); err != nil {
		return err
	}
	cmd := exec.Command(s.bin, "start-foreground", cfg)
	logDir := filepath.Join(s.o.Dir, "log")
	// Debian's zkEnv.sh sets ZOO_LOG_DIR itself; the -D flags of JVMFLAGS
	// come last on java's command line and win, sending the log to the
	// console (logFile). The JVM compiles with C1 only, on one compiler
	// thread, and collects with the serial collector (jvmFlags).
	cmd.Env = append(os.Environ(), "ZOO_LOG_DIR="+logDir, "ZOOPIDFILE="+filepath.Join(s.o.Dir, "zookeeper.pid"),
		"JVMFLAGS=-Dzookeeper.log.dir="+logDir+" -Dzookeeper.root.logger=INFO,CONSOLE "+jvmFlags)
	cmd.Dir = s.o.Dir
	cmd.SysProcAttr = s.o.SysProcAttr
	exited, err := s.Running.Start(cmd, filepath.Join(s.o.Dir, "log", "zookeeper.%d.log"))
	if err != nil {
		return err
	}

	return s.AwaitReady(ctx, exited, startWait, "ZooKeeper", "serve", s.Addr(), func() error { return s.serving(ctx) })
}

// serving checks that the server answers `ruok` with `imok` and `srvr`
// with its version and mode.
func (s *Server) serving(ctx context.Context) error {
	out, err := s.FourLetter(ctx, "ruok")
	if err != nil {
		return err
	}
	if out != "imok" {
		return fmt.Errorf("ruok answered %q, want imok", out)
	}
	if out, err = s.FourLetter(ctx, "srvr"); err != nil {
		return err
	}
	if !strings.Contains(out, "Mode: ") {
		return fmt.Errorf("srvr answered %q", out)
	}
	return nil
}

// FourLetter sends a four-letter word (ruok, srvr, stat) and returns the
// answer, waiting at most a second.
func (s *Server) FourLetter(ctx context.Context, word string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", s.Addr())
	if err != nil {
		return "", err
	}
	defer c.Close()
	dl, _ := ctx.Deadline()
	c.SetDeadline(dl)
	if _, err := io.WriteString(c, word); err != nil {
		return "", err
	}
	b, err := io.ReadAll(io.LimitReader(c, 1<<16))
	if err != nil && len(b) == 0 {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// Addr is the client address, 127.0.0.1:port; it stays the same across
// restarts.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// Port is the client port.
func (s *Server) Port() int { return s.port }

// DataDir is the server's data directory (snapshots and transaction log).
func (s *Server) DataDir() string { return filepath.Join(s.o.Dir, "data") }

// Restart kills the server (SIGKILL: no clean shutdown) and starts it again
// on the same port. With wipe, its data directory is deleted first: the
// server comes back empty, as one that lost its disk — every node, session
// and ephemeral node is gone, and its transaction ids start again from 0.
// Without, it recovers its data from the directory.
func (s *Server) Restart(ctx context.Context, wipe bool) error {
	s.Kill()
	if wipe {
		if err := os.RemoveAll(s.DataDir()); err != nil {
			return fmt.Errorf("wiping the ZooKeeper data directory %s: %w", s.DataDir(), err)
		}
	}
	if err := procgroup.StartAgain(ctx, s.start); err != nil {
		return fmt.Errorf("restarting the private ZooKeeper on %s: %w", s.Addr(), err)
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
