package consul

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	consulapi "github.com/hashicorp/consul/api"

	"github.com/flakeid/flakeid/backend/internal/coord"
	"github.com/flakeid/flakeid/worker"
	"github.com/flakeid/flakeid/worker/protocol"
)

// DefaultPrefix is the key prefix when the URL has no path, or NewWorkers is
// given "".
const DefaultPrefix = "flakeid/workers"

// DefaultRegistry is the key prefix of the datacenter registry: one per
// Consul cluster (datacenter), shared by every namespace (key prefix) on it.
const DefaultRegistry = "flakeid/datacenters"

// Workers is a worker.Coordinator, worker.MarkLowerer and worker.Registry
// over Consul: protocol.Driver over the keys of one prefix. It is safe for
// concurrent use.
type Workers struct {
	*protocol.Driver
	client    *consulapi.Client
	prefix    string
	registry  string
	lockDelay time.Duration
	transport *http.Transport // OpenWorkers's: Close closes its idle connections; nil from NewWorkers

	mu      sync.Mutex
	ttls    map[string]time.Duration // the TTL of the sessions this Workers made and holds
	delayed map[[2]int64]time.Time   // (datacenter, worker id) in a lock-delay, until when

	// afterRead, when set (by tests), sees and may change the keys a Read
	// found before it parses them.
	afterRead func(kvs map[string]*consulapi.KVPair)
}

// NewWorkers returns a coordinator that keeps its slots under prefix
// (DefaultPrefix when empty; leading and trailing "/" are dropped) through
// client. Its Close leaves the client alone.
func NewWorkers(client *consulapi.Client, prefix string, opts ...Option) *Workers {
	prefix = strings.Trim(prefix, "/")
	if prefix == "" {
		prefix = DefaultPrefix
	}
	w := &Workers{client: client, prefix: prefix, registry: DefaultRegistry, lockDelay: DefaultLockDelay,
		ttls: map[string]time.Duration{}, delayed: map[[2]int64]time.Time{}}
	for _, o := range opts {
		o(w)
	}
	w.Driver = protocol.New(store{w})
	return w
}

// Close closes the idle connections of a Workers from OpenWorkers; a Workers
// from NewWorkers leaves its client alone. Claims are not released.
func (w *Workers) Close() error {
	if w.transport != nil {
		w.transport.CloseIdleConnections()
	}
	return nil
}

// Prefix is the key prefix, without leading or trailing "/".
func (w *Workers) Prefix() string { return w.prefix }

// Registry is the key prefix of the datacenter registry, without leading or
// trailing "/".
func (w *Workers) Registry() string { return w.registry }

// keys names this coordinator's keys.
func (w *Workers) keys() coord.KVKeys { return coord.KVKeys{Prefix: w.prefix, Registry: w.registry} }

func qo(ctx context.Context) *consulapi.QueryOptions {
	return (&consulapi.QueryOptions{}).WithContext(ctx)
}
func wo(ctx context.Context) *consulapi.WriteOptions {
	return (&consulapi.WriteOptions{}).WithContext(ctx)
}

// store is w as a protocol.Store; Workers does not implement it itself, so
// that its exported methods are the coordinator's.
type store struct{ w *Workers }

// version is what a Read found, for Commit's checks: the keys that exist,
// by key.
type version map[string]*consulapi.KVPair

// holderValue is the value of a holder key. Owner and TTLMs are what an
// older flakeid reads.
type holderValue struct {
	Owner     string `json:"owner"`
	TTLMs     int64  `json:"ttl_ms"`
	ExpiresMs int64  `json:"expires_ms,omitempty"`
	ClockMs   int64  `json:"clock_ms,omitempty"`
}

func (s store) Names() protocol.Names {
	return protocol.Names{Registry: "the registry " + s.w.registry + " of this Consul", Namespace: s.w.prefix, Place: s.w.prefix, Store: "Consul"}
}

// PeerAge implements protocol.PeerAger: a live peer's holder key was
// written at most a lease TTL before its session's last renewal, and Consul
// keeps the session up to twice its TTL after that.
func (s store) PeerAge(ttl time.Duration) time.Duration { return ttl + 2*wholeSeconds(ttl) }

