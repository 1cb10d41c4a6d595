package sqldb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver

	"github.com/flakeid/flakeid/backend/internal/coord"
	"github.com/flakeid/flakeid/worker"
)

// OpenWorkers opens the coordinator the URL names:
//
//	postgres://user[:password]@host:port/db[?table=T&…]  (postgresql:// too; pgx options pass through)
//	mysql://user[:password]@host[:port]/db[?table=T&…]   (port 3306 by default; go-sql-driver/mysql options pass through)
//
// ?table= names the worker table (default DefaultTable), and does not reach
// the driver; ?registry= is refused, saying why (the registry is
// DefaultRegistry, one per database). The database is opened
// with OpenDB's settings, must answer (else the error wraps
// worker.ErrUnavailable), and both tables are created when missing
// (CreateSchema; SchemaSQL gives their DDL for a migration tool). A URL
// this package cannot use is an error wrapping worker.ErrInvalidConfig; no
// error contains the URL, which may hold a password.
//
// The *Workers owns the database it opened: Close closes it.
func OpenWorkers(ctx context.Context, u *url.URL) (*Workers, error) {
	w, err := workersOfURL(u)
	if err != nil {
		return nil, err
	}
	if err := w.db.PingContext(ctx); err != nil {
		w.db.Close()
		return nil, fmt.Errorf("%w: %w", worker.ErrUnavailable, err)
	}
	if err := w.CreateSchema(ctx); err != nil {
		w.db.Close()
		return nil, err
	}
	return w, nil
}

// workersOfURL is OpenWorkers up to the first round trip: the database is
// opened (not connected) and owned by the returned coordinator.
func workersOfURL(u *url.URL) (*Workers, error) {
	if err := checkScheme(u); err != nil {
		return nil, err
	}
	if err := coord.RefuseRegistry(u, "the table "+DefaultRegistry); err != nil {
		return nil, err
	}
	// A misspelling of ours would reach the driver, which takes any name
	// (a PostgreSQL runtime parameter, a MySQL system variable).
	if err := coord.CheckTypos(u, "table"); err != nil {
		return nil, err
	}
	dsn, table, err := driverDSN(u)
	if err != nil {
		return nil, err
	}
	db, d, err := OpenDB(dsn)
	if err != nil {
		return nil, err
	}
	w, err := NewWorkers(db, d, table)
	if err != nil {
		db.Close()
		return nil, err
	}
	w.ownedDB = true
	return w, nil
}

// OpenSegments opens the segment store the URL names, in the forms of
// OpenWorkers:
//
//	postgres://user[:password]@host:port/db[?table=T&…]  (postgresql:// too; pgx options pass through)
//	mysql://user[:password]@host[:port]/db[?table=T&…]   (port 3306 by default; go-sql-driver/mysql options pass through)
//
// ?table= names the table (default DefaultSegmentTable, Meituan Leaf's
// leaf_alloc; DefaultTinyidTable with ?format=tinyid) and ?format=tinyid
// opens Didi Tinyid's tables (NewTinyidSegments) instead of Leaf's
// (?format=leaf, the default); neither reaches the driver. The database is opened with
// OpenDB's settings and the table is created when missing
// (CreateSegmentSchema, which leaves a table Leaf created as it is); a
// database that does not answer is an error wrapping segment.ErrUnavailable.
// A URL this package cannot use is an error wrapping
// worker.ErrInvalidConfig; no error contains the URL.
//
// The *Segments owns the database it opened: Close closes it.
func OpenSegments(ctx context.Context, u *url.URL) (*Segments, error) {
	s, err := segmentsOfURL(u)
	if err != nil {
		return nil, err
	}
	if err := s.CreateSegmentSchema(ctx); err != nil {
		s.db.Close()
		return nil, err
	}
	return s, nil
}

// segmentsOfURL is OpenSegments up to the first round trip: the database is
// opened (not connected) and owned by the returned store.
func segmentsOfURL(u *url.URL) (*Segments, error) {
	if err := checkScheme(u); err != nil {
		return nil, err
	}
	if err := coord.CheckTypos(u, "table", "format"); err != nil {
		return nil, err
	}
	vals, rest := coord.TakeQuery(u, "format")
	tinyid, err := tinyidFormat(vals[0])
	if err != nil {
		return nil, err
	}
	dsn, table, err := driverDSN(rest)
	if err != nil {
		return nil, err
	}
	db, d, err := OpenDB(dsn)
	if err != nil {
		return nil, err
	}
	newStore := NewSegments
	if tinyid {
		newStore = NewTinyidSegments
	}
	s, err := newStore(db, d, table)
	if err != nil {
		db.Close()
		return nil, err
	}
	s.ownedDB = true
	return s, nil
}

