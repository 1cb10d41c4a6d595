package worker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/flakeid/flakeid/internal/backoff"
)

// Config configures the Leaser that NewLeaser returns. The zero value of a
// field means its default; DefaultConfig returns them all.
type Config struct {
	// Datacenter is the datacenter id leases are taken in. Range
	// 0–2^31−1. Default 0. Clusters that must never collide use distinct
	// datacenter ids (or distinct coordinator prefixes).
	Datacenter int64
	// Workers is how many worker ids exist: ids 0…Workers−1 are handed
	// out. Range 1–2^31. Default 32 (5 worker bits).
	Workers int64
	// TTL is how long a lease lasts without renewal, by the coordinator's
	// clock. Range 1s–10m. Default 10s.
	TTL time.Duration
	// RenewEvery is the renewal period. Range 10ms–TTL/2. Default 1s, or
	// TTL/4 when that is shorter.
	RenewEvery time.Duration
	// RetryEvery is the pause after a failed renewal. Range 10ms–RenewEvery.
	// Default 200ms.
	RetryEvery time.Duration
	// ReserveAhead is how far ahead of the generator's clock each renewal
	// reserves the high-water mark. It must exceed RenewEvery so that the
	// generator never reaches the reservation while renewals succeed. It is
	// how long a generator keeps issuing after its last successful renewal,
	// whatever happens to the lease meanwhile (see Lease.Bind): a
	// coordinator outage shorter than it, less the time a new lease takes
	// once the coordinator answers again (up to a renewal period until the
	// next attempt with WaitForFree, the attempt's round trips, and the
	// probation: RenewEvery + RetryEvery), costs a node.Node nothing. It is
	// also the longest wait for a restart that lands on the same worker id,
	// and it is part of the Quarantine, which every holder waits after the
	// coordinator lost its state. It may exceed the TTL. Range
	// RenewEvery+10ms–10m. Default 3s, or the TTL when that is shorter.
	ReserveAhead time.Duration
	// SafetyMargin: a holder gives its lease up when it has not renewed by
	// (start of the last successful renewal) + TTL − SafetyMargin, by its own
	// monotonic clock. The coordinator cannot expire the lease before the
	// renewal arrived + TTL, so the margin only has to cover the two clocks
	// running at different rates over one TTL. Range 1ms–TTL/2. Default 1s,
	// or TTL/4 when that is shorter.
	SafetyMargin time.Duration
	// MaxClockSkew is how far this node's clock may differ from the
	// coordinator's (or, on etcd, from its live peers' last writes) before
	// the lease is refused (Acquire) or ended (renewal) with ErrClockSkew.
	// A new lease starts this far past its worker id's mark (see
	// Claim.Previous): the holder before may be behind by as much. Every
	// node of a datacenter should use the same. Range 1ms–1m. Default 1s.
	MaxClockSkew time.Duration
	// Quarantine is how far past the coordinator's clock the Floor of a
	// (re)initialised namespace lies: the first holders after a reset — or
	// after the very first start — wait this long before issuing, so that
	// nothing a holder of the lost state issued, or may still issue inside
	// its reservation, is issued again. It must cover ReserveAhead +
	// MaxClockSkew, and is part of the contract: every node of a
	// datacenter uses the same. Range ReserveAhead+MaxClockSkew–1h.
	// Default ReserveAhead + MaxClockSkew (4s).
	Quarantine time.Duration
	// Contract is the ID-space contract (layout, epoch, time unit) this
	// node's IDs follow; the coordinator records it with the quarantine and
	// refuses a node whose contract differs. node.Start fills it from the
	// layout. Default "" (an unnamed contract: it matches only "").
	Contract string
	// WaitForFree makes Acquire retry, with jittered backoff from 50ms up
	// to RenewEvery, while every worker id is held or the coordinator is
	// unreachable, until its context ends. Default false: fail at once.
	WaitForFree bool
	// Owner names the holder in the coordinator; a random suffix is added
	// to every lease so two leases never share a token. Default
	// "hostname/pid".
	Owner string
	// Logger receives renewal failures and lease loss. Default slog.Default().
	Logger *slog.Logger
	// Now is the clock reservations are taken from until a generator is
	// bound to the lease (then its clock is used). Default time.Now.
	Now func() time.Time
}

