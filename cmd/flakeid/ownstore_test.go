package main

import (
	"cmp"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/flakeid/flakeid/backend/sqldb"
	"github.com/flakeid/flakeid/internal/consulproc"
	"github.com/flakeid/flakeid/internal/etcdproc"
	"github.com/flakeid/flakeid/internal/testenv"
	"github.com/flakeid/flakeid/internal/zkproc"
)

// A coordinator has one datacenter registry, at a fixed place, shared by
// every namespace on it: tests whose nodes open their coordinator from a URL
// (and so cannot move the registry) and claim datacenters or record a
// layout there run on a store of their own — a private server, or a
// database of their own on the shared one — so that they never see each
// other's claims, nor those that earlier runs left on the shared services.

// dieWithTest makes a private server die with the test binary, even when
// it is killed (go test -timeout).
func dieWithTest() *syscall.SysProcAttr { return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} }

// ownRedis starts a redis-server of the test's own on a free loopback
// port, keeping nothing on disk, and returns its address; it is killed
// when the test ends.
func ownRedis(t *testing.T) string {
	t.Helper()
	bin := testenv.Command(t, cmp.Or(os.Getenv("FLAKEID_REDIS_BIN"), "redis-server"),
		"the test runs a Redis of its own; install redis-server (the machine's Redis package) or set FLAKEID_REDIS_BIN")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", t.TempDir(), "--logfile", "")
	cmd.SysProcAttr = dieWithTest()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	c := goredis.NewClient(&goredis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return addr
		}
		if time.Now().After(deadline) {
			t.Fatalf("the test's own redis-server at %s does not answer: %v", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ownEtcd starts an etcd of the test's own and returns its address.
func ownEtcd(t *testing.T) string {
	t.Helper()
	bin := testenv.Command(t, cmp.Or(os.Getenv("FLAKEID_ETCD_BIN"), "etcd"),
		"the test runs an etcd of its own; install etcd-server (./scripts/services.sh does) or set FLAKEID_ETCD_BIN")
	s, err := etcdproc.Start(t.Context(), etcdproc.Options{Bin: bin, Dir: t.TempDir(), Name: "own", SysProcAttr: dieWithTest()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Kill)
	return s.Addr()
}

// ownZooKeeper starts a ZooKeeper of the test's own and returns its address.
func ownZooKeeper(t *testing.T) string {
	t.Helper()
	bin := testenv.Command(t, cmp.Or(os.Getenv("FLAKEID_ZK_BIN"), zkproc.DefaultBin),
		"the test runs a ZooKeeper of its own; install Debian's zookeeper package (./scripts/services.sh does) or set FLAKEID_ZK_BIN")
	s, err := zkproc.Start(t.Context(), zkproc.Options{Bin: bin, Dir: filepath.Join(t.TempDir(), "zookeeper"), SysProcAttr: dieWithTest()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Kill)
	return s.Addr()
}

// ownConsul starts a Consul dev agent of the test's own and returns its
// HTTP address.
func ownConsul(t *testing.T) string {
	t.Helper()
	s, err := consulproc.Start(t.Context(), consulproc.Options{Bin: consulBin(t), Dir: filepath.Join(t.TempDir(), "consul"), Node: "own", SysProcAttr: dieWithTest()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Kill)
	return s.Addr()
}

// ownSQLDatabase is testenv.OwnDatabase on dsn (a driver DSN): a database
// of the test's own on its server, dropped when the test ends.
func ownSQLDatabase(t *testing.T, dsn string) string {
	t.Helper()
	db, _, err := sqldb.OpenDB(dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return testenv.OwnDatabase(t, db, dsn)
}
