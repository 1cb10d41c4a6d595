package coord

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/flakeid/flakeid/worker"
)

// KVKeys names the keys of a coordinator on a key-value store (etcd,
// Consul) under its namespace prefix and its datacenter registry prefix
// (neither with a trailing "/"):
//
//	<Prefix>/<dc>/namespace       the namespace record
//	<Prefix>/<dc>/<id>/holder     the slot's holder
//	<Prefix>/<dc>/<id>/high       the slot's high-water mark
//	<Prefix>/<dc>/clock/<id>      a holder's clock
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

// ClockPrefix is the prefix of datacenter dc's clock keys.
func (k KVKeys) ClockPrefix(dc int64) string { return k.DC(dc) + "clock/" }

// Clock is the key of worker id's holder's clock.
func (k KVKeys) Clock(dc, id int64) string { return k.ClockPrefix(dc) + strconv.FormatInt(id, 10) }

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
