package testenv

import (
	"database/sql"
	"os"
	"testing"

	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"
)

func TestHostPort(t *testing.T) {
	for in, want := range map[string]string{
		"127.0.0.1:23790": "127.0.0.1:23790",
		"postgres://postgres@127.0.0.1:5432/test?sslmode=disable": "127.0.0.1:5432",
		"root@tcp(127.0.0.1:3306)/test":                           "127.0.0.1:3306",
		"redis://127.0.0.1:6379/0":                                "127.0.0.1:6379",
	} {
		if got := HostPort(in); got != want {
			t.Errorf("HostPort(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestCommand(t *testing.T) {
	if got := Command(t, os.Args[0], "the test binary runs this test"); got != os.Args[0] {
		t.Fatalf("Command(%q) = %q", os.Args[0], got)
	}
	t.Run("Missing", func(t *testing.T) {
		t.Setenv("CI", "")
		Command(t, "flakeid-no-such-program", "a program that is never installed")
		t.Fatal("Command of a missing program returned")
	})
}

// TestOwnDatabase: the DSN OwnDatabase returns reaches a database (MySQL) or
// schema (PostgreSQL) of the test's own: a table made through it is not in
// the shared database, and the whole is gone after the test.
func TestOwnDatabase(t *testing.T) {
	for _, tc := range []struct {
		svc    Service
		driver string
	}{{Postgres(), "pgx"}, {MySQL(), "mysql"}} {
		t.Run(tc.svc.Name, func(t *testing.T) {
			dsn := tc.svc.Require(t)
			admin, err := sql.Open(tc.driver, dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer admin.Close()
			var own string
			t.Run("inside", func(t *testing.T) {
				own = OwnDatabase(t, admin, dsn)
				db, err := sql.Open(tc.driver, own)
				if err != nil {
					t.Fatal(err)
				}
				defer db.Close()
				if _, err := db.ExecContext(t.Context(), "CREATE TABLE flakeid_own_probe (x INT)"); err != nil {
					t.Fatalf("CREATE TABLE through %s: %v", own, err)
				}
				if _, err := admin.ExecContext(t.Context(), "SELECT x FROM flakeid_own_probe"); err == nil {
					t.Fatalf("the table made through %s is in the shared database", own)
				}
			})
			db, err := sql.Open(tc.driver, own)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if _, err := db.ExecContext(t.Context(), "SELECT x FROM flakeid_own_probe"); err == nil {
				t.Fatalf("the table made through %s outlived the test", own)
			}
		})
	}
}