// DefaultConfig returns the defaults of every Config field.
func DefaultConfig() Config {
	host, _ := os.Hostname()
	return Config{
		Workers:      32,
		TTL:          10 * time.Second,
		RenewEvery:   time.Second,
		RetryEvery:   200 * time.Millisecond,
		ReserveAhead: 3 * time.Second,
		SafetyMargin: time.Second,
		MaxClockSkew: time.Second,
		Quarantine:   4 * time.Second,
		Owner:        fmt.Sprintf("%s/%d", host, os.Getpid()),
		Logger:       slog.Default(),
		Now:          time.Now,
	}
}

// WithDefaults returns c with its zero fields filled in as NewLeaser
// fills them (RenewEvery, RetryEvery, ReserveAhead, SafetyMargin and
// Quarantine follow the TTL and each other; see each field).
func (c Config) WithDefaults() Config {
	d := DefaultConfig()
	if c.Workers == 0 {
		c.Workers = d.Workers
	}
	if c.TTL == 0 {
		c.TTL = d.TTL
	}
	if c.RenewEvery == 0 {
		c.RenewEvery = min(d.RenewEvery, c.TTL/4)
	}
	if c.RetryEvery == 0 {
		c.RetryEvery = min(d.RetryEvery, c.RenewEvery)
	}
	if c.ReserveAhead == 0 {
		c.ReserveAhead = max(min(d.ReserveAhead, c.TTL), c.RenewEvery+10*time.Millisecond)
	}
	if c.SafetyMargin == 0 {
		c.SafetyMargin = min(d.SafetyMargin, c.TTL/4)
	}
	if c.MaxClockSkew == 0 {
		c.MaxClockSkew = d.MaxClockSkew
	}
	if c.Quarantine == 0 {
		c.Quarantine = c.ReserveAhead + c.MaxClockSkew
	}
	if c.Owner == "" {
		c.Owner = d.Owner
	}
	if c.Logger == nil {
		c.Logger = d.Logger
	}
	if c.Now == nil {
		c.Now = d.Now
	}
	return c
}

// Validate checks every field and their relations, with defaults applied.
func (c Config) Validate() error {
	c = c.WithDefaults()
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...)
	}
	switch {
	case c.Datacenter < 0 || c.Datacenter > 1<<31-1:
		return bad("datacenter %d, want 0–%d", c.Datacenter, 1<<31-1)
	case c.Workers < 1 || c.Workers > 1<<31:
		return bad("workers %d, want 1–%d", c.Workers, 1<<31)
	case c.TTL < time.Second || c.TTL > 10*time.Minute:
		return bad("TTL %v, want 1s–10m", c.TTL)
	case c.RenewEvery < 10*time.Millisecond || c.RenewEvery > c.TTL/2:
		return bad("renew every %v, want 10ms–%v (half the TTL)", c.RenewEvery, c.TTL/2)
	case c.RetryEvery < 10*time.Millisecond || c.RetryEvery > c.RenewEvery:
		return bad("retry every %v, want 10ms–%v (the renewal period)", c.RetryEvery, c.RenewEvery)
	case c.ReserveAhead <= c.RenewEvery || c.ReserveAhead > 10*time.Minute:
		return bad("reserve ahead %v, want more than the renewal period %v and at most 10m", c.ReserveAhead, c.RenewEvery)
	case c.SafetyMargin < time.Millisecond || c.SafetyMargin > c.TTL/2:
		return bad("safety margin %v, want 1ms–%v (half the TTL)", c.SafetyMargin, c.TTL/2)
	case c.TTL-c.SafetyMargin <= c.probation():
		return bad("TTL %v − safety margin %v leaves no time for the first renewal, which a new lease waits renew every %v + retry every %v for",
			c.TTL, c.SafetyMargin, c.RenewEvery, c.RetryEvery)
	case c.MaxClockSkew < time.Millisecond || c.MaxClockSkew > time.Minute:
		return bad("max clock skew %v, want 1ms–1m", c.MaxClockSkew)
	case c.Quarantine < c.ReserveAhead+c.MaxClockSkew || c.Quarantine > time.Hour:
		return bad("quarantine %v, want reserve ahead %v + max clock skew %v (%v) to 1h", c.Quarantine,
			c.ReserveAhead, c.MaxClockSkew, c.ReserveAhead+c.MaxClockSkew)
	}
	return nil
}

type leaser struct {
	coord Coordinator
	cfg   Config
}

// contract is what the coordinator records and compares: the caller's
// contract and the quarantine every node of the datacenter must share.
func (c Config) contract() string {
	return fmt.Sprintf("%s; quarantine %v", c.Contract, c.Quarantine)
}

