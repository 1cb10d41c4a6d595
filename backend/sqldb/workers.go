// Package sqldb keeps flakeid's state in a SQL database — PostgreSQL, or
// MySQL/MariaDB with InnoDB: the worker-id coordinator (Workers, a
// worker.Coordinator) and the segment store (Segments, a segment.Store on
// Meituan Leaf's leaf_alloc table; see SegmentSchemaSQL). One database/sql
// implementation serves both dialects; a Dialect holds what differs
// (placeholders, identifier quoting, the upsert of the lock row, the clock
// expression, the DDL).
//
// Design of the worker coordinator:
//
//   - One table (default "flakeid_workers", see SchemaSQL for its columns),
//     one row per (datacenter, worker) slot ever held, plus a lock row and
//     a namespace-record row per datacenter, and a registry table shared
//     by the worker tables of the database, both created by CreateSchema or
//     by a migration that applies SchemaSQL.
//   - Every expiry is computed and compared by the DATABASE's clock, in Unix
//     milliseconds (PostgreSQL clock_timestamp(), MySQL UTC_TIMESTAMP(6)),
//     never by the clock of the Go process: the nodes' clocks may disagree,
//     the database is the one arbiter.
//   - Acquire is one READ COMMITTED transaction: it creates if needed and
//     locks the datacenter's lock row (worker −1), reads the slots [0, n),
//     picks the best free id (lowest id whose high-water mark has passed,
//     else the smallest mark; a never-used id has mark 0), and takes it with
//     an INSERT (never-used id) or a conditional UPDATE (free or expired,
//     mark unchanged since the read). Lost races, deadlocks, lock timeouts
//     and duplicate keys run the transaction again, a bounded number of
//     times. Acquire never locks a held slot, so a slow or partitioned
//     acquirer delays other acquisitions in its datacenter, never a renewal.
//     On PostgreSQL the transaction sets idle_in_transaction_session_timeout
//     (5s), on MariaDB its session's idle_transaction_timeout (5s, reset
//     afterwards), so that a client partitioned mid-Acquire frees the lock
//     row; on MySQL, which has neither, it is freed when the server drops
//     that connection (wait_timeout, TCP keepalive), and meanwhile Acquire
//     in that datacenter fails with ErrUnavailable at the caller's deadline.
//   - Renew and Release are single UPDATEs guarded by holder = owner AND
//     expires_at_ms > now, by the slot's high-water mark being at least the
//     highest the claim stored, and by the datacenter's namespace record
//     being the one the claim acquired under (a self-join on the record row;
//     on MySQL a multi-table UPDATE); a successful renewal is one round
//     trip. Matching no row, they read the slot and the record (one SELECT)
//     to tell worker.ErrNotHeld from worker.ErrReset. The high-water mark
//     only ever moves up (GREATEST). On MySQL the UPDATE takes a shared
//     lock on the record row, which only a transaction writing the record
//     locks for long: a partitioned acquirer holds the lock row, never the
//     record row, unless it was writing a new record.
//   - Database and connection errors wrap worker.ErrUnavailable with the
//     driver's error kept for errors.Is/As; bad arguments wrap
//     worker.ErrInvalidConfig; every id held wraps worker.ErrExhausted.
//
// The namespace record and the datacenter registry (issue 12):
//
//   - The namespace of a coordinator is its table, named by the table name
//     (unqualified: a copy of the database under another name, or with
//     another search_path, is the same namespace). Each datacenter used in
//     it has a namespace record (worker.Namespace) in the row (datacenter,
//     -2) of the same table: holder = incarnation (16 random hex digits), a
//     space, the ID-space contract (at most 238 characters); expires_at_ms =
//     when it was initialised, high_water_ms = its floor, both by the
//     database's clock. Whatever takes or brings back the slots takes or
//     brings back the record with them.
//   - Acquire reads the record in its transaction, holding the lock row
//     (every writer of the record holds it): a record with another contract
//     is worker.ErrContract and nothing is written; no record (never used,
//     lost, or a table of an older flakeid: its slots are kept) is written
//     then, with initialised = the database's now and floor = now + the
//     request's quarantine. Previous is max(the slot's mark, the floor).
//   - The datacenter registry is a table outside every namespace (default
//     "flakeid_datacenters", see RegistrySchemaSQL), shared by every worker
//     table of the database: one row per
//     datacenter id naming the table that claimed it, and the row of
//     datacenter -1 (namespace "(ID space)") whose contract column is the ID
//     space (worker.Request.Space: the layout) every namespace and
//     datacenter on the registry shares. Acquire creates both rows if absent
//     (INSERT … ON CONFLICT DO NOTHING / ON DUPLICATE KEY UPDATE, in its
//     transaction: a concurrent creator waits on the unique key), reads
//     them back with the record, and decides by worker.Admit: another ID
//     space, a datacenter of another table or another contract is
//     worker.ErrContract, and the transaction is rolled back, writing
//     nothing. A reservation past the request's worker.MarkBound (the
//     database's clock + the reservation ahead + the skew allowed) is
//     worker.ErrClockSkew, likewise; a renewal's UPDATE carries the same
//     bound. flakeid never deletes a row: to give a datacenter id to another
//     table, delete it by hand.
//   - How a reset looks here, and how a holder recognises it at its next
//     Renew or Release (within one renewal period):
//     a TRUNCATE, a DELETE of the rows, or a database recreated empty:
//     the record row is gone (and with it the slot);
//     a restore from an older dump or a point-in-time recovery, or a
//     failover to a lagging asynchronous replica: the record row is an
//     older one (initialised before the holder's), or it is the holder's
//     but the holder's slot row is missing or its high-water mark is below
//     the highest the holder stored (the renewals since the copy are lost),
//     or it is the holder's but the slot is held by another, free or
//     expired while the database's clock (read by the same SELECT) is still
//     before E, the end of the lease the database last granted the holder
//     (its clock at the last successful Acquire or Renew + that call's TTL):
//     in the copy the lease had lapsed, and a newcomer may have taken the
//     id, raising its mark past the holder's. A renewal after E that finds
//     the slot taken is ErrNotHeld, as before.
//     The holder that finds it re-initialises the record in a transaction on
//     the lock row, if the record is still as it saw it (new incarnation,
//     the old contract or its own, initialised now, floor max(the old floor,
//     now + its quarantine)), touches no slot, and fails with
//     worker.ErrReset; a holder that finds the record re-initialised by
//     someone else (another incarnation, initialised after its own) fails
//     with worker.ErrReset and writes nothing. Every later holder starts
//     after the new floor. A rollback that loses nothing this holder stored
//     (a copy taken after its last renewal) is not a reset for it.
//   - Clock: Claim.Clock is the database's clock (see nowMs) as the Acquire
//     transaction or the renewal UPDATE read it, stale 0: PostgreSQL returns
//     the new expiry (RETURNING), MySQL hands it back in the reply's insert
//     id (LAST_INSERT_ID(expr)), so the renewal stays one round trip.
//
// Opening: OpenWorkers and OpenSegments open the database a URL names and
// own it (Close closes it):
//
//	postgres://user[:password]@host:port/db[?table=T&…]  (postgresql:// too; driver github.com/jackc/pgx/v5/stdlib, whose options pass through)
//	mysql://user[:password]@host[:port]/db[?table=T&…]   (port 3306 by default; driver github.com/go-sql-driver/mysql, whose options pass through)
//
// The tables are created when
// missing. NewWorkers and NewSegments work on a *sql.DB the caller opened
// (OpenDB opens one from a driver's DSN with the settings this package
// wants) and leave it to the caller to close.
package sqldb

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/flakeid/flakeid/backend/internal/coord"
	"github.com/flakeid/flakeid/internal/backoff"
	"github.com/flakeid/flakeid/worker"
	"github.com/flakeid/flakeid/worker/protocol"
)

