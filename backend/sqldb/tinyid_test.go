package sqldb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/flakeid/flakeid/segment"
	"github.com/flakeid/flakeid/segment/segmenttest"
	"github.com/flakeid/flakeid/worker"
)

// tinyidTable is a fresh Tinyid table name; it and its description table
// are dropped after the test.
func tinyidTable(t testing.TB, admin *sql.DB, d Dialect) string {
	t.Helper()
	name := "tiny_id_info_" + randomHex(t)
	dropAfter(t, admin, d, name)
	dropAfter(t, admin, d, name+descriptionSuffix)
	return name
}

// newTinyid creates a uniquely named Tinyid table with CreateSegmentSchema
// and returns a store on it and the admin database.
func newTinyid(t *testing.T, dsn string) (*Segments, *sql.DB) {
	t.Helper()
	admin, d := testDB(t, dsn)
	s, err := NewTinyidSegments(admin, d, tinyidTable(t, admin, d))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CreateSegmentSchema(ctx10(t)); err != nil {
		t.Fatalf("CreateSegmentSchema: %v", err)
	}
	return s, admin
}

func TestTinyidConformance(t *testing.T) {
	forEach(t, func(t *testing.T, dsn string) {
		segmenttest.Run(t, segmenttest.Harness{
			Open: func(t *testing.T) segmenttest.Connector {
				s, _ := newTinyid(t, dsn)
				return segConnector{dsn: dsn, table: s.table, tinyid: true}
			},
		})
	})
}

// tinyidDDL is Tinyid's tinyid-server/db.sql for tiny_id_info, verbatim on
// MySQL (its character set is utf8 and its collation the server's default),
// and its plain port to PostgreSQL.
func tinyidDDL(d Dialect, table string) string {
	if d == MySQL {
		return "CREATE TABLE `" + table + "` (\n" +
			"  `id` bigint(20) NOT NULL AUTO_INCREMENT COMMENT '自增主键',\n" +
			"  `biz_type` varchar(63) NOT NULL DEFAULT '' COMMENT '业务类型，唯一',\n" +
			"  `begin_id` bigint(20) NOT NULL DEFAULT '0' COMMENT '开始id，仅记录初始值，无其他含义。初始化时begin_id和max_id应相同',\n" +
			"  `max_id` bigint(20) NOT NULL DEFAULT '0' COMMENT '当前最大id',\n" +
			"  `step` int(11) DEFAULT '0' COMMENT '步长',\n" +
			"  `delta` int(11) NOT NULL DEFAULT '1' COMMENT '每次id增量',\n" +
			"  `remainder` int(11) NOT NULL DEFAULT '0' COMMENT '余数',\n" +
			"  `create_time` timestamp NOT NULL DEFAULT '2010-01-01 00:00:00' COMMENT '创建时间',\n" +
			"  `update_time` timestamp NOT NULL DEFAULT '2010-01-01 00:00:00' COMMENT '更新时间',\n" +
			"  `version` bigint(20) NOT NULL DEFAULT '0' COMMENT '版本号',\n" +
			"  PRIMARY KEY (`id`),\n" +
			"  UNIQUE KEY `uniq_biz_type` (`biz_type`)\n" +
			") ENGINE=InnoDB AUTO_INCREMENT=1 DEFAULT CHARSET=utf8 COMMENT 'id信息表'"
	}
	return `CREATE TABLE "` + table + `" (
  id bigserial PRIMARY KEY,
  biz_type varchar(63) NOT NULL DEFAULT '' UNIQUE,
  begin_id bigint NOT NULL DEFAULT 0,
  max_id bigint NOT NULL DEFAULT 0,
  step int DEFAULT 0,
  delta int NOT NULL DEFAULT 1,
  remainder int NOT NULL DEFAULT 0,
  create_time timestamp NOT NULL DEFAULT '2010-01-01 00:00:00',
  update_time timestamp NOT NULL DEFAULT '2010-01-01 00:00:00',
  version bigint NOT NULL DEFAULT 0
)`
}

// tinyidSegment is what a Tinyid server hands out for one fetch
// (DbSegmentIdServiceImpl.getNextSegmentId through TinyIdInfoDAOImpl, with
// its statements as written there): read the row, then UPDATE max_id =
// max_id + step guarded by the old max_id and version, retrying on a
// conflict. The IDs are SegmentId's: above the old max_id, up to and
// including the new one, ≡ remainder (mod delta).
func tinyidSegment(ctx context.Context, db *sql.DB, d Dialect, table, biz string) ([]int64, error) {
	sel := "select id, biz_type, begin_id, max_id, step, delta, remainder, version from " + d.quote(table) + " where biz_type = ?"
	upd := "update " + d.quote(table) + " set max_id= ?, update_time=now(), version=version+1 where id=? and max_id=? and version=? and biz_type=?"
	if d == Postgres {
		sel, upd = dollarParams(sel), dollarParams(upd)
	}
	for range 50 { // Tinyid's Constants.RETRY is 3; more here, under heavier contention
		var id, begin, maxID, step, delta, rem, version int64
		var name string
		if err := db.QueryRowContext(ctx, sel, biz).Scan(&id, &name, &begin, &maxID, &step, &delta, &rem, &version); err != nil {
			return nil, err
		}
		res, err := db.ExecContext(ctx, upd, maxID+step, id, maxID, version, biz)
		if err != nil {
			return nil, err
		}
		if k, _ := res.RowsAffected(); k != 1 {
			continue
		}
		// SegmentId.init and nextId: currentId starts at the old max_id.
		var ids []int64
		cur := maxID
		if cur%delta != rem {
			for i := int64(0); i <= delta; i++ {
				cur++
				if cur%delta == rem {
					cur -= delta
					break
				}
			}
		}
		for {
			cur += delta
			if cur > maxID+step {
				return ids, nil
			}
			ids = append(ids, cur)
		}
	}
	return nil, fmt.Errorf("tinyid: get next segmentId conflict")
}

