package datadir

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// create is an open function that creates the file, as a store does.
func create(path string) func() error {
	return func() error {
		if _, err := os.Stat(path); err == nil {
			return nil
		}
		return os.WriteFile(path, []byte("state"), 0o600)
	}
}

func mustOpen(t *testing.T, path string) *Dir {
	t.Helper()
	d, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func marker(t *testing.T, d *Dir) Marker {
	t.Helper()
	m, ok, err := d.Read()
	if err != nil || !ok {
		t.Fatalf("Read = %+v, %v, %v; want a marker", m, ok, err)
	}
	return m
}

func TestUseRecordsAndRefusesMissing(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	d := mustOpen(t, dir)
	d.now = func() time.Time { return time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC) }
	w := filepath.Join(dir, "workers.db")
	if err := d.Use("workers.db", Workers, create(w)); err != nil {
		t.Fatal(err)
	}
	if err := d.Use("workers.db", Segments, create(w)); err != nil { // one file, both kinds
		t.Fatal(err)
	}
	f, ok := marker(t, d).File("workers.db")
	if !ok || f.Adopted || strings.Join(f.Kinds, ",") != "workers,segments" || !f.Created.Equal(d.now()) {
		t.Fatalf("marker entry %+v, %v", f, ok)
	}
	// Used again: nothing changes.
	before, _ := os.ReadFile(filepath.Join(dir, MarkerName))
	if err := d.Use("workers.db", Workers, create(w)); err != nil {
		t.Fatal(err)
	}
	if after, _ := os.ReadFile(filepath.Join(dir, MarkerName)); string(after) != string(before) {
		t.Fatalf("the marker was rewritten without a change:\n%s\n%s", before, after)
	}

	os.Remove(w)
	called := false
	err := d.Use("workers.db", Workers, func() error { called = true; return nil })
	if !errors.Is(err, ErrMissing) || called {
		t.Fatalf("Use of a listed file that is gone: %v (open called: %v), want ErrMissing without opening", err, called)
	}
	for _, want := range []string{w + " was created on 2026-11-20 12:00:00 UTC and is gone", "could reissue IDs",
		"high-water marks", "next ID", "flakeid recover --data-dir " + dir, "--tag-floor"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %q:\n%v", want, err)
		}
	}
	if n := strings.Count(err.Error(), "\n"); n > 3 {
		t.Errorf("error of %d lines", n+1)
	}
	if _, err := os.Stat(w); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("the refused file was re-created")
	}
}

// TestUseAdoptsWithoutMarker: files of a data directory without a marker
// (an older flakeid) are adopted, and from then on remembered.
func TestUseAdoptsWithoutMarker(t *testing.T) {
	dir := t.TempDir()
	s := filepath.Join(dir, "segments.db")
	os.WriteFile(s, []byte("old"), 0o600)
	d := mustOpen(t, dir)
	if err := d.Use("segments.db", Segments, create(s)); err != nil {
		t.Fatal(err)
	}
	if f, ok := marker(t, d).File("segments.db"); !ok || !f.Adopted {
		t.Fatalf("entry %+v, %v; want adopted", f, ok)
	}
	os.Remove(s)
	err := d.Use("segments.db", Segments, create(s))
	if !errors.Is(err, ErrMissing) || !strings.Contains(err.Error(), "was found on") {
		t.Fatalf("Use after the adopted file was lost: %v", err)
	}
}

// TestUseOpenFails: a store that refuses its file is not recorded.
func TestUseOpenFails(t *testing.T) {
	d := mustOpen(t, t.TempDir())
	bad := errors.New("damaged")
	if err := d.Use("workers.db", Workers, func() error { return bad }); err != bad {
		t.Fatalf("Use = %v, want the store's error", err)
	}
	if _, ok, err := d.Read(); ok || err != nil {
		t.Fatalf("a marker was written for a file that failed to open: %v, %v", ok, err)
	}
}

