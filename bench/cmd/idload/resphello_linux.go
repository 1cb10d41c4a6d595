package main

import (
	"fmt"
	"net"
	"runtime"
	"sync"

	"golang.org/x/sys/unix"
)

// epollConn is one connection of the epoll loop.
type epollConn struct {
	fd         int
	in, out    []byte
	start, end int
}

// serveEpoll accepts connections through the net package, takes each
// socket's descriptor over (non-blocking) and hands it to one of
// GOMAXPROCS event loops, each a goroutine locked to its thread that waits
// in epoll_wait and, for each readable socket, reads once, answers and
// writes — what Redis's event loop does. Replies are written with one
// write; one that would block closes the connection (redis-benchmark reads
// every reply, so it never happens in a measurement).
func (h *respHello) serveEpoll(ln net.Listener) error {
	n := runtime.GOMAXPROCS(0)
	loops := make([]int, n)
	var mu sync.Mutex
	conns := map[int]*epollConn{}
	for i := range loops {
		fd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
		if err != nil {
			return fmt.Errorf("epoll_create1: %w", err)
		}
		loops[i] = fd
		go h.epollLoop(fd, &mu, conns)
	}
	for k := 0; ; k++ {
		c, err := ln.Accept()
		if err != nil {
			return err
		}
		rc, err := c.(*net.TCPConn).SyscallConn()
		if err != nil {
			return err
		}
		fd := -1
		rc.Control(func(s uintptr) { fd, err = unix.Dup(int(s)) })
		c.Close()
		if err != nil {
			return fmt.Errorf("dup: %w", err)
		}
		if err := unix.SetNonblock(fd, true); err != nil {
			return err
		}
		mu.Lock()
		conns[fd] = &epollConn{fd: fd, in: make([]byte, 64<<10), out: make([]byte, 0, 64<<10)}
		mu.Unlock()
		ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP, Fd: int32(fd)}
		if err := unix.EpollCtl(loops[k%n], unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
			return fmt.Errorf("epoll_ctl: %w", err)
		}
	}
}

// epollLoop serves the sockets registered with epfd, forever.
func (h *respHello) epollLoop(epfd int, mu *sync.Mutex, conns map[int]*epollConn) {
	runtime.LockOSThread()
	events := make([]unix.EpollEvent, 256)
	for {
		n, err := unix.EpollWait(epfd, events, -1)
		if err != nil {
			continue // EINTR
		}
		for _, ev := range events[:n] {
			fd := int(ev.Fd)
			mu.Lock()
			c := conns[fd]
			mu.Unlock()
			if c != nil && !h.epollRead(c) {
				unix.EpollCtl(epfd, unix.EPOLL_CTL_DEL, fd, nil)
				unix.Close(fd)
				mu.Lock()
				delete(conns, fd)
				mu.Unlock()
			}
		}
	}
}

// epollRead reads what a readable socket holds once, answers it and writes
// the replies; false means close it.
func (h *respHello) epollRead(c *epollConn) bool {
	m, err := unix.Read(c.fd, c.in[c.end:])
	if m <= 0 {
		return err == unix.EAGAIN
	}
	c.end += m
	used, o, err := h.answer(c.in[c.start:c.end], c.out[:0])
	if err != nil {
		return false
	}
	if c.start += used; c.start == c.end {
		c.start, c.end = 0, 0
	} else if c.end == len(c.in) {
		c.end = copy(c.in, c.in[c.start:c.end])
		c.start = 0
	}
	c.out = o
	for len(o) > 0 {
		w, err := unix.Write(c.fd, o)
		if err != nil {
			return false
		}
		o = o[w:]
	}
	return true
}
