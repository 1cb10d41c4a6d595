// Package testenv tells integration tests where the real services are, and
// enforces the project's rule: under CI=true a test whose service is missing
// fails; elsewhere it is skipped with the command that starts the services.
//
// Addresses come from environment variables, with defaults that match
// scripts/services.sh:
//
//	FLAKEID_TEST_ETCD      127.0.0.1:23790
//	FLAKEID_TEST_REDIS     127.0.0.1:6379
//	FLAKEID_TEST_POSTGRES  postgres://postgres@127.0.0.1:5432/test?sslmode=disable
//	FLAKEID_TEST_MYSQL     root@tcp(127.0.0.1:3306)/test
//	FLAKEID_TEST_ZK        127.0.0.1:21810
//	FLAKEID_TEST_CONSUL    127.0.0.1:28500
package testenv

import (
	"net"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// A Service is one external service the tests use.
type Service struct {
	Env     string // the variable that overrides the address
	Default string // the address or DSN when the variable is unset
	Name    string
}

// Etcd is the etcd server.
func Etcd() Service { return Service{"FLAKEID_TEST_ETCD", "127.0.0.1:23790", "etcd"} }

// Redis is the Redis server.
func Redis() Service { return Service{"FLAKEID_TEST_REDIS", "127.0.0.1:6379", "Redis"} }

// Postgres is the PostgreSQL server.
func Postgres() Service {
	return Service{"FLAKEID_TEST_POSTGRES", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable", "PostgreSQL"}
}

// MySQL is the MySQL or MariaDB server.
func MySQL() Service {
	return Service{"FLAKEID_TEST_MYSQL", "root@tcp(127.0.0.1:3306)/test", "MySQL/MariaDB"}
}

// ZooKeeper is the ZooKeeper server.
func ZooKeeper() Service { return Service{"FLAKEID_TEST_ZK", "127.0.0.1:21810", "ZooKeeper"} }

// Consul is the Consul agent (HTTP API).
func Consul() Service { return Service{"FLAKEID_TEST_CONSUL", "127.0.0.1:28500", "Consul"} }

// NATS is the NATS server, with JetStream.
func NATS() Service { return Service{"FLAKEID_TEST_NATS", "127.0.0.1:4222", "NATS"} }

// CI reports whether the tests run in CI (CI=true), where a missing service
// is a failure.
func CI() bool { return os.Getenv("CI") == "true" }

// DSN returns the service's address or DSN, without checking it.
func (s Service) DSN() string {
	if v := os.Getenv(s.Env); v != "" {
		return v
	}
	return s.Default
}

// Require returns the service's address or DSN after checking that its TCP
// port answers. A service that does not answer fails the test under CI and
// skips it elsewhere.
func (s Service) Require(t testing.TB) string {
	t.Helper()
	dsn := s.DSN()
	hostport := HostPort(dsn)
	c, err := net.DialTimeout("tcp", hostport, 2*time.Second)
	if err != nil {
		missing(t, s.Name+" is not reachable at "+hostport+" ("+err.Error()+"); start it with ./scripts/services.sh or set "+s.Env)
	}
	c.Close()
	return dsn
}

// Command returns the path of the executable file (a name looked up in
// PATH, or a path) that a test runs itself, such as a private server to
// pause. A missing one fails the test under CI and skips it elsewhere, with
// the message why followed by the lookup's error.
func Command(t testing.TB, file, why string) string {
	t.Helper()
	path, err := exec.LookPath(file)
	if err != nil {
		missing(t, why+" ("+err.Error()+")")
	}
	return path
}

// missing ends a test whose service or program is missing: a failure under
// CI, a skip elsewhere.
func missing(t testing.TB, msg string) {
	t.Helper()
	if CI() {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// HostPort extracts host:port from an address, a URL DSN or a MySQL DSN
// ("user@tcp(host:port)/db").
func HostPort(dsn string) string {
	if i := strings.Index(dsn, "tcp("); i >= 0 {
		rest := dsn[i+4:]
		if j := strings.IndexByte(rest, ')'); j >= 0 {
			return rest[:j]
		}
	}
	if u, err := url.Parse(dsn); err == nil && u.Host != "" {
		return u.Host
	}
	return dsn
}
