package etcd

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
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

// Workers is a worker.Coordinator, worker.MarkLowerer and worker.Registry
// over etcd: protocol.Driver over the keys of one prefix. It is safe for
// concurrent use.
type Workers struct {
	*protocol.Driver
	client   *clientv3.Client
	prefix   string
	registry string
	owned    bool // Close closes the client: OpenWorkers made it

	mu   sync.Mutex
	ttls map[clientv3.LeaseID]int64 // the granted TTL of the leases this Workers holds, in seconds
}

// NewWorkers returns a coordinator that keeps its slots under prefix
// (DefaultPrefix when empty; a trailing "/" is dropped) through client. Its
// Close leaves the client open: closing it stays the caller's job.
func NewWorkers(client *clientv3.Client, prefix string) *Workers {
	return newWorkers(client, prefix, DefaultRegistry)
}

func newWorkers(client *clientv3.Client, prefix, registry string) *Workers {
	w := &Workers{client: client, prefix: strings.TrimRight(cmp.Or(prefix, DefaultPrefix), "/"), registry: registry,
		ttls: map[clientv3.LeaseID]int64{}}
	w.Driver = protocol.New(store{w})
	return w
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
// so is a prefix inside it. It checks that etcd answers, within ctx or
// DefaultDialTimeout when ctx has no deadline: an etcd that does not is
// reported as worker.ErrUnavailable. The *Workers owns the client it made:
// Close closes it.
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
		return nil, coord.Unavailable(ctx, err, "reading %s/ from etcd at %s", w.prefix, strings.Join(endpoints, ","))
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

// store is w as a protocol.Store; Workers does not implement it itself, so
// that its exported methods are the coordinator's.
type store struct{ w *Workers }

// version is what a Read saw, for Commit's compares: the revision, and the
// key-values of the datacenter, its registry entry and the space by key.
type version struct {
	rev int64
	kvs map[string]*mvccpb.KeyValue
}

func (s store) Names() protocol.Names {
	return protocol.Names{Registry: "the registry " + s.w.registry + " of this etcd", Namespace: s.w.prefix, Place: s.w.prefix, Store: "etcd"}
}

// Read implements protocol.Store: one range read of the datacenter, its
// registry entry and the space.
func (s store) Read(ctx context.Context, dc int64) (protocol.State, error) {
	k := s.w.keys()
	resp, err := s.w.client.Txn(ctx).Then(clientv3.OpGet(k.DC(dc), clientv3.WithPrefix()), clientv3.OpGet(k.Registration(dc)), clientv3.OpGet(k.Space())).Commit()
	if err != nil {
		return protocol.State{}, coord.Unavailable(ctx, err, "reading datacenter %d in %s", dc, s.w.prefix)
	}
	v := version{rev: resp.Header.Revision, kvs: map[string]*mvccpb.KeyValue{}}
	values := map[string][]byte{}
	for _, r := range resp.Responses {
		for _, kv := range r.GetResponseRange().Kvs {
			v.kvs[string(kv.Key)], values[string(kv.Key)] = kv, kv.Value
		}
	}
	st, err := k.Parse(dc, values, func(_ string, value []byte) (protocol.Slot, error) { return parseHolder(value) })
	st.Now, st.Sessions, st.Version = time.Now(), true, v
	return st, err
}

// parseHolder is a holder key's slot: JSON, or the owner token alone as an
// older flakeid wrote it.
func parseHolder(v []byte) (protocol.Slot, error) {
	sl := protocol.Slot{Holder: string(v)}
	if bytes.HasPrefix(v, []byte("{")) {
		sl = protocol.Slot{}
		dec := json.NewDecoder(bytes.NewReader(v))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&sl); err != nil {
			return sl, err
		}
	}
	if sl.Holder == "" || sl.HighMs != 0 {
		return sl, errors.New("no owner, or a mark in it")
	}
	return sl, nil
}