// NewLeaser returns a Leaser that takes worker ids from coord and keeps them
// renewed, as cfg says.
func NewLeaser(coord Coordinator, cfg Config) (Leaser, error) {
	if coord == nil {
		return nil, fmt.Errorf("%w: no coordinator", ErrInvalidConfig)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &leaser{coord: coord, cfg: cfg.WithDefaults()}, nil
}

// Acquire claims a worker id and starts renewing it. With WaitForFree it
// retries while every id is held or the coordinator is unreachable.
func (lr *leaser) Acquire(ctx context.Context) (Lease, error) {
	var token [6]byte
	_, _ = rand.Read(token[:])
	owner := lr.cfg.Owner + "/" + hex.EncodeToString(token[:])
	// Retries come at least once a renewal period (no more often than a
	// held lease renews, on average), so that a node whose lease was lost
	// in an outage sees the coordinator back within one and is issuing
	// under a new lease a probation later, while its old reservation may
	// still cover it (see ReserveAhead).
	bo := backoff.Backoff{Min: 50 * time.Millisecond, Max: lr.cfg.RenewEvery}
	var reason error // the last failure not caused by ctx ending
	for attempt := 0; ; attempt++ {
		// An attempt that hangs (a coordinator that accepts connections
		// but never answers) is abandoned and tried again: its answer
		// would come too late to be a lease anyway.
		actx, cancel := context.WithTimeout(ctx, lr.cfg.attemptTimeout())
		req := lr.request(owner)
		// The clock first, writing nothing: a node refused for clock skew
		// leaves no trace in the coordinator.
		err := lr.probeClock(actx, req)
		if err != nil && errors.Is(err, ErrClockSkew) {
			cancel()
			lr.cfg.Logger.Error("worker: clock skew: refusing to issue", "datacenter", lr.cfg.Datacenter, "err", err)
			return nil, err
		}
		start := time.Now()
		sent := lr.cfg.Now()
		reserve := ceilMilli(sent.Add(lr.cfg.ReserveAhead))
		req.Now, req.Reserve = sent, reserve
		var claim Claim
		if err == nil {
			claim, err = lr.coord.Acquire(actx, req)
		}
		timedOut := ctx.Err() == nil && errors.Is(actx.Err(), context.DeadlineExceeded)
		cancel()
		if err != nil && timedOut && !errors.Is(err, ErrUnavailable) {
			err = fmt.Errorf("%w: no answer within %v: %w", ErrUnavailable, lr.cfg.attemptTimeout(), err)
		}
		if err == nil {
			at, stale := claim.Clock()
			skew, serr := checkClock(at, stale, sent, lr.cfg.Now(), lr.cfg.MaxClockSkew)
			if serr != nil {
				rctx, cancel := context.WithTimeout(context.Background(), lr.cfg.TTL)
				rerr := claim.Release(rctx, reserve)
				cancel()
				if rerr != nil && !errors.Is(rerr, ErrNotHeld) {
					serr = fmt.Errorf("%w (releasing the worker id: %v)", serr, rerr)
				}
				lr.cfg.Logger.Error("worker: clock skew: refusing to issue", "datacenter", lr.cfg.Datacenter, "err", serr)
				return nil, serr
			}
			taken := start
			if ta, ok := claim.(TakenAt); ok {
				if t := ta.TakenAt(); t.After(start) && !t.After(time.Now()) {
					taken = t
				}
			}
			// The lease must live past its first renewal, which comes no
			// sooner than the probation after Acquire.
			if time.Since(taken)+lr.cfg.probation() < lr.cfg.TTL-lr.cfg.SafetyMargin {
				return lr.start(claim, taken, reserve, skew), nil
			}
			// The answer took so long that the lease would be given up
			// before its first renewal (a coordinator that came back after
			// an outage, or a slow one): free the id and try again rather
			// than hold a dead lease that keeps the id from everyone.
			rctx, cancel := context.WithTimeout(context.Background(), lr.cfg.TTL)
			rerr := claim.Release(rctx, reserve)
			cancel()
			err = fmt.Errorf("%w: the coordinator answered %v after it took the worker id, which leaves less than the first renewal's wait (%v) of TTL %v − safety margin %v (release: %v)",
				ErrUnavailable, time.Since(taken).Round(time.Millisecond), lr.cfg.probation(), lr.cfg.TTL, lr.cfg.SafetyMargin, rerr)
		}
		ctxCaused := ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)
		if !ctxCaused || reason == nil {
			reason = err
		}
		if ctx.Err() != nil && lr.cfg.WaitForFree {
			return nil, fmt.Errorf("worker: acquiring a worker id: %w (last attempt: %w)", ctx.Err(), reason)
		}
		if errors.Is(err, ErrReset) && attempt < 3 {
			// The namespace was lost between reading and claiming: it is
			// re-initialised now; try again at once.
			lr.cfg.Logger.Error("worker: the coordinator's state was lost; it is re-initialised behind a quarantine",
				"datacenter", lr.cfg.Datacenter, "err", err)
			continue
		}
		if !lr.cfg.WaitForFree || !(errors.Is(err, ErrExhausted) || errors.Is(err, ErrUnavailable)) {
			return nil, err
		}
		lr.cfg.Logger.Warn("worker: no lease yet, retrying", "datacenter", lr.cfg.Datacenter, "attempt", attempt+1, "err", err)
		if cerr := backoff.Sleep(ctx, bo.Next(attempt)); cerr != nil {
			return nil, fmt.Errorf("worker: acquiring a worker id: %w (last attempt: %w)", cerr, reason)
		}
	}
}