// maxAttempts bounds how often Acquire runs its transaction again after a
// transient conflict.
const maxAttempts = 10

// lockHoldLimit is how long an Acquire transaction may sit idle on the
// server between two of its statements before the server ends the session:
// a client partitioned away in the middle of Acquire would otherwise keep
// the datacenter's lock row, and so every other Acquire in the datacenter
// waiting, until the server notices the dead connection (TCP keepalive: two
// hours by default). PostgreSQL: idle_in_transaction_session_timeout, set
// LOCAL to the transaction. MariaDB: idle_transaction_timeout (whole
// seconds), set on the transaction's connection and reset after it. MySQL
// has no equivalent.
const lockHoldLimit = 5 * time.Second

// mariaDBIdleLimit returns a connection of w.db whose session has MariaDB's
// idle_transaction_timeout set to the lock-hold limit, or nil when the
// server does not know the variable (MySQL), which it remembers.
func (w *Workers) mariaDBIdleLimit(ctx context.Context) (*sql.Conn, error) {
	conn, err := w.db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	secs := max(1, int64((w.lockHold+time.Second-1)/time.Second))
	_, err = conn.ExecContext(ctx, fmt.Sprintf("SET SESSION idle_transaction_timeout = %d", secs))
	var me *mysql.MySQLError
	switch {
	case err == nil:
		w.idleTxTimeout.Store(1)
		return conn, nil
	case errors.As(err, &me) && me.Number == 1193: // unknown system variable
		w.idleTxTimeout.Store(-1)
		return nil, conn.Close()
	}
	conn.Close()
	return nil, err
}

// releaseIdleLimit resets the session's idle_transaction_timeout and gives
// conn back to the pool, or drops the connection when the reset fails (so
// that no other user of the pool gets the limit).
func (w *Workers) releaseIdleLimit(conn *sql.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := conn.ExecContext(ctx, "SET SESSION idle_transaction_timeout = DEFAULT"); err != nil {
		_ = conn.Raw(func(any) error { return driver.ErrBadConn })
	}
	_ = conn.Close()
}

// Workers is a worker.Coordinator over a table of a SQL database.
type Workers struct {
	db       *sql.DB
	d        Dialect
	table    string
	registry string
	q        statements
	ownedDB  bool // Close closes db: OpenWorkers made it

	lockHold time.Duration // lockHoldLimit; tests shorten it
	// idleTxTimeout is, on MySQL, whether the server has MariaDB's
	// idle_transaction_timeout: 0 not known yet, 1 yes, -1 no.
	idleTxTimeout atomic.Int32
	// testHookLocked, when set, runs in Acquire right after the lock row
	// is locked.
	testHookLocked func()
}

// NewWorkers returns a coordinator that keeps its slots in table ("" means
// DefaultTable) of db, a database of dialect d, and claims its datacenter
// ids in the registry table DefaultRegistry, which every worker table of
// the database shares. The tables are not created: call CreateSchema, or apply
// SchemaSQL with a migration tool. table must match
// ^[A-Za-z_][A-Za-z0-9_]{0,62}$; it is also the coordinator's namespace name
// in the registry and in errors.
//
// A MySQL db should be opened with clientFoundRows=true (OpenDB does);
// without it Renew reads the slot back when an UPDATE changed nothing. db
// stays the caller's: the coordinator's Close does not close it.
func NewWorkers(db *sql.DB, d Dialect, table string) (*Workers, error) {
	return newWorkers(db, d, table, DefaultRegistry)
}

// newWorkers is NewWorkers with the registry table registry (tests give
// each their own, as a database of its own would).
func newWorkers(db *sql.DB, d Dialect, table, registry string) (*Workers, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: sqldb: no database", worker.ErrInvalidConfig)
	}
	if table == "" {
		table = DefaultTable
	}
	q, err := newStatements(d, table, registry)
	if err != nil {
		return nil, err
	}
	return &Workers{db: db, d: d, table: table, registry: registry, q: q, lockHold: lockHoldLimit}, nil
}

