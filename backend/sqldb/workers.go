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
//     one row per (datacenter, worker) slot ever held, created by
//     CreateSchema or by a migration that applies SchemaSQL.
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
//     expires_at_ms > now; matching no row is worker.ErrNotHeld. The
//     high-water mark only ever moves up (GREATEST).
//   - Database and connection errors wrap worker.ErrUnavailable with the
//     driver's error kept for errors.Is/As; bad arguments wrap
//     worker.ErrInvalidConfig; every id held wraps worker.ErrExhausted.
//
// Open picks the dialect from the DSN: a postgres:// or postgresql:// URL is
// PostgreSQL (driver github.com/jackc/pgx/v5/stdlib), anything else is a
// github.com/go-sql-driver/mysql DSN.
package sqldb

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/go-sql-driver/mysql"

	"github.com/flakeid/flakeid/internal/backoff"
	"github.com/flakeid/flakeid/worker"
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
	db      *sql.DB
	d       Dialect
	table   string
	q       statements
	ownedDB bool // Close closes db: Open made it

	lockHold time.Duration // lockHoldLimit; tests shorten it
	// idleTxTimeout is, on MySQL, whether the server has MariaDB's
	// idle_transaction_timeout: 0 not known yet, 1 yes, -1 no.
	idleTxTimeout atomic.Int32
	// testHookLocked, when set, runs in Acquire right after the lock row
	// is locked.
	testHookLocked func()
}

// NewWorkers returns a coordinator that keeps its slots in table ("" means
// DefaultTable) of db, a database of dialect d. The table is not created:
// call CreateSchema, or apply SchemaSQL with a migration tool. table must
// match ^[A-Za-z_][A-Za-z0-9_]{0,62}$.
//
// A MySQL db should be opened with clientFoundRows=true (OpenDB does);
// without it Renew reads the slot back when an UPDATE changed nothing.
func NewWorkers(db *sql.DB, d Dialect, table string) (*Workers, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: sqldb: no database", worker.ErrInvalidConfig)
	}
	if table == "" {
		table = DefaultTable
	}
	q, err := newStatements(d, table)
	if err != nil {
		return nil, err
	}
	return &Workers{db: db, d: d, table: table, q: q, lockHold: lockHoldLimit}, nil
}

// Open opens the database dsn names (see DialectOf and OpenDB), checks that
// it answers, and returns a coordinator on its DefaultTable. It does not
// create the table: call CreateSchema. Close closes the database.
func Open(ctx context.Context, dsn string) (*Workers, error) {
	db, d, err := OpenDB(dsn)
	if err != nil {
		return nil, err
	}
	w, err := NewWorkers(db, d, "")
	if err != nil {
		db.Close()
		return nil, err
	}
	w.ownedDB = true
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, w.unavailable(ctx, "connecting", err)
	}
	return w, nil
}

// Close closes the database if Open opened it; a db given to NewWorkers is
// left to its owner.
func (w *Workers) Close() error {
	if w.ownedDB {
		return w.db.Close()
	}
	return nil
}

// Dialect is the coordinator's SQL dialect.
func (w *Workers) Dialect() Dialect { return w.d }

// Table is the name of the coordinator's table.
func (w *Workers) Table() string { return w.table }

// SchemaSQL is the DDL of the coordinator's table (see the function
// SchemaSQL).
func (w *Workers) SchemaSQL() string { return w.q.schema }

