package main

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

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

// TestSeriesCLI: tags create makes a series (settings checked before the
// store is touched, the capacity printed), tags ls shows it and hides its
// periods' rows, next prints its numbers, decode --tag reads them back
// (text and JSON, and a masked series' real counter with the key), and
// set-step keeps the settings — on the file store and on MariaDB.
func TestSeriesCLI(t *testing.T) {
	const key = "000102030405060708090a0b0c0d0e0f"
	stores := map[string]func(t *testing.T) []string{
		"file": func(t *testing.T) []string { return []string{"--data-dir", t.TempDir()} },
		"mysql": func(t *testing.T) []string {
			return []string{"--data-dir", t.TempDir(), "--store", sqlURL(t, "mysql", testenv.MySQL().Require(t), "")}
		},
	}
	for name, store := range stores {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			args := store(t)
			cli := func(a ...string) result { return runCLI(t, append(a, args...)...) }
			if r := cli("tags", "create", "bad", "--period", "day", "--template", "ORD-{yyyyMM}-{seq:4}"); r.code == exitOK || !strings.Contains(r.stderr, "cannot show which day") {
				t.Fatalf("a template without the day: exit %d %s", r.code, r.stderr)
			}
			if r := cli("tags", "create", "bad", "--period", "day"); r.code == exitOK || !strings.Contains(r.stderr, "--period and --template") {
				t.Fatalf("--period without --template: exit %d %s", r.code, r.stderr)
			}
			r := cli("tags", "create", "ord", "--step", "5", "--period", "day", "--template", "ORD-{yyyyMMdd}-{seq:6}", "--description", "web")
			if r.code != exitOK || !strings.Contains(r.stdout, "at most 999,999 numbers a day") {
				t.Fatalf("tags create series: exit %d %s%s", r.code, r.stdout, r.stderr)
			}
			before := time.Now().UTC().Format("20060102")
			r = cli("next", "--tag", "ord", "-n", "3")
			after := time.Now().UTC().Format("20060102")
			mustSucceed(t, r)
			nums := strings.Fields(r.stdout)
			if len(nums) != 3 || nums[2] != "ORD-"+after+"-000003" && nums[2] != "ORD-"+before+"-000003" {
				t.Fatalf("next --tag ord -n 3: %q", r.stdout)
			}
			r = cli("tags", "ls")
			if !strings.Contains(r.stdout, "series ORD-{yyyyMMdd}-{seq:6}, every day (UTC) from 1") || !strings.Contains(r.stdout, "web") || strings.Contains(r.stdout, "ord::") {
				t.Fatalf("tags ls: %s", r.stdout)
			}
			r = cli("decode", "--tag", "ord", nums[1], "ORD-20261131-000001")
			if r.code == exitOK || !strings.Contains(r.stdout, "counter       2") && !strings.Contains(r.stdout, "counter") || !strings.Contains(r.stderr, "shows no day") {
				t.Fatalf("decode --tag: exit %d %s%s", r.code, r.stdout, r.stderr)
			}
			r = cli("decode", "--json", "--tag", "ord", nums[0])
			var d decodedNumber
			if err := json.Unmarshal([]byte(r.stdout), &d); err != nil || d.Seq != 1 || d.Number != nums[0] || d.Period != "day" {
				t.Fatalf("decode --json --tag: %q, %v", r.stdout, err)
			}
			mustSucceed(t, cli("tags", "set-step", "ord", "7"))
			if r := cli("next", "--tag", "ord"); !strings.Contains(r.stdout, "ORD-") {
				t.Fatalf("next after set-step: %s%s", r.stdout, r.stderr)
			}

			if r := cli("tags", "create", "inv", "--period", "year", "--template", "INV{yyyy}{seq:5}", "--masked"); r.code == exitOK || !strings.Contains(r.stderr, "--masked needs") {
				t.Fatalf("--masked without a key: exit %d %s", r.code, r.stderr)
			}
			mustSucceed(t, cli("tags", "create", "inv", "--step", "3", "--period", "year", "--template", "INV{yyyy}{seq:5}", "--masked", "--mask-key", key, "--mask-key-id", "4"))
			if r := cli("next", "--tag", "inv"); r.code == exitOK || !strings.Contains(r.stderr, "masked with key 4") {
				t.Fatalf("next of a masked series without its key: exit %d %s", r.code, r.stderr)
			}
			r = cli("next", "--tag", "inv", "-n", "5", "--mask-key", key, "--mask-key-id", "4")
			mustSucceed(t, r)
			masked := strings.Fields(r.stdout)
			for i, n := range masked {
				r := cli("decode", "--json", "--tag", "inv", "--mask-key", key, "--mask-key-id", "4", n)
				var d decodedNumber
				if err := json.Unmarshal([]byte(r.stdout), &d); err != nil || d.Seq != int64(i)+1 {
					t.Fatalf("decode of masked %s: %s%s", n, r.stdout, r.stderr)
				}
			}
		})
	}
}
