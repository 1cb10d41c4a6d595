package sqldb

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/flakeid/flakeid/internal/faultnet"
	"github.com/flakeid/flakeid/internal/testenv"
	"github.com/flakeid/flakeid/worker"
)

// service is one database the tests run against.
type service struct {
	name string
	env  testenv.Service
}

func services() []service {
	return []service{{"postgres", testenv.Postgres()}, {"mysql", testenv.MySQL()}}
}

// forEach runs fn as parallel subtests "postgres" and "mysql", each with the
// service's DSN (a missing service skips, or fails under CI=true).
func forEach(t *testing.T, fn func(t *testing.T, dsn string)) {
	for _, s := range services() {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			fn(t, s.env.Require(t))
		})
	}
}

// testDB opens dsn as a client node would, closed at the end of the test.
func testDB(t testing.TB, dsn string) (*sql.DB, Dialect) {
	t.Helper()
	db, d, err := OpenDB(dsn)
	if err != nil {
		t.Fatalf("OpenDB(%q): %v", dsn, err)
	}
	db.SetMaxOpenConns(4)
	db.SetMaxIdleConns(4)
	db.SetConnMaxLifetime(time.Minute)
	t.Cleanup(func() { db.Close() })
	return db, d
}

// offlineDB is a database handle that never connects (nothing listens on
// port 1), for the checks that must refuse before any statement runs.
func offlineDB(t *testing.T) *sql.DB {
	t.Helper()
	db, err := sql.Open("pgx", "postgres://nobody@127.0.0.1:1/none")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// noFoundRowsDB opens the MySQL dsn without clientFoundRows, so that the
// server counts an UPDATE that changed nothing as no row; it is closed at
// the end of the test.
func noFoundRowsDB(t *testing.T, dsn string) *sql.DB {
	t.Helper()
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ClientFoundRows = false
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(conn)
	t.Cleanup(func() { db.Close() })
	return db
}

func ctx10(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func randomHex(t testing.TB) string {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b[:])
}

// dropAfter drops table name after the test. Register it before the
// clients' own cleanups, which then run before it.
func dropAfter(t testing.TB, admin *sql.DB, d Dialect, name string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := admin.ExecContext(ctx, "DROP TABLE IF EXISTS "+d.quote(name)); err != nil {
			t.Errorf("dropping %s: %v", name, err)
		}
	})
}

// throughProxy starts a faultnet proxy to dsn's server and returns the DSN
// that goes through it; the proxy closes after the test (after the clients'
// databases, whose cleanups the caller registers later).
func throughProxy(t testing.TB, dsn string) (string, *faultnet.Proxy) {
	t.Helper()
	hostport := testenv.HostPort(dsn)
	p, err := faultnet.Listen(hostport)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return strings.Replace(dsn, hostport, p.Addr(), 1), p
}

// concurrently runs fn n times at once and reports each error as what's.
func concurrently(t *testing.T, n int, what string, fn func() error) {
	t.Helper()
	errs := make(chan error, n)
	for range n {
		go func() { errs <- fn() }()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Errorf("%s: %v", what, err)
		}
	}
}

// checkRefusesTables checks, in both dialects, that newStore and
// schemaSQL refuse table names that are not identifiers of at most 63
// bytes, and that newStore refuses a missing dialect or database; what
// names newStore in the messages.
func checkRefusesTables(t *testing.T, what string, newStore func(*sql.DB, Dialect, string) error, schemaSQL func(Dialect, string) (string, error)) {
	t.Helper()
	db := offlineDB(t)
	bad := []string{"1t", "a-b", "a.b", "a b", `x"; DROP TABLE y; --`, "x`y", "é", strings.Repeat("a", 64), "a\x00"}
	for _, d := range []Dialect{Postgres, MySQL} {
		for _, name := range bad {
			if err := newStore(db, d, name); !errors.Is(err, worker.ErrInvalidConfig) {
				t.Errorf("%v: %s(%q) = %v, want ErrInvalidConfig", d, what, name, err)
			}
			if _, err := schemaSQL(d, name); !errors.Is(err, worker.ErrInvalidConfig) {
				t.Errorf("%v: schema SQL of %q: %v, want ErrInvalidConfig", d, name, err)
			}
		}
	}
	if err := newStore(db, Dialect(0), "t"); !errors.Is(err, worker.ErrInvalidConfig) {
		t.Errorf("%s with no dialect: %v", what, err)
	}
	if err := newStore(nil, Postgres, "t"); !errors.Is(err, worker.ErrInvalidConfig) {
		t.Errorf("%s with no db: %v", what, err)
	}
}

// ownDatabase is testenv.OwnDatabase on dsn: a database of the test's own,
// with its own datacenter registry, for the tests that open a coordinator
// from its URL and so cannot name a registry.
func ownDatabase(t testing.TB, dsn string) string {
	t.Helper()
	admin, _ := testDB(t, dsn)
	return testenv.OwnDatabase(t, admin, dsn)
}