// Read implements protocol.Store: one read-only transaction of the
// datacenter's keys, its registry entry and the space.
func (s store) Read(ctx context.Context, dc int64) (protocol.State, error) {
	k := s.w.keys()
	var b txnb
	b.add(consulapi.KVGetOrEmpty, k.Registration(dc), nil, 0, "")
	b.add(consulapi.KVGetOrEmpty, k.Space(), nil, 0, "")
	b.add(consulapi.KVGetTree, k.DC(dc), nil, 0, "")
	ok, resp, err := s.w.run(ctx, &b)
	switch {
	case err != nil:
		return protocol.State{}, coord.Unavailable(ctx, err, "reading datacenter %d in %s", dc, s.w.prefix)
	case !ok:
		return protocol.State{}, fmt.Errorf("%w: reading datacenter %d in %s: %s", worker.ErrUnavailable, dc, s.w.prefix, txnErrors(resp))
	}
	v, values := version{}, map[string][]byte{}
	for _, r := range resp.Results {
		if r != nil && r.KV != nil && r.KV.ModifyIndex != 0 {
			v[r.KV.Key] = r.KV
		}
	}
	if s.w.afterRead != nil {
		s.w.afterRead(v)
	}
	for key, kv := range v {
		values[key] = kv.Value
	}
	st, err := k.Parse(dc, values, func(key string, value []byte) (protocol.Slot, error) {
		var h holderValue
		dec := json.NewDecoder(bytes.NewReader(value))
		dec.DisallowUnknownFields()
		switch err := dec.Decode(&h); {
		case err != nil || h.Owner == "" || h.TTLMs <= 0:
			return protocol.Slot{}, cmp.Or(err, errors.New("no owner or TTL"))
		case v[key].Session == "":
			return protocol.Slot{}, nil // a holder key no session locks is stale: free
		}
		return protocol.Slot{Holder: h.Owner, ExpiresMs: h.ExpiresMs, ClockMs: h.ClockMs}, nil
	})
	st.Now, st.Sessions, st.Version, st.Delayed = time.Now(), true, v, s.w.delayedIn(dc)
	return st, err
}

// delayedIn is the worker ids of datacenter dc that a commit found in their
// lock-delay, while it lasts.
func (w *Workers) delayedIn(dc int64) map[int64]bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	ids := map[int64]bool{}
	for k, until := range w.delayed {
		if time.Now().After(until) {
			delete(w.delayed, k)
		} else if k[0] == dc {
			ids[k[1]] = true
		}
	}
	return ids
}

// write is a key a Commit writes: its value, the index of its result, and
// whether it is a holder key locked by a session made for the commit.
type write struct {
	value []byte
	at    int
	taken bool
}