// Close closes the database if OpenWorkers opened it; a Workers made by
// NewWorkers never closes the caller's db (its Close does nothing).
func (w *Workers) Close() error {
	if w.ownedDB {
		return w.db.Close()
	}
	return nil
}

// Dialect is the coordinator's SQL dialect.
func (w *Workers) Dialect() Dialect { return w.d }

// Table is the name of the coordinator's table: its namespace.
func (w *Workers) Table() string { return w.table }

// Registry is the name of the coordinator's datacenter registry table.
func (w *Workers) Registry() string { return w.registry }

// SchemaSQL is the DDL of the coordinator's table and of its registry table
// (see the function SchemaSQL): two statements, each ended by a semicolon.
func (w *Workers) SchemaSQL() string { return joinSchema(w.q.schema, w.q.registrySchema) }

// CreateSchema creates the table and the registry table when they do not
// exist (CREATE TABLE IF NOT EXISTS); it is safe to run at every start, and
// by several nodes at once.
func (w *Workers) CreateSchema(ctx context.Context) error {
	if err := createTable(ctx, w.db, w.q.schema); err != nil {
		return w.unavailable(ctx, "creating the table", err)
	}
	if err := createTable(ctx, w.db, w.q.registrySchema); err != nil {
		return w.unavailable(ctx, fmt.Sprintf("creating the registry table %s", w.registry), err)
	}
	return nil
}

// where names the coordinator in error messages.
func (w *Workers) where(op string) string {
	return fmt.Sprintf("sqldb: %s table %s: %s", w.d, w.table, op)
}

// unavailable wraps a database error in worker.ErrUnavailable, keeping the
// driver's error, and the context's error when that is why it failed.
func (w *Workers) unavailable(ctx context.Context, op string, err error) error {
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("%w: %s: %w (%w)", worker.ErrUnavailable, w.where(op), err, cerr)
	}
	return fmt.Errorf("%w: %s: %w", worker.ErrUnavailable, w.where(op), err)
}

// corrupt reports a row this package could not have written.
func (w *Workers) corrupt(dc, id int64, format string, args ...any) error {
	return fmt.Errorf("%w: %s: corrupt row (datacenter %d, worker %d): %s", worker.ErrUnavailable,
		w.where("reading"), dc, id, fmt.Sprintf(format, args...))
}

// row is one slot as stored.
type row struct {
	id        int64
	holder    string
	expiresMs int64
	highMs    int64
}

func (w *Workers) check(dc int64, r row) error {
	switch {
	case r.highMs < 0:
		return w.corrupt(dc, r.id, "high_water_ms %d is negative", r.highMs)
	case r.expiresMs < 0:
		return w.corrupt(dc, r.id, "expires_at_ms %d is negative", r.expiresMs)
	}
	return nil
}

// record is a datacenter's namespace record, the row (datacenter, -2).
type record struct {
	holder      string // as stored: the incarnation, a space, the contract
	incarnation string
	contract    string
	initMs      int64 // expires_at_ms: when it was initialised, database clock
	floorMs     int64 // high_water_ms: the floor of every worker id
}

// incarnationLen is the length of an incarnation: 16 hex digits.
const incarnationLen = 16

// maxContract is the longest contract, in characters, that fits the holder
// column (255 characters) after an incarnation and a space.
const maxContract = 255 - incarnationLen - 1

func newRecord(incarnation, contract string, initMs, floorMs int64) record {
	return record{holder: incarnation + " " + contract, incarnation: incarnation, contract: contract, initMs: initMs, floorMs: floorMs}
}

// parseRecord reads the record row's columns.
func (w *Workers) parseRecord(dc int64, holder string, initMs, floorMs int64) (record, error) {
	inc, contract, ok := strings.Cut(holder, " ")
	if !ok || len(inc) != incarnationLen || strings.Trim(inc, "0123456789abcdef") != "" {
		return record{}, w.corrupt(dc, -2, "the namespace record's holder %q is not an incarnation of %d hex digits, a space and a contract", holder, incarnationLen)
	}
	if initMs <= 0 || floorMs < initMs {
		return record{}, w.corrupt(dc, -2, "the namespace record was initialised at %d ms with the floor %d ms", initMs, floorMs)
	}
	return newRecord(inc, contract, initMs, floorMs), nil
}

func (r record) namespace() worker.Namespace {
	return coord.Record{Incarnation: r.incarnation, Contract: r.contract, FloorMs: r.floorMs, InitialisedMs: r.initMs}.Namespace()
}

// queryer runs a query: a *sql.DB or a *sql.Tx.
type queryer interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// readRecord reads the database's clock and the namespace record of
// datacenter dc, ok false when there is none.
func (w *Workers) readRecord(ctx context.Context, q queryer, dc int64) (rec record, ok bool, nowMs int64, err error) {
	var (
		holder        sql.NullString
		initMs, floor sql.NullInt64
	)
	if err := q.QueryRowContext(ctx, w.q.record, dc).Scan(&nowMs, &holder, &initMs, &floor); err != nil {
		return record{}, false, 0, err
	}
	if !holder.Valid {
		return record{}, false, nowMs, nil
	}
	rec, err = w.parseRecord(dc, holder.String, initMs.Int64, floor.Int64)
	return rec, err == nil, nowMs, err
}

// Claims implements worker.Registry: the registry table's rows.
func (w *Workers) Claims(ctx context.Context) (worker.Claims, error) {
	rows, err := w.db.QueryContext(ctx, w.q.regAll)
	if err != nil {
		return worker.Claims{}, w.registryError(ctx, spaceRow, err)
	}
	defer rows.Close()
	var c worker.Claims
	for rows.Next() {
		var (
			dc           int64
			ns, contract string
		)
		if err := rows.Scan(&dc, &ns, &contract); err != nil {
			return worker.Claims{}, w.registryError(ctx, spaceRow, err)
		}
		if dc == spaceRow {
			c.Space, c.HasSpace = contract, true
			continue
		}
		c.Datacenters = append(c.Datacenters, worker.DatacenterClaim{Datacenter: dc, Namespace: ns})
	}
	if err := rows.Err(); err != nil {
		return worker.Claims{}, w.registryError(ctx, spaceRow, err)
	}
	return c, nil
}

