//go:build unix

package verify

import (
	"os"
	"syscall"
)

// stopProcess freezes p (SIGSTOP): its sockets stay open and nothing it
// serves answers, as with a server that hangs.
func stopProcess(p *os.Process) error { return p.Signal(syscall.SIGSTOP) }

// contProcess resumes a stopped process (SIGCONT).
func contProcess(p *os.Process) error { return p.Signal(syscall.SIGCONT) }
