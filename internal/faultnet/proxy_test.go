package faultnet

import (
	"bufio"
	"net"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// echoServer answers each line with the same line.
func echoServer(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { ln.Close(); <-done })
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if _, err := c.Write([]byte(line)); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

func roundTrip(c net.Conn, r *bufio.Reader, timeout time.Duration) (string, error) {
	c.SetDeadline(time.Now().Add(timeout))
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return "", err
	}
	return r.ReadString('\n')
}

// echoThrough starts a proxy to an echo server and a connection through
// it that has answered one ping; both close after the test.
func echoThrough(t *testing.T) (*Proxy, net.Conn, *bufio.Reader) {
	t.Helper()
	p, err := Listen(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	r := bufio.NewReader(c)
	if got, err := roundTrip(c, r, 2*time.Second); err != nil || got != "ping\n" {
		t.Fatalf("through the proxy: %q, %v", got, err)
	}
	return p, c, r
}

func TestCutHoldsAndHealResumes(t *testing.T) {
	p, c, r := echoThrough(t)
	p.Cut()
	if got, err := roundTrip(c, r, 200*time.Millisecond); err == nil {
		t.Fatalf("with the link cut a reply came through: %q", got)
	}
	p.Heal()
	// The held ping is delivered on heal; its echo is still in flight.
	c.SetDeadline(time.Now().Add(2 * time.Second))
	if got, err := r.ReadString('\n'); err != nil || got != "ping\n" {
		t.Fatalf("after heal the held request was not answered: %q, %v", got, err)
	}
	if got, err := roundTrip(c, r, 2*time.Second); err != nil || got != "ping\n" {
		t.Fatalf("after heal: %q, %v", got, err)
	}
	p.Reset()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := r.ReadString('\n'); err == nil {
		t.Fatal("Reset did not close the connection")
	}
}

func TestCloseWhileCut(t *testing.T) {
	p, err := Listen(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	p.Cut()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte("held\n"))
	done := make(chan struct{})
	go func() { p.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close hung while the link was cut")
	}
}

// Down closes open connections and refuses new ones at once (a stopped
// server, not a partition); Heal lets new ones through again.
func TestDownRefusesAndHealRestores(t *testing.T) {
	p, c, r := echoThrough(t)
	p.Down()
	if _, err := roundTrip(c, r, 5*time.Second); err == nil {
		t.Fatal("an open connection still answers after Down")
	}
	for range 3 {
		c2, err := net.Dial("tcp", p.Addr())
		if err != nil {
			continue // refused outright is as good
		}
		t0 := time.Now()
		_, err = roundTrip(c2, bufio.NewReader(c2), 5*time.Second)
		c2.Close()
		if err == nil || time.Since(t0) > 2*time.Second {
			t.Fatalf("a new connection while down: err %v after %v; want a fast failure", err, time.Since(t0))
		}
	}
	p.Heal()
	c3, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c3.Close()
	if line, err := roundTrip(c3, bufio.NewReader(c3), 5*time.Second); err != nil || line != "ping\n" {
		t.Fatalf("after Heal: %q, %v", line, err)
	}
}

// TestListenToFollowsTheTarget: each new connection goes to the address the
// target gives then; while it gives "", connections are closed at once.
func TestListenToFollowsTheTarget(t *testing.T) {
	a, b := echoServer(t), echoServer(t)
	var mu sync.Mutex
	to := a
	p, err := ListenTo(func() string { mu.Lock(); defer mu.Unlock(); return to })
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	dialPing := func() (string, error) {
		c, err := net.Dial("tcp", p.Addr())
		if err != nil {
			return "", err
		}
		defer c.Close()
		return roundTrip(c, bufio.NewReader(c), 2*time.Second)
	}
	for _, next := range []string{a, "", b} {
		mu.Lock()
		to = next
		mu.Unlock()
		line, err := dialPing()
		if next == "" {
			if err == nil {
				t.Fatalf("no target: got %q, want the connection closed", line)
			}
			continue
		}
		if err != nil || line != "ping\n" {
			t.Fatalf("target %s: %q, %v", next, line, err)
		}
	}
}
