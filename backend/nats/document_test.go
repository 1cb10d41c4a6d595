package nats

import (
	"maps"
	"testing"

	"github.com/flakeid/flakeid/worker/protocol"
)

// FuzzParseDocument: any bytes in a datacenter's key either parse or are
// refused, never a panic; what parses encodes back to the same state, and
// another namespace's write that sees no record of its own keeps the
// owner's.
func FuzzParseDocument(f *testing.F) {
	for _, seed := range []string{
		`{"claim":{"namespace":"a"},"owner":"a","record":{"incarnation":"x","contract":"c","floor_ms":5,"initialised_ms":1},"slots":{"0":{"holder":"h","expires_ms":9,"high_water_ms":7}}}`,
		`{"claim":{"namespace":""},"slots":{"3":{"high_water_ms":1}}}`,
		`{"claim":{"namespace":"b","freeing":true}}`,
		`{"claim":{},"owner":"a"}`,
		`{"claim":{},"slots":{"01":{}}}`,
		`{"claim":{}} {}`,
		`{"claim":{},"extra":1}`,
		`null`,
	} {
		f.Add([]byte(seed), "a")
	}
	f.Fuzz(func(t *testing.T, b []byte, ns string) {
		st, d, err := parseDocument(b, ns)
		if err != nil {
			return
		}
		read := version{rev: 1, owner: d.Owner, record: d.Record}
		again, d2, err := parseDocument(encodeDocument(st, ns, read), ns)
		if err != nil {
			t.Fatalf("the encoding of %q does not parse: %v", b, err)
		}
		if again.Claim != st.Claim || !maps.Equal(again.Slots, st.Slots) || (again.Record == nil) != (st.Record == nil) ||
			st.Record != nil && *again.Record != *st.Record {
			t.Fatalf("%q: parsed %+v, after a round trip %+v", b, st, again)
		}
		if d2.Owner != d.Owner || (d2.Record == nil) != (d.Record == nil) || d.Record != nil && *d2.Record != *d.Record {
			t.Fatalf("%q: the owner's record %q %+v became %q %+v", b, d.Owner, d.Record, d2.Owner, d2.Record)
		}
	})
}

// TestDocumentOwnership: a namespace sees only its own record; a write by
// one that has none keeps the owner's; a write with a record makes it the
// owner.
func TestDocumentOwnership(t *testing.T) {
	rec := &protocol.Record{Incarnation: "x", Contract: "c", FloorMs: 5, InitialisedMs: 1}
	b := encodeDocument(protocol.State{Claim: protocol.Claim{Namespace: "a"}, Record: rec}, "a", version{})
	stB, d, err := parseDocument(b, "b")
	if err != nil || stB.Record != nil || d.Owner != "a" {
		t.Fatalf("b reads %+v (owner %q), %v; want no record of its own, owner a", stB, d.Owner, err)
	}
	stB.Claim = protocol.Claim{}
	b2 := encodeDocument(stB, "b", version{owner: d.Owner, record: d.Record})
	stA, _, err := parseDocument(b2, "a")
	if err != nil || stA.Record == nil || *stA.Record != *rec {
		t.Fatalf("after b's write a reads %+v, %v; want its record", stA, err)
	}
	mine := &protocol.Record{Incarnation: "y", Contract: "c"}
	b3 := encodeDocument(protocol.State{Claim: protocol.Claim{Namespace: "b"}, Record: mine}, "b", version{owner: "a", record: rec})
	if stA, _, _ := parseDocument(b3, "a"); stA.Record != nil {
		t.Errorf("after b took the datacenter, a reads a record %+v", *stA.Record)
	}
}
