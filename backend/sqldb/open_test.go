package sqldb

import (
	"context"
	"errors"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/flakeid/flakeid/segment"
	"github.com/flakeid/flakeid/worker"
)

// mustURL parses raw.
func mustURL(t testing.TB, raw string) *url.URL {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// testURL is the postgres:// or mysql:// URL of a test DSN (testenv gives
// MySQL as a go-sql-driver DSN), with the query parameters set.
func testURL(t testing.TB, dsn string, set map[string]string) *url.URL {
	t.Helper()
	var u *url.URL
	if d, err := dialectOf(dsn); err != nil {
		t.Fatal(err)
	} else if d == Postgres {
		u = mustURL(t, dsn)
	} else {
		cfg, err := mysql.ParseDSN(dsn)
		if err != nil {
			t.Fatal(err)
		}
		u = &url.URL{Scheme: "mysql", User: url.User(cfg.User), Host: cfg.Addr, Path: "/" + cfg.DBName}
		if cfg.Passwd != "" {
			u.User = url.UserPassword(cfg.User, cfg.Passwd)
		}
		if i := strings.IndexByte(dsn, '?'); i >= 0 {
			u.RawQuery = dsn[i+1:]
		}
	}
	q := u.Query()
	for k, v := range set {
		q.Set(k, v)
	}
	u.RawQuery = q.Encode()
	return u
}

func TestDialectOf(t *testing.T) {
	for dsn, want := range map[string]Dialect{
		"postgres://postgres@127.0.0.1:5432/test?sslmode=disable": Postgres,
		"postgresql://u:p@db/x":                                   Postgres,
		"POSTGRES://u@db/x":                                       Postgres,
		"root@tcp(127.0.0.1:3306)/test":                           MySQL,
		"u:p@tcp(db:3306)/x?parseTime=true":                       MySQL,
		"/test":                                                   MySQL,
	} {
		if got, err := dialectOf(dsn); err != nil || got != want {
			t.Errorf("dialectOf(%q) = %v, %v; want %v", dsn, got, err, want)
		}
		db, got, err := OpenDB(dsn)
		if err != nil || got != want {
			t.Errorf("OpenDB(%q) = %v, %v; want %v", dsn, got, err, want)
			continue
		}
		db.Close()
	}
	for _, dsn := range []string{"host=db user=u", "mysql://root@db/x", "nonsense"} {
		if got, err := dialectOf(dsn); !errors.Is(err, worker.ErrInvalidConfig) {
			t.Errorf("dialectOf(%q) = %v, %v; want ErrInvalidConfig", dsn, got, err)
		}
		if _, _, err := OpenDB(dsn); !errors.Is(err, worker.ErrInvalidConfig) {
			t.Errorf("OpenDB(%q) = %v; want ErrInvalidConfig", dsn, err)
		}
	}
}

// The URL of the flags becomes the driver's DSN: ?table= is taken out,
// every other parameter passes, a mysql:// URL becomes go-sql-driver's
// user:password@tcp(host:port)/db form with port 3306 by default.
func TestDriverDSN(t *testing.T) {
	for _, c := range []struct{ url, dsn, table string }{
		{"postgres://u:pw@db:5432/app?sslmode=disable&table=ids", "postgres://u:pw@db:5432/app?sslmode=disable", "ids"},
		{"postgresql://u@db/app", "postgresql://u@db/app", ""},
		{"POSTGRES://u@db/app?table=t&application_name=x", "postgres://u@db/app?application_name=x", "t"},
		{"mysql://root@db/app", "root@tcp(db:3306)/app", ""},
		{"mysql://root:p%40ss@db:3307/app?table=t&parseTime=true", "root:p@ss@tcp(db:3307)/app?parseTime=true", "t"},
		{"MySQL://db/app?tls=skip-verify", "tcp(db:3306)/app?tls=skip-verify", ""},
		{"mysql://u:@[::1]/app", "u:@tcp([::1]:3306)/app", ""},
	} {
		dsn, table, err := driverDSN(mustURL(t, c.url))
		if err != nil || dsn != c.dsn || table != c.table {
			t.Errorf("driverDSN(%s) = %q, %q, %v; want %q, %q", c.url, dsn, table, err, c.dsn, c.table)
		}
	}
}

// What the openers make of a URL before they connect: the defaults, the
// tables the URL names, and a database the result owns.
func TestOpenURLDefaults(t *testing.T) {
	for raw, want := range map[string]struct {
		d               Dialect
		table, registry string
	}{
		"postgres://u@127.0.0.1:1/app":             {Postgres, DefaultTable, DefaultRegistry},
		"postgresql://u@127.0.0.1:1/app?table=ids": {Postgres, "ids", DefaultRegistry},
		"mysql://u@127.0.0.1:1/app?x":              {MySQL, DefaultTable, DefaultRegistry},
		"mysql://u@127.0.0.1:1/app?table=ids&x":    {MySQL, "ids", DefaultRegistry},
	} {
		w, err := workersOfURL(mustURL(t, raw))
		if err != nil {
			t.Errorf("%s: %v", raw, err)
			continue
		}
		if w.Dialect() != want.d || w.Table() != want.table || w.Registry() != want.registry || !w.ownedDB {
			t.Errorf("%s: dialect %v, table %q, registry %q, owned %v; want %v, %q, %q, owned",
				raw, w.Dialect(), w.Table(), w.Registry(), w.ownedDB, want.d, want.table, want.registry)
		}
		if err := w.Close(); err != nil {
			t.Errorf("%s: Close: %v", raw, err)
		}
		if err := w.db.PingContext(t.Context()); err == nil || !strings.Contains(err.Error(), "database is closed") {
			t.Errorf("%s: after Close the database answers %v, want it closed", raw, err)
		}
	}
	// A registry of the URL's own would split the database's ID space.
	for _, raw := range []string{"postgres://u@h/app?registry=url", "mysql://u@h/app?table=ids&registry=" + DefaultRegistry} {
		if w, err := workersOfURL(mustURL(t, raw)); !errors.Is(err, worker.ErrInvalidConfig) ||
			!strings.Contains(err.Error(), "registry= is not accepted") || !strings.Contains(err.Error(), DefaultRegistry) {
			t.Errorf("%s: %v, %v; want ErrInvalidConfig refusing registry= and naming %s", raw, w, err, DefaultRegistry)
		}
	}
	for raw, table := range map[string]string{
		"postgres://u@127.0.0.1:1/app":         DefaultSegmentTable,
		"mysql://u@127.0.0.1:1/app?table=tags": "tags",
	} {
		s, err := segmentsOfURL(mustURL(t, raw))
		if err != nil || s.Table() != table || !s.ownedDB {
			t.Errorf("%s: %v, %v; want table %q, owned", raw, s, err, table)
			continue
		}
		if err := s.Close(); err != nil {
			t.Errorf("%s: Close: %v", raw, err)
		}
		if err := s.db.PingContext(t.Context()); err == nil || !strings.Contains(err.Error(), "database is closed") {
			t.Errorf("%s: after Close the database answers %v, want it closed", raw, err)
		}
	}
}

// A URL the openers cannot use is refused before any connection, with an
// error wrapping ErrInvalidConfig that says what is wrong and does not
// repeat the URL; a server that does not answer is unavailable.
func TestOpenURLErrors(t *testing.T) {
	openers := map[string]func(context.Context, *url.URL) error{
		"OpenWorkers": func(ctx context.Context, u *url.URL) error {
			w, err := OpenWorkers(ctx, u)
			if err == nil {
				w.Close()
			}
			return err
		},
		"OpenSegments": func(ctx context.Context, u *url.URL) error {
			s, err := OpenSegments(ctx, u)
			if err == nil {
				s.Close()
			}
			return err
		},
	}
	for name, open := range openers {
		for raw, want := range map[string]string{
			"postgres://u:s3cret@127.0.0.1:1":            "no database name in the path",
			"mysql://u:s3cret@127.0.0.1:1/?table=t":      "no database name in the path",
			"redis://u:s3cret@127.0.0.1:1/0":             `scheme "redis", want postgres, postgresql or mysql`,
			"postgres://u:s3cret@127.0.0.1:1/db?table=1": `table name "1" does not match`,
			"mysql://u:s3cret@127.0.0.1:1/db?table=a-b":  `table name "a-b" does not match`,
		} {
			err := open(t.Context(), mustURL(t, raw))
			if !errors.Is(err, worker.ErrInvalidConfig) || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "s3cret") {
				t.Errorf("%s(%s) = %v; want ErrInvalidConfig saying %q, without the password", name, raw, err, want)
			}
		}
	}
	if err := openers["OpenWorkers"](t.Context(), mustURL(t, "postgres://u@h:1/db?table="+DefaultRegistry)); !errors.Is(err, worker.ErrInvalidConfig) ||
		!strings.Contains(err.Error(), `the registry table "`+DefaultRegistry+`" is the worker table`) {
		t.Errorf("OpenWorkers with ?table= the registry: %v, want ErrInvalidConfig", err)
	}
	// Nothing listens on port 1.
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	for _, raw := range []string{"postgres://u:s3cret@127.0.0.1:1/x?sslmode=disable", "mysql://u:s3cret@127.0.0.1:1/x"} {
		if err := openers["OpenWorkers"](ctx, mustURL(t, raw)); !errors.Is(err, worker.ErrUnavailable) || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("OpenWorkers(%s) with no server: %v, want ErrUnavailable without the password", raw, err)
		}
		if err := openers["OpenSegments"](ctx, mustURL(t, raw)); !errors.Is(err, segment.ErrUnavailable) || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("OpenSegments(%s) with no server: %v, want segment.ErrUnavailable without the password", raw, err)
		}
	}
}

