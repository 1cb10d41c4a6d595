package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flakeid/flakeid/internal/backoff"
)

// LocalGenerator makes Snowflake IDs in this process, under a worker-id
// lease a server holds for it: no request per ID, and the guarantees of a
// server's own generator.
//
// A server leases the worker id from its coordinator on the process's behalf
// (POST /v1/leases), with the reservation, high-water mark and fencing of
// its own lease, and renews it while the process renews (every
// renew_every_ms, in a background goroutine). The generator issues only in
// the ticks [first_tick, end_tick) of the last answer, reading the time as
// the server's clock in that answer plus the time since the request was
// sent, by this process's monotonic clock, before every ID: a process paused
// (SIGSTOP, a GC pause, a suspended VM) or cut off past its reservation
// issues nothing until a renewal comes, and a step of the wall clock is not
// seen at all. Whoever holds the worker id next — after a kill -9, a lost
// lease, a coordinator that lost its state — starts past every end_tick a
// renewal reported, so none of these costs a duplicate. A lease that ends
// (not renewed within its TTL, lost, its server gone) is replaced by a new
// one from any endpoint, as the client fails over, while the old
// reservation lasts.
//
// IDs increase within a lease; a new lease may bring another worker id.
// A LocalGenerator is safe for concurrent use; Close releases the lease.
type LocalGenerator struct {
	c     *Client
	owner string

	mu     sync.Mutex
	cur    *localLease   // the lease IDs are issued under
	last   int64         // the last tick issued under cur; -1 for none
	seq    int64         // the last sequence issued in last
	wake   chan struct{} // closed when cur changes or grows
	err    error         // why the last renewal or acquisition failed; nil after a success
	closed bool

	spinning atomic.Bool // a goroutine yields for the next tick (see spinWindow)
	stop     context.CancelFunc
	done     chan struct{}
}

// localLease is one lease's answer, and when its request was sent.
type localLease struct {
	name       string
	ep         *endpoint
	dc, worker int64
	tShift     uint  // datacenter + worker + sequence bits
	dcShift    uint  // worker + sequence bits
	wShift     uint  // sequence bits
	maxSeq     int64 // 2^sequence_bits − 1
	unitUs     int64
	first, end int64     // ticks
	nowUs      int64     // the server's clock in the answer, µs since the epoch
	sent       time.Time // when the request was sent (monotonic)
	renewEvery time.Duration
	ttl        time.Duration
}

// leaseAnswer is the JSON of POST /v1/leases and its renewals.
type leaseAnswer struct {
	Lease      string `json:"lease"`
	Datacenter int64  `json:"datacenter"`
	Worker     int64  `json:"worker"`
	Layout     struct {
		TimeBits       int   `json:"time_bits"`
		DatacenterBits int   `json:"datacenter_bits"`
		WorkerBits     int   `json:"worker_bits"`
		SequenceBits   int   `json:"sequence_bits"`
		TimeUnitUs     int64 `json:"time_unit_us"`
	} `json:"layout"`
	FirstTick    int64 `json:"first_tick"`
	EndTick      int64 `json:"end_tick"`
	NowUs        int64 `json:"now_us"`
	RenewEveryMs int64 `json:"renew_every_ms"`
	TTLMs        int64 `json:"ttl_ms"`
}

// lease checks an answer and makes it a localLease.
func (a leaseAnswer) lease(ep *endpoint, sent time.Time) (*localLease, error) {
	l := a.Layout
	bits := l.TimeBits + l.DatacenterBits + l.WorkerBits + l.SequenceBits
	switch {
	case len(a.Lease) == 0 || len(a.Lease) > 64:
		return nil, fmt.Errorf("a lease named %q", a.Lease)
	case l.TimeBits < 1 || l.DatacenterBits < 0 || l.WorkerBits < 0 || l.SequenceBits < 0 || bits > 63:
		return nil, fmt.Errorf("a layout of %d+%d+%d+%d bits, over 63", l.TimeBits, l.DatacenterBits, l.WorkerBits, l.SequenceBits)
	case a.Datacenter < 0 || a.Datacenter >= 1<<l.DatacenterBits || a.Worker < 0 || a.Worker >= 1<<l.WorkerBits:
		return nil, fmt.Errorf("datacenter %d, worker %d outside the layout", a.Datacenter, a.Worker)
	case l.TimeUnitUs < 1 || a.FirstTick < 0 || a.EndTick < a.FirstTick || a.EndTick > 1<<l.TimeBits || a.NowUs < 0:
		return nil, fmt.Errorf("ticks [%d, %d) of %d µs at %d µs", a.FirstTick, a.EndTick, l.TimeUnitUs, a.NowUs)
	case a.RenewEveryMs < 1 || a.TTLMs < a.RenewEveryMs:
		return nil, fmt.Errorf("renewals every %d ms with a TTL of %d ms", a.RenewEveryMs, a.TTLMs)
	}
	return &localLease{name: a.Lease, ep: ep, dc: a.Datacenter, worker: a.Worker,
		tShift: uint(l.DatacenterBits + l.WorkerBits + l.SequenceBits), dcShift: uint(l.WorkerBits + l.SequenceBits),
		wShift: uint(l.SequenceBits), maxSeq: 1<<l.SequenceBits - 1, unitUs: l.TimeUnitUs,
		first: a.FirstTick, end: a.EndTick, nowUs: a.NowUs, sent: sent,
		renewEvery: time.Duration(a.RenewEveryMs) * time.Millisecond, ttl: time.Duration(a.TTLMs) * time.Millisecond}, nil
}

