package redis

import "syscall"

// sysProcAttr makes a private redis-server die with the test binary, even
// when a timeout panic skips the cleanups.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
