package sqldb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/flakeid/flakeid/internal/testenv"
	"github.com/flakeid/flakeid/segment"
	"github.com/flakeid/flakeid/segment/segmenttest"
)

// segTable is a fresh table name; dropSegTable drops it after the test,
// once the clients' own cleanups (registered later, so run earlier) are
// done.
func segTable(t testing.TB, admin *sql.DB, d Dialect) string {
	t.Helper()
	name := "leaf_alloc_" + randomHex(t)
	dropAfter(t, admin, d, name)
	return name
}

// newSegments creates a uniquely named segment table with
// CreateSegmentSchema and returns a store on it and the admin database.
func newSegments(t testing.TB, dsn string) (*Segments, *sql.DB) {
	t.Helper()
	admin, d := testDB(t, dsn)
	s, err := NewSegments(admin, d, segTable(t, admin, d))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.CreateSegmentSchema(ctx); err != nil {
		t.Fatalf("CreateSegmentSchema: %v", err)
	}
	return s, admin
}

// segClient opens a new client (its own *sql.DB) of table at dsn: on
// Tinyid's tables when tinyid is set, else on Leaf's.
func segClient(t testing.TB, dsn, table string, tinyid bool) (*Segments, *sql.DB) {
	t.Helper()
	db, d := testDB(t, dsn)
	newStore := NewSegments
	if tinyid {
		newStore = NewTinyidSegments
	}
	s, err := newStore(db, d, table)
	if err != nil {
		t.Fatal(err)
	}
	return s, db
}

// withPGParam sets a query parameter of a postgres:// URL DSN.
func withPGParam(t testing.TB, dsn, key, value string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set(key, value)
	u.RawQuery = q.Encode()
	return u.String()
}

type segConnector struct {
	dsn    string
	table  string
	tinyid bool
}

func (c segConnector) Connect(t *testing.T) segment.Store {
	s, _ := segClient(t, c.dsn, c.table, c.tinyid)
	return s
}

// ConnectFaulty connects through a faultnet proxy: Cut holds every byte
// between this client and the database (a partition), Reset closes every
// connection (a database restart).
func (c segConnector) ConnectFaulty(t *testing.T) (segment.Store, segmenttest.Fault) {
	dsn, p := throughProxy(t, c.dsn)
	s, _ := segClient(t, dsn, c.table, c.tinyid)
	return s, p
}

// Backup reads every tag's max_id; the restore writes them back, as
// restoring the table from a backup (or a point-in-time recovery) does.
func (c segConnector) Backup(t *testing.T) func() {
	s, db := segClient(t, c.dsn, c.table, c.tinyid)
	tags, err := s.List(t.Context())
	if err != nil {
		t.Fatalf("backup: %v", err)
	}
	q, off := "UPDATE "+s.d.quote(c.table)+" SET max_id = ? WHERE biz_tag = ?", int64(0)
	if c.tinyid {
		q, off = "UPDATE "+s.d.quote(c.table)+" SET max_id = ? WHERE biz_type = ?", 1
	}
	if s.d == Postgres {
		q = dollarParams(q)
	}
	return func() {
		for _, tag := range tags {
			if _, err := db.ExecContext(t.Context(), q, tag.MaxID-off, tag.Name); err != nil {
				t.Fatalf("restoring tag %q to max_id %d: %v", tag.Name, tag.MaxID, err)
			}
		}
	}
}

func TestSegmentsConformance(t *testing.T) {
	var _ segment.Store = (*Segments)(nil)
	forEach(t, func(t *testing.T, dsn string) {
		segmenttest.Run(t, segmenttest.Harness{
			Open: func(t *testing.T) segmenttest.Connector {
				s, _ := newSegments(t, dsn)
				return segConnector{dsn: dsn, table: s.table}
			},
		})
	})
}

// checkRanges sorts ranges and checks that they are disjoint, lie in
// [from, to), and leave at most lost IDs of it uncovered (0: they tile it).
func checkRanges(t *testing.T, ranges []segment.Range, from, to, lost int64) {
	t.Helper()
	slices.SortFunc(ranges, func(a, b segment.Range) int {
		switch {
		case a.Start < b.Start:
			return -1
		case a.Start > b.Start:
			return 1
		}
		return 0
	})
	next, gaps := from, int64(0)
	for _, r := range ranges {
		if r.Len() < 1 {
			t.Fatalf("empty range %+v", r)
		}
		if r.Start < next {
			t.Fatalf("range %+v overlaps the IDs before %d: handed out twice", r, next)
		}
		gaps += r.Start - next
		next = r.End
	}
	if next > to {
		t.Fatalf("ranges reach %d, past the row's max_id %d", next, to)
	}
	gaps += to - next
	if gaps > lost {
		t.Fatalf("%d IDs of [%d, %d) are in no range; at most %d may be lost", gaps, from, to, lost)
	}
}

