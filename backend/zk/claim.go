package zk

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	gozk "github.com/go-zookeeper/zk"

	"github.com/flakeid/flakeid/backend/internal/coord"
	"github.com/flakeid/flakeid/worker"
)

// leafFence is a Leaf node fenced by a claim: a Leaf server writing it again
// ends the claim.
type leafFence struct {
	path, addr string
	version    int32
}

type claim struct {
	w          *Workers
	dc, id     int64
	owner      string
	prev       time.Time
	contract   string        // the request's, for a re-initialisation without a record
	quarantine time.Duration // the request's
	sess       *session
	taken      time.Time // when the Multi that created the holder node was sent

	mu            sync.Mutex // claims are used by one goroutine at a time; this makes sure
	rec           record     // the namespace record acquired under
	recVersion    int32
	recCzxid      int64
	holderVersion int32
	holderCzxid   int64
	highMs        int64 // the high-water mark as last written or read
	highVersion   int32
	highCzxid     int64
	maxMs         int64 // the highest mark this claim stored
	leaf          []leafFence
	clockAt       time.Time
	clockStale    time.Duration
	clockSent     time.Time        // when the operation that read clockAt was sent
	bound         worker.MarkBound // of the request: what a renewal may reserve
}

func (c *claim) WorkerID() int64     { return c.id }
func (c *claim) Previous() time.Time { return c.prev }

// TakenAt implements worker.TakenAt: the holder node was created by a Multi
// sent then, on a session that ZooKeeper keeps for its timeout (≥ the TTL)
// after it last heard from it, and that the claim's watchdog closes TTL
// after then at the latest unless renewed. Opening the session and reading
// the clock and the slots before it do not count against the lease.
func (c *claim) TakenAt() time.Time { return c.taken }

var _ worker.TakenAt = (*claim)(nil)

// Clock implements worker.Claim: the Mtime ZooKeeper gave the holder node in
// the last successful Acquire or Renew (its leader's clock when it prepared
// the write), stale by that request's round trip.
func (c *claim) Clock() (time.Time, time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.clockAt, c.clockStale
}

// where names the claim's slot in errors.
func (c *claim) where() string {
	return fmt.Sprintf("worker %d of datacenter %d in %s", c.id, c.dc, c.w.prefix)
}

// Renew implements worker.Claim. The lease cannot outlast its session: a
// ttl longer than the session timeout ZooKeeper negotiated at Acquire is
// refused with worker.ErrInvalidConfig.
func (c *claim) Renew(ctx context.Context, ttl time.Duration, reserve time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sess.mu.Lock()
	timeout := c.sess.timeout
	c.sess.mu.Unlock()
	if ttl > timeout {
		return fmt.Errorf("%w: renewing %s for %v: its ZooKeeper session times out after %v, and a lease cannot outlast its session",
			worker.ErrInvalidConfig, c.where(), ttl, timeout)
	}
	// ZooKeeper's clock now is at most the last reading, its round trip
	// and a millisecond (Mtime is truncated) later, plus the time since.
	latest := c.clockAt.Add(c.clockStale + time.Millisecond + time.Since(c.clockSent))
	if err := c.bound.Check(c.where()+": renewing", reserve, latest); err != nil {
		return err
	}
	sent, err := c.guarded(ctx, "renewing", reserve)
	if err == nil && !c.sess.arm(sent, ttl) {
		// The session ended while the renewal was under way (its
		// watchdog, or ZooKeeper): the holder node may be gone.
		err = c.lost(ctx, "renewing", c.sess.err().Error())
	}
	if errors.Is(err, worker.ErrNotHeld) {
		c.sess.end(errors.New("the claim ended"))
	}
	// After ErrReset the session, and with it the holder node, lapses
	// after the TTL (its watchdog), as a lease would: the slot is left as
	// it was.
	return err
}

