// Package etcd is the worker-id coordinator for a cluster of nodes that share
// an etcd cluster (etcd v3 API, server 3.4 or later).
//
// # Configuration
//
// Point every node of a cluster at the same etcd endpoints and the same key
// prefix:
//
//	w, err := etcd.Dial(ctx, []string{"10.0.0.1:2379", "10.0.0.2:2379", "10.0.0.3:2379"}, "/flakeid/workers")
//	if err != nil { … }
//	defer w.Close()
//	leaser, err := worker.NewLeaser(w, worker.Config{Datacenter: 1})
//
// An application that already has a *clientv3.Client (TLS, authentication,
// its own logger) wraps it with New instead; the client stays the caller's to
// close. Clusters that must never share worker ids use distinct prefixes or
// distinct datacenter ids; the prefix defaults to DefaultPrefix.
//
// # Keys
//
// Each (datacenter, worker id) slot has two keys under the prefix:
//
//	<prefix>/<datacenter>/<worker>/holder  the owner token, attached to an etcd lease
//	<prefix>/<datacenter>/<worker>/high    the high-water mark, Unix milliseconds, no lease
//
// The holder key exists exactly while the id is held: etcd deletes it when
// its lease expires, by etcd's own clock. The high-water key has no lease, so
// it outlives every holder; it only ever grows.
//
// # Atomicity and fencing
//
// Acquire reads the datacenter's keys, picks a free id (never used, released
// or expired; among them the lowest one whose high-water mark has passed,
// else the one with the smallest mark), grants an etcd lease of the request's
// TTL rounded up to whole seconds, and claims the id in one transaction:
//
//	If(holder CreateRevision = 0, high ModRevision = the revision read)
//	Then(Put holder = owner with the lease, Put high = max(stored, reserve))
//
// so two nodes can never both win an id, and the mark a new holder starts
// from is the one its transaction replaced. A lost race is retried at once
// on the state the failed transaction returned (each lost race is an id
// another node won, so a herd of nodes starting together gets through in
// turn); a granted lease that ends up unused is revoked.
//
// Renew sends one keep-alive for the lease (a lease that expired is reported
// as worker.ErrNotHeld) and then raises the mark in a transaction guarded by
// If(holder value = owner, holder lease = our lease): a holder whose lease
// expired, even one whose requests were held up in the network and arrive
// late, can no longer write anything, because another holder's key has
// another lease. Release runs the same guarded transaction to raise the mark
// and delete the holder key, then revokes the lease.
//
// etcd grants leases of at least its minimum TTL (about 1.5 times the
// election timeout: 2s with the default settings), and List reports expiry
// times at etcd's precision of whole seconds. A Renew with a TTL longer than
// the lease's moves the holder key to a new lease, in the same guarded way.
//
// # Errors
//
// Every error wraps one of worker's sentinels: ErrExhausted (saying how many
// ids are held), ErrNotHeld, ErrInvalidConfig, or ErrUnavailable for an etcd
// that cannot be reached or answers with an error; the context's error stays
// visible to errors.Is. As with any remote store, a write that failed as
// unavailable may still have been applied.
package etcd

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/flakeid/flakeid/worker"
)

// DefaultPrefix is the key prefix of New and Dial when they are given "".
const DefaultPrefix = "/flakeid/workers"

// DefaultDialTimeout bounds Dial's connection and check when its context has
// no deadline.
const DefaultDialTimeout = 5 * time.Second

// maxAttempts is how many times a guarded write re-reads a high-water mark
// that changed under it. (Acquire retries as long as other nodes win the ids
// it picks: see there.)
const maxAttempts = 8

// Workers is a worker.Coordinator over etcd. It is safe for concurrent use.
type Workers struct {
	client *clientv3.Client
	prefix string
	owned  bool // Close closes the client: Dial made it
	now    func() time.Time
}

var _ worker.Coordinator = (*Workers)(nil)

// New returns a coordinator that keeps its slots under prefix (DefaultPrefix
// when empty; a trailing "/" is dropped) through client. Closing the client
// stays the caller's job.
func New(client *clientv3.Client, prefix string) *Workers {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	return &Workers{client: client, prefix: strings.TrimRight(prefix, "/"), now: time.Now}
}

