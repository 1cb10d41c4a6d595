//go:build !linux

package redis

import "syscall"

func sysProcAttr() *syscall.SysProcAttr { return nil }
