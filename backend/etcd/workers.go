// Package etcd is the worker-id coordinator for a cluster of nodes that share
// an etcd cluster (etcd v3 API, server 3.4 or later).
//
// # Configuration
//
// Point every node of a cluster at the same etcd endpoints and the same key
// prefix, with a coordinator URL (the --coordinator flag of the flakeid
// command):
//
//	etcd://host:port[,host:port…][/prefix]
//
// opened by OpenWorkers:
//
//	u, err := url.Parse("etcd://10.0.0.1:2379,10.0.0.2:2379,10.0.0.3:2379/flakeid/workers")
//	if err != nil { … }
//	w, err := etcd.OpenWorkers(ctx, u)
//	if err != nil { … }
//	defer w.Close()
//	leaser, err := worker.NewLeaser(w, worker.Config{Datacenter: 1})
//
// An application that already has a *clientv3.Client (TLS, authentication,
// its own logger) wraps it with NewWorkers instead; the client stays the
// caller's to close. Clusters that must never share worker ids use distinct
// prefixes or distinct datacenter ids; the prefix defaults to DefaultPrefix.
// The datacenter registry (below) lives under DefaultRegistry, always: one
// per etcd cluster, so that no two clusters on it can hold the same
// datacenter and worker id or use two layouts, whatever their prefixes.
//
// # Keys
//
// A namespace is a key prefix. Each datacenter used in it has
//
//	<prefix>/<datacenter>/namespace        the namespace record (JSON), no lease
//	<prefix>/<datacenter>/<worker>/holder  the owner token, attached to an etcd lease
//	<prefix>/<datacenter>/<worker>/high    the high-water mark, Unix milliseconds, no lease
//	<prefix>/<datacenter>/clock/<worker>   the holder's clock, Unix milliseconds, on the holder's lease
//
// and the etcd cluster as a whole has one datacenter registry, under
// DefaultRegistry, shared by every prefix:
//
//	<registry>/<datacenter>                {"namespace": prefix, "contract": …}, no lease
//
// The holder key exists exactly while the id is held: etcd deletes it when
// its lease expires, by etcd's own clock. The high-water key has no lease, so
// it outlives every holder; it only ever grows.
//
// The namespace record is {"incarnation", "contract", "floor_ms",
// "initialised_ms"} (see worker.Namespace): a random incarnation, the ID-space
// contract of the first holder, the time it was initialised and a floor —
// both by the initialising node's clock, etcd having none, so they are as
// good as the nodes' clocks agree (the quarantine covers worker.Config's
// MaxClockSkew) — below which no holder of the datacenter starts. It sits
// under the prefix with the slots, so whatever takes the slots away (a
// deleted prefix, a restore, a new cluster) takes the record with them.
//
// The registry maps a datacenter id to the namespace that claimed it first;
// an Acquire of a datacenter claimed by another prefix fails with
// worker.ErrContract, so that two clusters that share an etcd cannot both
// use a datacenter id. Entries are created with If(CreateRevision = 0) and
// never deleted by flakeid (etcdctl del removes one when a datacenter id is
// really retired).
//
// # Atomicity and fencing
//
// Acquire reads the datacenter's keys and its registry entry in one read,
// refuses a request whose contract differs from the record's or whose
// datacenter another namespace claimed (both sides in the error, nothing
// written), picks a free id (never used, released or expired; among them the
// lowest one whose high-water mark has passed, else the one with the smallest
// mark), grants an etcd lease of the request's TTL rounded up to whole
// seconds, and claims the id in one transaction:
//
//	If(holder CreateRevision = 0, high value = the value read (or CreateRevision = 0),
//	   record value and ModRevision = those read (or CreateRevision = 0),
//	   registry entry value = the one read (or CreateRevision = 0))
//	Then(Put holder = owner with the lease, Put high = max(stored, reserve),
//	     Put clock = the node's clock with the lease,
//	     Put record when missing, Put registry entry when missing)
//
// so two nodes can never both win an id, a record deleted or re-initialised
// between the read and the claim makes the claim fail and retry, and the mark
// a new holder starts from is the one its transaction replaced, raised to
// the record's floor. A lost race is retried at once on the state the failed
// transaction returned (each lost race is an id another node won, so a herd
// of nodes starting together gets through in turn); a granted lease that
// ends up unused is revoked.
//
// Renew sends one keep-alive for the lease and then raises the mark in a
// transaction guarded by
//
//	If(record value = the record acquired under, high value = the value last written or read,
//	   holder value = owner, holder lease = our lease)
//
// and writes the holder's clock in it: a holder whose lease expired, even
// one whose requests were held up in the network and arrive late, can no
// longer write anything, because another holder's key has another lease.
// Release runs the same guarded transaction to raise the mark and delete the
// holder and clock keys, then revokes the lease. Every compare of a value
// that matters is on the value, never on a revision alone: a restore rewinds
// revisions, and a revision seen before it may name another value after it.
//
// etcd grants leases of at least its minimum TTL (about 1.5 times the
// election timeout: 2s with the default settings), and List reports expiry
// times at etcd's precision of whole seconds. A Renew with a TTL longer than
// the lease's moves the holder key to a new lease, in the same guarded way.
//
// # Lost and rolled-back state
//
// When the guarded transaction fails, or the keep-alive finds the lease gone,
// Renew and Release read the record, holder and high keys and decide, before
// looking at the holder:
//
//   - The record is gone: the prefix was deleted (etcdctl del --prefix), or
//     etcd behind the endpoints is a new, empty cluster (its data directory
//     lost; the lease is gone too, which alone would only mean expiry).
//   - The record was initialised before the one the claim acquired under,
//     or it is the same incarnation but the claim's high key is gone or
//     below the highest mark the claim stored: etcd went back to an older
//     copy (etcdutl snapshot restore, a disk snapshot). A restore brings back
//     the old leases too, under their old ids, so the holder's own keep-alive
//     and holder compares may well succeed: the values are what tell.
//
// In these cases the record is re-initialised — a new incarnation, the
// record's contract (the claim's when there is none), initialised now by
// this node's clock, floor = max(old floor, now + the claim's quarantine) —
// in a transaction guarded by the record still being missing or the same, no
// slot is touched, and the call fails with worker.ErrReset saying what was
// found. A record with another, later incarnation means another node already
// did so: ErrReset, nothing written. Otherwise the holder checks decide
// (worker.ErrNotHeld), or the mark was raised by someone else and the
// transaction is retried from what is stored.
//
// # Clock
//
// etcd has no clock a client can read, so the coordinator's clock is the
// datacenter's live peers'. This is Leaf's peer check (Meituan's
// Leaf-snowflake, https://tech.meituan.com/2017/04/21/mt-leaf.html: every
// node reports its time to ZooKeeper every 3s, and a starting node compares
// its clock with those of the live nodes, found through ephemeral nodes),
// with the times kept in etcd rather than asked for over RPC: every holder
// writes its node's clock to its clock key — req.Now at Acquire, reserve −
// (req.Reserve − req.Now) at each Renew, or the local clock when the request
// has no Now — on its own lease, so the key vanishes with the holder.
// Claim.Clock reports the newest value among the other live holders of the
// datacenter, with stale = the TTL (a live holder wrote within its lease's
// TTL; peers are expected to share the TTL) plus the round trips between the
// read and the reply it is reported for; the zero time when no other holder
// is live. Acquire reads the clocks in its range read; Renew re-reads them in
// its transaction every tenth renewal and in between reports the last
// reading advanced by the time passed since. Renewals stay one keep-alive
// and one transaction.
//
// # Errors
//
// Every error wraps one of worker's sentinels: ErrExhausted (saying how many
// ids are held), ErrNotHeld, ErrReset, ErrContract, ErrInvalidConfig, or
// ErrUnavailable for an etcd that cannot be reached or answers with an error;
// the context's error stays visible to errors.Is. Errors name the prefix,
// the datacenter and what was found. As with any remote store, a write that
// failed as unavailable may still have been applied.
package etcd

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/flakeid/flakeid/backend/internal/coord"
	"github.com/flakeid/flakeid/worker"
	"github.com/flakeid/flakeid/worker/protocol"
)

