package sqldb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/flakeid/flakeid/internal/backoff"
	"github.com/flakeid/flakeid/segment"
	"github.com/flakeid/flakeid/worker"
)

// DefaultSegmentTable is the table NewSegments and OpenSegments use when
// none is given: Meituan Leaf's leaf_alloc, so that flakeid and Leaf servers
// can share one table.
const DefaultSegmentTable = "leaf_alloc"

// maxFetchAttempts bounds how often Fetch runs its statements again after a
// transient conflict (deadlock, serialisation failure, lock wait timeout).
const maxFetchAttempts = 5

// maxDescription is the length of Leaf's description column, VARCHAR(256).
const maxDescription = 256

// SegmentSchemaSQL returns the DDL of the segment table for dialect d: a
// CREATE TABLE IF NOT EXISTS statement that CreateSegmentSchema runs and that
// a migration tool can print or apply itself. table must match
// ^[A-Za-z_][A-Za-z0-9_]{0,62}$ ("" means DefaultSegmentTable); it is
// quoted, so it is case-sensitive. A bad dialect or table name is an error
// wrapping worker.ErrInvalidConfig, as everywhere in this package.
//
// The table is Leaf's leaf_alloc, column for column, so that a table Leaf
// created serves flakeid and the other way round:
//
//	biz_tag      VARCHAR(128)  the tag; the primary key
//	max_id       BIGINT        the first ID not yet handed out (default 1)
//	step         INT           the tag's configured step
//	description  VARCHAR(256)  free text, NULL allowed
//	update_time  TIMESTAMP     when the row last changed, by the database's clock
//
// Two deliberate differences from Leaf's script, neither of which Leaf
// notices:
//
//   - MySQL/MariaDB: the table's character set is utf8mb4 and biz_tag uses
//     the utf8mb4_bin collation, so tags compare exactly (case-sensitively)
//     as on PostgreSQL. Leaf's own DDL takes the server's default collation,
//     usually case-insensitive; on such a table tags that differ only in
//     letter case share one row (still safe: every fetch is one atomic step
//     on that row).
//   - PostgreSQL has no ON UPDATE CURRENT_TIMESTAMP: every statement of this
//     package sets update_time itself, and the column is TIMESTAMPTZ (an
//     instant, as MySQL's TIMESTAMP is). A hand-ported table with a
//     TIMESTAMP (without time zone) column works as well.
func SegmentSchemaSQL(d Dialect, table string) (string, error) {
	if table == "" {
		table = DefaultSegmentTable
	}
	if !d.valid() {
		return "", fmt.Errorf("%w: sqldb: unknown dialect %v", worker.ErrInvalidConfig, d)
	}
	if !validTableName(table) {
		return "", fmt.Errorf("%w: sqldb: table name %q does not match ^[A-Za-z_][A-Za-z0-9_]{0,62}$", worker.ErrInvalidConfig, table)
	}
	if d == MySQL {
		return "CREATE TABLE IF NOT EXISTS " + d.quote(table) + " (\n" +
			"  biz_tag VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL DEFAULT '',\n" +
			"  max_id BIGINT NOT NULL DEFAULT 1,\n" +
			"  step INT NOT NULL,\n" +
			"  description VARCHAR(256) DEFAULT NULL,\n" +
			"  update_time TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP,\n" +
			"  PRIMARY KEY (biz_tag)\n" +
			") ENGINE=InnoDB DEFAULT CHARSET=utf8mb4", nil
	}
	return "CREATE TABLE IF NOT EXISTS " + d.quote(table) + " (\n" +
		"  biz_tag VARCHAR(128) NOT NULL DEFAULT '',\n" +
		"  max_id BIGINT NOT NULL DEFAULT 1,\n" +
		"  step INT NOT NULL,\n" +
		"  description VARCHAR(256) DEFAULT NULL,\n" +
		"  update_time TIMESTAMPTZ NOT NULL DEFAULT CURRENT_TIMESTAMP,\n" +
		"  PRIMARY KEY (biz_tag)\n" +
		")", nil
}

