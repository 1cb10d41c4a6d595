package main

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"
)

// TestOpenSchemes checks the scheme table: every scheme reaches its
// backend's opener (seen by the opener's own refusal of an incomplete URL),
// the flag and the URL (redacted) lead each error, and a scheme with no
// opener for the role is refused naming those that have one.
func TestOpenSchemes(t *testing.T) {
	for _, tc := range []struct {
		store bool
		raw   string
		want  []string
	}{
		{false, "file://", []string{`--coordinator "file:": `, "no file path"}},
		{true, "file://", []string{`--store "file:": `, "no file path"}},
		{false, "postgres://u:secret@127.0.0.1:1", []string{`--coordinator "postgres://u:xxxxx@127.0.0.1:1": `, "no database name in the path"}},
		{true, "MYSQL://127.0.0.1:1", []string{`--store "mysql://127.0.0.1:1": `, "no database name in the path"}},
		{false, "etcd:///p", []string{`--coordinator "etcd:///p": `, "no etcd endpoint"}},
		{false, "redis://127.0.0.1:1/x", []string{`--coordinator "redis://127.0.0.1:1/x": `, "invalid database number"}},
		{false, "zk:///p", []string{`--coordinator "zk:///p": `, "no ZooKeeper server"}},
		{false, "consul://127.0.0.1:1/p?lock_delay=x", []string{`--coordinator "consul://127.0.0.1:1/p?lock_delay=x": `, "lock_delay"}},
		{false, "nats://127.0.0.1:1/a.b", []string{`--coordinator "nats://127.0.0.1:1/a.b": `, `bucket "a.b"`}},
		{false, "nats://127.0.0.1:1/a?prefix=p", []string{`--coordinator "nats://127.0.0.1:1/a?prefix=p": `, `unknown parameter "prefix"`}},
		{false, "ftp://x", []string{`--coordinator "ftp://x": unknown scheme "ftp"`, "consuls, nats or tls as the coordinator"}},
		{true, "etcd://127.0.0.1:1", []string{`--store "etcd://127.0.0.1:1": unknown scheme "etcd"`, "(want file, postgres, postgresql or mysql as the segment store)"}},
		{false, "%zz", []string{"--coordinator is not a URL"}},
	} {
		err := openAndClose(t, tc.store, tc.raw)
		if err == nil {
			t.Errorf("open %q (store %v) succeeded", tc.raw, tc.store)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("open %q (store %v): %q does not say %q", tc.raw, tc.store, err, w)
			}
		}
		if strings.Contains(err.Error(), "secret") {
			t.Errorf("open %q: %q shows the password", tc.raw, err)
		}
	}
}

// TestOpenRefusesMisspeltParameters: every coordinator and store URL
// refuses a misspelt parameter of flakeid's own, naming the one meant,
// before it connects to anything — never a default silently used instead.
func TestOpenRefusesMisspeltParameters(t *testing.T) {
	for _, tc := range []struct {
		store bool
		raw   string
		want  string
	}{
		{false, "etcd://127.0.0.1:1/p?anything=1", `unknown parameter "anything" (known: none)`},
		{false, "zk://127.0.0.1:1/p?lef=/snowflake/a", "did you mean leaf="},
		{false, "consul://127.0.0.1:1/p?lock_dely=1s", "did you mean lock_delay="},
		{false, "redis://127.0.0.1:1?prefx=a", "did you mean prefix="},
		{false, "postgres://u@127.0.0.1:1/db?tabel=r", "did you mean table="},
		{false, "mysql://u@127.0.0.1:1/db?tabel=t", "did you mean table="},
		{true, "postgres://u@127.0.0.1:1/db?tabel=t", "did you mean table="},
		{false, "file:///tmp/x/workers.db?registry=r", `unknown parameter "registry" (known: none)`},
		{true, "file:///tmp/x/segments.db?table=t", `unknown parameter "table" (known: none)`},
	} {
		err := openAndClose(t, tc.store, tc.raw)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("open %q (store %v): %v, want an error saying %q", tc.raw, tc.store, err, tc.want)
		}
	}
}

