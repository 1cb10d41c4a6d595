package testenv

import (
	"os"
	"testing"
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
