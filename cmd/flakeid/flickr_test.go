package main

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/flakeid/flakeid/backend/sqldb"
	"github.com/flakeid/flakeid/internal/testenv"
)

// The move from Flickr-style ticket servers (docs/OPERATIONS.md, "From
// Flickr-style ticket servers"), step by step on real MariaDB: two ticket
// databases with auto_increment_increment 2 and offsets 1 and 2 issue
// tickets with Flickr's REPLACE INTO Tickets64; the documented query reads
// each one's increment, offset and next value; `tags create` records the
// same delta and remainders above them, in the ticket databases
// themselves; `serve` with both (in either order) then hands out no ticket
// twice and none at or below what its server issued.
func TestFlickrTicketServers(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	doc, err := os.ReadFile("../../docs/OPERATIONS.md")
	if err != nil || !strings.Contains(string(doc), flickrQuery) {
		t.Fatalf("docs/OPERATIONS.md does not give the query this test runs (%v): %s", err, flickrQuery)
	}
	dsn := testenv.MySQL().Require(t)
	admin, _, err := sqldb.OpenDB(dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	ctx := t.Context()
	base := dsn[:strings.LastIndex(dsn, "/")+1]
	user, rest, _ := strings.Cut(dsn, "@tcp(")
	host, _, _ := strings.Cut(rest, ")/")
	type server struct {
		db       *sql.DB
		url      string
		issued   []int64
		delta    int64
		rem      int64
		next     int64
		maxIssue int64
	}
	var servers []*server
	for offset := 1; offset <= 2; offset++ {
		name := randomName("flakeid_tickets_")
		if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { admin.Exec("DROP DATABASE " + name) })
		db, _, err := sqldb.OpenDB(base + name)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		db.SetMaxOpenConns(1) // one session: the server's auto-increment settings
		// Flickr's ticket server, as its 2010 post describes it (the
		// settings are the server's in production, the session's here).
		for _, q := range []string{
			fmt.Sprintf("SET SESSION auto_increment_increment = 2, auto_increment_offset = %d", offset),
			"CREATE TABLE Tickets64 (id bigint(20) unsigned NOT NULL auto_increment, stub char(1) NOT NULL default '', PRIMARY KEY (id), UNIQUE KEY stub (stub)) ENGINE=InnoDB",
		} {
			if _, err := db.ExecContext(ctx, q); err != nil {
				t.Fatal(err)
			}
		}
		s := &server{db: db, url: "mysql://" + user + "@" + host + "/" + name}
		for range 20 + rand.IntN(80) {
			var id int64
			if _, err := db.ExecContext(ctx, "REPLACE INTO Tickets64 (stub) VALUES ('a')"); err != nil {
				t.Fatal(err)
			}
			if err := db.QueryRowContext(ctx, "SELECT LAST_INSERT_ID()").Scan(&id); err != nil {
				t.Fatal(err)
			}
			s.issued = append(s.issued, id)
			s.maxIssue = max(s.maxIssue, id)
		}
		// The documented query: increment, offset, and the next value.
		if err := db.QueryRowContext(ctx, flickrQuery).Scan(&s.delta, &s.rem, &s.next); err != nil {
			t.Fatal(err)
		}
		s.rem %= s.delta
		servers = append(servers, s)
	}
	data := t.TempDir()
	cli := func(a ...string) result { return runCLI(t, append(a, "--data-dir", data)...) }
	for _, s := range servers {
		mustSucceed(t, cli("tags", "create", "tickets", "--step", "50",
			"--delta", fmt.Sprint(s.delta), "--remainder", fmt.Sprint(s.rem), "--start", fmt.Sprint(s.next), "--store", s.url))
	}
	old := map[int64]bool{}
	for _, s := range servers {
		for _, id := range s.issued {
			old[id] = true
		}
	}
	seen := map[int64]bool{}
	for _, order := range [][]int{{1, 0}, {0, 1}} {
		p, url := startServe(t, proofBin.get(t), "--data-dir", data, "--store", servers[order[0]].url, "--store", servers[order[1]].url)
		for range 40 {
			for _, id := range segmentIDs(t, url, "tickets", 25) {
				if seen[id] || old[id] {
					t.Fatalf("ticket %d handed out twice (by flakeid before: %v; by a ticket server: %v)", id, seen[id], old[id])
				}
				seen[id] = true
				s := servers[0]
				if id%2 != s.rem {
					s = servers[1]
				}
				if id <= s.maxIssue {
					t.Fatalf("ticket %d is not above %d, the last its share's ticket server issued", id, s.maxIssue)
				}
			}
		}
		p.kill()
	}
	odd := 0
	for id := range seen {
		odd += int(id % 2)
	}
	if odd == 0 || odd == len(seen) {
		t.Fatalf("%d of %d tickets odd: both databases should serve", odd, len(seen))
	}
}

// flickrQuery is what docs/OPERATIONS.md has an operator run on each ticket
// server, its writers stopped: increment, offset, and the first ID above
// every ticket it issued (REPLACE INTO keeps one row per stub, holding the
// last ID issued for it).
const flickrQuery = "SELECT @@auto_increment_increment, @@auto_increment_offset, COALESCE(MAX(id), 0) + 1 FROM Tickets64"

// segmentIDs asks a server for n IDs of a segment tag.
func segmentIDs(t *testing.T, url, tag string, n int) []int64 {
	t.Helper()
	code, body := get(t, fmt.Sprintf("%s/v1/segment/%s/next?count=%d", url, tag, n))
	var ans struct{ IDs []string }
	if code != 200 || json.Unmarshal([]byte(body), &ans) != nil || len(ans.IDs) != n {
		t.Fatalf("%d IDs of %s: %d %s", n, tag, code, body)
	}
	ids := make([]int64, n)
	for i, v := range ans.IDs {
		id, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = id
	}
	return ids
}
