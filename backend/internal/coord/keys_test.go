package coord

import "testing"

// TestKVKeys pins the key layout etcd and Consul coordinators store: a
// change would strand every existing namespace.
func TestKVKeys(t *testing.T) {
	k := KVKeys{Prefix: "/flakeid/workers", Registry: "/flakeid/datacenters"}
	for got, want := range map[string]string{
		k.DC(3):           "/flakeid/workers/3/",
		k.Holder(3, 17):   "/flakeid/workers/3/17/holder",
		k.High(3, 17):     "/flakeid/workers/3/17/high",
		k.Namespace(3):    "/flakeid/workers/3/namespace",
		k.ClockPrefix(3):  "/flakeid/workers/3/clock/",
		k.Clock(3, 17):    "/flakeid/workers/3/clock/17",
		k.Registration(3): "/flakeid/datacenters/3",
	} {
		if got != want {
			t.Errorf("key %q, want %q", got, want)
		}
	}
}
