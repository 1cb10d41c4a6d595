// Package etcd is the worker-id coordinator for a cluster of nodes that share
// an etcd cluster (etcd v3 API, server 3.4 or later): a protocol.Store over
// etcd's keys, so that the lease protocol (worker/protocol) runs on etcd as
// on every other coordinator.
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
//	<prefix>/<datacenter>/<worker>/holder  the holder (JSON: owner, lease end, clock), on an etcd lease
//	<prefix>/<datacenter>/<worker>/high    the high-water mark, Unix milliseconds, no lease
//
// and the etcd cluster as a whole has one datacenter registry, under
// DefaultRegistry, shared by every prefix:
//
//	<registry>/space                       the ID space, written once
//	<registry>/<datacenter>                {"namespace": prefix, "contract": …}, no lease
//
// The holder key exists exactly while the id is held: etcd deletes it when
// its lease (the TTL rounded up to whole seconds, at least etcd's minimum)
// expires, by etcd's own clock. So a slot with a holder key is held, and one
// without is free: the lease's end and clock inside the key only inform
// (List, and the peers' clock below). The high-water key has no lease, so it
// outlives every holder. A holder key of an older flakeid, the owner token
// alone, is read as a holder with no clock.
//
// # Atomicity and fencing
//
// Read is one range read of the datacenter's prefix, its registry entry and
// the space, at one revision. Commit is one transaction that compares the
// value of every key the decision rests on — the namespace record, the
// registry entry and the space, and both keys of every slot it changes
// (a holder key also by its lease) — or that the key is absent, and then
// writes what changed; a commit that changes no slot (freeing the
// datacenter, re-initialising the record) also requires that no key under
// the datacenter changed since the read. Values, not revisions alone, are
// compared: a restore rewinds revisions, and a revision seen before it may
// name another value after it. A holder's late write is fenced: another
// holder's key has another lease.
//
// A new holder key goes on a new lease of the request's TTL; a renewal
// first sends one keep-alive for the holder's lease (a lease that is gone
// makes the commit a lost race, and the driver's re-read finds the slot
// free), moving the key to a new lease when the TTL grew; a release deletes
// the key and revokes the lease. A lease granted for a commit that failed is
// revoked.
//
// # Clock
//
// etcd has no clock a client can read, so the coordinator's clock is the
// datacenter's live holders' (protocol.State.Sessions): Leaf's peer check
// (https://tech.meituan.com/2017/04/21/mt-leaf.html), with the times kept
// in the holder keys rather than asked for over RPC. Records are initialised
// by this node's clock, so they are as good as the nodes' clocks agree (the
// quarantine covers worker.Config's MaxClockSkew).
//
// # Errors
//
// Every error wraps one of worker's sentinels: ErrExhausted, ErrNotHeld,
// ErrReset, ErrContract, ErrInUse, ErrClockSkew, ErrInvalidConfig, or
// ErrUnavailable for an etcd that cannot be reached or answers with an error;
// the context's error stays visible to errors.Is. As with any remote store,
// a write that failed as unavailable may still have been applied.
package etcd