// TestOpenRefusesRegistry: no coordinator URL names a datacenter registry of
// its own. A coordinator keeps one, at a fixed place, for every namespace on
// it: two clusters given two registries on one coordinator would both be
// admitted to the same datacenter and worker id (issue 46: 2,696 duplicate
// IDs in 830,000 on one Redis). Every remote scheme refuses the parameter
// before it connects, whatever the prefix, path or table, and says why.
func TestOpenRefusesRegistry(t *testing.T) {
	for _, raw := range []string{
		"etcd://127.0.0.1:1/a?registry=/r1",
		"etcd://127.0.0.1:1?registry=/flakeid/datacenters",
		"zk://127.0.0.1:1/a?registry=/r2",
		"zk://127.0.0.1:1/a?leaf=/snowflake/x&registry=/r",
		"consul://127.0.0.1:1/a?registry=r",
		"consuls://127.0.0.1:1/a?token=t&registry=r",
		"redis://127.0.0.1:1/0?prefix=a&registry=r1",
		"rediss://127.0.0.1:1/3?registry=flakeid:datacenters",
		"postgres://u@127.0.0.1:1/db?table=a&registry=r",
		"postgresql://u@127.0.0.1:1/db?registry=r",
		"mysql://u@127.0.0.1:1/db?registry=r&table=b",
		"nats://127.0.0.1:1/b?namespace=a&registry=r",
		"tls://127.0.0.1:1?registry=r",
	} {
		err := openAndClose(t, false, raw)
		if err == nil || !strings.Contains(err.Error(), "registry= is not accepted") || !strings.Contains(err.Error(), "one datacenter registry") {
			t.Errorf("open %q: %v; want registry= refused, saying the coordinator has one registry", raw, err)
		}
		u, _ := url.Parse(raw)
		if u.Scheme == "etcd" || u.Scheme == "nats" || u.Scheme == "tls" || strings.HasPrefix(u.Scheme, "redis") {
			continue // no schema to print
		}
		r := runCLI(t, "workers", "schema", "--coordinator", raw)
		mustFail(t, r, exitError, "registry= is not accepted")
	}
	// Nor may a namespace lie inside the registry, where its keys would be
	// read as claims; one around it is fine.
	for raw, inside := range map[string]bool{
		"etcd://127.0.0.1:1/flakeid/datacenters":      true,
		"etcd://127.0.0.1:1/flakeid/datacenters/a":    true,
		"zk://127.0.0.1:1/flakeid/datacenters/":       true,
		"consul://127.0.0.1:1/flakeid/datacenters/a/": true,
		"etcd://127.0.0.1:1/flakeid":                  false,
		"zk://127.0.0.1:1/flakeid/datacenters-a":      false,
		"consul://127.0.0.1:1/flakeid/datacenters2":   false,
	} {
		ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
		c, err := openCoordinator(ctx, raw)
		cancel()
		if err == nil {
			c.Close()
		}
		if got := err != nil && strings.Contains(err.Error(), "lies inside the datacenter registry"); got != inside {
			t.Errorf("open %q: %v; refused as inside the registry: %v, want %v", raw, err, got, inside)
		}
	}
}

// openAndClose opens the segment store (store) or the coordinator raw
// names, closes it, and returns the error of opening.
func openAndClose(t *testing.T, store bool, raw string) error {
	if store {
		s, err := openStore(t.Context(), raw)
		if err == nil {
			s.Close()
		}
		return err
	}
	c, err := openCoordinator(t.Context(), raw)
	if err == nil {
		c.Close()
	}
	return err
}

// TestCoordinatorScope: serve's warning on datacenter 0 says what one
// coordinator is for each kind of URL — what shares its one registry — and
// what lies outside it.
func TestCoordinatorScope(t *testing.T) {
	for raw, want := range map[string][2]string{
		"etcd://10.0.0.1:2379/a":        {"this etcd cluster", "another etcd cluster"},
		"zk://10.0.0.1:2181/a":          {"this ZooKeeper ensemble", "another ensemble"},
		"consuls://c:8501/a":            {"this Consul cluster", "another Consul cluster or datacenter"},
		"redis://h:6379?prefix=a":       {"database 0 of this Redis server", "another database of this one"},
		"rediss://h:6379/7?prefix=a":    {"database 7 of this Redis server", "another Redis server"},
		"postgres://u@db/app?table=t":   {"this PostgreSQL database", "another database or schema"},
		"mysql://u@db/app":              {"this MySQL database", "another database"},
		"nats://127.0.0.1:4222/flakeid": {"the bucket flakeid of this NATS server", "another bucket of this one"},
		"tls://n:4222?namespace=a":      {"the bucket flakeid of this NATS server", "another NATS server"},
		"%zz":                           {"this coordinator", "another server or cluster"},
	} {
		this, others := coordinatorScope(raw)
		if !strings.Contains(this, want[0]) || !strings.Contains(others, want[1]) {
			t.Errorf("coordinatorScope(%q) = %q, %q; want %q, %q", raw, this, others, want[0], want[1])
		}
	}
}
