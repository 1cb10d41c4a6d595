package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tidwall/redcon"
)

// RESPConfig configures the Redis-protocol (RESP) listener: any Redis
// client's INCR gets IDs from the same node, segment allocator, tokens and
// masking as the HTTP API (see docs/API.md, "Redis protocol"). A zero field
// means its default; DefaultRESPConfig returns them all.
type RESPConfig struct {
	// Listen is the address of the RESP listener; "" (the default) runs
	// none. It speaks TLS when the server's TLSCert and TLSKey are set.
	Listen string `json:"listen"`
	// MaxConns is the most RESP connections open at once. Beyond it a new
	// connection is answered "-ERR max number of clients reached" and
	// closed (under TLS, closed). Range 1–1,000,000. Default 1024.
	MaxConns int `json:"max_conns"`
	// MaxArgs is the most arguments of one command, its name included; a
	// command with more is a protocol error and closes the connection.
	// Range 1–1,048,576. Default 64.
	MaxArgs int `json:"max_args"`
	// MaxRequest is the most bytes of one command, its framing included
	// (so also of one argument or one inline line); more is a protocol
	// error and closes the connection. It bounds what a connection buffers
	// of its input. Range 1024–67,108,864 (64 MiB). Default 65,536.
	MaxRequest int `json:"max_request"`
	// IdleTimeout closes a connection that sends no command for this long.
	// Range 0 or 1s–24h. Default 0: never, as Redis does not (client pools
	// keep idle connections). A command under way must arrive whole within
	// the server's ReadTimeout either way.
	IdleTimeout time.Duration `json:"idle_timeout"`
}

// DefaultRESPConfig returns the RESP listener's defaults (no listener):
// what the zero RESPConfig means, with every field filled in.
func DefaultRESPConfig() RESPConfig {
	return RESPConfig{MaxConns: 1024, MaxArgs: 64, MaxRequest: 64 << 10}
}

// withDefaults returns c with its zero fields set to their defaults.
func (c RESPConfig) withDefaults() RESPConfig {
	d := DefaultRESPConfig()
	if c.MaxConns == 0 {
		c.MaxConns = d.MaxConns
	}
	if c.MaxArgs == 0 {
		c.MaxArgs = d.MaxArgs
	}
	if c.MaxRequest == 0 {
		c.MaxRequest = d.MaxRequest
	}
	return c
}

// validate checks c, with defaults applied (Config.Validate applies them).
func (c RESPConfig) validate() error {
	if c.Listen != "" {
		if _, _, err := net.SplitHostPort(c.Listen); err != nil {
			return fmt.Errorf("resp listen address %q: %v", c.Listen, err)
		}
	}
	switch {
	case c.MaxConns < 1 || c.MaxConns > 1_000_000:
		return fmt.Errorf("resp max conns %d, want 1–1,000,000", c.MaxConns)
	case c.MaxArgs < 1 || c.MaxArgs > 1<<20:
		return fmt.Errorf("resp max args %d, want 1–1,048,576", c.MaxArgs)
	case c.MaxRequest < 1024 || c.MaxRequest > 64<<20:
		return fmt.Errorf("resp max request %d bytes, want 1024–67,108,864", c.MaxRequest)
	case c.IdleTimeout != 0 && (c.IdleTimeout < time.Second || c.IdleTimeout > 24*time.Hour):
		return fmt.Errorf("resp idle timeout %v, want 0 (never) or 1s–24h", c.IdleTimeout)
	}
	return nil
}

// respFlushEvery is how many IDs of a long reply are buffered before they
// are written out: at most 22 bytes each (":" 19 digits CRLF, or a masked
// text of 15 as a bulk), so a connection buffers under 64 KiB of a reply.
const respFlushEvery = 2048

// respLinger bounds how long a closing connection reads (and drops) what
// its client still sends after the write side is shut: closing a socket
// with unread input makes the kernel reset it, which can destroy replies
// already written but not yet delivered.
const respLinger = 500 * time.Millisecond

