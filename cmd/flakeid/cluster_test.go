package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/flakeid/flakeid/client"
	"github.com/flakeid/flakeid/internal/testenv"
)

// freeBase finds a port b such that b+1..b+3 are free. It looks below the
// kernel's ephemeral range (ip_local_port_range), where the outgoing
// connections of tests running in parallel cannot take a port between this
// check and the nodes' listen.
func freeBase(t *testing.T) int {
	t.Helper()
	lo := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil && n > 12000 {
				lo = n
			}
		}
	}
	for range 200 {
		base := 10000 + rand.IntN(lo-10000-4)
		ok := true
		for i := 1; ok && i <= 3; i++ {
			l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", base+i))
			if err != nil {
				ok = false
				break
			}
			l.Close()
		}
		if ok {
			return base
		}
	}
	t.Fatal("no three free ports in a row below the ephemeral range")
	return 0
}

// TestCluster starts the three-node cluster of scripts/cluster.sh (etcd and
// PostgreSQL on loopback) and uses it through the Go client: distinct worker
// ids, and with one node killed (-9) mid-run the calls keep succeeding and no
// ID is handed out twice.
func TestCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-node cluster")
	}
	pg := testenv.Postgres().Require(t)
	etcd := ownEtcd(t) // the registry is the cluster's one: an etcd of the test's own
	table := randomName("flakeid_cluster_")
	dir := t.TempDir()
	base := freeBase(t)
	env := append(os.Environ(), "BASE_PORT="+strconv.Itoa(base),
		"FLAKEID_TEST_CLUSTER_PREFIX=/"+randomName("flakeid-cluster-"),
		"FLAKEID_TEST_CLUSTER_ETCD="+etcd,
		"FLAKEID_TEST_CLUSTER_STORE="+pg+"&table="+table)
	script := filepath.Join("..", "..", "scripts", "cluster.sh")
	run := func(args ...string) string {
		cmd := exec.Command(script, args...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("cluster.sh %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	t.Cleanup(func() {
		run("stop", dir)
		dropTable(pg, "postgres", table)
	})
	status := run("start", dir)
	workers := map[string]bool{}
	for line := range strings.Lines(status) {
		if !strings.HasPrefix(line, "node-") {
			continue
		}
		line = strings.TrimSpace(line)
		if !strings.Contains(line, `"ready":true`) {
			t.Fatalf("a node is not ready:\n%s", status)
		}
		workers[line[strings.LastIndex(line, " ")+1:]] = true
	}
	if len(workers) != 3 {
		t.Fatalf("three nodes do not hold three distinct worker ids:\n%s", status)
	}
	var endpoints []string
	for i := 1; i <= 3; i++ {
		endpoints = append(endpoints, fmt.Sprintf("http://127.0.0.1:%d", base+i))
	}
	// One tag, shared by the nodes through PostgreSQL.
	cmd := exec.Command(filepath.Join(dir, "flakeid"), "tags", "create", "orders", "--step", "100", "--store", pg+"&table="+table)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("tags create: %v\n%s", err, out)
	}

	cl, err := client.New(client.Config{Endpoints: endpoints, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var mu sync.Mutex
	seen := [2]map[int64]bool{{}, {}} // Snowflake IDs, segment IDs
	var dups, calls, failures int
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for g := range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				var ids []int64
				var err error
				if g%2 == 0 {
					ids, err = cl.NextIDs(ctx, 500)
				} else {
					ids, err = cl.NextSegmentIDs(ctx, "orders", 50)
				}
				cancel()
				mu.Lock()
				calls++
				if err != nil {
					failures++
					t.Errorf("call failed: %v", err)
				}
				for _, id := range ids {
					if seen[g%2][id] {
						dups++
					}
					seen[g%2][id] = true
				}
				mu.Unlock()
			}
		})
	}
	time.Sleep(time.Second)
	pid, err := os.ReadFile(filepath.Join(dir, "node-1", "pid"))
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(pid)))
	syscall.Kill(n, syscall.SIGKILL)
	mu.Lock()
	killedAt := calls
	mu.Unlock()
	time.Sleep(2 * time.Second)
	close(stop)
	wg.Wait()
	if dups > 0 || failures > 0 || calls <= killedAt+10 {
		t.Fatalf("%d calls (%d after the kill), %d failed, %d duplicate IDs", calls, calls-killedAt, failures, dups)
	}
	t.Logf("%d calls, %d after killing node-1, %d Snowflake and %d segment IDs, no failures, no duplicates",
		calls, calls-killedAt, len(seen[0]), len(seen[1]))

	// The CLI through the servers.
	out, err := exec.Command(filepath.Join(dir, "flakeid"), "next", "-n", "5", "--server", strings.Join(endpoints, ",")).Output()
	if err != nil || len(strings.Fields(string(out))) != 5 {
		t.Fatalf("next --server: %v %q", err, out)
	}
}
