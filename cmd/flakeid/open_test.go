package main

import (
	"strings"
	"testing"
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
		{false, "ftp://x", []string{`--coordinator "ftp://x": unknown scheme "ftp"`, "consuls as the coordinator"}},
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
		{false, "etcd://127.0.0.1:1/p?registy=/r", "did you mean registry="},
		{false, "etcd://127.0.0.1:1/p?anything=1", `unknown parameter "anything" (known: registry)`},
		{false, "zk://127.0.0.1:1/p?registy=/r", "did you mean registry="},
		{false, "consul://127.0.0.1:1/p?lock_dely=1s", "did you mean lock_delay="},
		{false, "redis://127.0.0.1:1?prefx=a", "did you mean prefix="},
		{false, "redis://127.0.0.1:1?registy=a", "did you mean registry="},
		{false, "postgres://u@127.0.0.1:1/db?registy=r", "did you mean registry="},
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
