package bolt

import (
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/flakeid/flakeid/internal/datadir"
	"github.com/flakeid/flakeid/segment"
	"github.com/flakeid/flakeid/worker"
)

// fileURL is the file URL of path.
func fileURL(path string) *url.URL { return &url.URL{Scheme: "file", Path: path} }

// openW opens the coordinator of path through its URL, closed when the test
// ends.
func openW(t testing.TB, path string) *Workers {
	t.Helper()
	w, err := OpenWorkers(t.Context(), fileURL(path))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

// openS opens the segment store of path through its URL, closed when the
// test ends.
func openS(t testing.TB, path string) *Segments {
	t.Helper()
	s, err := OpenSegments(t.Context(), fileURL(path))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestFilePath(t *testing.T) {
	for raw, want := range map[string]string{
		"file:///var/lib/flakeid/workers.db":          "/var/lib/flakeid/workers.db",
		"file://localhost/var/lib/flakeid/workers.db": "/var/lib/flakeid/workers.db",
		"file://state/workers.db":                     "state/workers.db",
		"file://workers.db":                           "workers.db",
		"FILE:///x.db":                                "/x.db",
	} {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := filePath(u); err != nil || got != want {
			t.Errorf("filePath(%s) = %q, %v; want %q", raw, got, err, want)
		}
	}
	for raw, want := range map[string]string{
		"file://":          "no file path",
		"file:":            "no file path",
		"file://localhost": "no file path",
		"file:relative.db": "no file path",
		"http://host/x.db": `scheme "http", want file`,
		"postgres://h/db":  `scheme "postgres", want file`,
		"workers.db":       `scheme "", want file`,
		// A file URL takes no parameter: one is a mistake, never ignored.
		"file:///x.db?ignored=1": `unknown parameter "ignored" (known: none)`,
	} {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		for name, open := range map[string]func() error{
			"OpenWorkers":  func() error { _, err := OpenWorkers(t.Context(), u); return err },
			"OpenSegments": func() error { _, err := OpenSegments(t.Context(), u); return err },
		} {
			err := open()
			if err == nil || err.Error() != want {
				t.Errorf("%s(%s): %v, want the error %q", name, raw, err, want)
			}
		}
	}
	if _, err := OpenWorkers(t.Context(), nil); err == nil || err.Error() != "no URL" {
		t.Errorf("OpenWorkers(nil): %v, want the error \"no URL\"", err)
	}
}

// TestOpenRelative: file://relative/path is relative to the working
// directory, the directory created when missing.
func TestOpenRelative(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	u, err := url.Parse("file://state/workers.db")
	if err != nil {
		t.Fatal(err)
	}
	w, err := OpenWorkers(t.Context(), u)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := w.Acquire(t.Context(), worker.Request{Workers: 2, Owner: "a", TTL: time.Minute, Reserve: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if err := CheckFile(t.Context(), filepath.Join(dir, "state", "workers.db")); err != nil {
		t.Fatalf("the file at the relative path: %v", err)
	}
}

// markerKinds is what the marker of dir lists for name (nil: not listed).
func markerKinds(t *testing.T, dir, name string) []string {
	t.Helper()
	d, err := datadir.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	m, _, err := d.Read()
	if err != nil {
		t.Fatal(err)
	}
	f, ok := m.File(name)
	if !ok {
		return nil
	}
	return f.Kinds
}

// TestOpenThroughDataDir: the openers record their files in the data
// directory, keep it locked until Close, and refuse a file it remembers
// that is gone; after Close a store refuses every call.
func TestOpenThroughDataDir(t *testing.T) {
	dir := t.TempDir()
	wpath, spath := filepath.Join(dir, "workers.db"), filepath.Join(dir, "segments.db")
	w, err := OpenWorkers(t.Context(), fileURL(wpath))
	if err != nil {
		t.Fatal(err)
	}
	s, err := OpenSegments(t.Context(), fileURL(spath))
	if err != nil {
		t.Fatal(err)
	}
	if got := markerKinds(t, dir, "workers.db"); !slices.Equal(got, []string{datadir.Workers}) {
		t.Errorf("the marker lists workers.db as %v", got)
	}
	if got := markerKinds(t, dir, "segments.db"); !slices.Equal(got, []string{datadir.Segments}) {
		t.Errorf("the marker lists segments.db as %v", got)
	}
	if _, err := w.Acquire(t.Context(), worker.Request{Workers: 2, Owner: "a", TTL: time.Minute, Reserve: time.Now()}); err != nil {
		t.Fatal(err)
	}
	create(t, s, segment.Tag{Name: "t", Step: 10})

	// In use: a recovery cannot lock the directory until both are closed.
	if d, err := datadir.Lock(dir); !errors.Is(err, datadir.ErrInUse) {
		if err == nil {
			d.Close()
		}
		t.Fatalf("Lock with both stores open: %v, want ErrInUse", err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if d, err := datadir.Lock(dir); !errors.Is(err, datadir.ErrInUse) {
		if err == nil {
			d.Close()
		}
		t.Fatalf("Lock with the segment store open: %v, want ErrInUse", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	d, err := datadir.Lock(dir)
	if err != nil {
		t.Fatalf("Lock after both were closed: %v", err)
	}
	d.Close()

	// Closed: every call fails, a second Close does not.
	if _, err := w.List(t.Context(), 0); !errors.Is(err, worker.ErrUnavailable) || !strings.Contains(err.Error(), "closed") {
		t.Errorf("List after Close: %v, want ErrUnavailable saying closed", err)
	}
	if _, err := w.Acquire(t.Context(), worker.Request{Workers: 2, Owner: "b", TTL: time.Minute, Reserve: time.Now()}); !errors.Is(err, worker.ErrUnavailable) {
		t.Errorf("Acquire after Close: %v, want ErrUnavailable", err)
	}
	for op, err := range everyOp(t.Context(), s) {
		if !errors.Is(err, segment.ErrUnavailable) || !strings.Contains(err.Error(), "closed") {
			t.Errorf("%s after Close: %v, want ErrUnavailable saying closed", op, err)
		}
	}
	if err := w.Close(); err != nil {
		t.Errorf("second Close of the coordinator: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close of the segment store: %v", err)
	}

	// Gone: refused, not re-created.
	for _, p := range []string{wpath, spath} {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := OpenWorkers(t.Context(), fileURL(wpath)); !errors.Is(err, datadir.ErrMissing) {
		t.Errorf("OpenWorkers of a remembered file that is gone: %v, want ErrMissing", err)
	}
	if _, err := OpenSegments(t.Context(), fileURL(spath)); !errors.Is(err, datadir.ErrMissing) {
		t.Errorf("OpenSegments of a remembered file that is gone: %v, want ErrMissing", err)
	}
	for _, p := range []string{wpath, spath} {
		if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s was re-created: %v", p, err)
		}
	}
	// The refusals left the directory unlocked.
	d, err = datadir.Lock(dir)
	if err != nil {
		t.Fatalf("Lock after the refusals: %v", err)
	}
	d.Close()
}

// TestOpenForRecovery: while a recovery holds the directory exclusively, the
// ordinary openers are refused and the recovery's open the files, creating
// them, without the marker; their Close leaves the recovery's lock alone.
func TestOpenForRecovery(t *testing.T) {
	dir := t.TempDir()
	wpath, spath := filepath.Join(dir, "workers.db"), filepath.Join(dir, "segments.db")
	openW(t, wpath).Close()
	d, err := datadir.Lock(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	if _, err := OpenWorkers(t.Context(), fileURL(wpath)); !errors.Is(err, datadir.ErrInUse) {
		t.Fatalf("OpenWorkers during a recovery: %v, want ErrInUse", err)
	}
	if _, err := OpenSegments(t.Context(), fileURL(spath)); !errors.Is(err, datadir.ErrInUse) {
		t.Fatalf("OpenSegments during a recovery: %v, want ErrInUse", err)
	}
	if _, err := d.MoveAside("workers.db"); err != nil {
		t.Fatal(err)
	}
	w, err := OpenWorkersForRecovery(t.Context(), d, "workers.db")
	if err != nil {
		t.Fatal(err)
	}
	floor := time.Now().Add(time.Hour)
	if err := w.RaiseFloor(t.Context(), floor); err != nil {
		t.Fatal(err)
	}
	s, err := OpenSegmentsForRecovery(t.Context(), d, "segments.db")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.RaiseFloor(t.Context(), 1000); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := datadir.Open(dir); !errors.Is(err, datadir.ErrInUse) {
		t.Fatalf("Open after the recovery's stores were closed: %v, want ErrInUse (the recovery still holds the directory)", err)
	}
	d.Close()
	// The marker is the recovery's to write (datadir.Dir.Recovered).
	if got := markerKinds(t, dir, "segments.db"); got != nil {
		t.Errorf("the recovery's open recorded segments.db in the marker as %v", got)
	}
	if err := CheckFile(t.Context(), wpath); err != nil {
		t.Errorf("the re-created workers.db: %v", err)
	}
}

// TestCloseWaits: Close waits for the operations in progress, keeping the
// directory locked until they end.
func TestCloseWaits(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenSegments(t.Context(), fileURL(filepath.Join(dir, "segments.db")))
	if err != nil {
		t.Fatal(err)
	}
	inside, leave := make(chan struct{}), make(chan struct{})
	var once sync.Once
	release := func() { once.Do(func() { close(leave) }) }
	defer release()
	done := make(chan error, 1)
	go func() {
		done <- s.update(t.Context(), func(*bbolt.Tx) error {
			close(inside)
			<-leave
			return nil
		})
	}()
	<-inside
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) during a transaction", err)
	case <-time.After(100 * time.Millisecond):
	}
	if d, err := datadir.Lock(dir); !errors.Is(err, datadir.ErrInUse) {
		if err == nil {
			d.Close()
		}
		t.Fatalf("Lock while Close waits: %v, want ErrInUse", err)
	}
	release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	d, err := datadir.Lock(dir)
	if err != nil {
		t.Fatalf("Lock after Close: %v", err)
	}
	d.Close()
}

// TestRecoveryOpenersRefuse checks the recovery openers' arguments: no
// directory, or a name that is not a file name in it, is refused before
// anything is opened or created.
func TestRecoveryOpenersRefuse(t *testing.T) {
	d, err := datadir.Lock(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for _, tc := range []struct {
		d    *datadir.Dir
		name string
		want string
	}{
		{nil, "workers.db", "no data directory"},
		{d, "", `"" is not a file name`},
		{d, "../workers.db", `"../workers.db" is not a file name`},
		{d, "sub/workers.db", `"sub/workers.db" is not a file name`},
	} {
		if w, err := OpenWorkersForRecovery(t.Context(), tc.d, tc.name); err == nil || !strings.Contains(err.Error(), tc.want) {
			if err == nil {
				w.Close()
			}
			t.Errorf("OpenWorkersForRecovery(%q) = %v, want an error saying %s", tc.name, err, tc.want)
		}
		if s, err := OpenSegmentsForRecovery(t.Context(), tc.d, tc.name); err == nil || !strings.Contains(err.Error(), tc.want) {
			if err == nil {
				s.Close()
			}
			t.Errorf("OpenSegmentsForRecovery(%q) = %v, want an error saying %s", tc.name, err, tc.want)
		}
	}
}