// Dial connects to the etcd cluster at endpoints ("host:port" or URLs) and
// checks that it answers, within ctx or DefaultDialTimeout when ctx has no
// deadline. Close the returned Workers to close the connection.
func Dial(ctx context.Context, endpoints []string, prefix string) (*Workers, error) {
	if len(endpoints) == 0 {
		return nil, fmt.Errorf("%w: no etcd endpoints", worker.ErrInvalidConfig)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultDialTimeout)
		defer cancel()
	}
	client, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: DefaultDialTimeout})
	if err != nil {
		return nil, fmt.Errorf("%w: connecting to etcd at %s: %w", worker.ErrUnavailable, strings.Join(endpoints, ","), err)
	}
	w := New(client, prefix)
	w.owned = true
	if _, err := client.Get(ctx, w.prefix+"/", clientv3.WithPrefix(), clientv3.WithCountOnly()); err != nil {
		client.Close()
		return nil, unavailable(ctx, err, "reading %s/ from etcd at %s", w.prefix, strings.Join(endpoints, ","))
	}
	return w, nil
}

// Close closes the etcd client if Dial made it; a Workers from New leaves
// its client open.
func (w *Workers) Close() error {
	if w.owned {
		return w.client.Close()
	}
	return nil
}

// Prefix is the key prefix, without a trailing "/".
func (w *Workers) Prefix() string { return w.prefix }

func (w *Workers) dcPrefix(dc int64) string { return w.prefix + "/" + strconv.FormatInt(dc, 10) + "/" }

func (w *Workers) holderKey(dc, id int64) string {
	return w.dcPrefix(dc) + strconv.FormatInt(id, 10) + "/holder"
}

func (w *Workers) highKey(dc, id int64) string {
	return w.dcPrefix(dc) + strconv.FormatInt(id, 10) + "/high"
}

// unavailable wraps an etcd or network failure in worker.ErrUnavailable,
// keeping err (and so the context's error, which clientv3 returns as is)
// visible to errors.Is.
func unavailable(ctx context.Context, err error, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("%w: %s: %w (%w)", worker.ErrUnavailable, msg, err, cerr)
	}
	return fmt.Errorf("%w: %s: %w", worker.ErrUnavailable, msg, err)
}

// slot is what the keys of one (datacenter, worker id) say.
type slot struct {
	holder  *mvccpb.KeyValue // nil when free
	highMs  int64            // 0 when never used
	highRev int64            // the high key's ModRevision; 0 when missing
}

// slots parses the keys under dcPrefix(dc) into slots by worker id. Keys of
// another shape are ignored.
func (w *Workers) slots(dc int64, kvs []*mvccpb.KeyValue) (map[int64]*slot, error) {
	pre := w.dcPrefix(dc)
	out := make(map[int64]*slot)
	for _, kv := range kvs {
		rest, ok := strings.CutPrefix(string(kv.Key), pre)
		if !ok {
			continue
		}
		idStr, kind, ok := strings.Cut(rest, "/")
		if !ok || (kind != "holder" && kind != "high") {
			continue
		}
		id, err := strconv.ParseInt(idStr, 10, 64)
		if err != nil || id < 0 || strconv.FormatInt(id, 10) != idStr {
			continue
		}
		s := out[id]
		if s == nil {
			s = &slot{}
			out[id] = s
		}
		if kind == "holder" {
			s.holder = kv
			continue
		}
		ms, err := parseMs(kv.Value)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %w", worker.ErrUnavailable, kv.Key, err)
		}
		s.highMs, s.highRev = ms, kv.ModRevision
	}
	return out, nil
}

func parseMs(v []byte) (int64, error) {
	ms, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("corrupt high-water mark %q", v)
	}
	return ms, nil
}