// Unclaim implements worker.Registry: in one transaction holding the
// datacenter's lock row (which every Acquire of it holds), it reads the
// claim and the slots with the database's clock and deletes the claim.
func (w *Workers) Unclaim(ctx context.Context, dc int64) error {
	if dc < 0 {
		return fmt.Errorf("%w: sqldb: datacenter %d", worker.ErrInvalidConfig, dc)
	}
	return w.inLockedTx(ctx, dc, fmt.Sprintf("freeing datacenter %d", dc), func(tx *sql.Tx) error {
		var ns, contract string
		var atMs int64
		err := tx.QueryRowContext(ctx, w.q.regSelect, dc).Scan(&ns, &contract, &atMs)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			ns = ""
		case err != nil:
			return w.registryError(ctx, dc, err)
		}
		if ns != w.table {
			return fmt.Errorf("%w: %s: datacenter %d is not claimed by %s in the registry table %s (claimed by: %q)",
				worker.ErrContract, w.where("freeing a datacenter"), dc, w.table, w.registry, ns)
		}
		slots, nowMs, err := w.readSlots(ctx, tx, dc, w.q.slots, dc, int64(math.MaxInt64))
		if err != nil {
			return err
		}
		if err := worker.CheckUnclaim(w.table, dc, slots, coord.MsTime(nowMs)); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, w.q.regDelete, dc, w.table); err != nil {
			return w.registryError(ctx, dc, err)
		}
		return nil
	})
}

// readSlots runs query (one of the statements that read slots with the
// database's clock) in tx and returns its rows as worker.Info of
// datacenter dc, and the clock (read on its own when no row came back).
func (w *Workers) readSlots(ctx context.Context, tx *sql.Tx, dc int64, query string, args ...any) ([]worker.Info, int64, error) {
	rows, err := tx.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, 0, err
	}
	defer rows.Close()
	var (
		slots []worker.Info
		nowMs int64
	)
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.id, &r.holder, &r.expiresMs, &r.highMs, &nowMs); err != nil {
			return nil, 0, err
		}
		slots = append(slots, worker.Info{Datacenter: dc, Worker: r.id, Holder: r.holder, Expires: coord.MsTime(r.expiresMs), HighWater: coord.MsTime(r.highMs)})
	}
	if err := rows.Err(); err != nil {
		return nil, 0, err
	}
	if err := rows.Close(); err != nil {
		return nil, 0, err
	}
	if len(slots) == 0 {
		err = tx.QueryRowContext(ctx, w.q.now).Scan(&nowMs)
	}
	return slots, nowMs, err
}

// LowerMark implements worker.MarkLowerer: in one transaction holding the
// datacenter's lock row (which every Acquire of it holds; a held id, the
// only kind that renews, is refused), it reads the slot with the
// database's clock and sets its mark.
func (w *Workers) LowerMark(ctx context.Context, dc, id int64, to time.Time) (time.Time, error) {
	if dc < 0 || id < 0 {
		return time.Time{}, fmt.Errorf("%w: sqldb: datacenter %d, worker %d", worker.ErrInvalidConfig, dc, id)
	}
	var from time.Time
	toMs := ceilMs(to)
	err := w.inLockedTx(ctx, dc, fmt.Sprintf("lowering the mark of worker %d of datacenter %d", id, dc), func(tx *sql.Tx) error {
		slots, nowMs, err := w.readSlots(ctx, tx, dc, w.q.slot, dc, id)
		if err != nil {
			return err
		}
		info := worker.Info{Datacenter: dc, Worker: id}
		for _, s := range slots {
			if s.Worker == id { // not the record row (-2) that the query reads too
				info = s
			}
		}
		if err := worker.CheckLowerMark(info, coord.MsTime(toMs), coord.MsTime(nowMs)); err != nil {
			return err
		}
		from = info.HighWater
		_, err = tx.ExecContext(ctx, w.q.lowerMark, toMs, dc, id)
		return err
	})
	return from, err
}

// Clock implements worker.Coordinator: the database's clock, read without
// writing.
func (w *Workers) Clock(ctx context.Context, _ worker.Request) (time.Time, time.Duration, error) {
	var nowMs int64
	if err := w.db.QueryRowContext(ctx, w.q.now).Scan(&nowMs); err != nil {
		return time.Time{}, 0, w.unavailable(ctx, "reading the database's clock", err)
	}
	return coord.MsTime(nowMs), 0, nil
}

// Namespace implements worker.Coordinator: the row (datacenter, -2).
func (w *Workers) Namespace(ctx context.Context, datacenter int64) (worker.Namespace, bool, error) {
	rec, ok, _, err := w.readRecord(ctx, w.db, datacenter)
	switch {
	case errors.Is(err, worker.ErrUnavailable):
		return worker.Namespace{}, false, err
	case err != nil:
		return worker.Namespace{}, false, w.unavailable(ctx, fmt.Sprintf("reading the namespace record of datacenter %d", datacenter), err)
	case !ok:
		return worker.Namespace{}, false, nil
	}
	return rec.namespace(), true, nil
}

// missingTable reports an error of a table that does not exist (PostgreSQL
// 42P01 undefined_table, MySQL 1146).
func missingTable(err error) bool {
	var pe *pgconn.PgError
	var me *mysql.MySQLError
	return errors.As(err, &pe) && pe.Code == "42P01" || errors.As(err, &me) && me.Number == 1146
}

// registryError explains an error of a registry statement.
func (w *Workers) registryError(ctx context.Context, dc int64, err error) error {
	if missingTable(err) {
		return fmt.Errorf("%w: %s: the datacenter registry table %s does not exist (a table created by an older flakeid): "+
			"run CreateSchema (flakeid creates it at start), or apply its DDL (`flakeid workers schema` prints it):\n%s;\n(%w)",
			worker.ErrUnavailable, w.where(fmt.Sprintf("claiming datacenter %d", dc)), w.registry, w.q.registrySchema, err)
	}
	return w.unavailable(ctx, fmt.Sprintf("claiming datacenter %d in the registry table %s", dc, w.registry), err)
}