// leafFetch is what a Leaf server does (SegmentIDGenImpl.updateSegmentFromDb
// through IDAllocDaoImpl): in one transaction, Leaf's UPDATE (with the
// row's step, or with a dynamic step when step > 0) and SELECT, exactly as
// Leaf's mapper writes them.
func leafFetch(ctx context.Context, db *sql.DB, d Dialect, table, tag string, step int64) (segment.Range, error) {
	t := d.quote(table)
	upd, args := "UPDATE "+t+" SET max_id = max_id + step WHERE biz_tag = ?", []any{tag}
	if step > 0 {
		upd, args = "UPDATE "+t+" SET max_id = max_id + ? WHERE biz_tag = ?", []any{step, tag}
	}
	sel := "SELECT biz_tag, max_id, step FROM " + t + " WHERE biz_tag = ?"
	if d == Postgres {
		upd, sel = dollarParams(upd), dollarParams(sel)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return segment.Range{}, err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, upd, args...); err != nil {
		return segment.Range{}, err
	}
	var name string
	var maxID, rowStep int64
	if err := tx.QueryRowContext(ctx, sel, tag).Scan(&name, &maxID, &rowStep); err != nil {
		return segment.Range{}, err
	}
	if err := tx.Commit(); err != nil {
		return segment.Range{}, err
	}
	if step == 0 {
		step = rowStep
	}
	return segment.Range{Start: maxID - step, End: maxID}, nil
}

// leafDDL is Leaf's scripts/leaf_alloc.sql for MySQL, and its plain port to
// PostgreSQL (TIMESTAMP without time zone, no ON UPDATE).
func leafDDL(d Dialect, table string) string {
	if d == MySQL {
		return "CREATE TABLE `" + table + "` (\n" +
			"  `biz_tag` varchar(128)  NOT NULL DEFAULT '',\n" +
			"  `max_id` bigint(20) NOT NULL DEFAULT '1',\n" +
			"  `step` int(11) NOT NULL,\n" +
			"  `description` varchar(256)  DEFAULT NULL,\n" +
			"  `update_time` timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP,\n" +
			"  PRIMARY KEY (`biz_tag`)\n" +
			") ENGINE=InnoDB"
	}
	return `CREATE TABLE "` + table + `" (
  biz_tag varchar(128) NOT NULL DEFAULT '',
  max_id bigint NOT NULL DEFAULT 1,
  step int NOT NULL,
  description varchar(256) DEFAULT NULL,
  update_time timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP,
  PRIMARY KEY (biz_tag)
)`
}

