// Package consul is the worker-id coordinator for a cluster of nodes that
// share a Consul cluster (HTTP API; tested against Consul 1.22 with the
// github.com/hashicorp/consul/api client): a protocol.Store over Consul's
// keys and sessions, so that the lease protocol (worker/protocol) runs on
// Consul as on every other coordinator.
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
// worker ids use distinct prefixes or distinct datacenter ids. The
// datacenter registry lives under DefaultRegistry, always: one per Consul
// cluster, so that no two clusters on it can hold the same datacenter and
// worker id or use two layouts, whatever their prefixes.
//
// # Keys
//
// A namespace is a key prefix. Each datacenter used in it has
//
//	<prefix>/<datacenter>/namespace        the namespace record (JSON), no session
//	<prefix>/<datacenter>/<worker>/holder  {"owner", "ttl_ms", "expires_ms", "clock_ms"}, locked by the holder's session
//	<prefix>/<datacenter>/<worker>/high    the high-water mark, decimal Unix ms, no session
//
// and the Consul cluster as a whole has one datacenter registry, under
// DefaultRegistry, shared by every prefix:
//
//	<registry>/space                       the ID space, written once
//	<registry>/<datacenter>                {"namespace": prefix, "contract": …}, no session
//
// # Sessions are leases
//
// Each holder has its own Consul session, with Behavior = delete, no health
// checks (a session tied to the agent's serfHealth check would be ended by
// the agent's health, not by the TTL), a TTL of the lease's rounded up to
// whole seconds, and a lock-delay (WithLockDelay, DefaultLockDelay). The
// holder key is locked by the session, so it exists exactly while the
// session does: a slot whose holder key is locked is held, and one without
// is free (protocol.State.Sessions); a holder key that no session locks
// (written by hand, left by a restore) is stale, and free. The high-water
// key has no session, so it outlives every holder.
//
// Consul treats a session TTL as a lower bound: it never ends a session
// sooner than the TTL after the last renewal it received, and may keep it up
// to about twice as long. The holder itself stops issuing T minus
// worker.Config.SafetyMargin after its last successful renewal was sent
// (worker.Leaser does that) — before Consul can have freed the id. Another
// node can lock the holder key only once Consul invalidated the session and
// the lock-delay passed: failover ≤ 2×T + lock-delay after the holder's last
// renewal (with the defaults — TTL 10s, lock-delay 1s — at most 21s). Agents
// refuse TTLs below their session_ttl_min (10s unless configured; the tests'
// agent is started with 1s): Acquire then fails with
// worker.ErrInvalidConfig quoting the agent. Consul's own default lock-delay
// is 15s; a flakeid holder has stopped at its own deadline before Consul
// invalidates its session, and is fenced by the high-water mark besides, so
// a short lock-delay loses nothing (lock_delay=, at most Consul's 60s). An
// id in its lock-delay counts as held (protocol.State.Delayed) until it
// passes.
//
// # Atomicity and fencing
//
// Read is one read-only transaction: the datacenter's keys, its registry
// entry and the space. Commit is one transaction that checks the index of
// every key the decision rests on — the namespace record, the registry
// entry, the space, and both keys of every slot it changes — or that the key
// is absent, and gets their values; then it writes what changed. A new
// holder locks the holder key with a new session; a renewal renews the
// holder's session beside the transaction and locks the key again with it
// (a session that is gone fails the transaction: a lost race, and the
// driver's re-read finds the slot free), moving the key to a new session
// when the TTL grew; a release deletes the key, then destroys the session
// (so that no lock-delay is left behind). A session made for a commit that
// failed is destroyed.
//
// Consul's indexes start again from 1 when a cluster loses its data, so an
// index read before such a loss may name another value after it. Values
// cannot coincide (the incarnation and session ids are random): a commit
// whose transaction returns values other than the ones read puts the higher
// mark back, frees the ids it took, restores what else it overwrote, and is
// a lost race for the driver to decide again.
//
// Consul cannot guard a write by a whole prefix, so freeing a datacenter
// (`flakeid workers unclaim`) takes two steps: the registry entry is marked
// as being freed by a check-and-set (an Acquire that read it before fails its
// own check, and one that reads it after is refused), the datacenter is read
// again, and the entry is deleted if nothing changed, or put back.
//
// # Clock
//
// Consul has no clock a client can read (the Date header comes from the
// agent asked), so the coordinator's clock is the datacenter's live
// holders', as in Meituan Leaf's peer check and backend/etcd: each holder
// writes its node's clock into its holder key. A live peer's key may be
// PeerAge(TTL) old: written at most a lease TTL before its session's last
// renewal, which Consul keeps up to twice the session's TTL.
//
// # Errors
//
// Every error wraps one of worker's sentinels: ErrExhausted, ErrNotHeld,
// ErrReset, ErrContract, ErrInUse, ErrClockSkew, ErrInvalidConfig, or
// ErrUnavailable for a Consul that cannot be reached or answers with an
// error; the context's error stays visible to errors.Is. As with any remote
// store, a write that failed as unavailable may still have been applied.
package consul
