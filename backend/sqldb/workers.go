// Package sqldb keeps flakeid's state in a SQL database — PostgreSQL, or
// MySQL/MariaDB with InnoDB: the worker-id coordinator (Workers, a
// worker.Coordinator) and the segment store (Segments, a segment.Store on
// Meituan Leaf's leaf_alloc table; see SegmentSchemaSQL). One database/sql
// implementation serves both dialects; a Dialect holds what differs
// (placeholders, identifier quoting, the upsert of the lock row, the clock
// expression, the DDL).
//
// Design of the worker coordinator: a protocol.Store, so that the lease
// protocol (worker/protocol) runs on SQL as on every other coordinator;
// every decision is the driver's.
//
//   - One table (default "flakeid_workers", see SchemaSQL for its columns),
//     one row per (datacenter, worker) slot ever held, plus a lock row and
//     a namespace-record row per datacenter, and a registry table shared
//     by the worker tables of the database (one per database: see
//     DefaultRegistry), both created by CreateSchema or by a migration that
//     applies SchemaSQL. The namespace is the table (unqualified).
//   - Every expiry is computed and compared by the DATABASE's clock, in Unix
//     milliseconds (PostgreSQL clock_timestamp(), MySQL UTC_TIMESTAMP(6)),
//     never by the clock of the Go process.
//   - Read is one SELECT (one snapshot): the datacenter's slot and record
//     rows, its registry row and the registry's ID space, with the clock.
//   - Commit of one changed slot under an unchanged record, registry and
//     space (a renewal, a release, a lowered mark) is one UPDATE guarded by
//     the slot row and the record row being as read: one round trip, and
//     no lock. Every other commit (a re-initialisation, an Unclaim) is one
//     READ COMMITTED transaction that locks the datacenter's lock row
//     (worker −1, created if missing), reads the datacenter again and
//     compares it with what was read (protocol.Same), writes the registry
//     rows it creates or frees, the record and the slots that differ —
//     each UPDATE guarded by its row being as read, since a one-slot
//     commit does not wait for the lock row — and reads the registry rows
//     back: a space or claim that another table's transaction created
//     meanwhile (the unique key made this one wait for it) is a conflict,
//     and the transaction rolls back. An Acquire is decided inside such a
//     transaction (protocol.LockedUpdater: read, decide, write under the
//     lock row), so that nodes acquiring at once queue instead of losing
//     races to one another; a refusal rolls it back. So acquisitions in a
//     datacenter are serialised, a renewal never waits for one, and a slow
//     or partitioned acquirer delays other acquisitions, never a renewal. On PostgreSQL the
//     transaction sets idle_in_transaction_session_timeout (5s), on MariaDB
//     its session's idle_transaction_timeout (5s, reset afterwards), so that
//     a client partitioned mid-transaction frees the lock row; on MySQL,
//     which has neither, it is freed when the server drops that connection.
//   - The namespace record of a datacenter is the row (datacenter, -2):
//     holder = incarnation (16 hex digits), a space, the ID-space contract
//     (at most 238 characters); expires_at_ms = when it was initialised,
//     high_water_ms = its floor. Whatever takes or brings back the slots
//     (TRUNCATE, DELETE, a restore, a failover) takes or brings back the
//     record with them, which is how the driver finds a lost state.
//   - The registry row of datacenter -1 (namespace "(ID space)") holds the
//     ID space in its contract column; every other row names the table
//     that claimed its datacenter. flakeid never deletes a row but by
//     `flakeid workers unclaim`.
//   - Bad arguments the columns cannot hold (an owner over 255 bytes, a
//     contract over 238 characters, a TTL under a millisecond) are
//     worker.ErrInvalidConfig before anything is read; database and
//     connection errors wrap worker.ErrUnavailable with the driver's error
//     kept for errors.Is/As.
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
	"cmp"
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/flakeid/flakeid/worker"
	"github.com/flakeid/flakeid/worker/protocol"
)

