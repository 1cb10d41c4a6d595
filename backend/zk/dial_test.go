package zk

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/flakeid/flakeid/internal/testenv"
	"github.com/flakeid/flakeid/worker"
)

// restarting is a loopback listener in front of a ZooKeeper server that
// plays its restart: restart closes every connection, and the next
// connections it accepts it reads and never answers nor closes (a ZooKeeper
// that accepted them while it was starting); the others it forwards to the
// server.
type restarting struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	silent int           // how many of the next connections get no answer
	delay  time.Duration // how long the server's first bytes are held back on each connection
	conns  []net.Conn    // every connection, to close
	wg     sync.WaitGroup
}

// newRestarting starts a restarting listener in front of target, whose
// first silent connections get no answer; it is closed when the test ends.
func newRestarting(t *testing.T, target string, silent int) *restarting {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &restarting{ln: ln, target: target, silent: silent}
	t.Cleanup(func() {
		ln.Close()
		r.restart(0)
		r.wg.Wait()
	})
	r.wg.Go(r.accept)
	return r
}

func (r *restarting) addr() string { return r.ln.Addr().String() }

// setDelay holds the server's first bytes on each new connection (its
// answer to the connect request) back for d.
func (r *restarting) setDelay(d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.delay = d
}

// restart closes every connection; the next silent ones get no answer.
func (r *restarting) restart(silent int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.conns {
		c.Close()
	}
	r.conns, r.silent = nil, silent
}

func (r *restarting) accept() {
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return
		}
		r.mu.Lock()
		r.conns = append(r.conns, c)
		silent, delay := r.silent > 0, r.delay
		if silent {
			r.silent--
		}
		r.mu.Unlock()
		if silent {
			r.wg.Go(func() { _, _ = io.Copy(io.Discard, c) })
			continue
		}
		up, err := net.Dial("tcp", r.target)
		if err != nil {
			c.Close()
			continue
		}
		r.mu.Lock()
		r.conns = append(r.conns, up)
		r.mu.Unlock()
		r.wg.Go(func() { _, _ = io.Copy(up, c); up.Close() })
		r.wg.Go(func() {
			time.Sleep(delay) // what the server sends waits in the socket
			_, _ = io.Copy(c, up)
			c.Close()
		})
	}
}

// silentListener accepts connections and never answers them; it and they
// are closed when the test ends.
func silentListener(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { ln.Close(); <-done })
	go func() {
		defer close(done)
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	}()
	return ln
}