// request is the Request of an attempt to acquire for owner, without its
// Now and Reserve.
func (lr *leaser) request(owner string) Request {
	return Request{
		Datacenter: lr.cfg.Datacenter, Workers: lr.cfg.Workers, Owner: owner, TTL: lr.cfg.TTL,
		Contract: lr.cfg.contract(), Space: lr.cfg.Contract, MaxClockSkew: lr.cfg.MaxClockSkew, Quarantine: lr.cfg.Quarantine,
	}
}

// probeClock reads the coordinator's clock for req and checks this node's
// against it: ErrClockSkew beyond MaxClockSkew, ErrUnavailable when it could
// not be read.
func (lr *leaser) probeClock(ctx context.Context, req Request) error {
	sent := lr.cfg.Now()
	at, stale, err := lr.coord.Clock(ctx, req)
	if err != nil {
		return err
	}
	_, err = checkClock(at, stale, sent, lr.cfg.Now(), lr.cfg.MaxClockSkew)
	return err
}

// checkClock compares a coordinator clock reading (at, stale: see
// Claim.Clock) of an operation sent and answered at local times sent and
// recv with the bound, and returns the local clock minus the coordinator's
// (the midpoint of what is possible).
func checkClock(at time.Time, stale time.Duration, sent, recv time.Time, bound time.Duration) (time.Duration, error) {
	if at.IsZero() {
		return 0, nil
	}
	// The coordinator's time at the reply lies in [at, at+stale], and the
	// reply was made between sent and recv by the local clock.
	behind := at.Sub(recv)           // > 0: the local clock is behind
	ahead := sent.Sub(at.Add(stale)) // > 0: the local clock is ahead
	skew := sent.Add(recv.Sub(sent) / 2).Sub(at.Add(stale / 2))
	switch {
	case behind > bound:
		return skew, fmt.Errorf("%w: this node's clock is at least %v behind the coordinator's (%s there, %s here); the bound is %v",
			ErrClockSkew, behind.Round(time.Millisecond), at.UTC().Format(time.RFC3339Nano), recv.UTC().Format(time.RFC3339Nano), bound)
	case ahead > bound:
		return skew, fmt.Errorf("%w: this node's clock is at least %v ahead of the coordinator's (%s there, %s here); the bound is %v",
			ErrClockSkew, ahead.Round(time.Millisecond), at.Add(stale).UTC().Format(time.RFC3339Nano), sent.UTC().Format(time.RFC3339Nano), bound)
	}
	return skew, nil
}

// lease is a renewed claim.
type lease struct {
	cfg       Config
	claim     Claim
	notBefore time.Time
	log       *slog.Logger

	mu       sync.Mutex // guards the fields below; never held across I/O
	skew     time.Duration
	until    time.Time
	deadline time.Time // monotonic: give up if not renewed by then
	fencer   Fencer
	err      error
	fence    *time.Timer

	done     chan struct{} // closed when the lease ends
	stop     chan struct{} // closed by Close to stop the renewal loop
	ctx      context.Context
	cancel   context.CancelFunc // cancels a renewal in flight, on Close
	loopDone chan struct{}
	closed   sync.Once
	closeErr error
}

