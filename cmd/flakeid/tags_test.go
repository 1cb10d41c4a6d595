package main

import (
	"strconv"
	"strings"
	"testing"

	"github.com/flakeid/flakeid/internal/testenv"
)

// TestTagsDeleteCLI: flakeid tags delete takes a tag out of service in the
// store (next --tag fails, ls leaves it out, a second delete fails), and
// tags create of the name continues above every ID it handed out — on the
// file store and on PostgreSQL.
func TestTagsDeleteCLI(t *testing.T) {
	stores := map[string]func(t *testing.T) []string{
		"file": func(t *testing.T) []string { return []string{"--data-dir", t.TempDir()} },
		"postgres": func(t *testing.T) []string {
			pg := testenv.Postgres().Require(t)
			table := randomName("flakeid_cli_del_")
			t.Cleanup(func() { dropTable(pg, "postgres", table) })
			return []string{"--data-dir", t.TempDir(), "--store", pg + "&table=" + table}
		},
	}
	for name, store := range stores {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			args := store(t)
			cli := func(a ...string) result { return runCLI(t, append(a, args...)...) }
			mustSucceed(t, cli("tags", "create", "gone", "--step", "10"))
			r := cli("next", "--tag", "gone", "-n", "25")
			mustSucceed(t, r)
			lines := strings.Fields(r.stdout)
			last, err := strconv.ParseInt(lines[len(lines)-1], 10, 64)
			if err != nil {
				t.Fatalf("next: %q", r.stdout)
			}
			r = cli("tags", "delete", "gone")
			if r.code != exitOK || !strings.Contains(r.stdout, "deleted tag gone") {
				t.Fatalf("tags delete: exit %d %s%s", r.code, r.stdout, r.stderr)
			}
			if r := cli("next", "--tag", "gone"); r.code == exitOK || !strings.Contains(r.stderr, "gone") {
				t.Errorf("next --tag of a deleted tag: exit %d %s%s", r.code, r.stdout, r.stderr)
			}
			if r := cli("tags", "ls"); strings.Contains(r.stdout, "gone") {
				t.Errorf("tags ls after delete: %s", r.stdout)
			}
			if r := cli("tags", "delete", "gone"); r.code == exitOK || !strings.Contains(r.stderr, "unknown tag") {
				t.Errorf("a second tags delete: exit %d %s", r.code, r.stderr)
			}
			mustSucceed(t, cli("tags", "create", "gone", "--step", "10", "--start", "1"))
			r = cli("next", "--tag", "gone")
			mustSucceed(t, r)
			if id, err := strconv.ParseInt(strings.TrimSpace(r.stdout), 10, 64); err != nil || id <= last {
				t.Errorf("next after creating again: %q, want above %d", r.stdout, last)
			}
		})
	}
}