// DefaultPrefix is the key prefix when the URL has no path, or NewWorkers is
// given "".
const DefaultPrefix = "/flakeid/workers"

// DefaultRegistry is the key prefix of the datacenter registry: one per etcd
// cluster, shared by every namespace (key prefix) on it.
const DefaultRegistry = "/flakeid/datacenters"

// DefaultDialTimeout bounds OpenWorkers's connection and check when its
// context has no deadline.
const DefaultDialTimeout = 5 * time.Second

// maxAttempts is how many times a guarded write re-reads a high-water mark
// that changed under it. (Acquire retries as long as other nodes win the ids
// it picks: see there.)
const maxAttempts = 8

// peerReadEvery: Renew re-reads the peers' clocks once every this many
// renewals.
const peerReadEvery = 10

// stamp formats the times in errors.
const stamp = "2006-01-02T15:04:05.000Z07:00"

// Workers is a worker.Coordinator over etcd. It is safe for concurrent use.
type Workers struct {
	client   *clientv3.Client
	prefix   string
	registry string
	owned    bool // Close closes the client: OpenWorkers made it
	now      func() time.Time
}

var (
	_ worker.Coordinator = (*Workers)(nil)
	_ worker.Registry    = (*Workers)(nil)
	_ worker.MarkLowerer = (*Workers)(nil)
)

// NewWorkers returns a coordinator that keeps its slots under prefix
// (DefaultPrefix when empty; a trailing "/" is dropped) through client. Its
// Close leaves the client open: closing it stays the caller's job.
func NewWorkers(client *clientv3.Client, prefix string) *Workers {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	return &Workers{client: client, prefix: strings.TrimRight(prefix, "/"), registry: DefaultRegistry, now: time.Now}
}

