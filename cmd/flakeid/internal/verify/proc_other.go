//go:build !linux

package verify

import "syscall"

// procAttr: only Linux can tie a child's life to its parent's.
func procAttr() *syscall.SysProcAttr { return nil }
