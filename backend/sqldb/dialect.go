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

// DefaultTable is the table name NewWorkers and OpenWorkers use when none is
// given.
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

// DefaultRegistry is the datacenter registry table: one per database (on
// PostgreSQL, per schema its connections' search_path creates tables in),
// shared by every worker table of it, so that no two clusters on it can
// hold the same datacenter and worker id or use two layouts, whatever their
// tables.
const DefaultRegistry = "flakeid_datacenters"

// SchemaSQL returns the DDL of the worker-id table for dialect d, followed
// by that of the datacenter registry table DefaultRegistry (see
// RegistrySchemaSQL): two CREATE TABLE IF NOT EXISTS statements, each ended
// by a semicolon, that CreateSchema runs and that a migration tool can print
// or apply itself. table must match ^[A-Za-z_][A-Za-z0-9_]{0,62}$ (""
// means DefaultTable); it is quoted, so it is case-sensitive.
//
// One row per (datacenter, worker) slot that was ever held:
//
//	datacenter     BIGINT        the datacenter id
//	worker         BIGINT        the worker id; -1 and -2 are the datacenter's lock and record rows (see below)
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
// yet) cannot be handed out twice. A renewal, a release or a lowered mark
// (one slot changed) is one UPDATE guarded by the slot and the record row
// being as read, and needs no lock row.
//
// The row (datacenter, -2) is the datacenter's namespace record
// (worker.Namespace), in the same columns: holder is the incarnation (16 hex
// digits), a space and the ID-space contract; expires_at_ms is when it was
// initialised and high_water_ms its floor, both Unix ms by the database's
// clock. It is written only by a transaction that holds the lock row. Being
// a row of the same table, it goes wherever the slots go: a TRUNCATE, a
// DELETE, a restore or a failover takes or brings back both together. List
// reports neither row. (Tables created by flakeid versions without the
// record need no change: the first Acquire writes the record.)
//
// On MySQL the holder column uses the utf8mb4_bin collation so that owner
// tokens compare exactly (case-sensitively); tokens with trailing spaces,
// which that PAD SPACE collation would ignore, are refused by Acquire.
func SchemaSQL(d Dialect, table string) (string, error) {
	return schemaSQL(d, table, DefaultRegistry)
}

// schemaSQL is SchemaSQL with the registry table registry (tests give each
// their own, as a database of its own would).
func schemaSQL(d Dialect, table, registry string) (string, error) {
	workers, err := workersSchemaSQL(d, table)
	if err != nil {
		return "", err
	}
	reg, err := registrySchemaSQL(d, registry)
	if err != nil {
		return "", err
	}
	return joinSchema(workers, reg), nil
}

// joinSchema joins DDL statements, each ended by a semicolon.
func joinSchema(stmts ...string) string {
	return strings.Join(stmts, ";\n\n") + ";\n"
}

