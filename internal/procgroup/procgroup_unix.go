//go:build unix

package procgroup

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
	"time"
)

// signal sends sig to p's process group when p leads one (it was started
// with Setpgid), else to p alone.
func signal(p *os.Process, sig syscall.Signal) error {
	if pgid, err := syscall.Getpgid(p.Pid); err == nil && pgid == p.Pid {
		return syscall.Kill(-p.Pid, sig)
	}
	return p.Signal(sig)
}

// Kill kills p and its process group (SIGKILL), even when stopped.
func Kill(p *os.Process) {
	_ = signal(p, syscall.SIGKILL)
	_ = p.Kill()
}

// Stop stops p's process group (SIGSTOP): its sockets stay open and nothing
// it serves answers, as with a server that hangs. It returns once /proc says
// every thread of p is stopped (SIGSTOP stops the threads of a process one
// by one, and one still running, such as a JVM's accept thread, may answer
// a request meanwhile), at most a second later; where there is no /proc,
// 100 ms later.
func Stop(p *os.Process) error {
	if err := signal(p, syscall.SIGSTOP); err != nil {
		return err
	}
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) {
		done, err := allStopped(p.Pid)
		if err != nil {
			time.Sleep(100 * time.Millisecond)
			return nil
		}
		if done {
			return nil
		}
		time.Sleep(5 * time.Millisecond)
	}
	return nil
}

// allStopped reports whether every thread of process pid is stopped, from
// /proc/pid/task/*/stat.
func allStopped(pid int) (bool, error) {
	dir := "/proc/" + strconv.Itoa(pid) + "/task"
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return false, err
	}
	for _, t := range tasks {
		b, err := os.ReadFile(dir + "/" + t.Name() + "/stat")
		if err != nil {
			return false, nil // a thread that ended meanwhile: look again
		}
		// tid (comm) state …: comm may hold spaces and parentheses.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 || i+2 >= len(b) || (b[i+2] != 'T' && b[i+2] != 't') {
			return false, nil
		}
	}
	return true, nil
}

// Continue continues p's stopped process group (SIGCONT).
func Continue(p *os.Process) error { return signal(p, syscall.SIGCONT) }
