package testenv

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"strings"
	"testing"
	"time"
)

// OwnDatabase makes a database of the test's own on the server of dsn — on
// MySQL (a DSN "user@tcp(host:port)/db…") a database, on PostgreSQL (a URL
// DSN) a schema that the returned DSN's search_path creates every table in
// — through admin, a handle on dsn that stays open until the test's
// cleanups run; it is dropped with its tables when the test ends. It
// returns the DSN that reaches it: a coordinator of its own, whose one
// datacenter registry the test shares with nobody (the shared database's
// registry holds other tests' claims, and those of earlier runs).
func OwnDatabase(t testing.TB, admin *sql.DB, dsn string) string {
	t.Helper()
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := "flakeid_test_" + hex.EncodeToString(b[:])
	mysql := strings.Contains(dsn, "@tcp(")
	create, drop := "CREATE SCHEMA "+name, "DROP SCHEMA IF EXISTS "+name+" CASCADE"
	if mysql {
		create, drop = "CREATE DATABASE "+name, "DROP DATABASE IF EXISTS "+name
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if _, err := admin.ExecContext(ctx, create); err != nil {
		t.Fatalf("%s: %v", create, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := admin.ExecContext(ctx, drop); err != nil {
			t.Errorf("%s: %v", drop, err)
		}
	})
	if !mysql {
		sep := "?"
		if strings.Contains(dsn, "?") {
			sep = "&"
		}
		return dsn + sep + "search_path=" + name
	}
	// user@tcp(host:port)/db?params: the database is between ")/" and "?".
	head, rest, _ := strings.Cut(dsn, ")/")
	_, params, hasParams := strings.Cut(rest, "?")
	if hasParams {
		return head + ")/" + name + "?" + params
	}
	return head + ")/" + name
}