// A table Tinyid created, with Tinyid's own sample rows: flakeid continues
// each biz_type where Tinyid left it (test: 2, 3, …; test_odd: odd IDs from
// 3), with each row's delta and remainder, while Tinyid servers keep
// fetching from the same rows; no ID is handed out twice.
func TestTinyidTakeover(t *testing.T) {
	forEach(t, func(t *testing.T, dsn string) {
		ctx := ctx10(t)
		admin, d := testDB(t, dsn)
		table := tinyidTable(t, admin, d)
		if _, err := admin.ExecContext(ctx, tinyidDDL(d, table)); err != nil {
			t.Fatal(err)
		}
		ins := "INSERT INTO " + d.quote(table) + " (id, biz_type, begin_id, max_id, step, delta, remainder, create_time, update_time, version) VALUES " +
			"(1, 'test', 1, 1, 100, 1, 0, '2018-07-21 23:52:58', '2018-07-22 23:19:27', 1), " +
			"(2, 'test_odd', 1, 1, 100, 2, 1, '2018-07-21 23:52:58', '2018-07-23 00:39:24', 3)"
		if _, err := admin.ExecContext(ctx, ins); err != nil {
			t.Fatal(err)
		}
		s, err := NewTinyidSegments(admin, d, table)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.CreateSegmentSchema(ctx); err != nil {
			t.Fatalf("CreateSegmentSchema on Tinyid's table: %v", err)
		}
		tags, err := s.List(ctx)
		if err != nil || len(tags) != 2 || tags[0].Name != "test" || tags[0].MaxID != 2 || tags[0].Step != 100 || tags[0].Delta != 1 ||
			tags[1].Name != "test_odd" || tags[1].Delta != 2 || tags[1].Remainder != 1 {
			t.Fatalf("List = %+v, %v", tags, err)
		}
		a, err := segment.New(segment.Config{Store: s, SegmentDuration: -1})
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		if id, err := a.NextID(ctx, "test"); err != nil || id != 2 {
			t.Fatalf("first ID of test = %d, %v; Tinyid hands out 2", id, err)
		}
		if id, err := a.NextID(ctx, "test_odd"); err != nil || id != 3 {
			t.Fatalf("first ID of test_odd = %d, %v; Tinyid hands out 3", id, err)
		}

		// flakeid allocators and Tinyid servers side by side.
		var mu sync.Mutex
		seen := map[string]map[int64]string{"test": {}, "test_odd": {}}
		add := func(biz, who string, ids ...int64) {
			mu.Lock()
			defer mu.Unlock()
			for _, id := range ids {
				if prev, ok := seen[biz][id]; ok {
					t.Errorf("%s ID %d handed out by %s and by %s", biz, id, prev, who)
				}
				if biz == "test_odd" && id%2 != 1 {
					t.Errorf("test_odd ID %d from %s is even", id, who)
				}
				seen[biz][id] = who
			}
		}
		var wg sync.WaitGroup
		for i := range 2 {
			st, _ := segClient(t, dsn, table, true)
			fa, err := segment.New(segment.Config{Store: st, SegmentDuration: -1})
			if err != nil {
				t.Fatal(err)
			}
			defer fa.Close()
			who := fmt.Sprintf("flakeid %d", i)
			wg.Go(func() {
				for range 300 {
					for _, biz := range []string{"test", "test_odd"} {
						id, err := fa.NextID(ctx, biz)
						if err != nil {
							t.Error(err)
							return
						}
						add(biz, who, id)
					}
				}
			})
			tdb, _ := testDB(t, dsn)
			who2 := fmt.Sprintf("tinyid %d", i)
			wg.Go(func() {
				for range 4 {
					for _, biz := range []string{"test", "test_odd"} {
						ids, err := tinyidSegment(ctx, tdb, d, table, biz)
						if err != nil {
							t.Error(err)
							return
						}
						add(biz, who2, ids...)
					}
				}
			})
		}
		wg.Wait()
		// A segment taken whole (Tinyid's nextSegmentId) is the caller's.
		sp, err := a.TakeSegment(ctx, "test_odd")
		if err != nil || sp.Count != 50 || sp.Stride != 2 {
			t.Fatalf("TakeSegment = %+v, %v; want 50 odd IDs", sp, err)
		}
		var taken []int64
		for id := range sp.All() {
			taken = append(taken, id)
		}
		add("test_odd", "TakeSegment", taken...)
		// The version moved with every fetch, Tinyid's and flakeid's.
		var version int64
		q := "SELECT version FROM " + d.quote(table) + " WHERE biz_type = 'test'"
		if err := admin.QueryRowContext(ctx, q).Scan(&version); err != nil || version < 10 {
			t.Fatalf("version of test = %d, %v; every fetch adds 1", version, err)
		}
	})
}

