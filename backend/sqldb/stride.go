package sqldb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/flakeid/flakeid/internal/backoff"

	"github.com/flakeid/flakeid/segment"
)

// StrideTable keeps the shares (Tinyid's delta and remainder) of the tags of
// Leaf tables, which have no columns for them: one row per table and tag
// that serves only the IDs ≡ remainder (mod delta), none for a tag that
// serves every ID. It is created beside the Leaf table (CreateSegmentSchema,
// or on the first Create of a tag with a share) and never altered by Leaf;
// a Leaf server does not read it, so it must not serve a tag that has a row
// here (it would hand out every ID).
const StrideTable = "flakeid_stride"

// strideSchema is the DDL of StrideTable for dialect d.
func strideSchema(d Dialect) string {
	if d == MySQL {
		return "CREATE TABLE IF NOT EXISTS " + d.quote(StrideTable) + " (\n" +
			"  tbl VARCHAR(63) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,\n" +
			"  biz_tag VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,\n" +
			"  delta INT NOT NULL,\n" +
			"  remainder INT NOT NULL,\n" +
			"  PRIMARY KEY (tbl, biz_tag)\n" +
			") ENGINE=InnoDB DEFAULT CHARSET=utf8mb4"
	}
	return "CREATE TABLE IF NOT EXISTS " + d.quote(StrideTable) + " (\n" +
		"  tbl VARCHAR(63) NOT NULL,\n" +
		"  biz_tag VARCHAR(128) NOT NULL,\n" +
		"  delta INT NOT NULL,\n" +
		"  remainder INT NOT NULL,\n" +
		"  PRIMARY KEY (tbl, biz_tag)\n" +
		")"
}

// strideStatements are the statements on StrideTable of a Leaf table.
type strideStatements struct {
	schema string
	get    string // delta, remainder of one tag
	list   string // biz_tag, delta, remainder of every tag of the table
	insert string
}

func newStrideStatements(d Dialect) strideStatements {
	t := d.quote(StrideTable)
	q := strideStatements{
		schema: strideSchema(d),
		get:    "SELECT delta, remainder FROM " + t + " WHERE tbl = ? AND biz_tag = ?",
		list:   "SELECT biz_tag, delta, remainder FROM " + t + " WHERE tbl = ?",
		insert: "INSERT INTO " + t + " (tbl, biz_tag, delta, remainder) VALUES (?, ?, ?, ?)",
	}
	if d == Postgres {
		for _, p := range []*string{&q.get, &q.list, &q.insert} {
			*p = dollarParams(*p)
		}
	}
	return q
}

// querier is a *sql.DB or a *sql.Tx.
type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// share reads the share StrideTable records for a tag of a Leaf table:
// found is false when it records none, or when the table is not there
// (table false: nothing was ever recorded).
func (s *Segments) share(ctx context.Context, q querier, tag string) (delta, rem int64, found, table bool, err error) {
	err = q.QueryRowContext(ctx, s.st.get, s.table, tag).Scan(&delta, &rem)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return 0, 0, false, true, nil
	case missingTable(err):
		return 0, 0, false, false, nil
	case err != nil:
		return 0, 0, false, false, err
	}
	if delta < 1 || delta > segment.MaxStep || rem < 0 || rem >= delta {
		return 0, 0, false, true, fmt.Errorf("%w: %s: corrupt row of tag %q in %s: delta %d, remainder %d",
			segment.ErrUnavailable, s.where("reading"), tag, StrideTable, delta, rem)
	}
	return delta, rem, true, true, nil
}

// withShare sets t's share from StrideTable (a Leaf table's tag).
func (s *Segments) withShare(ctx context.Context, t *segment.Tag) error {
	if s.tinyid {
		return nil
	}
	delta, rem, found, _, err := s.share(ctx, s.db, t.Name)
	if err != nil {
		return err
	}
	if found {
		t.Delta, t.Remainder = delta, rem
	}
	return nil
}