// ServeRESP serves the Redis protocol on ln until ctx ends: then it stops
// reading, answers the commands it has read, and closes every connection
// (those still writing after ShutdownTimeout are cut off; with a negative
// ShutdownTimeout, every one is at once). It returns
// after the last connection is closed.
//
// Each connection is held to RESPConfig's limits, to ReadTimeout for a
// command under way, and to WriteTimeout for its replies: a client that
// reads none of them for that long is closed, and a long reply is written
// out in pieces, so a client that never reads holds little memory.
func (s *Server) ServeRESP(ctx context.Context, ln net.Listener) error {
	rc := s.cfg.RESP
	var tlsCfg *tls.Config
	if s.cfg.TLSCert != "" {
		cert, err := tls.LoadX509KeyPair(s.cfg.TLSCert, s.cfg.TLSKey)
		if err != nil {
			return fmt.Errorf("resp: TLS: %w", err)
		}
		tlsCfg = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	l := &respListener{s: s, conns: map[*respConn]struct{}{}}
	hard, cancelHard := context.WithCancel(context.Background())
	defer cancelHard()
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	s.log.Info("server: serving RESP", "addr", ln.Addr().String(), "tls", tlsCfg != nil)
	var acceptErr error
	for {
		nc, err := ln.Accept()
		if err != nil {
			if ctx.Err() == nil && !errors.Is(err, net.ErrClosed) {
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					time.Sleep(5 * time.Millisecond) // out of descriptors: back off, as net/http does
					continue
				}
				acceptErr = err
			}
			break
		}
		if l.open.Load() >= int64(rc.MaxConns) {
			s.metrics.respRejected.Inc()
			if tlsCfg == nil {
				nc.SetWriteDeadline(time.Now().Add(time.Second))
				io.WriteString(nc, "-ERR max number of clients reached\r\n")
			}
			nc.Close()
			continue
		}
		if tlsCfg != nil {
			nc = tls.Server(nc, tlsCfg)
		}
		c := l.add(hard, nc)
		go c.serve()
	}
	// Stop reading; each connection answers what it read and closes.
	l.stopReading()
	done := make(chan struct{})
	go func() { l.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(max(s.cfg.ShutdownTimeout, 0)):
		cancelHard()
		l.closeAll()
		<-done
	}
	s.log.Info("server: RESP drained")
	return acceptErr
}

// respListener tracks the connections of one ServeRESP.
type respListener struct {
	s      *Server
	open   atomic.Int64
	nextID atomic.Int64
	wg     sync.WaitGroup

	mu       sync.Mutex
	conns    map[*respConn]struct{}
	stopping bool
}

// add registers a new connection.
func (l *respListener) add(ctx context.Context, nc net.Conn) *respConn {
	s := l.s
	rc := s.cfg.RESP
	c := &respConn{s: s, l: l, nc: nc, ctx: ctx, id: l.nextID.Add(1), proto: 2,
		created: time.Now(), tags: map[string]*respTag{}}
	c.rd = respReader{conn: nc, stopped: &c.stopping, maxArgs: rc.MaxArgs, maxRequest: rc.MaxRequest,
		readTimeout: s.cfg.ReadTimeout, idle: rc.IdleTimeout, buf: make([]byte, min(respReadBuf, rc.MaxRequest))}
	c.wr = redcon.NewWriter(&respWriter{conn: nc, timeout: s.cfg.WriteTimeout})
	if s.tokens == nil {
		c.authed = true
	}
	l.open.Add(1)
	l.wg.Add(1)
	s.metrics.respConns.Inc()
	l.mu.Lock()
	l.conns[c] = struct{}{}
	stopping := l.stopping
	l.mu.Unlock()
	if stopping {
		c.stopReading()
	}
	return c
}