func sortedIDs(slots map[int64]*slot) []int64 {
	ids := make([]int64, 0, len(slots))
	for id := range slots {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// pick chooses a free id in [0, workers): the lowest one whose mark has
// passed (a never-used id's mark is 0), else the one with the smallest mark.
// It reports false, and how many ids are held, when none is free.
func pick(slots map[int64]*slot, workers, nowMs int64) (id, held int64, ok bool) {
	best, bestHigh := int64(-1), int64(0)
	next := int64(0) // the lowest id not seen yet
	for _, id := range sortedIDs(slots) {
		if id >= workers {
			break
		}
		if next < id {
			return next, 0, true // never used, and lower than any passed one to come
		}
		next = id + 1
		s := slots[id]
		switch {
		case s.holder != nil:
			held++
		case s.highMs <= nowMs:
			return id, 0, true
		case best < 0 || s.highMs < bestHigh:
			best, bestHigh = id, s.highMs
		}
	}
	if next < workers {
		return next, 0, true
	}
	if best >= 0 {
		return best, 0, true
	}
	return 0, held, false
}

// ceilMs is t in Unix milliseconds, rounded up: a mark stored lower than a
// reservation could let the next holder start in a tick this one used.
func ceilMs(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	ms := t.UnixMilli()
	if time.UnixMilli(ms).Before(t) {
		ms++
	}
	return ms
}

func msTime(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

// ttlSeconds is d rounded up to whole seconds, etcd's lease granularity.
func ttlSeconds(d time.Duration) int64 {
	return int64((d + time.Second - 1) / time.Second)
}

// revoke revokes a lease that holds nothing of ours (any more), on a
// best-effort basis: a lease left behind only lapses after its TTL, and the
// id its holder key names stays taken until then. When ctx has ended (the
// lease is abandoned because of it) the revocation goes on in the background
// for a little while, so that the caller still returns by its deadline.
func (w *Workers) revoke(ctx context.Context, id clientv3.LeaseID) {
	if ctx.Err() == nil {
		_, _ = w.client.Revoke(ctx, id)
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		_, _ = w.client.Revoke(ctx, id)
	}()
}

// Acquire implements worker.Coordinator.
func (w *Workers) Acquire(ctx context.Context, req worker.Request) (worker.Claim, error) {
	if req.Workers < 1 || req.Datacenter < 0 || req.Owner == "" || req.TTL <= 0 {
		return nil, fmt.Errorf("%w: bad request %+v", worker.ErrInvalidConfig, req)
	}
	dc := req.Datacenter
	resp, err := w.client.Get(ctx, w.dcPrefix(dc), clientv3.WithPrefix())
	if err != nil {
		return nil, unavailable(ctx, err, "reading the worker ids of datacenter %d", dc)
	}
	kvs := resp.Kvs
	reserveMs := ceilMs(req.Reserve)
	var lease *clientv3.LeaseGrantResponse
	for attempt := 1; ; attempt++ {
		slots, err := w.slots(dc, kvs)
		if err != nil {
			return nil, w.abandon(ctx, lease, err)
		}
		id, held, ok := pick(slots, req.Workers, w.now().UnixMilli())
		if !ok {
			return nil, w.abandon(ctx, lease, fmt.Errorf("%w: all %d worker ids of datacenter %d are held",
				worker.ErrExhausted, held, dc))
		}
		if lease == nil {
			if lease, err = w.client.Grant(ctx, ttlSeconds(req.TTL)); err != nil {
				return nil, unavailable(ctx, err, "granting a %v lease", req.TTL)
			}
		}
		s := slots[id]
		if s == nil {
			s = &slot{}
		}
		high := max(s.highMs, reserveMs)
		hk, wk := w.holderKey(dc, id), w.highKey(dc, id)
		tr, err := w.client.Txn(ctx).If(
			clientv3.Compare(clientv3.CreateRevision(hk), "=", 0),
			clientv3.Compare(clientv3.ModRevision(wk), "=", s.highRev),
		).Then(
			clientv3.OpPut(hk, req.Owner, clientv3.WithLease(lease.ID)),
			clientv3.OpPut(wk, strconv.FormatInt(high, 10)),
		).Else(
			clientv3.OpGet(w.dcPrefix(dc), clientv3.WithPrefix()),
		).Commit()
		if err != nil {
			// The transaction may have been applied: revoking the lease
			// frees the id again (the raised mark only errs on the safe side).
			return nil, w.abandon(ctx, lease, unavailable(ctx, err, "claiming worker id %d of datacenter %d", id, dc))
		}
		if tr.Succeeded {
			return &claim{
				w: w, dc: dc, id: id, owner: req.Owner, prev: msTime(s.highMs),
				lease: lease.ID, ttl: lease.TTL, highMs: high, highRev: tr.Header.Revision,
			}, nil
		}
		// Another node claimed the id first (or changed its mark). Each lost
		// race is an id won by someone else, so nodes starting all at once
		// (who all pick the same lowest id) get through in turn, and the
		// ids are exhausted after Workers of them; more losses than that
		// mean churn this call gives up on.
		if int64(attempt) > req.Workers {
			return nil, w.abandon(ctx, lease, fmt.Errorf("%w: other nodes won the worker ids of datacenter %d %d times in a row",
				worker.ErrUnavailable, dc, attempt))
		}
		kvs = tr.Responses[0].GetResponseRange().Kvs // the state that beat us
	}
}

// abandon revokes a granted but unused lease and returns err.
func (w *Workers) abandon(ctx context.Context, lease *clientv3.LeaseGrantResponse, err error) error {
	if lease != nil {
		w.revoke(ctx, lease.ID)
	}
	return err
}

// List implements worker.Coordinator. Expires is an upper bound at etcd's
// precision of whole seconds: the lease lapses before it, and within a
// second of it.
func (w *Workers) List(ctx context.Context, datacenter int64) ([]worker.Info, error) {
	resp, err := w.client.Get(ctx, w.dcPrefix(datacenter), clientv3.WithPrefix())
	if err != nil {
		return nil, unavailable(ctx, err, "listing the worker ids of datacenter %d", datacenter)
	}
	slots, err := w.slots(datacenter, resp.Kvs)
	if err != nil {
		return nil, err
	}
	infos := make([]worker.Info, 0, len(slots))
	for _, id := range sortedIDs(slots) {
		s := slots[id]
		in := worker.Info{Datacenter: datacenter, Worker: id, HighWater: msTime(s.highMs)}
		if s.holder != nil {
			in.Holder = string(s.holder.Value)
			if in.Expires, err = w.expires(ctx, clientv3.LeaseID(s.holder.Lease)); err != nil {
				return nil, err
			}
		}
		infos = append(infos, in)
	}
	return infos, nil
}

// expires asks etcd when a holder's lease lapses. A lease that is gone (its
// key is being deleted) or missing is reported as lapsed now.
func (w *Workers) expires(ctx context.Context, id clientv3.LeaseID) (time.Time, error) {
	now := w.now()
	if id == clientv3.NoLease {
		return now, nil
	}
	ttl, err := w.client.TimeToLive(ctx, id)
	switch {
	case errors.Is(err, rpctypes.ErrLeaseNotFound):
		return now, nil
	case err != nil:
		return time.Time{}, unavailable(ctx, err, "reading lease %x", int64(id))
	case ttl.TTL < 0:
		return now, nil
	}
	// etcd truncates the remaining time to whole seconds.
	remaining := min(ttl.TTL+1, max(ttl.GrantedTTL, ttl.TTL))
	return now.Add(time.Duration(remaining) * time.Second), nil
}

type claim struct {
	w      *Workers
	dc, id int64
	owner  string
	prev   time.Time

	mu      sync.Mutex // claims are used by one goroutine at a time; this makes sure
	lease   clientv3.LeaseID
	ttl     int64 // the lease's granted TTL, seconds
	highMs  int64 // the high-water mark as last written or read
	highRev int64 // its ModRevision
}

func (c *claim) WorkerID() int64     { return c.id }
func (c *claim) Previous() time.Time { return c.prev }

// Renew implements worker.Claim. A ttl longer than the lease's moves the
// holder key to a new lease of that TTL; a shorter one keeps the lease, which
// never lapses sooner than the holder expects.
func (c *claim) Renew(ctx context.Context, ttl time.Duration, reserve time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if secs := ttlSeconds(ttl); secs > c.ttl {
		return c.moveLease(ctx, ttl, reserve)
	}
	if _, err := c.w.client.KeepAliveOnce(ctx, c.lease); err != nil {
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
			return fmt.Errorf("%w: worker %d of datacenter %d: lease %x expired", worker.ErrNotHeld, c.id, c.dc, int64(c.lease))
		}
		return unavailable(ctx, err, "renewing lease %x of worker %d of datacenter %d", int64(c.lease), c.id, c.dc)
	}
	return c.guarded(ctx, "renewing", reserve)
}

// moveLease puts the holder key on a new lease of ttl and revokes the old one.
func (c *claim) moveLease(ctx context.Context, ttl time.Duration, reserve time.Time) error {
	g, err := c.w.client.Grant(ctx, ttlSeconds(ttl))
	if err != nil {
		return unavailable(ctx, err, "granting a %v lease", ttl)
	}
	if err := c.guarded(ctx, "renewing", reserve, clientv3.OpPut(c.w.holderKey(c.dc, c.id), c.owner, clientv3.WithLease(g.ID))); err != nil {
		c.w.revoke(ctx, g.ID)
		return err
	}
	old := c.lease
	c.lease, c.ttl = g.ID, g.TTL
	c.w.revoke(ctx, old)
	return nil
}

// Release implements worker.Claim.
func (c *claim) Release(ctx context.Context, reserve time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	err := c.guarded(ctx, "releasing", reserve, clientv3.OpDelete(c.w.holderKey(c.dc, c.id)))
	if err == nil || errors.Is(err, worker.ErrNotHeld) {
		// The lease holds no key of ours any more.
		c.w.revoke(ctx, c.lease)
	}
	return err
}

// guarded raises the high-water mark to at least reserve and applies ops in
// one transaction, if this owner still holds the id on its lease.
func (c *claim) guarded(ctx context.Context, what string, reserve time.Time, ops ...clientv3.Op) error {
	hk, wk := c.w.holderKey(c.dc, c.id), c.w.highKey(c.dc, c.id)
	for attempt := 1; ; attempt++ {
		cmps := []clientv3.Cmp{
			clientv3.Compare(clientv3.Value(hk), "=", c.owner),
			clientv3.Compare(clientv3.LeaseValue(hk), "=", c.lease),
		}
		then := ops
		high := max(c.highMs, ceilMs(reserve))
		if high != c.highMs {
			cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(wk), "=", c.highRev))
			then = append([]clientv3.Op{clientv3.OpPut(wk, strconv.FormatInt(high, 10))}, ops...)
		}
		tr, err := c.w.client.Txn(ctx).If(cmps...).Then(then...).Else(clientv3.OpGet(hk), clientv3.OpGet(wk)).Commit()
		if err != nil {
			return unavailable(ctx, err, "%s worker %d of datacenter %d", what, c.id, c.dc)
		}
		if tr.Succeeded {
			if high != c.highMs {
				c.highMs, c.highRev = high, tr.Header.Revision
			}
			return nil
		}
		holder, hw := tr.Responses[0].GetResponseRange().Kvs, tr.Responses[1].GetResponseRange().Kvs
		if len(holder) == 0 {
			return fmt.Errorf("%w: worker %d of datacenter %d is free (lease %x ended)", worker.ErrNotHeld, c.id, c.dc, int64(c.lease))
		}
		if h := holder[0]; string(h.Value) != c.owner || clientv3.LeaseID(h.Lease) != c.lease {
			return fmt.Errorf("%w: worker %d of datacenter %d is held by %q on lease %x", worker.ErrNotHeld, c.id, c.dc, h.Value, h.Lease)
		}
		// Still ours, but the mark changed under us: a write of ours whose
		// answer was lost, or an operator's. Go on from what is stored.
		c.highMs, c.highRev = 0, 0
		if len(hw) > 0 {
			if c.highMs, err = parseMs(hw[0].Value); err != nil {
				return fmt.Errorf("%w: %s: %w", worker.ErrUnavailable, wk, err)
			}
			c.highRev = hw[0].ModRevision
		}
		if attempt == maxAttempts {
			return fmt.Errorf("%w: %s worker %d of datacenter %d: its high-water mark changed %d times in a row",
				worker.ErrUnavailable, what, c.id, c.dc, attempt)
		}
	}
}
