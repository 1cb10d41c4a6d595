package zk

import (
	"encoding/binary"
	"net"
	"sync/atomic"
	"time"
)

// handshakeTimeout bounds the wait for the server's answer to a connection's
// connect request. go-zookeeper waits ten times two thirds of the session
// timeout for it (67 s for the shared connection's 10 s) and holds every
// request of the connection meanwhile; a ZooKeeper that accepted the
// connection while it was starting may never answer it, and a node that
// sent its lease's request there waited out the attempt's whole timeout,
// seconds after the server was serving. A server that is up answers a
// connect request in milliseconds; one that does not within this is given up
// on, and go-zookeeper connects again (after its one-second pause between
// rounds of the servers), so that a ZooKeeper restart costs a node no more
// than the restart itself.
const handshakeTimeout = time.Second

// dialer returns a gozk.Dialer whose connections give the handshake
// handshakeTimeout (see handshakeConn); answered, when not nil, is told of
// every connect response.
func dialer(answered func(session int64, timeout time.Duration)) func(network, address string, timeout time.Duration) (net.Conn, error) {
	return func(network, address string, timeout time.Duration) (net.Conn, error) {
		c, err := net.DialTimeout(network, address, timeout)
		if err != nil {
			return nil, err
		}
		return &handshakeConn{Conn: c, by: time.Now().Add(handshakeTimeout), answered: answered}, nil
	}
}

// handshakeConn is a connection to ZooKeeper until and after the server
// answered its connect request: until the answer (the first frame the
// server sends: length, protocol version, timeout in ms, session id,
// password) has been read, no read deadline is later than by; the answer's
// session id and timeout are passed to answered as they go by.
type handshakeConn struct {
	net.Conn
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
	if !h.done.Load() && n > 0 {
		need := 20 - len(h.head)
		h.head = append(h.head, p[:min(n, need)]...)
		if len(h.head) == 20 {
			h.done.Store(true)
			if h.answered != nil {
				to := time.Duration(int32(binary.BigEndian.Uint32(h.head[8:12]))) * time.Millisecond
				h.answered(int64(binary.BigEndian.Uint64(h.head[12:20])), to)
			}
		}
	}
	return n, err
}