// Release implements worker.Claim: the mark is raised in one guarded Multi,
// then the claim's session is closed, and ZooKeeper deletes the holder node
// with it (a session deletes only its own ephemeral nodes: see guarded).
func (c *claim) Release(ctx context.Context, reserve time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, err := c.guarded(ctx, "releasing", reserve)
	switch {
	case err == nil:
		if cerr := c.sess.close(ctx); cerr != nil {
			return c.w.unavailable(ctx, cerr, "closing the session of %s (it lapses after its timeout)", c.where())
		}
	case errors.Is(err, worker.ErrNotHeld) || errors.Is(err, worker.ErrReset):
		c.sess.end(errors.New("the claim ended"))
	}
	// Unavailable: the session lapses after the TTL (its watchdog), which
	// frees the id with the mark last stored.
	return err
}

// guarded raises the high-water mark to at least reserve in one Multi on
// the claim's session,
//
//	Check(record, version), Check(holder, version), SetData(high, mark, version),
//	Check(each fenced Leaf node, version)
//
// and then makes sure that the nodes it checked are the ones the claim
// acquired under: ZooKeeper's versions restart at 0 when a node is deleted
// and re-created (a wipe, a restore), so they can coincide. The high node's
// Czxid comes back with the Multi; the record's and the holder's are read
// right after it on the same session, so the same Czxid now means the same
// node then — as long as no Czxid comes back once its node is deleted,
// which holds while the ensemble keeps its data. A ZooKeeper that lost its
// data starts its zxids again from 0, and the same sequence of writes may
// then give new nodes the Czxids of lost ones. That cannot pass for this
// claim's nodes: the claim's session is lost with the data (the server
// refuses the session's connections while its zxids are behind the ones
// the session saw, and then reports the session unknown, expired; the
// claim's dialer never lets go-zookeeper open another one), so the Multi and
// the reads after it cannot run at all; a new session id never equals an
// old one (ZooKeeper derives them from its clock), so a holder node of
// another session never passes for ours; and sameNodes also compares the
// record's incarnation, which is random, for the Acquire that read the
// record on the shared session before a wipe and claims on a session
// opened after it. The holder node is only checked, never written: a write
// whose versions coincided on nodes re-created by others must not change
// them, and all it can change is the mark, which only grows. It returns
// when the Multi was sent.
func (c *claim) guarded(ctx context.Context, what string, reserve time.Time) (time.Time, error) {
	nk, hk, wk := c.w.nsPath(c.dc), c.w.holderPath(c.dc, c.id), c.w.highPath(c.dc, c.id)
	for attempt := 1; ; attempt++ {
		if why := c.sess.err(); why != nil {
			return time.Time{}, c.lost(ctx, what, why.Error())
		}
		high := max(c.highMs, coord.CeilMs(reserve))
		ops := []any{
			&gozk.CheckVersionRequest{Path: nk, Version: c.recVersion},
			&gozk.CheckVersionRequest{Path: hk, Version: c.holderVersion},
			&gozk.SetDataRequest{Path: wk, Data: []byte(strconv.FormatInt(high, 10)), Version: c.highVersion},
		}
		for _, l := range c.leaf {
			ops = append(ops, &gozk.CheckVersionRequest{Path: l.path, Version: l.version})
		}
		sent := time.Now()
		res, err := await(ctx, func() ([]gozk.MultiResponse, error) { return c.sess.conn.Multi(ops...) })
		recv := time.Now()
		if errors.Is(err, gozk.ErrSessionExpired) {
			c.sess.end(err)
		}
		if err != nil && !guardFailed(err) {
			if why := c.sess.err(); why != nil {
				return time.Time{}, c.lost(ctx, what, why.Error())
			}
			return time.Time{}, c.w.unavailable(ctx, err, "%s %s", what, c.where())
		}
		note := ""
		if err == nil && len(res) == len(ops) {
			ws := res[2].Stat
			same, verr := c.sameNodes(ctx)
			if verr != nil {
				return time.Time{}, c.w.unavailable(ctx, verr, "%s %s: reading its nodes back", what, c.where())
			}
			if ws != nil && ws.Czxid == c.highCzxid && same {
				c.highVersion = ws.Version
				c.highMs, c.maxMs = high, max(c.maxMs, high)
				c.clockAt, c.clockStale, c.clockSent = coord.MsTime(ws.Mtime), recv.Sub(sent), sent
				return sent, nil
			}
			// The versions coincided on nodes re-created since: the
			// nodes tell what happened.
			note = " (its write went to nodes re-created since it acquired them)"
		}
		if err := c.check(ctx, what, note); err != nil {
			return time.Time{}, err
		}
		// Nothing was lost and the id is still ours, but a version changed
		// under us: a write of ours whose answer was lost, an operator's,
		// or a Leaf node removed. Go on from what is stored.
		if attempt == maxAttempts {
			return time.Time{}, fmt.Errorf("%w: %s %s: its nodes changed %d times in a row", worker.ErrUnavailable, what, c.where(), attempt)
		}
	}
}