// segmentStatements are the SQL texts of one Segments, built once by
// NewSegments for its dialect and table.
type segmentStatements struct {
	schema        []string // CREATE TABLE IF NOT EXISTS, one per table
	fetch         string   // PostgreSQL: UPDATE … RETURNING; MySQL: UPDATE … LAST_INSERT_ID(…) (Leaf) or UPDATE then fetchRead (Tinyid)
	fetchRead     string   // Tinyid on MySQL: the row after fetch, in fetch's transaction
	readMax       string   // why a fetch matched no row: max_id, step
	readShare     string   // Tinyid: step, delta, remainder of a row, live or deleted
	setDescTinyid string   // Tinyid: upsert into the description table
	// maxOff is what to add to the table's max_id to get the first ID not
	// yet handed out: 0 for Leaf, 1 for Tinyid (whose max_id is the last
	// ID of the newest segment).
	maxOff  int64
	get     string
	list    string
	insert  string
	setStep string
	setDesc string
	setBoth string
	revive  string // Create of a deleted tag
	delete  string
}

func newSegmentStatements(d Dialect, table string) (segmentStatements, error) {
	schema, err := SegmentSchemaSQL(d, table)
	if err != nil {
		return segmentStatements{}, err
	}
	t := d.quote(table)
	// The update time as microseconds since 1970, independent of the
	// session's time zone: MySQL's UNIX_TIMESTAMP of a TIMESTAMP column is
	// its stored UTC value; on PostgreSQL the cast is a no-op for
	// TIMESTAMPTZ and reads a TIMESTAMP in the session's zone, the zone
	// CURRENT_TIMESTAMP was written in.
	updated := "COALESCE((EXTRACT(EPOCH FROM update_time::timestamptz) * 1000000)::BIGINT, 0)"
	if d == MySQL {
		updated = "COALESCE(CAST(UNIX_TIMESTAMP(update_time) * 1000000 AS SIGNED), 0)"
	}
	cols := "biz_tag, max_id, step, COALESCE(description, ''), " + updated + ", 0, 0"
	// The guard max_id BETWEEN 0 AND MaxInt64 − n refuses a fetch that
	// would pass the int64 range (or start below zero) without changing
	// the row; the row is then read to tell why.
	// On MySQL the new max_id comes back as the statement's insert id
	// (LAST_INSERT_ID(expr) in an UPDATE sets it), in the OK packet.
	// A row with step 0 is a deleted tag (Delete): it keeps its max_id,
	// and nothing but Create (which brings it back above that max_id)
	// matches it. Leaf has no use for step 0 either.
	fetch := "UPDATE " + t + " SET max_id = max_id + ?, update_time = CURRENT_TIMESTAMP WHERE biz_tag = ? AND step > 0 AND max_id BETWEEN 0 AND ? RETURNING max_id, 0, 0"
	if d == MySQL {
		fetch = "UPDATE " + t + " SET max_id = LAST_INSERT_ID(max_id + ?), update_time = CURRENT_TIMESTAMP WHERE biz_tag = ? AND step > 0 AND max_id BETWEEN 0 AND ?"
	}
	q := segmentStatements{
		schema:  []string{schema},
		fetch:   fetch,
		readMax: "SELECT max_id, step FROM " + t + " WHERE biz_tag = ?",
		get:     "SELECT " + cols + " FROM " + t + " WHERE biz_tag = ? AND step > 0",
		list:    "SELECT " + cols + " FROM " + t + " WHERE step > 0 ORDER BY biz_tag",
		insert:  "INSERT INTO " + t + " (biz_tag, max_id, step, description, update_time) VALUES (?, ?, ?, ?, CURRENT_TIMESTAMP)",
		setStep: "UPDATE " + t + " SET step = ?, update_time = CURRENT_TIMESTAMP WHERE biz_tag = ? AND step > 0",
		setDesc: "UPDATE " + t + " SET description = ?, update_time = CURRENT_TIMESTAMP WHERE biz_tag = ? AND step > 0",
		setBoth: "UPDATE " + t + " SET step = ?, description = ?, update_time = CURRENT_TIMESTAMP WHERE biz_tag = ? AND step > 0",
		revive:  "UPDATE " + t + " SET step = ?, description = ?, max_id = GREATEST(max_id, ?), update_time = CURRENT_TIMESTAMP WHERE biz_tag = ? AND step = 0",
		delete:  "UPDATE " + t + " SET step = 0, update_time = CURRENT_TIMESTAMP WHERE biz_tag = ? AND step > 0",
	}
	if d == Postgres {
		for _, p := range []*string{&q.fetch, &q.readMax, &q.get, &q.list, &q.insert, &q.setStep, &q.setDesc, &q.setBoth, &q.revive, &q.delete} {
			*p = dollarParams(*p)
		}
	}
	return q, nil
}

