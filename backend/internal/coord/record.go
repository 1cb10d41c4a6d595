package coord

import (
	"encoding/json"
	"fmt"

	"github.com/flakeid/flakeid/worker"
	"github.com/flakeid/flakeid/worker/protocol"
)

// Record is a datacenter's namespace record, as protocol.Record stores it
// (the etcd, Consul, ZooKeeper and bolt coordinators as that JSON object;
// Redis and SQL keep the same four values in fields and columns of their
// own).
type Record = protocol.Record

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

// Entry is a value a key-value coordinator read: its key (node, path) and
// value. A nil *Entry is a value that is absent.
type Entry struct {
	Key   string
	Value []byte
}
