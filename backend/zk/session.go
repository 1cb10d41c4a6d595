package zk

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	gozk "github.com/go-zookeeper/zk"

	"github.com/flakeid/flakeid/worker"
)

// zkLogger routes go-zookeeper's log lines to an slog.Logger at debug level
// (a discarding one by default): the library never prints to stderr.
type zkLogger struct{ l *slog.Logger }

func (z zkLogger) Printf(format string, args ...any) {
	if z.l != nil {
		z.l.Debug(fmt.Sprintf(format, args...), "component", "go-zookeeper")
	}
}

// await runs f, which blocks on ZooKeeper, and returns its result, or the
// context's error as soon as ctx ends. go-zookeeper has no contexts: a call
// left behind finishes on its own when the connection answers or gives up
// (at the latest two thirds of the session timeout after it stopped hearing
// from the server); its result is dropped.
func await[T any](ctx context.Context, f func() (T, error)) (T, error) {
	type result struct {
		v   T
		err error
	}
	if err := ctx.Err(); err != nil {
		var zero T
		return zero, err
	}
	ch := make(chan result, 1)
	go func() {
		v, err := f()
		ch <- result{v, err}
	}()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}

// session is the ZooKeeper session of one claim: its ephemeral holder node
// lives exactly as long as it. go-zookeeper re-establishes a session on its
// own when the old one expired; a claim must never go on under another
// session, so the dialer refuses to connect once the session ended (or once
// the claim gave it up), and the connect response of every connection is
// read to learn the session id and the timeout the server negotiated (v1.0.4
// keeps that timeout in an unexported field); it waits handshakeTimeout for
// that response.
type session struct {
	conn   *gozk.Conn
	dialHS func(network, address string, timeout time.Duration) (net.Conn, error) // the Workers' handshake dialer

	mu       sync.Mutex
	id       int64         // the session id; 0 until established
	timeout  time.Duration // the negotiated session timeout
	lastID   int64         // the session id of the last connect response
	lastTO   time.Duration // its timeout
	ended    error         // why the session is over; nil while it may live
	ready    chan struct{} // closed when established or ended
	watchdog *time.Timer
	forget   func() // called once when it ends after it was established: the Workers lets go of it
}

// answered records a connect response of the session's connection.
func (s *session) answered(id int64, timeout time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lastID, s.lastTO = id, timeout
}

// dial is the session's gozk.Dialer.
func (s *session) dial(network, address string, timeout time.Duration) (net.Conn, error) {
	s.mu.Lock()
	ended := s.ended
	s.mu.Unlock()
	if ended != nil {
		return nil, fmt.Errorf("not reconnecting a claim session that ended: %w", ended)
	}
	return s.dialHS(network, address, timeout)
}

// event is the session's event callback (it must not block).
func (s *session) event(ev gozk.Event) {
	if ev.Type != gozk.EventSession {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch ev.State {
	case gozk.StateHasSession:
		switch {
		case s.id == 0 && s.ended == nil:
			s.id, s.timeout = s.lastID, s.lastTO
			close(s.ready)
		case s.lastID != s.id:
			s.endLocked(fmt.Errorf("ZooKeeper gave the claim's connection a new session %#x (was %#x)", s.lastID, s.id))
		}
	case gozk.StateExpired:
		s.endLocked(fmt.Errorf("ZooKeeper expired session %#x", s.id))
	case gozk.StateAuthFailed:
		s.endLocked(fmt.Errorf("ZooKeeper refused the authentication of session %#x", s.id))
	}
}

// endLocked records why the session is over and closes the connection (in
// the background: Close waits for the server's answer).
func (s *session) endLocked(why error) {
	if s.ended != nil {
		return
	}
	s.ended = why
	if s.id == 0 {
		close(s.ready)
	}
	if s.watchdog != nil {
		s.watchdog.Stop()
	}
	if s.forget != nil {
		go s.forget()
	}
	if s.conn != nil {
		go s.conn.Close()
	}
}

// end ends the session: the server deletes its ephemeral nodes.
func (s *session) end(why error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.endLocked(why)
}

// close ends the session and waits, within ctx, until ZooKeeper answered
// (it deletes the session's ephemeral nodes before it does).
func (s *session) close(ctx context.Context) error {
	s.mu.Lock()
	already := s.ended != nil
	if !already {
		s.ended = errors.New("closed")
		if s.watchdog != nil {
			s.watchdog.Stop()
		}
		if s.forget != nil {
			go s.forget()
		}
	}
	s.mu.Unlock()
	if already {
		return nil
	}
	_, err := await(ctx, func() (struct{}, error) { s.conn.Close(); return struct{}{}, nil })
	return err
}

// err reports why the session ended, or nil.
func (s *session) err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ended
}