// Segments is a segment.Store on a SQL database, PostgreSQL or
// MySQL/MariaDB with InnoDB, over Meituan Leaf's leaf_alloc table (see
// SegmentSchemaSQL). It is safe for concurrent use, by any number of
// processes and alongside Leaf servers on the same table.
//
// Fetch is one atomic step on the tag's row, serialised with every other
// fetch (flakeid's or Leaf's) by the row lock its UPDATE takes. It is one
// autocommitted statement, one round trip, the same step as Leaf's
// transaction (UPDATE max_id = max_id + n, SELECT max_id, COMMIT); the
// range is [new max_id − n, new max_id):
//
//   - PostgreSQL: UPDATE … SET max_id = max_id + n … RETURNING max_id.
//     Under READ COMMITTED an UPDATE that waited for Leaf's lock re-reads
//     the row it then changes, so the two never overlap.
//   - MySQL/MariaDB: UPDATE … SET max_id = LAST_INSERT_ID(max_id + n) …;
//     the server returns the new max_id as the statement's insert id. (So
//     the connection's LAST_INSERT_ID() is that max_id afterwards; a db
//     shared with other code should not rely on it across statements.)
//     InnoDB's UPDATE locks and re-reads the current row, so it never
//     overlaps Leaf's transaction either.
//
// Each holds the row lock for no longer than the statement: a client cut
// off from the server cannot keep it.
//
// A fetch that would pass the int64 range changes nothing and fails with
// segment.ErrExhausted. Deadlocks, serialisation failures and lock wait
// timeouts run the fetch again, at most maxFetchAttempts times; any other
// database or connection failure, and the context ending, wrap
// segment.ErrUnavailable with the driver's error kept for errors.Is/As. A
// fetch whose outcome is unknown (the connection dropped at COMMIT) may
// have taken its range: that range is then lost, never handed out twice.
//
// A Leaf server partitioned away between its UPDATE and COMMIT keeps the
// row locked, for flakeid and Leaf alike, until the database drops its
// connection (wait_timeout, TCP keepalive, or MariaDB's
// idle_transaction_timeout if the operator sets it); meanwhile fetches of
// that tag fail with ErrUnavailable at their deadlines and the allocators
// serve from their buffers.
type Segments struct {
	db      *sql.DB
	d       Dialect
	table   string
	q       segmentStatements
	st      strideStatements // a Leaf table's shares in StrideTable
	ownedDB bool             // Close closes db: OpenSegments made it
	tinyid  bool             // on Tinyid's tables (NewTinyidSegments)
}

// NewSegments returns a store that keeps its tags in table ("" means
// DefaultSegmentTable) of db, a database of dialect d. The table is not
// created: call CreateSegmentSchema, or apply SegmentSchemaSQL with a
// migration tool, or point it at Leaf's existing table. table must match
// ^[A-Za-z_][A-Za-z0-9_]{0,62}$. A missing db, a bad dialect or a bad table
// name is an error wrapping worker.ErrInvalidConfig. db stays the
// caller's: the store's Close does not close it.
func NewSegments(db *sql.DB, d Dialect, table string) (*Segments, error) {
	return newStore(db, d, table, DefaultSegmentTable, newSegmentStatements)
}