// OpenWorkers opens the coordinator an etcd:// URL names:
//
//	etcd://host:port[,host:port…][/prefix]
//
// It connects to every host:port over plain HTTP (an etcd with TLS or
// authentication: make the client and wrap it with NewWorkers). The path is
// the key prefix as NewWorkers takes it (DefaultPrefix when there is none).
// A query parameter is an error wrapping worker.ErrInvalidConfig (registry=
// with the reason: the registry is DefaultRegistry, one per cluster), and
// so is a prefix inside it. It checks that etcd answers, within ctx or DefaultDialTimeout when ctx has no deadline: an
// etcd that does not is reported as worker.ErrUnavailable. The *Workers owns
// the client it made: Close closes it.
func OpenWorkers(ctx context.Context, u *url.URL) (*Workers, error) {
	if !strings.EqualFold(u.Scheme, "etcd") {
		return nil, coord.InvalidURL(fmt.Errorf("scheme %q, want etcd", u.Scheme))
	}
	if u.Host == "" {
		return nil, coord.InvalidURL(errors.New("no etcd endpoint"))
	}
	if err := coord.RefuseRegistry(u, "the keys under "+DefaultRegistry+"/"); err != nil {
		return nil, err
	}
	if err := coord.CheckParams(u); err != nil {
		return nil, err
	}
	if err := coord.InsideRegistry(strings.TrimRight(cmp.Or(u.Path, DefaultPrefix), "/"), DefaultRegistry); err != nil {
		return nil, err
	}
	var endpoints []string
	for _, h := range strings.Split(u.Host, ",") {
		endpoints = append(endpoints, "http://"+h)
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
	w := NewWorkers(client, u.Path)
	w.owned = true
	if _, err := client.Get(ctx, w.prefix+"/", clientv3.WithPrefix(), clientv3.WithCountOnly()); err != nil {
		client.Close()
		return nil, unavailable(ctx, err, "reading %s/ from etcd at %s", w.prefix, strings.Join(endpoints, ","))
	}
	return w, nil
}

// Close closes the etcd client if OpenWorkers made it; a Workers from
// NewWorkers leaves its client open.
func (w *Workers) Close() error {
	if w.owned {
		return w.client.Close()
	}
	return nil
}

// Prefix is the key prefix, without a trailing "/".
func (w *Workers) Prefix() string { return w.prefix }

// Registry is the key prefix of the datacenter registry, without a trailing
// "/".
func (w *Workers) Registry() string { return w.registry }

// keys names this coordinator's keys.
func (w *Workers) keys() coord.KVKeys { return coord.KVKeys{Prefix: w.prefix, Registry: w.registry} }

// unavailable wraps an etcd or network failure in worker.ErrUnavailable,
// keeping err (and so the context's error, which clientv3 returns as is)
// visible to errors.Is.
func unavailable(ctx context.Context, err error, format string, args ...any) error {
	return coord.Unavailable(ctx, err, format, args...)
}

// slot is what the keys of one (datacenter, worker id) say.
type slot struct {
	holder  *mvccpb.KeyValue // nil when free
	highMs  int64            // 0 when never used
	highRaw []byte           // the high key's value; nil when missing
}

// slots parses the keys under dcPrefix(dc) into slots by worker id. Keys of
// another shape (the namespace record, the clocks) are ignored.
func (w *Workers) slots(dc int64, kvs []*mvccpb.KeyValue) (map[int64]*slot, error) {
	pre := w.keys().DC(dc)
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
		id, ok := coord.ParseID(idStr)
		if !ok {
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
		s.highMs, s.highRaw = ms, kv.Value
	}
	return out, nil
}

// newestPeer is the newest clock among the clock keys in kvs of datacenter
// dc, leaving out worker id self's; 0 when there is none.
func (w *Workers) newestPeer(dc, self int64, kvs []*mvccpb.KeyValue) int64 {
	pre := w.keys().ClockPrefix(dc)
	var newest int64
	for _, kv := range kvs {
		rest, ok := strings.CutPrefix(string(kv.Key), pre)
		if !ok {
			continue
		}
		if id, ok := coord.ParseID(rest); !ok || id == self {
			continue
		}
		if ms, err := parseMs(kv.Value); err == nil {
			newest = max(newest, ms)
		}
	}
	return newest
}

// find is the key-value of key in kvs, or nil.
func find(kvs []*mvccpb.KeyValue, key string) *mvccpb.KeyValue {
	for _, kv := range kvs {
		if string(kv.Key) == key {
			return kv
		}
	}
	return nil
}

func parseMs(v []byte) (int64, error) {
	ms, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("corrupt high-water mark %q", v)
	}
	return ms, nil
}

// parseRecord parses the namespace record kv (see coord.Record).
func parseRecord(kv *mvccpb.KeyValue) (coord.Record, error) {
	return coord.ParseRecord(string(kv.Key), kv.Value)
}

// registration is the registry entry of this namespace, with contract.
func (w *Workers) registration(contract string) string {
	return string(coord.Registration{Namespace: w.prefix, Contract: contract}.Encode())
}

// entry is kv as coord.Admit reads it; nil when kv is.
func entry(kv *mvccpb.KeyValue) *coord.Entry {
	if kv == nil {
		return nil
	}
	return &coord.Entry{Key: string(kv.Key), Value: kv.Value}
}

// Claims implements worker.Registry: the keys under the registry prefix.
func (w *Workers) Claims(ctx context.Context) (worker.Claims, error) {
	resp, err := w.client.Get(ctx, w.registry+"/", clientv3.WithPrefix())
	if err != nil {
		return worker.Claims{}, unavailable(ctx, err, "reading the registry %s", w.registry)
	}
	return coord.ParseClaims(w.keys(), kvEntries(resp.Kvs))
}