// clockUs is the server's clock now, as this lease reads it: µs since the
// layout's epoch.
func (l *localLease) clockUs() int64 { return l.nowUs + time.Since(l.sent).Microseconds() }

// NewLocalGenerator leases a worker id from one of the client's endpoints
// (failing over as any call does; ctx bounds it) and returns a generator
// under it, renewing in the background until Close. owner names this
// process in the coordinator: 1–64 letters, digits and -_.:/@; "" means
// "go/<hostname>/<pid>". A server that masks its Snowflake IDs, or runs on
// a static worker id, refuses (an *APIError with code failed_precondition);
// one whose worker ids are all held answers ErrUnavailable.
func (c *Client) NewLocalGenerator(ctx context.Context, owner string) (*LocalGenerator, error) {
	if c.closed.Load() {
		return nil, ErrClosed
	}
	if owner == "" {
		owner = defaultOwner()
	}
	g := &LocalGenerator{c: c, owner: owner, last: -1, wake: make(chan struct{}), done: make(chan struct{})}
	l, err := g.acquire(ctx)
	if err != nil {
		return nil, err
	}
	g.cur = l
	bg, stop := context.WithCancel(c.bg)
	g.stop = stop
	if !c.spawn(func() { g.renew(bg) }) {
		stop()
		g.release(l)
		return nil, ErrClosed
	}
	return g, nil
}

// defaultOwner is "go/<hostname>/<pid>", with what a lease owner may not
// have dropped.
func defaultOwner() string {
	host, _ := os.Hostname()
	host = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_.:@", r) {
			return r
		}
		return -1
	}, host)
	return fmt.Sprintf("go/%.40s/%d", host, os.Getpid())
}

// acquire takes a new lease from any endpoint, and checks that endpoint's
// ID space against the others' (see ErrOverlap).
//
// The server reads its clock for now_us when the request arrives, no
// sooner than it was sent: from the sending (the answered attempt's, its
// GetConn), the lease's clock is never behind the server's, however long
// the answer took — a process paused before it read the answer finds its
// reservation run out, not a stale clock; it is ahead by the request's
// transit, which moves the IDs' times a little, never past their fence.
func (g *LocalGenerator) acquire(ctx context.Context) (*localLease, error) {
	body, _ := json.Marshal(map[string]string{"owner": g.owner})
	var a leaseAnswer
	var sent atomic.Int64 // ns since start: the last attempt's send
	start := time.Now()
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GetConn: func(string) { sent.Store(int64(time.Since(start))) }})
	ep, err := g.c.t.call(ctx, http.MethodPost, "/v1/leases", body, func(_ http.Header, r io.Reader) error {
		return json.NewDecoder(r).Decode(&a)
	})
	if err != nil {
		return nil, err
	}
	l, err := a.lease(ep, start.Add(time.Duration(sent.Load())))
	if err != nil {
		err = fmt.Errorf("client: %s: bad lease: %w", ep.base, err)
	} else {
		err = g.c.spaces.vet(ctx, g.c.t, ep)
	}
	if err != nil {
		g.release(&localLease{name: a.Lease, ep: ep})
		return nil, err
	}
	return l, nil
}

// NextID returns the next Snowflake ID under the lease. It waits, as long as
// ctx allows, while the lease may not issue yet (its first tick is ahead of
// the clock), while a tick's sequence is used up (until the next tick), and
// while the reservation is used up (for a renewal or a new lease); then it
// fails with an error wrapping ErrUnavailable and the reason. After Close it
// fails with ErrClosed.
func (g *LocalGenerator) NextID(ctx context.Context) (int64, error) {
	for {
		g.mu.Lock()
		if g.closed {
			g.mu.Unlock()
			return 0, ErrClosed
		}
		l := g.cur
		nowUs := l.clockUs()
		now := nowUs / l.unitUs
		var tick, seq int64
		switch {
		case max(now, l.first) > g.last:
			tick = max(now, l.first)
		case g.seq < l.maxSeq:
			tick, seq = g.last, g.seq+1
		default:
			tick = g.last + 1
		}
		var wait time.Duration
		var fenced bool
		switch {
		case tick >= l.end:
			fenced = true
		case tick > now: // the lease's first tick, or the next tick, is ahead of the clock
			wait = time.Duration(tick*l.unitUs-nowUs) * time.Microsecond
		default:
			g.last, g.seq = tick, seq
			id := tick<<l.tShift | l.dc<<l.dcShift | l.worker<<l.wShift | seq
			g.mu.Unlock()
			return id, nil
		}
		wake, why := g.wake, g.err
		g.mu.Unlock()
		if err := g.wait(ctx, wake, wait, fenced, l, why); err != nil {
			return 0, err
		}
	}
}

