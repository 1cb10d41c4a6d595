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
// # Atomicity and fencing
//
// ZooKeeper's only compare is on a node's version, and versions restart at 0
// when a node is deleted and created again (a wipe, a restore): a version
// may coincide on a node that is not the one read. Every version check is
// therefore backed by a Czxid — the zxid of the transaction that created the
// node, which no other node ever has.
//
// Acquire reads the record, the registry entry and every slot's holder and
// high nodes on the Workers' own session; refuses a request whose contract
// differs from the record's or whose datacenter another namespace claimed
// (both sides in the error, nothing written); picks a free id (never used,
// released or expired; among them the lowest one whose high-water mark has
// passed, else the one with the smallest mark); opens the claim's session,
// and claims the id on it in one Multi:
//
//	Check(record, version) or Create(record) when missing,
//	Check(registry entry, version) or Create(entry) when missing,
//	Create(holder, EPHEMERAL, owner), SetData(high, max(stored, reserve), version)
//	or Create(high) when missing, [SetData or Check each Leaf node of the id]
//
// (each Create followed by a SetData of the same data, whose reply carries
// the Stat a Create's does not). A lost race (the node exists, a version
// changed) is retried on a fresh read; each lost race is an id another node
// won, so a herd of nodes starting together gets through in turn. After it,
// the record and holder nodes are read back on the claim's session: a record
// with another Czxid than the one read means it was deleted and re-created in
// between, and the claim is abandoned and retried. The mark a new holder
// starts from is the one its Multi replaced, raised to the record's floor.
//
// Renew and Release run, on the claim's session,
//
//	Check(record, version), Check(holder, version), SetData(high, max(mark, reserve), version),
//	Check(each fenced Leaf node, version)
//
// and then compare the high node's Czxid (from the reply) and the record's
// and holder's (read back on the same session: the same Czxid now means the
// same node then) with the claim's, and the holder's owning session with its
// own. The holder node is checked, never written: a Multi whose versions
// coincided on nodes someone else re-created may change nothing of theirs
// but the mark, which only grows. A holder whose session expired cannot
// write at all (ZooKeeper refuses a dead session's requests), and one whose
// requests were held up in the network finds, when they arrive, either its
// session gone or another holder's node and mark versions. Release then
// closes the session, and ZooKeeper deletes the holder node with it — only
// that session's node, never one that a coinciding version would name.
// Renew refuses a TTL longer than the session's timeout
// (worker.ErrInvalidConfig).
//
// Reads on the Workers' own session may be served by a follower that lags
// behind the leader. Nothing is decided on such a read alone: every claim
// rests on a version-checked Multi, and the failure path below calls Sync
// before it reads, so that a lagging follower cannot pass for a rollback.
//
// List reports a held slot's Expires as the Mtime of its high node (written
// by every renewal, by ZooKeeper's clock) plus the ttl_ms the holder stored:
// its TTL, or its session timeout when the server negotiated a longer one.
//
// # Lost and rolled-back state
//
// When a guarded Multi fails, or its nodes turn out to be others', Renew and
// Release read the record, holder and high nodes and decide as
// backend/etcd's claims do:
//
//   - The record is gone: the namespace's tree was deleted, or ZooKeeper
//     behind the servers is a new, empty ensemble.
//   - The record was initialised before the one the claim acquired under,
//     or it is the same incarnation but the claim's high node is gone or
//     below the highest mark the claim stored: ZooKeeper went back to an
//     older copy.
//
// In these cases the record is re-initialised — a new incarnation, the
// record's contract (the claim's when there is none), floor = max(old floor,
// ZooKeeper's clock + the claim's quarantine) — guarded by its version (or
// created when missing), the registry entry is created again if missing, no
// slot is touched, and the call fails with worker.ErrReset saying what was
// found. A record with another, later incarnation means another node already
// did so: ErrReset, nothing written. Otherwise the holder node decides: gone,
// or another session's (or another Czxid) gives worker.ErrNotHeld; still
// ours, the Multi is retried from what is stored (a mark raised by someone
// else, a write of ours whose answer was lost). After ErrReset the claim's
// session lapses with its watchdog, as a lease would.
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
// prepared the transaction). Claim.Clock is the Mtime of the high node
// written by the last successful Acquire or Renew, stale by that request's
// round trip: a coordinator clock, so worker.Config.MaxClockSkew is checked
// against ZooKeeper's clock on every renewal. A namespace record is
// initialised at ZooKeeper's clock: Acquire and the re-initialisation first
// write <prefix>/clock, estimate the clock at their Multi as that write's
// Mtime plus a millisecond plus the time since it was sent, and, should the
// Multi's own Mtime still be later, move the record's initialisation and
// floor to it in a second, version-guarded write (in the few milliseconds
// between, another node may start from the estimate).
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
//   - taken, when any of its nodes was written less than Interval + Margin
//     ago by ZooKeeper's clock (its Mtime against the Mtime of the clock
//     write Acquire makes before reading), or cannot be read (garbage data,
//     no timestamp): counted as held by ErrExhausted;
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
// Every Renew checks the fenced nodes' versions: a Leaf server that was only
// paused and uploads again ends the lease with worker.ErrNotHeld naming its
// node and ip:port. What the takeover cannot see: a Leaf server that runs on
// without reaching ZooKeeper (Leaf keeps issuing when its uploads fail), and
// a Leaf server registering a new node while a claim runs (seen only by the
// next Acquire). Stop the Leaf servers before switching, and keep Margin
// above the clock differences between them and ZooKeeper. List reports Leaf
// ids not held in our tree with Holder "leaf:<ip>:<port>", Expires = Mtime +
// Interval + Margin and HighWater = the mark above.
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
// ids are held, and how many by Leaf), ErrNotHeld, ErrReset, ErrContract,
// ErrInvalidConfig, or ErrUnavailable for a ZooKeeper that cannot be reached
// or answers with an error, or a node whose data cannot be read (named, with
// its data); the context's error stays visible to errors.Is. Errors name the
// path, the datacenter and what was found. As with any remote store, a write
// that failed as unavailable may still have been applied.
package zk