// Unclaim implements worker.Registry. It reads the datacenter's keys and
// its registry entry at one revision, decides by worker.CheckUnclaim (by
// this machine's clock: etcd has none), and deletes the entry in a
// transaction guarded by the entry's value and by no key under the
// datacenter's prefix having changed since that revision, so that a holder
// that came in between makes it fail.
func (w *Workers) Unclaim(ctx context.Context, dc int64) error {
	dcPrefix, rk := w.keys().DC(dc), w.keys().Registration(dc)
	resp, err := w.client.Txn(ctx).Then(clientv3.OpGet(dcPrefix, clientv3.WithPrefix()), clientv3.OpGet(rk)).Commit()
	if err != nil {
		return unavailable(ctx, err, "reading datacenter %d of %s", dc, w.prefix)
	}
	kvs, reg := resp.Responses[0].GetResponseRange().Kvs, find(resp.Responses[1].GetResponseRange().Kvs, rk)
	claimant := ""
	if reg != nil {
		e, err := coord.ParseRegistration(rk, reg.Value)
		if err != nil {
			return err
		}
		claimant = e.Namespace
	}
	if claimant != w.prefix {
		return fmt.Errorf("%w: datacenter %d is not claimed by %s in the registry %s (claimed by: %q)", worker.ErrContract, dc, w.prefix, w.registry, claimant)
	}
	slots, err := w.slots(dc, kvs)
	if err != nil {
		return err
	}
	var infos []worker.Info
	for _, id := range slices.Sorted(maps.Keys(slots)) {
		s := slots[id]
		in := worker.Info{Datacenter: dc, Worker: id, HighWater: coord.MsTime(s.highMs)}
		if s.holder != nil {
			in.Holder = string(s.holder.Value)
			if in.Expires, err = w.expires(ctx, clientv3.LeaseID(s.holder.Lease)); err != nil {
				return err
			}
		}
		infos = append(infos, in)
	}
	if err := worker.CheckUnclaim(w.prefix, dc, infos, w.now()); err != nil {
		return err
	}
	tr, err := w.client.Txn(ctx).If(
		clientv3.Compare(clientv3.Value(rk), "=", string(reg.Value)),
		clientv3.Compare(clientv3.ModRevision(dcPrefix), "<", resp.Header.Revision+1).WithPrefix(),
	).Then(clientv3.OpDelete(rk)).Commit()
	switch {
	case err != nil:
		return unavailable(ctx, err, "freeing datacenter %d of %s in the registry %s", dc, w.prefix, w.registry)
	case !tr.Succeeded:
		return fmt.Errorf("%w: datacenter %d of %s changed while it was being freed (a node started?): look again", worker.ErrInUse, dc, w.prefix)
	}
	return nil
}

// LowerMark implements worker.MarkLowerer: it reads the slot, decides by
// worker.CheckLowerMark (by this machine's clock: etcd has none), and writes
// the mark in a transaction guarded by the holder key still being absent
// and the mark unchanged.
func (w *Workers) LowerMark(ctx context.Context, dc, id int64, to time.Time) (time.Time, error) {
	hk, wk := w.keys().Holder(dc, id), w.keys().High(dc, id)
	resp, err := w.client.Txn(ctx).Then(clientv3.OpGet(hk), clientv3.OpGet(wk)).Commit()
	if err != nil {
		return time.Time{}, unavailable(ctx, err, "reading worker %d of datacenter %d in %s", id, dc, w.prefix)
	}
	holder, high := find(resp.Responses[0].GetResponseRange().Kvs, hk), find(resp.Responses[1].GetResponseRange().Kvs, wk)
	info := worker.Info{Datacenter: dc, Worker: id}
	if high != nil {
		ms, err := parseMs(high.Value)
		if err != nil {
			return time.Time{}, fmt.Errorf("%w: %s: %w", worker.ErrUnavailable, wk, err)
		}
		info.HighWater = coord.MsTime(ms)
	}
	if holder != nil {
		info.Holder = string(holder.Value)
		if info.Expires, err = w.expires(ctx, clientv3.LeaseID(holder.Lease)); err != nil {
			return time.Time{}, err
		}
	}
	toMs := coord.CeilMs(to)
	if err := worker.CheckLowerMark(info, coord.MsTime(toMs), w.now()); err != nil {
		return time.Time{}, err
	}
	tr, err := w.client.Txn(ctx).If(
		clientv3.Compare(clientv3.CreateRevision(hk), "=", 0),
		clientv3.Compare(clientv3.Value(wk), "=", string(high.Value)),
	).Then(clientv3.OpPut(wk, strconv.FormatInt(toMs, 10))).Commit()
	switch {
	case err != nil:
		return time.Time{}, unavailable(ctx, err, "lowering the mark of worker %d of datacenter %d in %s", id, dc, w.prefix)
	case !tr.Succeeded:
		return time.Time{}, fmt.Errorf("%w: worker %d of datacenter %d in %s changed while its mark was being lowered (taken?): look again", worker.ErrInUse, id, dc, w.prefix)
	}
	return info.HighWater, nil
}

// kvEntries are kvs as coord.ParseClaims reads them.
func kvEntries(kvs []*mvccpb.KeyValue) []coord.Entry {
	out := make([]coord.Entry, len(kvs))
	for i, kv := range kvs {
		out[i] = coord.Entry{Key: string(kv.Key), Value: kv.Value}
	}
	return out
}

// Clock implements worker.Coordinator: etcd has no clock of its own, so it
// is the newest clock the datacenter's live holders wrote, stale by up to
// req.TTL (rounded up to whole seconds, etcd's lease granularity), read
// without writing; the zero time when no holder is live.
func (w *Workers) Clock(ctx context.Context, req worker.Request) (time.Time, time.Duration, error) {
	resp, err := w.client.Get(ctx, w.keys().ClockPrefix(req.Datacenter), clientv3.WithPrefix())
	if err != nil {
		return time.Time{}, 0, unavailable(ctx, err, "reading the clocks of datacenter %d in %s", req.Datacenter, w.prefix)
	}
	newest := w.newestPeer(req.Datacenter, -1, resp.Kvs)
	if newest == 0 {
		return time.Time{}, 0, nil
	}
	return coord.MsTime(newest), time.Duration(ttlSeconds(req.TTL)) * time.Second, nil
}

