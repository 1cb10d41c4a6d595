package main

import (
	"bufio"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/flakeid/flakeid/internal/testenv"
)

// TestProofSegmentsShared: three allocator processes of the real binary share
// one database and hand out a million IDs each of one tag: none twice.
func TestProofSegmentsShared(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three processes against the real databases")
	}
	bin := proofBin.get(t)
	for _, b := range []struct {
		name string
		url  func(t *testing.T) string
	}{
		{"postgres", func(t *testing.T) string { return sqlURL(t, "postgres", testenv.Postgres().Require(t), "") }},
		{"mysql", func(t *testing.T) string { return sqlURL(t, "mysql", testenv.MySQL().Require(t), "") }},
	} {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			store := b.url(t) // a fresh leaf_alloc-shaped table
			out, err := exec.Command(bin, "tags", "create", "orders", "--step", "1000", "--store", store).CombinedOutput()
			if err != nil {
				t.Fatalf("tags create: %v\n%s", err, out)
			}
			const procs, per = 3, 1_000_000
			results := make([][]int64, procs)
			var wg sync.WaitGroup
			for i := range procs {
				wg.Go(func() {
					cmd := exec.Command(bin, "next", "--tag", "orders", "-n", strconv.Itoa(per), "--store", store)
					cmd.Env = append(os.Environ(), "FLAKEID_DATA_DIR="+t.TempDir())
					var stderr strings.Builder
					cmd.Stderr = &stderr
					stdout, err := cmd.StdoutPipe()
					if err != nil {
						t.Error(err)
						return
					}
					if err := cmd.Start(); err != nil {
						t.Error(err)
						return
					}
					ids := make([]int64, 0, per)
					sc := bufio.NewScanner(stdout)
					for sc.Scan() {
						v, err := strconv.ParseInt(sc.Text(), 10, 64)
						if err != nil {
							t.Errorf("process %d printed %q", i, sc.Text())
							break
						}
						ids = append(ids, v)
					}
					if err := cmd.Wait(); err != nil {
						t.Errorf("process %d: %v\n%s", i, err, stderr.String())
					}
					results[i] = ids
				})
			}
			wg.Wait()
			all := make([]int64, 0, procs*per)
			for i, ids := range results {
				if len(ids) != per {
					t.Fatalf("process %d printed %d IDs, want %d", i, len(ids), per)
				}
				if !slices.IsSorted(ids) {
					t.Fatalf("process %d's IDs are not increasing", i)
				}
				all = append(all, ids...)
			}
			slices.Sort(all)
			for i := 1; i < len(all); i++ {
				if all[i] == all[i-1] {
					t.Fatalf("ID %d handed out twice", all[i])
				}
			}
			out, err = exec.Command(bin, "tags", "ls", "--json", "--store", store).Output()
			if err != nil {
				t.Fatalf("tags ls: %v", err)
			}
			if !strings.Contains(string(out), `"tag":"orders"`) {
				t.Fatalf("tags ls: %s", out)
			}
			t.Logf("%d IDs from %d processes, none twice; ids %d…%d", len(all), procs, all[0], all[len(all)-1])
		})
	}
}

// TestTagsCommands: create, list, set-step and the errors, on the default
// file store.
func TestTagsCommands(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	store := "--data-dir=" + dir
	mustSucceed(t, runCLI(t, "tags", "create", "shop-1:orders", "--step", "50", "--start", "1000", "--description", "order numbers", store))
	mustFail(t, runCLI(t, "tags", "create", "shop-1:orders", store), exitError, "already exists")
	mustFail(t, runCLI(t, "tags", "create", "bad tag", store), exitError, "invalid tag")
	r := runCLI(t, "next", "--tag", "shop-1:orders", "-n", "3", store)
	mustSucceed(t, r)
	if got := strings.Fields(r.stdout); !slices.Equal(got, []string{"1000", "1001", "1002"}) {
		t.Fatalf("next --tag printed %v, want 1000 1001 1002", got)
	}
	mustFail(t, runCLI(t, "next", "--tag", "nope", store), exitError, "unknown tag")
	r = runCLI(t, "next", "--tag", "auto", "--create-tag", "-n", "2", store)
	mustSucceed(t, r)
	if got := strings.Fields(r.stdout); !slices.Equal(got, []string{"1", "2"}) {
		t.Fatalf("auto-created tag printed %v", got)
	}
	mustSucceed(t, runCLI(t, "tags", "set-step", "shop-1:orders", "500", store))
	mustFail(t, runCLI(t, "tags", "set-step", "shop-1:orders", "0", store), exitError, "out of range")
	mustFail(t, runCLI(t, "tags", "set-step", "nope", "5", store), exitError, "unknown tag")
	r = runCLI(t, "tags", "ls", store)
	mustSucceed(t, r)
	for _, want := range []string{"shop-1:orders", "500", "order numbers", "auto"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("tags ls does not show %q:\n%s", want, r.stdout)
		}
	}
	mustFail(t, runCLI(t, "next", "--tag", "auto", "-f", "json", store), exitError, "json")
	mustFail(t, runCLI(t, "tags", "ls", "--store", "ftp://x", store), exitError, "unknown scheme")

	r = runCLI(t, "tags", "schema", "--store", "mysql://root@db:3306/app")
	mustSucceed(t, r)
	if !strings.Contains(r.stdout, "CREATE TABLE IF NOT EXISTS `leaf_alloc`") || !strings.Contains(r.stdout, "max_id BIGINT") {
		t.Errorf("tags schema printed:\n%s", r.stdout)
	}
	r = runCLI(t, "workers", "schema", "--coordinator", "postgres://u@db/app?table=ids")
	mustSucceed(t, r)
	if !strings.Contains(r.stdout, `CREATE TABLE IF NOT EXISTS "ids"`) {
		t.Errorf("workers schema printed:\n%s", r.stdout)
	}
	if !strings.Contains(r.stdout, `CREATE TABLE IF NOT EXISTS "flakeid_datacenters"`) {
		t.Errorf("workers schema without the registry table:\n%s", r.stdout)
	}
	mustFail(t, runCLI(t, "tags", "schema"), exitError, "postgres:// or mysql://")

	// ZooKeeper and Consul: the tree and the permissions, without connecting.
	r = runCLI(t, "workers", "schema", "--coordinator", "zk://zk1:2181/ids?leaf=/snowflake/app")
	mustSucceed(t, r)
	for _, want := range []string{"/ids/<datacenter>/<worker>/holder   ephemeral", "/flakeid/datacenters/<datacenter>", "/snowflake/app/forever/"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("workers schema (zk) does not show %q:\n%s", want, r.stdout)
		}
	}
	r = runCLI(t, "workers", "schema", "--coordinator", "consul://127.0.0.1:8500/ids")
	mustSucceed(t, r)
	for _, want := range []string{"ids/<datacenter>/<worker>/high", `key_prefix "flakeid/datacenters/"`, "session_prefix"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("workers schema (consul) does not show %q:\n%s", want, r.stdout)
		}
	}
	mustFail(t, runCLI(t, "tags", "schema", "--store", "zk://zk1:2181/ids"), exitError, "not segment stores")
}