// sameNodes reads the record and holder nodes on the claim's session (so
// after its last request) and reports whether they are the ones the claim
// acquired under: same Czxid, the record of the same incarnation (Czxids may
// come back after a ZooKeeper lost its data: see guarded), and the holder
// this session's.
func (c *claim) sameNodes(ctx context.Context) (bool, error) {
	nk, hk := c.w.nsPath(c.dc), c.w.holderPath(c.dc, c.id)
	type pair struct {
		rec    *node
		holder *gozk.Stat
	}
	p, err := await(ctx, func() (pair, error) {
		data, rs, err := c.sess.conn.Get(nk)
		if errors.Is(err, gozk.ErrNoNode) {
			return pair{}, nil
		}
		if err != nil {
			return pair{}, err
		}
		_, hs, err := c.sess.conn.Exists(hk)
		return pair{&node{path: nk, data: data, stat: rs}, hs}, err
	})
	if err != nil {
		return false, err
	}
	if p.rec == nil || p.rec.stat.Czxid != c.recCzxid {
		return false, nil
	}
	if rec, err := parseRecord(p.rec); err != nil || rec.Incarnation != c.rec.Incarnation {
		return false, nil // garbage: Renew's check, or Acquire's next read, names it
	}
	c.sess.mu.Lock()
	sid := c.sess.id
	c.sess.mu.Unlock()
	return p.holder != nil && p.holder.Czxid == c.holderCzxid && p.holder.EphemeralOwner == sid, nil
}

// lost tells why the claim's session is gone: the coordinator lost its
// state (ErrReset), or the id is no longer held (ErrNotHeld, saying why).
func (c *claim) lost(ctx context.Context, what, why string) error {
	if err := c.check(ctx, what, ""); err != nil {
		return err
	}
	return fmt.Errorf("%w: %s %s: its ZooKeeper session ended (%s)", worker.ErrNotHeld, what, c.where(), why)
}