// holderValue is the holder key's value of slot sl.
func holderValue(sl protocol.Slot) string {
	sl.HighMs = 0
	b, _ := json.Marshal(sl) // cannot fail: strings and integers
	return string(b)
}

// Commit implements protocol.Store: one transaction guarded by the values
// read (see the package doc), with the leases its holder keys need.
func (s store) Commit(ctx context.Context, read, next protocol.State) error {
	k, v, dc := s.w.keys(), read.Version.(version), read.Datacenter
	var cmps []clientv3.Cmp
	var ops []clientv3.Op
	guard := func(key string) {
		kv := v.kvs[key]
		if kv == nil {
			cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(key), "=", 0))
			return
		}
		cmps = append(cmps, clientv3.Compare(clientv3.Value(key), "=", string(kv.Value)))
		if kv.Lease != 0 {
			cmps = append(cmps, clientv3.Compare(clientv3.LeaseValue(key), "=", kv.Lease))
		}
	}
	guard(k.Namespace(dc))
	guard(k.Registration(dc))
	guard(k.Space())
	if next.HasSpace && !read.HasSpace {
		ops = append(ops, clientv3.OpPut(k.Space(), next.Space))
	}
	switch {
	case next.Claim == read.Claim:
	case next.Claim.Namespace == "":
		ops = append(ops, clientv3.OpDelete(k.Registration(dc)))
	default:
		ops = append(ops, clientv3.OpPut(k.Registration(dc), string(coord.Registered(next))))
	}
	if next.Record != nil && (read.Record == nil || *next.Record != *read.Record) {
		ops = append(ops, clientv3.OpPut(k.Namespace(dc), string(next.Record.Encode())))
	}
	var granted, revoke []clientv3.LeaseID // leases to revoke if the commit fails, and if it lands
	var alive []clientv3.LeaseID           // leases to keep alive beside the transaction
	slotChanged := false
	for id, to := range next.Slots {
		from := read.Slots[id]
		if to == from {
			continue
		}
		slotChanged = true
		hk, wk := k.Holder(dc, id), k.High(dc, id)
		guard(hk)
		guard(wk)
		if to.HighMs != from.HighMs {
			ops = append(ops, clientv3.OpPut(wk, strconv.FormatInt(to.HighMs, 10)))
		}
		if to.Holder == "" && from.Holder == "" {
			continue
		}
		var old clientv3.LeaseID
		if kv := v.kvs[hk]; kv != nil {
			old = clientv3.LeaseID(kv.Lease)
		}
		if to.Holder == "" {
			ops = append(ops, clientv3.OpDelete(hk))
			revoke = append(revoke, old)
			continue
		}
		lease := old
		if to.Holder != from.Holder || to.Renewed {
			var err error
			var keep bool
			if lease, keep, err = s.lease(ctx, old, to.Holder == from.Holder, to.ExpiresMs-read.Now.UnixMilli()); err != nil {
				s.revoke(ctx, granted)
				return err
			}
			if keep {
				alive = append(alive, lease)
			}
		}
		if lease != old {
			granted, revoke = append(granted, lease), append(revoke, old)
		}
		if lease != old || to.Holder != from.Holder || to.ExpiresMs != from.ExpiresMs || to.ClockMs != from.ClockMs {
			ops = append(ops, clientv3.OpPut(hk, holderValue(to), clientv3.WithLease(lease)))
		}
	}
	if !slotChanged {
		cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(k.DC(dc)), "<", v.rev+1).WithPrefix())
	}
	// The keep-alives go beside the transaction, not before it: its
	// compares of the holder keys' leases fence it either way, and a lease
	// that turns out gone took its key with it (a lost race).
	kaErrs := make([]error, len(alive))
	var wg sync.WaitGroup
	for i, id := range alive {
		wg.Go(func() { _, kaErrs[i] = s.w.client.KeepAliveOnce(ctx, id) })
	}
	tr, err := s.w.client.Txn(ctx).If(cmps...).Then(ops...).Commit()
	wg.Wait()
	kaErr := errors.Join(kaErrs...)
	switch {
	case errors.Is(err, rpctypes.ErrLeaseNotFound) || errors.Is(kaErr, rpctypes.ErrLeaseNotFound):
		s.revoke(ctx, granted)
		return protocol.ErrConflict
	case err == nil && kaErr != nil:
		return coord.Unavailable(ctx, kaErr, "renewing the lease of a holder in datacenter %d in %s", dc, s.w.prefix)
	case err != nil:
		// The transaction may have been applied: revoking a new lease
		// frees its id again (a raised mark only errs on the safe side).
		s.revoke(ctx, granted)
		return coord.Unavailable(ctx, err, "writing datacenter %d in %s", dc, s.w.prefix)
	case !tr.Succeeded:
		s.revoke(ctx, granted)
		return protocol.ErrConflict
	}
	s.revoke(ctx, revoke)
	return nil
}