// newStore is NewSegments and NewTinyidSegments: the statements of table
// (def when "") built by statements.
func newStore(db *sql.DB, d Dialect, table, def string, statements func(Dialect, string) (segmentStatements, error)) (*Segments, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: sqldb: no database", worker.ErrInvalidConfig)
	}
	if table == "" {
		table = def
	}
	q, err := statements(d, table)
	if err != nil {
		return nil, err
	}
	tinyid := q.maxOff == 1
	if !tinyid {
		q.schema = append(q.schema, strideSchema(d))
	}
	return &Segments{db: db, d: d, table: table, q: q, st: newStrideStatements(d), tinyid: tinyid}, nil
}

// Close closes the database if OpenSegments opened it; a Segments made by
// NewSegments never closes the caller's db (its Close does nothing).
func (s *Segments) Close() error {
	if s.ownedDB {
		return s.db.Close()
	}
	return nil
}

// Dialect is the store's SQL dialect.
func (s *Segments) Dialect() Dialect { return s.d }

// Table is the name of the store's table.
func (s *Segments) Table() string { return s.table }

// SegmentSchemaSQL is the DDL of the store's tables (see the functions
// SegmentSchemaSQL and TinyidSchemaSQL).
func (s *Segments) SegmentSchemaSQL() string {
	if len(s.q.schema) == 1 {
		return s.q.schema[0]
	}
	return joinSchema(s.q.schema...)
}

// CreateSegmentSchema creates the table when it does not exist (CREATE
// TABLE IF NOT EXISTS); it is safe to run at every start, by several nodes
// at once, and on a table Leaf created, which it leaves as it is.
func (s *Segments) CreateSegmentSchema(ctx context.Context) error {
	for _, stmt := range s.q.schema {
		if err := createTable(ctx, s.db, stmt); err != nil {
			return s.unavailable(ctx, "creating the table", err)
		}
	}
	return nil
}

// where names the store in error messages.
func (s *Segments) where(op string) string {
	return fmt.Sprintf("sqldb: %s table %s: %s", s.d, s.table, op)
}

// unavailable wraps a database error in segment.ErrUnavailable, keeping the
// driver's error, and the context's error when that is why it failed. An
// error that already wraps one of segment's sentinels is returned as it is.
func (s *Segments) unavailable(ctx context.Context, op string, err error) error {
	for _, sentinel := range []error{segment.ErrUnknownTag, segment.ErrTagExists, segment.ErrInvalidTag,
		segment.ErrExhausted, segment.ErrUnavailable} {
		if errors.Is(err, sentinel) {
			return err
		}
	}
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("%w: %s: %w (%w)", segment.ErrUnavailable, s.where(op), err, cerr)
	}
	return fmt.Errorf("%w: %s: %w", segment.ErrUnavailable, s.where(op), err)
}

// rejected classifies an error of a statement that writes the caller's
// values: a duplicate key is segment.ErrTagExists, a value the column
// refuses (too long, not in its character set, out of range) is
// segment.ErrInvalidTag, anything else segment.ErrUnavailable.
func (s *Segments) rejected(ctx context.Context, op, tag string, err error) error {
	var pe *pgconn.PgError
	var me *mysql.MySQLError
	switch {
	case errors.As(err, &pe) && pe.Code == "23505", errors.As(err, &me) && me.Number == 1062:
		return fmt.Errorf("%w: %s: tag %q: %w", segment.ErrTagExists, s.where(op), tag, err)
	case errors.As(err, &pe) && strings.HasPrefix(pe.Code, "22"), // data exception
		errors.As(err, &me) && (me.Number == 1366 || me.Number == 1406 || me.Number == 1264):
		return fmt.Errorf("%w: %s: tag %q: %w", segment.ErrInvalidTag, s.where(op), tag, err)
	}
	return s.unavailable(ctx, fmt.Sprintf("%s tag %q", op, tag), err)
}