// lockHoldLimit is how long a locked transaction may sit idle on the
// server between two of its statements before the server ends the session:
// a client partitioned away in the middle of one would otherwise keep the
// datacenter's lock row, and so every other Acquire in the datacenter
// waiting, until the server notices the dead connection (TCP keepalive: two
// hours by default). PostgreSQL: idle_in_transaction_session_timeout, set
// LOCAL to the transaction. MariaDB: idle_transaction_timeout (whole
// seconds), set on the transaction's connection and reset after it. MySQL
// has no equivalent.
const lockHoldLimit = 5 * time.Second

// Workers is a worker.Coordinator, worker.MarkLowerer and worker.Registry
// over a table of a SQL database: protocol.Driver over its rows.
type Workers struct {
	*protocol.Driver
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
	// testHookLocked, when set, runs in a locked transaction right after
	// the lock row is locked.
	testHookLocked func()
	// testHookCompared, when set, runs in a locked commit right after it
	// found the datacenter as read, before it writes.
	testHookCompared func()
}

// NewWorkers returns a coordinator that keeps its slots in table ("" means
// DefaultTable) of db, a database of dialect d, and claims its datacenter
// ids in the registry table DefaultRegistry, which every worker table of
// the database shares. The tables are not created: call CreateSchema, or apply
// SchemaSQL with a migration tool. table must match
// ^[A-Za-z_][A-Za-z0-9_]{0,62}$; it is also the coordinator's namespace name
// in the registry and in errors. db stays the caller's: the coordinator's
// Close does not close it.
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
	w := &Workers{db: db, d: d, table: table, registry: registry, q: q, lockHold: lockHoldLimit}
	w.Driver = protocol.New(store{w})
	return w, nil
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

// Acquire implements worker.Coordinator: the driver's, once the request
// fits the columns.
func (w *Workers) Acquire(ctx context.Context, req worker.Request) (worker.Claim, error) {
	if req.TTL > 0 && req.TTL < time.Millisecond {
		return nil, fmt.Errorf("%w: sqldb: bad request: TTL %v, want ≥ 1ms (leases are stored in whole milliseconds)", worker.ErrInvalidConfig, req.TTL)
	}
	if err := validOwner(req.Owner); err != nil && req.Owner != "" {
		return nil, fmt.Errorf("%w: sqldb: %w", worker.ErrInvalidConfig, err)
	}
	if err := validContract(req.Contract); err != nil {
		return nil, fmt.Errorf("%w: sqldb: %w", worker.ErrInvalidConfig, err)
	}
	return w.Driver.Acquire(ctx, req)
}

// where names the coordinator in error messages.
func (w *Workers) where(op string) string {
	return fmt.Sprintf("sqldb: %s table %s: %s", w.d, w.table, op)
}

