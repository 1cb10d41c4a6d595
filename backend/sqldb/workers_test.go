package sqldb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flakeid/flakeid/internal/testenv"
	"github.com/flakeid/flakeid/worker"
	"github.com/flakeid/flakeid/worker/protocol"
	"github.com/flakeid/flakeid/worker/workertest"
)

func tableName(t testing.TB) string { return "flakeid_workers_" + randomHex(t) }

// registryName is a fresh datacenter registry table name: every test claims
// its datacenters in its own registry, so tests never see each other.
func registryName(t testing.TB) string { return "flakeid_dcs_" + randomHex(t) }

// newTable creates a uniquely named table and registry table and drops them
// after the test, once the clients' own cleanups (registered later, so run
// earlier) are done.
func newTable(t testing.TB, dsn string) (*Workers, *sql.DB) {
	t.Helper()
	admin, d := testDB(t, dsn)
	return createWorkers(t, admin, d, tableName(t), registryName(t)), admin
}

// createWorkers creates table and registry with CreateSchema, drops them
// after the test, and returns a coordinator on them over admin.
func createWorkers(t testing.TB, admin *sql.DB, d Dialect, table, registry string) *Workers {
	t.Helper()
	w, err := newWorkers(admin, d, table, registry)
	if err != nil {
		t.Fatal(err)
	}
	dropAfter(t, admin, d, w.registry)
	dropAfter(t, admin, d, w.table)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := w.CreateSchema(ctx); err != nil {
		t.Fatalf("CreateSchema: %v", err)
	}
	return w
}

type connector struct {
	dsn      string
	table    string
	registry string
}

func connectorOf(dsn string, w *Workers) connector {
	return connector{dsn: dsn, table: w.table, registry: w.registry}
}

