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
// the process is stopped (SIGSTOP takes a moment to stop every thread of a
// process, which may answer a request meanwhile), at most a second later;
// where there is no /proc, 100 ms later.
func Stop(p *os.Process) error {
	if err := signal(p, syscall.SIGSTOP); err != nil {
		return err
	}
	stat := "/proc/" + strconv.Itoa(p.Pid) + "/stat"
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) {
		b, err := os.ReadFile(stat)
		if err != nil {
			time.Sleep(100 * time.Millisecond)
			return nil
		}
		// pid (comm) state …: comm may hold spaces and parentheses.
		if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) && (b[i+2] == 'T' || b[i+2] == 't') {
			return nil
		}
		time.Sleep(5 * time.Millisecond)
	}
	return nil
}

// Continue continues p's stopped process group (SIGCONT).
func Continue(p *os.Process) error { return signal(p, syscall.SIGCONT) }