// validDescription checks a description: at most 256 bytes of UTF-8 text
// without NUL (which PostgreSQL cannot store).
func validDescription(tag, d string) error {
	switch {
	case len(d) > maxDescription:
		return fmt.Errorf("%w: tag %q: description of %d bytes, want at most %d", segment.ErrInvalidTag, tag, len(d), maxDescription)
	case !utf8.ValidString(d) || strings.ContainsRune(d, 0):
		return fmt.Errorf("%w: tag %q: description is not UTF-8 text without NUL", segment.ErrInvalidTag, tag)
	}
	return nil
}

// errRowMoved is a fetch refused by its guard although the row, read again,
// would pass it: the row changed in between (an operator lowered max_id).
// The fetch runs again.
type errRowMoved struct {
	tag   string
	maxID int64
}

func (e errRowMoved) Error() string {
	return fmt.Sprintf("tag %q changed under the fetch (max_id now %d)", e.tag, e.maxID)
}

// Fetch implements segment.Store: it advances the tag's max_id by n and
// returns [old max_id, new max_id). See Segments for the statements.
func (s *Segments) Fetch(ctx context.Context, tag string, n int64) (segment.Range, error) {
	if err := segment.ValidName(tag); err != nil {
		return segment.Range{}, err
	}
	if n < 1 {
		return segment.Range{}, fmt.Errorf("%w: %s: fetch of %d IDs of tag %q, want at least 1", segment.ErrInvalidTag,
			s.where("fetching"), n, tag)
	}
	bo := backoff.Backoff{Min: 2 * time.Millisecond, Max: 100 * time.Millisecond}
	var err error
	for attempt := 0; ; attempt++ {
		var r segment.Range
		switch {
		case s.d == Postgres:
			r, err = s.fetchReturning(ctx, tag, n)
		case s.tinyid:
			r, err = s.fetchTinyidMySQL(ctx, tag, n)
		default:
			r, err = s.fetchLastInsertID(ctx, tag, n)
		}
		if err == nil && !s.tinyid {
			// A Leaf table's share is read after the fetch: it never
			// changes while the row is there (Create keeps it).
			var found bool
			r.Delta, r.Remainder, found, _, err = s.share(ctx, s.db, tag)
			if err != nil {
				return segment.Range{}, s.unavailable(ctx, fmt.Sprintf("reading the share of tag %q after fetching [%d, %d) (given up)", tag, r.Start, r.End), err)
			}
			if !found {
				r.Delta, r.Remainder = 0, 0
			}
		}
		if err == nil {
			return r, nil
		}
		var moved errRowMoved
		if attempt+1 >= maxFetchAttempts || !errors.As(err, &moved) && !retryable(err) {
			break
		}
		if backoff.Sleep(ctx, bo.Next(attempt)) != nil {
			break
		}
	}
	return segment.Range{}, s.unavailable(ctx, fmt.Sprintf("fetching %d IDs of tag %q", n, tag), err)
}

// fetchReturning is one PostgreSQL fetch: a single UPDATE … RETURNING the
// range's end and the row's stride (Tinyid's; 0, 0 on a Leaf table).
func (s *Segments) fetchReturning(ctx context.Context, tag string, n int64) (segment.Range, error) {
	var end, delta, rem int64
	err := s.db.QueryRowContext(ctx, s.q.fetch, n, tag, math.MaxInt64-n).Scan(&end, &delta, &rem)
	if errors.Is(err, sql.ErrNoRows) {
		return segment.Range{}, s.refused(ctx, tag, n)
	}
	if err != nil {
		return segment.Range{}, err
	}
	return segment.Range{Start: end - n, End: end, Delta: delta, Remainder: rem}, nil
}