func (c connector) Connect(t *testing.T) worker.Coordinator {
	db, d := testDB(t, c.dsn)
	w, err := newWorkers(db, d, c.table, c.registry)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// ConnectFaulty connects through a faultnet proxy: Cut holds every byte
// between this client and the database, as a network partition would.
func (c connector) ConnectFaulty(t *testing.T) (worker.Coordinator, workertest.Fault) {
	dsn, p := throughProxy(t, c.dsn)
	db, d := testDB(t, dsn)
	w, err := newWorkers(db, d, c.table, c.registry)
	if err != nil {
		t.Fatal(err)
	}
	return w, p
}

// execT runs one statement (with ? placeholders) of the harness on db.
func execT(t *testing.T, db interface {
	ExecContext(context.Context, string, ...any) (sql.Result, error)
}, d Dialect, q string, args ...any) {
	t.Helper()
	if d == Postgres {
		q = dollarParams(q)
	}
	if _, err := db.ExecContext(ctx10(t), q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// Wipe empties the table and the registry, as a TRUNCATE, a DELETE or a
// database recreated from nothing would.
func (c connector) Wipe(t *testing.T) {
	db, d := testDB(t, c.dsn)
	execT(t, db, d, "DELETE FROM "+d.quote(c.table))
	execT(t, db, d, "DELETE FROM "+d.quote(c.registry))
}

// Snapshot reads every row of the table; restore replaces the table's rows
// with them in one transaction, as a restore from a dump, a point-in-time
// recovery or a failover to a lagging replica would. The registry, outside
// the namespace, is left as it is.
func (c connector) Snapshot(t *testing.T) (restore func()) {
	t.Helper()
	db, d := testDB(t, c.dsn)
	rows, err := db.QueryContext(ctx10(t), "SELECT datacenter, worker, holder, expires_at_ms, high_water_ms FROM "+d.quote(c.table))
	if err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	defer rows.Close()
	type saved struct {
		dc, id        int64
		holder        string
		expires, high int64
	}
	var snap []saved
	for rows.Next() {
		var r saved
		if err := rows.Scan(&r.dc, &r.id, &r.holder, &r.expires, &r.high); err != nil {
			t.Fatalf("snapshot: %v", err)
		}
		snap = append(snap, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	return func() {
		t.Helper()
		tx, err := db.BeginTx(ctx10(t), nil)
		if err != nil {
			t.Fatalf("restore: %v", err)
		}
		defer tx.Rollback()
		execT(t, tx, d, "DELETE FROM "+d.quote(c.table))
		for _, r := range snap {
			execT(t, tx, d, "INSERT INTO "+d.quote(c.table)+" (datacenter, worker, holder, expires_at_ms, high_water_ms) VALUES (?, ?, ?, ?, ?)",
				r.dc, r.id, r.holder, r.expires, r.high)
		}
		if err := tx.Commit(); err != nil {
			t.Fatalf("restore: %v", err)
		}
	}
}

// OtherNamespace is a client of another table sharing the registry.
func (c connector) OtherNamespace(t *testing.T) worker.Coordinator {
	admin, d := testDB(t, c.dsn)
	other := createWorkers(t, admin, d, tableName(t), c.registry)
	return connectorOf(c.dsn, other).Connect(t)
}

func TestWorkersConformance(t *testing.T) {
	forEach(t, func(t *testing.T, dsn string) {
		workertest.Run(t, workertest.Harness{
			Open: func(t *testing.T) workertest.Connector {
				w, _ := newTable(t, dsn)
				return connectorOf(dsn, w)
			},
			TTL: 2 * time.Second,
		})
	})
}

func BenchmarkWorkers(b *testing.B) {
	for _, s := range services() {
		b.Run(s.name, func(b *testing.B) {
			dsn := s.env.Require(b)
			workertest.Benchmark(b, func(b *testing.B) worker.Coordinator {
				w, _ := newTable(b, dsn)
				return w
			})
		})
	}
}

func req(owner string, workers int64) worker.Request {
	return worker.Request{Workers: workers, Owner: owner, TTL: 2 * time.Second, Reserve: time.Now().Truncate(time.Millisecond)}
}

func TestCreateSchemaIsIdempotent(t *testing.T) {
	forEach(t, func(t *testing.T, dsn string) {
		w, _ := newTable(t, dsn)
		ctx := ctx10(t)
		if err := w.CreateSchema(ctx); err != nil {
			t.Fatalf("second CreateSchema: %v", err)
		}
		cl, err := w.Acquire(ctx, req("a", 4))
		if err != nil {
			t.Fatal(err)
		}
		if err := w.CreateSchema(ctx); err != nil {
			t.Fatalf("CreateSchema on a used table: %v", err)
		}
		infos, err := w.List(ctx, 0)
		if err != nil || len(infos) != 1 || infos[0].Holder != "a" || infos[0].Worker != cl.WorkerID() {
			t.Fatalf("after CreateSchema again: List = %+v, %v; want the slot held by a", infos, err)
		}
		// Several nodes creating it at once.
		concurrently(t, 4, "concurrent CreateSchema", func() error { return w.CreateSchema(ctx) })
	})
}

func TestTableNameValidation(t *testing.T) {
	db := offlineDB(t)
	good := []string{"flakeid_workers", "_x", "A", "t1", "Workers_2026", strings.Repeat("a", 63)}
	for _, d := range []Dialect{Postgres, MySQL} {
		for _, name := range good {
			if _, err := NewWorkers(db, d, name); err != nil {
				t.Errorf("%v: NewWorkers(%q): %v", d, name, err)
			}
		}
		w, err := NewWorkers(db, d, "")
		if err != nil || w.Table() != DefaultTable {
			t.Errorf("%v: NewWorkers with no table: %v, %v", d, w, err)
		}
		if !strings.Contains(w.SchemaSQL(), d.quote(DefaultTable)) {
			t.Errorf("%v: schema %q does not create %s", d, w.SchemaSQL(), DefaultTable)
		}
	}
	checkRefusesTables(t, "NewWorkers", func(db *sql.DB, d Dialect, name string) error {
		_, err := NewWorkers(db, d, name)
		return err
	}, SchemaSQL)
	checkRefusesTables(t, "NewWorkers with a registry", func(db *sql.DB, d Dialect, name string) error {
		_, err := newWorkers(db, d, "", name)
		return err
	}, registrySchemaSQL)
}

func TestRegistryNames(t *testing.T) {
	db := offlineDB(t)
	for _, d := range []Dialect{Postgres, MySQL} {
		w, err := NewWorkers(db, d, "")
		if err != nil || w.Registry() != DefaultRegistry {
			t.Fatalf("%v: NewWorkers with no registry: %v, %v", d, w, err)
		}
		for _, schema := range []string{w.SchemaSQL(), func() string { s, _ := SchemaSQL(d, ""); return s }()} {
			if !strings.Contains(schema, "CREATE TABLE IF NOT EXISTS "+d.quote(DefaultTable)) ||
				!strings.Contains(schema, "CREATE TABLE IF NOT EXISTS "+d.quote(DefaultRegistry)) || strings.Count(schema, ";") != 2 {
				t.Errorf("%v: schema %q: want both tables, each statement ended by a semicolon", d, schema)
			}
		}
		w, err = newWorkers(db, d, "ids", "dcs")
		if err != nil || w.Registry() != "dcs" || !strings.Contains(w.SchemaSQL(), "CREATE TABLE IF NOT EXISTS "+d.quote("dcs")) {
			t.Errorf("%v: registry dcs: %v, %v", d, w, err)
		}
		if s, err := schemaSQL(d, "ids", "dcs"); err != nil || s != w.SchemaSQL() {
			t.Errorf("%v: schemaSQL = %q, %v; want %q", d, s, err, w.SchemaSQL())
		}
		if s, err := RegistrySchemaSQL(d); err != nil || !strings.Contains(s, "CREATE TABLE IF NOT EXISTS "+d.quote(DefaultRegistry)) {
			t.Errorf("%v: RegistrySchemaSQL = %q, %v; want the table %s", d, s, err, DefaultRegistry)
		}
		if _, err := newWorkers(db, d, "same", "same"); !errors.Is(err, worker.ErrInvalidConfig) {
			t.Errorf("%v: a registry named as the worker table: %v, want ErrInvalidConfig", d, err)
		}
	}
}

func TestBadContracts(t *testing.T) {
	w, err := NewWorkers(offlineDB(t), Postgres, "")
	if err != nil {
		t.Fatal(err)
	}
	for name, contract := range map[string]string{
		"too long":      strings.Repeat("×", maxContract+1),
		"invalid UTF-8": "41/5/5/12\xff",
		"NUL":           "a\x00b",
	} {
		r := req("a", 1)
		r.Contract = contract
		if _, err := w.Acquire(t.Context(), r); !errors.Is(err, worker.ErrInvalidConfig) {
			t.Errorf("%s: Acquire = %v, want ErrInvalidConfig", name, err)
		}
	}
	r := req("a", 1)
	r.Quarantine = -time.Second
	if _, err := w.Acquire(t.Context(), r); !errors.Is(err, worker.ErrInvalidConfig) {
		t.Errorf("negative quarantine: Acquire = %v, want ErrInvalidConfig", err)
	}
}

// qexec runs q (with ? placeholders) on db, failing the test on an error.
func qexec(t *testing.T, db *sql.DB, d Dialect, q string, args ...any) {
	t.Helper()
	execT(t, db, d, q, args...)
}

// A table written by a flakeid without namespace records (slots, a lock
// row, no record) keeps working: the first Acquire writes the record and
// keeps the slots and their marks; every id starts after the floor.
func TestWorkersOlderTable(t *testing.T) {
	forEach(t, func(t *testing.T, dsn string) {
		w, admin := newTable(t, dsn)
		d, tbl := w.d, w.d.quote(w.table)
		ctx := ctx10(t)
		now := time.Now().UnixMilli()
		qexec(t, admin, d, "INSERT INTO "+tbl+" (datacenter, worker) VALUES (0, -1)")
		qexec(t, admin, d, "INSERT INTO "+tbl+" VALUES (0, 0, '', 0, ?)", now+3_600_000)
		qexec(t, admin, d, "INSERT INTO "+tbl+" VALUES (0, 1, 'old-node', ?, ?)", now+60_000, now+1_000)
		r := req("new-node", 3)
		r.Contract, r.Quarantine = "c", 2*time.Second
		cl, err := w.Acquire(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		ns, ok, err := w.Namespace(ctx, 0)
		if err != nil || !ok || ns.Contract != "c" || ns.Floor.Sub(ns.Initialised) != 2*time.Second {
			t.Fatalf("Namespace = %+v, %v, %v; want the record written with the contract and a 2s quarantine", ns, ok, err)
		}
		if cl.WorkerID() != 2 || !cl.Previous().Equal(ns.Floor) {
			t.Fatalf("took worker %d starting at %v; want the never-used worker 2 at the floor %v", cl.WorkerID(), cl.Previous(), ns.Floor)
		}
		infos, err := w.List(ctx, 0)
		if err != nil || len(infos) != 3 || infos[0].HighWater.UnixMilli() != now+3_600_000 || infos[1].Holder != "old-node" ||
			infos[1].HighWater.UnixMilli() != now+1_000 {
			t.Fatalf("List = %+v, %v; want the older slots as they were", infos, err)
		}
		if err := cl.Renew(ctx, time.Second, time.Now()); err != nil {
			t.Fatalf("Renew: %v", err)
		}
	})
}

// A database whose worker table predates the registry (migrations applied
// the older SchemaSQL) is refused with the DDL to run, until it exists.
func TestWorkersMissingRegistry(t *testing.T) {
	forEach(t, func(t *testing.T, dsn string) {
		admin, d := testDB(t, dsn)
		table, registry := tableName(t), registryName(t)
		dropAfter(t, admin, d, registry)
		dropAfter(t, admin, d, table)
		ddl, err := workersSchemaSQL(d, table)
		if err != nil {
			t.Fatal(err)
		}
		qexec(t, admin, d, ddl)
		w, err := newWorkers(admin, d, table, registry)
		if err != nil {
			t.Fatal(err)
		}
		ctx := ctx10(t)
		_, err = w.Acquire(ctx, req("a", 1))
		if !errors.Is(err, worker.ErrUnavailable) || !strings.Contains(err.Error(), "CreateSchema") ||
			!strings.Contains(err.Error(), "CREATE TABLE IF NOT EXISTS "+d.quote(registry)) {
			t.Fatalf("Acquire without the registry table: %v; want ErrUnavailable telling to create it", err)
		}
		t.Logf("without the registry: %v", err)
		if err := w.CreateSchema(ctx); err != nil {
			t.Fatal(err)
		}
		if ns, ok, err := w.Namespace(ctx, 0); err != nil || ok {
			t.Fatalf("the refused Acquire wrote a record: %+v, %v, %v", ns, ok, err)
		}
		if _, err := w.Acquire(ctx, req("a", 1)); err != nil {
			t.Fatalf("Acquire after CreateSchema: %v", err)
		}
	})
}

// wantReset fails unless err is ErrReset (and not ErrNotHeld) saying want.
func wantReset(t *testing.T, what string, err error, want string) {
	t.Helper()
	if !errors.Is(err, worker.ErrReset) || errors.Is(err, worker.ErrNotHeld) || !strings.Contains(err.Error(), want) {
		t.Fatalf("%s: %v; want ErrReset (and not ErrNotHeld) saying %q", what, err, want)
	}
	t.Logf("%s: %v", what, err)
}

// Only the record row deleted (a partial loss): the holder's Renew finds it
// gone, re-initialises it and touches no slot.
func TestWorkersRecordDeleted(t *testing.T) {
	forEach(t, func(t *testing.T, dsn string) {
		w, admin := newTable(t, dsn)
		ctx := ctx10(t)
		r := req("holder", 2)
		r.Quarantine = 3 * time.Second
		cl, err := w.Acquire(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		old, _, _ := w.Namespace(ctx, 0)
		before, _ := w.List(ctx, 0)
		qexec(t, admin, w.d, "DELETE FROM "+w.d.quote(w.table)+" WHERE worker = -2")
		wantReset(t, "Renew", cl.Renew(ctx, 2*time.Second, time.Now().Add(time.Second)), "namespace record of datacenter 0 in "+w.table+" is gone")
		ns, ok, err := w.Namespace(ctx, 0)
		if err != nil || !ok || ns.Incarnation == old.Incarnation || ns.Floor.Before(time.Now().Add(2*time.Second)) {
			t.Fatalf("after the reset: %+v, %v, %v; want a new record with a floor 3s ahead (was %+v)", ns, ok, err, old)
		}
		if after, _ := w.List(ctx, 0); len(after) != 1 || after[0] != before[0] {
			t.Fatalf("the reset changed the slot: %+v, was %+v", after, before)
		}
		wantReset(t, "Release", cl.Release(ctx, time.Now()), "after the one this holder acquired under")
		if again, _, _ := w.Namespace(ctx, 0); again != ns {
			t.Fatalf("a holder that found the record re-initialised wrote it again: %+v, was %+v", again, ns)
		}
	})
}

// The database goes back to a copy from an older incarnation: the holder of
// the newer one finds its record initialised before its own, re-initialises
// it (the floor never goes back), and the holder of the older incarnation
// finds it re-initialised after its own.
func TestWorkersOlderIncarnation(t *testing.T) {
	forEach(t, func(t *testing.T, dsn string) {
		w, _ := newTable(t, dsn)
		conn := connectorOf(dsn, w)
		ctx := ctx10(t)
		r := req("first", 2)
		r.Quarantine = time.Second
		first, err := w.Acquire(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		restore := conn.Snapshot(t)
		conn.Wipe(t)
		time.Sleep(5 * time.Millisecond)
		r.Owner, r.Quarantine = "second", 20*time.Second
		second, err := w.Acquire(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		newer, _, _ := w.Namespace(ctx, 0)
		restore()
		wantReset(t, "Renew of the newer incarnation's holder", second.Renew(ctx, 2*time.Second, time.Now()), "before the one this holder acquired under")
		ns, ok, err := w.Namespace(ctx, 0)
		if err != nil || !ok || ns.Incarnation == newer.Incarnation || ns.Floor.Before(newer.Floor) {
			t.Fatalf("after the rollback: %+v, %v, %v; want a new record whose floor is not below %v", ns, ok, err, newer.Floor)
		}
		wantReset(t, "Renew of the older incarnation's holder", first.Renew(ctx, 2*time.Second, time.Now()), "after the one this holder acquired under")
		if again, _, _ := w.Namespace(ctx, 0); again != ns {
			t.Fatalf("the record changed again: %+v, was %+v", again, ns)
		}
	})
}

// The database goes back to a copy in which the live holder's lease had
// lapsed, and a newcomer takes the id (raising its mark past the holder's):
// the holder's next Renew finds the slot taken while the lease the database
// granted it still runs, re-initialises the record, and fails with
// ErrReset; the newcomer's Renew then finds the record re-initialised.
func TestWorkersRollbackNewcomer(t *testing.T) {
	forEach(t, func(t *testing.T, dsn string) {
		w, _ := newTable(t, dsn)
		conn := connectorOf(dsn, w)
		ctx := ctx10(t)
		const ttl = time.Second
		r := req("holder", 1)
		r.TTL, r.Reserve = ttl, time.Now()
		a, err := w.Acquire(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		restore := conn.Snapshot(t)
		for end := time.Now().Add(ttl + ttl/2); time.Now().Before(end); {
			time.Sleep(ttl / 4)
			if err := a.Renew(ctx, ttl, time.Now()); err != nil {
				t.Fatalf("Renew before the rollback: %v", err)
			}
		}
		old, _, _ := w.Namespace(ctx, 0)
		restore()
		r.Owner, r.Reserve = "newcomer", time.Now()
		b, err := conn.Connect(t).Acquire(ctx, r)
		if err != nil {
			t.Fatalf("the newcomer's Acquire: %v", err)
		}
		if b.WorkerID() != a.WorkerID() {
			t.Fatalf("the newcomer got worker %d, want %d", b.WorkerID(), a.WorkerID())
		}
		wantReset(t, "the holder's Renew", a.Renew(ctx, ttl, time.Now()), `is held by "newcomer"`)
		ns, ok, err := w.Namespace(ctx, 0)
		if err != nil || !ok || ns.Incarnation == old.Incarnation || ns.Floor.Before(old.Floor) {
			t.Fatalf("after the rollback: %+v, %v, %v; want a new record whose floor is not below %v", ns, ok, err, old.Floor)
		}
		wantReset(t, "the newcomer's Renew", b.Renew(ctx, ttl, time.Now()), "after the one this holder acquired under")
	})
}

// A lease that ran out is not a rollback: a Renew after the end of the lease
// that finds the id taken is ErrNotHeld, and a second Release is ErrNotHeld.
func TestWorkersExpiredNotReset(t *testing.T) {
	forEach(t, func(t *testing.T, dsn string) {
		w, _ := newTable(t, dsn)
		ctx := ctx10(t)
		r := req("holder", 1)
		r.TTL = 300 * time.Millisecond
		a, err := w.Acquire(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(400 * time.Millisecond)
		r.Owner = "next"
		b, err := w.Acquire(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Renew(ctx, time.Second, time.Now()); !errors.Is(err, worker.ErrNotHeld) || errors.Is(err, worker.ErrReset) {
			t.Fatalf("Renew after the lease ran out: %v, want ErrNotHeld", err)
		}
		if err := b.Release(ctx, time.Now()); err != nil {
			t.Fatal(err)
		}
		if err := b.Release(ctx, time.Now()); !errors.Is(err, worker.ErrNotHeld) || errors.Is(err, worker.ErrReset) {
			t.Fatalf("second Release: %v, want ErrNotHeld", err)
		}
	})
}

// Several holders find the same loss at once: each fails with ErrReset, and
// exactly one re-initialises the record.
func TestWorkersConcurrentReset(t *testing.T) {
	forEach(t, func(t *testing.T, dsn string) {
		w, _ := newTable(t, dsn)
		conn := connectorOf(dsn, w)
		ctx := ctx10(t)
		const holders = 6
		claims := make([]worker.Claim, holders)
		for i := range claims {
			cl, err := conn.Connect(t).Acquire(ctx, req(fmt.Sprintf("h%d", i), holders))
			if err != nil {
				t.Fatal(err)
			}
			claims[i] = cl
		}
		conn.Wipe(t)
		errs := make(chan error, holders)
		for _, cl := range claims {
			go func() { errs <- cl.Renew(ctx, 2*time.Second, time.Now()) }()
		}
		reinits := 0
		for range holders {
			err := <-errs
			if !errors.Is(err, worker.ErrReset) || errors.Is(err, worker.ErrNotHeld) {
				t.Fatalf("Renew after the loss: %v, want ErrReset", err)
			}
			if strings.Contains(err.Error(), "the namespace is re-initialised") {
				reinits++
			}
		}
		if reinits != 1 {
			t.Fatalf("%d holders re-initialised the record, want 1", reinits)
		}
	})
}

// The database's clock, not the process's, decides expiry. MySQL lets a
// session set its clock (SET timestamp), which shows it.
func TestExpiryUsesDatabaseClock(t *testing.T) {
	forEach(t, func(t *testing.T, dsn string) {
		w, _ := newTable(t, dsn)
		ctx := ctx10(t)
		before := time.Now()
		if _, err := w.Acquire(ctx, req("a", 1)); err != nil {
			t.Fatal(err)
		}
		infos, err := w.List(ctx, 0)
		if err != nil || len(infos) != 1 {
			t.Fatalf("List = %+v, %v", infos, err)
		}
		if exp := infos[0].Expires; exp.Before(before.Add(2*time.Second-500*time.Millisecond)) || exp.After(time.Now().Add(2*time.Second+500*time.Millisecond)) {
			t.Fatalf("expires %v, want about now + 2s (now %v)", exp, time.Now())
		}
		if w.d != MySQL {
			return
		}
		// A session whose clock runs an hour ahead sees the lease expired
		// and takes it over; its lease lasts until its own now + TTL.
		db, _ := testDB(t, dsn)
		db.SetMaxOpenConns(1)
		ahead := time.Now().Add(time.Hour)
		if _, err := db.ExecContext(ctx, fmt.Sprintf("SET timestamp = %d", ahead.Unix())); err != nil {
			t.Fatal(err)
		}
		fw, err := newWorkers(db, MySQL, w.table, w.registry)
		if err != nil {
			t.Fatal(err)
		}
		fcl, err := fw.Acquire(ctx, req("from-the-future", 1))
		if err != nil {
			t.Fatalf("Acquire with the database clock an hour ahead: %v", err)
		}
		infos, err = w.List(ctx, 0)
		if err != nil || len(infos) != 1 || infos[0].Holder != "from-the-future" || infos[0].Expires.Before(ahead) {
			t.Fatalf("List = %+v, %v; want held by from-the-future until about %v", infos, err, ahead)
		}
		// The claim reports that clock, from Acquire and from the renewal
		// (the UPDATE's LAST_INSERT_ID).
		nearClock := func(when string) {
			t.Helper()
			if at, stale := fcl.Clock(); at.Before(ahead.Add(-2*time.Second)) || at.After(ahead.Add(5*time.Second)) || stale != 0 {
				t.Fatalf("%s: Clock() = %v, %v; want the session's clock, about %v", when, at, stale, ahead)
			}
		}
		nearClock("after Acquire")
		time.Sleep(5 * time.Millisecond)
		if err := fcl.Renew(ctx, 2*time.Second, time.Now()); err != nil {
			t.Fatal(err)
		}
		nearClock("after Renew")
	})
}

// Without clientFoundRows, MySQL reports 0 rows for an UPDATE that matched
// but changed nothing: renewals in the same millisecond must still succeed.
func TestRenewWithoutFoundRows(t *testing.T) {
	dsn := testenv.MySQL().Require(t)
	w, _ := newTable(t, dsn)
	db := noFoundRowsDB(t, dsn)
	db.SetMaxOpenConns(1)
	pw, err := newWorkers(db, MySQL, w.table, w.registry)
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctx10(t)
	r := req("a", 1)
	cl, err := pw.Acquire(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 300 {
		if err := cl.Renew(ctx, r.TTL, r.Reserve); err != nil {
			t.Fatalf("renewal %d: %v", i, err)
		}
	}
	if err := cl.Release(ctx, r.Reserve); err != nil {
		t.Fatal(err)
	}
	if err := cl.Renew(ctx, r.TTL, r.Reserve); !errors.Is(err, worker.ErrNotHeld) {
		t.Fatalf("Renew after Release: %v, want ErrNotHeld", err)
	}
}

func TestCorruptRow(t *testing.T) {
	forEach(t, func(t *testing.T, dsn string) {
		w, admin := newTable(t, dsn)
		ctx := ctx10(t)
		if _, err := w.Acquire(ctx, req("a", 4)); err != nil {
			t.Fatal(err)
		}
		if _, err := admin.ExecContext(ctx, "INSERT INTO "+w.d.quote(w.table)+
			" (datacenter, worker, holder, expires_at_ms, high_water_ms) VALUES (0, 2, '', 0, -7)"); err != nil {
			t.Fatal(err)
		}
		_, err := w.List(ctx, 0)
		if !errors.Is(err, worker.ErrUnavailable) || !strings.Contains(err.Error(), "corrupt row (datacenter 0, worker 2): high_water_ms -7") {
			t.Fatalf("List with a corrupt row: %v", err)
		}
		_, err = w.Acquire(ctx, req("b", 4))
		if !errors.Is(err, worker.ErrUnavailable) || !strings.Contains(err.Error(), "corrupt row") {
			t.Fatalf("Acquire with a corrupt row: %v", err)
		}
		t.Logf("corrupt row: %v", err)
	})
}

// A table of the same name but another shape is reported, not mistaken.
func TestForeignTable(t *testing.T) {
	forEach(t, func(t *testing.T, dsn string) {
		admin, d := testDB(t, dsn)
		name := tableName(t)
		ctx := ctx10(t)
		if _, err := admin.ExecContext(ctx, "CREATE TABLE "+d.quote(name)+" (datacenter BIGINT, worker BIGINT, note VARCHAR(10))"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { admin.ExecContext(context.Background(), "DROP TABLE "+d.quote(name)) })
		registry := registryName(t)
		dropAfter(t, admin, d, registry)
		w, err := newWorkers(admin, d, name, registry)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.CreateSchema(ctx); err != nil {
			t.Fatal(err) // IF NOT EXISTS: the foreign table stays
		}
		if _, err := w.List(ctx, 0); !errors.Is(err, worker.ErrUnavailable) || !strings.Contains(err.Error(), "holder") {
			t.Fatalf("List on a foreign table: %v", err)
		}
		_, err = w.Acquire(ctx, req("a", 1))
		if !errors.Is(err, worker.ErrUnavailable) {
			t.Fatalf("Acquire on a foreign table: %v", err)
		}
		t.Logf("foreign table: %v", err)
	})
}

func TestClosedDB(t *testing.T) {
	forEach(t, func(t *testing.T, dsn string) {
		w, _ := newTable(t, dsn)
		db, d := testDB(t, dsn)
		c, err := newWorkers(db, d, w.table, w.registry)
		if err != nil {
			t.Fatal(err)
		}
		ctx := ctx10(t)
		cl, err := c.Acquire(ctx, req("a", 2))
		if err != nil {
			t.Fatal(err)
		}
		db.Close()
		for name, err := range map[string]error{
			"Acquire": func() error { _, err := c.Acquire(ctx, req("b", 2)); return err }(),
			"List":    func() error { _, err := c.List(ctx, 0); return err }(),
			"Renew":   cl.Renew(ctx, time.Second, time.Now()),
			"Release": cl.Release(ctx, time.Now()),
		} {
			if !errors.Is(err, worker.ErrUnavailable) || !errors.Is(err, sql.ErrConnDone) && !strings.Contains(err.Error(), "closed") {
				t.Errorf("%s on a closed database: %v, want ErrUnavailable saying it is closed", name, err)
			}
		}
	})
}

func TestBadRequests(t *testing.T) {
	w, err := NewWorkers(offlineDB(t), Postgres, "")
	if err != nil {
		t.Fatal(err)
	}
	for name, r := range map[string]worker.Request{
		"no workers":          {Workers: 0, Owner: "a", TTL: time.Second},
		"negative dc":         {Datacenter: -1, Workers: 1, Owner: "a", TTL: time.Second},
		"no owner":            {Workers: 1, TTL: time.Second},
		"long owner":          {Workers: 1, Owner: strings.Repeat("o", 256), TTL: time.Second},
		"trailing space":      {Workers: 1, Owner: "a ", TTL: time.Second},
		"invalid UTF-8":       {Workers: 1, Owner: "a\xff", TTL: time.Second},
		"sub-millisecond TTL": {Workers: 1, Owner: "a", TTL: time.Microsecond},
	} {
		if _, err := w.Acquire(t.Context(), r); !errors.Is(err, worker.ErrInvalidConfig) {
			t.Errorf("%s: Acquire(%+v) = %v, want ErrInvalidConfig", name, r, err)
		}
	}
}

// A client partitioned away in the middle of Acquire, holding its
// datacenter's lock row, blocks no renewal; on PostgreSQL and MariaDB the
// server ends its transaction after the lock-hold limit, so other nodes
// acquire again without the link healing; on MySQL they wait until the link
// heals or the server drops the connection.
func TestPartitionedAcquirer(t *testing.T) {
	forEach(t, func(t *testing.T, dsn string) {
		w, _ := newTable(t, dsn)
		conn := connectorOf(dsn, w)
		healthy := conn.Connect(t).(*Workers)
		fc, fault := conn.ConnectFaulty(t)
		faulty := fc.(*Workers)
		// The lock row stays held for lockHold: a renewal that waited for
		// it would outlast the renewals' timeout (a third of it), which
		// leaves a loaded machine room to answer one that does not.
		faulty.lockHold = 3 * time.Second
		faulty.testHookLocked = fault.Cut
		defer fault.Heal()

		ctx := ctx10(t)
		// The holder's lease outlives the lock row: the next Acquire,
		// once the row is free, must find its worker id held.
		hr := req("holder", 4)
		hr.TTL = 10 * time.Second
		held, err := healthy.Acquire(ctx, hr)
		if err != nil {
			t.Fatal(err)
		}
		actx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
		defer cancel()
		if _, err := faulty.Acquire(actx, req("partitioned", 4)); !errors.Is(err, worker.ErrUnavailable) {
			t.Fatalf("Acquire cut off mid-transaction: %v, want ErrUnavailable", err)
		}
		// The lock row is held by the partitioned session; renewals go on.
		for range 3 {
			rctx, cancel := context.WithTimeout(t.Context(), faulty.lockHold/3)
			err := held.Renew(rctx, hr.TTL, time.Now())
			cancel()
			if err != nil {
				t.Fatalf("Renew while another client holds the lock row: %v", err)
			}
			time.Sleep(100 * time.Millisecond)
		}
		start := time.Now()
		if healthy.d == MySQL {
			var version string
			if err := healthy.db.QueryRowContext(ctx, "SELECT VERSION()").Scan(&version); err != nil {
				t.Fatal(err)
			}
			if mariaDB := strings.Contains(version, "MariaDB"); mariaDB != (faulty.idleTxTimeout.Load() == 1) {
				t.Fatalf("server %q: idle_transaction_timeout in use = %v, want %v", version, !mariaDB, mariaDB)
			}
		}
		if healthy.d == MySQL && faulty.idleTxTimeout.Load() != 1 {
			bctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
			_, err := healthy.Acquire(bctx, req("blocked", 4))
			cancel()
			if !errors.Is(err, worker.ErrUnavailable) {
				t.Fatalf("Acquire while a partitioned client holds the lock row: %v, want ErrUnavailable", err)
			}
			fault.Heal()
		}
		cl, err := healthy.Acquire(ctx, req("next", 4))
		if err != nil {
			t.Fatalf("Acquire after the partitioned client: %v", err)
		}
		t.Logf("%v: the next Acquire got worker %d after %v", healthy.d, cl.WorkerID(), time.Since(start).Round(time.Millisecond))
		if cl.WorkerID() == held.WorkerID() {
			t.Fatalf("worker %d handed out twice", cl.WorkerID())
		}
	})
}

// Many nodes acquiring and releasing the same few ids at once: never two
// holders of one id, and every holder starts at or after its predecessor's
// final reservation.
func TestAcquireChurn(t *testing.T) {
	forEach(t, func(t *testing.T, dsn string) {
		w, _ := newTable(t, dsn)
		conn := connectorOf(dsn, w)
		const nodes, ids = 24, 4
		type key struct{ dc, id int64 }
		var (
			mu       sync.Mutex
			holders  = map[key]string{}
			released = map[key]int64{} // the final reservation, Unix ms
			acquired int
		)
		clients := make([]worker.Coordinator, nodes)
		for i := range clients {
			clients[i] = conn.Connect(t)
		}
		stop := time.Now().Add(1500 * time.Millisecond)
		var wg sync.WaitGroup
		for i, c := range clients {
			wg.Go(func() {
				for n := 0; time.Now().Before(stop); n++ {
					dc := int64(n % 2)
					r := req(fmt.Sprintf("node-%d-%d", i, n), ids)
					r.Datacenter = dc
					cl, err := c.Acquire(ctx10(t), r)
					if errors.Is(err, worker.ErrExhausted) {
						time.Sleep(time.Millisecond)
						continue
					}
					if err != nil {
						t.Errorf("Acquire: %v", err)
						return
					}
					k := key{dc, cl.WorkerID()}
					mu.Lock()
					if h, dup := holders[k]; dup {
						t.Errorf("worker %v handed to %s while %s holds it", k, r.Owner, h)
					}
					if prev := protocol.CeilMs(cl.Previous()); prev < released[k] {
						t.Errorf("worker %v: Previous %d before the last release's %d", k, prev, released[k])
					}
					holders[k] = r.Owner
					acquired++
					final := time.Now().Add(time.Duration(n%5) * time.Second).Truncate(time.Millisecond)
					released[k] = max(released[k], final.UnixMilli())
					mu.Unlock()
					time.Sleep(time.Millisecond)
					mu.Lock()
					delete(holders, k)
					mu.Unlock()
					if err := cl.Release(ctx10(t), final); err != nil {
						t.Errorf("Release: %v", err)
						return
					}
				}
			})
		}
		wg.Wait()
		t.Logf("%d acquisitions", acquired)
		if acquired < 2*ids {
			t.Fatalf("only %d acquisitions", acquired)
		}
	})
}

// A client whose link was cut works again once it heals: the pooled
// connections whose bytes were held are discarded, not reused stuck.
func TestRecoversAfterHeal(t *testing.T) {
	forEach(t, func(t *testing.T, dsn string) {
		w, _ := newTable(t, dsn)
		c, fault := connectorOf(dsn, w).ConnectFaulty(t)
		ctx := ctx10(t)
		cl, err := c.Acquire(ctx, req("a", 2))
		if err != nil {
			t.Fatal(err)
		}
		fault.Cut()
		for range 3 { // fail the pooled connection and a fresh one
			sctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
			err := cl.Renew(sctx, 5*time.Second, time.Now())
			cancel()
			if !errors.Is(err, worker.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Renew while cut: %v, want ErrUnavailable and the deadline", err)
			}
		}
		fault.Heal()
		start := time.Now()
		for name, op := range map[string]func(context.Context) error{
			"Renew": func(ctx context.Context) error { return cl.Renew(ctx, 5*time.Second, time.Now()) },
			"List":  func(ctx context.Context) error { _, err := c.List(ctx, 0); return err },
			"Acquire": func(ctx context.Context) error {
				_, err := c.Acquire(ctx, req("b", 2))
				return err
			},
		} {
			octx, cancel := context.WithTimeout(t.Context(), time.Second)
			err := op(octx)
			cancel()
			if err != nil {
				t.Errorf("%s after the link healed: %v", name, err)
			}
		}
		t.Logf("recovered in %v", time.Since(start).Round(time.Millisecond))
	})
}

// TestCreateSchemaRace has several nodes, each with its own connections,
// create a table that does not exist yet at the same moment, as a cluster's
// nodes do at their first start; every one must succeed. Plain CREATE TABLE
// IF NOT EXISTS fails here on PostgreSQL ("type … already exists").
func TestCreateSchemaRace(t *testing.T) {
	forEach(t, func(t *testing.T, dsn string) {
		admin, d := testDB(t, dsn)
		const nodes, rounds = 6, 8
		dbs := make([]*sql.DB, nodes)
		for i := range dbs {
			dbs[i], _ = testDB(t, dsn)
		}
		ctx := ctx10(t)
		for round := range rounds {
			workers, segments, registry := tableName(t), "flakeid_segments_"+randomHex(t), registryName(t)
			dropAfter(t, admin, d, registry)
			dropAfter(t, admin, d, workers)
			dropAfter(t, admin, d, segments)
			start := make(chan struct{})
			errs := make(chan error, 2*nodes)
			for _, db := range dbs {
				w, err := newWorkers(db, d, workers, registry)
				if err != nil {
					t.Fatal(err)
				}
				s, err := NewSegments(db, d, segments)
				if err != nil {
					t.Fatal(err)
				}
				go func() { <-start; errs <- w.CreateSchema(ctx) }()
				go func() { <-start; errs <- s.CreateSegmentSchema(ctx) }()
			}
			close(start)
			for range 2 * nodes {
				if err := <-errs; err != nil {
					t.Errorf("round %d: concurrent create: %v", round, err)
				}
			}
			if t.Failed() {
				return
			}
			w, _ := newWorkers(admin, d, workers, registry)
			if _, err := w.List(ctx, 0); err != nil {
				t.Fatalf("round %d: the table is not usable after the race: %v", round, err)
			}
		}
	})
}

// TestLockedWriteGuardedAgainstOneSlotCommit: a one-slot commit (a
// renewal's guarded UPDATE) does not wait for the lock row, so it can land
// between a locked commit's re-read and its writes. The locked commit's
// writes are guarded by the rows as read, so it then loses the race
// (protocol.ErrConflict) instead of overwriting the renewal: otherwise the
// renewed holder and the locked commit's new holder would both hold the id.
func TestLockedWriteGuardedAgainstOneSlotCommit(t *testing.T) {
	forEach(t, func(t *testing.T, dsn string) {
		w, _ := newTable(t, dsn)
		ctx := ctx10(t)
		if _, err := w.Acquire(ctx, req("a", 4)); err != nil {
			t.Fatal(err)
		}
		s := store{w}
		st, err := s.Read(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		slots := func(change func(map[int64]protocol.Slot)) protocol.State {
			n := st
			n.Slots = maps.Clone(st.Slots)
			change(n.Slots)
			return n
		}
		renewed := slots(func(m map[int64]protocol.Slot) { a := m[0]; a.ExpiresMs += 60_000; m[0] = a })
		// Two slots change: a locked commit, which gives worker 0 to b.
		taken := slots(func(m map[int64]protocol.Slot) {
			m[0] = protocol.Slot{Holder: "b", ExpiresMs: st.Now.UnixMilli() + 60_000, HighMs: m[0].HighMs}
			m[1] = protocol.Slot{HighMs: 1}
		})
		var renewErr error
		w.testHookCompared = func() { renewErr = s.Commit(ctx, st, renewed) }
		err = s.Commit(ctx, st, taken)
		w.testHookCompared = nil
		if renewErr != nil {
			t.Fatalf("the one-slot commit between the locked commit's read and write: %v", renewErr)
		}
		if !errors.Is(err, protocol.ErrConflict) {
			t.Fatalf("the locked commit after a renewal changed its slot: %v, want ErrConflict", err)
		}
		after, err := s.Read(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		if got := after.Slots[0]; got != renewed.Slots[0] {
			t.Fatalf("worker 0 after both commits: %+v, want the renewal %+v", got, renewed.Slots[0])
		}
		if _, ok := after.Slots[1]; ok {
			t.Fatalf("the refused locked commit wrote worker 1: %+v", after.Slots[1])
		}
	})
}