// spaceRow is the registry row that holds the ID space every namespace
// and datacenter on the registry shares: datacenter -1, namespace
// spaceNamespace, the space in the contract column.
const (
	spaceRow       = -1
	spaceNamespace = "(ID space)"
)

// registryRow reads, in the transaction tx, the registry row of datacenter
// dc (spaceRow: the ID space), creating it with namespace and contract
// first when it is absent. A refused Acquire rolls tx back, so the row it
// created is gone again. It returns the row's namespace and contract.
func (w *Workers) registryRow(ctx context.Context, tx *sql.Tx, dc int64, namespace, contract string) (string, string, error) {
	var (
		ns, theirs string
		atMs       int64
	)
	err := tx.QueryRowContext(ctx, w.q.regSelect, dc).Scan(&ns, &theirs, &atMs)
	if errors.Is(err, sql.ErrNoRows) {
		if _, err := tx.ExecContext(ctx, w.q.regInsert, dc, namespace, contract); err != nil {
			return "", "", w.registryError(ctx, dc, err)
		}
		err = tx.QueryRowContext(ctx, w.q.regSelect, dc).Scan(&ns, &theirs, &atMs)
	}
	if err != nil {
		return "", "", w.registryError(ctx, dc, err)
	}
	return ns, theirs, nil
}

func validOwner(owner string) error {
	switch {
	case owner == "":
		return errors.New("empty owner")
	case len(owner) > 255:
		return fmt.Errorf("owner of %d bytes, at most 255 fit", len(owner))
	case !utf8.ValidString(owner) || strings.ContainsRune(owner, 0):
		return fmt.Errorf("owner %q is not UTF-8 text without NUL", owner)
	case strings.HasSuffix(owner, " "):
		return fmt.Errorf("owner %q ends with a space, which MySQL's comparison ignores", owner)
	}
	return nil
}

func validContract(contract string) error {
	switch {
	case !utf8.ValidString(contract) || strings.ContainsRune(contract, 0):
		return fmt.Errorf("contract %q is not UTF-8 text without NUL", contract)
	case utf8.RuneCountInString(contract) > maxContract:
		return fmt.Errorf("contract of %d characters, at most %d fit the namespace record", utf8.RuneCountInString(contract), maxContract)
	}
	return nil
}

// ceilMs is t in Unix milliseconds rounded up (coord.CeilMs: a high-water
// mark must never be stored lower than asked), and 0 for instants before
// 1970.
func ceilMs(t time.Time) int64 { return max(coord.CeilMs(t), 0) }

// errLostRace is an Acquire attempt that found its pick taken between the
// read and the write; the transaction runs again.
type errLostRace struct{ id int64 }

func (e errLostRace) Error() string {
	return fmt.Sprintf("worker %d changed under the transaction", e.id)
}

// Acquire implements worker.Coordinator.
func (w *Workers) Acquire(ctx context.Context, req worker.Request) (worker.Claim, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	if req.TTL < time.Millisecond {
		return nil, fmt.Errorf("%w: sqldb: bad request: TTL %v, want ≥ 1ms (leases are stored in whole milliseconds)", worker.ErrInvalidConfig, req.TTL)
	}
	if err := validOwner(req.Owner); err != nil {
		return nil, fmt.Errorf("%w: sqldb: %w", worker.ErrInvalidConfig, err)
	}
	if err := validContract(req.Contract); err != nil {
		return nil, fmt.Errorf("%w: sqldb: %w", worker.ErrInvalidConfig, err)
	}
	var c *claim
	err := w.inLockedTx(ctx, req.Datacenter, "acquiring a worker id", func(tx *sql.Tx) (err error) {
		c, err = w.acquireLocked(ctx, tx, req)
		return err
	})
	if err != nil {
		return nil, err
	}
	return c, nil
}

// beginner starts transactions: a *sql.DB, or one *sql.Conn.
type beginner interface {
	BeginTx(context.Context, *sql.TxOptions) (*sql.Tx, error)
}

// inLockedTx runs fn in a READ COMMITTED transaction that holds the lock
// row of datacenter dc, and runs it again after a transient conflict (a
// lost race, a deadlock, a lock timeout, a duplicate key), a bounded number
// of times. Errors that wrap a sentinel of package worker are returned as
// they are; others are wrapped in worker.ErrUnavailable, op saying what
// failed.
func (w *Workers) inLockedTx(ctx context.Context, dc int64, op string, fn func(*sql.Tx) error) error {
	// On MariaDB the transactions run on one connection whose idle
	// transaction timeout is set for the whole operation, retries included.
	var begin beginner = w.db
	if w.d == MySQL && w.idleTxTimeout.Load() >= 0 {
		conn, err := w.mariaDBIdleLimit(ctx)
		if err != nil {
			return w.unavailable(ctx, op, err)
		}
		if conn != nil {
			defer w.releaseIdleLimit(conn)
			begin = conn
		}
	}
	bo := backoff.Backoff{Min: 5 * time.Millisecond, Max: 200 * time.Millisecond}
	var err error
	for attempt := 0; attempt < maxAttempts; attempt++ {
		if err = w.lockedOnce(ctx, begin, dc, fn); err == nil {
			return nil
		}
		var lost errLostRace
		if !errors.As(err, &lost) && !retryable(err) {
			break
		}
		if serr := backoff.Sleep(ctx, bo.Next(attempt)); serr != nil {
			break
		}
	}
	for _, sentinel := range []error{worker.ErrExhausted, worker.ErrUnavailable, worker.ErrContract, worker.ErrReset, worker.ErrInUse, worker.ErrClockSkew, worker.ErrInvalidConfig} {
		if errors.Is(err, sentinel) {
			return err
		}
	}
	return w.unavailable(ctx, op, err)
}