func TestUnreadableMarker(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, MarkerName), []byte("{not json"), 0o600)
	d := mustOpen(t, dir)
	err := d.Use("workers.db", Workers, create(filepath.Join(dir, "workers.db")))
	if !errors.Is(err, ErrMarker) || !strings.Contains(err.Error(), "flakeid recover --data-dir "+dir) {
		t.Fatalf("Use with an unreadable marker: %v", err)
	}
	aside, err := d.ResetMarker()
	if err != nil || !strings.HasPrefix(aside, MarkerName+".damaged-") {
		t.Fatalf("ResetMarker = %q, %v", aside, err)
	}
	if err := d.Use("workers.db", Workers, create(filepath.Join(dir, "workers.db"))); err != nil {
		t.Fatal(err)
	}
}

func TestLocks(t *testing.T) {
	dir := t.TempDir()
	a, b := mustOpen(t, dir), mustOpen(t, dir) // users share the directory
	if _, err := Lock(dir); !errors.Is(err, ErrInUse) || !strings.Contains(err.Error(), "stop every one first") {
		t.Fatalf("Lock of a directory in use: %v, want ErrInUse", err)
	}
	a.Close()
	b.Close()
	r, err := Lock(dir)
	if err != nil {
		t.Fatalf("Lock after the users closed: %v", err)
	}
	if _, err := Open(dir); !errors.Is(err, ErrInUse) || !strings.Contains(err.Error(), "is being recovered") {
		t.Fatalf("Open during a recovery: %v, want ErrInUse", err)
	}
	r.Close()
	mustOpen(t, dir)
	if _, err := Lock(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("Lock of a missing directory succeeded")
	}
}

// TestConcurrentUse: processes (here goroutines, each with its own lock
// files) adding different files at once lose none of them.
func TestConcurrentUse(t *testing.T) {
	dir := t.TempDir()
	names := []string{"a.db", "b.db", "c.db", "d.db", "e.db", "f.db", "g.db", "h.db"}
	var wg sync.WaitGroup
	for _, n := range names {
		wg.Go(func() {
			d, err := Open(dir)
			if err != nil {
				t.Error(err)
				return
			}
			defer d.Close()
			if err := d.Use(n, Segments, create(filepath.Join(dir, n))); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	m := marker(t, mustOpen(t, dir))
	for _, n := range names {
		if _, ok := m.File(n); !ok {
			t.Errorf("the marker lost %s: %+v", n, m.Files)
		}
	}
}

func TestMoveAsideAndRecovered(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "workers.db"), []byte("x"), 0o600)
	d, err := Lock(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	d.now = func() time.Time { return time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC) }
	aside, err := d.MoveAside("workers.db")
	if err != nil || aside != "workers.db.damaged-20261120T120000Z" {
		t.Fatalf("MoveAside = %q, %v", aside, err)
	}
	os.WriteFile(filepath.Join(dir, "workers.db"), []byte("y"), 0o600)
	aside2, err := d.MoveAside("workers.db")
	if err != nil || aside2 != aside+"-1" {
		t.Fatalf("second MoveAside = %q, %v", aside2, err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, aside)); string(b) != "x" {
		t.Fatalf("the first file moved aside holds %q", b)
	}
	r := Recovery{At: d.now(), Found: "0 bytes", Aside: aside2, Floor: "2026-11-20T12:00:04Z"}
	if err := d.Recovered("workers.db", []string{Workers}, r); err != nil {
		t.Fatal(err)
	}
	f, ok := marker(t, d).File("workers.db")
	if !ok || f.Recovered == nil || *f.Recovered != r || !f.Created.Equal(r.At) {
		t.Fatalf("entry after recovery: %+v", f)
	}
	if err := d.Adopt("segments.db", []string{Segments}); err != nil {
		t.Fatal(err)
	}
	if f, ok := marker(t, d).File("segments.db"); !ok || !f.Adopted {
		t.Fatalf("adopted entry %+v, %v", f, ok)
	}
}