// Commit implements protocol.Store: one transaction guarded by the indexes
// read, whose values it compares afterwards (see the package doc), with the
// sessions its holder keys need; freeing the datacenter takes two steps
// (unclaim).
func (s store) Commit(ctx context.Context, read, next protocol.State) error {
	if read.Claim.Namespace != "" && next.Claim.Namespace == "" {
		return s.unclaim(ctx, read)
	}
	k, v, dc := s.w.keys(), read.Version.(version), read.Datacenter
	var b txnb
	gets, wrote := map[string]int{}, map[string]write{}
	var made, ended, alive []string // sessions made for the commit, to destroy once it landed, to renew beside it
	guard := func(key string) {
		if kv := v[key]; kv == nil {
			b.add(consulapi.KVCheckNotExists, key, nil, 0, "")
		} else {
			b.add(consulapi.KVCheckIndex, key, nil, kv.ModifyIndex, "")
			gets[key] = b.add(consulapi.KVGet, key, nil, 0, "")
		}
	}
	put := func(verb consulapi.KVOp, key string, value []byte, session string) {
		wrote[key] = write{value, b.add(verb, key, value, 0, session), verb == consulapi.KVLock && !slices.Contains(alive, session)}
	}
	guard(k.Namespace(dc))
	guard(k.Registration(dc))
	guard(k.Space())
	if next.HasSpace && !read.HasSpace {
		put(consulapi.KVSet, k.Space(), []byte(next.Space), "")
	}
	if next.Claim != read.Claim {
		put(consulapi.KVSet, k.Registration(dc), coord.Registered(next), "")
	}
	if next.Record != nil && (read.Record == nil || *next.Record != *read.Record) {
		put(consulapi.KVSet, k.Namespace(dc), next.Record.Encode(), "")
	}
	var takenIDs []int64
	for id, to := range next.Slots {
		from := read.Slots[id]
		if to == from {
			continue
		}
		hk, wk := k.Holder(dc, id), k.High(dc, id)
		guard(hk)
		guard(wk)
		if to.HighMs != from.HighMs {
			put(consulapi.KVSet, wk, []byte(strconv.FormatInt(to.HighMs, 10)), "")
		}
		old := ""
		if kv := v[hk]; kv != nil {
			old = kv.Session
		}
		switch {
		case to.Holder == "" && from.Holder == "":
			continue
		case to.Holder == "":
			b.add(consulapi.KVDelete, hk, nil, 0, "")
			ended = append(ended, old)
			continue
		}
		ttl := time.Duration(to.ExpiresMs-read.Now.UnixMilli()) * time.Millisecond
		session, keep, err := s.session(ctx, old, to.Holder == from.Holder, ttl, fmt.Sprintf("flakeid %s/%d %s", s.w.prefix, dc, to.Holder))
		if err != nil {
			s.w.destroy(ctx, made...)
			return err
		}
		if keep {
			alive = append(alive, session)
		}
		if session != old {
			made = append(made, session)
			if to.Holder != from.Holder {
				takenIDs = append(takenIDs, id)
			}
			if old != "" {
				b.add(consulapi.KVUnlock, hk, nil, 0, old)
				ended = append(ended, old)
			}
		}
		h, _ := json.Marshal(holderValue{Owner: to.Holder, TTLMs: ttl.Milliseconds(), ExpiresMs: to.ExpiresMs, ClockMs: to.ClockMs}) // cannot fail
		put(consulapi.KVLock, hk, h, session)
	}
	// The renewals go beside the transaction: its lock of the holder key
	// fails if the session is gone (a lost race), and a session that ends
	// after it took the key with it.
	renewErrs := make([]error, len(alive))
	var wg sync.WaitGroup
	for i, id := range alive {
		wg.Go(func() {
			if entry, _, err := s.w.client.Session().Renew(id, wo(ctx)); err != nil || entry == nil {
				renewErrs[i] = cmp.Or(err, protocol.ErrConflict) // nil: the session is gone
			}
		})
	}
	ok, resp, err := s.w.run(ctx, &b)
	wg.Wait()
	switch {
	case err != nil:
		// The transaction may have been applied: destroying its sessions
		// frees the ids again (a raised mark only errs on the safe side).
		s.w.destroy(ctx, made...)
		return coord.Unavailable(ctx, err, "writing datacenter %d in %s", dc, s.w.prefix)
	case !ok:
		s.w.destroy(ctx, made...)
		if txnSays(resp, "Permission denied") || txnSays(resp, "ACL not found") {
			return fmt.Errorf("%w: writing datacenter %d in %s: %s", worker.ErrUnavailable, dc, s.w.prefix, txnErrors(resp))
		}
		if txnSays(resp, "lock delay") {
			s.w.delay(dc, takenIDs)
		}
		return protocol.ErrConflict
	case errors.Is(errors.Join(renewErrs...), protocol.ErrConflict):
		return protocol.ErrConflict
	case errors.Join(renewErrs...) != nil:
		return coord.Unavailable(ctx, errors.Join(renewErrs...), "renewing the session of a holder in datacenter %d in %s", dc, s.w.prefix)
	}
	for key, i := range gets {
		if now := resp.Results[i].KV; now == nil || !bytes.Equal(now.Value, v[key].Value) || now.Session != v[key].Session {
			// An index matched another value: Consul lost its data since
			// the read and counted up to the same indexes again.
			err := s.undo(ctx, dc, resp, v, gets, wrote)
			s.w.destroy(ctx, made...)
			return cmp.Or(err, protocol.ErrConflict)
		}
	}
	s.w.destroy(ctx, ended...)
	return nil
}

// undo takes back what a commit wrote on values it had not read (resp its
// results): the higher mark goes back up, the holder keys it locked with
// new sessions are deleted, and a record, registry entry or space
// it overwrote is put back.
func (s store) undo(ctx context.Context, dc int64, resp *consulapi.TxnResponse, v version, gets map[string]int, wrote map[string]write) error {
	var b txnb
	for key, w := range wrote {
		mine := resp.Results[w.at].KV.ModifyIndex
		gi, guarded := gets[key]
		if w.taken {
			b.add(consulapi.KVDeleteCAS, key, nil, mine, "")
			continue
		}
		before := resp.Results[gi].KV
		if !guarded || strings.HasSuffix(key, "/holder") || bytes.Equal(before.Value, v[key].Value) {
			continue // it was absent, or what it was read as: what was written stands
		}
		value := before.Value
		if strings.HasSuffix(key, "/high") {
			was, _ := strconv.ParseInt(string(before.Value), 10, 64)
			wrote, _ := strconv.ParseInt(string(w.value), 10, 64)
			value = []byte(strconv.FormatInt(max(was, wrote), 10))
		}
		b.add(consulapi.KVCAS, key, value, mine, "")
	}
	if ok, resp, err := s.w.run(ctx, &b); err != nil || !ok {
		return fmt.Errorf("%w: datacenter %d in %s: Consul lost its data during a commit, and undoing it failed: %v %s",
			worker.ErrUnavailable, dc, s.w.prefix, err, txnErrors(resp))
	}
	return nil
}