func (lr *leaser) start(c Claim, renewStart time.Time, reserve time.Time, skew time.Duration) *lease {
	l := &lease{
		skew:      skew,
		cfg:       lr.cfg,
		claim:     c,
		notBefore: c.Previous(),
		// Probation: nothing may be issued until the first renewal has
		// succeeded (see probation).
		until:    c.Previous(),
		deadline: renewStart.Add(lr.cfg.TTL - lr.cfg.SafetyMargin),
		done:     make(chan struct{}),
		stop:     make(chan struct{}),
		loopDone: make(chan struct{}),
	}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	l.log = lr.cfg.Logger.With("datacenter", lr.cfg.Datacenter, "worker", c.WorkerID())
	l.mu.Lock()
	l.fence = time.AfterFunc(time.Until(l.deadline), l.expire)
	l.mu.Unlock()
	go l.renewLoop()
	return l
}

func (l *lease) DatacenterID() int64   { return l.cfg.Datacenter }
func (l *lease) WorkerID() int64       { return l.claim.WorkerID() }
func (l *lease) NotBefore() time.Time  { return l.notBefore }
func (l *lease) Done() <-chan struct{} { return l.done }

func (l *lease) Until() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.until
}

func (l *lease) ClockSkew() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.skew
}

// Err says what the fence says at the moment of asking: a lease whose
// deadline has passed is lost now, even if its timer (late after the
// process was paused, say) has not fired yet.
func (l *lease) Err() error {
	l.mu.Lock()
	err, late := l.err, l.err == nil && !time.Now().Before(l.deadline)
	l.mu.Unlock()
	if late {
		l.expire()
		l.mu.Lock()
		err = l.err
		l.mu.Unlock()
	}
	return err
}

func (l *lease) Bind(f Fencer) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.fencer = f
	if l.err != nil {
		f.Revoke()
		return
	}
	f.SetUntil(l.until)
}

// clock is where reservations are measured from: the bound generator's
// clock, or Config.Now.
func (l *lease) clock() time.Time {
	l.mu.Lock()
	f := l.fencer
	l.mu.Unlock()
	if f != nil {
		return f.Now()
	}
	return l.cfg.Now()
}

// probation is how long a new lease waits for its first renewal, and so
// for its first reservation: a new holder issues nothing before a renewal
// has found the namespace unchanged. A coordinator rolled back to an older
// copy may hand a newcomer a worker id that a live holder still uses (the
// copy shows it free, with an old mark); that holder's own next renewal —
// at most its renewal period (plus the time a renewal takes) after the
// rollback, and the newcomer acquired after it — finds the rollback and
// re-initialises the namespace, so the newcomer's first renewal fails with
// ErrReset before it issued anything.
func (c Config) probation() time.Duration { return c.RenewEvery + c.RetryEvery }

// attemptTimeout bounds one attempt of Acquire: twice the TTL.
func (c Config) attemptTimeout() time.Duration { return 2 * c.TTL }

func (l *lease) renewLoop() {
	defer close(l.loopDone)
	wait := l.cfg.probation()
	for {
		t := time.NewTimer(wait)
		select {
		case <-l.stop:
			t.Stop()
			return
		case <-l.done:
			t.Stop()
			return
		case <-t.C:
		}
		start := time.Now()
		sent := l.clock()
		reserve := ceilMilli(sent.Add(l.cfg.ReserveAhead))
		l.mu.Lock()
		deadline := l.deadline
		l.mu.Unlock()
		ctx, cancel := context.WithDeadline(l.ctx, deadline)
		err := l.claim.Renew(ctx, l.cfg.TTL, reserve)
		cancel()
		if err == nil {
			var skew time.Duration
			at, stale := l.claim.Clock()
			skew, err = checkClock(at, stale, sent, l.clock(), l.cfg.MaxClockSkew)
			l.mu.Lock()
			l.skew = skew
			l.mu.Unlock()
			if err != nil {
				// The reservation just stored may be used by nobody, and the
				// clock the fence is read by is out of bounds: end the lease
				// before the fence moves, revoking the generator.
				l.lose(fmt.Errorf("%w: worker id %d: %w", ErrLeaseLost, l.claim.WorkerID(), err), true)
				l.releaseAfterLoss()
				return
			}
		}
		switch {
		case err == nil:
			l.renewed(start, reserve)
			wait = l.cfg.RenewEvery
		case l.ctx.Err() != nil:
			return // closing
		case errors.Is(err, ErrClockSkew):
			// The coordinator refused the reservation as past the clock
			// bound and stored nothing: end the lease, revoking the
			// generator, whose clock is out of bounds.
			l.lose(fmt.Errorf("%w: worker id %d: %w", ErrLeaseLost, l.claim.WorkerID(), err), true)
			l.releaseAfterLoss()
			return
		case errors.Is(err, ErrReset):
			// The re-initialised namespace's floor lies past every
			// reservation stored before (the quarantine covers them): the
			// reservation still stands.
			l.lose(fmt.Errorf("%w: worker id %d: %w", ErrLeaseLost, l.claim.WorkerID(), err), false)
			return
		case errors.Is(err, ErrNotHeld):
			// Whoever holds the id now starts at its high-water mark, past
			// every reservation stored: the reservation still stands.
			l.lose(fmt.Errorf("%w: worker id %d: %w", ErrLeaseLost, l.claim.WorkerID(), err), false)
			return
		default:
			l.log.Warn("worker: renewing the lease failed", "err", err, "gives_up_in", time.Until(deadline).Round(time.Millisecond))
			wait = l.cfg.RetryEvery
		}
	}
}