// unavailable wraps a database error in worker.ErrUnavailable, keeping the
// driver's error, and the context's error when that is why it failed.
func (w *Workers) unavailable(ctx context.Context, op string, err error) error {
	if missingTable(err) {
		return fmt.Errorf("%w: %s: a table does not exist (a database set up by an older flakeid has no datacenter registry table %s): "+
			"run CreateSchema (flakeid creates them at start), or apply the DDL (`flakeid workers schema` prints it):\n%s(%w)",
			worker.ErrUnavailable, w.where(op), w.registry, w.SchemaSQL(), err)
	}
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

// missingTable reports an error of a table that does not exist (PostgreSQL
// 42P01 undefined_table, MySQL 1146).
func missingTable(err error) bool {
	var pe *pgconn.PgError
	var me *mysql.MySQLError
	return errors.As(err, &pe) && pe.Code == "42P01" || errors.As(err, &me) && me.Number == 1146
}

// The registry row that holds the ID space every namespace and datacenter
// on the registry shares: datacenter -1, namespace spaceNamespace, the
// space in the contract column.
const (
	spaceRow       = -1
	spaceNamespace = "(ID space)"
	recordRow      = -2 // the worker id of a datacenter's namespace record
)

// incarnationLen is the length of an incarnation: 16 hex digits.
const incarnationLen = 16

// maxContract is the longest contract, in characters, that fits the holder
// column (255 characters) after an incarnation and a space.
const maxContract = 255 - incarnationLen - 1

func validOwner(owner string) error {
	switch {
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

// store is w as a protocol.Store; Workers does not implement it itself, so
// that its exported methods are the coordinator's.
type store struct{ w *Workers }

func (s store) Names() protocol.Names {
	return protocol.Names{Registry: "the registry table " + s.w.registry, Namespace: s.w.table,
		Place: s.w.table, Store: "the database"}
}

// queryer runs a query: a *sql.DB or a *sql.Tx.
type queryer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// Read implements protocol.Store: one SELECT.
func (s store) Read(ctx context.Context, dc int64) (protocol.State, error) {
	st, err := s.read(ctx, s.w.db, dc)
	if err != nil && !errors.Is(err, worker.ErrUnavailable) {
		err = s.w.unavailable(ctx, fmt.Sprintf("reading datacenter %d", dc), err)
	}
	return st, err
}

// read reads datacenter dc through q; errors of the database are returned
// as they are.
func (s store) read(ctx context.Context, q queryer, dc int64) (protocol.State, error) {
	st := protocol.State{Datacenter: dc, Slots: map[int64]protocol.Slot{}}
	rows, err := q.QueryContext(ctx, s.w.q.read, dc, dc)
	if err != nil {
		return st, err
	}
	defer rows.Close()
	var nowMs int64
	for rows.Next() {
		var (
			kind, id, expires, high, at int64
			text                        string
		)
		if err := rows.Scan(&kind, &id, &text, &expires, &high, &at); err != nil {
			return st, err
		}
		nowMs = max(nowMs, at)
		switch {
		case kind == 1 && id == spaceRow:
			st.Space, st.HasSpace = text, true
		case kind == 1:
			st.Claim.Namespace = text
		case kind == 0 && id == recordRow:
			rec, err := s.w.parseRecord(dc, text, expires, high)
			if err != nil {
				return st, err
			}
			st.Record = &rec
		case kind == 0 && id < 0:
			return st, s.w.corrupt(dc, id, "no such worker id")
		case kind == 0 && high < 0:
			return st, s.w.corrupt(dc, id, "high_water_ms %d is negative", high)
		case kind == 0 && expires < 0:
			return st, s.w.corrupt(dc, id, "expires_at_ms %d is negative", expires)
		case kind == 0:
			st.Slots[id] = protocol.Slot{Holder: text, ExpiresMs: expires, HighMs: high}
		}
	}
	if err := rows.Err(); err != nil {
		return st, err
	}
	st.Now = time.UnixMilli(nowMs).UTC()
	return st, nil
}

// parseRecord reads the record row's columns.
func (w *Workers) parseRecord(dc int64, holder string, initMs, floorMs int64) (protocol.Record, error) {
	inc, contract, ok := strings.Cut(holder, " ")
	if !ok || len(inc) != incarnationLen || strings.Trim(inc, "0123456789abcdef") != "" {
		return protocol.Record{}, w.corrupt(dc, recordRow, "the namespace record's holder %q is not an incarnation of %d hex digits, a space and a contract", holder, incarnationLen)
	}
	if initMs <= 0 || floorMs < initMs {
		return protocol.Record{}, w.corrupt(dc, recordRow, "the namespace record was initialised at %d ms with the floor %d ms", initMs, floorMs)
	}
	return protocol.Record{Incarnation: inc, Contract: contract, InitialisedMs: initMs, FloorMs: floorMs}, nil
}

// Commit implements protocol.Store: a guarded UPDATE when one slot changed
// and nothing else, else a locked transaction (see the package doc).
func (s store) Commit(ctx context.Context, read, next protocol.State) error {
	dc := read.Datacenter
	changed := changedSlots(read, next)
	recordChanged := next.Record != nil && (read.Record == nil || *next.Record != *read.Record)
	others := recordChanged || next.Claim != read.Claim || next.HasSpace != read.HasSpace
	if !others && len(changed) == 0 {
		return nil
	}
	if len(changed) == 1 && !others && read.Record != nil {
		id := changed[0]
		if old, existed := read.Slots[id]; existed { // a new row is inserted under the lock row
			sl, r := next.Slots[id], read.Record
			err := execOne(ctx, s.w.db, s.w.q.guarded, sl.Holder, sl.ExpiresMs, sl.HighMs, dc, id, old.Holder, old.ExpiresMs, old.HighMs,
				r.Incarnation+" "+r.Contract, r.InitialisedMs, r.FloorMs)
			if err != nil && !errors.Is(err, protocol.ErrConflict) {
				return s.w.unavailable(ctx, fmt.Sprintf("writing worker %d of datacenter %d", id, dc), err)
			}
			return err
		}
	}
	return s.locked(ctx, dc, func(tx *sql.Tx) error {
		cur, err := s.read(ctx, tx, dc)
		if err != nil {
			return err
		}
		if !protocol.Same(read, cur) {
			return protocol.ErrConflict
		}
		if s.w.testHookCompared != nil {
			s.w.testHookCompared()
		}
		return s.write(ctx, tx, read, next, changed)
	})
}

// UpdateLocked implements protocol.LockedUpdater: the read, the decision
// and the writes in one transaction on the lock row.
func (s store) UpdateLocked(ctx context.Context, dc int64, decide func(protocol.State, time.Time) *protocol.State) error {
	err := s.locked(ctx, dc, func(tx *sql.Tx) error {
		sent := time.Now()
		read, err := s.read(ctx, tx, dc)
		if err != nil {
			return err
		}
		next := decide(read, sent)
		if next == nil {
			return errNothing // rolled back: a refusal writes nothing, not even the lock row
		}
		return s.write(ctx, tx, read, *next, changedSlots(read, *next))
	})
	if errors.Is(err, errNothing) {
		return nil
	}
	return err
}

// errNothing ends a locked transaction that has nothing to write.
var errNothing = errors.New("nothing to write")

// locked runs fn in a transaction on datacenter dc's lock row
// (inLockedTx), with a lost race or a serialization failure as
// protocol.ErrConflict.
func (s store) locked(ctx context.Context, dc int64, fn func(*sql.Tx) error) error {
	err := s.w.inLockedTx(ctx, dc, fn)
	switch {
	case errors.Is(err, protocol.ErrConflict) || retryable(err):
		return protocol.ErrConflict
	case err != nil && !errors.Is(err, worker.ErrUnavailable) && !errors.Is(err, errNothing):
		return s.w.unavailable(ctx, fmt.Sprintf("writing datacenter %d", dc), err)
	}
	return err
}

// changedSlots are the worker ids whose slots differ between read and next.
func changedSlots(read, next protocol.State) []int64 {
	var changed []int64
	for id, sl := range next.Slots {
		if old, ok := read.Slots[id]; !ok || old != sl {
			changed = append(changed, id)
		}
	}
	return changed
}

// execOne runs a guarded UPDATE through ex: one row affected, or
// protocol.ErrConflict.
func execOne(ctx context.Context, ex interface {
	ExecContext(context.Context, string, ...any) (sql.Result, error)
}, query string, args ...any) error {
	res, err := ex.ExecContext(ctx, query, args...)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return cmp.Or(err, protocol.ErrConflict)
	}
	return nil
}

// write writes, in the locked transaction tx, the registry rows next
// creates or frees, its record and the slots changed, then reads the
// registry rows back: another table's transaction may have created them
// first, which is a conflict.
func (s store) write(ctx context.Context, tx *sql.Tx, read, next protocol.State, changed []int64) error {
	dc, q := read.Datacenter, s.w.q
	if next.HasSpace && !read.HasSpace {
		if _, err := tx.ExecContext(ctx, q.regInsert, spaceRow, spaceNamespace, next.Space); err != nil {
			return err
		}
	}
	if next.Claim != read.Claim {
		var err error
		if next.Claim.Namespace == "" {
			_, err = tx.ExecContext(ctx, q.regDelete, dc, s.w.table)
		} else {
			contract := ""
			if next.Record != nil {
				contract = next.Record.Contract
			}
			_, err = tx.ExecContext(ctx, q.regInsert, dc, next.Claim.Namespace, contract)
		}
		if err != nil {
			return err
		}
	}
	// The rows to write, by worker id: the record row's columns as a
	// slot's (holder, expires_at_ms, high_water_ms), and the slots.
	rows, olds := map[int64]protocol.Slot{}, maps.Clone(read.Slots)
	if r := next.Record; r != nil && (read.Record == nil || *r != *read.Record) {
		rows[recordRow] = protocol.Slot{Holder: r.Incarnation + " " + r.Contract, ExpiresMs: r.InitialisedMs, HighMs: r.FloorMs}
		if o := read.Record; o != nil {
			olds[recordRow] = protocol.Slot{Holder: o.Incarnation + " " + o.Contract, ExpiresMs: o.InitialisedMs, HighMs: o.FloorMs}
		}
	}
	for _, id := range changed {
		rows[id] = next.Slots[id]
	}
	for id, sl := range rows {
		old, existed := olds[id]
		if !existed {
			if _, err := tx.ExecContext(ctx, q.insert, dc, id, sl.Holder, sl.ExpiresMs, sl.HighMs); err != nil {
				return err
			}
			continue
		}
		// Guarded by the row as read: a one-slot commit (a renewal's
		// guarded UPDATE) does not wait for the lock row, and may have
		// changed it since.
		if err := execOne(ctx, tx, q.update, sl.Holder, sl.ExpiresMs, sl.HighMs, dc, id, old.Holder, old.ExpiresMs, old.HighMs); err != nil {
			return err
		}
	}
	for _, row := range []struct {
		dc   int64
		want string
		has  bool
	}{{spaceRow, next.Space, next.HasSpace}, {dc, next.Claim.Namespace, next.Claim.Namespace != ""}} {
		var ns, contract string
		var at int64
		err := tx.QueryRowContext(ctx, q.regSelect, row.dc).Scan(&ns, &contract, &at)
		if row.dc == spaceRow {
			ns = contract
		}
		switch {
		case errors.Is(err, sql.ErrNoRows):
			if row.has {
				return protocol.ErrConflict
			}
		case err != nil:
			return err
		case !row.has || ns != row.want:
			return protocol.ErrConflict
		}
	}
	return nil
}

// Claims implements protocol.ClaimsReader: the registry table's rows.
func (s store) Claims(ctx context.Context) (worker.Claims, error) {
	rows, err := s.w.db.QueryContext(ctx, s.w.q.regAll)
	if err != nil {
		return worker.Claims{}, s.w.unavailable(ctx, "reading the registry table "+s.w.registry, err)
	}
	defer rows.Close()
	var c worker.Claims
	for rows.Next() {
		var (
			dc           int64
			ns, contract string
		)
		if err := rows.Scan(&dc, &ns, &contract); err != nil {
			return worker.Claims{}, s.w.unavailable(ctx, "reading the registry table "+s.w.registry, err)
		}
		if dc == spaceRow {
			c.Space, c.HasSpace = contract, true
			continue
		}
		c.Datacenters = append(c.Datacenters, worker.DatacenterClaim{Datacenter: dc, Namespace: ns})
	}
	if err := rows.Err(); err != nil {
		return worker.Claims{}, s.w.unavailable(ctx, "reading the registry table "+s.w.registry, err)
	}
	return c, nil
}

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

// inLockedTx runs fn in a READ COMMITTED transaction that holds the lock
// row of datacenter dc, and commits it if fn succeeds.
func (w *Workers) inLockedTx(ctx context.Context, dc int64, fn func(*sql.Tx) error) (err error) {
	var begin interface {
		BeginTx(context.Context, *sql.TxOptions) (*sql.Tx, error)
	} = w.db
	if w.d == MySQL && w.idleTxTimeout.Load() >= 0 {
		conn, err := w.mariaDBIdleLimit(ctx)
		if err != nil {
			return err
		}
		if conn != nil {
			defer w.releaseIdleLimit(conn)
			begin = conn
		}
	}
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
	// Serialise the datacenter's locked commits on its lock row.
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
