//go:build !linux

package main

import (
	"errors"
	"net"
)

func (h *respHello) serveEpoll(net.Listener) error {
	return errors.New("idload resp-hello: -loop epoll needs Linux")
}
