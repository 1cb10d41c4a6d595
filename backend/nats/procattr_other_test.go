//go:build !linux

package nats

import "syscall"

func sysProcAttr() *syscall.SysProcAttr { return nil }
