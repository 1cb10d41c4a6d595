// Package redis is the worker-id coordinator over Redis: a protocol.Store
// over one hash per datacenter, so that the lease protocol
// (worker/protocol) runs on Redis as on every other coordinator. Every
// decision — admission, picking a worker id, marks, resets — is the
// driver's; Redis only reads a datacenter atomically and commits the next
// state guarded by what was read.
//
// # Data model
//
// The namespace of a Workers is its key prefix (DefaultPrefix unless given).
// Datacenter dc is the hash "<prefix>:<dc>". Its field per ever-used worker id
// is the id in decimal, and its value is
//
//	<expires_ms>|<high_water_ms>|<previous_ms>|<holder>
//
// in milliseconds since the Unix epoch by Redis's clock: when the lease
// lapses (0 when free), the high-water mark, a mark older flakeid versions
// kept for their retries (written 0, read and ignored), and the holder's
// owner token (empty when free), last so that an owner token may contain
// any byte. Expiry is never left to key TTLs: a lapsed lease keeps its
// field, and so its high-water mark, forever.
//
// The same hash holds the datacenter's namespace record (worker.Namespace)
// in the field "ns":
//
//	<initialised_ms>|<floor_ms>|<incarnation>|<contract>
//
// and, in the field "rev", the random token of the last commit: the
// version a commit is guarded by. Record and slots live in one key, so that
// whatever loses or restores one loses or restores the other. flakeid
// versions before the protocol driver refuse the "rev" field as corrupt:
// upgrade every node of a prefix together.
//
// # Datacenter registry
//
// A hash outside every namespace, always DefaultRegistry
// ("flakeid:datacenters": one per Redis database, shared by every prefix in
// it, so that no two clusters on it can hold the same datacenter and worker
// id or use two layouts), holds the field "space", the ID space every
// namespace and datacenter on the database shares, and maps each
// datacenter id to the prefix that claimed it. A commit compares both
// with what was read, so on a Redis Cluster the namespace's keys and the
// registry must hash to one slot: give the prefix the registry's name as
// its hash tag (prefix={flakeid:datacenters}:workers).
//
// # Atomicity and time
//
// A read is one MULTI/EXEC: TIME, the datacenter's hash, the registry's
// space and claim of the datacenter. A commit is one Lua script (EVALSHA,
// falling back to EVAL when Redis lost its script cache) that compares the
// hash's "rev" and the registry's two fields with what was read and, when
// they are unchanged, writes the fields that differ and a new "rev";
// otherwise it writes nothing and the driver reads and decides again. A
// commit go-redis retries after its reply was lost finds its own "rev" and
// succeeds again without writing. Only Redis's clock decides expiry: the
// TIME of the read, which is never later than the commit.
//
// Redis loses state when it restarts without persistence, on
// FLUSHALL/FLUSHDB or a DEL of the keys, when it evicts keys under
// maxmemory with an allkeys-* policy (volatile-* policies never evict these
// keys: they have no TTL), and it goes back to an older state when it fails
// over to a replica that had not received the last writes or is restored
// from an older RDB/AOF file. The driver finds both at the next renewal
// (worker.Diagnose) and re-initialises the namespace behind a quarantine.
// Do not restore an older copy under a running cluster: stop its nodes for
// the quarantine, or delete the keys (a loss is always recognised).
//
// # Errors
//
// Connection failures, timeouts, and failures of Redis itself (script
// errors, a key of the wrong type, a corrupt field) wrap
// worker.ErrUnavailable and say what failed; a field that does not parse
// is refused, never re-created.
//
// # Clients
//
// OpenWorkers opens a coordinator URL (the --coordinator flag of the
// flakeid command):
//
//	redis://[[user]:password@]host:port[/db][?prefix=P&…]
//	rediss://…   (TLS)
//
// with a client of its own, which its Close closes. NewWorkers takes any
// go-redis UniversalClient (a *redis.Client, a cluster or failover client),
// which stays the caller's. Leases renew under a context deadline; create
// the client with Options.ContextTimeoutEnabled (OpenWorkers does) so that
// go-redis honours it, or its ReadTimeout bounds each renewal instead.
package redis
