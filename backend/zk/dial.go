package zk

import (
	"encoding/binary"
	"errors"
	"net"
	"os"
	"sync/atomic"
	"time"
)

// handshakeTimeout is the first wait for the server's answer to a
// connection's connect request. go-zookeeper waits ten times two thirds of
// the session timeout for it (67 s for the shared connection's 10 s) and
// holds every request of the connection meanwhile; a ZooKeeper that accepted
// the connection while it was starting may never answer it, and a node that
// sent its lease's request there waited out the attempt's whole timeout,
// seconds after the server was serving. A server that is up answers a
// connect request in milliseconds; one that does not within the wait is
// given up on, and go-zookeeper connects again (after its one-second pause
// between rounds of the servers), so that a ZooKeeper restart costs a node
// no more than the restart itself.
const handshakeTimeout = time.Second

// maxHandshake is the longest the wait for a connect answer grows to (see
// handshake).
const maxHandshake = 8 * time.Second

// handshake is the wait for connect answers shared by a Workers'
// connections: handshakeTimeout at first, doubled (up to maxHandshake) each
// time a connection's connect request went unanswered for the whole wait
// after its previous one had too, halved (down to handshakeTimeout) each
// time one was answered within a quarter of it. Creating a session is a
// write, which ZooKeeper makes durable before it answers: a server whose
// transaction log takes seconds to sync answers every connect request in
// seconds, and a fixed wait shorter than that would never reach it. A
// server that is starting leaves the one or two connect requests it
// accepted meanwhile unanswered for good; a single miss does not raise the
// wait, so that its restart costs what it did.
type handshake struct {
	wait atomic.Int64 // nanoseconds; 0 means handshakeTimeout
}

// current is the wait for the next connection's answer.
func (h *handshake) current() time.Duration {
	if w := time.Duration(h.wait.Load()); w > 0 {
		return w
	}
	return handshakeTimeout
}

// unanswered records that a connection waited used without an answer.
func (h *handshake) unanswered(used time.Duration) {
	for {
		old := h.wait.Load()
		cur := time.Duration(old)
		if cur <= 0 {
			cur = handshakeTimeout
		}
		if used < cur { // a longer wait is already in force
			return
		}
		if h.wait.CompareAndSwap(old, int64(min(2*cur, maxHandshake))) {
			return
		}
	}
}

// answeredIn records that a connection's connect request was answered
// after took: an answer within a quarter of the wait halves it.
func (h *handshake) answeredIn(took time.Duration) {
	for {
		old := h.wait.Load()
		cur := time.Duration(old)
		if cur <= handshakeTimeout || took > cur/4 {
			return
		}
		if h.wait.CompareAndSwap(old, int64(max(cur/2, handshakeTimeout))) {
			return
		}
	}
}

// dialer returns a gozk.Dialer, for one gozk.Conn, whose connections give
// the handshake the current wait (see handshakeConn) and report how it
// went; answered, when not nil, is told of every connect response.
func (h *handshake) dialer(answered func(session int64, timeout time.Duration)) func(network, address string, timeout time.Duration) (net.Conn, error) {
	misses := new(atomic.Int32) // this dialer's connect requests unanswered in a row
	return func(network, address string, timeout time.Duration) (net.Conn, error) {
		c, err := net.DialTimeout(network, address, timeout)
		if err != nil {
			return nil, err
		}
		wait := h.current()
		return &handshakeConn{Conn: c, hs: h, misses: misses, wait: wait, by: time.Now().Add(wait), answered: answered}, nil
	}
}

// handshakeConn is a connection to ZooKeeper until and after the server
// answered its connect request: until the answer (the first frame the
// server sends: length, protocol version, timeout in ms, session id,
// password) has been read, no read deadline is later than by; the answer's
// session id and timeout are passed to answered as they go by, and hs is
// told whether the answer came within the wait.
type handshakeConn struct {
	net.Conn
	hs       *handshake
	misses   *atomic.Int32 // its dialer's connect requests unanswered in a row
	wait     time.Duration // the wait by was set with
	by       time.Time
	answered func(session int64, timeout time.Duration)
	head     []byte      // the answer's first 20 bytes, as they arrive
	done     atomic.Bool // the answer's first 20 bytes have been read
}

// clamp is deadline t, no later than by while the handshake is in progress.
func (h *handshakeConn) clamp(t time.Time) time.Time {
	if !h.done.Load() && (t.IsZero() || t.After(h.by)) {
		return h.by
	}
	return t
}

// SetReadDeadline implements net.Conn.
func (h *handshakeConn) SetReadDeadline(t time.Time) error { return h.Conn.SetReadDeadline(h.clamp(t)) }

// SetDeadline implements net.Conn.
func (h *handshakeConn) SetDeadline(t time.Time) error {
	if err := h.Conn.SetWriteDeadline(t); err != nil {
		return err
	}
	return h.Conn.SetReadDeadline(h.clamp(t))
}

// Read implements net.Conn.
func (h *handshakeConn) Read(p []byte) (int, error) {
	if !h.done.Load() {
		// go-zookeeper sets a read deadline before it reads the answer;
		// this one holds should it not.
		if err := h.Conn.SetReadDeadline(h.by); err != nil {
			return 0, err
		}
	}
	n, err := h.Conn.Read(p)
	if !h.done.Load() && errors.Is(err, os.ErrDeadlineExceeded) && !time.Now().Before(h.by) && h.misses.Add(1) >= 2 {
		h.hs.unanswered(h.wait)
	}
	if !h.done.Load() && n > 0 {
		need := 20 - len(h.head)
		h.head = append(h.head, p[:min(n, need)]...)
		if len(h.head) == 20 {
			h.done.Store(true)
			h.misses.Store(0)
			h.hs.answeredIn(h.wait - time.Until(h.by))
			if h.answered != nil {
				to := time.Duration(int32(binary.BigEndian.Uint32(h.head[8:12]))) * time.Millisecond
				h.answered(int64(binary.BigEndian.Uint64(h.head[12:20])), to)
			}
		}
	}
	return n, err
}
