package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// serve binds its listeners before it leases a worker id, so that a port in
// use fails the start at once and leases nothing. Until the node is ready,
// a plain (not TLS) port answers each connection itself and closes it:
// HTTP with /healthz 200 (the process is up) and 503 unavailable for
// everything else (/readyz included), RESP with -UNAVAILABLE. No ID is
// handed out, so a client retries elsewhere as after a refused connection.
// A TLS port leaves connections queued until the server takes over.

// startingTimeout bounds the exchange with one connection while starting.
const startingTimeout = 2 * time.Second

// answerWhileStarting accepts on ln and answers each connection with
// answer, until the returned stop is called; stop returns once nothing is
// accepted any more and every answer is done, leaving ln open for the
// server. Calls of stop after the first do nothing.
func answerWhileStarting(ln net.Listener, answer func(net.Conn)) (stop func()) {
	tl, ok := ln.(*net.TCPListener)
	if !ok {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	go func() {
		defer close(done)
		for {
			c, err := tl.Accept()
			if err != nil {
				return // stop's deadline, or a failure: connections queue until the server accepts
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				c.SetDeadline(time.Now().Add(startingTimeout))
				answer(c)
			}()
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			tl.SetDeadline(time.Unix(1, 0)) // Accept returns at once
			<-done
			tl.SetDeadline(time.Time{})
			wg.Wait()
		})
	}
}

// startingReason is what a client is told while the node starts.
const startingReason = "starting: acquiring a worker-id lease"

// answerHTTPStarting reads one request and answers it: /healthz 200, all
// else 503 unavailable with Retry-After, as the running server answers
// while not ready.
func answerHTTPStarting(c net.Conn) {
	req, err := http.ReadRequest(bufio.NewReader(c))
	status, ctype, body := http.StatusServiceUnavailable, "application/json",
		`{"error":{"code":"unavailable","message":"`+startingReason+`"}}`+"\n"
	switch {
	case err != nil:
		status, body = http.StatusBadRequest, `{"error":{"code":"invalid_argument","message":"not an HTTP/1.1 request (the server is starting)"}}`+"\n"
	case req.URL.Path == "/healthz":
		status, ctype, body = http.StatusOK, "text/plain; charset=utf-8", "ok\n"
	case req.URL.Path == "/readyz":
		ctype, body = "text/plain; charset=utf-8", startingReason+"\n"
	}
	fmt.Fprintf(c, "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %d\r\nRetry-After: 1\r\nConnection: close\r\n\r\n%s",
		status, http.StatusText(status), ctype, len(body), body)
}

// answerRESPStarting answers a Redis client's first command with the
// error a not-ready node answers PING with.
func answerRESPStarting(c net.Conn) {
	io.WriteString(c, "-UNAVAILABLE "+startingReason+"\r\n")
}