// pick chooses a free id in [0, workers) as protocol.Pick does; a slot with a
// holder key is held.
func pick(slots map[int64]*slot, workers, nowMs int64) (id, held int64, ok bool) {
	return protocol.Pick(protocol.Candidates(slots, func(s *slot) (bool, int64) { return s.holder != nil, s.highMs }), nil, workers, nowMs)
}

// ceilMs is coord.CeilMs, for this package's tests.
func ceilMs(t time.Time) int64 { return coord.CeilMs(t) }

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
	if err := req.Validate(); err != nil {
		return nil, err
	}
	dc := req.Datacenter
	nk, rk, sk := w.keys().Namespace(dc), w.keys().Registration(dc), w.keys().Space()
	read := func() []clientv3.Op {
		return []clientv3.Op{clientv3.OpGet(w.keys().DC(dc), clientv3.WithPrefix()), clientv3.OpGet(rk), clientv3.OpGet(sk)}
	}
	readSent := time.Now()
	resp, err := w.client.Txn(ctx).Then(read()...).Commit()
	if err != nil {
		return nil, unavailable(ctx, err, "reading the worker ids of datacenter %d in %s", dc, w.prefix)
	}
	readRecv := time.Now()
	kvs, reg, spc := resp.Responses[0].GetResponseRange().Kvs, resp.Responses[1].GetResponseRange().Kvs, resp.Responses[2].GetResponseRange().Kvs
	reserveMs := coord.CeilMs(req.Reserve)
	bound := req.MarkBound()
	nodeMs, ahead := coord.NodeClock(req, w.now)
	var lease *clientv3.LeaseGrantResponse
	for attempt := 1; ; attempt++ {
		regKV, spaceKV, recKV := find(reg, rk), find(spc, sk), find(kvs, nk)
		rec, err := coord.Admit(req, "the registry "+w.registry+" of this etcd", w.prefix, entry(regKV), entry(spaceKV), entry(recKV))
		if err != nil {
			return nil, w.abandon(ctx, lease, err)
		}
		// The coordinator's clock is the live peers': the latest it can be.
		var peers coord.PeerClock
		peers.Read(w.newestPeer(dc, -1, kvs), readSent, readRecv)
		if err := bound.Check(fmt.Sprintf("acquiring in datacenter %d of %s", dc, w.prefix), req.Reserve,
			peers.Latest(time.Now(), time.Duration(ttlSeconds(req.TTL))*time.Second)); err != nil {
			return nil, w.abandon(ctx, lease, err)
		}
		slots, err := w.slots(dc, kvs)
		if err != nil {
			return nil, w.abandon(ctx, lease, err)
		}
		id, held, ok := pick(slots, req.Workers, w.now().UnixMilli())
		if !ok {
			return nil, w.abandon(ctx, lease, fmt.Errorf("%w: all %d worker ids of datacenter %d in %s are held",
				worker.ErrExhausted, held, dc, w.prefix))
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
		hk, wk := w.keys().Holder(dc, id), w.keys().High(dc, id)
		cmps := []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(hk), "=", 0)}
		if s.highRaw == nil {
			cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(wk), "=", 0))
		} else {
			cmps = append(cmps, clientv3.Compare(clientv3.Value(wk), "=", string(s.highRaw)))
		}
		then := []clientv3.Op{
			clientv3.OpPut(hk, req.Owner, clientv3.WithLease(lease.ID)),
			clientv3.OpPut(wk, strconv.FormatInt(high, 10)),
			clientv3.OpPut(w.keys().Clock(dc, id), strconv.FormatInt(nodeMs, 10), clientv3.WithLease(lease.ID)),
		}
		var recRaw string
		if recKV == nil {
			// A new datacenter, or one whose record is gone while its
			// slots are not (a partial loss, keys of an older flakeid):
			// initialise it; the slots and their marks stay.
			rec = coord.NewRecord(req.Contract, w.now().UnixMilli(), req.Quarantine)
			recRaw = string(rec.Encode())
			cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(nk), "=", 0))
			then = append(then, clientv3.OpPut(nk, recRaw))
		} else {
			recRaw = string(recKV.Value)
			cmps = append(cmps, clientv3.Compare(clientv3.Value(nk), "=", recRaw),
				clientv3.Compare(clientv3.ModRevision(nk), "=", recKV.ModRevision))
		}
		if regKV == nil {
			cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(rk), "=", 0))
			then = append(then, clientv3.OpPut(rk, w.registration(rec.Contract)))
		} else {
			cmps = append(cmps, clientv3.Compare(clientv3.Value(rk), "=", string(regKV.Value)))
		}
		if spaceKV == nil {
			cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(sk), "=", 0))
			then = append(then, clientv3.OpPut(sk, req.Space))
		} else {
			cmps = append(cmps, clientv3.Compare(clientv3.Value(sk), "=", string(spaceKV.Value)))
		}
		sent := time.Now()
		tr, err := w.client.Txn(ctx).If(cmps...).Then(then...).Else(read()...).Commit()
		if err != nil {
			// The transaction may have been applied: revoking the lease
			// frees the id again (the raised mark only errs on the safe side).
			return nil, w.abandon(ctx, lease, unavailable(ctx, err, "claiming worker id %d of datacenter %d in %s", id, dc, w.prefix))
		}
		recv := time.Now()
		if tr.Succeeded {
			c := &claim{
				w: w, dc: dc, id: id, owner: req.Owner, prev: coord.MsTime(max(s.highMs, rec.FloorMs)),
				contract: req.Contract, quarantine: req.Quarantine, ahead: ahead, bound: bound,
				lease: lease.ID, ttl: lease.TTL, highMs: high, highRaw: strconv.FormatInt(high, 10), maxMs: high,
				rec: rec, recRaw: recRaw,
			}
			c.peers.Read(w.newestPeer(dc, id, kvs), readSent, readRecv)
			c.updateClock(sent, recv, false)
			return c, nil
		}
		// Another node claimed the id first (or changed its mark, or the
		// record). Each lost race is an id won by someone else, so nodes
		// starting all at once (who all pick the same lowest id) get
		// through in turn, and the ids are exhausted after Workers of them;
		// more losses than that mean churn this call gives up on.
		if int64(attempt) > req.Workers {
			return nil, w.abandon(ctx, lease, fmt.Errorf("%w: other nodes won the worker ids of datacenter %d in %s %d times in a row",
				worker.ErrUnavailable, dc, w.prefix, attempt))
		}
		// the state that beat us
		kvs, reg, spc = tr.Responses[0].GetResponseRange().Kvs, tr.Responses[1].GetResponseRange().Kvs, tr.Responses[2].GetResponseRange().Kvs
		readSent, readRecv = sent, recv
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
	resp, err := w.client.Get(ctx, w.keys().DC(datacenter), clientv3.WithPrefix())
	if err != nil {
		return nil, unavailable(ctx, err, "listing the worker ids of datacenter %d in %s", datacenter, w.prefix)
	}
	slots, err := w.slots(datacenter, resp.Kvs)
	if err != nil {
		return nil, err
	}
	infos := make([]worker.Info, 0, len(slots))
	for _, id := range slices.Sorted(maps.Keys(slots)) {
		s := slots[id]
		in := worker.Info{Datacenter: datacenter, Worker: id, HighWater: coord.MsTime(s.highMs)}
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

// Namespace implements worker.Coordinator.
func (w *Workers) Namespace(ctx context.Context, datacenter int64) (worker.Namespace, bool, error) {
	resp, err := w.client.Get(ctx, w.keys().Namespace(datacenter))
	if err != nil {
		return worker.Namespace{}, false, unavailable(ctx, err, "reading the namespace record of datacenter %d in %s", datacenter, w.prefix)
	}
	if len(resp.Kvs) == 0 {
		return worker.Namespace{}, false, nil
	}
	rec, err := parseRecord(resp.Kvs[0])
	if err != nil {
		return worker.Namespace{}, false, err
	}
	return rec.Namespace(), true, nil
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
	w          *Workers
	dc, id     int64
	owner      string
	prev       time.Time
	contract   string        // the request's, for a re-initialisation without a record
	quarantine time.Duration // the request's
	ahead      time.Duration // the request's Reserve − Now; < 0 when it had no Now
	bound      worker.MarkBound

	mu       sync.Mutex // claims are used by one goroutine at a time; this makes sure
	lease    clientv3.LeaseID
	ttl      int64        // the lease's granted TTL, seconds
	highMs   int64        // the high-water mark as last written or read
	highRaw  string       // its value as stored
	maxMs    int64        // the highest mark this claim stored
	rec      coord.Record // the namespace record acquired under
	recRaw   string       // its value as stored
	renewals int          // successful renewals, to re-read the peers' clocks now and then

	peers coord.PeerClock // Clock's answer
}

func (c *claim) WorkerID() int64     { return c.id }
func (c *claim) Previous() time.Time { return c.prev }

// Clock implements worker.Claim: the newest clock of the datacenter's other
// live holders, advanced by the time since it was read.
func (c *claim) Clock() (time.Time, time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.peers.Clock()
}

// updateClock sets Clock's answer for an operation sent and answered at
// sent and recv; fresh says that it read the peers' clocks itself. A live
// peer wrote its key less than a TTL (its lease's) before.
func (c *claim) updateClock(sent, recv time.Time, fresh bool) {
	c.peers.Update(sent, recv, fresh, time.Duration(c.ttl)*time.Second)
}

// where names the claim's slot in errors.
func (c *claim) where() string {
	return fmt.Sprintf("worker %d of datacenter %d in %s", c.id, c.dc, c.w.prefix)
}

// Renew implements worker.Claim. A ttl longer than the lease's moves the
// holder key to a new lease of that TTL; a shorter one keeps the lease, which
// never lapses sooner than the holder expects.
func (c *claim) Renew(ctx context.Context, ttl time.Duration, reserve time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.bound.Check(c.where()+": renewing", reserve, c.peers.Latest(time.Now(), time.Duration(c.ttl)*time.Second)); err != nil {
		return err
	}
	if secs := ttlSeconds(ttl); secs > c.ttl {
		return c.moveLease(ctx, ttl, reserve)
	}
	if _, err := c.w.client.KeepAliveOnce(ctx, c.lease); err != nil {
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
			// Expired — or etcd lost it with everything else (a new
			// cluster behind the endpoints): the keys tell.
			return c.lost(ctx, "renewing", fmt.Sprintf("lease %x expired", int64(c.lease)))
		}
		return unavailable(ctx, err, "renewing lease %x of %s", int64(c.lease), c.where())
	}
	return c.guarded(ctx, "renewing", reserve, c.lease)
}

