package procgroup

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"time"
)

// ErrNotRunning is Running's Pause and Resume when no process was started.
var ErrNotRunning = errors.New("procgroup: no process was started")

// Running is the current process of a private server (etcdproc, zkproc,
// consulproc, natsproc): what it kills, pauses, resumes and reads the log
// of. Its zero value has no process; its methods are safe for concurrent
// use.
type Running struct {
	mu     sync.Mutex
	starts int // how many processes were started
	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd has exited
	log    string
	killed bool
}

// Start starts cmd as the current process, its output going to a new log
// file, logPattern with the number of this start for its %d
// ("dir/nats.%d.log"), and waits for it in the background: the channel it
// returns is closed when the process has exited.
func (r *Running) Start(cmd *exec.Cmd, logPattern string) (<-chan struct{}, error) {
	r.mu.Lock()
	r.starts++
	log := fmt.Sprintf(logPattern, r.starts)
	r.mu.Unlock()
	logFile, err := os.Create(log)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	r.mu.Lock()
	r.cmd, r.exited, r.log, r.killed = cmd, exited, log, false
	r.mu.Unlock()
	return exited, nil
}

// Process is the current process, which the caller may signal (nil before
// one started). The caller must not Wait for it.
func (r *Running) Process() *os.Process {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd == nil {
		return nil
	}
	return r.cmd.Process
}

// Kill kills the process group, even a stopped one, and waits until the
// process has exited. It may be called more than once.
func (r *Running) Kill() {
	r.mu.Lock()
	cmd, exited, killed := r.cmd, r.exited, r.killed
	r.killed = true
	r.mu.Unlock()
	if cmd == nil || killed {
		if exited != nil {
			<-exited
		}
		return
	}
	Kill(cmd.Process)
	<-exited
}

// Tail is the last n bytes of the current process's log.
func (r *Running) Tail(n int) string {
	r.mu.Lock()
	path := r.log
	r.mu.Unlock()
	b, _ := os.ReadFile(path)
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// Pause stops the process group (SIGSTOP): its sockets stay open and
// nothing it serves answers, as with a server that hangs. It returns once
// the process is stopped.
func (r *Running) Pause() error {
	p := r.Process()
	if p == nil {
		return ErrNotRunning
	}
	return Stop(p)
}

// Resume continues a paused process group (SIGCONT).
func (r *Running) Resume() error {
	p := r.Process()
	if p == nil {
		return ErrNotRunning
	}
	return Continue(p)
}

// AwaitReady polls ready every 50 ms until it returns nil, for a process
// started by Started (exited is its channel). It fails — killing the
// process, except when it exited by itself — when ctx ends, when the
// process exits ("<name> exited before serving on <addr>"), or after wait
// ("<name> did not <what> on <addr> within <wait>"), with the last error of
// ready and the tail of the log.
func (r *Running) AwaitReady(ctx context.Context, exited <-chan struct{}, wait time.Duration, name, what, addr string, ready func() error) error {
	deadline := time.Now().Add(wait)
	for {
		last := ready()
		if last == nil {
			return nil
		}
		if err := ctx.Err(); err != nil {
			r.Kill()
			return err
		}
		select {
		case <-exited:
			return fmt.Errorf("%s exited before serving on %s; log:\n%s", name, addr, r.Tail(2000))
		default:
		}
		if time.Now().After(deadline) {
			r.Kill()
			return fmt.Errorf("%s did not %s on %s within %v (%v); log:\n%s", name, what, addr, wait, last, r.Tail(2000))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// StartAgain runs start (a server's start on its old ports, after Kill)
// up to five times, 250 ms apart, while it fails and ctx lasts: the ports
// may take a moment to be free again. It returns start's last error.
func StartAgain(ctx context.Context, start func(context.Context) error) error {
	var err error
	for range 5 {
		if err = start(ctx); err == nil || ctx.Err() != nil {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	return err
}
