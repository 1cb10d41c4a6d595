package bolt

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/flakeid/flakeid/segment"
	"github.com/flakeid/flakeid/worker"
)

// The damage tests run in the test process on purpose: a SIGBUS or a bbolt
// panic would kill the test binary.

// store is one kind of state file: how to make one with some records, and
// how to open it.
type store struct {
	name string
	make func(t *testing.T, path string)
	open func(ctx context.Context, path string) error
}

func stores() []store {
	return []store{
		{"workers", func(t *testing.T, path string) {
			w, err := OpenWorkers(t.Context(), fileURL(path))
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			for i := range 3 {
				if _, err := w.Acquire(t.Context(), worker.Request{Workers: 8, Owner: fmt.Sprint("o", i), TTL: time.Minute, Reserve: time.Now()}); err != nil {
					t.Fatal(err)
				}
			}
			fill(t, path)
		}, func(ctx context.Context, path string) error {
			w, err := OpenWorkers(ctx, fileURL(path))
			if err == nil {
				w.Close()
			}
			return err
		}},
		{"segments", func(t *testing.T, path string) {
			s, err := OpenSegments(t.Context(), fileURL(path))
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if err := s.Create(t.Context(), segment.Tag{Name: "orders", Step: 10}); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Fetch(t.Context(), "orders", 10); err != nil {
				t.Fatal(err)
			}
			fill(t, path)
		}, func(ctx context.Context, path string) error {
			s, err := OpenSegments(ctx, fileURL(path))
			if err == nil {
				s.Close()
			}
			return err
		}},
	}
}