// fetchLastInsertID is one MySQL fetch: a single UPDATE whose insert id is
// the new max_id.
func (s *Segments) fetchLastInsertID(ctx context.Context, tag string, n int64) (segment.Range, error) {
	res, err := s.db.ExecContext(ctx, s.q.fetch, n, tag, math.MaxInt64-n)
	if err != nil {
		return segment.Range{}, err
	}
	// max_id changes (n ≥ 1), so the count is right with or without
	// clientFoundRows.
	k, err := res.RowsAffected()
	if err != nil {
		return segment.Range{}, err
	}
	if k == 0 {
		return segment.Range{}, s.refused(ctx, tag, n)
	}
	maxID, err := res.LastInsertId()
	if err != nil {
		return segment.Range{}, err
	}
	if maxID < n {
		// The guard keeps max_id in [n, MaxInt64]; anything else means the
		// insert id did not carry it (a proxy rewriting OK packets).
		return segment.Range{}, fmt.Errorf("%w: %s: the fetch of tag %q returned insert id %d, not its new max_id",
			segment.ErrUnavailable, s.where("fetching"), tag, maxID)
	}
	return segment.Range{Start: maxID - n, End: maxID}, nil
}

// refused tells why a fetch's guarded UPDATE matched no row.
func (s *Segments) refused(ctx context.Context, tag string, n int64) error {
	var maxID, step int64
	err := s.db.QueryRowContext(ctx, s.q.readMax, tag).Scan(&maxID, &step)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("%w: %s: tag %q has no row", segment.ErrUnknownTag, s.where("fetching"), tag)
	case err != nil:
		return err
	case step == 0:
		return fmt.Errorf("%w: %s: tag %q was deleted (step 0; its max_id %d is kept: creating it again continues above)",
			segment.ErrUnknownTag, s.where("fetching"), tag, maxID)
	case maxID < 0:
		return fmt.Errorf("%w: %s: corrupt row: tag %q has max_id %d", segment.ErrUnavailable, s.where("fetching"), tag, maxID)
	case maxID > math.MaxInt64-n-s.q.maxOff:
		return fmt.Errorf("%w: %s: tag %q is at max_id %d; %d more IDs would pass %d", segment.ErrExhausted,
			s.where("fetching"), tag, maxID, n, int64(math.MaxInt64))
	}
	return errRowMoved{tag: tag, maxID: maxID}
}

// scanner is a *sql.Row or *sql.Rows.
type scanner interface{ Scan(dest ...any) error }

func scanTag(sc scanner) (segment.Tag, error) {
	var t segment.Tag
	var micros int64
	if err := sc.Scan(&t.Name, &t.MaxID, &t.Step, &t.Description, &micros, &t.Delta, &t.Remainder); err != nil {
		return segment.Tag{}, err
	}
	if micros != 0 {
		t.Updated = time.UnixMicro(micros).UTC()
	}
	return t, nil
}

// Get implements segment.Store.
func (s *Segments) Get(ctx context.Context, tag string) (segment.Tag, error) {
	if err := segment.ValidName(tag); err != nil {
		return segment.Tag{}, err
	}
	t, err := scanTag(s.db.QueryRowContext(ctx, s.q.get, tag))
	if errors.Is(err, sql.ErrNoRows) {
		return segment.Tag{}, fmt.Errorf("%w: %s: tag %q has no row", segment.ErrUnknownTag, s.where("reading"), tag)
	}
	if err == nil {
		err = s.withShare(ctx, &t)
	}
	if err != nil {
		return segment.Tag{}, s.unavailable(ctx, fmt.Sprintf("reading tag %q", tag), err)
	}
	return t, nil
}

// List implements segment.Store: every row, ordered by name byte by byte
// (whatever the column's collation), including rows Leaf wrote whose names
// flakeid would not accept.
func (s *Segments) List(ctx context.Context) ([]segment.Tag, error) {
	rows, err := s.db.QueryContext(ctx, s.q.list)
	if err != nil {
		return nil, s.unavailable(ctx, "listing", err)
	}
	defer rows.Close()
	tags := []segment.Tag{}
	for rows.Next() {
		t, err := scanTag(rows)
		if err != nil {
			return nil, s.unavailable(ctx, "listing", err)
		}
		tags = append(tags, t)
	}
	if err := rows.Err(); err != nil {
		return nil, s.unavailable(ctx, "listing", err)
	}
	if err := s.withShares(ctx, tags); err != nil {
		return nil, s.unavailable(ctx, "listing", err)
	}
	slices.SortFunc(tags, func(a, b segment.Tag) int { return strings.Compare(a.Name, b.Name) })
	return tags, nil
}