// remove forgets a closed connection.
func (l *respListener) remove(c *respConn) {
	l.mu.Lock()
	delete(l.conns, c)
	l.mu.Unlock()
	l.open.Add(-1)
	l.s.metrics.respConns.Dec()
	l.wg.Done()
}

// stopReading makes every connection stop reading commands.
func (l *respListener) stopReading() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stopping = true
	for c := range l.conns {
		c.stopReading()
	}
}

// closeAll closes every connection.
func (l *respListener) closeAll() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for c := range l.conns {
		c.nc.Close()
	}
}

// respWriter writes a connection's replies, each write bounded by the write
// timeout: the deadline is moved to now + timeout whenever less than
// three quarters of it is left, so a write blocks at most timeout and the
// deadline is not reset on every reply.
type respWriter struct {
	conn    net.Conn
	timeout time.Duration
	until   time.Time
}

func (w *respWriter) Write(p []byte) (int, error) {
	now := time.Now()
	if w.until.Sub(now) < w.timeout*3/4 {
		w.until = now.Add(w.timeout)
		if err := w.conn.SetWriteDeadline(w.until); err != nil {
			return 0, err
		}
	}
	return w.conn.Write(p)
}

// serve runs one connection: it reads the commands that have arrived
// (a pipeline), answers them in order, writes the replies out, and so on
// until the client quits or goes away, breaks the protocol or a limit, or
// the listener stops.
func (c *respConn) serve() {
	s := c.s
	defer c.l.remove(c)
	defer c.close()
	if tc, ok := c.nc.(*tls.Conn); ok {
		hctx, cancel := context.WithTimeout(c.ctx, s.cfg.ReadTimeout)
		err := tc.HandshakeContext(hctx)
		cancel()
		if err != nil {
			s.log.Debug("server: RESP TLS handshake failed", "remote", c.nc.RemoteAddr().String(), "err", err)
			return
		}
	}
	for {
		args, err := c.rd.next()
		switch {
		case err != nil:
			c.readFailed(err)
			return
		case args != nil:
			c.exec(args)
			if c.quit {
				c.wr.Flush()
				return
			}
			continue
		}
		// Every command read is answered: write the replies out, then wait
		// for more.
		if err := c.wr.Flush(); err != nil {
			return
		}
		if err := c.rd.fill(); err != nil {
			c.readFailed(err)
			return
		}
	}
}

// readFailed ends a connection whose reading failed: a protocol error is
// answered first (as Redis does), a timeout or a closed connection is not.
func (c *respConn) readFailed(err error) {
	var pe *respProtocolError
	if errors.As(err, &pe) {
		msg := err.Error()
		c.s.metrics.respProtocolErrors.Inc()
		c.s.log.Debug("server: RESP protocol error", "remote", c.nc.RemoteAddr().String(), "err", msg)
		c.wr.WriteError("ERR " + respText(msg))
		c.wr.Flush()
		return
	}
	if errors.Is(err, os.ErrDeadlineExceeded) && c.rd.mid && !c.stopping.Load() {
		c.s.log.Debug("server: RESP command not read within the read timeout", "remote", c.nc.RemoteAddr().String())
	}
}

// close closes the connection without losing the replies written: it
// shuts the write side (the client reads its replies, then EOF), drops
// what the client still sends for up to respLinger, then closes (as
// net/http does).
func (c *respConn) close() {
	type closeWriter interface{ CloseWrite() error }
	if cw, ok := c.nc.(closeWriter); ok && cw.CloseWrite() == nil {
		c.nc.SetReadDeadline(time.Now().Add(respLinger))
		io.Copy(io.Discard, io.LimitReader(c.nc, 4<<20))
	}
	c.nc.Close()
}

// stopReading makes the connection's reading stop (its pending replies are
// still written): a read under way is woken by a deadline in the past, the
// next one sees the flag (see frameGuard.Read).
func (c *respConn) stopReading() {
	c.stopping.Store(true)
	c.nc.SetReadDeadline(time.Unix(1, 0))
}