// spinWindow is how short a wait for the clock is spent yielding
// (runtime.Gosched, by one goroutine at a time) rather than on a timer,
// whose wake-up comes late by about as much: waits for the next tick, of a
// millisecond or less, would otherwise cost a fifth of the rate.
const spinWindow = 1500 * time.Microsecond

// wait waits for d (not fenced) or for the lease to change (fenced), as
// long as ctx allows.
func (g *LocalGenerator) wait(ctx context.Context, wake chan struct{}, d time.Duration, fenced bool, l *localLease, why error) error {
	if !fenced && d <= spinWindow && ctx.Err() == nil && g.spinning.CompareAndSwap(false, true) {
		defer g.spinning.Store(false)
		for deadline := time.Now().Add(d); time.Now().Before(deadline); {
			runtime.Gosched()
		}
		return nil
	}
	var timer <-chan time.Time
	if !fenced {
		t := time.NewTimer(max(d, time.Microsecond))
		defer t.Stop()
		timer = t.C
	}
	select {
	case <-timer:
		return nil
	case <-wake:
		return nil
	case <-ctx.Done():
		if fenced {
			reason := "no renewal came in time"
			if why != nil {
				reason = why.Error()
			}
			return fmt.Errorf("%w: the lease of worker %d/%d has issued its whole reservation (to tick %d), and %s: %w",
				ErrUnavailable, l.dc, l.worker, l.end, reason, ctx.Err())
		}
		return fmt.Errorf("client: %w", ctx.Err())
	}
}

// swap makes l the lease IDs are issued under (a renewal of the current
// one, or a new lease) and wakes the waiters.
func (g *LocalGenerator) swap(l *localLease) {
	g.mu.Lock()
	if g.cur.name != l.name {
		g.last, g.seq = -1, 0
	} else {
		l.end = max(l.end, g.cur.end)
	}
	g.cur, g.err = l, nil
	close(g.wake)
	g.wake = make(chan struct{})
	g.mu.Unlock()
}

// failed records why a renewal or an acquisition failed.
func (g *LocalGenerator) failed(err error) {
	g.mu.Lock()
	g.err = err
	g.mu.Unlock()
}

// renew renews the lease every renew_every_ms until ctx ends, and takes a
// new lease when it ended (unknown to its server, lost) or is about to run
// out while its server does not answer.
func (g *LocalGenerator) renew(ctx context.Context) {
	defer close(g.done)
	bo := backoff.Backoff{Min: 50 * time.Millisecond, Max: time.Second}
	failures := 0
	for {
		g.mu.Lock()
		l := g.cur
		g.mu.Unlock()
		d := l.renewEvery
		if failures > 0 {
			d = min(bo.Next(failures-1), l.renewEvery)
		}
		if sleep(ctx, d) != nil {
			return
		}
		sent := time.Now()
		var a leaseAnswer
		err := g.c.t.once(ctx, l.ep, http.MethodPost, "/v1/leases/"+url.PathEscape(l.name)+"/renew", nil,
			func(_ http.Header, r io.Reader) error { return json.NewDecoder(r).Decode(&a) })
		if err == nil {
			var next *localLease
			if next, err = a.lease(l.ep, sent); err == nil && (next.name != l.name || next.worker != l.worker || next.dc != l.dc) {
				err = fmt.Errorf("a renewal of lease %s answered for lease %s (worker %d/%d)", l.name, next.name, next.dc, next.worker)
			}
			if err == nil {
				g.swap(next)
				failures = 0
				continue
			}
			err = fmt.Errorf("client: %s: bad lease: %w", l.ep.base, err)
		}
		if ctx.Err() != nil {
			return
		}
		failures++
		g.failed(err)
		// The lease is gone from its server, or its reservation runs out
		// within a renewal period while its server does not answer: take
		// a new one from any endpoint.
		gone := errors.Is(err, ErrNotFound)
		left := time.Duration((l.end*l.unitUs-l.clockUs())*1000) * time.Nanosecond
		if !gone && left > l.renewEvery {
			continue
		}
		next, aerr := g.acquire(ctx)
		if aerr != nil {
			g.failed(fmt.Errorf("renewing: %w; a new lease: %w", err, aerr))
			continue
		}
		g.swap(next)
		failures = 0
		if !gone && next.name != l.name {
			g.release(l)
		}
	}
}

// release frees lease l on its server, best effort: a lease not released
// is closed there after its TTL.
func (g *LocalGenerator) release(l *localLease) {
	ctx, cancel := context.WithTimeout(context.Background(), g.c.t.timeout)
	defer cancel()
	_ = g.c.t.once(ctx, l.ep, http.MethodDelete, "/v1/leases/"+url.PathEscape(l.name), nil,
		func(http.Header, io.Reader) error { return nil })
}

// Close stops the renewals and releases the lease (its server stores the
// reservation). Later calls of NextID fail with ErrClosed. Close is
// idempotent and returns nil.
func (g *LocalGenerator) Close() error {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return nil
	}
	g.closed = true
	l := g.cur
	close(g.wake)
	g.mu.Unlock()
	g.stop()
	<-g.done
	g.release(l)
	return nil
}
