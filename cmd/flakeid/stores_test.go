package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flakeid/flakeid/backend/sqldb"
	"github.com/flakeid/flakeid/internal/faultnet"
	"github.com/flakeid/flakeid/internal/testenv"
)

// Several databases per tag from the command line (Flickr's ticket servers,
// Tinyid's delta and remainder), against real PostgreSQL (a Leaf table,
// whose shares flakeid keeps in flakeid_stride) and real MariaDB (Tinyid's
// table, which has the columns): `tags create` with both stores records
// which serves which remainder; `serve` with the flags in either order
// serves each store's share; with MariaDB stopped for a minute under load,
// IDs keep coming from PostgreSQL, and with it back it serves again; a
// restart with the flags reordered hands out nothing twice; and stores
// whose shares collide or leave IDs unserved are refused at start, naming
// them.
func TestSeveralStoresCLI(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary for over a minute")
	}
	t.Parallel()
	pg, my := testenv.Postgres().Require(t), testenv.MySQL().Require(t)
	proxy, err := faultnet.Listen(testenv.HostPort(my))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	storeA := sqlURL(t, "postgres", pg, "")
	storeB := sqlURL(t, "mysql", my, proxy.Addr()) + "&format=tinyid"
	tableA := storeA[strings.Index(storeA, "table=")+len("table="):]
	tableB := storeB[strings.Index(storeB, "table=")+len("table=") : strings.Index(storeB, "&format")]
	t.Cleanup(func() {
		dropTable(my, "mysql", tableB+"_description")
		if db, _, err := sqldb.OpenDB(pg); err == nil {
			db.Exec("DELETE FROM flakeid_stride WHERE tbl = $1", tableA)
			db.Close()
		}
	})
	data := t.TempDir()
	cli := func(a ...string) result { return runCLI(t, append(a, "--data-dir", data)...) }

	r := cli("tags", "create", "orders", "--step", "40", "--store", storeA, "--store", storeB)
	mustSucceed(t, r)
	for _, want := range []string{"in 2 stores", redactURL(storeA) + ": IDs ≡ 0 (mod 2)", redactURL(storeB) + ": IDs ≡ 1 (mod 2)"} {
		if !strings.Contains(r.stdout, want) {
			t.Fatalf("tags create with two stores: no %q in\n%s", want, r.stdout)
		}
	}
	r = cli("tags", "ls", "--store", storeB, "--store", storeA)
	mustSucceed(t, r)
	if strings.Count(r.stdout, "orders") != 2 || !strings.Contains(r.stdout, "IDs ≡ 1 (mod 2)") || !strings.Contains(r.stdout, "STORE") {
		t.Fatalf("tags ls of two stores:\n%s", r.stdout)
	}

	seen := map[int64]bool{}
	var mu sync.Mutex
	type sample struct {
		at  time.Time
		ids []int64
		err error
	}
	// load asks for IDs without pause until stop, keeping what it got.
	load := func(url string, stop <-chan struct{}) []sample {
		client := &http.Client{Timeout: 10 * time.Second}
		var out []sample
		for {
			select {
			case <-stop:
				return out
			default:
			}
			s := sample{at: time.Now()}
			resp, err := client.Get(url + "/v1/segment/orders/next?count=5")
			if err == nil {
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				var ans struct{ IDs []string }
				if resp.StatusCode != 200 || json.Unmarshal(body, &ans) != nil || len(ans.IDs) != 5 {
					err = fmt.Errorf("%d %s", resp.StatusCode, body)
				}
				for _, v := range ans.IDs {
					id, _ := strconv.ParseInt(v, 10, 64)
					s.ids = append(s.ids, id)
				}
			}
			s.err = err
			mu.Lock()
			for _, id := range s.ids {
				if seen[id] {
					t.Errorf("ID %d handed out twice", id)
				}
				seen[id] = true
			}
			mu.Unlock()
			out = append(out, s)
			time.Sleep(2 * time.Millisecond)
		}
	}
	parity := func(ss []sample, from, to time.Time) (even, odd, failed int) {
		for _, s := range ss {
			if s.at.Before(from) || !s.at.Before(to) {
				continue
			}
			if s.err != nil {
				failed++
			}
			for _, id := range s.ids {
				if id%2 == 0 {
					even++
				} else {
					odd++
				}
			}
		}
		return
	}

	// The flags in the other order than at create: each store still
	// serves its recorded share.
	p, url := startServe(t, proofBin.get(t), "--data-dir", data, "--store", storeB, "--store", storeA, "--segment-duration=-1s")
	stop := make(chan struct{})
	got := make(chan []sample)
	go func() { got <- load(url, stop) }()
	time.Sleep(3 * time.Second)
	down := time.Now()
	proxy.Down() // MariaDB stopped, as far as flakeid can tell
	time.Sleep(time.Minute)
	back := time.Now()
	proxy.Heal()
	time.Sleep(5 * time.Second)
	close(stop)
	ss := <-got
	p.kill()
	if even, odd, failed := parity(ss, time.Time{}, down); even == 0 || odd == 0 || failed > 0 {
		t.Errorf("both stores up: %d even, %d odd IDs, %d requests failed", even, odd, failed)
	}
	even, odd, failed := parity(ss, down.Add(5*time.Second), back)
	if even < 1000 || odd > 0 || failed*100 > even/5 {
		t.Errorf("MariaDB stopped (after its buffered IDs ran out): %d even, %d odd IDs, %d requests failed; want the even IDs of PostgreSQL, with at most 1%% of requests failed", even, odd, failed)
	}
	if even, odd, _ := parity(ss, back.Add(2*time.Second), time.Now()); even == 0 || odd == 0 {
		t.Errorf("MariaDB back: %d even, %d odd IDs; want both stores serving again", even, odd)
	}
	t.Logf("outage: %d IDs from PostgreSQL, %d failed requests, over %v", even, failed, back.Sub(down))

	// Restarted with the flags as at create: nothing twice.
	p, url = startServe(t, proofBin.get(t), "--data-dir", data, "--store", storeA, "--store", storeB, "--segment-duration=-1s")
	stop = make(chan struct{})
	go func() { got <- load(url, stop) }()
	time.Sleep(2 * time.Second)
	close(stop)
	ss = <-got
	p.kill()
	if even, odd, failed := parity(ss, time.Time{}, time.Now()); even == 0 || odd == 0 || failed > 0 {
		t.Errorf("restarted, flags reordered: %d even, %d odd IDs, %d requests failed", even, odd, failed)
	}

	// A third store claiming the odd IDs collides with MariaDB's: refused
	// at start, naming both. A store missing from the list leaves the odd
	// IDs unserved: refused too.
	storeC := "file://" + filepath.Join(t.TempDir(), "c.db")
	mustSucceed(t, cli("tags", "create", "orders", "--delta", "2", "--remainder", "1", "--store", storeC))
	serve := func(stores ...string) result {
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		args := []string{"serve", "--listen", "127.0.0.1:0", "--data-dir", t.TempDir()}
		for _, s := range stores {
			args = append(args, "--store", s)
		}
		return runCLIContext(t, ctx, args...)
	}
	mustFail(t, serve(storeA, storeC, storeB), 1, "nothing is served", `tag "orders"`, redactURL(storeB), redactURL(storeC), "the same IDs")
	mustFail(t, serve(storeA, storeA), 1, "given twice")
	storeD := "file://" + filepath.Join(t.TempDir(), "d.db")
	mustFail(t, serve(storeD, storeA), 1, "no store serves the IDs ≡ 1 (mod 2)")
}