// withShares sets the shares of a Leaf table's tags from StrideTable.
func (s *Segments) withShares(ctx context.Context, tags []segment.Tag) error {
	if s.tinyid {
		return nil
	}
	rows, err := s.db.QueryContext(ctx, s.st.list, s.table)
	if missingTable(err) {
		return nil
	}
	if err != nil {
		return err
	}
	defer rows.Close()
	shares := map[string][2]int64{}
	for rows.Next() {
		var name string
		var delta, rem int64
		if err := rows.Scan(&name, &delta, &rem); err != nil {
			return err
		}
		shares[name] = [2]int64{delta, rem}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for i := range tags {
		if sh, ok := shares[tags[i].Name]; ok {
			if sh[0] < 1 || sh[0] > segment.MaxStep || sh[1] < 0 || sh[1] >= sh[0] {
				return fmt.Errorf("%w: %s: corrupt row of tag %q in %s: delta %d, remainder %d",
					segment.ErrUnavailable, s.where("listing"), tags[i].Name, StrideTable, sh[0], sh[1])
			}
			tags[i].Delta, tags[i].Remainder = sh[0], sh[1]
		}
	}
	return nil
}

// createLeaf is Create on a Leaf table: the row (a deleted one comes back
// above its max_id, only with the share it had) and its share in
// StrideTable, in one transaction, run again after a deadlock.
func (s *Segments) createLeaf(ctx context.Context, t segment.Tag) error {
	return s.retryCreate(ctx, func() error { return s.createLeafOnce(ctx, t) })
}

// retryCreate runs a Create's transaction again when it deadlocked:
// creators racing on one name (the allocators of a series starting a
// period) can deadlock on InnoDB's gap locks.
func (s *Segments) retryCreate(ctx context.Context, once func() error) error {
	bo := backoff.Backoff{Min: 2 * time.Millisecond, Max: 100 * time.Millisecond}
	for attempt := 0; ; attempt++ {
		err := once()
		if err == nil || attempt+1 >= maxFetchAttempts || !retryable(err) || errors.Is(err, segment.ErrTagExists) || backoff.Sleep(ctx, bo.Next(attempt)) != nil {
			return err
		}
	}
}

// createLeafOnce is one attempt of createLeaf.
func (s *Segments) createLeafOnce(ctx context.Context, t segment.Tag) error {
	if t.Delta > 1 {
		if err := createTable(ctx, s.db, s.st.schema); err != nil {
			return s.unavailable(ctx, "creating "+StrideTable, err)
		}
	}
	// Whether the table is there is read outside the transaction: on
	// PostgreSQL a statement on a missing table ends it.
	_, _, _, table, err := s.share(ctx, s.db, t.Name)
	if err != nil {
		return s.unavailable(ctx, fmt.Sprintf("creating tag %q", t.Name), err)
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return s.unavailable(ctx, fmt.Sprintf("creating tag %q", t.Name), err)
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, s.q.revive, t.Step, t.Description, t.MaxID, t.Name)
	if err != nil {
		return s.rejected(ctx, "creating", t.Name, err)
	}
	revived, err := res.RowsAffected()
	if err != nil {
		return s.unavailable(ctx, fmt.Sprintf("creating tag %q", t.Name), err)
	} else if revived == 0 {
		if _, err := tx.ExecContext(ctx, s.q.insert, t.Name, t.MaxID, t.Step, t.Description); err != nil {
			return s.rejected(ctx, "creating", t.Name, err)
		}
	}
	var old segment.Tag // the share recorded: none unless found
	found := false
	if table {
		if old.Delta, old.Remainder, found, _, err = s.share(ctx, tx, t.Name); err != nil {
			return s.unavailable(ctx, fmt.Sprintf("creating tag %q", t.Name), err)
		}
	}
	if revived > 0 || found {
		if err := segment.SameShare(old, t); err != nil {
			return err
		}
	}
	if !found && t.Delta > 1 {
		if _, err := tx.ExecContext(ctx, s.st.insert, s.table, t.Name, t.Delta, t.Remainder); err != nil {
			return s.rejected(ctx, "creating", t.Name, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return s.rejected(ctx, "creating", t.Name, err)
	}
	return nil
}
