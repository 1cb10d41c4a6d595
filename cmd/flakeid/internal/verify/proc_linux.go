package verify

import "syscall"

// procAttr makes a child die with the verifier, even when the verifier is
// killed (go test -timeout, kill -9), so no node or coordinator server
// outlives a run; and puts it in a process group of its own, so that a
// Ctrl-C meant for the verifier does not stop the nodes before the verifier
// has stopped them (which it would report as nodes exiting on their own),
// and so that the nemesis can pause a server's whole process group.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
}
