package server

import (
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// deadlineGrain is how often deadlines enforces the deadlines it holds: a
// connection's read or write deadline takes effect up to this much after
// it passes (the timeouts are at least a second).
const deadlineGrain = 100 * time.Millisecond

// deadlines enforces the read and write deadlines of the HTTP connections
// it wraps with one ticker, instead of a runtime timer per deadline.
// net/http moves a keep-alive connection's deadlines three times a request
// (idle, headers, write), and each move of a runtime timer cost about 8 % of
// a single-ID request's throughput; here a move is a store under the
// connection's own lock, and every deadlineGrain the ticker cuts off the
// reads and writes whose deadline has passed by setting the real deadline
// to the past. A deadline that had passed by the last tick when it is set
// (net/http's way of waking a blocked read: a time long ago) is set on the
// connection at once. Moving a deadline reads no clock: a clock read cost
// as much as the runtime timer it saves.
type deadlines struct {
	now  func() time.Time
	last atomic.Pointer[time.Time] // the time of the last tick
	mu   sync.Mutex
	open map[*deadlineConn]struct{}
	shut bool          // close was called: new connections are plain
	stop chan struct{} // closed by close
	done chan struct{} // closed when the ticker's goroutine returns; nil: none started
}

// newDeadlines returns a deadlines that reads the time from now; start
// starts its ticker, close must be called once no connection is accepted
// any more.
func newDeadlines(now func() time.Time) *deadlines {
	d := &deadlines{now: now, open: make(map[*deadlineConn]struct{}), stop: make(chan struct{})}
	t := now()
	d.last.Store(&t)
	return d
}

// start enforces the deadlines every grain, until close.
func (d *deadlines) start(grain time.Duration) {
	d.done = make(chan struct{})
	go d.run(grain)
}

func (d *deadlines) run(grain time.Duration) {
	defer close(d.done)
	t := time.NewTicker(grain)
	defer t.Stop()
	for {
		select {
		case <-d.stop:
			return
		case <-t.C:
			d.tick()
		}
	}
}

// tick cuts off the reads and writes whose deadline has passed.
func (d *deadlines) tick() {
	now := d.now()
	d.last.Store(&now)
	d.mu.Lock()
	defer d.mu.Unlock()
	for c := range d.open {
		c.expire(now)
	}
}

// close stops the ticker and hands every open connection's deadlines back
// to the runtime, so that a connection outliving the server is still
// bounded.
func (d *deadlines) close() {
	d.mu.Lock()
	if d.shut {
		d.mu.Unlock()
		return
	}
	d.shut = true
	close(d.stop)
	open := d.open
	d.open = nil
	d.mu.Unlock()
	if d.done != nil {
		<-d.done
	}
	for c := range open {
		c.handBack()
	}
}

// wrap returns c with its deadlines held by d.
func (d *deadlines) wrap(c net.Conn) *deadlineConn {
	dc := &deadlineConn{Conn: c, d: d}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.shut {
		dc.direct = true
		return dc
	}
	d.open[dc] = struct{}{}
	return dc
}

// forget stops enforcing c's deadlines.
func (d *deadlines) forget(c *deadlineConn) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.open, c)
}

// deadlineConn is a connection whose read and write deadlines are
// enforced by its deadlines' ticker: the real deadline is either none or
// in the past.
type deadlineConn struct {
	net.Conn
	d           *deadlines
	mu          sync.Mutex
	direct      bool // handed back: deadlines go straight to Conn
	read, write deadlineSide
}

// deadlineSide is one direction's deadline as the caller set it, and
// whether the connection's real deadline is in the past.
type deadlineSide struct {
	at      time.Time // zero: none
	tripped bool
}

// SetReadDeadline implements net.Conn.
func (c *deadlineConn) SetReadDeadline(t time.Time) error { return c.set(false, t) }

// SetWriteDeadline implements net.Conn.
func (c *deadlineConn) SetWriteDeadline(t time.Time) error { return c.set(true, t) }

// SetDeadline implements net.Conn.
func (c *deadlineConn) SetDeadline(t time.Time) error {
	if err := c.set(false, t); err != nil {
		return err
	}
	return c.set(true, t)
}

// real sets the connection's own deadline of one direction.
func (c *deadlineConn) real(write bool, t time.Time) error {
	if write {
		return c.Conn.SetWriteDeadline(t)
	}
	return c.Conn.SetReadDeadline(t)
}

// side is one direction's deadline.
func (c *deadlineConn) side(write bool) *deadlineSide {
	if write {
		return &c.write
	}
	return &c.read
}

// set records one direction's deadline t.
func (c *deadlineConn) set(write bool, t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.direct {
		return c.real(write, t)
	}
	side := c.side(write)
	side.at = t
	if !t.IsZero() && !t.After(*c.d.last.Load()) {
		side.tripped = true
		return c.real(write, t)
	}
	if side.tripped {
		side.tripped = false
		return c.real(write, time.Time{})
	}
	return nil
}

// expire cuts off what has passed its deadline by now.
func (c *deadlineConn) expire(now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.direct {
		return
	}
	for _, write := range [2]bool{false, true} {
		if s := c.side(write); !s.tripped && !s.at.IsZero() && !s.at.After(now) {
			s.tripped = true
			c.real(write, s.at) // an error: the connection is closed
		}
	}
}

// handBack sets the connection's own deadlines to the ones held, from now
// on set directly.
func (c *deadlineConn) handBack() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.direct = true
	if !c.read.tripped && !c.read.at.IsZero() {
		c.Conn.SetReadDeadline(c.read.at)
	}
	if !c.write.tripped && !c.write.at.IsZero() {
		c.Conn.SetWriteDeadline(c.write.at)
	}
}

// Close implements net.Conn; the deadlines no longer hold c.
func (c *deadlineConn) Close() error {
	c.d.forget(c)
	return c.Conn.Close()
}
