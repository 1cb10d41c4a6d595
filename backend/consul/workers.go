// Package consul is the worker-id coordinator for a cluster of nodes that
// share a Consul cluster (HTTP API; tested against Consul 1.22 with the
// github.com/hashicorp/consul/api client).
//
// # Configuration
//
// Point every node of a cluster at the same Consul agent address (its local
// agent, or the servers) and the same key prefix, with a coordinator URL
// (the --coordinator flag of the flakeid command):
//
//	consul://host:port[/prefix][?lock_delay=D&token=T]
//	consuls://host:port[/prefix][?…]   (HTTPS)
//
// opened by OpenWorkers:
//
//	u, err := url.Parse("consul://127.0.0.1:8500/flakeid/workers")
//	if err != nil { … }
//	w, err := consul.OpenWorkers(ctx, u)
//	if err != nil { … }
//	defer w.Close()
//	leaser, err := worker.NewLeaser(w, worker.Config{Datacenter: 1})
//
// OpenWorkers starts from consulapi.DefaultConfig, so the standard
// CONSUL_HTTP_* environment variables (token, token file, TLS files, basic
// auth) apply; the URL's address and token win over the environment. An
// application that already has a *consulapi.Client wraps it with NewWorkers.
// Consul KV keys have no leading "/": prefixes are given without one
// (leading and trailing "/" are dropped). Clusters that must never share
// worker ids use distinct prefixes or distinct datacenter ids.
//
// # Keys
//
// A namespace is a key prefix. Each datacenter used in it has
//
//	<prefix>/<datacenter>/namespace        the namespace record (JSON), no session
//	<prefix>/<datacenter>/<worker>/holder  {"owner", "ttl_ms"}, locked by the claim's session
//	<prefix>/<datacenter>/<worker>/high    the high-water mark, decimal Unix ms, no session
//	<prefix>/<datacenter>/clock/<worker>   the holder's clock, Unix ms, locked by the claim's session
//
// and the Consul cluster as a whole has one datacenter registry, under
// DefaultRegistry, shared by every prefix:
//
//	<registry>/<datacenter>                {"namespace": prefix, "contract": …}, no session
//
// The namespace record is {"incarnation", "contract", "floor_ms",
// "initialised_ms"} (see worker.Namespace): a random incarnation, the
// ID-space contract of the first holder, and the time it was initialised and
// a floor, both by the initialising node's clock (Consul has no clock a
// client can read: see Clock). The registry maps a datacenter id to the
// namespace that claimed it first; another prefix's Acquire of that
// datacenter fails with worker.ErrContract. flakeid never deletes registry
// entries (`consul kv delete` removes one when a datacenter id is retired).
//
// # Sessions are leases
//
// Each claim has its own Consul session, with Behavior = delete, no health
// checks (NodeChecks and ServiceChecks sent empty: a session tied to the
// agent's serfHealth check would be ended by the agent's health, not by the
// TTL), and a lock-delay (WithLockDelay, DefaultLockDelay). The holder and
// clock keys are locked by the session, so they exist exactly while it
// does: when Consul invalidates the session it deletes them, and refuses to
// lock them again for the lock-delay.
//
// A lease of TTL T gets a session of TTL T (rounded up to whole seconds).
// Consul treats a session TTL as a lower bound: it never ends a session
// sooner than the TTL after the last renewal it received, and may keep it up
// to about twice as long (the servers multiply it by 2, and restart the
// timers at the full 2×TTL when a new leader is elected). The holder itself
// stops issuing T minus worker.Config.SafetyMargin after its last successful
// renewal was sent (worker.Leaser does that) — before Consul can have freed
// the id, on Consul's documented lower bound alone. Another node can lock
// the holder key only once Consul invalidated the session and the
// lock-delay passed:
//
//	failover ≤ 2×T + lock-delay after the holder's last renewal
//
// (with the defaults — TTL 10s, lock-delay 1s — at most 21s; at least T +
// lock-delay). A shorter session (T/2, which Consul's factor of 2 would
// stretch to T) would fail over faster but rest on that undocumented factor,
// so it is not done. Agents refuse TTLs below their session_ttl_min (10s
// unless configured; the tests' agent is started with 1s): Acquire then fails
// with worker.ErrInvalidConfig quoting the agent, so production leases need
// TTL ≥ 10s.
//
// Consul's own default lock-delay is 15s; it exists for holders that cannot
// stop in time. A flakeid holder has stopped at its own deadline before
// Consul invalidates its session, and is fenced by the high-water mark
// besides, so a short lock-delay loses nothing; operators may raise it
// (lock_delay=, at most Consul's 60s).
//
// # Atomicity and fencing
//
// Acquire reads the datacenter's keys and its registry entry in one read-only
// transaction, refuses a request whose contract differs from the record's or
// whose datacenter another namespace claimed (both sides in the error,
// nothing written), picks a free id (never used, released or expired; among
// them the lowest one whose high-water mark has passed, else the one with
// the smallest mark), creates a session, and claims the id in one
// transaction:
//
//	check-index(record) and get(record)        or  check-not-exists + set(record)
//	check-index(registry) and get(registry)    or  check-not-exists + set(registry)
//	check-not-exists(holder)                   (or check-index of an unlocked, stale holder key)
//	lock(holder, session)
//	get(high) and cas(high, max(read, reserve), index read)  or  cas(high, …, 0): create
//	delete(clock), lock(clock = the node's clock, session)
//	get-tree(clock/)                           the peers' clocks
//
// Consul's indexes are exact within one history of the cluster, but start
// again from 1 when a cluster loses its data (a dev agent restarts, servers
// are rebuilt), so an index read before such a loss may name another value
// after it. Values cannot coincide (the incarnation is random): the
// transaction also returns the values the record, registry entry and mark
// held before it wrote, and Acquire compares them with what it read. On a
// difference it puts the higher mark back while it still holds the id, frees
// the id, and starts over. A lost race (another node took the id, changed the
// mark or the record) is retried on a fresh read; each lost race is an id
// another node won, and an id waiting out its lock-delay counts as held.
// An unused session is destroyed.
//
// Renew renews the session (Consul answers "not found" for a session that
// ended: then the keys decide, see below) and raises the mark in a
// transaction guarded by
//
//	check-session(holder, our session), check-index(record, index acquired under),
//	cas(high, new, index last written) or check-index(high, …),
//	lock(clock = the node's clock, our session), get(record)
//
// whose returned record value is compared with the claim's. A holder whose
// session ended — even one whose requests were held in the network and
// arrive late — can no longer write anything: its session is gone, and a
// session id (a random UUID) never comes back in a cluster that lost its
// data. Release runs the same guarded transaction to raise the mark and
// delete the holder and clock keys, then destroys the session (keys deleted
// first leave no lock-delay behind). A Renew with a TTL longer than the
// session's moves the holder and clock keys to a new session of that TTL in
// the same guarded way.
//
// # Lost and rolled-back state
//
// When the guarded transaction fails, or the session renewal finds the
// session gone, Renew and Release read the record, holder, high and registry
// keys and decide, before looking at the holder:
//
//   - The record is gone: the prefix was deleted (`consul kv delete
//     -recurse`), or the Consul cluster lost its data.
//   - The record was initialised before the one the claim acquired under,
//     or it is the same incarnation but the claim's high key is gone or
//     below the highest mark the claim stored: Consul went back to an older
//     copy (`consul snapshot restore` brings back the old sessions too, so
//     the session checks may well pass: the values are what tell).
//
// In these cases the record is re-initialised — a new incarnation, the
// record's contract (the claim's when there is none), initialised now by
// this node's clock, floor = max(old floor, now + the claim's quarantine),
// the registry entry recreated when missing — guarded by the record still
// being missing or the same, no slot is touched, and the call fails with
// worker.ErrReset saying what was found. A record with another, later
// incarnation means another node already did so: ErrReset, nothing written.
// Otherwise the holder key decides (worker.ErrNotHeld when it is missing or
// locked by another session), or the mark was raised by someone else and the
// transaction is retried from what is stored.
//
// # Clock
//
// Consul has no clock a client can read (the Date header comes from the
// agent asked, usually the node's own machine), so the coordinator's clock is
// the datacenter's live peers', as in Meituan Leaf's peer check and
// backend/etcd: every holder writes its node's clock to its clock key —
// req.Now at Acquire, reserve − (req.Reserve − req.Now) at each Renew, or the
// local clock when the request has no Now — locked by its session, so the
// key vanishes with the holder. Claim.Clock reports the newest value among
// the other live holders of the datacenter, read in the Acquire transaction
// and re-read in every tenth renewal (advanced by the time passed in
// between), with stale = the lease TTL + twice the session TTL, plus the
// round trips: a live peer's key was written by a renewal at most a lease
// TTL before the peer's last session renewal (a holder gives up one TTL
// after its last successful renewal; peers are expected to share the TTL),
// and Consul keeps the session, and so the key, up to twice its TTL after
// that. (backend/etcd uses the TTL alone; a key that Consul keeps alive
// longer is older, and a smaller stale would take a node for ahead of a
// dead peer's clock.) The zero time means no other holder is live.
//
// # Listing
//
// List reports each slot's holder (the owner token), high-water mark, and,
// while a session locks the holder key, Expires = now + the lease TTL (kept
// in the holder key), by the listing node's clock: the id is held now, and
// Consul does not say when the session was last renewed, so this is the
// latest time the holder itself may still be issuing without a renewal that
// List cannot see. Consul may keep the key up to twice the TTL after the
// holder's last renewal, and the lock-delay passes after that. (The holder's
// clock key is not used: node clocks differ from the lister's by up to
// worker.Config.MaxClockSkew.) A holder key no session locks is reported as
// expired now.
//
// # Errors
//
// Every error wraps one of worker's sentinels: ErrExhausted (saying how many
// ids are held), ErrNotHeld, ErrReset, ErrContract, ErrInvalidConfig, or
// ErrUnavailable for a Consul that cannot be reached or answers with an
// error; the context's error stays visible to errors.Is. Errors name the
// prefix, the datacenter and what was found. As with any remote store, a
// write that failed as unavailable may still have been applied.
package consul

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/url"
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