// check reads the record, holder, high and fenced Leaf nodes on the shared
// session and compares them with what the claim acquired and stored. It
// returns ErrReset (re-initialising the record when this claim is the first
// to see the loss), ErrNotHeld when the id is no longer this claim's, or nil
// — having taken the versions stored — when the claim still holds the id.
func (c *claim) check(ctx context.Context, what, note string) error {
	w := c.w
	paths := []string{w.nsPath(c.dc), w.holderPath(c.dc, c.id), w.highPath(c.dc, c.id)}
	for _, l := range c.leaf {
		paths = append(paths, l.path)
	}
	// The shared session may be on a follower that has not yet applied
	// the claim's own last writes: a stale read could look like a
	// rollback. Sync brings it up to the leader first.
	conn := w.shared()
	if _, err := await(ctx, func() (string, error) { return conn.Sync(w.dcPath(c.dc)) }); err != nil && !isNoNode(err) {
		return w.unavailable(ctx, err, "%s %s%s: syncing with the leader", what, c.where(), note)
	}
	nodes, err := getMany(ctx, conn, paths)
	if err != nil {
		return w.unavailable(ctx, err, "%s %s%s: reading its nodes", what, c.where(), note)
	}
	ns, holder, hw := nodes[0], nodes[1], nodes[2]
	dcName := fmt.Sprintf("datacenter %d in %s", c.dc, w.prefix)
	var found string
	var old *coord.Record
	var hwMs int64
	switch {
	case ns == nil:
		found = fmt.Sprintf("the namespace record %s of %s is gone (the tree deleted, or a new ZooKeeper ensemble)", w.nsPath(c.dc), dcName)
	default:
		rec, err := parseRecord(ns)
		if err != nil {
			return err
		}
		old = &rec.Record
		// Initialisation times are estimates of ZooKeeper's clock, late by up
		// to 1 ms + the estimating read's round trip. A record re-created
		// by another node just after ours can therefore look initialised
		// before it, and be taken for an older copy: this claim then
		// re-initialises the record once more, which costs the new holder a
		// reset but can never cause a duplicate. No margin is applied on
		// purpose: a margin would take a real older copy initialised within
		// it for a newer record, and let its lower floor stand.
		switch {
		case rec.InitialisedMs < c.rec.InitialisedMs:
			found = fmt.Sprintf("the namespace record of %s was initialised at %s (incarnation %s), before the %s of the incarnation %s this holder acquired under: ZooKeeper went back to an older copy",
				dcName, coord.MsTime(rec.InitialisedMs).Format(stamp), rec.Incarnation, coord.MsTime(c.rec.InitialisedMs).Format(stamp), c.rec.Incarnation)
		case rec.Incarnation != c.rec.Incarnation:
			return fmt.Errorf("%w: %s %s%s: the namespace record of %s was re-initialised at %s (incarnation %s, floor %s) after this holder acquired under incarnation %s of %s: its state was lost, and another node found it first",
				worker.ErrReset, what, c.where(), note, dcName, coord.MsTime(rec.InitialisedMs).Format(stamp), rec.Incarnation, coord.MsTime(rec.FloorMs).Format(stamp),
				c.rec.Incarnation, coord.MsTime(c.rec.InitialisedMs).Format(stamp))
		case hw == nil:
			found = fmt.Sprintf("worker %d's high-water mark %s in %s is gone; this holder stored %s", c.id, w.highPath(c.dc, c.id), dcName, coord.MsTime(c.maxMs).Format(stamp))
		default:
			if hwMs, err = parseMs(hw); err != nil {
				return err
			}
			if hwMs < c.maxMs {
				found = fmt.Sprintf("worker %d's high-water mark in %s is %s, below the %s this holder stored: ZooKeeper went back to an older copy",
					c.id, dcName, coord.MsTime(hwMs).Format(stamp), coord.MsTime(c.maxMs).Format(stamp))
			}
		}
	}
	if found != "" {
		return c.reinit(ctx, ns, old, fmt.Sprintf("%s %s%s: %s", what, c.where(), note, found))
	}
	c.sess.mu.Lock()
	sid := c.sess.id
	c.sess.mu.Unlock()
	switch {
	case holder == nil:
		return fmt.Errorf("%w: %s %s%s: it is free (session %#x ended)", worker.ErrNotHeld, what, c.where(), note, sid)
	case holder.stat.EphemeralOwner != sid || holder.stat.Czxid != c.holderCzxid:
		owner := string(holder.data)
		if h, err := parseHolder(holder); err == nil {
			owner = h.Owner
		}
		return fmt.Errorf("%w: %s %s%s: it is held by %q (session %#x), not by %q (session %#x)", worker.ErrNotHeld, what, c.where(), note,
			owner, holder.stat.EphemeralOwner, c.owner, sid)
	}
	// The holder node is our session's own (ZooKeeper lets nobody else
	// create it while it exists); its data may have been overwritten by a
	// stale write, which the next Multi puts right.
	var leaf []leafFence
	for i, l := range c.leaf {
		n := nodes[3+i]
		switch {
		case n == nil:
			continue // deleted: nothing left to restart from it
		case n.stat.Version != l.version:
			return fmt.Errorf("%w: %s %s%s: the Leaf node %s (Leaf server %s) was written again at %s (%q): a Leaf server with this worker id is running",
				worker.ErrNotHeld, what, c.where(), note, l.path, l.addr, coord.MsTime(n.stat.Mtime).Format(stamp), n.data)
		}
		leaf = append(leaf, l)
	}
	if sessErr := c.sess.err(); sessErr != nil {
		return fmt.Errorf("%w: %s %s: its ZooKeeper session ended (%v)", worker.ErrNotHeld, what, c.where(), sessErr)
	}
	c.leaf = leaf
	c.recVersion, c.recCzxid = ns.stat.Version, ns.stat.Czxid
	c.holderVersion = holder.stat.Version
	c.highMs, c.highVersion, c.highCzxid = hwMs, hw.stat.Version, hw.stat.Czxid
	return nil
}