// lockedOnce is one transaction of inLockedTx, begun by begin. Errors of
// the database are returned unwrapped, for retryable to classify.
func (w *Workers) lockedOnce(ctx context.Context, begin beginner, dc int64, fn func(*sql.Tx) error) (err error) {
	tx, err := begin.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	if w.d == Postgres {
		if _, err := tx.ExecContext(ctx, fmt.Sprintf("SET LOCAL idle_in_transaction_session_timeout = %d", w.lockHold.Milliseconds())); err != nil {
			return err
		}
	}
	// Serialise the datacenter's acquisitions and record writes on its
	// lock row.
	if _, err := tx.ExecContext(ctx, w.q.lockInsert, dc); err != nil {
		return err
	}
	var lockID int64
	if err := tx.QueryRowContext(ctx, w.q.lockSelect, dc).Scan(&lockID); err != nil {
		return err
	}
	if w.testHookLocked != nil {
		w.testHookLocked()
	}
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit()
}

// acquireLocked is the body of an Acquire transaction, holding the lock row:
// the registry, the namespace record, then the slot.
func (w *Workers) acquireLocked(ctx context.Context, tx *sql.Tx, req worker.Request) (*claim, error) {
	dc := req.Datacenter
	// Every writer of the record holds the lock row, as this transaction
	// does now: a plain read sees the latest record.
	rec, found, nowMs, err := w.readRecord(ctx, tx, dc)
	if err != nil {
		return nil, err
	}
	// The space and the claim are created in tx when absent (a unique key
	// makes a concurrent creator wait for this transaction), and read back.
	_, space, err := w.registryRow(ctx, tx, spaceRow, spaceNamespace, req.Space)
	if err != nil {
		return nil, err
	}
	claimant, _, err := w.registryRow(ctx, tx, dc, w.table, req.Contract)
	if err != nil {
		return nil, err
	}
	if err := worker.Admit(req, worker.Recorded{
		Registry: fmt.Sprintf("%s: the registry table %s", w.where("acquiring"), w.registry), Namespace: w.table,
		Space: space, HasSpace: true, Claimant: claimant, HasClaim: true,
		Contract: rec.contract, Initialised: coord.MsTime(rec.initMs), HasRecord: found,
	}); err != nil {
		return nil, err
	}
	bound := req.MarkBound()
	if bound.Exceeds(ceilMs(req.Reserve), nowMs) {
		return nil, bound.Refused(w.where("acquiring"), req.Reserve, coord.MsTime(nowMs))
	}
	if !found {
		// Never used, lost, or written by a flakeid without records: the
		// slots, if any, are kept, and every id starts after the floor.
		rec = newRecord(coord.NewIncarnation(), req.Contract, nowMs, nowMs+coord.CeilDurMs(req.Quarantine))
		if _, err := tx.ExecContext(ctx, w.q.recordInsert, dc, rec.holder, rec.initMs, rec.floorMs); err != nil {
			return nil, err
		}
	}
	rows, err := tx.QueryContext(ctx, w.q.slots, dc, req.Workers)
	if err != nil {
		return nil, err
	}
	var (
		slots []protocol.Candidate
		byID  = map[int64]row{}
	)
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.id, &r.holder, &r.expiresMs, &r.highMs, &nowMs); err != nil {
			rows.Close()
			return nil, err
		}
		if err := w.check(dc, r); err != nil {
			rows.Close()
			return nil, err
		}
		byID[r.id] = r
		slots = append(slots, protocol.Candidate{ID: r.id, Held: r.holder != "" && r.expiresMs > nowMs, HighMs: r.highMs})
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if err := rows.Close(); err != nil {
		return nil, err
	}
	id, held, ok := protocol.Pick(slots, nil, req.Workers, nowMs)
	if !ok {
		return nil, fmt.Errorf("%w: %s: %d of %d worker ids of datacenter %d are held", worker.ErrExhausted,
			w.where("acquiring"), held, req.Workers, dc)
	}
	best, used := byID[id] // a never-used id has no row: its mark is zero
	best.id = id
	ttl, reserve := req.TTL.Milliseconds(), ceilMs(req.Reserve)
	if !used {
		if _, err := tx.ExecContext(ctx, w.q.insert, dc, best.id, req.Owner, ttl, reserve); err != nil {
			return nil, err
		}
	} else {
		res, err := tx.ExecContext(ctx, w.q.take, req.Owner, ttl, reserve, dc, best.id, best.highMs)
		if err != nil {
			return nil, err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return nil, err
		}
		if n != 1 {
			return nil, errLostRace{best.id}
		}
	}
	return &claim{
		w: w, dc: dc, id: best.id, owner: req.Owner,
		prev:         coord.MsTime(max(best.highMs, rec.floorMs)),
		rec:          rec,
		contract:     req.Contract,
		quarantineMs: coord.CeilDurMs(req.Quarantine),
		highMs:       max(best.highMs, reserve),
		clockMs:      nowMs,
		// The statement computed the expiry from a clock reading at or
		// after nowMs: E is at most the lease granted, never later.
		leaseEndMs: nowMs + ttl,
		bound:      bound,
	}, nil
}