// Tokens come from Tinyid's token table, each with the biz_types it may use.
func TestTinyidTokens(t *testing.T) {
	forEach(t, func(t *testing.T, dsn string) {
		ctx := ctx10(t)
		s, admin := newTinyid(t, dsn)
		tok := "tok-" + randomHex(t)
		ins := "INSERT INTO " + s.d.quote(TinyidTokenTable) + " (token, biz_type, remark) VALUES (?, 'test', '1'), (?, 'test_odd', '1'), (?, 'other', '')"
		if s.d == Postgres {
			ins = dollarParams(ins)
		}
		if _, err := admin.ExecContext(ctx, ins, tok, tok, tok+"x"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			del := "DELETE FROM " + s.d.quote(TinyidTokenTable) + " WHERE token IN (?, ?)"
			if s.d == Postgres {
				del = dollarParams(del)
			}
			admin.ExecContext(context.Background(), del, tok, tok+"x")
		})
		got, err := s.TinyidTokens(ctx)
		if err != nil || strings.Join(got[tok], ",") != "test,test_odd" && strings.Join(got[tok], ",") != "test_odd,test" || len(got[tok+"x"]) != 1 {
			t.Fatalf("TinyidTokens = %v, %v", got, err)
		}
		leaf, _ := newSegments(t, dsn)
		if _, err := leaf.TinyidTokens(ctx); !errors.Is(err, segment.ErrUnknownTag) {
			t.Fatalf("a Leaf store's tokens: %v", err)
		}
	})
}

// What a Tinyid table cannot hold is refused, naming it, and nothing is
// created: names past biz_type's 63 characters, strides on Leaf's table.
func TestTinyidRefusals(t *testing.T) {
	forEach(t, func(t *testing.T, dsn string) {
		ctx := ctx10(t)
		s, _ := newTinyid(t, dsn)
		long := strings.Repeat("n", 64)
		if err := s.Create(ctx, segment.Tag{Name: long, Step: 10}); !errors.Is(err, segment.ErrInvalidTag) || !strings.Contains(err.Error(), "63") {
			t.Fatalf("Create of a 64-character name: %v", err)
		}
		if err := s.Create(ctx, segment.Tag{Name: strings.Repeat("n", 63), Step: 10, Delta: 4, Remainder: 3}); err != nil {
			t.Fatal(err)
		}
	})
}

func TestTinyidSchema(t *testing.T) {
	for _, d := range []Dialect{Postgres, MySQL} {
		ddl, err := TinyidSchemaSQL(d, "")
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{d.quote(DefaultTinyidTable), d.quote(TinyidTokenTable), d.quote(DefaultTinyidTable + descriptionSuffix),
			"biz_type VARCHAR(63)", "delta INT NOT NULL DEFAULT 1", "remainder INT NOT NULL DEFAULT 0", "version BIGINT"} {
			if !strings.Contains(ddl, want) {
				t.Errorf("%v: Tinyid DDL has no %q:\n%s", d, want, ddl)
			}
		}
		for _, bad := range []string{strings.Repeat("a", 52), "1t", "a-b"} {
			if _, err := TinyidSchemaSQL(d, bad); !errors.Is(err, worker.ErrInvalidConfig) {
				t.Errorf("%v: TinyidSchemaSQL(%q) = %v", d, bad, err)
			}
		}
		if _, err := TinyidSchemaSQL(d, strings.Repeat("a", 51)); err != nil {
			t.Errorf("%v: a 51-character name: %v", d, err)
		}
	}
	// The URL's ?format= picks the tables; anything else is refused.
	for raw, want := range map[string]string{
		"postgres://u@h/db?format=tinyid":          DefaultTinyidTable,
		"mysql://u@h/db?format=TinyID&table=t1":    "t1",
		"postgres://u@h/db?format=leaf":            DefaultSegmentTable,
		"postgres://u@h/db?format=ticket":          "",
		"postgres://u@h/db?format=tinyid&formt=ok": "",
	} {
		u := mustURL(t, raw)
		s, err := segmentsOfURL(u)
		if want == "" {
			if !errors.Is(err, worker.ErrInvalidConfig) {
				t.Errorf("%s: %v, want ErrInvalidConfig", raw, err)
			}
			continue
		}
		if err != nil || s.Table() != want || s.Tinyid() != strings.Contains(strings.ToLower(raw), "tinyid") {
			t.Errorf("%s: %v, %v", raw, s, err)
		}
		if s != nil {
			s.Close()
		}
	}
}