// Create implements segment.Store. The tag is checked with
// segment.ValidateTag, and its description must be UTF-8 text without NUL;
// a MaxID of 0 is stored as 1, Leaf's default.
func (s *Segments) Create(ctx context.Context, t segment.Tag) error {
	if err := segment.ValidateTag(t); err != nil {
		return err
	}
	if err := validDescription(t.Name, t.Description); err != nil {
		return err
	}
	if t.MaxID == 0 {
		t.MaxID = 1
	}
	if s.tinyid {
		return s.createTinyid(ctx, t)
	}
	return s.createLeaf(ctx, t)
}

// Update implements segment.Store: it sets the step (1–segment.MaxStep)
// and the description (as for Create) that are not nil. The tag's max_id is
// never touched.
func (s *Segments) Update(ctx context.Context, tag string, step *int64, description *string) error {
	if err := segment.ValidName(tag); err != nil {
		return err
	}
	if step != nil && (*step < 1 || *step > segment.MaxStep) {
		return fmt.Errorf("%w: tag %q: step %d, want 1–%d", segment.ErrInvalidTag, tag, *step, segment.MaxStep)
	}
	if description != nil {
		if err := validDescription(tag, *description); err != nil {
			return err
		}
	}
	if s.tinyid {
		return s.updateTinyid(ctx, tag, step, description)
	}
	var (
		res sql.Result
		err error
	)
	switch {
	case step != nil && description != nil:
		res, err = s.db.ExecContext(ctx, s.q.setBoth, *step, *description, tag)
	case step != nil:
		res, err = s.db.ExecContext(ctx, s.q.setStep, *step, tag)
	case description != nil:
		res, err = s.db.ExecContext(ctx, s.q.setDesc, *description, tag)
	}
	if err != nil {
		return s.rejected(ctx, "updating", tag, err)
	}
	if res != nil {
		k, err := res.RowsAffected()
		if err != nil {
			return s.unavailable(ctx, fmt.Sprintf("updating tag %q", tag), err)
		}
		if k > 0 {
			return nil
		}
	}
	// Nothing to change, or nothing changed: MySQL without clientFoundRows
	// counts a row that already held these values (in the same second) as
	// unaffected. Tell that from a missing row.
	var maxID, rowStep int64
	err = s.db.QueryRowContext(ctx, s.q.readMax, tag).Scan(&maxID, &rowStep)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("%w: %s: tag %q has no row", segment.ErrUnknownTag, s.where("updating"), tag)
	case err != nil:
		return s.unavailable(ctx, fmt.Sprintf("updating tag %q", tag), err)
	case rowStep == 0:
		return fmt.Errorf("%w: %s: tag %q was deleted", segment.ErrUnknownTag, s.where("updating"), tag)
	}
	return nil
}

// Delete implements segment.Store: the row stays with its max_id, its step
// set to 0, which no fetch, read or update matches (Leaf's servers cannot
// fetch from it either: a step of 0 gives them empty segments, never old
// IDs).
func (s *Segments) Delete(ctx context.Context, tag string) error {
	if err := segment.ValidName(tag); err != nil {
		return err
	}
	res, err := s.db.ExecContext(ctx, s.q.delete, tag)
	if err != nil {
		return s.rejected(ctx, "deleting", tag, err)
	}
	k, err := res.RowsAffected()
	if err != nil {
		return s.unavailable(ctx, fmt.Sprintf("deleting tag %q", tag), err)
	}
	if k == 0 {
		return fmt.Errorf("%w: %s: tag %q has no row, or was deleted already", segment.ErrUnknownTag, s.where("deleting"), tag)
	}
	return nil
}