// CreateSchema creates the table when it does not exist (CREATE TABLE IF NOT
// EXISTS); it is safe to run at every start, and by several nodes at once.
func (w *Workers) CreateSchema(ctx context.Context) error {
	if err := createTable(ctx, w.db, w.q.schema); err != nil {
		return w.unavailable(ctx, "creating the table", err)
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

// ceilMs is t in Unix milliseconds rounded up (a high-water mark must never
// be stored lower than asked), and 0 for instants before 1970.
func ceilMs(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	ms := t.UnixMilli()
	if time.UnixMilli(ms).Before(t) {
		ms++
	}
	return max(ms, 0)
}

// msTime is the instant of a stored Unix-ms value; 0 is the zero time.
func msTime(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// errLostRace is an Acquire attempt that found its pick taken between the
// read and the write; the transaction runs again.
type errLostRace struct{ id int64 }

func (e errLostRace) Error() string {
	return fmt.Sprintf("worker %d changed under the transaction", e.id)
}

// Acquire implements worker.Coordinator.
func (w *Workers) Acquire(ctx context.Context, req worker.Request) (worker.Claim, error) {
	if req.Workers < 1 || req.Datacenter < 0 || req.TTL < time.Millisecond {
		return nil, fmt.Errorf("%w: sqldb: bad request %+v", worker.ErrInvalidConfig, req)
	}
	if err := validOwner(req.Owner); err != nil {
		return nil, fmt.Errorf("%w: sqldb: %w", worker.ErrInvalidConfig, err)
	}
	// On MariaDB the transactions run on one connection whose idle
	// transaction timeout is set for the whole Acquire, retries included.
	var begin beginner = w.db
	if w.d == MySQL && w.idleTxTimeout.Load() >= 0 {
		conn, err := w.mariaDBIdleLimit(ctx)
		if err != nil {
			return nil, w.unavailable(ctx, "acquiring a worker id", err)
		}
		if conn != nil {
			defer w.releaseIdleLimit(conn)
			begin = conn
		}
	}
	bo := backoff.Backoff{Min: 5 * time.Millisecond, Max: 200 * time.Millisecond}
	var err error
	for attempt := 0; attempt < maxAttempts; attempt++ {
		var c *claim
		c, err = w.acquireOnce(ctx, begin, req)
		if err == nil {
			return c, nil
		}
		var lost errLostRace
		if !errors.As(err, &lost) && !retryable(err) {
			break
		}
		if serr := sleepCtx(ctx, bo.Next(attempt)); serr != nil {
			break
		}
	}
	if errors.Is(err, worker.ErrExhausted) || errors.Is(err, worker.ErrUnavailable) {
		return nil, err
	}
	return nil, w.unavailable(ctx, "acquiring a worker id", err)
}

// beginner starts transactions: a *sql.DB, or one *sql.Conn.
type beginner interface {
	BeginTx(context.Context, *sql.TxOptions) (*sql.Tx, error)
}

// acquireOnce is one Acquire transaction, begun by begin. Errors of the
// database are returned unwrapped, for retryable to classify.
func (w *Workers) acquireOnce(ctx context.Context, begin beginner, req worker.Request) (c *claim, err error) {
	tx, err := begin.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	dc := req.Datacenter
	if w.d == Postgres {
		if _, err := tx.ExecContext(ctx, fmt.Sprintf("SET LOCAL idle_in_transaction_session_timeout = %d", w.lockHold.Milliseconds())); err != nil {
			return nil, err
		}
	}
	// Serialise the datacenter's acquisitions on its lock row.
	if _, err := tx.ExecContext(ctx, w.q.lockInsert, dc); err != nil {
		return nil, err
	}
	var lockID int64
	if err := tx.QueryRowContext(ctx, w.q.lockSelect, dc).Scan(&lockID); err != nil {
		return nil, err
	}
	if w.testHookLocked != nil {
		w.testHookLocked()
	}
	rows, err := tx.QueryContext(ctx, w.q.slots, dc, req.Workers)
	if err != nil {
		return nil, err
	}
	var (
		best      row
		found     bool
		held      int64
		nowMs     int64
		next      int64 // the lowest id not seen yet
		bestFresh bool  // best is a never-used id
	)
	consider := func(r row, fresh bool) {
		// The first free id in id order whose mark has passed wins;
		// failing that, the smallest mark.
		if !found || (best.highMs > nowMs && r.highMs < best.highMs) {
			best, found, bestFresh = r, true, fresh
		}
	}
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
		if next < r.id {
			consider(row{id: next}, true) // never used: its mark is zero
		}
		next = r.id + 1
		if r.holder != "" && r.expiresMs > nowMs {
			held++
			continue
		}
		consider(r, false)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if err := rows.Close(); err != nil {
		return nil, err
	}
	if next < req.Workers {
		consider(row{id: next}, true)
	}
	if !found {
		err = fmt.Errorf("%w: %s: %d of %d worker ids of datacenter %d are held", worker.ErrExhausted,
			w.where("acquiring"), held, req.Workers, dc)
		return nil, err
	}
	ttl, reserve := req.TTL.Milliseconds(), ceilMs(req.Reserve)
	if bestFresh {
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
			err = errLostRace{best.id}
			return nil, err
		}
	}
	if err := tx.Commit(); err != nil {
		return nil, err
	}
	return &claim{w: w, dc: dc, id: best.id, owner: req.Owner, prev: msTime(best.highMs)}, nil
}

// List implements worker.Coordinator. The lock row is not reported.
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
		in := worker.Info{Datacenter: datacenter, Worker: r.id, HighWater: msTime(r.highMs)}
		if r.holder != "" {
			in.Holder, in.Expires = r.holder, msTime(r.expiresMs)
		}
		infos = append(infos, in)
	}
	if err := rows.Err(); err != nil {
		return nil, w.unavailable(ctx, "listing", err)
	}
	return infos, nil
}