// arm (re)starts the watchdog: the session ends unless arm is called again
// within ttl. A claim's session is kept alive by go-zookeeper's pings, not
// by its renewals, so without it a claim nobody renews (its lease given up,
// its Leaser gone) would hold its worker id for as long as the process
// runs. from is when the operation that succeeded was sent: the lease's
// holder gives up sooner, TTL − safety margin after it started that
// operation.
// It reports false when the session has already ended: then the operation
// that succeeded must not count, since the holder node may be gone.
func (s *session) arm(from time.Time, ttl time.Duration) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended != nil {
		return false
	}
	d := time.Until(from.Add(ttl))
	if s.watchdog == nil {
		s.watchdog = time.AfterFunc(d, func() {
			s.end(fmt.Errorf("not renewed within the TTL %v: the claim gave its session up", ttl))
		})
		return true
	}
	s.watchdog.Reset(d)
	return true
}

// openSession starts a claim session of ttl on servers and waits, within
// ctx, until it is established. The session timeout the server negotiated
// must be at least ttl: a shorter session could expire, and let another node
// take the worker id, while its holder still counts on its lease.
func (w *Workers) openSession(ctx context.Context, ttl time.Duration) (*session, error) {
	s := &session{ready: make(chan struct{})}
	s.dialHS = w.hs.dialer(s.answered)
	conn, _, err := gozk.Connect(w.servers, ttl, gozk.WithLogger(zkLogger{w.log}), gozk.WithLogInfo(false),
		gozk.WithDialer(s.dial), gozk.WithEventCallback(s.event))
	if err != nil {
		return nil, fmt.Errorf("%w: connecting to ZooKeeper at %s: %w", worker.ErrUnavailable, strings.Join(w.servers, ","), err)
	}
	s.mu.Lock()
	s.conn = conn
	if s.ended != nil {
		go conn.Close()
	}
	s.mu.Unlock()
	select {
	case <-s.ready:
	case <-ctx.Done():
		s.end(errors.New("abandoned before it was established"))
		return nil, fmt.Errorf("%w: opening a ZooKeeper session at %s: %w", worker.ErrUnavailable, strings.Join(w.servers, ","), ctx.Err())
	}
	s.mu.Lock()
	id, negotiated, ended := s.id, s.timeout, s.ended
	s.mu.Unlock()
	if ended != nil {
		return nil, fmt.Errorf("%w: opening a ZooKeeper session at %s: %w", worker.ErrUnavailable, strings.Join(w.servers, ","), ended)
	}
	if negotiated < ttl {
		s.end(errors.New("refused: session timeout shorter than the TTL"))
		return nil, fmt.Errorf("%w: ZooKeeper at %s negotiated a session timeout of %v (session %#x) for the lease TTL %v: "+
			"its maxSessionTimeout is %v (a server clamps session timeouts to [minSessionTimeout, maxSessionTimeout], "+
			"by default 2–20 × tickTime), and a session shorter than the TTL could lapse, freeing the worker id, while its holder still issues; "+
			"use a TTL of at most %v or raise maxSessionTimeout",
			worker.ErrInvalidConfig, strings.Join(w.servers, ","), negotiated, id, ttl, negotiated, negotiated)
	}
	w.smu.Lock()
	w.sessions[id] = s
	w.smu.Unlock()
	s.mu.Lock()
	s.forget = func() {
		w.smu.Lock()
		delete(w.sessions, id)
		w.smu.Unlock()
	}
	ended = s.ended
	s.mu.Unlock()
	if ended != nil { // it ended meanwhile, before it knew to forget
		s.forget()
		return nil, fmt.Errorf("%w: opening a ZooKeeper session at %s: %w", worker.ErrUnavailable, strings.Join(w.servers, ","), ended)
	}
	return s, nil
}
