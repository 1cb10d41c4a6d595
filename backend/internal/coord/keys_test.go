package coord

import (
	"errors"
	"maps"
	"strings"
	"testing"

	"github.com/flakeid/flakeid/worker"
	"github.com/flakeid/flakeid/worker/protocol"
)

// TestKVKeys pins the key layout etcd and Consul coordinators store: a
// change would strand every existing namespace.
func TestKVKeys(t *testing.T) {
	k := KVKeys{Prefix: "/flakeid/workers", Registry: "/flakeid/datacenters"}
	for got, want := range map[string]string{
		k.DC(3):           "/flakeid/workers/3/",
		k.Holder(3, 17):   "/flakeid/workers/3/17/holder",
		k.High(3, 17):     "/flakeid/workers/3/17/high",
		k.Namespace(3):    "/flakeid/workers/3/namespace",
		k.Registration(3): "/flakeid/datacenters/3",
	} {
		if got != want {
			t.Errorf("key %q, want %q", got, want)
		}
	}
}

// TestParse: a key-value coordinator's read of a datacenter becomes its
// State: the space, the claim, the record and each slot's mark and holder;
// keys of another shape are left alone, and a value that does not parse is
// an error naming its key.
func TestParse(t *testing.T) {
	k := KVKeys{Prefix: "p", Registry: "r"}
	holder := func(_ string, v []byte) (protocol.Slot, error) {
		switch string(v) {
		case "stale":
			return protocol.Slot{}, nil
		case "bad":
			return protocol.Slot{}, errors.New("unreadable")
		}
		return protocol.Slot{Holder: string(v), ExpiresMs: 5, ClockMs: 6, HighMs: 99}, nil
	}
	good := map[string][]byte{
		"r/space": []byte("sp"), "r/3": []byte(`{"namespace":"p","contract":"c","freeing":true}`),
		"p/3/namespace": []byte(`{"incarnation":"i","contract":"c","floor_ms":2,"initialised_ms":1}`),
		"p/3/0/holder":  []byte("a"), "p/3/0/high": []byte("7"), "p/3/1/holder": []byte("stale"), "p/3/2/high": []byte("0"),
		"p/3/clock/0": []byte("junk"), "p/3/07/high": []byte("junk"), "p/3/x/holder": []byte("junk"), "p/3/1/other": []byte("junk"),
		"p/30/0/high": []byte("junk"), "p/4/0/high": []byte("junk"),
	}
	st, err := k.Parse(3, good, holder)
	want := map[int64]protocol.Slot{0: {Holder: "a", ExpiresMs: 5, ClockMs: 6, HighMs: 7}, 1: {}, 2: {}}
	if err != nil || st.Datacenter != 3 || st.Space != "sp" || !st.HasSpace || st.Claim != (protocol.Claim{Namespace: "p", Freeing: true}) ||
		st.Record == nil || *st.Record != (Record{Incarnation: "i", Contract: "c", FloorMs: 2, InitialisedMs: 1}) || !maps.Equal(st.Slots, want) {
		t.Fatalf("Parse = %+v (record %+v), %v; want slots %+v", st, st.Record, err, want)
	}
	if st, err := k.Parse(3, map[string][]byte{}, holder); err != nil || st.HasSpace || st.Claim != (protocol.Claim{}) || st.Record != nil || len(st.Slots) != 0 {
		t.Fatalf("Parse of nothing = %+v, %v; want an empty state", st, err)
	}
	for key, value := range map[string]string{"p/3/0/high": "-1", "p/3/5/high": "soon", "p/3/0/holder": "bad", "r/3": "{}", "p/3/namespace": "{not json"} {
		bad := maps.Clone(good)
		bad[key] = []byte(value)
		if _, err := k.Parse(3, bad, holder); !errors.Is(err, worker.ErrUnavailable) || !strings.Contains(err.Error(), key) {
			t.Errorf("Parse with %s = %q: %v; want ErrUnavailable naming the key", key, value, err)
		}
	}
}

// TestRegistered: a claim's registry entry carries the record's contract.
func TestRegistered(t *testing.T) {
	next := protocol.State{Claim: protocol.Claim{Namespace: "p"}, Record: &Record{Contract: "c"}}
	if got := string(Registered(next)); got != `{"namespace":"p","contract":"c"}` {
		t.Fatalf("Registered = %s", got)
	}
	next.Record, next.Claim.Freeing = nil, true
	if got := string(Registered(next)); got != `{"namespace":"p","contract":"","freeing":true}` {
		t.Fatalf("Registered without a record = %s", got)
	}
}