// moveLease puts the holder key on a new lease of ttl and revokes the old one.
func (c *claim) moveLease(ctx context.Context, ttl time.Duration, reserve time.Time) error {
	g, err := c.w.client.Grant(ctx, ttlSeconds(ttl))
	if err != nil {
		return unavailable(ctx, err, "granting a %v lease", ttl)
	}
	if err := c.guarded(ctx, "renewing", reserve, g.ID, clientv3.OpPut(c.w.keys().Holder(c.dc, c.id), c.owner, clientv3.WithLease(g.ID))); err != nil {
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
	err := c.guarded(ctx, "releasing", reserve, clientv3.NoLease,
		clientv3.OpDelete(c.w.keys().Holder(c.dc, c.id)), clientv3.OpDelete(c.w.keys().Clock(c.dc, c.id)))
	if err == nil || errors.Is(err, worker.ErrNotHeld) {
		// The lease holds no key of ours any more.
		c.w.revoke(ctx, c.lease)
	}
	return err
}

// guarded raises the high-water mark to at least reserve and applies ops in
// one transaction, if the namespace record is the one the claim acquired
// under, the mark is the one it last wrote or read, and this owner still
// holds the id on its lease. A renewal (clockLease set) also writes this
// node's clock on clockLease, and every peerReadEvery renewals reads the
// peers'.
func (c *claim) guarded(ctx context.Context, what string, reserve time.Time, clockLease clientv3.LeaseID, ops ...clientv3.Op) error {
	nk, hk, wk := c.w.keys().Namespace(c.dc), c.w.keys().Holder(c.dc, c.id), c.w.keys().High(c.dc, c.id)
	renewing := clockLease != clientv3.NoLease
	for attempt := 1; ; attempt++ {
		cmps := []clientv3.Cmp{
			clientv3.Compare(clientv3.Value(nk), "=", c.recRaw),
			clientv3.Compare(clientv3.Value(wk), "=", c.highRaw),
			clientv3.Compare(clientv3.Value(hk), "=", c.owner),
			clientv3.Compare(clientv3.LeaseValue(hk), "=", c.lease),
		}
		var then []clientv3.Op
		high := max(c.highMs, coord.CeilMs(reserve))
		if high != c.highMs {
			then = append(then, clientv3.OpPut(wk, strconv.FormatInt(high, 10)))
		}
		then = append(then, ops...)
		readPeers := false
		if renewing {
			then = append(then, clientv3.OpPut(c.w.keys().Clock(c.dc, c.id), strconv.FormatInt(coord.NodeMs(c.ahead, reserve, c.w.now), 10), clientv3.WithLease(clockLease)))
			if readPeers = c.renewals%peerReadEvery == peerReadEvery-1; readPeers {
				then = append(then, clientv3.OpGet(c.w.keys().ClockPrefix(c.dc), clientv3.WithPrefix()))
			}
		}
		sent := time.Now()
		tr, err := c.w.client.Txn(ctx).If(cmps...).Then(then...).Else(clientv3.OpGet(nk), clientv3.OpGet(hk), clientv3.OpGet(wk)).Commit()
		if err != nil {
			return unavailable(ctx, err, "%s %s", what, c.where())
		}
		recv := time.Now()
		if tr.Succeeded {
			c.highMs, c.highRaw = high, strconv.FormatInt(high, 10)
			c.maxMs = max(c.maxMs, high)
			if renewing {
				c.renewals++
				if readPeers {
					c.peers.Read(c.w.newestPeer(c.dc, c.id, tr.Responses[len(tr.Responses)-1].GetResponseRange().Kvs), sent, recv)
				}
				c.updateClock(sent, recv, readPeers)
			}
			return nil
		}
		first := func(i int) *mvccpb.KeyValue {
			if kvs := tr.Responses[i].GetResponseRange().Kvs; len(kvs) > 0 {
				return kvs[0]
			}
			return nil
		}
		ns, holder, hw := first(0), first(1), first(2)
		if err := c.check(ctx, ns, holder, hw); err != nil {
			return err
		}
		// Nothing was lost and the id is still ours, but the mark (or the
		// record's bytes, same incarnation) changed under us: a write of ours
		// whose answer was lost, or an operator's. Go on from what is stored.
		c.recRaw, c.highRaw = string(ns.Value), string(hw.Value)
		if c.highMs, err = parseMs(hw.Value); err != nil {
			return fmt.Errorf("%w: %s: %w", worker.ErrUnavailable, wk, err)
		}
		if attempt == maxAttempts {
			return fmt.Errorf("%w: %s %s: its high-water mark changed %d times in a row",
				worker.ErrUnavailable, what, c.where(), attempt)
		}
	}
}

// lost tells why the claim's lease is gone: the coordinator lost its state
// (ErrReset), or the lease expired (ErrNotHeld, saying why).
func (c *claim) lost(ctx context.Context, what, why string) error {
	nk, hk, wk := c.w.keys().Namespace(c.dc), c.w.keys().Holder(c.dc, c.id), c.w.keys().High(c.dc, c.id)
	tr, err := c.w.client.Txn(ctx).Then(clientv3.OpGet(nk), clientv3.OpGet(hk), clientv3.OpGet(wk)).Commit()
	if err != nil {
		return unavailable(ctx, err, "%s %s (%s): reading its keys", what, c.where(), why)
	}
	var kv [3]*mvccpb.KeyValue
	for i := range kv {
		if kvs := tr.Responses[i].GetResponseRange().Kvs; len(kvs) > 0 {
			kv[i] = kvs[0]
		}
	}
	if err := c.check(ctx, kv[0], kv[1], kv[2]); err != nil {
		return err
	}
	return fmt.Errorf("%w: %s: %s", worker.ErrNotHeld, c.where(), why)
}

// check compares what etcd holds — the namespace record ns, the holder key
// and the high key hw, each nil when missing — with what the claim acquired
// and stored. It returns ErrReset (re-initialising the record when this
// claim is the first to see the loss), ErrNotHeld when the id is no longer
// this owner's on its lease, or nil when the claim still holds the id.
func (c *claim) check(ctx context.Context, ns, holder, hw *mvccpb.KeyValue) error {
	dcName := fmt.Sprintf("datacenter %d in %s", c.dc, c.w.prefix)
	var found string
	var old *coord.Record
	switch {
	case ns == nil:
		found = fmt.Sprintf("the namespace record of %s is gone (the prefix deleted, or a new etcd cluster)", dcName)
	default:
		rec, err := parseRecord(ns)
		if err != nil {
			return err
		}
		old = &rec
		switch {
		case rec.InitialisedMs < c.rec.InitialisedMs:
			found = fmt.Sprintf("the namespace record of %s was initialised at %s (incarnation %s), before the %s of the incarnation %s this holder acquired under: etcd went back to an older copy",
				dcName, coord.MsTime(rec.InitialisedMs).Format(stamp), rec.Incarnation, coord.MsTime(c.rec.InitialisedMs).Format(stamp), c.rec.Incarnation)
		case rec.Incarnation != c.rec.Incarnation:
			return fmt.Errorf("%w: the namespace record of %s was re-initialised at %s (incarnation %s, floor %s) after this holder acquired under incarnation %s of %s: its state was lost, and another node found it first",
				worker.ErrReset, dcName, coord.MsTime(rec.InitialisedMs).Format(stamp), rec.Incarnation, coord.MsTime(rec.FloorMs).Format(stamp),
				c.rec.Incarnation, coord.MsTime(c.rec.InitialisedMs).Format(stamp))
		case hw == nil:
			found = fmt.Sprintf("worker %d's high-water mark in %s is gone; this holder stored %s", c.id, dcName, coord.MsTime(c.maxMs).Format(stamp))
		default:
			ms, err := parseMs(hw.Value)
			if err != nil {
				return fmt.Errorf("%w: %s: %w", worker.ErrUnavailable, hw.Key, err)
			}
			if ms < c.maxMs {
				found = fmt.Sprintf("worker %d's high-water mark in %s is %s, below the %s this holder stored: etcd went back to an older copy",
					c.id, dcName, coord.MsTime(ms).Format(stamp), coord.MsTime(c.maxMs).Format(stamp))
			}
		}
	}
	if found != "" {
		return c.reinit(ctx, ns, old, found)
	}
	switch {
	case holder == nil:
		return fmt.Errorf("%w: %s is free (lease %x ended)", worker.ErrNotHeld, c.where(), int64(c.lease))
	case string(holder.Value) != c.owner || clientv3.LeaseID(holder.Lease) != c.lease:
		return fmt.Errorf("%w: %s is held by %q on lease %x, not by %q on lease %x", worker.ErrNotHeld, c.where(),
			holder.Value, holder.Lease, c.owner, int64(c.lease))
	}
	return nil
}

// reinit re-initialises the namespace record after a loss or rollback —
// guarded by the record still being what was found (oldKV, nil when
// missing) — without touching any slot, and returns the ErrReset that says
// what was found.
func (c *claim) reinit(ctx context.Context, oldKV *mvccpb.KeyValue, old *coord.Record, found string) error {
	nk, rk := c.w.keys().Namespace(c.dc), c.w.keys().Registration(c.dc)
	rec := coord.Reinit(old, c.contract, c.w.now().UnixMilli(), c.quarantine)
	cmp := clientv3.Compare(clientv3.CreateRevision(nk), "=", 0)
	if oldKV != nil {
		cmp = clientv3.Compare(clientv3.Value(nk), "=", string(oldKV.Value))
	}
	tr, err := c.w.client.Txn(ctx).If(cmp).Then(
		clientv3.OpPut(nk, string(rec.Encode())),
		clientv3.OpTxn(
			[]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(rk), "=", 0)},
			[]clientv3.Op{clientv3.OpPut(rk, c.w.registration(rec.Contract))}, nil),
	).Commit()
	switch {
	case err != nil:
		return fmt.Errorf("%w: %s; re-initialising the record failed: %w", worker.ErrReset, found,
			unavailable(ctx, err, "writing %s", nk))
	case !tr.Succeeded:
		return fmt.Errorf("%w: %s; another node re-initialised the record first", worker.ErrReset, found)
	}
	return fmt.Errorf("%w: %s; re-initialised the record as incarnation %s, floor %s (quarantine %v)",
		worker.ErrReset, found, rec.Incarnation, coord.MsTime(rec.FloorMs).Format(stamp), c.quarantine)
}