// fill adds a bucket of 256 KiB of records, so that the file has many pages
// and half of it misses some that its header counts.
func fill(t *testing.T, path string) {
	t.Helper()
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(tx *bbolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists([]byte("filler"))
		if err != nil {
			return err
		}
		v := make([]byte, 256)
		for i := range 1024 {
			if err := b.Put(fmt.Appendf(nil, "k%05d", i), v); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// mustBeDamaged fails unless err wraps ErrDamaged and says what was found,
// the path, the risk and the way to recover, in a few lines.
func mustBeDamaged(t *testing.T, err error, path, found string) {
	t.Helper()
	if !errors.Is(err, ErrDamaged) {
		t.Fatalf("error %v, want ErrDamaged", err)
	}
	msg := err.Error()
	for _, want := range []string{path, found, "could reissue IDs", "worker high-water marks and segment positions",
		"flakeid recover --data-dir " + filepath.Dir(path)} {
		if !strings.Contains(msg, want) {
			t.Errorf("error does not say %q:\n%s", want, msg)
		}
	}
	if n := strings.Count(msg, "\n"); n > 4 {
		t.Errorf("error of %d lines:\n%s", n+1, msg)
	}
}

func TestDamagedFilesRefused(t *testing.T) {
	for _, st := range stores() {
		for _, tc := range []struct {
			name   string
			damage func(t *testing.T, path string)
			found  string
		}{
			{"empty", func(t *testing.T, path string) { truncate(t, path, 0) }, "0 bytes"},
			{"half", func(t *testing.T, path string) { truncate(t, path, size(t, path)/2) }, "its header describes"},
			{"a few bytes", func(t *testing.T, path string) { truncate(t, path, 100) }, "100 bytes of the"},
			{"garbage", func(t *testing.T, path string) {
				b := make([]byte, size(t, path))
				rand.Read(b)
				if err := os.WriteFile(path, b, 0o600); err != nil {
					t.Fatal(err)
				}
			}, "no valid meta page"},
			{"garbage pages", func(t *testing.T, path string) {
				// Keep the meta pages; overwrite every other page.
				f, err := os.OpenFile(path, os.O_RDWR, 0)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				ps := int64(os.Getpagesize())
				b := make([]byte, size(t, path)-2*ps)
				rand.Read(b)
				if _, err := f.WriteAt(b, 2*ps); err != nil {
					t.Fatal(err)
				}
			}, ""},
			{"garbage root page", func(t *testing.T, path string) {
				h, err := checkHeader(path)
				if err != nil {
					t.Fatal(err)
				}
				f, err := os.OpenFile(path, os.O_RDWR, 0)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				b := make([]byte, h.meta.pageSize)
				rand.Read(b)
				if _, err := f.WriteAt(b, int64(h.meta.root)*int64(h.meta.pageSize)); err != nil {
					t.Fatal(err)
				}
			}, ""},
		} {
			t.Run(st.name+"/"+tc.name, func(t *testing.T) {
				path := filepath.Join(t.TempDir(), st.name+".db")
				st.make(t, path)
				tc.damage(t, path)
				before := size(t, path)
				err := st.open(t.Context(), path)
				mustBeDamaged(t, err, path, tc.found)
				if errors.Is(err, segment.ErrUnavailable) != (st.name == "segments") {
					t.Errorf("error %v: a damaged segment store is unavailable (segment.ErrUnavailable), a damaged coordinator is not (worker.ErrUnavailable would be retried)", err)
				}
				mustBeDamaged(t, CheckFile(t.Context(), path), path, tc.found)
				if got := size(t, path); got != before {
					t.Fatalf("the refused file changed size: %d, was %d", got, before)
				}
			})
		}
	}
}

// TestDamagedWhileInUse: a file damaged under a store that opened it is an
// error at the next operation, not a crash, and never re-created.
func TestDamagedWhileInUse(t *testing.T) {
	dir := t.TempDir()
	wpath, spath := filepath.Join(dir, "workers.db"), filepath.Join(dir, "segments.db")
	w := openW(t, wpath)
	s := openS(t, spath)
	c, err := w.Acquire(t.Context(), worker.Request{Workers: 4, Owner: "a", TTL: time.Minute, Reserve: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Create(t.Context(), segment.Tag{Name: "t", Step: 10}); err != nil {
		t.Fatal(err)
	}
	fill(t, wpath)
	fill(t, spath)
	truncate(t, wpath, size(t, wpath)/2)
	truncate(t, spath, size(t, spath)/2)
	if err := c.Renew(t.Context(), time.Minute, time.Now()); !errors.Is(err, ErrDamaged) || errors.Is(err, worker.ErrReset) {
		t.Fatalf("Renew on a file cut in half: %v, want ErrDamaged", err)
	}
	if _, err := s.Fetch(t.Context(), "t", 1); !errors.Is(err, ErrDamaged) || !errors.Is(err, segment.ErrUnavailable) {
		t.Fatalf("Fetch on a file cut in half: %v, want ErrDamaged and ErrUnavailable", err)
	}
	os.Remove(wpath)
	if _, err := w.List(t.Context(), 0); !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), "is gone") {
		t.Fatalf("List with the file deleted: %v, want ErrDamaged saying it is gone", err)
	}
	if _, err := os.Stat(wpath); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the coordinator re-created its deleted file: %v", err)
	}
}

// TestCreatedComplete: a new file is never empty at its path, and no
// temporary file is left (beside the files, the data directory's marker and
// its lock file).
func TestCreatedComplete(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "workers.db")
	openW(t, path)
	openS(t, filepath.Join(dir, "segments.db"))
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if strings.Join(names, " ") != "flakeid-state.json flakeid-state.lock segments.db workers.db" {
		t.Fatalf("the directory holds %v", names)
	}
	if err := CheckFile(t.Context(), path); err != nil {
		t.Fatal(err)
	}
}

func TestHumanSize(t *testing.T) {
	for n, want := range map[int64]string{0: "0 bytes", 1000: "1000 bytes", 16 << 10: "16 KiB", 5 << 19: "2.5 MiB", 4 << 20: "4 MiB"} {
		if got := humanSize(n); got != want {
			t.Errorf("humanSize(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestWorkersRaiseFloor: after RaiseFloor no worker id starts below the
// floor, in a namespace initialised before or after it.
func TestWorkersRaiseFloor(t *testing.T) {
	w := openW(t, filepath.Join(t.TempDir(), "workers.db"))
	req := worker.Request{Workers: 4, Owner: "a", TTL: time.Minute, Reserve: time.Now(), Contract: "c"}
	if _, err := w.Acquire(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	floor := time.Now().Add(time.Hour).Truncate(time.Millisecond)
	if err := w.RaiseFloor(t.Context(), floor); err != nil {
		t.Fatal(err)
	}
	for _, dc := range []int64{0, 1} { // 0 existed, 1 is new
		req.Datacenter, req.Owner = dc, fmt.Sprint("b", dc)
		c, err := w.Acquire(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		if c.Previous().Before(floor) {
			t.Fatalf("datacenter %d: a holder starts at %v, before the floor %v", dc, c.Previous(), floor)
		}
		ns, _, _ := w.Namespace(t.Context(), dc)
		if ns.Floor.Before(floor) {
			t.Fatalf("datacenter %d: namespace floor %v, below %v", dc, ns.Floor, floor)
		}
	}
}

// TestSegmentsRaiseFloor: after RaiseFloor every tag, old or created later,
// hands out IDs from the floor on.
func TestSegmentsRaiseFloor(t *testing.T) {
	s := openS(t, filepath.Join(t.TempDir(), "segments.db"))
	if err := s.Create(t.Context(), segment.Tag{Name: "old", Step: 10}); err != nil {
		t.Fatal(err)
	}
	if err := s.RaiseFloor(t.Context(), 5000); err != nil {
		t.Fatal(err)
	}
	if err := s.Create(t.Context(), segment.Tag{Name: "new", Step: 10}); err != nil {
		t.Fatal(err)
	}
	if err := s.Create(t.Context(), segment.Tag{Name: "high", Step: 10, MaxID: 9000}); err != nil {
		t.Fatal(err)
	}
	for tag, want := range map[string]int64{"old": 5000, "new": 5000, "high": 9000} {
		r, err := s.Fetch(t.Context(), tag, 1)
		if err != nil || r.Start != want {
			t.Fatalf("first range of %s: %+v, %v; want it to start at %d", tag, r, err, want)
		}
	}
}

func truncate(t *testing.T, path string, n int64) {
	t.Helper()
	if err := os.Truncate(path, n); err != nil {
		t.Fatal(err)
	}
}

func size(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}
