package sqldb

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"strings"

	"github.com/flakeid/flakeid/backend/internal/coord"
)

// MaxOfColumn reads the largest value of an integer column, for planning a
// move from a system whose IDs are in it: u is a postgres://, postgresql://
// or mysql:// URL of the database, as for OpenSegments, with
// ?column=table.column (each a name matching ^[A-Za-z_][A-Za-z0-9_]{0,62}$).
// An empty table reads 0. A bad URL is an error wrapping
// worker.ErrInvalidConfig; a database error is returned as it is.
func MaxOfColumn(ctx context.Context, u *url.URL) (int64, error) {
	if err := checkScheme(u); err != nil {
		return 0, err
	}
	vals, rest := coord.TakeQuery(u, "column")
	table, column, ok := strings.Cut(vals[0], ".")
	if !ok || !validTableName(table) || !validTableName(column) {
		return 0, urlError(fmt.Sprintf("column %q, want ?column=table.column (names of letters, digits and _)", vals[0]))
	}
	dsn, _, err := driverDSN(rest)
	if err != nil {
		return 0, err
	}
	db, d, err := OpenDB(dsn)
	if err != nil {
		return 0, err
	}
	defer db.Close()
	var maxID sql.NullInt64
	if err := db.QueryRowContext(ctx, "SELECT MAX("+d.quote(column)+") FROM "+d.quote(table)).Scan(&maxID); err != nil {
		return 0, fmt.Errorf("sqldb: reading MAX(%s) of %s: %w", column, table, err)
	}
	return maxID.Int64, nil
}