// reinit re-initialises the namespace record of datacenter dc after a
// holder found its state lost or rolled back, if the record is still what
// the holder saw (observed; nil: none): a new incarnation, the contract of
// the record (or contract when there was none), initialised now and a floor
// of max(the old floor, now + quarantineMs). It touches no slot. When
// another client re-initialised it first, it returns that record and
// already true.
func (w *Workers) reinit(ctx context.Context, dc int64, observed *record, contract string, quarantineMs int64) (rec record, already bool, err error) {
	err = w.inLockedTx(ctx, dc, fmt.Sprintf("re-initialising the namespace record of datacenter %d", dc), func(tx *sql.Tx) error {
		cur, found, nowMs, err := w.readRecord(ctx, tx, dc)
		if err != nil {
			return err
		}
		if found != (observed != nil) || found && cur != *observed {
			rec, already = cur, true
			return nil
		}
		inc := coord.NewIncarnation()
		floor := nowMs + quarantineMs
		if found {
			contract, floor = cur.contract, max(floor, cur.floorMs)
		}
		rec, already = newRecord(inc, contract, nowMs, floor), false
		if found {
			_, err = tx.ExecContext(ctx, w.q.recordUpdate, rec.holder, rec.initMs, rec.floorMs, dc)
		} else {
			_, err = tx.ExecContext(ctx, w.q.recordInsert, dc, rec.holder, rec.initMs, rec.floorMs)
		}
		if err != nil {
			return err
		}
		// Claim the datacenter again if the registry lost it too; another
		// namespace's claim is left alone (Acquire refuses then).
		if _, err := tx.ExecContext(ctx, w.q.regInsert, dc, w.table, contract); err != nil {
			return w.registryError(ctx, dc, err)
		}
		return nil
	})
	return rec, already, err
}

// List implements worker.Coordinator. The lock and record rows are not
// reported.
func (w *Workers) List(ctx context.Context, datacenter int64) ([]worker.Info, error) {
	rows, err := w.db.QueryContext(ctx, w.q.list, datacenter)
	if err != nil {
		return nil, w.unavailable(ctx, "listing", err)
	}
	defer rows.Close()
	infos := []worker.Info{}
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.id, &r.holder, &r.expiresMs, &r.highMs); err != nil {
			return nil, w.unavailable(ctx, "listing", err)
		}
		if err := w.check(datacenter, r); err != nil {
			return nil, err
		}
		in := worker.Info{Datacenter: datacenter, Worker: r.id, HighWater: coord.MsTime(r.highMs)}
		if r.holder != "" {
			in.Holder, in.Expires = r.holder, coord.MsTime(r.expiresMs)
		}
		infos = append(infos, in)
	}
	if err := rows.Err(); err != nil {
		return nil, w.unavailable(ctx, "listing", err)
	}
	return infos, nil
}

type claim struct {
	w            *Workers
	dc, id       int64
	owner        string
	prev         time.Time
	rec          record // the namespace record acquired under
	contract     string // the request's contract
	quarantineMs int64  // the request's quarantine
	highMs       int64  // the highest mark this claim stored
	clockMs      int64  // the database's clock at the last Acquire or Renew
	// leaseEndMs is E, the end of the lease the database last granted this
	// claim (its clock at the last successful Acquire or Renew + that
	// call's TTL), 0 once released: while the database's clock is before
	// it, a consistent database cannot show the slot held by another, free
	// or expired (see resetReason).
	leaseEndMs int64
	bound      worker.MarkBound // of the request: what a renewal may reserve
}

func (c *claim) WorkerID() int64     { return c.id }
func (c *claim) Previous() time.Time { return c.prev }

// Clock implements worker.Claim: the database's clock as the last Acquire
// or Renew read it.
func (c *claim) Clock() (time.Time, time.Duration) { return coord.MsTime(c.clockMs), 0 }

// Renew implements worker.Claim: one UPDATE, guarded by the holder, the
// expiry, the namespace record and the claim's high-water mark.
func (c *claim) Renew(ctx context.Context, ttl time.Duration, reserve time.Time) error {
	if ttl < time.Millisecond {
		return fmt.Errorf("%w: sqldb: renewal TTL %v", worker.ErrInvalidConfig, ttl)
	}
	ttlMs, reserveMs := ttl.Milliseconds(), ceilMs(reserve)
	span := c.bound.Span()
	if span < 0 {
		span = maxSpan
	}
	args := []any{ttlMs, reserveMs, c.dc, c.id, c.owner, c.highMs, c.rec.holder, reserveMs, span}
	var expires int64
	var err error
	if c.w.d == Postgres {
		err = c.w.db.QueryRowContext(ctx, c.w.q.renew, args...).Scan(&expires)
		if errors.Is(err, sql.ErrNoRows) {
			return c.failed(ctx, "renewing", reserveMs)
		}
	} else {
		var res sql.Result
		if res, err = c.w.db.ExecContext(ctx, c.w.q.renew, args...); err == nil {
			var n int64
			if n, err = res.RowsAffected(); err == nil && n != 1 {
				return c.failed(ctx, "renewing", reserveMs)
			}
			if err == nil {
				expires, err = res.LastInsertId() // LAST_INSERT_ID(the new expiry)
			}
		}
	}
	if err != nil {
		return c.w.unavailable(ctx, fmt.Sprintf("renewing worker %d of datacenter %d", c.id, c.dc), err)
	}
	c.highMs = max(c.highMs, reserveMs)
	c.clockMs = expires - ttlMs
	c.leaseEndMs = expires
	return nil
}