// A table Leaf created and has used: flakeid takes over where Leaf left
// off, and flakeid and Leaf servers fetching side by side never overlap.
func TestSegmentsLeafTakeover(t *testing.T) {
	forEach(t, func(t *testing.T, dsn string) {
		ctx := ctx10(t)
		admin, d := testDB(t, dsn)
		table := segTable(t, admin, d)
		if _, err := admin.ExecContext(ctx, leafDDL(d, table)); err != nil {
			t.Fatal(err)
		}
		for _, ins := range []string{
			// Leaf's sample row, on a table Leaf has used up to 5000.
			"insert into " + d.quote(table) + "(biz_tag, max_id, step, description) values('leaf-segment-test', 5000, 2000, 'Test leaf Segment Mode Get Id')",
			// Leaf's sample row as its script inserts it.
			"insert into " + d.quote(table) + "(biz_tag, max_id, step, description) values('leaf-segment-fresh', 1, 2000, 'Test leaf Segment Mode Get Id')",
		} {
			if _, err := admin.ExecContext(ctx, ins); err != nil {
				t.Fatal(err)
			}
		}
		s, _ := segClient(t, dsn, table, false)
		if err := s.CreateSegmentSchema(ctx); err != nil {
			t.Fatalf("CreateSegmentSchema on Leaf's table: %v", err)
		}
		got, err := s.Get(ctx, "leaf-segment-test")
		if err != nil || got.MaxID != 5000 || got.Step != 2000 || got.Description != "Test leaf Segment Mode Get Id" {
			t.Fatalf("Get of Leaf's row = %+v, %v", got, err)
		}
		if dt := time.Since(got.Updated); dt < -time.Minute || dt > time.Minute {
			t.Fatalf("Leaf's row was inserted at %v, %v ago; want about now", got.Updated, dt)
		}
		r, err := s.Fetch(ctx, "leaf-segment-test", 2000)
		if err != nil || r != (segment.Range{Start: 5000, End: 7000}) {
			t.Fatalf("first Fetch on Leaf's row = %+v, %v; want [5000, 7000)", r, err)
		}
		// An allocator on Leaf's fresh row hands out 1, 2, … as Leaf does.
		a, err := segment.New(segment.Config{Store: s})
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		for want := int64(1); want <= 3; want++ {
			if id, err := a.NextID(ctx, "leaf-segment-fresh"); err != nil || id != want {
				t.Fatalf("NextID on Leaf's fresh row = %d, %v; want %d", id, err, want)
			}
		}

		// Leaf servers and flakeid clients on one row at once.
		leafDB, _ := testDB(t, dsn)
		flake := []*Segments{s}
		other, _ := segClient(t, dsn, table, false)
		flake = append(flake, other)
		var (
			mu     sync.Mutex
			ranges = []segment.Range{r}
			wg     sync.WaitGroup
			leafN  atomic.Int64
		)
		add := func(r segment.Range) {
			mu.Lock()
			ranges = append(ranges, r)
			mu.Unlock()
		}
		for g := range 2 {
			wg.Go(func() {
				for k := range 30 {
					step := int64(0) // the row's step
					if k%3 == 2 {
						step = 3000 // Leaf's dynamic step
					}
					r, err := leafFetch(ctx, leafDB, d, table, "leaf-segment-test", step)
					if err != nil {
						t.Errorf("Leaf %d: %v", g, err)
						return
					}
					leafN.Add(1)
					add(r)
				}
			})
		}
		for g, c := range flake {
			wg.Go(func() {
				for k := range 30 {
					r, err := c.Fetch(ctx, "leaf-segment-test", int64(1+(g*31+k*17)%1000))
					if err != nil {
						t.Errorf("flakeid %d: %v", g, err)
						return
					}
					add(r)
				}
			})
		}
		wg.Wait()
		if t.Failed() {
			return
		}
		got, err = s.Get(ctx, "leaf-segment-test")
		if err != nil {
			t.Fatal(err)
		}
		checkRanges(t, ranges, 5000, got.MaxID, 0)
		t.Logf("%d ranges (%d by Leaf's statements) tile [5000, %d)", len(ranges), leafN.Load(), got.MaxID)
	})
}

