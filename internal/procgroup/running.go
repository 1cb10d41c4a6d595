package procgroup

import (
	"errors"
	"os"
	"os/exec"
	"sync"
)

// ErrNotRunning is Running's Pause and Resume when no process was started.
var ErrNotRunning = errors.New("procgroup: no process was started")

// Running is the current process of a private server (etcdproc, zkproc,
// consulproc, natsproc): what it kills, pauses, resumes and reads the log
// of. Its zero value has no process; its methods are safe for concurrent
// use.
type Running struct {
	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd has exited
	log    string
	killed bool
}

// Started makes cmd, started, whose output goes to the file log, the
// current process, and waits for it in the background: the channel it
// returns is closed when the process has exited.
func (r *Running) Started(cmd *exec.Cmd, log string) <-chan struct{} {
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	r.mu.Lock()
	r.cmd, r.exited, r.log, r.killed = cmd, exited, log, false
	r.mu.Unlock()
	return exited
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