// Release implements worker.Claim, with the checks of Renew.
func (c *claim) Release(ctx context.Context, reserve time.Time) error {
	res, err := c.w.db.ExecContext(ctx, c.w.q.release, ceilMs(reserve), c.dc, c.id, c.owner, c.highMs, c.rec.holder)
	if err != nil {
		return c.w.unavailable(ctx, fmt.Sprintf("releasing worker %d of datacenter %d", c.id, c.dc), err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return c.w.unavailable(ctx, fmt.Sprintf("releasing worker %d of datacenter %d", c.id, c.dc), err)
	}
	if n == 1 {
		// The lease ended here: a later Release of this claim that finds
		// the slot free or taken is ErrNotHeld, not a rollback.
		c.leaseEndMs = 0
		return nil
	}
	return c.failed(ctx, "releasing", -1)
}

// failed explains a guarded UPDATE that matched no row: it reads the slot
// and the namespace record, and tells a reset (worker.ErrReset, after
// re-initialising the record when this holder is the first to find it)
// from a lease this owner no longer holds (worker.ErrNotHeld). renewedTo ≥
// 0 is a renewal's reservation: MySQL without clientFoundRows reports 0
// rows for an UPDATE that matched but changed nothing (a second renewal in
// the same millisecond), which the read-back tells apart.
func (c *claim) failed(ctx context.Context, op string, renewedTo int64) error {
	what := fmt.Sprintf("%s worker %d of datacenter %d", op, c.id, c.dc)
	rows, err := c.w.db.QueryContext(ctx, c.w.q.slot, c.dc, c.id)
	if err != nil {
		return c.w.unavailable(ctx, what+": reading the slot", err)
	}
	var (
		slot, rec *row
		nowMs     int64
	)
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.id, &r.holder, &r.expiresMs, &r.highMs, &nowMs); err != nil {
			rows.Close()
			return c.w.unavailable(ctx, what+": reading the slot", err)
		}
		if r.id == -2 {
			rec = &r
		} else {
			slot = &r
		}
	}
	if err := rows.Err(); err != nil {
		return c.w.unavailable(ctx, what+": reading the slot", err)
	}
	rows.Close()
	var cur *record
	if rec != nil {
		r, err := c.w.parseRecord(c.dc, rec.holder, rec.expiresMs, rec.highMs)
		if err != nil {
			return err
		}
		cur = &r
	}
	if reason, reinit := c.resetReason(slot, cur, nowMs); reason != "" {
		if !reinit {
			return fmt.Errorf("%w: %s: %s", worker.ErrReset, c.w.where(op), reason)
		}
		fresh, already, err := c.w.reinit(ctx, c.dc, cur, c.contract, c.quarantineMs)
		switch {
		case err != nil:
			// Not ErrReset: the holder tries again, and re-initialises
			// the record then, or finds it done.
			return fmt.Errorf("%w (%s, %s)", err, what, reason)
		case already:
			return fmt.Errorf("%w: %s: %s; another client has re-initialised the namespace record since (incarnation %s, floor %s)",
				worker.ErrReset, c.w.where(op), reason, fresh.incarnation, coord.FormatMs(fresh.floorMs))
		}
		return fmt.Errorf("%w: %s: %s; the namespace record is re-initialised (incarnation %s): no worker id of datacenter %d issues before %s",
			worker.ErrReset, c.w.where(op), reason, fresh.incarnation, c.dc, coord.FormatMs(fresh.floorMs))
	}
	if slot == nil { // not reached: resetReason reports a missing slot
		return fmt.Errorf("%w: %s: worker %d of datacenter %d has no row", worker.ErrNotHeld, c.w.where(op), c.id, c.dc)
	}
	r := *slot
	if renewedTo >= 0 && r.holder == c.owner && r.expiresMs > nowMs && c.bound.Exceeds(renewedTo, nowMs) {
		return c.bound.Refused(fmt.Sprintf("%s: %s", c.w.where(op), what), coord.MsTime(renewedTo), coord.MsTime(nowMs))
	}
	if c.w.d == MySQL && renewedTo >= 0 && r.holder == c.owner && r.expiresMs > nowMs && r.highMs >= renewedTo {
		// Matched, nothing to change (MySQL without clientFoundRows).
		c.highMs = max(c.highMs, renewedTo)
		c.clockMs = nowMs
		c.leaseEndMs = max(c.leaseEndMs, r.expiresMs)
		return nil
	}
	switch {
	case r.holder == "":
		return fmt.Errorf("%w: %s: worker %d of datacenter %d is free", worker.ErrNotHeld, c.w.where(op), c.id, c.dc)
	case r.holder == c.owner && r.expiresMs > nowMs:
		return fmt.Errorf("%w: %s: worker %d of datacenter %d: the update matched no row, yet the slot shows this owner until %s",
			worker.ErrNotHeld, c.w.where(op), c.id, c.dc, coord.MsTime(r.expiresMs).Format(time.RFC3339Nano))
	case r.holder == c.owner:
		return fmt.Errorf("%w: %s: the lease of worker %d of datacenter %d expired at %s (database time %s)", worker.ErrNotHeld,
			c.w.where(op), c.id, c.dc, coord.MsTime(r.expiresMs).Format(time.RFC3339Nano), coord.MsTime(nowMs).Format(time.RFC3339Nano))
	default:
		return fmt.Errorf("%w: %s: worker %d of datacenter %d is held by %q until %s", worker.ErrNotHeld,
			c.w.where(op), c.id, c.dc, r.holder, coord.MsTime(r.expiresMs).Format(time.RFC3339Nano))
	}
}

// resetReason says, by worker.Diagnose, whether the slot and namespace
// record (nil when their rows are missing), read at nowMs by the database's
// clock, show the state this claim acquired under lost or rolled back (a
// truncated table, deleted rows, a restore, a point-in-time recovery, a
// failover to a lagging replica), and whether this holder must
// re-initialise the record (false: another client already did).
func (c *claim) resetReason(slot *row, rec *record, nowMs int64) (reason string, reinit bool) {
	found := worker.Found{Where: fmt.Sprintf("datacenter %d in %s", c.dc, c.w.table), Now: coord.MsTime(nowMs),
		Store: "the database"}
	if rec != nil {
		found.Record = &worker.Namespace{Incarnation: rec.incarnation, Contract: rec.contract, Initialised: coord.MsTime(rec.initMs)}
	}
	if slot != nil {
		found.Slot = &worker.Info{Datacenter: c.dc, Worker: c.id, Holder: slot.holder, Expires: coord.MsTime(slot.expiresMs), HighWater: coord.MsTime(slot.highMs)}
	}
	d := worker.Diagnose(worker.Hold{Owner: c.owner, WorkerID: c.id, Incarnation: c.rec.incarnation, Initialised: coord.MsTime(c.rec.initMs),
		Stored: coord.MsTime(c.highMs), LeaseEnd: coord.MsTime(c.leaseEndMs)}, found)
	switch d.Verdict {
	case worker.Lost:
		return d.Found, true
	case worker.ResetBefore:
		return d.Found, false
	}
	return "", false
}
