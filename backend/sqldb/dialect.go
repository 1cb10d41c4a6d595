package sqldb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver

	"github.com/flakeid/flakeid/internal/backoff"
	"github.com/flakeid/flakeid/worker"
)

// Dialect is the SQL flavour of the database a Workers talks to.
type Dialect int

const (
	// Postgres is PostgreSQL (10 or later), through
	// github.com/jackc/pgx/v5/stdlib (driver name "pgx"). Tested with
	// PostgreSQL 15.
	Postgres Dialect = iota + 1
	// MySQL is MySQL (5.7 or later) or MariaDB (10.2 or later) with
	// InnoDB, through github.com/go-sql-driver/mysql. Tested with MariaDB
	// 10.11.
	MySQL
)

// String names the dialect: "postgres" or "mysql".
func (d Dialect) String() string {
	switch d {
	case Postgres:
		return "postgres"
	case MySQL:
		return "mysql"
	}
	return "Dialect(" + strconv.Itoa(int(d)) + ")"
}

func (d Dialect) valid() bool { return d == Postgres || d == MySQL }

// DefaultTable is the table name NewWorkers and Open use when none is given.
const DefaultTable = "flakeid_workers"

// validTableName reports whether name matches ^[A-Za-z_][A-Za-z0-9_]{0,62}$:
// the table name is interpolated into every statement (quoted), so nothing
// else is accepted. Written out rather than as a regexp to keep the package
// free of package-level variables.
func validTableName(name string) bool {
	if len(name) < 1 || len(name) > 63 {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c == '_', 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case '0' <= c && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// quote quotes a validated identifier for d.
func (d Dialect) quote(name string) string {
	if d == MySQL {
		return "`" + name + "`"
	}
	return `"` + name + `"`
}

// nowMs is the SQL expression for the database's current time in Unix
// milliseconds. Every expiry is computed and compared with it, never with the
// Go process's clock.
//
//   - PostgreSQL: clock_timestamp(), the actual time (not the transaction's
//     start, which could lie before a lock wait).
//   - MySQL/MariaDB: UTC_TIMESTAMP(6), the statement's start, which does not
//     depend on the session time zone (UNIX_TIMESTAMP(NOW(3)) would be
//     ambiguous in the hour a DST zone falls back).
func (d Dialect) nowMs() string {
	if d == MySQL {
		return "(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000)"
	}
	return "(FLOOR(EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT)"
}

// SchemaSQL returns the DDL of the worker-id table for dialect d: a CREATE
// TABLE IF NOT EXISTS statement that CreateSchema runs and that a migration
// tool can print or apply itself. table must match
// ^[A-Za-z_][A-Za-z0-9_]{0,62}$ ("" means DefaultTable); it is quoted, so it
// is case-sensitive.
//
// One row per (datacenter, worker) slot that was ever held:
//
//	datacenter     BIGINT        the datacenter id
//	worker         BIGINT        the worker id; -1 is the datacenter's lock row (see below)
//	holder         VARCHAR(255)  the owner token; '' when free (released)
//	expires_at_ms  BIGINT        when the lease lapses, Unix ms by the DATABASE's clock; 0 when free
//	high_water_ms  BIGINT        the high-water mark, Unix ms; never decreases
//	PRIMARY KEY (datacenter, worker)
//
// Times are integers of milliseconds rather than TIMESTAMP columns so both
// dialects store and compare them the same way, free of session time zones;
// they are always computed from the database's clock (see nowMs).
//
// The row (datacenter, -1) is created by the first Acquire in a datacenter
// and holds nothing: every Acquire locks it first (SELECT … FOR UPDATE), so
// acquisitions in one datacenter are serialised, and a never-used id (no row
// yet) cannot be handed out twice. Renew and Release are single conditional
// UPDATEs that need no lock row. List never reports the lock row.
//
// On MySQL the holder column uses the utf8mb4_bin collation so that owner
// tokens compare exactly (case-sensitively); tokens with trailing spaces,
// which that PAD SPACE collation would ignore, are refused by Acquire.
func SchemaSQL(d Dialect, table string) (string, error) {
	if table == "" {
		table = DefaultTable
	}
	if !d.valid() {
		return "", fmt.Errorf("%w: sqldb: unknown dialect %v", worker.ErrInvalidConfig, d)
	}
	if !validTableName(table) {
		return "", fmt.Errorf("%w: sqldb: table name %q does not match ^[A-Za-z_][A-Za-z0-9_]{0,62}$", worker.ErrInvalidConfig, table)
	}
	holder := "VARCHAR(255) NOT NULL DEFAULT ''"
	suffix := ""
	if d == MySQL {
		holder = "VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL DEFAULT ''"
		suffix = " ENGINE=InnoDB"
	}
	return "CREATE TABLE IF NOT EXISTS " + d.quote(table) + " (\n" +
		"  datacenter BIGINT NOT NULL,\n" +
		"  worker BIGINT NOT NULL,\n" +
		"  holder " + holder + ",\n" +
		"  expires_at_ms BIGINT NOT NULL DEFAULT 0,\n" +
		"  high_water_ms BIGINT NOT NULL DEFAULT 0,\n" +
		"  PRIMARY KEY (datacenter, worker)\n" +
		")" + suffix, nil
}

// statements are the SQL texts of one Workers, built once by NewWorkers for
// its dialect and table.
type statements struct {
	schema     string
	lockInsert string // create the datacenter's lock row if missing
	lockSelect string // lock it
	slots      string // the slots [0, n) of a datacenter, with the database's now
	insert     string // take a never-used id
	take       string // take a free or expired id whose mark is as read
	renew      string
	release    string
	slot       string // one slot, with the database's now
	list       string
}

func newStatements(d Dialect, table string) (statements, error) {
	schema, err := SchemaSQL(d, table)
	if err != nil {
		return statements{}, err
	}
	t, now := d.quote(table), d.nowMs()
	s := statements{
		schema:     schema,
		lockSelect: "SELECT worker FROM " + t + " WHERE datacenter = ? AND worker = -1 FOR UPDATE",
		slots: "SELECT worker, holder, expires_at_ms, high_water_ms, " + now + " FROM " + t +
			" WHERE datacenter = ? AND worker >= 0 AND worker < ? ORDER BY worker",
		insert: "INSERT INTO " + t + " (datacenter, worker, holder, expires_at_ms, high_water_ms) VALUES (?, ?, ?, " + now + " + ?, ?)",
		take: "UPDATE " + t + " SET holder = ?, expires_at_ms = " + now + " + ?, high_water_ms = GREATEST(high_water_ms, ?)" +
			" WHERE datacenter = ? AND worker = ? AND high_water_ms = ? AND (holder = '' OR expires_at_ms <= " + now + ")",
		renew: "UPDATE " + t + " SET expires_at_ms = " + now + " + ?, high_water_ms = GREATEST(high_water_ms, ?)" +
			" WHERE datacenter = ? AND worker = ? AND holder = ? AND expires_at_ms > " + now,
		release: "UPDATE " + t + " SET holder = '', expires_at_ms = 0, high_water_ms = GREATEST(high_water_ms, ?)" +
			" WHERE datacenter = ? AND worker = ? AND holder = ? AND expires_at_ms > " + now,
		slot: "SELECT holder, expires_at_ms, high_water_ms, " + now + " FROM " + t + " WHERE datacenter = ? AND worker = ?",
		list: "SELECT worker, holder, expires_at_ms, high_water_ms FROM " + t + " WHERE datacenter = ? AND worker >= 0 ORDER BY worker",
	}
	if d == MySQL {
		s.lockInsert = "INSERT INTO " + t + " (datacenter, worker) VALUES (?, -1) ON DUPLICATE KEY UPDATE worker = worker"
	} else {
		s.lockInsert = "INSERT INTO " + t + " (datacenter, worker) VALUES (?, -1) ON CONFLICT (datacenter, worker) DO NOTHING"
	}
	if d == Postgres {
		for _, p := range []*string{&s.lockInsert, &s.lockSelect, &s.slots, &s.insert, &s.take, &s.renew, &s.release, &s.slot, &s.list} {
			*p = dollarParams(*p)
		}
	}
	return s, nil
}

// dollarParams rewrites ? placeholders as PostgreSQL's $1, $2, …; the
// statements of this package have no ? inside literals.
func dollarParams(q string) string {
	var b strings.Builder
	n := 0
	for _, r := range q {
		if r == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// DialectOf tells the dialect of a DSN, without connecting:
//
//   - "postgres://…" or "postgresql://…" (a URL, any letter case of the
//     scheme) is PostgreSQL, opened with pgx;
//   - anything else is a go-sql-driver/mysql DSN
//     ("user:pass@tcp(host:3306)/db?param=value"), which must parse.
//
// PostgreSQL's key=value DSN form is not recognised: use the URL form.
func DialectOf(dsn string) (Dialect, error) {
	l := strings.ToLower(dsn)
	if strings.HasPrefix(l, "postgres://") || strings.HasPrefix(l, "postgresql://") {
		return Postgres, nil
	}
	if _, err := mysql.ParseDSN(dsn); err != nil {
		return 0, fmt.Errorf("%w: sqldb: the DSN is neither a postgres:// URL nor a MySQL DSN: %w", worker.ErrInvalidConfig, err)
	}
	return MySQL, nil
}

// OpenDB opens a *sql.DB for dsn, with the dialect DialectOf tells, without
// connecting yet. A MySQL DSN is opened with clientFoundRows=true (so that
// an UPDATE reports the rows it matched), interpolateParams=true (one round
// trip per statement) and a 10s dial timeout unless it sets one; the
// database's own settings (time zone, parseTime) do not matter to this
// package. The pool is kept small: at most 4 open connections, idle ones
// closed after a minute.
func OpenDB(dsn string) (*sql.DB, Dialect, error) {
	d, err := DialectOf(dsn)
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

// createTable runs schema, a CREATE TABLE IF NOT EXISTS, so that several
// nodes may run it at once. MySQL serialises such statements itself (a
// metadata lock). PostgreSQL does not: two sessions creating the same table
// both pass the "if not exists" check, and the second fails on the catalog's
// unique indexes (duplicate key 23505 on pg_type or pg_class, or "type
// already exists" 42710) once the first has committed; run again, it finds
// the table. So such a collision is retried, whoever the other creator is
// (another node, Leaf, an operator).
func createTable(ctx context.Context, db *sql.DB, schema string) error {
	const attempts = 4
	bo := backoff.Backoff{Min: 20 * time.Millisecond, Max: 200 * time.Millisecond}
	var err error
	for attempt := range attempts {
		if _, err = db.ExecContext(ctx, schema); err == nil || !retryable(err) && !duplicateObject(err) || attempt == attempts-1 {
			break
		}
		if sleepCtx(ctx, bo.Next(attempt)) != nil {
			break
		}
	}
	return err
}

// duplicateObject reports a catalog collision of two concurrent CREATE …
// IF NOT EXISTS on PostgreSQL: duplicate_object (42710) or duplicate_table
// (42P07).
func duplicateObject(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "42710" || pe.Code == "42P07")
}

// retryable reports whether err is a transient conflict after which an
// Acquire transaction is run again: a serialisation failure or deadlock
// (PostgreSQL 40001, 40P01; MySQL 1213), a lock wait timeout (PostgreSQL
// 55P03, MySQL 1205), or a duplicate key from a racing insert (PostgreSQL
// 23505, MySQL 1062).
func retryable(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case "40001", "40P01", "55P03", "23505":
			return true
		}
	}
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		switch me.Number {
		case 1213, 1205, 1062:
			return true
		}
	}
	return false
}
