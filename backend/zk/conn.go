package zk

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	gozk "github.com/go-zookeeper/zk"
)

// The shared connection of a Workers, which reads and writes persistent
// nodes (a holder's session is in session.go), and the reads and writes on
// a connection that every part of the package uses.

// sharedSessionTimeout is the session timeout of a Workers' own connection,
// which reads and creates persistent nodes only.
const sharedSessionTimeout = 10 * time.Second

// sharedConn is a Workers' own connection, and since when it has been
// without a session.
type sharedConn struct {
	conn   *gozk.Conn
	opened time.Time

	mu     sync.Mutex
	lostAt time.Time // when it last lost its session (or was opened without one); zero while it has one
}

// event is the connection's event callback (it must not block).
func (s *sharedConn) event(ev gozk.Event) {
	if ev.Type != gozk.EventSession {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case ev.State == gozk.StateHasSession:
		s.lostAt = time.Time{}
	case s.lostAt.IsZero():
		s.lostAt = time.Now()
	}
}

// stuck reports whether the connection should be replaced: it has no
// session, and has had none for longer than redialAfter, or for longer than
// redialPause when a request on it found no server (noServer).
func (s *sharedConn) stuck(noServer bool) bool {
	s.mu.Lock()
	lostAt := s.lostAt
	s.mu.Unlock()
	if lostAt.IsZero() || s.conn.State() == gozk.StateHasSession {
		return false
	}
	return time.Since(lostAt) > redialAfter || noServer && time.Since(s.opened) > redialPause
}

// redialAfter is how long a shared connection may be without a session
// before it is replaced: a few seconds, so that nodes lease again soon after
// a ZooKeeper that lost its data is back (behind a proxy or a load balancer,
// where connecting always succeeds, no request fails with "no server").
// A new connection of a healthy ensemble has its session within
// milliseconds, and dropping the shared session loses nothing.
const redialAfter = 3 * time.Second

// redialPause is the least age of a shared connection replaced because a
// request on it found no server: go-zookeeper's own pause between rounds of
// the servers, so that an outage costs at most one new connection a second.
const redialPause = time.Second

// connect opens a shared connection (it connects in the background).
func (w *Workers) connect() (*sharedConn, error) {
	now := time.Now()
	sh := &sharedConn{opened: now, lostAt: now}
	conn, _, err := gozk.Connect(w.servers, sharedSessionTimeout, gozk.WithLogger(zkLogger{w.log}), gozk.WithLogInfo(false),
		gozk.WithDialer(w.hs.dialer(nil)), gozk.WithEventCallback(sh.event))
	if err != nil {
		return nil, err
	}
	sh.conn = conn
	return sh, nil
}

// shared returns the shared connection, first replacing it when it is
// stuck without a session (see redial).
func (w *Workers) shared() *gozk.Conn {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.closed && w.sh.stuck(false) {
		w.redialLocked()
	}
	return w.sh.conn
}

// noServer is told of every request that failed with err: one that found
// no server to connect to replaces a shared connection stuck without a
// session (see redial) without waiting for its session timeout.
func (w *Workers) noServer(err error) {
	if !errors.Is(err, gozk.ErrNoServer) {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.closed && w.sh.stuck(true) {
		w.redialLocked()
	}
}

// redialLocked replaces the shared connection by a new one, closing the old
// one in the background; w.mu is held, so there is one redial at a time.
//
// go-zookeeper reconnects a connection by itself, but with the last zxid it
// saw, and a ZooKeeper that lost its data (wiped and restarted, its zxids
// starting again from 0) refuses such a client until its own zxids have
// caught up, which an idle ensemble may never do. A new connection has seen
// no zxid. The shared session owns no ephemeral node and no watch, so
// nothing is lost with it; only the guarantee that it never reads older
// state than it read before, which nothing relies on (see the package
// documentation: reads on the shared session may lag).
func (w *Workers) redialLocked() {
	old := w.sh
	old.mu.Lock()
	since := old.lostAt
	old.mu.Unlock()
	sh, err := w.connect()
	if err != nil {
		// The servers' names do not resolve now: try again a session
		// timeout later.
		zkLogger{w.log}.Printf("flakeid: replacing the shared ZooKeeper connection, without a session since %s: %v", since.Format(stamp), err)
		old.mu.Lock()
		old.lostAt = time.Now()
		old.mu.Unlock()
		return
	}
	zkLogger{w.log}.Printf("flakeid: replaced the shared ZooKeeper connection (session %#x), without a session since %s", old.conn.SessionID(), since.Format(stamp))
	w.sh = sh
	go old.conn.Close()
}

// node is a znode as read: its data and Stat.
type node struct {
	path string
	data []byte
	stat *gozk.Stat
}

// get reads path on conn; nil when it does not exist.
func get(ctx context.Context, conn *gozk.Conn, path string) (*node, error) {
	return await(ctx, func() (*node, error) {
		data, stat, err := conn.Get(path)
		switch {
		case errors.Is(err, gozk.ErrNoNode):
			return nil, nil
		case err != nil:
			return nil, err
		}
		return &node{path: path, data: data, stat: stat}, nil
	})
}

// getMany reads paths on conn, a few at a time; nil entries are missing.
func getMany(ctx context.Context, conn *gozk.Conn, paths []string) ([]*node, error) {
	out := make([]*node, len(paths))
	errs := make([]error, len(paths))
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	for i, p := range paths {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			out[i], errs[i] = get(ctx, conn, p)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// children lists path's children on conn; none when it does not exist.
func children(ctx context.Context, conn *gozk.Conn, path string) ([]string, error) {
	return await(ctx, func() ([]string, error) {
		c, _, err := conn.Children(path)
		if errors.Is(err, gozk.ErrNoNode) {
			return nil, nil
		}
		return c, err
	})
}

// ensurePath creates path and its missing parents as empty persistent nodes.
func ensurePath(ctx context.Context, conn *gozk.Conn, path string) error {
	ok, err := await(ctx, func() (bool, error) { ok, _, err := conn.Exists(path); return ok, err })
	if err != nil || ok {
		return err
	}
	for i := 1; i <= len(path); i++ {
		if i < len(path) && path[i] != '/' {
			continue
		}
		p := path[:i]
		_, err := await(ctx, func() (string, error) { return conn.Create(p, nil, gozk.FlagPersistent, gozk.WorldACL(gozk.PermAll)) })
		if err != nil && !errors.Is(err, gozk.ErrNodeExists) {
			return fmt.Errorf("creating %s: %w", p, err)
		}
	}
	return nil
}
