package server

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flakeid/flakeid/gen/flakeid/v1/flakeidv1connect"
)

const (
	// rejectWait bounds the time spent on a connection turned away: reading
	// its request, answering 503, and waiting for the client to close.
	rejectWait = 2 * time.Second
	// maxRejecting is how many turned-away connections are answered at
	// once; beyond it they are closed without an answer.
	maxRejecting = 128
)

// connLimiter is a listener that counts its open connections and turns
// away those beyond max: a plain-HTTP listener answers them 503 (with
// Retry-After: 1 and Connection: close), one under TLS closes them at once.
type connLimiter struct {
	net.Listener
	max   int64
	tls   bool
	m     *metrics
	log   *slog.Logger
	reply []byte // the whole 503 answer
	dl    *deadlines

	open      atomic.Int64
	rejecting chan struct{} // a slot per turned-away connection being answered
	wg        sync.WaitGroup
	lastWarn  atomic.Int64 // Unix ns of the last warning logged
	unlogged  atomic.Int64 // rejections since then
}

// newConnLimiter wraps ln; tls says that ln's connections will speak TLS;
// dl holds the deadlines of the connections it accepts.
func newConnLimiter(ln net.Listener, max int, tls bool, dl *deadlines, m *metrics, log *slog.Logger) *connLimiter {
	body := fmt.Sprintf(`{"error":{"code":%q,"message":"too many connections (limit %d): try again in a second"}}`+"\n",
		codeUnavailable, max)
	reply := fmt.Sprintf("HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"+
		"Connection: close\r\nRetry-After: 1\r\n\r\n%s", len(body), body)
	return &connLimiter{Listener: ln, max: int64(max), tls: tls, dl: dl, m: m, log: log, reply: []byte(reply),
		rejecting: make(chan struct{}, maxRejecting)}
}

// Accept returns the next connection within the limit; it turns away the
// ones beyond it in the meantime.
func (l *connLimiter) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.open.Add(1) <= l.max {
			l.m.conns.Inc()
			return &countedConn{Conn: l.dl.wrap(c), l: l}, nil
		}
		l.open.Add(-1)
		l.reject(c)
	}
}

// reject turns c away, answering in the background.
func (l *connLimiter) reject(c net.Conn) {
	l.m.connsRejected.Inc()
	l.warn(c.RemoteAddr())
	if l.tls {
		c.Close()
		return
	}
	select {
	case l.rejecting <- struct{}{}:
	default:
		c.Close() // a flood: no answer
		return
	}
	l.wg.Go(func() {
		defer func() { <-l.rejecting }()
		defer c.Close()
		c.SetDeadline(time.Now().Add(rejectWait))
		// Read the request's head first: an HTTP client may take an answer
		// that comes before its request for a stale one.
		buf := make([]byte, 4096)
		for n := 0; !bytes.Contains(buf[:n], []byte("\r\n\r\n")); {
			if n == len(buf) {
				break
			}
			k, err := c.Read(buf[n:])
			n += k
			if err != nil {
				return
			}
		}
		if _, err := c.Write(l.reply); err != nil {
			return
		}
		// Half-close, and read until the client closes: closing with unread
		// data would reset the connection and could lose the answer.
		if cw, ok := c.(interface{ CloseWrite() error }); ok && cw.CloseWrite() == nil {
			io.Copy(io.Discard, io.LimitReader(c, 1<<20))
		}
	})
}

// warn logs a rejection, at most once a second.
func (l *connLimiter) warn(remote net.Addr) {
	l.unlogged.Add(1)
	now, last := time.Now().UnixNano(), l.lastWarn.Load()
	if now-last < int64(time.Second) || !l.lastWarn.CompareAndSwap(last, now) {
		return
	}
	l.log.Warn("server: too many connections open; turning new ones away (max conns)",
		"limit", l.max, "turned_away", l.unlogged.Swap(0), "last_remote", remote.String())
}

// wait waits for the turned-away connections still being answered.
func (l *connLimiter) wait() { l.wg.Wait() }

// countedConn frees its slot of the limiter when closed.
type countedConn struct {
	net.Conn
	l      *connLimiter
	closed atomic.Bool
}

// Close closes the connection and frees its slot.
func (c *countedConn) Close() error {
	if c.closed.CompareAndSwap(false, true) {
		c.l.open.Add(-1)
		c.l.m.conns.Dec()
	}
	return c.Conn.Close()
}

// streamDeadlines wraps h so that a streaming procedure's answer keeps its
// connection's deadlines only while it writes a message (streamWriter);
// every other request keeps ReadTimeout and WriteTimeout for its whole
// answer.
func (s *Server) streamDeadlines(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case flakeidv1connect.IDServiceStreamSnowflakeProcedure, healthWatchProcedure:
		default:
			h.ServeHTTP(w, r)
			return
		}
		sw := &streamWriter{ResponseWriter: w, rc: http.NewResponseController(w),
			write: s.cfg.WriteTimeout, read: s.cfg.ReadTimeout, http1: r.ProtoMajor == 1}
		defer sw.end()
		h.ServeHTTP(sw, r)
	})
}

// streamWriter is the ResponseWriter of a stream: before each Write and
// Flush it sets the write deadline to now + WriteTimeout, and once a Flush
// has put a message on the wire it lifts the deadlines, so that the stream
// lasts as long as the client reads (and may wait between messages, as the
// gRPC health Watch does). Over HTTP/1 it lifts the read deadline too: the
// request was read before the first message, and the server's read of the
// idle connection would otherwise end the stream at ReadTimeout.
type streamWriter struct {
	http.ResponseWriter
	rc          *http.ResponseController
	write, read time.Duration
	http1       bool
	lifted      bool // a Flush lifted the deadlines
}

func (w *streamWriter) hold() { w.rc.SetWriteDeadline(time.Now().Add(w.write)) }

// Write implements http.ResponseWriter.
func (w *streamWriter) Write(p []byte) (int, error) {
	w.hold()
	return w.ResponseWriter.Write(p)
}

// Flush implements http.Flusher.
func (w *streamWriter) Flush() {
	w.hold()
	if w.rc.Flush() != nil {
		return
	}
	w.rc.SetWriteDeadline(time.Time{})
	if w.http1 {
		w.rc.SetReadDeadline(time.Time{})
	}
	w.lifted = true
}

// Unwrap lets http.ResponseController reach the server's writer.
func (w *streamWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// end restores bounds once the handler returns: over HTTP/1 the server
// then writes the end of the answer and may read what is left of the
// request. (Over HTTP/2 the last frames are bounded by the connection's
// write timeout, HTTP2Config.WriteByteTimeout.)
func (w *streamWriter) end() {
	if w.lifted && w.http1 {
		now := time.Now()
		w.rc.SetWriteDeadline(now.Add(w.write))
		w.rc.SetReadDeadline(now.Add(w.read))
	}
}