// delay notes that worker ids of datacenter dc are in their lock-delay.
func (w *Workers) delay(dc int64, ids []int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, id := range ids {
		w.delayed[[2]int64{dc, id}] = time.Now().Add(w.lockDelay)
	}
}

// session is the session a holder key goes on for ttl more: a renewal
// (renewing) keeps old (keep: the caller renews it beside its
// transaction), or moves to a new session when ttl is longer than old's or
// old is not one this Workers made (restored from a snapshot); a new holder
// gets a new session, named name.
func (s store) session(ctx context.Context, old string, renewing bool, ttl time.Duration, name string) (session string, keep bool, err error) {
	s.w.mu.Lock()
	got, known := s.w.ttls[old]
	s.w.mu.Unlock()
	if renewing && known && got >= wholeSeconds(ttl) {
		return old, true, nil
	}
	session, _, err = s.w.createSession(ctx, ttl, name)
	return session, false, err
}

// unclaim frees datacenter read.Datacenter, as read, in two steps: it marks
// the registry entry as being freed (a check-and-set on the index read),
// reads the datacenter again, and deletes the entry if nothing else changed
// — or puts it back (a lost race: the driver decides again).
func (s store) unclaim(ctx context.Context, read protocol.State) error {
	dc, rk := read.Datacenter, s.w.keys().Registration(read.Datacenter)
	kv := read.Version.(version)[rk]
	r, err := coord.ParseRegistration(rk, kv.Value)
	if err != nil {
		return err
	}
	r.Freeing = true
	switch ok, _, err := s.w.client.KV().CAS(&consulapi.KVPair{Key: rk, Value: r.Encode(), ModifyIndex: kv.ModifyIndex}, wo(ctx)); {
	case err != nil:
		return coord.Unavailable(ctx, err, "marking the registry entry %s as being freed", rk)
	case !ok:
		return protocol.ErrConflict
	}
	again, err := s.Read(ctx, dc)
	if err != nil {
		return fmt.Errorf("%w (the registry entry %s is left marked as being freed: free the datacenter again)", err, rk)
	}
	marked := again.Version.(version)[rk]
	if marked == nil {
		return protocol.ErrConflict
	}
	want := read
	want.Claim.Freeing = true
	if protocol.Same(want, again) {
		ok, _, err := s.w.client.KV().DeleteCAS(marked, wo(ctx))
		switch {
		case err != nil:
			return coord.Unavailable(ctx, err, "deleting the registry entry %s", rk)
		case ok:
			return nil
		}
	}
	if ok, _, err := s.w.client.KV().CAS(&consulapi.KVPair{Key: rk, Value: kv.Value, ModifyIndex: marked.ModifyIndex}, wo(ctx)); err != nil || !ok {
		return fmt.Errorf("%w: datacenter %d in %s changed while it was being freed, and putting its registry entry %s back failed (%v): free it again, or restore the entry by hand",
			worker.ErrUnavailable, dc, s.w.prefix, rk, err)
	}
	return protocol.ErrConflict
}

// Claims implements protocol.ClaimsReader: the keys under the registry
// prefix.
func (s store) Claims(ctx context.Context) (worker.Claims, error) {
	kvs, _, err := s.w.client.KV().List(s.w.registry+"/", qo(ctx))
	if err != nil {
		return worker.Claims{}, coord.Unavailable(ctx, err, "reading the registry %s", s.w.registry)
	}
	entries := make([]coord.Entry, 0, len(kvs))
	for _, kv := range kvs {
		entries = append(entries, coord.Entry{Key: kv.Key, Value: kv.Value})
	}
	return coord.ParseClaims(s.w.keys(), entries)
}

// txnb builds a transaction and knows where each operation's result lands:
// Consul returns results only for the operations that yield an entry, in
// order (checks that pass without one, and deletes, yield nothing).
type txnb struct {
	ops consulapi.TxnOps
	n   int // results so far
}

