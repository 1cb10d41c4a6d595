package sqldb

import (
	"errors"
	"strings"
	"testing"

	"github.com/flakeid/flakeid/segment"
)

// A Leaf table made with Leaf's DDL alone, in a database where flakeid has
// never run (no flakeid_stride): its tags serve every ID, and the first tag
// created with a share creates the table beside it and records the share
// there. A damaged share row is refused, never read as none.
func TestLeafStrideTable(t *testing.T) {
	forEach(t, func(t *testing.T, dsn string) {
		ctx := ctx10(t)
		admin, d := testDB(t, dsn)
		ns := "flakeid_ns_" + randomHex(t)
		var nsDSN string
		if d == Postgres {
			if _, err := admin.ExecContext(ctx, "CREATE SCHEMA "+ns); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { admin.Exec("DROP SCHEMA " + ns + " CASCADE") })
			nsDSN = dsn + "&search_path=" + ns
		} else {
			if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+ns); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { admin.Exec("DROP DATABASE " + ns) })
			nsDSN = dsn[:strings.LastIndex(dsn, "/")+1] + ns
		}
		db, _ := testDB(t, nsDSN)
		leafDDL, err := SegmentSchemaSQL(d, "")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.ExecContext(ctx, leafDDL); err != nil {
			t.Fatal(err)
		}
		s, err := NewSegments(db, d, "")
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Create(ctx, segment.Tag{Name: "plain", Step: 10}); err != nil {
			t.Fatal(err)
		}
		if got, err := s.Get(ctx, "plain"); err != nil || got.Delta != 0 {
			t.Fatalf("Get without %s: %+v, %v", StrideTable, got, err)
		}
		if r, err := s.Fetch(ctx, "plain", 5); err != nil || r.Delta != 0 || r.Start != 1 {
			t.Fatalf("Fetch without %s: %+v, %v", StrideTable, r, err)
		}
		if err := s.Delete(ctx, "plain"); err != nil {
			t.Fatal(err)
		}
		if err := s.Create(ctx, segment.Tag{Name: "plain", Step: 10}); err != nil {
			t.Fatalf("creating a deleted tag again, without %s: %v", StrideTable, err)
		}
		if err := s.Create(ctx, segment.Tag{Name: "odd", Step: 10, Delta: 2, Remainder: 1}); err != nil {
			t.Fatal(err)
		}
		tags, err := s.List(ctx)
		if err != nil || len(tags) != 2 || tags[0].Name != "odd" || tags[0].Delta != 2 || tags[0].Remainder != 1 || tags[1].Delta != 0 {
			t.Fatalf("List = %+v, %v", tags, err)
		}
		if r, err := s.Fetch(ctx, "odd", 4); err != nil || r.Delta != 2 || r.Remainder != 1 {
			t.Fatalf("Fetch = %+v, %v", r, err)
		}
		if _, err := db.ExecContext(ctx, "UPDATE "+d.quote(StrideTable)+" SET remainder = 7"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Get(ctx, "odd"); !errors.Is(err, segment.ErrUnavailable) || !strings.Contains(err.Error(), "corrupt") {
			t.Fatalf("Get with a damaged share row: %v", err)
		}
		if _, err := s.List(ctx); !errors.Is(err, segment.ErrUnavailable) || !strings.Contains(err.Error(), "corrupt") {
			t.Fatalf("List with a damaged share row: %v", err)
		}
		if _, err := s.Fetch(ctx, "odd", 4); !errors.Is(err, segment.ErrUnavailable) || !strings.Contains(err.Error(), "corrupt") {
			t.Fatalf("Fetch with a damaged share row: %v", err)
		}
	})
}