// driverParam is a driver option of the URL that the test reads back from
// the session, and the query that reads it: it shows that the URL's other
// parameters reach the driver.
func driverParam(d Dialect, value int) (key, val, query string) {
	if d == Postgres {
		return "application_name", "flakeid_" + strconv.Itoa(value), "SELECT current_setting('application_name')"
	}
	return "wait_timeout", strconv.Itoa(value), "SELECT CAST(@@SESSION.wait_timeout AS CHAR)"
}

// OpenWorkers creates the tables the URL names, passes its other parameters
// to the driver, and gives coordinators that share the tables; Close closes
// the database it opened, never one given to NewWorkers. A database of the
// test's own: the URL's registry is the database's one, DefaultRegistry.
func TestOpenWorkers(t *testing.T) {
	forEach(t, func(t *testing.T, dsn string) {
		dsn = ownDatabase(t, dsn)
		admin, d := testDB(t, dsn)
		table, registry := tableName(t), DefaultRegistry
		key, val, query := driverParam(d, 4321)
		u := testURL(t, dsn, map[string]string{"table": table, key: val})
		ctx := ctx10(t)
		var claims []int64
		for range 2 {
			w, err := OpenWorkers(ctx, u)
			if err != nil {
				t.Fatalf("OpenWorkers: %v", err)
			}
			defer w.Close()
			if w.Dialect() != d || w.Table() != table || w.Registry() != registry {
				t.Fatalf("OpenWorkers: dialect %v, table %q, registry %q; want %v, %q, %q", w.Dialect(), w.Table(), w.Registry(), d, table, registry)
			}
			var got string
			if err := w.db.QueryRowContext(ctx, query).Scan(&got); err != nil || got != val {
				t.Fatalf("%s: %q, %v; want %q from the URL", query, got, err, val)
			}
			cl, err := w.Acquire(ctx, req("node"+strconv.Itoa(len(claims)), 4))
			if err != nil {
				t.Fatalf("Acquire: %v", err)
			}
			claims = append(claims, cl.WorkerID())
		}
		if claims[0] == claims[1] {
			t.Fatalf("two coordinators on one table both took worker %d", claims[0])
		}
		other, err := NewWorkers(admin, d, table)
		if err != nil {
			t.Fatal(err)
		}
		infos, err := other.List(ctx, 0)
		if err != nil || len(infos) != 2 || infos[0].Holder == "" || infos[1].Holder == "" {
			t.Fatalf("List through another client = %+v, %v; want the two workers held", infos, err)
		}
		w, err := OpenWorkers(ctx, u)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := w.List(ctx, 0); !errors.Is(err, worker.ErrUnavailable) || !strings.Contains(err.Error(), "closed") {
			t.Fatalf("List after Close: %v, want ErrUnavailable, the database closed", err)
		}
		if err := other.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := other.List(ctx, 0); err != nil {
			t.Fatalf("Close of a coordinator made by NewWorkers closed the caller's database: %v", err)
		}
	})
}