// add appends an operation and returns the index of its result, or -1 when
// it has none. A get-tree yields any number of results, from the returned
// index on: it must be the last operation.
func (b *txnb) add(verb consulapi.KVOp, key string, value []byte, index uint64, session string) int {
	b.ops = append(b.ops, &consulapi.TxnOp{KV: &consulapi.KVTxnOp{Verb: verb, Key: key, Value: value, Index: index, Session: session}})
	switch verb {
	case consulapi.KVCheckNotExists, consulapi.KVDelete, consulapi.KVDeleteCAS, consulapi.KVDeleteTree:
		return -1
	case consulapi.KVGetTree:
		return b.n
	}
	b.n++
	return b.n - 1
}

// run sends the transaction: ok is false, with the errors Consul gave, when
// it was rolled back.
func (w *Workers) run(ctx context.Context, b *txnb) (bool, *consulapi.TxnResponse, error) {
	ok, resp, _, err := w.client.Txn().Txn(b.ops, qo(ctx))
	if err == nil && resp == nil {
		err = errors.New("empty transaction response")
	}
	return ok, resp, err
}

// txnErrors formats a rolled-back transaction's errors.
func txnErrors(resp *consulapi.TxnResponse) string {
	if resp == nil || len(resp.Errors) == 0 {
		return "rolled back without errors"
	}
	parts := make([]string, 0, len(resp.Errors))
	for _, e := range resp.Errors {
		parts = append(parts, fmt.Sprintf("op %d: %s", e.OpIndex, e.What))
	}
	return strings.Join(parts, "; ")
}

// txnSays reports whether one of a rolled-back transaction's errors
// contains s.
func txnSays(resp *consulapi.TxnResponse, s string) bool {
	for _, e := range resp.Errors {
		if e != nil && strings.Contains(e.What, s) {
			return true
		}
	}
	return false
}

// wholeSeconds is d rounded up to whole seconds, at least 1s.
func wholeSeconds(d time.Duration) time.Duration {
	return max(time.Second, (d+time.Second-1)/time.Second*time.Second)
}

// createSession creates the session of a lease of the given TTL (the
// lease's, in whole seconds) with behavior delete, the coordinator's
// lock-delay and no health checks, and returns its id and TTL. The body is
// written out rather than through Session().Create, which leaves out empty
// check lists (so the agent adds its serfHealth check) and a zero
// lock-delay (so the agent applies its 15s default).
func (w *Workers) createSession(ctx context.Context, lease time.Duration, name string) (string, time.Duration, error) {
	ttl := wholeSeconds(lease)
	body := map[string]any{
		"Name":          name,
		"TTL":           fmt.Sprintf("%ds", int64(ttl/time.Second)),
		"Behavior":      consulapi.SessionBehaviorDelete,
		"LockDelay":     fmt.Sprintf("%dms", w.lockDelay.Milliseconds()),
		"NodeChecks":    []string{},
		"ServiceChecks": []consulapi.ServiceCheck{},
	}
	var out struct{ ID string }
	_, err := w.client.Raw().Write("/v1/session/create", body, &out, wo(ctx))
	var se consulapi.StatusError
	switch {
	case errors.As(err, &se) && strings.Contains(se.Body, "Invalid Session TTL"):
		return "", 0, fmt.Errorf("%w: the Consul agent refuses a %v session for a lease TTL of %v (%s); "+
			"Consul servers refuse TTLs below their session_ttl_min, 10s unless configured: use a lease TTL of at least that",
			worker.ErrInvalidConfig, ttl, lease, se.Body)
	case err != nil:
		return "", 0, coord.Unavailable(ctx, err, "creating a %v session for %s", ttl, w.prefix)
	case out.ID == "":
		return "", 0, fmt.Errorf("%w: creating a %v session for %s: the agent returned no session id", worker.ErrUnavailable, ttl, w.prefix)
	}
	w.mu.Lock()
	w.ttls[out.ID] = ttl
	w.mu.Unlock()
	return out.ID, ttl, nil
}

// destroy destroys sessions that hold nothing of ours (any more), on a
// best-effort basis: a session left behind only lapses after its TTL (up to
// twice that), and the keys it locks stay until then. When ctx has ended
// the destruction goes on in the background for a little while, so that
// the caller still returns by its deadline.
func (w *Workers) destroy(ctx context.Context, ids ...string) {
	for _, id := range ids {
		if id == "" {
			continue
		}
		w.mu.Lock()
		delete(w.ttls, id)
		w.mu.Unlock()
		if ctx.Err() == nil {
			if _, err := w.client.Session().Destroy(id, wo(ctx)); err == nil {
				continue
			}
		}
		go func() {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			defer cancel()
			_, _ = w.client.Session().Destroy(id, wo(ctx))
		}()
	}
}