// reinit re-initialises the namespace record after a loss or rollback —
// guarded by the record's version (or its absence) as found (oldNode) —
// without touching any slot, and returns the ErrReset that says what was
// found.
func (c *claim) reinit(ctx context.Context, oldNode *node, old *coord.Record, found string) error {
	w := c.w
	nk, rk := w.nsPath(c.dc), w.regPath(c.dc)
	failed := func(err error) error {
		return fmt.Errorf("%w: %s; re-initialising the record failed: %w", worker.ErrReset, found, err)
	}
	clockMs, clockSent, err := w.zkNow(ctx)
	if err != nil {
		return failed(err)
	}
	rec := record{coord.Reinit(old, c.contract, zkEstimate(clockMs, clockSent), c.quarantine)}
	conn := w.shared()
	var ops []any
	if oldNode == nil {
		if err := ensurePath(ctx, conn, w.dcPath(c.dc)); err != nil {
			return failed(w.unavailable(ctx, err, "creating %s", w.dcPath(c.dc)))
		}
		ops = append(ops, &gozk.CreateRequest{Path: nk, Data: rec.encode(), Acl: acl(), Flags: gozk.FlagPersistent},
			&gozk.SetDataRequest{Path: nk, Data: rec.encode(), Version: 0})
	} else {
		ops = append(ops, &gozk.SetDataRequest{Path: nk, Data: rec.encode(), Version: oldNode.stat.Version})
	}
	res, err := await(ctx, func() ([]gozk.MultiResponse, error) { return conn.Multi(ops...) })
	switch {
	case err != nil && guardFailed(err):
		return fmt.Errorf("%w: %s; another node re-initialised the record first", worker.ErrReset, found)
	case err != nil:
		return failed(w.unavailable(ctx, err, "writing %s", nk))
	}
	if st := res[len(res)-1].Stat; st != nil && st.Mtime > rec.InitialisedMs {
		// ZooKeeper wrote it later than estimated: move the floor with it.
		fixed := rec
		fixed.InitialisedMs = st.Mtime
		fixed.FloorMs = max(rec.FloorMs, st.Mtime+coord.CeilDurMs(c.quarantine))
		if _, err := await(ctx, func() (*gozk.Stat, error) { return conn.Set(nk, fixed.encode(), st.Version) }); err == nil {
			rec = fixed
		}
	}
	if err := ensurePath(ctx, conn, w.registry); err == nil {
		_, _ = await(ctx, func() (string, error) {
			return conn.Create(rk, w.registration(rec.Contract), gozk.FlagPersistent, acl())
		})
	}
	return fmt.Errorf("%w: %s; re-initialised the record as incarnation %s, floor %s (quarantine %v)",
		worker.ErrReset, found, rec.Incarnation, coord.MsTime(rec.FloorMs).Format(stamp), c.quarantine)
}

// fixInit moves a record this claim's Acquire created, if ZooKeeper's clock
// at the Multi (mtime) was later than the initialisation it estimated, so
// that the floor is never earlier than ZooKeeper's clock at initialisation
// plus the quarantine.
func (c *claim) fixInit(ctx context.Context, mtime int64) error {
	if mtime <= c.rec.InitialisedMs {
		return nil
	}
	fixed := c.rec
	fixed.InitialisedMs = mtime
	fixed.FloorMs = max(c.rec.FloorMs, mtime+coord.CeilDurMs(c.quarantine))
	nk := c.w.nsPath(c.dc)
	st, err := await(ctx, func() (*gozk.Stat, error) { return c.sess.conn.Set(nk, fixed.encode(), c.recVersion) })
	if err != nil {
		return c.w.unavailable(ctx, err, "moving the floor of the new namespace record %s to ZooKeeper's clock", nk)
	}
	c.rec, c.recVersion = fixed, st.Version
	return nil
}
