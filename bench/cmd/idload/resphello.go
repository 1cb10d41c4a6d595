package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strconv"
	"sync/atomic"
	"syscall"
)

// respHelloCmd serves the Redis protocol's INCR with the least a Go server
// can do: every command (an array of bulk strings, whatever its name) is
// answered with the next value of one counter, no checks, limits, metrics,
// IDs or auth. redis-benchmark against it measures what a Go RESP server
// costs on this machine, the ceiling for flakeid's --resp-listen, as
// `idload hello` is for its HTTP API. -loop goroutines is the model of the
// net package (and of flakeid): a goroutine per connection; -loop epoll is
// a Redis-style event loop (one goroutine on a locked thread per
// GOMAXPROCS, epoll, non-blocking sockets; Linux only).
func respHelloCmd(args []string) error {
	fs := flag.NewFlagSet("idload resp-hello", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:16389", "address to serve on (loopback)")
	loop := fs.String("loop", "goroutines", "goroutines or epoll")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *loop != "goroutines" && *loop != "epoll" {
		return fmt.Errorf("idload resp-hello: -loop %q, want goroutines or epoll", *loop)
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() { <-ctx.Done(); ln.Close() }()
	h := &respHello{}
	if *loop == "epoll" {
		err = h.serveEpoll(ln)
	} else {
		err = h.serveGoroutines(ln)
	}
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// respHello is the state of one resp-hello server: its counter.
type respHello struct{ counter atomic.Int64 }

// answer parses the whole commands at the start of in and appends a reply
// to out for each. It returns the bytes used; a malformed command is an
// error (the connection is closed).
func (h *respHello) answer(in, out []byte) (used int, _ []byte, _ error) {
	for used < len(in) {
		n, err := respCommandLen(in[used:])
		if err != nil || n == 0 {
			return used, out, err
		}
		used += n
		out = append(out, ':')
		out = strconv.AppendInt(out, h.counter.Add(1), 10)
		out = append(out, '\r', '\n')
	}
	return used, out, nil
}

// respCommandLen is the length of the array of bulk strings at the start
// of b, or 0 if b holds only part of it.
func respCommandLen(b []byte) (int, error) {
	if b[0] != '*' {
		return 0, errors.New("not an array")
	}
	count, i, err := respHeader(b, 1)
	if err != nil || i == 0 {
		return 0, err
	}
	for range count {
		if i >= len(b) {
			return 0, nil
		}
		if b[i] != '$' {
			return 0, errors.New("not a bulk string")
		}
		size, j, err := respHeader(b, i+1)
		if err != nil || j == 0 {
			return 0, err
		}
		i = j + size + 2
		if i > len(b) {
			return 0, nil
		}
	}
	return i, nil
}

// respHeader reads the digits and CRLF at b[i:]: the number and the index
// after the LF, or 0, 0 if the header has not ended.
func respHeader(b []byte, i int) (n, next int, err error) {
	end := bytes.IndexByte(b[i:], '\n')
	if end < 1 {
		return 0, 0, nil
	}
	n, err = strconv.Atoi(string(b[i : i+end-1]))
	if err != nil || n < 0 || n > 1<<20 {
		return 0, 0, errors.New("bad length")
	}
	return n, i + end + 1, nil
}

// serveGoroutines serves each connection from its own goroutine: read what
// has arrived, answer it, write the replies, read again.
func (h *respHello) serveGoroutines(ln net.Listener) error {
	for {
		c, err := ln.Accept()
		if err != nil {
			return err
		}
		go func() {
			defer c.Close()
			in, out := make([]byte, 64<<10), make([]byte, 0, 64<<10)
			start, end := 0, 0
			for {
				n, err := c.Read(in[end:])
				if err != nil {
					return
				}
				end += n
				used, o, err := h.answer(in[start:end], out[:0])
				if err != nil {
					return
				}
				if start += used; start == end {
					start, end = 0, 0
				} else if end == len(in) {
					end = copy(in, in[start:end])
					start = 0
				}
				if _, err := c.Write(o); err != nil {
					return
				}
				out = o
			}
		}()
	}
}
