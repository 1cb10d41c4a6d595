package coord

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/flakeid/flakeid/worker"
	"github.com/flakeid/flakeid/worker/protocol"
)

// KVKeys names the keys of a coordinator on a key-value store (etcd,
// Consul) under its namespace prefix and its datacenter registry prefix
// (neither with a trailing "/"):
//
//	<Prefix>/<dc>/namespace       the namespace record
//	<Prefix>/<dc>/<id>/holder     the slot's holder
//	<Prefix>/<dc>/<id>/high       the slot's high-water mark
//	<Prefix>/<dc>/clock/<id>      a holder's clock (an older flakeid's; read by none)
//	<Registry>/<dc>               which namespace claimed datacenter dc
//	<Registry>/space              the ID space every namespace on the registry shares
type KVKeys struct{ Prefix, Registry string }

// DC is the prefix of every key of datacenter dc, with its trailing "/".
func (k KVKeys) DC(dc int64) string { return k.Prefix + "/" + strconv.FormatInt(dc, 10) + "/" }

// Holder is the key of worker id's holder.
func (k KVKeys) Holder(dc, id int64) string { return k.DC(dc) + strconv.FormatInt(id, 10) + "/holder" }

// High is the key of worker id's high-water mark.
func (k KVKeys) High(dc, id int64) string { return k.DC(dc) + strconv.FormatInt(id, 10) + "/high" }

// Namespace is the key of datacenter dc's namespace record.
func (k KVKeys) Namespace(dc int64) string { return k.DC(dc) + "namespace" }

// Registration is the registry key of datacenter dc.
func (k KVKeys) Registration(dc int64) string { return k.Registry + "/" + strconv.FormatInt(dc, 10) }

// Space is the registry key of the ID space.
func (k KVKeys) Space() string { return k.Registry + "/space" }

// ParseClaims reads the registry of a key-value coordinator from the
// entries under k.Registry: the ID space (Space) and each datacenter's
// registration, ordered by datacenter. An entry of another shape is an
// error wrapping worker.ErrUnavailable.
func ParseClaims(k KVKeys, entries []Entry) (worker.Claims, error) {
	var c worker.Claims
	for _, e := range entries {
		if e.Key == k.Space() {
			c.Space, c.HasSpace = string(e.Value), true
			continue
		}
		dc, ok := ParseID(strings.TrimPrefix(e.Key, k.Registry+"/"))
		if !ok {
			return worker.Claims{}, fmt.Errorf("%w: the registry %s holds %s, which is no datacenter id", worker.ErrUnavailable, k.Registry, e.Key)
		}
		r, err := ParseRegistration(e.Key, e.Value)
		if err != nil {
			return worker.Claims{}, err
		}
		c.Datacenters = append(c.Datacenters, worker.DatacenterClaim{Datacenter: dc, Namespace: r.Namespace})
	}
	slices.SortFunc(c.Datacenters, func(a, b worker.DatacenterClaim) int { return cmp.Compare(a.Datacenter, b.Datacenter) })
	return c, nil
}

// Parse is datacenter dc as a key-value coordinator read it: values are the
// keys it found under DC(dc), Registration(dc) and Space(), by key, and
// holder parses a holder key's value into the Holder, ExpiresMs and ClockMs
// of its slot (a zero Slot: a stale key, which leaves the slot free). Keys
// of another shape under the datacenter (an older flakeid's clock keys) are
// left alone; a value that does not parse is an error naming its key,
// wrapping worker.ErrUnavailable.
func (k KVKeys) Parse(dc int64, values map[string][]byte, holder func(key string, value []byte) (protocol.Slot, error)) (protocol.State, error) {
	st := protocol.State{Datacenter: dc, Slots: map[int64]protocol.Slot{}}
	if v, ok := values[k.Space()]; ok {
		st.Space, st.HasSpace = string(v), true
	}
	if v, ok := values[k.Registration(dc)]; ok {
		r, err := ParseRegistration(k.Registration(dc), v)
		if err != nil {
			return st, err
		}
		st.Claim = protocol.Claim{Namespace: r.Namespace, Freeing: r.Freeing}
	}
	if v, ok := values[k.Namespace(dc)]; ok {
		r, err := ParseRecord(k.Namespace(dc), v)
		if err != nil {
			return st, err
		}
		st.Record = &r
	}
	for key, v := range values {
		rest, inDC := strings.CutPrefix(key, k.DC(dc))
		idStr, kind, _ := strings.Cut(rest, "/")
		id, isID := ParseID(idStr)
		if !inDC || !isID || kind != "holder" && kind != "high" {
			continue
		}
		sl := st.Slots[id]
		if kind == "high" {
			ms, err := strconv.ParseInt(string(v), 10, 64)
			if err != nil || ms < 0 {
				return st, fmt.Errorf("%w: corrupt high-water mark %s = %q, want Unix milliseconds", worker.ErrUnavailable, key, v)
			}
			sl.HighMs = ms
		} else {
			h, err := holder(key, v)
			if err != nil {
				return st, fmt.Errorf("%w: corrupt holder key %s = %q: %v", worker.ErrUnavailable, key, v, err)
			}
			sl.Holder, sl.ExpiresMs, sl.ClockMs = h.Holder, h.ExpiresMs, h.ClockMs
		}
		st.Slots[id] = sl
	}
	return st, nil
}

// Registered is the registry entry of next's claim, with its record's
// contract, as a key-value coordinator stores it.
func Registered(next protocol.State) []byte {
	r := Registration{Namespace: next.Claim.Namespace, Freeing: next.Claim.Freeing}
	if next.Record != nil {
		r.Contract = next.Record.Contract
	}
	return r.Encode()
}