// DefaultDialTimeout bounds OpenWorkers's check when its context has no
// deadline.
const DefaultDialTimeout = 5 * time.Second

// DefaultLockDelay is the lock-delay of the coordinator's sessions unless
// WithLockDelay says otherwise (Consul's own default is 15s; see the package
// documentation).
const DefaultLockDelay = time.Second

// maxLockDelay is the longest lock-delay Consul applies (structs.MaxLockDelay).
const maxLockDelay = 60 * time.Second

// maxAttempts is how many times a guarded write re-reads a high-water mark
// that changed under it. (Acquire retries as long as other nodes win the ids
// it picks: see there.)
const maxAttempts = 8

// peerReadEvery: Renew re-reads the peers' clocks once every this many
// renewals.
const peerReadEvery = 10

// stamp formats the times in errors.
const stamp = "2006-01-02T15:04:05.000Z07:00"

// Workers is a worker.Coordinator over Consul. It is safe for concurrent
// use.
type Workers struct {
	client    *consulapi.Client
	prefix    string
	registry  string
	lockDelay time.Duration
	transport *http.Transport // OpenWorkers's: Close closes its idle connections; nil from NewWorkers
	now       func() time.Time

	// afterRead, when set (by tests), sees and may change what Acquire
	// read before it picks an id.
	afterRead func(reg *consulapi.KVPair, kvs []*consulapi.KVPair)
}

var (
	_ worker.Coordinator = (*Workers)(nil)
	_ worker.Registry    = (*Workers)(nil)
	_ worker.MarkLowerer = (*Workers)(nil)
)

// An Option configures OpenWorkers and NewWorkers.
type Option func(*Workers)

// WithLockDelay sets the lock-delay of the sessions the coordinator creates
// (default DefaultLockDelay): after Consul invalidates a holder's session, no
// node can take its worker id for this long. Negative means 0; Consul caps it
// at 60s.
func WithLockDelay(d time.Duration) Option {
	return func(w *Workers) { w.lockDelay = max(d, 0) }
}

// NewWorkers returns a coordinator that keeps its slots under prefix
// (DefaultPrefix when empty; leading and trailing "/" are dropped) through
// client. Its Close leaves the client alone.
func NewWorkers(client *consulapi.Client, prefix string, opts ...Option) *Workers {
	prefix = strings.Trim(prefix, "/")
	if prefix == "" {
		prefix = DefaultPrefix
	}
	w := &Workers{client: client, prefix: prefix, registry: DefaultRegistry, lockDelay: DefaultLockDelay, now: time.Now}
	for _, o := range opts {
		o(w)
	}
	return w
}

// OpenWorkers opens the coordinator a URL names:
//
//	consul://host:port[/prefix][?lock_delay=D&token=T]
//
// and consuls:// for HTTPS; the port defaults to Consul's, 8500 (8501 with
// consuls://). The path is the key prefix (DefaultPrefix when empty);
// lock_delay the sessions' lock-delay as a Go duration, 0–60s
// (WithLockDelay), and token the ACL token, which wins over
// CONSUL_HTTP_TOKEN and CONSUL_HTTP_TOKEN_FILE; opts come after the URL's.
// The other CONSUL_HTTP_* variables of consulapi.DefaultConfig (TLS files,
// basic auth) apply. Any other query key, or user information in the URL,
// is an error wrapping worker.ErrInvalidConfig (registry= with the reason:
// the registry is DefaultRegistry, one per Consul cluster), and so is a
// prefix inside it. It checks that the agent answers, within ctx or
// DefaultDialTimeout when ctx has no deadline: an agent that does not is
// reported as worker.ErrUnavailable.
func OpenWorkers(ctx context.Context, u *url.URL, opts ...Option) (*Workers, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{worker.ErrInvalidConfig}, args...)...)
	}
	cfg := consulapi.DefaultConfig()
	switch u.Scheme {
	case "consul":
		cfg.Scheme = "http"
	case "consuls":
		cfg.Scheme = "https"
	default:
		return nil, bad("scheme %q, want consul or consuls", u.Scheme)
	}
	if u.Host == "" {
		return nil, bad("no host:port")
	}
	if u.User != nil {
		return nil, bad("user information is not used; give an ACL token with token= or CONSUL_HTTP_TOKEN")
	}
	cfg.Address = u.Host
	if u.Port() == "" {
		port := "8500"
		if u.Scheme == "consuls" {
			port = "8501"
		}
		cfg.Address = net.JoinHostPort(u.Hostname(), port)
	}
	if err := coord.RefuseRegistry(u, "the keys under "+DefaultRegistry+"/"); err != nil {
		return nil, err
	}
	if err := coord.InsideRegistry(cmp.Or(strings.Trim(u.Path, "/"), DefaultPrefix), DefaultRegistry); err != nil {
		return nil, err
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return nil, bad("query: %v", err)
	}
	var uopts []Option
	for _, k := range slices.Sorted(maps.Keys(q)) {
		if len(q[k]) != 1 {
			return nil, bad("%s given %d times", k, len(q[k]))
		}
		v := q.Get(k)
		switch k {
		case "lock_delay":
			d, err := time.ParseDuration(v)
			if err != nil || d < 0 || d > maxLockDelay {
				return nil, bad("lock_delay %q, want a duration of 0s–%v", v, maxLockDelay)
			}
			uopts = append(uopts, WithLockDelay(d))
		case "token":
			cfg.Token, cfg.TokenFile = v, ""
		default:
			return nil, bad("%v", coord.UnknownParam(k, []string{"lock_delay", "token"}))
		}
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultDialTimeout)
		defer cancel()
	}
	client, err := consulapi.NewClient(cfg)
	if err != nil {
		return nil, fmt.Errorf("%w: consul client of %s: %w", worker.ErrInvalidConfig, cfg.Address, err)
	}
	w := NewWorkers(client, u.Path, append(uopts, opts...)...)
	w.transport = cfg.Transport
	if _, _, err := client.KV().Keys(w.prefix+"/", "/", qo(ctx)); err != nil {
		w.Close()
		return nil, unavailable(ctx, err, "listing %s/ on the Consul agent at %s", w.prefix, cfg.Address)
	}
	return w, nil
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

