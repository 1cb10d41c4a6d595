// Package nats is the worker-id coordinator on NATS JetStream key-value
// storage: a protocol.Store over one KV bucket, so that the lease protocol
// (worker/protocol) runs on NATS as on every other coordinator.
//
// One bucket is one coordinator with one datacenter registry (as one Redis
// database or one SQL database is): the URL
//
//	nats://[user:password@]host:port[/bucket][?namespace=N]
//
// names the bucket (DefaultBucket when empty), created on first use with
// one revision of history per key, and the namespace, the name a cluster's
// nodes claim datacenters under (DefaultNamespace when empty). The bucket
// holds:
//
//	space        the registry's ID space, written once (create-if-absent)
//	dc.<id>      one JSON document per datacenter: the registry's claim on
//	             it, and the claimant's namespace record and worker-id slots
//	clock.<id>   written by every read: the revision's server timestamp is
//	             the coordinator's clock
//
// A datacenter's claim, record and slots are one key, so that every
// decision of the protocol commits with one compare-and-set on its
// revision (KeyValue.Update); the space is created before it, and never
// changes. The clock is the JetStream server's: the timestamp it gives the
// write of clock.<id>, made after the datacenter was read and before the
// commit, so that a slot found expired by it is expired when the commit
// lands, and a lease granted by it ends no later than the holder believes.
// A NATS cluster's stream leader stamps the writes: keep its members'
// clocks synchronised (NTP), as with Redis or a SQL primary.
//
// Losing the bucket (deleted, purged, a server restarted without its store)
// is a lost state, detected and quarantined as on every coordinator; a
// document that does not parse is refused, never re-created.
package nats
