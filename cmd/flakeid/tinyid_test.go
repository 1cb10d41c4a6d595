package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/flakeid/flakeid/backend/sqldb"
	"github.com/flakeid/flakeid/internal/testenv"
)

// A store on Tinyid's tables (?format=tinyid) on MariaDB: tags made with a
// delta and remainder list them, and `serve` answers Tinyid's paths with
// only those IDs, to a token of Tinyid's tiny_id_token.
func TestTinyidCLI(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	dsn := testenv.MySQL().Require(t)
	store := sqlURL(t, "mysql", dsn, "") + "&format=tinyid"
	table := store[strings.Index(store, "table=")+len("table=") : strings.Index(store, "&format")]
	t.Cleanup(func() { dropTable(dsn, "mysql", table+"_description") })
	data := t.TempDir()
	cli := func(a ...string) result { return runCLI(t, append(a, "--data-dir", data, "--store", store)...) }
	mustSucceed(t, cli("tags", "create", "odd", "--step", "100", "--delta", "2", "--remainder", "1"))
	mustSucceed(t, cli("tags", "create", "plain", "--step", "10", "--start", "500"))
	r := cli("tags", "ls")
	mustSucceed(t, r)
	if !strings.Contains(r.stdout, "IDs ≡ 1 (mod 2)") || !strings.Contains(r.stdout, "500") {
		t.Fatalf("tags ls:\n%s", r.stdout)
	}
	mustFail(t, cli("tags", "create", "bad", "--delta", "2", "--remainder", "2"), 1, "remainder 2")
	fileStore := t.TempDir() // segments.db records a share too
	mustSucceed(t, runCLI(t, "tags", "create", "odd", "--delta", "2", "--data-dir", fileStore))
	if r := runCLI(t, "tags", "ls", "--data-dir", fileStore); !strings.Contains(r.stdout, "IDs ≡ 0 (mod 2)") {
		t.Fatalf("tags ls of segments.db:\n%s", r.stdout)
	}

	db, _, err := sqldb.OpenDB(dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	token := randomName("tok_")
	if _, err := db.Exec("INSERT INTO tiny_id_token (token, biz_type, remark) VALUES (?, 'odd', 'test')", token); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Exec("DELETE FROM tiny_id_token WHERE token = ?", token) })

	p, url := startServe(t, proofBin.get(t), "--data-dir", data, "--store", store)
	defer p.kill()
	var ans struct {
		Data    []int64
		Code    int
		Message string
	}
	code, body := get(t, url+"/tinyid/id/nextId?bizType=odd&batchSize=5&token="+token)
	if code != 200 || json.Unmarshal([]byte(body), &ans) != nil || ans.Code != 200 || len(ans.Data) != 5 {
		t.Fatalf("nextId: %d %s", code, body)
	}
	for _, id := range ans.Data {
		if id%2 != 1 {
			t.Fatalf("nextId of a tag with delta 2, remainder 1: %v", ans.Data)
		}
	}
	for _, q := range []string{"bizType=odd", "bizType=plain&token=" + token, "bizType=odd&token=wrong"} {
		code, body = get(t, url+"/tinyid/id/nextId?"+q)
		if code != 200 || json.Unmarshal([]byte(body), &ans) != nil || ans.Code != 5 {
			t.Fatalf("nextId?%s: %d %s, want Tinyid's token error", q, code, body)
		}
	}
	if code, body := get(t, url+"/tinyid/id/nextSegmentIdSimple?bizType=odd&token="+token); code != 200 || len(strings.Split(body, ",")) != 5 || !strings.HasSuffix(body, ",2,1") {
		t.Fatalf("nextSegmentIdSimple: %d %q", code, body)
	}
}