// OpenSegments creates the table the URL names and gives a store on it;
// Close closes the database it opened, never one given to NewSegments.
func TestOpenSegments(t *testing.T) {
	forEach(t, func(t *testing.T, dsn string) {
		admin, d := testDB(t, dsn)
		table := segTable(t, admin, d)
		key, val, query := driverParam(d, 4322)
		u := testURL(t, dsn, map[string]string{"table": table, key: val})
		ctx := ctx10(t)
		s, err := OpenSegments(ctx, u)
		if err != nil {
			t.Fatalf("OpenSegments: %v", err)
		}
		defer s.Close()
		if s.Dialect() != d || s.Table() != table {
			t.Fatalf("OpenSegments: dialect %v, table %q; want %v, %q", s.Dialect(), s.Table(), d, table)
		}
		var got string
		if err := s.db.QueryRowContext(ctx, query).Scan(&got); err != nil || got != val {
			t.Fatalf("%s: %q, %v; want %q from the URL", query, got, err, val)
		}
		if err := s.Create(ctx, segment.Tag{Name: "opened", Step: 10}); err != nil {
			t.Fatal(err)
		}
		if r, err := s.Fetch(ctx, "opened", 10); err != nil || r != (segment.Range{Start: 1, End: 11}) {
			t.Fatalf("Fetch = %+v, %v", r, err)
		}
		// Opening it again finds the table and leaves its rows.
		again, err := OpenSegments(ctx, u)
		if err != nil {
			t.Fatal(err)
		}
		if tag, err := again.Get(ctx, "opened"); err != nil || tag.MaxID != 11 {
			t.Fatalf("Get through a second store = %+v, %v; want max id 11", tag, err)
		}
		if err := again.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := again.Get(ctx, "opened"); !errors.Is(err, segment.ErrUnavailable) || !strings.Contains(err.Error(), "closed") {
			t.Fatalf("Get after Close: %v, want ErrUnavailable, the database closed", err)
		}
		c, err := NewSegments(admin, d, table)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Get(ctx, "opened"); err != nil {
			t.Fatalf("Close of a store made by NewSegments closed the caller's database: %v", err)
		}
	})
}