// workersSchemaSQL is the CREATE TABLE IF NOT EXISTS statement of the
// worker-id table (see SchemaSQL), without a semicolon.
func workersSchemaSQL(d Dialect, table string) (string, error) {
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

// RegistrySchemaSQL returns the DDL of the datacenter registry table
// DefaultRegistry for dialect d: a CREATE TABLE IF NOT EXISTS statement,
// without a semicolon. The registry is shared by every worker table
// (namespace) of the database; it maps each datacenter id to the one
// namespace allowed to use it:
//
//	datacenter     BIGINT        the datacenter id (PRIMARY KEY)
//	namespace      VARCHAR(255)  the worker table that claimed it
//	contract       TEXT          that table's ID-space contract when it claimed it
//	claimed_at_ms  BIGINT        when, Unix ms by the database's clock
//
// A row is created (if absent) by the first Acquire in a datacenter and
// whenever a namespace record is re-initialised; flakeid never deletes one.
// To hand a datacenter id over to another table, delete its row by hand.
func RegistrySchemaSQL(d Dialect) (string, error) {
	return registrySchemaSQL(d, DefaultRegistry)
}

// registrySchemaSQL is RegistrySchemaSQL of the registry table registry.
func registrySchemaSQL(d Dialect, registry string) (string, error) {
	if !d.valid() {
		return "", fmt.Errorf("%w: sqldb: unknown dialect %v", worker.ErrInvalidConfig, d)
	}
	if !validTableName(registry) {
		return "", fmt.Errorf("%w: sqldb: registry table name %q does not match ^[A-Za-z_][A-Za-z0-9_]{0,62}$", worker.ErrInvalidConfig, registry)
	}
	text, suffix := "VARCHAR(255) NOT NULL", ""
	contract := "TEXT NOT NULL"
	if d == MySQL {
		text = "VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL"
		contract = "TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL"
		suffix = " ENGINE=InnoDB"
	}
	return "CREATE TABLE IF NOT EXISTS " + d.quote(registry) + " (\n" +
		"  datacenter BIGINT NOT NULL,\n" +
		"  namespace " + text + ",\n" +
		"  contract " + contract + ",\n" +
		"  claimed_at_ms BIGINT NOT NULL,\n" +
		"  PRIMARY KEY (datacenter)\n" +
		")" + suffix, nil
}

// statements are the SQL texts of one Workers, built once by NewWorkers for
// its dialect, table and registry.
type statements struct {
	schema         string // the worker table's CREATE TABLE
	registrySchema string // the registry's CREATE TABLE
	lockInsert     string // create the datacenter's lock row if missing
	lockSelect     string // lock it
	read           string // a datacenter's rows, its registry rows and the space, each with the database's clock
	insert         string // a new slot or record row
	update         string // a slot or record row, guarded by it being as read
	guarded        string // a slot row, guarded by it and the record row being as read
	regSelect      string // the registry row of a datacenter
	regInsert      string // create it if absent
	regAll         string // every registry row, by datacenter
	regDelete      string // free a datacenter's row, if it names a table
}

func newStatements(d Dialect, table, registry string) (statements, error) {
	schema, err := workersSchemaSQL(d, table)
	if err != nil {
		return statements{}, err
	}
	regSchema, err := registrySchemaSQL(d, registry)
	if err != nil {
		return statements{}, err
	}
	if registry == table {
		return statements{}, fmt.Errorf("%w: sqldb: the registry table %q is the worker table", worker.ErrInvalidConfig, registry)
	}
	t, reg, now := d.quote(table), d.quote(registry), d.nowMs()
	set := " holder = ?, expires_at_ms = ?, high_water_ms = ?"
	guard := " WHERE s.datacenter = ? AND s.worker = ? AND s.holder = ? AND s.expires_at_ms = ? AND s.high_water_ms = ?" +
		" AND r.holder = ? AND r.expires_at_ms = ? AND r.high_water_ms = ?"
	s := statements{
		schema:         schema,
		registrySchema: regSchema,
		lockSelect:     "SELECT worker FROM " + t + " WHERE datacenter = ? AND worker = -1 FOR UPDATE",
		// One statement, so one snapshot: kind 0 the table's rows but the
		// lock row, 1 the registry's claim of the datacenter and (as
		// datacenter -1) the space, 2 a row for the clock alone.
		read: "SELECT 0, worker, holder, expires_at_ms, high_water_ms, " + now + " FROM " + t + " WHERE datacenter = ? AND worker <> -1" +
			" UNION ALL SELECT 1, datacenter, CASE WHEN datacenter = -1 THEN contract ELSE namespace END, 0, 0, " + now +
			" FROM " + reg + " WHERE datacenter = ? OR datacenter = -1" +
			" UNION ALL SELECT 2, 0, '', 0, 0, " + now,
		insert:    "INSERT INTO " + t + " (datacenter, worker, holder, expires_at_ms, high_water_ms) VALUES (?, ?, ?, ?, ?)",
		update:    "UPDATE " + t + " SET" + set + " WHERE datacenter = ? AND worker = ? AND holder = ? AND expires_at_ms = ? AND high_water_ms = ?",
		regSelect: "SELECT namespace, contract, claimed_at_ms FROM " + reg + " WHERE datacenter = ?",
		regAll:    "SELECT datacenter, namespace, contract FROM " + reg + " ORDER BY datacenter",
		regDelete: "DELETE FROM " + reg + " WHERE datacenter = ? AND namespace = ?",
	}
	if d == MySQL {
		s.lockInsert = "INSERT INTO " + t + " (datacenter, worker) VALUES (?, -1) ON DUPLICATE KEY UPDATE worker = worker"
		s.regInsert = "INSERT INTO " + reg + " (datacenter, namespace, contract, claimed_at_ms) VALUES (?, ?, ?, " + now + ")" +
			" ON DUPLICATE KEY UPDATE datacenter = datacenter"
		// A multi-table UPDATE: MySQL refuses a subquery on the updated table.
		s.guarded = "UPDATE " + t + " AS s JOIN " + t + " AS r ON r.datacenter = s.datacenter AND r.worker = -2 SET" +
			" s.holder = ?, s.expires_at_ms = ?, s.high_water_ms = ?" + guard
	} else {
		s.lockInsert = "INSERT INTO " + t + " (datacenter, worker) VALUES (?, -1) ON CONFLICT (datacenter, worker) DO NOTHING"
		s.regInsert = "INSERT INTO " + reg + " (datacenter, namespace, contract, claimed_at_ms) VALUES (?, ?, ?, " + now + ")" +
			" ON CONFLICT (datacenter) DO NOTHING"
		s.guarded = "UPDATE " + t + " AS s SET" + set + " FROM " + t + " AS r" + guard + " AND r.datacenter = s.datacenter AND r.worker = -2"
		for _, p := range []*string{&s.lockInsert, &s.lockSelect, &s.read, &s.insert, &s.update, &s.guarded,
			&s.regSelect, &s.regInsert, &s.regAll, &s.regDelete} {
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
		if backoff.Sleep(ctx, bo.Next(attempt)) != nil {
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