// lease is the lease a holder key goes on for ttlMs more: a renewal
// (renewing) keeps old (keep: the caller keeps it alive beside its
// transaction, its granted TTL being known), or moves to a new lease when
// ttlMs is longer than old's; a new holder gets a new lease. An old lease
// that is gone is a lost race: the key went with it.
func (s store) lease(ctx context.Context, old clientv3.LeaseID, renewing bool, ttlMs int64) (lease clientv3.LeaseID, keep bool, err error) {
	secs := max(1, (ttlMs+999)/1000)
	if renewing && old != clientv3.NoLease {
		s.w.mu.Lock()
		ttl, known := s.w.ttls[old]
		s.w.mu.Unlock()
		if known && ttl >= secs {
			return old, true, nil
		}
		ka, err := s.w.client.KeepAliveOnce(ctx, old)
		switch {
		case errors.Is(err, rpctypes.ErrLeaseNotFound):
			return 0, false, protocol.ErrConflict
		case err != nil:
			return 0, false, coord.Unavailable(ctx, err, "renewing lease %x in %s", int64(old), s.w.prefix)
		case ka.TTL >= secs:
			return old, false, nil
		}
	}
	g, err := s.w.client.Grant(ctx, secs)
	if err != nil {
		return 0, false, coord.Unavailable(ctx, err, "granting a %ds lease in %s", secs, s.w.prefix)
	}
	s.w.mu.Lock()
	s.w.ttls[g.ID] = g.TTL
	s.w.mu.Unlock()
	return g.ID, false, nil
}

// revoke revokes leases that hold nothing of ours (any more), on a
// best-effort basis: a lease left behind only lapses after its TTL, and the
// id its holder key names stays taken until then. When ctx has ended the
// revocation goes on in the background for a little while, so that the
// caller still returns by its deadline.
func (s store) revoke(ctx context.Context, ids []clientv3.LeaseID) {
	for _, id := range ids {
		if id == clientv3.NoLease {
			continue
		}
		s.w.mu.Lock()
		delete(s.w.ttls, id)
		s.w.mu.Unlock()
		if ctx.Err() == nil {
			_, _ = s.w.client.Revoke(ctx, id)
			continue
		}
		go func() {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			defer cancel()
			_, _ = s.w.client.Revoke(ctx, id)
		}()
	}
}

// Claims implements protocol.ClaimsReader: the keys under the registry
// prefix.
func (s store) Claims(ctx context.Context) (worker.Claims, error) {
	resp, err := s.w.client.Get(ctx, s.w.registry+"/", clientv3.WithPrefix())
	if err != nil {
		return worker.Claims{}, coord.Unavailable(ctx, err, "reading the registry %s", s.w.registry)
	}
	entries := make([]coord.Entry, len(resp.Kvs))
	for i, kv := range resp.Kvs {
		entries[i] = coord.Entry{Key: string(kv.Key), Value: kv.Value}
	}
	return coord.ParseClaims(s.w.keys(), entries)
}
