package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	bwsnowflake "github.com/bwmarrin/snowflake"
	"github.com/sony/sonyflake"
	"github.com/yitter/idgenerator-go/idgen"

	"github.com/flakeid/flakeid/backend/sqldb"
	"github.com/flakeid/flakeid/internal/testenv"
	"github.com/flakeid/flakeid/snowflake"
)

// migrate plan, for each predecessor, with IDs its real algorithm made
// (bwmarrin/snowflake, sony/sonyflake and Yitter's Go modules; uid-generator
// and Twitter's by their published layouts; a plain sequence): under the
// planned layout every ID a generator issues is above the old maximum, and
// the printed flags give that layout. Plans that cannot be made safe are
// refused, saying why.
func TestMigratePlan(t *testing.T) {
	uid, _ := snowflake.Preset("uid-generator")
	twitter, _ := snowflake.Preset("twitter")
	now := time.Now()
	maxOf := map[string]int64{}
	node, err := bwsnowflake.NewNode(1023)
	if err != nil {
		t.Fatal(err)
	}
	for range 1000 {
		maxOf["bwmarrin"] = max(maxOf["bwmarrin"], node.Generate().Int64())
	}
	sf, err := sonyflake.New(sonyflake.Settings{MachineID: func() (uint16, error) { return 0xFFFF, nil }})
	if err != nil {
		t.Fatal(err)
	}
	for range 1000 {
		id, err := sf.NextID()
		if err != nil {
			t.Fatal(err)
		}
		maxOf["sonyflake-v1"] = max(maxOf["sonyflake-v1"], int64(id))
	}
	yit := idgen.NewDefaultIdGenerator(idgen.NewIdGeneratorOptions(63))
	for range 1000 {
		maxOf["yitter"] = max(maxOf["yitter"], yit.NewLong())
	}
	// uid-generator still running in 2019 (its time field later ran out);
	// Twitter's layout today with every low bit set.
	id, err := uid.Compose(snowflake.Parts{Tick: int64(3 * 365 * 24 * 3600), Worker: 1<<22 - 1, Sequence: 1<<13 - 1})
	if err != nil {
		t.Fatal(err)
	}
	maxOf["uid-generator"] = int64(id)
	b, err := twitter.Bounds(now, now.Add(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	maxOf["twitter"] = int64(b.Max)
	maxOf["sequence"] = 987_654_321

	for from, maxID := range maxOf {
		for _, preset := range []string{"default", "twitter", "jssafe"} {
			t.Run(from+"→"+preset, func(t *testing.T) {
				c := migratePlanCmd{From: from, MaxID: &maxID, MinYears: 10, FromTimeUnit: "1ms", Layout: layoutFlags{Preset: preset}}
				p, err := c.plan(t.Context(), time.Now())
				if preset == "jssafe" && maxID >= 1<<53 {
					if err == nil || !strings.Contains(err.Error(), "no plan") {
						t.Fatalf("a plan below 2^53 for old IDs up to %d: %+v, %v", maxID, p, err)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				g, err := snowflake.New(snowflake.Settings{Layout: p.layout, WorkerID: 0})
				if err != nil {
					t.Fatal(err)
				}
				for range 2000 {
					id, err := g.NextID()
					if err != nil {
						t.Fatal(err)
					}
					if int64(id) <= maxID {
						t.Fatalf("planned layout %s issued %d, not above the old maximum %d", p.layout, id, maxID)
					}
				}
				if years := time.Until(p.layout.Capacity().RunsUntil).Hours() / 24 / 365.2425; years < 10 {
					t.Fatalf("planned layout %s lasts %.1f years", p.layout, years)
				}
				// The printed flags give the planned layout.
				r := runCLI(t, append([]string{"layout", "--json"}, p.Flags...)...)
				mustSucceed(t, r)
				var got layoutInfo
				if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
					t.Fatal(err)
				}
				if got.Epoch != p.layout.Epoch.Format(time.RFC3339Nano) || got.TimeBits != p.layout.TimeBits || got.SequenceBits != p.layout.SequenceBits ||
					got.WorkerBits != p.layout.WorkerBits || got.DatacenterBits != p.layout.DatacenterBits {
					t.Fatalf("flags %v give %+v, the plan is %s", p.Flags, got, p.layout)
				}
			})
		}
	}

	// Refused, saying why.
	exhausted, _ := uid.Compose(snowflake.Parts{Tick: 1<<28 - 1})
	future, _ := mustPreset(t, "sonyflake-v1").Compose(snowflake.Parts{Tick: 1<<39 - 1})
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--from", "uid-generator", "--max-id", fmt.Sprint(int64(exhausted))}, "about 2^35"},
		{[]string{"--from", "sonyflake-v1", "--max-id", fmt.Sprint(int64(future))}, "is --from right?"},
		{[]string{"--from", "sequence"}, "--max-id N, or --max-id-from"},
		{[]string{"--from", "sequence", "--max-id", "5", "--max-id-from", "postgres://x/y?column=t.id"}, "one of them"},
		{[]string{"--from", "instagram", "--max-id", "5"}, "want a preset"},
		{[]string{"--from", "twitter", "--max-id", "5", "--tag", "orders"}, "--tag is for a sequence"},
		{[]string{"--from", "layout", "--max-id", "5", "--from-fields", "41/x"}, "--from-fields T/D/W/S"},
		{[]string{"--from", "sequence", "--max-id=-3"}, "not negative"},
		{[]string{"--from", "twitter", "--max-id", "5", "--from-epoch", "2020-01-01"}, "go with --from layout"},
		{[]string{"--from", "sequence", "--max-id-from", "postgres://127.0.0.1:1/test?column=x"}, "column=table.column"},
	} {
		mustFail(t, runCLI(t, append([]string{"migrate", "plan"}, tc.args...)...), 1, tc.want)
	}
}

func mustPreset(t *testing.T, name string) snowflake.Layout {
	l, err := snowflake.Preset(name)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// The highest ID read from a table column of a real database, and a plan
// of a custom old layout with a segment tag.
func TestMigratePlanFromColumn(t *testing.T) {
	if testing.Short() {
		t.Skip("needs PostgreSQL")
	}
	dsn := testenv.Postgres().Require(t)
	db, _, err := sqldb.OpenDB(dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	table := randomName("flakeid_old_")
	t.Cleanup(func() { db.Exec(`DROP TABLE IF EXISTS "` + table + `"`) })
	if _, err := db.Exec(`CREATE TABLE "` + table + `" (id BIGINT PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO "` + table + `" VALUES (17), (4242), (99)`); err != nil {
		t.Fatal(err)
	}
	u := strings.Replace(dsn, "?", "?column="+table+".id&", 1)
	r := runCLI(t, "migrate", "plan", "--from", "sequence", "--max-id-from", u, "--tag", "orders", "--json")
	mustSucceed(t, r)
	var p migrationPlan
	if err := json.Unmarshal([]byte(r.stdout), &p); err != nil || p.MaxID != 4242 || p.SegmentFrom != 4243 || p.SegmentTag != "orders" {
		t.Fatalf("plan from a column: %+v, %v\n%s", p, err, r.stdout)
	}
	if !strings.Contains(strings.Join(p.Steps, "\n"), "flakeid tags create orders --start 4243") {
		t.Fatalf("steps: %q", p.Steps)
	}
	mustFail(t, runCLI(t, "migrate", "plan", "--from", "sequence", "--max-id-from", strings.Replace(dsn, "?", "?column="+table+"_none.id&", 1)), 1, "reading MAX(id)")

	r = runCLI(t, "migrate", "plan", "--from", "layout", "--from-fields", "41/0/10/12", "--from-epoch", "1288834974657", "--max-id", "1990000000000000000")
	mustSucceed(t, r)
	if !strings.Contains(r.stdout, "issued at 2025-11-16") || !strings.Contains(r.stdout, "--epoch") {
		t.Fatalf("plan of a custom layout:\n%s", r.stdout)
	}
}