type claim struct {
	w      *Workers
	dc, id int64
	owner  string
	prev   time.Time
}

func (c *claim) WorkerID() int64     { return c.id }
func (c *claim) Previous() time.Time { return c.prev }

// Renew implements worker.Claim.
func (c *claim) Renew(ctx context.Context, ttl time.Duration, reserve time.Time) error {
	if ttl < time.Millisecond {
		return fmt.Errorf("%w: sqldb: renewal TTL %v", worker.ErrInvalidConfig, ttl)
	}
	res, err := c.w.db.ExecContext(ctx, c.w.q.renew, ttl.Milliseconds(), ceilMs(reserve), c.dc, c.id, c.owner)
	if err != nil {
		return c.w.unavailable(ctx, fmt.Sprintf("renewing worker %d of datacenter %d", c.id, c.dc), err)
	}
	return c.matched(ctx, res, "renewing", ceilMs(reserve))
}

// Release implements worker.Claim.
func (c *claim) Release(ctx context.Context, reserve time.Time) error {
	res, err := c.w.db.ExecContext(ctx, c.w.q.release, ceilMs(reserve), c.dc, c.id, c.owner)
	if err != nil {
		return c.w.unavailable(ctx, fmt.Sprintf("releasing worker %d of datacenter %d", c.id, c.dc), err)
	}
	return c.matched(ctx, res, "releasing", -1)
}

// matched checks that a guarded UPDATE hit the slot, and otherwise reads who
// holds it for the ErrNotHeld message. renewedTo ≥ 0 is a renewal's
// reservation: MySQL without clientFoundRows reports 0 rows for an UPDATE
// that matched but changed nothing (a second renewal in the same
// millisecond), which the read-back tells apart.
func (c *claim) matched(ctx context.Context, res sql.Result, op string, renewedTo int64) error {
	n, err := res.RowsAffected()
	if err != nil {
		return c.w.unavailable(ctx, fmt.Sprintf("%s worker %d of datacenter %d", op, c.id, c.dc), err)
	}
	if n == 1 {
		return nil
	}
	var r row
	var nowMs int64
	err = c.w.db.QueryRowContext(ctx, c.w.q.slot, c.dc, c.id).Scan(&r.holder, &r.expiresMs, &r.highMs, &nowMs)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("%w: %s: worker %d of datacenter %d has no row", worker.ErrNotHeld, c.w.where(op), c.id, c.dc)
	case err != nil:
		return c.w.unavailable(ctx, fmt.Sprintf("%s worker %d of datacenter %d: reading the slot", op, c.id, c.dc), err)
	}
	if c.w.d == MySQL && renewedTo >= 0 && r.holder == c.owner && r.expiresMs > nowMs && r.highMs >= renewedTo {
		return nil // matched, nothing to change
	}
	switch {
	case r.holder == "":
		return fmt.Errorf("%w: %s: worker %d of datacenter %d is free", worker.ErrNotHeld, c.w.where(op), c.id, c.dc)
	case r.holder == c.owner && r.expiresMs > nowMs:
		return fmt.Errorf("%w: %s: worker %d of datacenter %d: the update matched no row, yet the slot shows this owner until %s",
			worker.ErrNotHeld, c.w.where(op), c.id, c.dc, msTime(r.expiresMs).Format(time.RFC3339Nano))
	case r.holder == c.owner:
		return fmt.Errorf("%w: %s: the lease of worker %d of datacenter %d expired at %s (database time %s)", worker.ErrNotHeld,
			c.w.where(op), c.id, c.dc, msTime(r.expiresMs).Format(time.RFC3339Nano), msTime(nowMs).Format(time.RFC3339Nano))
	default:
		return fmt.Errorf("%w: %s: worker %d of datacenter %d is held by %q until %s", worker.ErrNotHeld,
			c.w.where(op), c.id, c.dc, r.holder, msTime(r.expiresMs).Format(time.RFC3339Nano))
	}
}