func (l *lease) renewed(start, reserve time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return
	}
	if d := start.Add(l.cfg.TTL - l.cfg.SafetyMargin); d.After(l.deadline) {
		l.deadline = d
		l.fence.Reset(time.Until(d))
	}
	if reserve.After(l.until) {
		l.until = reserve
		if l.fencer != nil {
			l.fencer.SetUntil(reserve)
		}
	}
}

// releaseAfterLoss frees the worker id of a lease ended for clock skew (the
// coordinator still holds it for us), keeping the reservation stored.
func (l *lease) releaseAfterLoss() {
	ctx, cancel := context.WithTimeout(l.ctx, 5*time.Second)
	defer cancel()
	if err := l.claim.Release(ctx, l.Until()); err != nil && !errors.Is(err, ErrNotHeld) {
		l.log.Warn("worker: releasing the worker id after clock skew failed; it lapses after its TTL", "err", err)
	}
}

// expire runs when the fence timer fires: the lease is lost unless a renewal
// moved the deadline in the meantime.
func (l *lease) expire() {
	l.mu.Lock()
	late := !time.Now().Before(l.deadline)
	l.mu.Unlock()
	if late {
		// Whoever takes the id once the coordinator lets it lapse starts at
		// its high-water mark, past every reservation stored: the
		// reservation still stands.
		l.lose(fmt.Errorf("%w: worker id %d not renewed within TTL %v − safety margin %v", ErrLeaseLost,
			l.claim.WorkerID(), l.cfg.TTL, l.cfg.SafetyMargin), false)
	}
}

// end records err and closes done, once. The fenced generator keeps the
// reservation held as its fence, or with void is revoked.
func (l *lease) end(err error, void bool) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return false
	}
	l.err = err
	if l.fencer != nil && void {
		l.fencer.Revoke()
	}
	l.fence.Stop()
	close(l.done)
	return true
}

// lose ends the lease with err; void says whether its reservation is void
// too (see end).
func (l *lease) lose(err error, void bool) {
	if !l.end(err, void) {
		return
	}
	if void {
		l.log.Error("worker: lease lost; the generator stopped issuing", "err", err)
		return
	}
	l.log.Error("worker: lease lost; the generator issues on its reservation until it ends", "err", err,
		"reserved_until", l.Until())
}

// Close releases the lease: the generator is revoked, the renewal loop
// stops, and the worker id is freed in the coordinator with the final
// reservation stored (the high-water mark never decreases).
func (l *lease) Close() error {
	l.closed.Do(func() {
		wasHeld := l.end(fmt.Errorf("%w: worker id %d", ErrReleased, l.claim.WorkerID()), true)
		if !wasHeld {
			// Lost before: its generator may still issue on the
			// reservation; Close stops it.
			l.mu.Lock()
			if l.fencer != nil {
				l.fencer.Revoke()
			}
			l.mu.Unlock()
		}
		close(l.stop)
		l.cancel() // a renewal in flight need not finish: the release follows
		<-l.loopDone
		if !wasHeld {
			return // lost: nothing to release
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := l.claim.Release(ctx, l.Until()); err != nil && !errors.Is(err, ErrNotHeld) {
			l.closeErr = fmt.Errorf("worker: releasing worker id %d: %w", l.claim.WorkerID(), err)
		}
	})
	return l.closeErr
}

// ceilMilli rounds t up to a whole millisecond, the precision coordinators
// store high-water marks in: rounding down could let the next holder start in
// a tick this one used.
func ceilMilli(t time.Time) time.Time {
	r := t.Truncate(time.Millisecond)
	if r.Before(t) {
		r = r.Add(time.Millisecond)
	}
	return r.Round(0)
}