// unavailable wraps a Consul or network failure in worker.ErrUnavailable,
// keeping err and the context's error visible to errors.Is.
func unavailable(ctx context.Context, err error, format string, args ...any) error {
	return coord.Unavailable(ctx, err, format, args...)
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

// result is the entry at index i of a transaction's results.
func result(resp *consulapi.TxnResponse, i int) (*consulapi.KVPair, error) {
	if i < 0 || i >= len(resp.Results) || resp.Results[i] == nil || resp.Results[i].KV == nil {
		return nil, fmt.Errorf("%w: Consul's transaction response has no result %d (%d results)", worker.ErrUnavailable, i, len(resp.Results))
	}
	return resp.Results[i].KV, nil
}

// present is a get-or-empty result when the key exists, else nil.
func present(kv *consulapi.KVPair) *consulapi.KVPair {
	if kv == nil || kv.ModifyIndex == 0 {
		return nil
	}
	return kv
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

// holderValue is the value of a holder key.
type holderValue struct {
	Owner string `json:"owner"`
	TTLMs int64  `json:"ttl_ms"`
}

func encodeHolder(owner string, ttl time.Duration) []byte {
	b, _ := json.Marshal(holderValue{Owner: owner, TTLMs: ttl.Milliseconds()}) // cannot fail
	return b
}

func parseHolder(kv *consulapi.KVPair) (holderValue, error) {
	var h holderValue
	if err := json.Unmarshal(kv.Value, &h); err != nil || h.Owner == "" || h.TTLMs <= 0 {
		return holderValue{}, fmt.Errorf("%w: corrupt holder key %s = %q", worker.ErrUnavailable, kv.Key, kv.Value)
	}
	return h, nil
}

// slot is what the keys of one (datacenter, worker id) say.
type slot struct {
	holder *consulapi.KVPair // nil when missing
	high   *consulapi.KVPair // nil when missing
	highMs int64             // 0 when never used
}

// held reports whether the holder key is locked by a session (and so
// exists while the session does).
func (s *slot) held() bool { return s.holder != nil && s.holder.Session != "" }

// slots parses the keys under dcPrefix(dc) into slots by worker id. Keys of
// another shape (the namespace record, the clocks) are ignored.
func (w *Workers) slots(dc int64, kvs []*consulapi.KVPair) (map[int64]*slot, error) {
	pre := w.keys().DC(dc)
	out := make(map[int64]*slot)
	for _, kv := range kvs {
		rest, ok := strings.CutPrefix(kv.Key, pre)
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
		ms, err := parseMs(kv)
		if err != nil {
			return nil, err
		}
		s.high, s.highMs = kv, ms
	}
	return out, nil
}

// parseMs parses a high-water mark or clock key.
func parseMs(kv *consulapi.KVPair) (int64, error) {
	ms, err := strconv.ParseInt(string(kv.Value), 10, 64)
	if err != nil || ms < 0 {
		return 0, fmt.Errorf("%w: corrupt key %s = %q, want Unix milliseconds", worker.ErrUnavailable, kv.Key, kv.Value)
	}
	return ms, nil
}

// newestPeer is the newest clock among the clock keys in kvs of datacenter
// dc, leaving out worker id self's; 0 when there is none.
func (w *Workers) newestPeer(dc, self int64, kvs []*consulapi.KVPair) int64 {
	pre := w.keys().ClockPrefix(dc)
	var newest int64
	for _, kv := range kvs {
		if kv == nil {
			continue
		}
		rest, ok := strings.CutPrefix(kv.Key, pre)
		if !ok {
			continue
		}
		if id, ok := coord.ParseID(rest); !ok || id == self {
			continue
		}
		if ms, err := parseMs(kv); err == nil {
			newest = max(newest, ms)
		}
	}
	return newest
}

// find is the pair of key in kvs, or nil.
func find(kvs []*consulapi.KVPair, key string) *consulapi.KVPair {
	for _, kv := range kvs {
		if kv != nil && kv.Key == key {
			return kv
		}
	}
	return nil
}

// parseRecord parses the namespace record kv (see coord.Record).
func parseRecord(kv *consulapi.KVPair) (coord.Record, error) {
	return coord.ParseRecord(kv.Key, kv.Value)
}

// registration is the registry entry of this namespace, with contract.
func (w *Workers) registration(contract string) []byte {
	return coord.Registration{Namespace: w.prefix, Contract: contract}.Encode()
}

// entry is kv as coord.Admit reads it; nil when kv is.
func entry(kv *consulapi.KVPair) *coord.Entry {
	if kv == nil {
		return nil
	}
	return &coord.Entry{Key: kv.Key, Value: kv.Value}
}

// Claims implements worker.Registry: the keys under the registry prefix.
func (w *Workers) Claims(ctx context.Context) (worker.Claims, error) {
	kvs, _, err := w.client.KV().List(w.registry+"/", qo(ctx))
	if err != nil {
		return worker.Claims{}, unavailable(ctx, err, "reading the registry %s", w.registry)
	}
	entries := make([]coord.Entry, len(kvs))
	for i, kv := range kvs {
		entries[i] = coord.Entry{Key: kv.Key, Value: kv.Value}
	}
	return coord.ParseClaims(w.keys(), entries)
}

// Unclaim implements worker.Registry. Consul cannot guard a write by a
// whole prefix, so it marks the registry entry as being freed first (a
// check-and-set on its index: an Acquire that read it before fails its own
// check, and one that reads it after is refused); then it reads the
// datacenter, decides by worker.CheckUnclaim (by this machine's clock:
// Consul has none), and deletes the entry or puts it back, again by
// check-and-set. A holder that took an id before the mark is seen by that
// read.
func (w *Workers) Unclaim(ctx context.Context, dc int64) error {
	rk := w.keys().Registration(dc)
	reg, _, err := w.client.KV().Get(rk, qo(ctx))
	if err != nil {
		return unavailable(ctx, err, "reading the registry entry %s", rk)
	}
	var e coord.Registration
	if reg != nil {
		if e, err = coord.ParseRegistration(rk, reg.Value); err != nil {
			return err
		}
	}
	if reg == nil || e.Namespace != w.prefix {
		return fmt.Errorf("%w: datacenter %d is not claimed by %s in the registry %s (claimed by: %q)", worker.ErrContract, dc, w.prefix, w.registry, e.Namespace)
	}
	freeing := e
	freeing.Freeing = true
	marked := &consulapi.KVPair{Key: rk, Value: freeing.Encode(), ModifyIndex: reg.ModifyIndex}
	if ok, _, err := w.client.KV().CAS(marked, wo(ctx)); err != nil || !ok {
		return fmt.Errorf("%w: marking %s as being freed: %v (changed meanwhile: %v)", worker.ErrUnavailable, rk, err, !ok)
	}
	after, _, err := w.client.KV().Get(rk, qo(ctx))
	if err != nil || after == nil {
		return fmt.Errorf("%w: reading %s back: %v", worker.ErrUnavailable, rk, err)
	}
	// Put the entry back as it was when the datacenter is still in use.
	restore := func(why error) error {
		back := &consulapi.KVPair{Key: rk, Value: e.Encode(), ModifyIndex: after.ModifyIndex}
		if ok, _, err := w.client.KV().CAS(back, wo(ctx)); err != nil || !ok {
			return fmt.Errorf("%w (and putting the registry entry %s back failed: %v; run unclaim again, or restore it by hand)", why, rk, err)
		}
		return why
	}
	infos, err := w.List(ctx, dc)
	if err != nil {
		return restore(err)
	}
	if err := worker.CheckUnclaim(w.prefix, dc, infos, w.now()); err != nil {
		return restore(err)
	}
	if ok, _, err := w.client.KV().DeleteCAS(after, wo(ctx)); err != nil || !ok {
		return restore(fmt.Errorf("%w: deleting %s: %v (changed meanwhile: %v)", worker.ErrUnavailable, rk, err, !ok))
	}
	return nil
}

// LowerMark implements worker.MarkLowerer: it reads the slot, decides by
// worker.CheckLowerMark (by this machine's clock: Consul has none), and
// writes the mark in a transaction guarded by the indexes of the holder and
// high keys it read (an Acquire changes both).
func (w *Workers) LowerMark(ctx context.Context, dc, id int64, to time.Time) (time.Time, error) {
	hk, wk := w.keys().Holder(dc, id), w.keys().High(dc, id)
	var b txnb
	hi := b.add(consulapi.KVGetOrEmpty, hk, nil, 0, "")
	wi := b.add(consulapi.KVGetOrEmpty, wk, nil, 0, "")
	ok, resp, err := w.run(ctx, &b)
	if err != nil || !ok {
		return time.Time{}, fmt.Errorf("%w: reading worker %d of datacenter %d in %s: %v", worker.ErrUnavailable, id, dc, w.prefix, err)
	}
	h, err := result(resp, hi)
	if err != nil {
		return time.Time{}, err
	}
	hw, err := result(resp, wi)
	if err != nil {
		return time.Time{}, err
	}
	s := slot{holder: present(h), high: present(hw)}
	info := worker.Info{Datacenter: dc, Worker: id}
	if s.high != nil {
		if s.highMs, err = parseMs(s.high); err != nil {
			return time.Time{}, err
		}
		info.HighWater = coord.MsTime(s.highMs)
	}
	now := w.now()
	if s.held() {
		hd, err := parseHolder(s.holder)
		if err != nil {
			return time.Time{}, err
		}
		info.Holder, info.Expires = hd.Owner, now.Add(time.Duration(hd.TTLMs)*time.Millisecond)
	}
	toMs := coord.CeilMs(to)
	if err := worker.CheckLowerMark(info, coord.MsTime(toMs), now); err != nil {
		return time.Time{}, err
	}
	var t txnb
	if s.holder == nil {
		t.add(consulapi.KVCheckNotExists, hk, nil, 0, "")
	} else {
		t.add(consulapi.KVCheckIndex, hk, nil, s.holder.ModifyIndex, "")
	}
	t.add(consulapi.KVCAS, wk, []byte(strconv.FormatInt(toMs, 10)), s.high.ModifyIndex, "")
	ok, resp, err = w.run(ctx, &t)
	switch {
	case err != nil:
		return time.Time{}, unavailable(ctx, err, "lowering the mark of worker %d of datacenter %d in %s", id, dc, w.prefix)
	case !ok:
		return time.Time{}, fmt.Errorf("%w: worker %d of datacenter %d in %s changed while its mark was being lowered (taken?): %s",
			worker.ErrInUse, id, dc, w.prefix, txnErrors(resp))
	}
	return info.HighWater, nil
}

// peerStale is how old a live peer's clock key may be for holders with a
// lease TTL of lease: see Clock in the package documentation.
func peerStale(lease time.Duration) time.Duration { return 2*wholeSeconds(lease) + lease }

// Clock implements worker.Coordinator: Consul has no clock a client can
// read, so it is the newest clock the datacenter's live holders wrote,
// stale by up to peerStale(req.TTL), read without writing; the zero time
// when no holder is live.
func (w *Workers) Clock(ctx context.Context, req worker.Request) (time.Time, time.Duration, error) {
	pairs, _, err := w.client.KV().List(w.keys().ClockPrefix(req.Datacenter), (&consulapi.QueryOptions{RequireConsistent: true}).WithContext(ctx))
	if err != nil {
		return time.Time{}, 0, unavailable(ctx, err, "reading the clocks of datacenter %d in %s", req.Datacenter, w.prefix)
	}
	newest := w.newestPeer(req.Datacenter, -1, pairs)
	if newest == 0 {
		return time.Time{}, 0, nil
	}
	return coord.MsTime(newest), peerStale(req.TTL), nil
}

// pick chooses a free id in [0, workers) as protocol.Pick does: a slot whose
// holder key a session locks is held, and so are the ids in delayed
// (waiting out a lock-delay).
func pick(slots map[int64]*slot, delayed map[int64]bool, workers, nowMs int64) (id, held int64, ok bool) {
	return protocol.Pick(protocol.Candidates(slots, func(s *slot) (bool, int64) { return s.held(), s.highMs }), delayed, workers, nowMs)
}

// ceilMs is coord.CeilMs, for this package's tests.
func ceilMs(t time.Time) int64 { return coord.CeilMs(t) }

// wholeSeconds is d rounded up to whole seconds, at least 1s.
func wholeSeconds(d time.Duration) time.Duration {
	return max(time.Second, (d+time.Second-1)/time.Second*time.Second)
}

// createSession creates the session of a lease of the given TTL (the
// lease's, in whole seconds) with behavior delete, the coordinator's lock-delay and no
// health checks, and returns its id and TTL. The body is written out rather
// than through Session().Create, which leaves out empty check lists (so the
// agent adds its serfHealth check) and a zero lock-delay (so the agent
// applies its 15s default).
func (w *Workers) createSession(ctx context.Context, lease time.Duration, name string) (string, time.Duration, error) {
	var refused []string
	for _, ttl := range []time.Duration{wholeSeconds(lease)} {
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
			refused = append(refused, fmt.Sprintf("%v: %s", ttl, se.Body))
			continue
		case err != nil:
			return "", 0, unavailable(ctx, err, "creating a %v session for %s", ttl, w.prefix)
		case out.ID == "":
			return "", 0, fmt.Errorf("%w: creating a %v session for %s: the agent returned no session id", worker.ErrUnavailable, ttl, w.prefix)
		}
		return out.ID, ttl, nil
	}
	return "", 0, fmt.Errorf("%w: the Consul agent refuses the session TTLs for a lease TTL of %v (%s); "+
		"Consul servers refuse TTLs below their session_ttl_min, 10s unless configured: use a lease TTL of at least that",
		worker.ErrInvalidConfig, lease, strings.Join(refused, "; "))
}

// destroy destroys a session that holds nothing of ours (any more), on a
// best-effort basis: a session left behind only lapses after its TTL (up to
// twice that), and the keys it locks stay until then. When ctx has ended
// (the session is abandoned because of it) the destruction goes on in the
// background for a little while, so that the caller still returns by its
// deadline.
func (w *Workers) destroy(ctx context.Context, id string) {
	if id == "" {
		return
	}
	if ctx.Err() == nil {
		if _, err := w.client.Session().Destroy(id, wo(ctx)); err == nil {
			return
		}
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		_, _ = w.client.Session().Destroy(id, wo(ctx))
	}()
}

// read is the datacenter's keys and its registry entry, in one read.
func (w *Workers) read(ctx context.Context, dc int64) (reg, space *consulapi.KVPair, kvs []*consulapi.KVPair, err error) {
	var b txnb
	ri := b.add(consulapi.KVGetOrEmpty, w.keys().Registration(dc), nil, 0, "")
	si := b.add(consulapi.KVGetOrEmpty, w.keys().Space(), nil, 0, "")
	ti := b.add(consulapi.KVGetTree, w.keys().DC(dc), nil, 0, "")
	ok, resp, err := w.run(ctx, &b)
	if err != nil {
		return nil, nil, nil, unavailable(ctx, err, "reading the worker ids of datacenter %d in %s", dc, w.prefix)
	}
	if !ok {
		return nil, nil, nil, fmt.Errorf("%w: reading the worker ids of datacenter %d in %s: %s", worker.ErrUnavailable, dc, w.prefix, txnErrors(resp))
	}
	r, err := result(resp, ri)
	if err != nil {
		return nil, nil, nil, err
	}
	sp, err := result(resp, si)
	if err != nil {
		return nil, nil, nil, err
	}
	for _, res := range resp.Results[ti:] {
		if res != nil && res.KV != nil {
			kvs = append(kvs, res.KV)
		}
	}
	return present(r), present(sp), kvs, nil
}

// Acquire implements worker.Coordinator.
func (w *Workers) Acquire(ctx context.Context, req worker.Request) (worker.Claim, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	dc := req.Datacenter
	nk, rk, sk := w.keys().Namespace(dc), w.keys().Registration(dc), w.keys().Space()
	readSent := time.Now()
	regKV, spaceKV, kvs, err := w.read(ctx, dc)
	if err != nil {
		return nil, err
	}
	readRecv := time.Now()
	bound := req.MarkBound()
	if w.afterRead != nil {
		w.afterRead(regKV, kvs)
	}
	reserveMs := coord.CeilMs(req.Reserve)
	nodeMs, ahead := protocol.NodeClock(req, w.now)
	var session string // created once an id is picked; destroyed unless a claim keeps it
	var sessTTL time.Duration
	abandon := func(err error) error {
		w.destroy(ctx, session)
		return err
	}
	delayed := map[int64]bool{} // ids whose keys are in their lock-delay
	for attempt := 1; ; attempt++ {
		recKV := find(kvs, nk)
		rec, err := coord.Admit(req, "the registry "+w.registry+" of this Consul", w.prefix, entry(regKV), entry(spaceKV), entry(recKV))
		if err != nil {
			return nil, abandon(err)
		}
		// The coordinator's clock is the live peers': the latest it can be.
		var peers protocol.PeerClock
		peers.Read(w.newestPeer(dc, -1, kvs), readSent, readRecv)
		if err := bound.Check(fmt.Sprintf("acquiring in datacenter %d of %s", dc, w.prefix), req.Reserve,
			peers.Latest(time.Now(), peerStale(req.TTL))); err != nil {
			return nil, abandon(err)
		}
		slots, err := w.slots(dc, kvs)
		if err != nil {
			return nil, abandon(err)
		}
		id, held, ok := pick(slots, delayed, req.Workers, w.now().UnixMilli())
		if !ok {
			note := ""
			if len(delayed) > 0 {
				note = fmt.Sprintf(" (%d of them in Consul's lock-delay after their sessions ended)", len(delayed))
			}
			return nil, abandon(fmt.Errorf("%w: all %d worker ids of datacenter %d in %s are held%s",
				worker.ErrExhausted, held, dc, w.prefix, note))
		}
		if session == "" {
			if session, sessTTL, err = w.createSession(ctx, req.TTL, fmt.Sprintf("flakeid %s/%d %s", w.prefix, dc, req.Owner)); err != nil {
				return nil, err
			}
		}
		s := slots[id]
		if s == nil {
			s = &slot{}
		}
		high := max(s.highMs, reserveMs)
		hk, wk, ck := w.keys().Holder(dc, id), w.keys().High(dc, id), w.keys().Clock(dc, id)

		var b txnb
		recGet, regGet, spaceGet, highGet := -1, -1, -1, -1
		var recRaw []byte
		if recKV == nil {
			// A new datacenter, or one whose record is gone while its
			// slots are not (a partial loss): initialise it; the slots and
			// their marks stay.
			rec = coord.NewRecord(req.Contract, w.now().UnixMilli(), req.Quarantine)
			recRaw = rec.Encode()
			b.add(consulapi.KVCheckNotExists, nk, nil, 0, "")
			b.add(consulapi.KVSet, nk, recRaw, 0, "")
		} else {
			recRaw = recKV.Value
			b.add(consulapi.KVCheckIndex, nk, nil, recKV.ModifyIndex, "")
			recGet = b.add(consulapi.KVGetOrEmpty, nk, nil, 0, "")
		}
		if regKV == nil {
			b.add(consulapi.KVCheckNotExists, rk, nil, 0, "")
			b.add(consulapi.KVSet, rk, w.registration(rec.Contract), 0, "")
		} else {
			b.add(consulapi.KVCheckIndex, rk, nil, regKV.ModifyIndex, "")
			regGet = b.add(consulapi.KVGetOrEmpty, rk, nil, 0, "")
		}
		if spaceKV == nil {
			b.add(consulapi.KVCheckNotExists, sk, nil, 0, "")
			b.add(consulapi.KVSet, sk, []byte(req.Space), 0, "")
		} else {
			b.add(consulapi.KVCheckIndex, sk, nil, spaceKV.ModifyIndex, "")
			spaceGet = b.add(consulapi.KVGetOrEmpty, sk, nil, 0, "")
		}
		if s.holder == nil {
			b.add(consulapi.KVCheckNotExists, hk, nil, 0, "")
		} else {
			// A holder key no session locks (written by hand, or left
			// by a restore): stale; take it over as it is.
			b.add(consulapi.KVCheckIndex, hk, nil, s.holder.ModifyIndex, "")
		}
		b.add(consulapi.KVLock, hk, encodeHolder(req.Owner, req.TTL), 0, session)
		var highIdx int
		if s.high == nil {
			highIdx = b.add(consulapi.KVCAS, wk, []byte(strconv.FormatInt(high, 10)), 0, "")
		} else {
			highGet = b.add(consulapi.KVGetOrEmpty, wk, nil, 0, "")
			highIdx = b.add(consulapi.KVCAS, wk, []byte(strconv.FormatInt(high, 10)), s.high.ModifyIndex, "")
		}
		b.add(consulapi.KVDelete, ck, nil, 0, "")
		b.add(consulapi.KVLock, ck, []byte(strconv.FormatInt(nodeMs, 10)), 0, session)
		treeAt := b.add(consulapi.KVGetTree, w.keys().ClockPrefix(dc), nil, 0, "")

		sent := time.Now()
		won, resp, err := w.run(ctx, &b)
		if err != nil {
			// The transaction may have been applied: destroying the
			// session frees the id again (the raised mark only errs on the
			// safe side).
			return nil, abandon(unavailable(ctx, err, "claiming worker id %d of datacenter %d in %s", id, dc, w.prefix))
		}
		recv := time.Now()
		if won {
			highKV, err := result(resp, highIdx)
			if err != nil {
				return nil, abandon(err)
			}
			var before struct{ rec, reg, space, high *consulapi.KVPair }
			for _, g := range []struct {
				i   int
				dst **consulapi.KVPair
			}{{recGet, &before.rec}, {regGet, &before.reg}, {spaceGet, &before.space}, {highGet, &before.high}} {
				if g.i >= 0 {
					if *g.dst, err = result(resp, g.i); err != nil {
						return nil, abandon(err)
					}
				}
			}
			changed := (before.rec != nil && string(before.rec.Value) != string(recRaw)) ||
				(before.reg != nil && string(before.reg.Value) != string(regKV.Value)) ||
				(before.space != nil && string(before.space.Value) != string(spaceKV.Value)) ||
				(before.high != nil && string(before.high.Value) != string(s.high.Value))
			if !changed {
				c := &claim{
					w: w, dc: dc, id: id, owner: req.Owner, prev: coord.MsTime(max(s.highMs, rec.FloorMs)),
					contract: req.Contract, quarantine: req.Quarantine, ahead: ahead, bound: bound,
					session: session, sessTTL: sessTTL, lease: req.TTL, highMs: high, highIdx: highKV.ModifyIndex, maxMs: high,
					rec: rec, recRaw: string(recRaw), recIdx: 0,
				}
				if recKV != nil {
					c.recIdx = recKV.ModifyIndex
				} else if c.recIdx, err = w.indexOf(resp, nk); err != nil {
					return nil, abandon(err)
				}
				c.peers.Read(w.newestPeer(dc, id, kvsOf(resp, treeAt)), sent, recv)
				c.updateClock(sent, recv, true)
				return c, nil
			}
			// The indexes matched but the values did not: Consul lost its
			// data between the read and the claim and counted its indexes
			// up to the same numbers again. Put the higher mark back while
			// the id is still ours, free it, and start over.
			if err := w.repair(ctx, dc, id, session, before.high, high, highKV.ModifyIndex); err != nil {
				return nil, abandon(err)
			}
			w.destroy(ctx, session)
			session = ""
		} else {
			switch {
			case txnSays(resp, "lock delay"):
				delayed[id] = true
			case txnSays(resp, "invalid session"):
				session = "" // it lapsed under a slow claim: nothing to destroy
			case txnSays(resp, "Permission denied") || txnSays(resp, "ACL not found"):
				return nil, abandon(fmt.Errorf("%w: claiming worker id %d of datacenter %d in %s: %s",
					worker.ErrUnavailable, id, dc, w.prefix, txnErrors(resp)))
			}
		}
		// Another node claimed the id first (or changed its mark, or the
		// record). Each lost race is an id won by someone else, so nodes
		// starting all at once (who all pick the same lowest id) get
		// through in turn, and the ids are exhausted after Workers of them;
		// more losses than that mean churn this call gives up on.
		if int64(attempt) > req.Workers+maxAttempts {
			return nil, abandon(fmt.Errorf("%w: other nodes won the worker ids of datacenter %d in %s %d times in a row (last: %s)",
				worker.ErrUnavailable, dc, w.prefix, attempt, txnErrors(resp)))
		}
		readSent = time.Now()
		if regKV, spaceKV, kvs, err = w.read(ctx, dc); err != nil {
			return nil, abandon(err)
		}
		readRecv = time.Now()
	}
}

// kvsOf is the entries of a transaction's results from index i on.
func kvsOf(resp *consulapi.TxnResponse, i int) []*consulapi.KVPair {
	var kvs []*consulapi.KVPair
	if i < 0 || i > len(resp.Results) {
		return nil
	}
	for _, r := range resp.Results[i:] {
		if r != nil && r.KV != nil {
			kvs = append(kvs, r.KV)
		}
	}
	return kvs
}

// indexOf is the ModifyIndex of the first result of a successful
// transaction for key.
func (w *Workers) indexOf(resp *consulapi.TxnResponse, key string) (uint64, error) {
	for _, r := range resp.Results {
		if r != nil && r.KV != nil && r.KV.Key == key {
			return r.KV.ModifyIndex, nil
		}
	}
	return 0, fmt.Errorf("%w: Consul's transaction response has no result for %s", worker.ErrUnavailable, key)
}

// repair undoes what a claim whose indexes matched stale values did to a
// slot it still holds on session: the high-water mark goes back up to the
// one the claim replaced (before, nil when it created the key) when that
// was higher, and the holder and clock keys are deleted.
func (w *Workers) repair(ctx context.Context, dc, id int64, session string, before *consulapi.KVPair, wrote int64, index uint64) error {
	var b txnb
	b.add(consulapi.KVCheckSession, w.keys().Holder(dc, id), nil, 0, session)
	if before != nil {
		if old, err := parseMs(before); err == nil && old > wrote {
			b.add(consulapi.KVCAS, w.keys().High(dc, id), []byte(strconv.FormatInt(old, 10)), index, "")
		}
	}
	b.add(consulapi.KVDelete, w.keys().Holder(dc, id), nil, 0, "")
	b.add(consulapi.KVDelete, w.keys().Clock(dc, id), nil, 0, "")
	ok, resp, err := w.run(ctx, &b)
	switch {
	case err != nil:
		return unavailable(ctx, err, "worker %d of datacenter %d in %s: Consul lost its data during the claim; putting the high-water mark back failed",
			id, dc, w.prefix)
	case !ok:
		return fmt.Errorf("%w: worker %d of datacenter %d in %s: Consul lost its data during the claim; putting the high-water mark back failed: %s",
			worker.ErrUnavailable, id, dc, w.prefix, txnErrors(resp))
	}
	return nil
}

// List implements worker.Coordinator. Expires is the holder's last renewal
// (by its clock) plus the session TTL: see the package documentation.
func (w *Workers) List(ctx context.Context, datacenter int64) ([]worker.Info, error) {
	kvs, _, err := w.client.KV().List(w.keys().DC(datacenter), qo(ctx))
	if err != nil {
		return nil, unavailable(ctx, err, "listing the worker ids of datacenter %d in %s", datacenter, w.prefix)
	}
	slots, err := w.slots(datacenter, kvs)
	if err != nil {
		return nil, err
	}
	now := w.now()
	infos := make([]worker.Info, 0, len(slots))
	for _, id := range slices.Sorted(maps.Keys(slots)) {
		s := slots[id]
		in := worker.Info{Datacenter: datacenter, Worker: id, HighWater: coord.MsTime(s.highMs)}
		if s.holder != nil {
			h, err := parseHolder(s.holder)
			if err != nil {
				return nil, err
			}
			in.Holder, in.Expires = h.Owner, now
			if s.held() {
				in.Expires = now.Add(time.Duration(h.TTLMs) * time.Millisecond)
			}
		}
		infos = append(infos, in)
	}
	return infos, nil
}

// Namespace implements worker.Coordinator.
func (w *Workers) Namespace(ctx context.Context, datacenter int64) (worker.Namespace, bool, error) {
	kv, _, err := w.client.KV().Get(w.keys().Namespace(datacenter), qo(ctx))
	if err != nil {
		return worker.Namespace{}, false, unavailable(ctx, err, "reading the namespace record of datacenter %d in %s", datacenter, w.prefix)
	}
	if kv == nil {
		return worker.Namespace{}, false, nil
	}
	rec, err := parseRecord(kv)
	if err != nil {
		return worker.Namespace{}, false, err
	}
	return rec.Namespace(), true, nil
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
	session  string
	sessTTL  time.Duration // the session's TTL
	lease    time.Duration // the lease TTL the session was made for
	highMs   int64         // the high-water mark as last written or read
	highIdx  uint64        // its ModifyIndex
	maxMs    int64         // the highest mark this claim stored
	rec      coord.Record  // the namespace record acquired under
	recRaw   string        // its value as stored
	recIdx   uint64        // its ModifyIndex as last written or read
	renewals int           // successful renewals, to re-read the peers' clocks now and then

	peers protocol.PeerClock // the other live holders' clock: Clock's answer
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

// peerStale is how old a live peer's clock key may be: see Clock in the
// package documentation.
func (c *claim) peerStale() time.Duration { return 2*c.sessTTL + c.lease }

// updateClock sets Clock's answer for an operation sent and answered at
// sent and recv; fresh says that it read the peers' clocks itself. A live
// peer's key may be peerStale old.
func (c *claim) updateClock(sent, recv time.Time, fresh bool) {
	c.peers.Update(sent, recv, fresh, c.peerStale())
}

// where names the claim's slot in errors.
func (c *claim) where() string {
	return fmt.Sprintf("worker %d of datacenter %d in %s", c.id, c.dc, c.w.prefix)
}

// Renew implements worker.Claim. A ttl longer than the session's TTL moves
// the holder and clock keys to a new session made for that TTL; a shorter
// one keeps the session, which never lapses sooner than the holder expects.
func (c *claim) Renew(ctx context.Context, ttl time.Duration, reserve time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.bound.Check(c.where()+": renewing", reserve, c.peers.Latest(time.Now(), c.peerStale())); err != nil {
		return err
	}
	if ttl > c.sessTTL {
		return c.moveSession(ctx, ttl, reserve)
	}
	entry, _, err := c.w.client.Session().Renew(c.session, wo(ctx))
	if err != nil {
		return unavailable(ctx, err, "renewing session %s of %s", c.session, c.where())
	}
	if entry == nil {
		// Expired or destroyed — or Consul lost it with everything else:
		// the keys tell.
		return c.lost(ctx, "renewing", fmt.Sprintf("session %s ended", c.session))
	}
	return c.guarded(ctx, "renewing", reserve, c.session)
}

// moveSession locks the holder and clock keys with a new session of ttl and
// destroys the old one.
func (c *claim) moveSession(ctx context.Context, ttl time.Duration, reserve time.Time) error {
	id, got, err := c.w.createSession(ctx, ttl, fmt.Sprintf("flakeid %s/%d %s", c.w.prefix, c.dc, c.owner))
	if err != nil {
		return err
	}
	hk := c.w.keys().Holder(c.dc, c.id)
	// The clock key is deleted and locked again by the new session after
	// the ops, in guarded.
	if err := c.guarded(ctx, "renewing", reserve, id,
		op(consulapi.KVUnlock, hk, nil, c.session), op(consulapi.KVLock, hk, encodeHolder(c.owner, ttl), id),
		op(consulapi.KVDelete, c.w.keys().Clock(c.dc, c.id), nil, "")); err != nil {
		c.w.destroy(ctx, id)
		return err
	}
	old := c.session
	c.session, c.sessTTL, c.lease = id, got, ttl
	c.w.destroy(ctx, old)
	return nil
}

// txnOp is one extra operation of a guarded transaction.
type txnOp struct {
	verb    consulapi.KVOp
	key     string
	value   []byte
	session string
}

// op makes a txnOp.
func op(verb consulapi.KVOp, key string, value []byte, session string) txnOp {
	return txnOp{verb: verb, key: key, value: value, session: session}
}

// Release implements worker.Claim.
func (c *claim) Release(ctx context.Context, reserve time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	err := c.guarded(ctx, "releasing", reserve, "",
		op(consulapi.KVDelete, c.w.keys().Holder(c.dc, c.id), nil, ""), op(consulapi.KVDelete, c.w.keys().Clock(c.dc, c.id), nil, ""))
	if err == nil || errors.Is(err, worker.ErrNotHeld) {
		// The session locks no key of ours any more.
		c.w.destroy(ctx, c.session)
	}
	return err
}

// guarded raises the high-water mark to at least reserve and applies ops in
// one transaction, if the holder key is locked by the claim's session, the
// namespace record is the one the claim acquired under and the mark is the
// one it last wrote or read. A renewal (clockSession set) also writes this
// node's clock locked by clockSession, and every peerReadEvery renewals
// reads the peers'.
func (c *claim) guarded(ctx context.Context, what string, reserve time.Time, clockSession string, ops ...txnOp) error {
	nk, hk, wk, ck := c.w.keys().Namespace(c.dc), c.w.keys().Holder(c.dc, c.id), c.w.keys().High(c.dc, c.id), c.w.keys().Clock(c.dc, c.id)
	renewing := clockSession != ""
	for attempt := 1; ; attempt++ {
		var b txnb
		b.add(consulapi.KVCheckSession, hk, nil, 0, c.session)
		b.add(consulapi.KVCheckIndex, nk, nil, c.recIdx, "")
		high := max(c.highMs, coord.CeilMs(reserve))
		highAt := -1
		if high != c.highMs {
			highAt = b.add(consulapi.KVCAS, wk, []byte(strconv.FormatInt(high, 10)), c.highIdx, "")
		} else {
			b.add(consulapi.KVCheckIndex, wk, nil, c.highIdx, "")
		}
		for _, o := range ops {
			b.add(o.verb, o.key, o.value, 0, o.session)
		}
		readPeers := false
		if renewing {
			b.add(consulapi.KVLock, ck, []byte(strconv.FormatInt(protocol.NodeMs(c.ahead, reserve, c.w.now), 10)), 0, clockSession)
		}
		recAt := b.add(consulapi.KVGet, nk, nil, 0, "")
		treeAt := -1
		if renewing {
			if readPeers = c.renewals%peerReadEvery == peerReadEvery-1; readPeers {
				treeAt = b.add(consulapi.KVGetTree, c.w.keys().ClockPrefix(c.dc), nil, 0, "")
			}
		}
		sent := time.Now()
		ok, resp, err := c.w.run(ctx, &b)
		if err != nil {
			return unavailable(ctx, err, "%s %s", what, c.where())
		}
		recv := time.Now()
		if ok {
			recKV, err := result(resp, recAt)
			if err != nil {
				return err
			}
			highIdx := c.highIdx
			if highAt >= 0 {
				kv, err := result(resp, highAt)
				if err != nil {
					return err
				}
				highIdx = kv.ModifyIndex
			}
			c.highMs, c.highIdx = high, highIdx
			c.maxMs = max(c.maxMs, high)
			if string(recKV.Value) == c.recRaw {
				if renewing {
					c.renewals++
					if readPeers {
						c.peers.Read(c.w.newestPeer(c.dc, c.id, kvsOf(resp, treeAt)), sent, recv)
					}
					c.updateClock(sent, recv, readPeers)
				}
				return nil
			}
			// The checks passed on indexes that now name another record:
			// Consul lost its data and counted up to the same index. The
			// writes only raised the mark; the keys decide below.
		}
		ns, holder, hw, reg, err := c.readKeys(ctx)
		if err != nil {
			return unavailable(ctx, err, "%s %s (%s): reading its keys", what, c.where(), txnErrors(resp))
		}
		if err := c.check(ctx, ns, holder, hw, reg); err != nil {
			return err
		}
		// Nothing was lost and the id is still ours, but the mark (or the
		// record's bytes, same incarnation) changed under us: a write of
		// ours whose answer was lost, or an operator's. Go on from what is
		// stored.
		c.recRaw, c.recIdx = string(ns.Value), ns.ModifyIndex
		if c.highMs, err = parseMs(hw); err != nil {
			return err
		}
		c.highIdx = hw.ModifyIndex
		if attempt == maxAttempts {
			return fmt.Errorf("%w: %s %s: its high-water mark changed %d times in a row (last: %s)",
				worker.ErrUnavailable, what, c.where(), attempt, txnErrors(resp))
		}
	}
}

// readKeys reads the record, holder, high and registry keys of the claim;
// each is nil when missing.
func (c *claim) readKeys(ctx context.Context) (ns, holder, hw, reg *consulapi.KVPair, err error) {
	var b txnb
	keys := []string{c.w.keys().Namespace(c.dc), c.w.keys().Holder(c.dc, c.id), c.w.keys().High(c.dc, c.id), c.w.keys().Registration(c.dc)}
	for _, k := range keys {
		b.add(consulapi.KVGetOrEmpty, k, nil, 0, "")
	}
	ok, resp, err := c.w.run(ctx, &b)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	if !ok {
		return nil, nil, nil, nil, errors.New(txnErrors(resp))
	}
	var kv [4]*consulapi.KVPair
	for i := range kv {
		r, err := result(resp, i)
		if err != nil {
			return nil, nil, nil, nil, err
		}
		if r.Key != keys[i] {
			return nil, nil, nil, nil, fmt.Errorf("transaction result %d is %s, want %s", i, r.Key, keys[i])
		}
		kv[i] = present(r)
	}
	return kv[0], kv[1], kv[2], kv[3], nil
}

// lost tells why the claim's session is gone: the coordinator lost its
// state (ErrReset), or the session ended (ErrNotHeld, saying why).
func (c *claim) lost(ctx context.Context, what, why string) error {
	ns, holder, hw, reg, err := c.readKeys(ctx)
	if err != nil {
		return unavailable(ctx, err, "%s %s (%s): reading its keys", what, c.where(), why)
	}
	if err := c.check(ctx, ns, holder, hw, reg); err != nil {
		return err
	}
	return fmt.Errorf("%w: %s: %s", worker.ErrNotHeld, c.where(), why)
}

// check compares what Consul holds — the namespace record ns, the holder
// key, the high key hw and the registry entry reg, each nil when missing —
// with what the claim acquired and stored. It returns ErrReset
// (re-initialising the record when this claim is the first to see the
// loss), ErrNotHeld when the id is no longer locked by this claim's session,
// or nil when the claim still holds the id.
func (c *claim) check(ctx context.Context, ns, holder, hw, reg *consulapi.KVPair) error {
	dcName := fmt.Sprintf("datacenter %d in %s", c.dc, c.w.prefix)
	var found string
	var old *coord.Record
	switch {
	case ns == nil:
		found = fmt.Sprintf("the namespace record of %s is gone (the prefix deleted, or the Consul cluster lost its data)", dcName)
	default:
		rec, err := parseRecord(ns)
		if err != nil {
			return err
		}
		old = &rec
		switch {
		case rec.InitialisedMs < c.rec.InitialisedMs:
			found = fmt.Sprintf("the namespace record of %s was initialised at %s (incarnation %s), before the %s of the incarnation %s this holder acquired under: Consul went back to an older copy",
				dcName, coord.MsTime(rec.InitialisedMs).Format(stamp), rec.Incarnation, coord.MsTime(c.rec.InitialisedMs).Format(stamp), c.rec.Incarnation)
		case rec.Incarnation != c.rec.Incarnation:
			return fmt.Errorf("%w: the namespace record of %s was re-initialised at %s (incarnation %s, floor %s) after this holder acquired under incarnation %s of %s: its state was lost, and another node found it first",
				worker.ErrReset, dcName, coord.MsTime(rec.InitialisedMs).Format(stamp), rec.Incarnation, coord.MsTime(rec.FloorMs).Format(stamp),
				c.rec.Incarnation, coord.MsTime(c.rec.InitialisedMs).Format(stamp))
		case hw == nil:
			found = fmt.Sprintf("worker %d's high-water mark in %s is gone; this holder stored %s", c.id, dcName, coord.MsTime(c.maxMs).Format(stamp))
		default:
			ms, err := parseMs(hw)
			if err != nil {
				return err
			}
			if ms < c.maxMs {
				found = fmt.Sprintf("worker %d's high-water mark in %s is %s, below the %s this holder stored: Consul went back to an older copy",
					c.id, dcName, coord.MsTime(ms).Format(stamp), coord.MsTime(c.maxMs).Format(stamp))
			}
		}
	}
	if found != "" {
		return c.reinit(ctx, ns, old, reg, found)
	}
	switch {
	case holder == nil:
		return fmt.Errorf("%w: %s is free (session %s ended)", worker.ErrNotHeld, c.where(), c.session)
	case holder.Session != c.session:
		owner := string(holder.Value)
		if h, err := parseHolder(holder); err == nil {
			owner = h.Owner
		}
		return fmt.Errorf("%w: %s is held by %q on session %q, not by %q on session %s", worker.ErrNotHeld, c.where(),
			owner, holder.Session, c.owner, c.session)
	}
	return nil
}

// reinit re-initialises the namespace record after a loss or rollback —
// guarded by the record still being what was found (oldKV, nil when
// missing) — and the registry entry when it is missing (reg nil), without
// touching any slot, and returns the ErrReset that says what was found.
func (c *claim) reinit(ctx context.Context, oldKV *consulapi.KVPair, old *coord.Record, reg *consulapi.KVPair, found string) error {
	nk, rk := c.w.keys().Namespace(c.dc), c.w.keys().Registration(c.dc)
	rec := coord.Reinit(old, c.contract, c.w.now().UnixMilli(), c.quarantine)
	var b txnb
	if oldKV == nil {
		b.add(consulapi.KVCheckNotExists, nk, nil, 0, "")
	} else {
		b.add(consulapi.KVCheckIndex, nk, nil, oldKV.ModifyIndex, "")
	}
	b.add(consulapi.KVSet, nk, rec.Encode(), 0, "")
	if reg == nil {
		b.add(consulapi.KVCheckNotExists, rk, nil, 0, "")
		b.add(consulapi.KVSet, rk, c.w.registration(rec.Contract), 0, "")
	}
	ok, resp, err := c.w.run(ctx, &b)
	switch {
	case err != nil:
		return fmt.Errorf("%w: %s; re-initialising the record failed: %w", worker.ErrReset, found,
			unavailable(ctx, err, "writing %s", nk))
	case !ok:
		return fmt.Errorf("%w: %s; another node re-initialised the record first (%s)", worker.ErrReset, found, txnErrors(resp))
	}
	return fmt.Errorf("%w: %s; re-initialised the record as incarnation %s, floor %s (quarantine %v)",
		worker.ErrReset, found, rec.Incarnation, coord.MsTime(rec.FloorMs).Format(stamp), c.quarantine)
}
