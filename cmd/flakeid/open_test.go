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
		var err error
		if tc.store {
			var s store
			if s, err = openStore(t.Context(), tc.raw); err == nil {
				s.Close()
			}
		} else {
			var c coordinator
			if c, err = openCoordinator(t.Context(), tc.raw); err == nil {
				c.Close()
			}
		}
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
