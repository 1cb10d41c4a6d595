package nats

import "syscall"

// sysProcAttr makes a private nats-server die with the test binary, even
// when a timeout panic skips the cleanups.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