// urlError is a URL the openers cannot use: its text is only what is
// wrong (the caller names the URL), and it wraps worker.ErrInvalidConfig.
func urlError(what string) error { return coord.InvalidURL(errors.New(what)) }

// checkScheme refuses a URL of a scheme the openers do not know.
func checkScheme(u *url.URL) error {
	switch strings.ToLower(u.Scheme) {
	case "postgres", "postgresql", "mysql":
		return nil
	}
	return urlError(fmt.Sprintf("scheme %q, want postgres, postgresql or mysql", u.Scheme))
}

// driverDSN turns a postgres://, postgresql:// or mysql:// URL into the
// driver's DSN and the table name it names (?table=, default ""). Every other
// query parameter passes to the driver.
func driverDSN(u *url.URL) (dsn, table string, err error) {
	if strings.TrimPrefix(u.Path, "/") == "" {
		return "", "", urlError("no database name in the path")
	}
	vals, v := coord.TakeQuery(u, "table")
	table = vals[0]
	if !strings.EqualFold(u.Scheme, "mysql") {
		return v.String(), table, nil
	}
	// go-sql-driver/mysql: user:password@tcp(host:port)/db?params
	var userinfo string
	if u.User != nil {
		userinfo = u.User.Username()
		if p, ok := u.User.Password(); ok {
			userinfo += ":" + p
		}
		userinfo += "@"
	}
	host := u.Host
	if u.Port() == "" {
		host += ":3306"
	}
	dsn = userinfo + "tcp(" + host + ")/" + strings.TrimPrefix(u.Path, "/")
	if v.RawQuery != "" {
		dsn += "?" + v.RawQuery
	}
	return dsn, table, nil
}

// dialectOf tells the dialect of a DSN, without connecting:
//
//   - "postgres://…" or "postgresql://…" (a URL, any letter case of the
//     scheme) is PostgreSQL, opened with pgx;
//   - anything else is a go-sql-driver/mysql DSN
//     ("user:pass@tcp(host:3306)/db?param=value"), which must parse.
//
// PostgreSQL's key=value DSN form is not recognised: use the URL form.
func dialectOf(dsn string) (Dialect, error) {
	l := strings.ToLower(dsn)
	if strings.HasPrefix(l, "postgres://") || strings.HasPrefix(l, "postgresql://") {
		return Postgres, nil
	}
	if _, err := mysql.ParseDSN(dsn); err != nil {
		return 0, fmt.Errorf("%w: sqldb: the DSN is neither a postgres:// URL nor a MySQL DSN: %w", worker.ErrInvalidConfig, err)
	}
	return MySQL, nil
}

// OpenDB opens a *sql.DB for a driver's DSN, without connecting yet, for
// NewWorkers and NewSegments (the caller closes it), and tells its dialect:
//
//   - "postgres://…" or "postgresql://…" (a URL, any letter case of the
//     scheme) is PostgreSQL, opened with pgx; PostgreSQL's key=value DSN
//     form is not recognised;
//   - anything else is a go-sql-driver/mysql DSN
//     ("user:pass@tcp(host:3306)/db?param=value"), which must parse; note
//     that a mysql:// URL is not one (OpenWorkers and OpenSegments take
//     those).
//
// A MySQL DSN is opened with clientFoundRows=true (so that an UPDATE
// reports the rows it matched), interpolateParams=true (one round trip per
// statement) and a 10s dial timeout unless it sets one; the database's own
// settings (time zone, parseTime) do not matter to this package. The pool
// is kept small: at most 4 open connections, idle ones closed after a
// minute. A DSN of neither form is an error wrapping
// worker.ErrInvalidConfig.
func OpenDB(dsn string) (*sql.DB, Dialect, error) {
	d, err := dialectOf(dsn)
	if err != nil {
		return nil, 0, err
	}
	var db *sql.DB
	switch d {
	case Postgres:
		db, err = sql.Open("pgx", dsn)
		if err != nil {
			return nil, 0, fmt.Errorf("%w: sqldb: postgres DSN: %w", worker.ErrInvalidConfig, err)
		}
	case MySQL:
		cfg, err := mysql.ParseDSN(dsn)
		if err != nil {
			return nil, 0, fmt.Errorf("%w: sqldb: mysql DSN: %w", worker.ErrInvalidConfig, err)
		}
		cfg.ClientFoundRows = true
		cfg.InterpolateParams = true
		if cfg.Timeout == 0 {
			cfg.Timeout = 10 * time.Second
		}
		conn, err := mysql.NewConnector(cfg)
		if err != nil {
			return nil, 0, fmt.Errorf("%w: sqldb: mysql DSN: %w", worker.ErrInvalidConfig, err)
		}
		db = sql.OpenDB(conn)
	}
	db.SetMaxOpenConns(4)
	db.SetMaxIdleConns(4)
	db.SetConnMaxIdleTime(time.Minute)
	return db, d, nil
}