// TestHandshakeDeadline: until the server's answer to the connect request
// has been read, no read deadline of a connection reaches past
// handshakeTimeout — a later one, or none, is cut to it — and the answer's
// session id and timeout are reported; after it, the connection's deadlines
// are the caller's.
func TestHandshakeDeadline(t *testing.T) {
	ln := silentListener(t)
	answer := make(chan []byte, 4)

	// No answer: a deadline a minute away, or none, ends at handshakeTimeout.
	for _, set := range []func(net.Conn) error{
		func(c net.Conn) error { return c.SetReadDeadline(time.Now().Add(time.Minute)) },
		func(c net.Conn) error { return c.SetDeadline(time.Time{}) },
		func(net.Conn) error { return nil },
	} {
		c, err := new(handshake).dialer(nil)("tcp", ln.Addr().String(), time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if err := set(c); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		_, err = c.Read(make([]byte, 4))
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() || !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("a read with no answer: %v, want a timeout", err)
		}
		if waited := time.Since(start); waited > 10*handshakeTimeout {
			t.Fatalf("a read with no answer gave up after %v, not at handshakeTimeout (%v)", waited, handshakeTimeout)
		}
		c.Close()
	}

	// An answer: its session and timeout are reported, and the read
	// deadlines after it are the caller's.
	ln2, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln2.Close()
	go func() {
		c, err := ln2.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		for b := range answer {
			if _, err := c.Write(b); err != nil {
				return
			}
		}
	}()
	var got struct {
		id int64
		to time.Duration
	}
	c, err := new(handshake).dialer(func(id int64, to time.Duration) { got.id, got.to = id, to })("tcp", ln2.Addr().String(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	frame := make([]byte, 40) // length, version, timeout, session id, password
	binary.BigEndian.PutUint32(frame[0:4], 36)
	binary.BigEndian.PutUint32(frame[8:12], 4000)
	binary.BigEndian.PutUint64(frame[12:20], 0x1234abcd)
	answer <- frame[:7] // in pieces, as TCP may deliver it
	answer <- frame[7:]
	if err := c.SetReadDeadline(time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(c, make([]byte, len(frame))); err != nil {
		t.Fatal(err)
	}
	if got.id != 0x1234abcd || got.to != 4*time.Second {
		t.Fatalf("reported session %#x, timeout %v; want 0x1234abcd, 4s", got.id, got.to)
	}
	if err := c.SetReadDeadline(time.Time{}); err != nil {
		t.Fatal(err)
	}
	later := make(chan error, 1)
	go func() {
		_, err := io.ReadFull(c, make([]byte, 3))
		later <- err
	}()
	time.Sleep(2 * handshakeTimeout)
	answer <- []byte("abc")
	if err := <-later; err != nil {
		t.Fatalf("a read without a deadline after the answer: %v", err)
	}
	close(answer)
}

// TestSilentServerDuringHandshake: a server that accepts a connection and
// never answers its connect request (a ZooKeeper that accepted it while it
// was starting) costs no more than handshakeTimeout and a reconnection —
// to OpenWorkers, to a lease taken after a restart, whose requests wait on
// the shared session's reconnection, and to a claim session: without the
// bound, go-zookeeper waits two thirds of the session timeout ten times
// over (67 s for the shared session) and holds the requests meanwhile,
// until the caller gives up.
func TestSilentServerDuringHandshake(t *testing.T) {
	addr := testenv.ZooKeeper().Require(t)
	t.Run("shared", func(t *testing.T) {
		sp := testSpace(t, addr)
		srv := newRestarting(t, addr, 1)
		w := sp.workers(t, srv.addr()) // through a first connection that gets no answer
		// A TTL whose attempt timeout (2 × TTL) is longer than the
		// contexts below: an attempt stuck on a silent connection fails
		// the test.
		lr, err := worker.NewLeaser(w, worker.Config{Workers: 4, TTL: 20 * time.Second, WaitForFree: true, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		for round := range 3 {
			ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
			l, err := lr.Acquire(ctx)
			cancel()
			if err != nil {
				t.Fatalf("round %d: acquiring after a restart whose first connection got no answer: %v", round, err)
			}
			l.Close()
			srv.restart(1)
		}
	})
	t.Run("claim", func(t *testing.T) {
		w := &Workers{servers: []string{newRestarting(t, addr, 1).addr()}, sessions: map[int64]*session{}}
		ttl := 10 * time.Second // go-zookeeper alone would wait 67 s
		ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
		defer cancel()
		s, err := w.openSession(ctx, ttl)
		if err != nil {
			t.Fatalf("a claim session through a server silent on its first connection: %v", err)
		}
		if s.id == 0 {
			t.Fatal("a session without an id")
		}
		if err := s.close(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// TestHandshakeWait: the wait for connect answers doubles after one went
// unanswered for it, up to maxHandshake; an answer within a quarter of the
// wait halves it, down to handshakeTimeout; a slower answer, or a
// connection that waited less than the wait now in force (it dialled before
// another doubled it), leaves it.
func TestHandshakeWait(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var h handshake
		want := handshakeTimeout
		for range rapid.IntRange(1, 40).Draw(t, "events") {
			cur := h.current()
			if cur != want {
				t.Fatalf("wait %v, want %v", cur, want)
			}
			switch rapid.IntRange(0, 3).Draw(t, "event") {
			case 0: // unanswered for the current wait
				h.unanswered(cur)
				want = min(2*cur, maxHandshake)
			case 1: // unanswered for a shorter, older wait
				h.unanswered(cur / 2)
			case 2: // answered quickly
				h.answeredIn(time.Duration(rapid.Int64Range(0, int64(cur/4)).Draw(t, "took")))
				want = max(cur/2, handshakeTimeout)
			case 3: // answered slowly
				h.answeredIn(cur/4 + time.Duration(rapid.Int64Range(1, int64(cur)).Draw(t, "took")))
			}
			if got := h.current(); got < handshakeTimeout || got > maxHandshake {
				t.Fatalf("wait %v outside [%v, %v]", got, handshakeTimeout, maxHandshake)
			}
		}
	})
}

// TestSlowHandshake: a ZooKeeper that answers connect requests only after
// longer than handshakeTimeout (creating a session is a write, which the
// server makes durable first: a transaction log slow to sync delays every
// answer) is still reached — the wait grows after two unanswered connect
// requests in a row and the next connection gets its session — and once
// answers come quickly again, the wait comes back down. With a fixed wait,
// no session could ever be established there.
func TestSlowHandshake(t *testing.T) {
	addr := testenv.ZooKeeper().Require(t)
	srv := newRestarting(t, addr, 0)
	srv.setDelay(handshakeTimeout * 3 / 2)
	w := &Workers{servers: []string{srv.addr()}, sessions: map[int64]*session{}}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	s, err := w.openSession(ctx, 10*time.Second)
	if err != nil {
		t.Fatalf("a claim session on a server that answers connect requests after %v: %v", handshakeTimeout*3/2, err)
	}
	if got := w.hs.current(); got < 2*handshakeTimeout {
		t.Errorf("the wait for connect answers is %v after one went unanswered, want at least %v", got, 2*handshakeTimeout)
	}
	if err := s.close(ctx); err != nil {
		t.Fatal(err)
	}
	srv.setDelay(0)
	for i := 0; w.hs.current() > handshakeTimeout; i++ {
		if i == 4 {
			t.Fatalf("the wait for connect answers is still %v after %d quick answers", w.hs.current(), i)
		}
		s, err := w.openSession(ctx, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.close(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// TestHandshakeMisses: one connect request left unanswered (a server that
// is starting) leaves the wait as it is; a second in a row on the same
// dialer doubles it, and so does each further one; a miss of another
// dialer's does not count towards this one's.
func TestHandshakeMisses(t *testing.T) {
	ln := silentListener(t)
	var h handshake
	miss := func(dial func(network, address string, timeout time.Duration) (net.Conn, error)) {
		t.Helper()
		c, err := dial("tcp", ln.Addr().String(), time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Read(make([]byte, 4)); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("a read with no answer: %v, want a timeout", err)
		}
	}
	a, b := h.dialer(nil), h.dialer(nil)
	miss(a)
	miss(b)
	if got := h.current(); got != handshakeTimeout {
		t.Fatalf("after one miss on each of two dialers the wait is %v, want %v", got, handshakeTimeout)
	}
	miss(a)
	if got := h.current(); got != 2*handshakeTimeout {
		t.Fatalf("after two misses in a row the wait is %v, want %v", got, 2*handshakeTimeout)
	}
	miss(a)
	if got := h.current(); got != 4*handshakeTimeout {
		t.Fatalf("after three misses in a row the wait is %v, want %v", got, 4*handshakeTimeout)
	}
}
