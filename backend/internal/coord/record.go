package coord

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/flakeid/flakeid/worker"
	"github.com/flakeid/flakeid/worker/protocol"
)

// Record is a datacenter's namespace record, as protocol.Record stores it
// (the etcd, Consul, ZooKeeper and bolt coordinators as that JSON object;
// Redis and SQL keep the same four values in fields and columns of their
// own).
type Record = protocol.Record

// NewRecord is a fresh namespace record of the given contract, with a new
// random incarnation, initialised at nowMs and with a floor quarantine
// (rounded up to whole milliseconds) later.
func NewRecord(contract string, nowMs int64, quarantine time.Duration) Record {
	return Record{
		Incarnation: protocol.NewIncarnation(), Contract: contract,
		InitialisedMs: nowMs, FloorMs: nowMs + CeilDurMs(quarantine),
	}
}

// ParseRecord parses the JSON namespace record value stored under key (the
// key, node or path that errors name). A value that is not such a record, or
// has no incarnation, is an error wrapping worker.ErrUnavailable.
func ParseRecord(key string, value []byte) (Record, error) {
	var r Record
	if err := json.Unmarshal(value, &r); err != nil || r.Incarnation == "" {
		return Record{}, fmt.Errorf("%w: corrupt namespace record %s = %q", worker.ErrUnavailable, key, value)
	}
	return r, nil
}

// Registration is an entry of a coordinator's datacenter registry, stored as
// JSON under the datacenter's id: the namespace (key prefix or path) that
// claimed the datacenter first, and its contract then.
type Registration struct {
	Namespace string `json:"namespace"`
	Contract  string `json:"contract"`
	// Freeing marks an entry that `flakeid workers unclaim` is freeing
	// (Consul, ZooKeeper: it checks the datacenter after marking the entry,
	// then deletes it or puts it back): no Acquire is admitted meanwhile.
	Freeing bool `json:"freeing,omitempty"`
}

// Encode is the entry's JSON.
func (r Registration) Encode() []byte {
	b, _ := json.Marshal(r) // cannot fail: strings
	return b
}

// ParseRegistration parses the registry entry value stored under key (the
// key, node or path that errors name). One that is not an entry wraps
// worker.ErrUnavailable.
func ParseRegistration(key string, value []byte) (Registration, error) {
	var r Registration
	if err := json.Unmarshal(value, &r); err != nil || r.Namespace == "" {
		return Registration{}, fmt.Errorf("%w: corrupt datacenter registry entry %s = %q", worker.ErrUnavailable, key, value)
	}
	return r, nil
}

// Reinit is the record that re-initialises a namespace whose state was lost
// or rolled back, at nowMs by the coordinator's clock: a new incarnation,
// the contract of old, the record found (contract when none was), and a
// floor of max(old's floor, nowMs + quarantine).
func Reinit(old *Record, contract string, nowMs int64, quarantine time.Duration) Record {
	if old != nil {
		contract = old.Contract
	}
	r := NewRecord(contract, nowMs, quarantine)
	if old != nil {
		r.FloorMs = max(r.FloorMs, old.FloorMs)
	}
	return r
}

// Entry is a value a key-value coordinator read: its key (node, path) and
// value. A nil *Entry is a value that is absent.
type Entry struct {
	Key   string
	Value []byte
}

// Admit decides by worker.Admit on what a key-value coordinator (etcd,
// Consul, ZooKeeper) read for req: the datacenter's registry entry, the
// registry's ID space and the namespace record (each nil when absent), in
// the registry named registry, for the namespace namespace. It returns the
// record (zero when absent).
func Admit(req worker.Request, registry, namespace string, reg, space, rec *Entry) (Record, error) {
	r := worker.Recorded{Registry: registry, Namespace: namespace}
	if reg != nil {
		e, err := ParseRegistration(reg.Key, reg.Value)
		if err != nil {
			return Record{}, err
		}
		r.Claimant, r.HasClaim, r.ClaimFreeing = e.Namespace, true, e.Freeing
	}
	if space != nil {
		r.Space, r.HasSpace = string(space.Value), true
	}
	var record Record
	if rec != nil {
		var err error
		if record, err = ParseRecord(rec.Key, rec.Value); err != nil {
			return Record{}, err
		}
		r.Contract, r.Initialised, r.HasRecord = record.Contract, MsTime(record.InitialisedMs), true
	}
	return record, worker.Admit(req, r)
}
