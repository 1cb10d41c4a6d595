// Package zk is the worker-id coordinator for a cluster of nodes that share a
// ZooKeeper ensemble (server 3.5 or later; client
// github.com/go-zookeeper/zk), and the way to take over the worker ids of a
// Meituan Leaf cluster (snowflake mode) registered in it.
//
// # Configuration
//
// Point every node of a cluster at the same servers and the same path, with
// a coordinator URL (the --coordinator flag of the flakeid command):
//
//	zk://host:port[,host:port…][/path][?leaf=/snowflake/NAME&leaf_interval=D&leaf_margin=D]
//
// opened by OpenWorkers:
//
//	u, err := url.Parse("zk://10.0.0.1:2181,10.0.0.2:2181,10.0.0.3:2181/flakeid/workers")
//	if err != nil { … }
//	w, err := zk.OpenWorkers(ctx, u)
//	if err != nil { … }
//	defer w.Close()
//	leaser, err := worker.NewLeaser(w, worker.Config{Datacenter: 1})
//
// The path defaults to DefaultPrefix. The datacenter registry is always
// DefaultRegistry: one per ensemble, so that no two clusters on it can hold
// the same datacenter and worker id or use two layouts, whatever their
// paths.
//
// # Tree
//
// A namespace is a path. Each datacenter used in it has
//
//	<prefix>/<datacenter>/namespace        persistent: the namespace record (JSON)
//	<prefix>/<datacenter>/<worker>/holder  EPHEMERAL, of the claim's own session: {"owner", "ttl_ms"}
//	<prefix>/<datacenter>/<worker>/high    persistent: the high-water mark, decimal Unix ms; only grows
//	<prefix>/clock                         persistent, empty: written to read ZooKeeper's clock
//
// and the ensemble as a whole has one datacenter registry, under
// DefaultRegistry, shared by every namespace:
//
//	<registry>/<datacenter>                persistent: {"namespace": prefix, "contract": …}
//
// Parents are created as empty persistent nodes. Worker ids are canonical
// decimal; other children are ignored. The namespace record is
// {"incarnation", "contract", "floor_ms", "initialised_ms"} (see
// worker.Namespace). The registry maps a datacenter id to the namespace that
// claimed it first; an Acquire of a datacenter claimed by another namespace
// fails with worker.ErrContract. flakeid never deletes registry entries.
//
// # Sessions are leases
//
// Each claim has its own ZooKeeper session, opened by Acquire with the
// request's TTL as its session timeout, and its holder node is an ephemeral
// node of that session: ZooKeeper deletes it when the session ends — closed
// by Release, or expired by the server a session timeout after it last heard
// from the client, by the server's clock. The server clamps session timeouts
// to [minSessionTimeout, maxSessionTimeout] (by default 2 and 20 × tickTime);
// a claim whose negotiated timeout is shorter than its TTL is refused with
// worker.ErrInvalidConfig, since its session could lapse, and another node
// take the id, while the holder still counts on its lease. go-zookeeper
// v1.0.4 keeps the negotiated timeout in an unexported field, so the claim's
// dialer reads it, with the session id, from the server's connect response
// (protocol version, timeout, session id: the first bytes every connection
// receives).
//
// go-zookeeper re-establishes a session by itself: after the server reports
// the old one expired it opens a new one. A claim never goes on under a new
// session — which would not own its holder node — so its dialer refuses to
// connect once the session ended, and a session event that names another
// session id ends the claim; the fences below would catch it anyway.
//
// A session is kept alive by go-zookeeper's pings, not by renewals, so a
// claim gives its session up (closes it) when it was not renewed within its
// TTL of the last successful Acquire or Renew being sent: worker.Leaser has
// stopped issuing by then (TTL − safety margin after it started that
// renewal), and without it an abandoned claim would hold its id for as long
// as its process runs. A holder cut off from ZooKeeper cannot close its
// session; the server expires it a session timeout (≥ the TTL) after its
// last contact, which was no earlier than its last renewal. So the worker id
// is free again about one TTL after its holder stopped renewing — what the
// Leaser already assumes — and never before its holder gave the lease up.
//
// Requests of go-zookeeper take no context: a Renew or Release that waits on
// a disconnected session returns when its context ends (the request itself
// is failed by go-zookeeper when the connection gives up, after two thirds of
// the session timeout, or is answered later, harmlessly: see below).
//
// # The protocol
//
// Workers is protocol.Driver over this package's Store: the driver decides
// every Acquire, Renew, Release, LowerMark and Unclaim (admission, the mark
// bound, the worker id, the record, what a lost state means), and the Store
// only reads a datacenter and commits a decided change guarded by the read.
//
// A Read writes <prefix>/clock (its Mtime is ZooKeeper's clock: see Clock
// below; the write also brings the shared session up to the leader, so that
// a lagging follower cannot pass for a rollback), lists the datacenter's
// node, and reads the record, the registry entry, the space and every worker
// id's holder and high nodes, pipelined, with their Stats. A slot with a
// holder node is held for as long as the node exists (its session lives):
// the store has Sessions, and its own clock.
//
// A Commit is one Multi:
//
//	Check(node, version read) for each node the decision rests on and does not write,
//	SetData(node, data, version read), or Create(node) when it was missing, for each it writes,
//	Create(holder, EPHEMERAL, {"owner", "ttl_ms"}) for a new holder,
//	Delete(holder, version) for a release,
//	SetData(high, mark, version) for every changed slot (the slot's guard),
//	Create + Delete of the holder node for a mark changed on a free id (no holder came),
//	[SetData each Leaf node to its fence, or Check it, for a Leaf id]
//
// run on the holder's own session: a new session for a new holder (opened
// with the lease's TTL as its timeout, before the Multi), the holder node's
// owning session for a renewal or release (one this Workers opened and that
// has not ended: ErrNotHeld otherwise), the shared one when no holder
// changes. A guard that fails is a lost race: the driver reads and decides
// again. ZooKeeper's only compare is on a node's version, and versions
// restart at 0 when a node is deleted and created again (a wipe, a restore):
// after the Multi, the Czxid of every node it set (from the reply) and the
// Czxid, data and owning session of every node it only checked (read back
// on the same session, so after the Multi) must be the ones read; otherwise
// the session opened for it is closed (deleting its holder node) and the
// race is lost. Release closes the session after its Multi. Renew refuses a
// TTL longer than the session's timeout (worker.ErrInvalidConfig).
//
// Unclaim takes two steps, since ZooKeeper cannot guard a write by a whole
// subtree: it marks the registry node as being freed (guarded by its
// version: an Acquire that read it before fails its own check, one that
// reads it after is refused), reads the datacenter again, and deletes the
// node if nothing else changed, or puts it back.
//
// List reports a held slot's Expires as the later Mtime of its holder and
// high nodes (the high node is written by every renewal, by ZooKeeper's
// clock) plus the ttl_ms the holder stored: its TTL, or its session timeout
// when the server negotiated a longer one.
//
// # Lost state
//
// A ZooKeeper that went back to an older copy, or lost the namespace's tree,
// is recognised by the driver (worker.Diagnose) on the next renewal, which
// re-initialises the record behind a quarantine and fails with
// worker.ErrReset; see package protocol.
//
// A ZooKeeper that lost its data (a server whose disk was wiped, restarted
// empty) starts its zxids again from 0 and refuses every client that saw a
// later zxid than its own, which go-zookeeper's reconnections keep
// presenting. A claim's session is lost with the data: it is refused, then
// unknown to the server (expired), and ends with its watchdog by the TTL at
// the latest; its dialer never opens another. The Workers' shared
// connection is replaced by a new one, which has seen no zxid, once it has
// been without a session for 3 s (redialAfter), or for a second
// when a request on it found no server to connect to; the first Acquire finds
// the namespace gone and re-initialises it behind a quarantine. zxids, and
// so Czxids, may come back after such a loss: the claim's checks rest on its
// session, which cannot survive it, and on the record's random incarnation.
//
// A ZooKeeper that is starting may accept a connection and never answer its
// connect request; go-zookeeper would wait for that answer ten times two
// thirds of the session timeout, holding the connection's requests. Every
// connection here (shared or a claim's) waits one second (handshakeTimeout)
// for it and is then dropped, and go-zookeeper connects again; OpenWorkers
// tries again until its context ends while its connection finds no server.
// Creating a session is a write that ZooKeeper makes durable before it
// answers, so a server whose transaction log is slow to sync answers in
// seconds: the wait doubles (up to eight seconds) each time a connection's
// connect request went unanswered after its previous one had too — a
// starting server leaves one or two unanswered, which costs what it did —
// and halves after each answer within a quarter of it.
//
// # Clock
//
// ZooKeeper stamps every write with its leader's clock (Stat.Mtime, when it
// prepared the transaction). Every Read writes the empty node
// <prefix>/clock, and its Mtime is the coordinator's clock of the decision:
// the mark bound, the lease's end, a new record's initialisation and
// Claim.Clock, so worker.Config.MaxClockSkew is checked against ZooKeeper's
// clock on every renewal.
//
// # Taking over from Leaf
//
// Leaf's snowflake mode registers each server as a persistent sequential
// node <leaf path>/forever/<ip>:<port>-<seq10>, whose sequence number is its
// worker id (0–1023), with {"ip", "port", "timestamp"} as data, uploaded
// every 3 s while the server runs; its IDs are of snowflake.Preset("leaf"). With
// WithLeaf (leaf= in a URL), Acquire refuses (worker.ErrContract) anything
// but datacenter 0 with that layout — an ID of another layout could equal a
// Leaf ID anywhere — and more than 1024 workers, reads forever/ (a missing
// forever/ is worker.ErrInvalidConfig: a wrong path must not make every id
// look free), and treats each Leaf worker id as
//
//   - held by "leaf:<ip>:<port>", when any of its nodes was written less
//     than Interval + Margin ago by ZooKeeper's clock (its Mtime against the
//     Mtime of the Read's clock write), or cannot be read (garbage data, no
//     timestamp): ErrExhausted names such holders;
//   - free above max(timestamp, Mtime) + Interval + Margin of its newest
//     node otherwise: the acquiring Multi raises the id's high node to at
//     least that, so Previous is past every ID the Leaf server could have
//     issued, and in the same Multi sets each of the id's Leaf nodes
//     (version-checked) to the same data with the timestamp
//     LeafFenceTimestamp (2100-01-01): Leaf's start-up check refuses to
//     start a server whose stored timestamp is ahead of its clock, so the old
//     server cannot come back on that ip:port. A node with that timestamp is
//     recognised as fenced (not live, whatever its Mtime; our high node
//     carries the mark).
//
// Every Renew and Release checks the Leaf nodes' versions, and a Read
// reports an id held in our tree whose Leaf node is no longer fenced as held
// by that Leaf server: a Leaf server that was only paused and uploads again
// ends the lease with worker.ErrNotHeld naming its node and ip:port. What the takeover cannot see: a Leaf server that runs on
// without reaching ZooKeeper (Leaf keeps issuing when its uploads fail), and
// a Leaf server registering a new node while a claim runs (seen by the
// claim's next renewal, which then fails with ErrNotHeld: the two issue
// with the id until then). Stop the Leaf servers before switching, and keep Margin
// above the clock differences between them and ZooKeeper. List reports the
// live Leaf servers' ids with Holder "leaf:<ip>:<port>", Expires = Mtime +
// Interval + Margin, and every Leaf id's HighWater as the mark above.
//
// # Limits
//
// Every node keeps two connections to ZooKeeper (its Workers' and its
// claim's session); a server accepts maxClientCnxns (default 60) from one
// client address.
//
// # Errors
//
// Every error wraps one of worker's sentinels: ErrExhausted (saying how many
// ids are held, and by whom), ErrNotHeld, ErrReset, ErrContract,
// ErrInvalidConfig, or ErrUnavailable for a ZooKeeper that cannot be reached
// or answers with an error, or a node whose data cannot be read (named, with
// its data); the context's error stays visible to errors.Is. Errors name the
// path, the datacenter and what was found. As with any remote store, a write
// that failed as unavailable may still have been applied.
package zk