// Many clients, each its own *sql.DB, fetching one tag at once: disjoint
// ranges that tile [1, max_id).
func TestSegmentsManyClients(t *testing.T) {
	forEach(t, func(t *testing.T, dsn string) {
		s, _ := newSegments(t, dsn)
		ctx := ctx10(t)
		if err := s.Create(ctx, segment.Tag{Name: "many", Step: 100}); err != nil {
			t.Fatal(err)
		}
		const clients, each = 8, 100
		var (
			mu     sync.Mutex
			ranges []segment.Range
			wg     sync.WaitGroup
		)
		start := time.Now()
		for i := range clients {
			c, _ := segClient(t, dsn, s.table, false)
			wg.Go(func() {
				for k := range each {
					r, err := c.Fetch(ctx, "many", int64(1+(i*7+k*13)%50))
					if err != nil {
						t.Errorf("client %d, fetch %d: %v", i, k, err)
						return
					}
					mu.Lock()
					ranges = append(ranges, r)
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		elapsed := time.Since(start)
		if t.Failed() {
			return
		}
		got, err := s.Get(ctx, "many")
		if err != nil {
			t.Fatal(err)
		}
		if len(ranges) != clients*each {
			t.Fatalf("%d ranges, want %d", len(ranges), clients*each)
		}
		checkRanges(t, ranges, 1, got.MaxID, 0)
		t.Logf("%d fetches by %d clients in %v: disjoint, tiling [1, %d)", len(ranges), clients, elapsed.Round(time.Millisecond), got.MaxID)
	})
}

// killServerSide kills the server's end of the test clients' connections,
// as a database restart does: on PostgreSQL every backend with the
// clients' application_name, on MySQL the connections whose ids the
// clients report (each client has one connection). It returns how many it
// killed.
func killServerSide(t *testing.T, admin *sql.DB, d Dialect, appName string, clients []*sql.DB) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if d == Postgres {
		rows, err := admin.QueryContext(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"+
			" WHERE datname = current_database() AND pid <> pg_backend_pid() AND application_name = $1", appName)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		n := 0
		for rows.Next() {
			n++
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return n
	}
	n := 0
	for _, db := range clients {
		var id int64
		if err := db.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id); err != nil {
			t.Logf("reading a client's connection id: %v", err) // it may be reconnecting
			continue
		}
		var marker string
		err := admin.QueryRowContext(ctx, "SELECT COALESCE(db, '') FROM information_schema.processlist WHERE id = ?", id).Scan(&marker)
		if err != nil {
			t.Logf("connection %d is gone already: %v", id, err)
			continue
		}
		_, err = admin.ExecContext(ctx, fmt.Sprintf("KILL %d", id))
		var me *mysql.MySQLError
		if errors.As(err, &me) && me.Number == 1094 { // unknown thread: it ended meanwhile
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	return n
}

// A database restart mid-run: every client connection is dropped (by the
// proxy, and then by the server itself), while clients keep fetching. Each
// fetch succeeds or fails with ErrUnavailable; the clients recover on new
// connections; no ID is handed out twice, and at most the ranges of failed
// fetches are lost.
func TestSegmentsRestart(t *testing.T) {
	forEach(t, func(t *testing.T, dsn string) {
		s, admin := newSegments(t, dsn)
		ctx := ctx10(t)
		if err := s.Create(ctx, segment.Tag{Name: "restart", Step: 100}); err != nil {
			t.Fatal(err)
		}
		appName := "flakeid_segtest_" + randomHex(t)
		cdsn, proxy := throughProxy(t, dsn)
		if s.d == Postgres {
			cdsn = withPGParam(t, cdsn, "application_name", appName)
		}
		const clients, maxN = 4, 20
		stores := make([]*Segments, clients)
		dbs := make([]*sql.DB, clients)
		for i := range stores {
			stores[i], dbs[i] = segClient(t, cdsn, s.table, false)
			dbs[i].SetMaxOpenConns(1) // MySQL: CONNECTION_ID() names the client's one connection
		}
		var (
			mu       sync.Mutex
			ranges   []segment.Range
			failures int64
			fetched  atomic.Int64
			stop     atomic.Bool
			wg       sync.WaitGroup
		)
		for i, c := range stores {
			wg.Go(func() {
				for k := 0; !stop.Load(); k++ {
					n := int64(1 + (i+k)%maxN)
					fctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
					r, err := c.Fetch(fctx, "restart", n)
					cancel()
					mu.Lock()
					if err != nil {
						if failures == 0 {
							t.Logf("first failure: %v", err)
						}
						failures++
						if !errors.Is(err, segment.ErrUnavailable) {
							t.Errorf("client %d: a fetch across the restart failed with %v, want ErrUnavailable", i, err)
						}
					} else {
						ranges = append(ranges, r)
					}
					mu.Unlock()
					if err == nil {
						fetched.Add(1)
					}
				}
			})
		}
		// waitFor waits until the clients have made another k fetches.
		waitFor := func(what string, k int64) {
			t.Helper()
			goal := fetched.Load() + k
			deadline := time.Now().Add(10 * time.Second)
			for fetched.Load() < goal {
				if time.Now().After(deadline) {
					stop.Store(true)
					wg.Wait()
					t.Fatalf("%s: only %d of %d fetches in 10s", what, fetched.Load(), goal)
				}
				time.Sleep(2 * time.Millisecond)
			}
		}
		waitFor("before the restart", 100)
		proxy.Reset()
		waitFor("after the proxy dropped every connection", 100)
		killed := killServerSide(t, admin, s.d, appName, dbs)
		waitFor("after the server killed the clients' sessions", 100)
		proxy.Reset()
		killed += killServerSide(t, admin, s.d, appName, dbs)
		waitFor("after the second restart", 100)
		stop.Store(true)
		wg.Wait()
		if t.Failed() {
			return
		}
		if killed == 0 {
			t.Fatal("the server killed none of the clients' connections")
		}
		// Every client works again (database/sql replaces a broken
		// connection after at most one failure).
		for i, c := range stores {
			var err error
			for range 3 {
				var r segment.Range
				if r, err = c.Fetch(ctx, "restart", 1); err == nil {
					ranges = append(ranges, r)
					break
				}
				if !errors.Is(err, segment.ErrUnavailable) {
					t.Fatalf("client %d after the restart: %v", i, err)
				}
			}
			if err != nil {
				t.Fatalf("client %d does not recover: %v", i, err)
			}
		}
		got, err := s.Get(ctx, "restart")
		if err != nil {
			t.Fatal(err)
		}
		checkRanges(t, ranges, 1, got.MaxID, failures*maxN)
		// A fresh client starts past everything handed out.
		fresh, _ := segClient(t, dsn, s.table, false)
		r, err := fresh.Fetch(ctx, "restart", 5)
		if err != nil || r.Start != got.MaxID {
			t.Fatalf("fresh client's Fetch = %+v, %v; want a range from %d", r, err, got.MaxID)
		}
		t.Logf("%d fetches, %d failed, %d server sessions killed; row at %d", len(ranges), failures, killed, got.MaxID)
	})
}

// update_time is read as an instant whatever the session's time zone, on
// this package's table and on Leaf's (whose PostgreSQL port has a TIMESTAMP
// without time zone, read in the zone it was written in).
func TestSegmentsUpdateTimeZone(t *testing.T) {
	forEach(t, func(t *testing.T, dsn string) {
		ctx := ctx10(t)
		admin, d := testDB(t, dsn)
		ours := segTable(t, admin, d)
		s, err := NewSegments(admin, d, ours)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.CreateSegmentSchema(ctx); err != nil {
			t.Fatal(err)
		}
		leafs := segTable(t, admin, d)
		if _, err := admin.ExecContext(ctx, leafDDL(d, leafs)); err != nil {
			t.Fatal(err)
		}
		zdsn := dsn + "?time_zone=%27%2B08%3A00%27"
		if strings.Contains(dsn, "?") {
			zdsn = dsn + "&time_zone=%27%2B08%3A00%27"
		}
		if d == Postgres {
			zdsn = withPGParam(t, dsn, "timezone", "Asia/Shanghai")
		}
		for _, table := range []string{ours, leafs} {
			c, db := segClient(t, zdsn, table, false)
			var zone string
			q := "SELECT @@session.time_zone"
			if d == Postgres {
				q = "SHOW timezone"
			}
			if err := db.QueryRowContext(ctx, q).Scan(&zone); err != nil || (zone != "+08:00" && zone != "Asia/Shanghai") {
				t.Fatalf("session time zone %q, %v", zone, err)
			}
			before := time.Now().Add(-2 * time.Second)
			if err := c.Create(ctx, segment.Tag{Name: "tz", Step: 5}); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Fetch(ctx, "tz", 5); err != nil {
				t.Fatal(err)
			}
			for _, store := range []*Segments{c, s} {
				s2, _ := NewSegments(store.db, d, table)
				got, err := s2.Get(ctx, "tz")
				if err != nil {
					t.Fatal(err)
				}
				if got.Updated.Before(before) || got.Updated.After(time.Now().Add(2*time.Second)) {
					if store == s && table == leafs && d == Postgres {
						continue // a TIMESTAMP read in another zone than it was written in: off by the zones' difference
					}
					t.Errorf("table %s: update_time %v, want about now (%v)", table, got.Updated, time.Now())
				}
			}
		}
	})
}

func TestSegmentsTableNames(t *testing.T) {
	db := offlineDB(t)
	good := []string{"leaf_alloc", "_x", "A", "t1", strings.Repeat("a", 63)}
	for _, d := range []Dialect{Postgres, MySQL} {
		for _, name := range good {
			s, err := NewSegments(db, d, name)
			if err != nil || s.Table() != name || s.Dialect() != d || !strings.Contains(s.SegmentSchemaSQL(), d.quote(name)) {
				t.Errorf("%v: NewSegments(%q) = %v, %v", d, name, s, err)
			}
		}
		s, err := NewSegments(db, d, "")
		if err != nil || s.Table() != DefaultSegmentTable {
			t.Fatalf("%v: NewSegments with no table: %v, %v", d, s, err)
		}
		schema, _ := SegmentSchemaSQL(d, "")
		if s.SegmentSchemaSQL() != joinSchema(schema, strideSchema(d)) || !strings.Contains(schema, "CREATE TABLE IF NOT EXISTS "+d.quote("leaf_alloc")) ||
			!strings.Contains(s.SegmentSchemaSQL(), "CREATE TABLE IF NOT EXISTS "+d.quote(StrideTable)) {
			t.Errorf("%v: schema %q", d, schema)
		}
		for _, col := range []string{"biz_tag VARCHAR(128)", "max_id BIGINT NOT NULL DEFAULT 1", "step INT NOT NULL",
			"description VARCHAR(256) DEFAULT NULL", "update_time", "PRIMARY KEY (biz_tag)"} {
			if !strings.Contains(schema, col) {
				t.Errorf("%v: schema has no %q: %s", d, col, schema)
			}
		}
	}
	checkRefusesTables(t, "NewSegments", func(db *sql.DB, d Dialect, name string) error {
		_, err := NewSegments(db, d, name)
		return err
	}, SegmentSchemaSQL)
}

// Bad arguments are refused before any statement runs: the database here
// does not exist.
func TestSegmentsBadArguments(t *testing.T) {
	db := offlineDB(t)
	for _, d := range []Dialect{Postgres, MySQL} {
		s, err := NewSegments(db, d, "")
		if err != nil {
			t.Fatal(err)
		}
		ctx := t.Context()
		step, desc := int64(10), "d"
		for _, name := range []string{"", "has space", strings.Repeat("x", 129), "é", "a\x00", "tag!", "a'b", "a;DROP TABLE t"} {
			for op, err := range map[string]error{
				"Fetch":  func() error { _, err := s.Fetch(ctx, name, 1); return err }(),
				"Get":    func() error { _, err := s.Get(ctx, name); return err }(),
				"Create": s.Create(ctx, segment.Tag{Name: name, Step: 1}),
				"Update": s.Update(ctx, name, &step, &desc),
			} {
				if !errors.Is(err, segment.ErrInvalidTag) {
					t.Errorf("%v: %s(%q) = %v, want ErrInvalidTag", d, op, name, err)
				}
			}
		}
		for _, n := range []int64{0, -1, math.MinInt64} {
			if _, err := s.Fetch(ctx, "t", n); !errors.Is(err, segment.ErrInvalidTag) || !strings.Contains(err.Error(), "at least 1") {
				t.Errorf("%v: Fetch of %d IDs = %v, want ErrInvalidTag", d, n, err)
			}
		}
		for _, tag := range []segment.Tag{
			{Name: "t", Step: 0}, {Name: "t", Step: -1}, {Name: "t", Step: segment.MaxStep + 1},
			{Name: "t", Step: 1, MaxID: -1},
			{Name: "t", Step: 1, Description: strings.Repeat("d", 257)},
			{Name: "t", Step: 1, Description: "bad \xff UTF-8"},
			{Name: "t", Step: 1, Description: "NUL \x00"},
		} {
			if err := s.Create(ctx, tag); !errors.Is(err, segment.ErrInvalidTag) {
				t.Errorf("%v: Create(%+v) = %v, want ErrInvalidTag", d, tag, err)
			}
		}
		for _, st := range []int64{0, -5, segment.MaxStep + 1, math.MaxInt64} {
			if err := s.Update(ctx, "t", &st, nil); !errors.Is(err, segment.ErrInvalidTag) {
				t.Errorf("%v: Update to step %d = %v, want ErrInvalidTag", d, st, err)
			}
		}
		for _, ds := range []string{strings.Repeat("é", 129), "\xc3", "a\x00b"} {
			if err := s.Update(ctx, "t", nil, &ds); !errors.Is(err, segment.ErrInvalidTag) {
				t.Errorf("%v: Update to description %q = %v, want ErrInvalidTag", d, ds, err)
			}
		}
	}
}

func TestSegmentsEdges(t *testing.T) {
	forEach(t, func(t *testing.T, dsn string) {
		s, admin := newSegments(t, dsn)
		ctx := ctx10(t)
		// Overflow: the last IDs of int64, then ErrExhausted with the row
		// unchanged.
		if err := s.Create(ctx, segment.Tag{Name: "edge", Step: 10, MaxID: math.MaxInt64 - 10}); err != nil {
			t.Fatal(err)
		}
		if r, err := s.Fetch(ctx, "edge", 10); err != nil || r != (segment.Range{Start: math.MaxInt64 - 10, End: math.MaxInt64}) {
			t.Fatalf("Fetch of the last 10 IDs = %+v, %v", r, err)
		}
		for _, n := range []int64{1, 1000, math.MaxInt64} {
			if _, err := s.Fetch(ctx, "edge", n); !errors.Is(err, segment.ErrExhausted) {
				t.Fatalf("Fetch(%d) past int64 = %v, want ErrExhausted", n, err)
			}
		}
		if err := s.Create(ctx, segment.Tag{Name: "big", Step: 10}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Fetch(ctx, "big", math.MaxInt64); !errors.Is(err, segment.ErrExhausted) {
			t.Fatalf("Fetch(MaxInt64) from 1 = %v, want ErrExhausted", err)
		}
		if r, err := s.Fetch(ctx, "big", math.MaxInt64-1); err != nil || r != (segment.Range{Start: 1, End: math.MaxInt64}) {
			t.Fatalf("Fetch(MaxInt64-1) from 1 = %+v, %v", r, err)
		}
		for _, name := range []string{"edge", "big"} {
			if got, err := s.Get(ctx, name); err != nil || got.MaxID != math.MaxInt64 {
				t.Fatalf("Get(%s) = %+v, %v; want max id MaxInt64", name, got, err)
			}
		}
		// Unknown tags.
		step := int64(5)
		for op, err := range map[string]error{
			"Fetch":  func() error { _, err := s.Fetch(ctx, "nope", 1); return err }(),
			"Get":    func() error { _, err := s.Get(ctx, "nope"); return err }(),
			"Update": s.Update(ctx, "nope", &step, nil),
			"Touch":  s.Update(ctx, "nope", nil, nil),
		} {
			if !errors.Is(err, segment.ErrUnknownTag) {
				t.Errorf("%s of an unknown tag: %v, want ErrUnknownTag", op, err)
			}
		}
		// Duplicates, also of a tag with a step at the limit.
		if err := s.Create(ctx, segment.Tag{Name: "dup", Step: segment.MaxStep, Description: "日本語の説明"}); err != nil {
			t.Fatal(err)
		}
		if err := s.Create(ctx, segment.Tag{Name: "dup", Step: 1}); !errors.Is(err, segment.ErrTagExists) {
			t.Fatalf("second Create: %v, want ErrTagExists", err)
		}
		long := strings.Repeat("é", 128) // 256 bytes
		if err := s.Update(ctx, "dup", nil, &long); err != nil {
			t.Fatal(err)
		}
		if err := s.Update(ctx, "dup", nil, nil); err != nil {
			t.Fatalf("Update with nothing to change: %v", err)
		}
		if got, err := s.Get(ctx, "dup"); err != nil || got.Step != segment.MaxStep || got.Description != long || got.MaxID != 1 {
			t.Fatalf("Get(dup) = %+v, %v", got, err)
		}
		// Names are compared exactly.
		if err := s.Create(ctx, segment.Tag{Name: "DUP", Step: 3}); err != nil {
			t.Fatalf("Create of a name differing in case: %v", err)
		}
		// A row no store wrote: a negative max_id is refused, not served.
		if _, err := admin.ExecContext(ctx, "INSERT INTO "+s.d.quote(s.table)+" (biz_tag, max_id, step) VALUES ('neg', -7, 10)"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Fetch(ctx, "neg", 1); !errors.Is(err, segment.ErrUnavailable) || !strings.Contains(err.Error(), "corrupt row") {
			t.Fatalf("Fetch of a row with max_id -7: %v, want ErrUnavailable naming the corrupt row", err)
		}
		tags, err := s.List(ctx)
		var names []string
		for _, tg := range tags {
			names = append(names, tg.Name)
		}
		if err != nil || !slices.Equal(names, []string{"DUP", "big", "dup", "edge", "neg"}) {
			t.Fatalf("List = %v, %v; want the tags by byte order", names, err)
		}
		// A missing table.
		gone, err := NewSegments(admin, s.d, "leaf_alloc_missing_"+randomHex(t))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := gone.Fetch(ctx, "edge", 1); !errors.Is(err, segment.ErrUnavailable) {
			t.Fatalf("Fetch on a missing table: %v, want ErrUnavailable", err)
		}
		// The caller's context.
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := s.Fetch(cctx, "big", 1); !errors.Is(err, segment.ErrUnavailable) || !errors.Is(err, context.Canceled) {
			t.Fatalf("Fetch with a canceled context: %v, want ErrUnavailable and context.Canceled", err)
		}
	})
}

func TestSegmentsCreateSchemaIsIdempotent(t *testing.T) {
	forEach(t, func(t *testing.T, dsn string) {
		s, _ := newSegments(t, dsn)
		ctx := ctx10(t)
		if err := s.Create(ctx, segment.Tag{Name: "kept", Step: 7, MaxID: 42}); err != nil {
			t.Fatal(err)
		}
		concurrently(t, 4, "concurrent CreateSegmentSchema", func() error { return s.CreateSegmentSchema(ctx) })
		if got, err := s.Get(ctx, "kept"); err != nil || got.MaxID != 42 || got.Step != 7 {
			t.Fatalf("after CreateSegmentSchema again: %+v, %v", got, err)
		}
	})
}

func TestSegmentsClosedDB(t *testing.T) {
	forEach(t, func(t *testing.T, dsn string) {
		s, _ := newSegments(t, dsn)
		ctx := ctx10(t)
		if err := s.Create(ctx, segment.Tag{Name: "c", Step: 7}); err != nil {
			t.Fatal(err)
		}
		c, db := segClient(t, dsn, s.table, false)
		if _, err := c.Fetch(ctx, "c", 1); err != nil {
			t.Fatal(err)
		}
		db.Close()
		step := int64(3)
		for op, err := range map[string]error{
			"Fetch":               func() error { _, err := c.Fetch(ctx, "c", 1); return err }(),
			"Get":                 func() error { _, err := c.Get(ctx, "c"); return err }(),
			"List":                func() error { _, err := c.List(ctx); return err }(),
			"Create":              c.Create(ctx, segment.Tag{Name: "d", Step: 1}),
			"Update":              c.Update(ctx, "c", &step, nil),
			"CreateSegmentSchema": c.CreateSegmentSchema(ctx),
		} {
			if !errors.Is(err, segment.ErrUnavailable) || !errors.Is(err, sql.ErrConnDone) && !strings.Contains(err.Error(), "closed") {
				t.Errorf("%s on a closed database: %v, want ErrUnavailable saying it is closed", op, err)
			}
		}
	})
}

// Without clientFoundRows MySQL counts an UPDATE that changed nothing as
// no row: Update must still tell an unchanged row from a missing one.
func TestSegmentsUpdateWithoutFoundRows(t *testing.T) {
	dsn := testenv.MySQL().Require(t)
	s, _ := newSegments(t, dsn)
	c, err := NewSegments(noFoundRowsDB(t, dsn), MySQL, s.table)
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctx10(t)
	if err := c.Create(ctx, segment.Tag{Name: "u", Step: 7, Description: "same"}); err != nil {
		t.Fatal(err)
	}
	step, desc := int64(7), "same"
	for range 20 {
		if err := c.Update(ctx, "u", &step, &desc); err != nil {
			t.Fatalf("Update to the same values: %v", err)
		}
	}
	if err := c.Update(ctx, "missing", &step, &desc); !errors.Is(err, segment.ErrUnknownTag) {
		t.Fatalf("Update of a missing tag: %v, want ErrUnknownTag", err)
	}
	if r, err := c.Fetch(ctx, "u", 3); err != nil || r != (segment.Range{Start: 1, End: 4}) {
		t.Fatalf("Fetch = %+v, %v", r, err)
	}
}

// BenchmarkSegmentFetch measures Fetch on one tag: from one client, and
// from 8 clients (each its own *sql.DB) contending for the row. ns/op is
// the wall time per fetch of all clients together; µs/fetch is the mean
// latency one client sees.
func BenchmarkSegmentFetch(b *testing.B) {
	for _, svc := range services() {
		b.Run(svc.name, func(b *testing.B) {
			dsn := svc.env.Require(b)
			s, _ := newSegments(b, dsn)
			if err := s.Create(b.Context(), segment.Tag{Name: "bench", Step: 1000}); err != nil {
				b.Fatal(err)
			}
			for _, clients := range []int{1, 8} {
				b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
					stores := make([]*Segments, clients)
					for i := range stores {
						stores[i], _ = segClient(b, dsn, s.table, false)
						if _, err := stores[i].Fetch(b.Context(), "bench", 1000); err != nil { // connect
							b.Fatal(err)
						}
					}
					var left, latency atomic.Int64
					left.Store(int64(b.N))
					var wg sync.WaitGroup
					b.ResetTimer()
					for _, c := range stores {
						wg.Go(func() {
							for left.Add(-1) >= 0 {
								t0 := time.Now()
								if _, err := c.Fetch(b.Context(), "bench", 1000); err != nil {
									b.Error(err)
									return
								}
								latency.Add(int64(time.Since(t0)))
							}
						})
					}
					wg.Wait()
					b.StopTimer()
					b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "fetches/s")
					b.ReportMetric(float64(latency.Load())/float64(b.N)/1e3, "µs/fetch")
				})
			}
		})
	}
}
