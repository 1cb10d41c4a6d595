package bolt

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"
	"go.uber.org/goleak"

	"github.com/flakeid/flakeid/segment"
	"github.com/flakeid/flakeid/segment/segmenttest"
)

// --- the conformance suite ---------------------------------------------------

// segConnector makes per-operation clients of one file, as separate
// processes would.
type segConnector struct{ path string }

func (c segConnector) Connect(t *testing.T) segment.Store {
	t.Helper()
	return openS(t, c.path)
}

// ConnectFaulty's fault holds the file's lock, as a hung process would;
// Reset does nothing, as a per-operation client keeps no connection.
func (c segConnector) ConnectFaulty(t *testing.T) (segment.Store, segmenttest.Fault) {
	f := segLockFault{&lockFault{t: t, path: c.path}}
	t.Cleanup(f.Heal)
	return c.Connect(t), f
}

// Backup copies the file's records; the restore writes the copies back, as
// copying an old file over the store does.
func (c segConnector) Backup(t *testing.T) func() {
	return backupRecords(t, c.Connect(t).(*Segments))
}

// backupRecords copies every record of s's bucket and returns a function
// that writes the copies back.
func backupRecords(t *testing.T, s *Segments) func() {
	t.Helper()
	saved := map[string][]byte{}
	err := s.view(t.Context(), func(tx *bbolt.Tx) error {
		return tx.Bucket([]byte(segmentsBucket)).ForEach(func(k, v []byte) error {
			saved[string(k)] = bytes.Clone(v)
			return nil
		})
	})
	if err != nil {
		t.Fatalf("backup: %v", err)
	}
	return func() {
		err := s.update(t.Context(), func(tx *bbolt.Tx) error {
			b := tx.Bucket([]byte(segmentsBucket))
			for k, v := range saved {
				if err := b.Put([]byte(k), v); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatalf("restore: %v", err)
		}
	}
}

type segLockFault struct{ *lockFault }

func (segLockFault) Reset() {}

func TestSegmentsConformance(t *testing.T) {
	segmenttest.Run(t, segmenttest.Harness{
		Open: func(t *testing.T) segmenttest.Connector {
			return segConnector{path: filepath.Join(t.TempDir(), "segments.db")}
		},
	})
}

// --- helpers -----------------------------------------------------------------

// sameFile returns the path of a new file and a function that opens a new
// store of it each time it is called (each with its own queue).
func sameFile(t *testing.T) (string, func() *Segments) {
	path := filepath.Join(t.TempDir(), "segments.db")
	return path, func() *Segments { return openS(t, path) }
}

func create(t testing.TB, s segment.Store, tag segment.Tag) {
	t.Helper()
	if err := s.Create(context.Background(), tag); err != nil {
		t.Fatalf("Create(%+v): %v", tag, err)
	}
}

// checkContiguous checks that ranges, in any order, tile [from, to).
func checkContiguous(t *testing.T, ranges []segment.Range, from, to int64) {
	t.Helper()
	slices.SortFunc(ranges, func(a, b segment.Range) int {
		switch {
		case a.Start < b.Start:
			return -1
		case a.Start > b.Start:
			return 1
		}
		return 0
	})
	next := from
	for _, r := range ranges {
		if r.Start != next || r.End <= r.Start {
			t.Fatalf("range %+v after %d: ranges overlap or leave a hole", r, next)
		}
		next = r.End
	}
	if next != to {
		t.Fatalf("ranges end at %d, the row at %d", next, to)
	}
}

// --- concurrency -------------------------------------------------------------

// TestSegmentsConcurrentFetches: many goroutines on one store (waiting in its
// queue) and on several stores of one file (serialised by the file lock) get
// disjoint ranges that tile [1, max id).
func TestSegmentsConcurrentFetches(t *testing.T) {
	_, connect := sameFile(t)
	const stores, goroutines, each = 4, 4, 25
	ss := make([]*Segments, stores)
	for i := range ss {
		ss[i] = connect()
	}
	create(t, ss[0], segment.Tag{Name: "hot", Step: 10})
	var mu sync.Mutex
	var ranges []segment.Range
	var wg sync.WaitGroup
	for i, s := range ss {
		for g := range goroutines {
			wg.Go(func() {
				for k := range each {
					r, err := s.Fetch(t.Context(), "hot", int64(1+(i*7+g*3+k)%17))
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					ranges = append(ranges, r)
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	got, err := ss[stores-1].Get(t.Context(), "hot")
	if err != nil {
		t.Fatal(err)
	}
	if len(ranges) != stores*goroutines*each {
		t.Fatalf("%d ranges, want %d", len(ranges), stores*goroutines*each)
	}
	checkContiguous(t, ranges, 1, got.MaxID)
}

// TestSegmentsQueue: the goroutines of one store wait for each other in its
// queue, in memory, not on the file lock; another store of the file is not
// in that queue and waits on the file lock.
func TestSegmentsQueue(t *testing.T) {
	_, connect := sameFile(t)
	s, other := connect(), connect()
	create(t, s, segment.Tag{Name: "t", Step: 10})
	inside, leave := make(chan struct{}), make(chan struct{})
	var once sync.Once
	release := func() { once.Do(func() { close(leave) }) }
	defer release() // before the stores' Close, which waits for the transaction
	done := make(chan error, 1)
	go func() {
		done <- s.update(t.Context(), func(*bbolt.Tx) error {
			close(inside)
			<-leave
			return nil
		})
	}()
	<-inside
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	_, err := s.Fetch(ctx, "t", 1)
	cancel()
	if !errors.Is(err, segment.ErrUnavailable) || !strings.Contains(err.Error(), "this process's turn at the file not had") {
		t.Errorf("Fetch while another goroutine of the store is in a transaction: %v, want a wait in the store's queue", err)
	}
	ctx, cancel = context.WithTimeout(t.Context(), 200*time.Millisecond)
	_, err = other.Fetch(ctx, "t", 1)
	cancel()
	if !errors.Is(err, segment.ErrUnavailable) || !strings.Contains(err.Error(), "the file lock not had") {
		t.Errorf("Fetch of another store while the first is in a transaction: %v, want a wait for the file lock", err)
	}
	release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if r, err := s.Fetch(t.Context(), "t", 1); err != nil || r.Start != 1 {
		t.Fatalf("Fetch after the transaction = %+v, %v; want it to start at 1", r, err)
	}
}

// TestSegmentsFileLockContention: stores that do not share a queue (as in
// separate processes) are serialised by bbolt's file lock.
func TestSegmentsFileLockContention(t *testing.T) {
	path, connect := sameFile(t)
	first := connect()
	create(t, first, segment.Tag{Name: "hot", Step: 10})
	const procs, each = 3, 15
	var mu sync.Mutex
	var ranges []segment.Range
	var wg sync.WaitGroup
	for range procs {
		s := openS(t, path)
		wg.Go(func() {
			for k := range each {
				r, err := s.Fetch(t.Context(), "hot", int64(k+1))
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				ranges = append(ranges, r)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	got, err := first.Get(t.Context(), "hot")
	if err != nil {
		t.Fatal(err)
	}
	checkContiguous(t, ranges, 1, got.MaxID)
}

const childEnv = "FLAKEID_BOLT_SEGMENTS_CHILD"

// TestSegmentsChildProcess is the body of the child processes of
// TestSegmentsProcesses; on its own it does nothing.
func TestSegmentsChildProcess(t *testing.T) {
	spec := os.Getenv(childEnv)
	if spec == "" {
		t.Skip("only run as a child of TestSegmentsProcesses")
	}
	var path string
	var n int
	if _, err := fmt.Sscanf(spec, "%d %s", &n, &path); err != nil {
		t.Fatal(err)
	}
	s, err := OpenSegments(t.Context(), fileURL(path))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for k := range n {
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		r, err := s.Fetch(ctx, "shared", int64(k%5+1))
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		fmt.Printf("range %d %d\n", r.Start, r.End)
	}
}

// TestSegmentsProcesses: several processes fetching from one file at once
// get disjoint ranges.
func TestSegmentsProcesses(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		t.Skip("in a child")
	}
	path, connect := sameFile(t)
	s := connect()
	create(t, s, segment.Tag{Name: "shared", Step: 10})
	const procs, each = 3, 20
	outs := make([]bytes.Buffer, procs)
	cmds := make([]*exec.Cmd, procs)
	for i := range cmds {
		cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestSegmentsChildProcess$", "-test.count=1")
		cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d %s", childEnv, each, path))
		cmd.Stdout, cmd.Stderr = &outs[i], &outs[i]
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds[i] = cmd
	}
	var ranges []segment.Range
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("child %d: %v\n%s", i, err, outs[i].String())
		}
		sc := bufio.NewScanner(&outs[i])
		for sc.Scan() {
			var r segment.Range
			if _, err := fmt.Sscanf(sc.Text(), "range %d %d", &r.Start, &r.End); err == nil {
				ranges = append(ranges, r)
			}
		}
	}
	if len(ranges) != procs*each {
		t.Fatalf("%d ranges from the children, want %d", len(ranges), procs*each)
	}
	got, err := s.Get(t.Context(), "shared")
	if err != nil {
		t.Fatal(err)
	}
	checkContiguous(t, ranges, 1, got.MaxID)
}

// --- persistence -------------------------------------------------------------

// TestSegmentsSurviveReopen: max_id and the settings are on disk; a new store
// of the file, and one opened after another was closed, continue after them.
func TestSegmentsSurviveReopen(t *testing.T) {
	_, connect := sameFile(t)
	ctx := t.Context()
	s := connect()
	at := time.Date(2026, 3, 4, 5, 6, 7, 8_000_000, time.UTC)
	s.now = func() time.Time { return at }
	create(t, s, segment.Tag{Name: "orders", Step: 100, Description: "order numbers"})
	r1, err := s.Fetch(ctx, "orders", 100)
	if err != nil || r1 != (segment.Range{Start: 1, End: 101}) {
		t.Fatalf("Fetch = %+v, %v", r1, err)
	}

	// A new store.
	s2 := connect()
	got, err := s2.Get(ctx, "orders")
	want := segment.Tag{Name: "orders", MaxID: 101, Step: 100, Description: "order numbers", Updated: at}
	if err != nil || got != want {
		t.Fatalf("after reopening: %+v, %v; want %+v", got, err, want)
	}
	r2, err := s2.Fetch(ctx, "orders", 50)
	if err != nil || r2.Start != r1.End {
		t.Fatalf("Fetch after reopening = %+v, %v; want it to start at %d", r2, err, r1.End)
	}

	// One opened after the second was closed.
	if err := s2.Close(); err != nil {
		t.Fatal(err)
	}
	r3, err := connect().Fetch(ctx, "orders", 7)
	if err != nil || r3.Start != r2.End {
		t.Fatalf("Fetch of a store opened after a Close = %+v, %v; want it to start at %d", r3, err, r2.End)
	}

	// And the first store sees what the others wrote.
	r4, err := s.Fetch(ctx, "orders", 1)
	if err != nil || r4.Start != r3.End {
		t.Fatalf("Fetch after the other stores = %+v, %v; want it to start at %d", r4, err, r3.End)
	}
	if tags, err := s.List(ctx); err != nil || len(tags) != 1 || tags[0].MaxID != r4.End {
		t.Fatalf("List = %+v, %v", tags, err)
	}
}

// TestSegmentsLostFile: once the store exists, a missing file is an error,
// not a new empty store that would start the tags over at 1.
func TestSegmentsLostFile(t *testing.T) {
	path, connect := sameFile(t)
	s := connect()
	create(t, s, segment.Tag{Name: "t", Step: 10})
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Fetch(t.Context(), "t", 1); !errors.Is(err, segment.ErrUnavailable) || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Fetch with the file gone: %v, want ErrUnavailable and ErrNotExist", err)
	}
	if err := s.Create(t.Context(), segment.Tag{Name: "u", Step: 1}); !errors.Is(err, segment.ErrUnavailable) {
		t.Fatalf("Create with the file gone: %v, want ErrUnavailable", err)
	}
	if _, err := s.List(t.Context()); !errors.Is(err, segment.ErrUnavailable) {
		t.Fatalf("List with the file gone: %v, want ErrUnavailable", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the store recreated its file: %v", err)
	}
}

// --- bad input ---------------------------------------------------------------

func TestSegmentsBadInput(t *testing.T) {
	_, connect := sameFile(t)
	s := connect()
	ctx := t.Context()
	create(t, s, segment.Tag{Name: "ok", Step: 10})
	long := strings.Repeat("x", 129)
	for _, name := range []string{"", "has space", "semi;colon", "ünï", long, "a\x00b"} {
		if _, err := s.Fetch(ctx, name, 1); !errors.Is(err, segment.ErrInvalidTag) {
			t.Errorf("Fetch(%q): %v, want ErrInvalidTag", name, err)
		}
		if _, err := s.Get(ctx, name); !errors.Is(err, segment.ErrInvalidTag) {
			t.Errorf("Get(%q): %v, want ErrInvalidTag", name, err)
		}
		step := int64(5)
		if err := s.Update(ctx, name, &step, nil); !errors.Is(err, segment.ErrInvalidTag) {
			t.Errorf("Update(%q): %v, want ErrInvalidTag", name, err)
		}
		if err := s.Create(ctx, segment.Tag{Name: name, Step: 1}); !errors.Is(err, segment.ErrInvalidTag) {
			t.Errorf("Create(%q): %v, want ErrInvalidTag", name, err)
		}
	}
	if err := s.Create(ctx, segment.Tag{Name: strings.Repeat("y", 128), Step: 1}); err != nil {
		t.Errorf("Create of a 128-byte name: %v", err)
	}
	for _, step := range []int64{0, -1, segment.MaxStep + 1, math.MaxInt64} {
		if err := s.Create(ctx, segment.Tag{Name: "s", Step: step}); !errors.Is(err, segment.ErrInvalidTag) {
			t.Errorf("Create with step %d: %v, want ErrInvalidTag", step, err)
		}
		if err := s.Update(ctx, "ok", &step, nil); !errors.Is(err, segment.ErrInvalidTag) {
			t.Errorf("Update to step %d: %v, want ErrInvalidTag", step, err)
		}
	}
	maxStep := int64(segment.MaxStep)
	if err := s.Update(ctx, "ok", &maxStep, nil); err != nil {
		t.Errorf("Update to the max step: %v", err)
	}
	desc := strings.Repeat("d", 257)
	if err := s.Update(ctx, "ok", nil, &desc); !errors.Is(err, segment.ErrInvalidTag) {
		t.Errorf("Update to a 257-byte description: %v, want ErrInvalidTag", err)
	}
	if err := s.Create(ctx, segment.Tag{Name: "neg", Step: 1, MaxID: -1}); !errors.Is(err, segment.ErrInvalidTag) {
		t.Errorf("Create with max id -1: %v, want ErrInvalidTag", err)
	}
	if err := s.Update(ctx, "nope", nil, nil); !errors.Is(err, segment.ErrUnknownTag) {
		t.Errorf("Update(nope) with nothing to change: %v, want ErrUnknownTag", err)
	}
	for _, n := range []int64{0, -1, math.MinInt64} {
		if _, err := s.Fetch(ctx, "ok", n); !errors.Is(err, segment.ErrInvalidCount) {
			t.Errorf("Fetch(%d): %v, want ErrInvalidCount", n, err)
		}
	}
	if got, err := s.Get(ctx, "ok"); err != nil || got.MaxID != 1 || got.Step != segment.MaxStep {
		t.Errorf("after refused calls the row is %+v, %v", got, err)
	}
}

func TestSegmentsOverflow(t *testing.T) {
	_, connect := sameFile(t)
	s := connect()
	ctx := t.Context()
	create(t, s, segment.Tag{Name: "edge", Step: 10, MaxID: math.MaxInt64 - 10})
	if _, err := s.Fetch(ctx, "edge", 11); !errors.Is(err, segment.ErrExhausted) {
		t.Fatalf("Fetch one past int64: %v, want ErrExhausted", err)
	}
	if _, err := s.Fetch(ctx, "edge", math.MaxInt64); !errors.Is(err, segment.ErrExhausted) {
		t.Fatalf("Fetch(MaxInt64): %v, want ErrExhausted", err)
	}
	r, err := s.Fetch(ctx, "edge", 10)
	if err != nil || r != (segment.Range{Start: math.MaxInt64 - 10, End: math.MaxInt64}) {
		t.Fatalf("Fetch to the end = %+v, %v", r, err)
	}
	if _, err := s.Fetch(ctx, "edge", 1); !errors.Is(err, segment.ErrExhausted) {
		t.Fatalf("Fetch at the end: %v, want ErrExhausted", err)
	}
	if got, err := s.Get(ctx, "edge"); err != nil || got.MaxID != math.MaxInt64 {
		t.Fatalf("row = %+v, %v", got, err)
	}
	create(t, s, segment.Tag{Name: "fresh", Step: 1})
	if r, err := s.Fetch(ctx, "fresh", math.MaxInt64-1); err != nil || r.End != math.MaxInt64 {
		t.Fatalf("Fetch of every ID at once = %+v, %v", r, err)
	}
}

// TestSegmentsCorruptRecords: a record this store could not have written is
// an error naming the tag and wrapping ErrUnavailable, never a panic or a
// silent restart of the tag.
func TestSegmentsCorruptRecords(t *testing.T) {
	_, connect := sameFile(t)
	s := connect()
	ctx := t.Context()
	create(t, s, segment.Tag{Name: "good", Step: 10})
	bad := map[string]string{
		"garbage":   "\x00\xff not json",
		"array":     `[1, 2]`,
		"null":      `null`,
		"nomax":     `{"step": 10}`,
		"nostep":    `{"max_id": 10}`,
		"negative":  `{"max_id": -5, "step": 10}`,
		"stepzero":  `{"max_id": 5, "step": 0}`,
		"stepbig":   `{"max_id": 5, "step": 2147483648}`,
		"wrongtype": `{"max_id": "5", "step": 10}`,
		"float":     `{"max_id": 5.5, "step": 10}`,
		"empty":     ``,
	}
	raw := func(fn func(b *bbolt.Bucket) error) {
		t.Helper()
		err := s.update(ctx, func(tx *bbolt.Tx) error { return fn(tx.Bucket([]byte(segmentsBucket))) })
		if err != nil {
			t.Fatal(err)
		}
	}
	for name, v := range bad {
		raw(func(b *bbolt.Bucket) error { return b.Put([]byte(name), []byte(v)) })
	}
	for name := range bad {
		check := func(op string, err error) {
			t.Helper()
			if !errors.Is(err, segment.ErrUnavailable) || !strings.Contains(err.Error(), "corrupt record") || !strings.Contains(err.Error(), name) {
				t.Errorf("%s of corrupt %q: %v, want a corrupt-record error wrapping ErrUnavailable", op, name, err)
			}
		}
		_, err := s.Fetch(ctx, name, 1)
		check("Fetch", err)
		_, err = s.Get(ctx, name)
		check("Get", err)
		step := int64(3)
		check("Update", s.Update(ctx, name, &step, nil))
		check("Update nothing", s.Update(ctx, name, nil, nil))
		if err := s.Create(ctx, segment.Tag{Name: name, Step: 1}); !errors.Is(err, segment.ErrTagExists) {
			t.Errorf("Create over corrupt %q: %v, want ErrTagExists", name, err)
		}
	}
	if _, err := s.List(ctx); !errors.Is(err, segment.ErrUnavailable) || !strings.Contains(err.Error(), "corrupt record") {
		t.Errorf("List with corrupt records: %v", err)
	}
	// A refused fetch of a corrupt record changed nothing.
	raw(func(b *bbolt.Bucket) error {
		for name := range bad {
			if err := b.Delete([]byte(name)); err != nil {
				return err
			}
		}
		return nil
	})
	if tags, err := s.List(ctx); err != nil || len(tags) != 1 || tags[0].MaxID != 1 {
		t.Fatalf("List after removing the corrupt records = %+v, %v", tags, err)
	}
	// A key that is no tag name, and a nested bucket where a tag is.
	raw(func(b *bbolt.Bucket) error { return b.Put([]byte("bad key!"), []byte(`{"max_id": 1, "step": 1}`)) })
	if _, err := s.List(ctx); !errors.Is(err, segment.ErrUnavailable) || !strings.Contains(err.Error(), "bad key!") {
		t.Errorf("List with an invalid key: %v", err)
	}
	raw(func(b *bbolt.Bucket) error {
		if err := b.Delete([]byte("bad key!")); err != nil {
			return err
		}
		_, err := b.CreateBucket([]byte("nested"))
		return err
	})
	if _, err := s.Fetch(ctx, "nested", 1); !errors.Is(err, segment.ErrUnavailable) {
		t.Errorf("Fetch of a nested bucket: %v, want ErrUnavailable", err)
	}
	if _, err := s.Get(ctx, "nested"); !errors.Is(err, segment.ErrUnavailable) {
		t.Errorf("Get of a nested bucket: %v, want ErrUnavailable", err)
	}
	if err := s.Create(ctx, segment.Tag{Name: "nested", Step: 1}); !errors.Is(err, segment.ErrTagExists) {
		t.Errorf("Create over a nested bucket: %v, want ErrTagExists", err)
	}
	if _, err := s.List(ctx); !errors.Is(err, segment.ErrUnavailable) {
		t.Errorf("List with a nested bucket: %v", err)
	}
	if got, err := s.Get(ctx, "good"); err != nil || got.MaxID != 1 {
		t.Errorf("the good tag: %+v, %v", got, err)
	}
}

// TestSegmentsNotABoltFile: a file that is not a bbolt database fails
// OpenSegments with ErrUnavailable.
func TestSegmentsNotABoltFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "segments.db")
	if err := os.WriteFile(path, bytes.Repeat([]byte("not bolt "), 1000), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenSegments(t.Context(), fileURL(path)); !errors.Is(err, segment.ErrUnavailable) || !errors.Is(err, ErrDamaged) {
		t.Fatalf("OpenSegments of a text file: %v, want ErrUnavailable and ErrDamaged", err)
	}
}

// --- contexts and locks ------------------------------------------------------

// everyOp calls each operation of s with ctx and returns the errors by name.
func everyOp(ctx context.Context, s *Segments) map[string]error {
	step := int64(3)
	_, fetchErr := s.Fetch(ctx, "t", 1)
	_, getErr := s.Get(ctx, "t")
	_, listErr := s.List(ctx)
	return map[string]error{
		"Fetch":  fetchErr,
		"Get":    getErr,
		"List":   listErr,
		"Create": s.Create(ctx, segment.Tag{Name: "u", Step: 1}),
		"Update": s.Update(ctx, "t", &step, nil),
	}
}

func TestSegmentsCancelledContext(t *testing.T) {
	_, connect := sameFile(t)
	s := connect()
	create(t, s, segment.Tag{Name: "t", Step: 10})
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	expired, cancel2 := context.WithDeadline(t.Context(), time.Now().Add(-time.Second))
	defer cancel2()
	for ctxName, ctx := range map[string]context.Context{"cancelled": cancelled, "expired": expired} {
		start := time.Now()
		for op, err := range everyOp(ctx, s) {
			if !errors.Is(err, segment.ErrUnavailable) || !errors.Is(err, ctx.Err()) {
				t.Errorf("%s with a %s context: %v, want ErrUnavailable wrapping %v", op, ctxName, err, ctx.Err())
			}
		}
		if d := time.Since(start); d > 100*time.Millisecond {
			t.Errorf("calls with a %s context took %v", ctxName, d)
		}
	}
	if got, err := s.Get(t.Context(), "t"); err != nil || got.MaxID != 1 || got.Step != 10 {
		t.Fatalf("calls with a dead context changed the row: %+v, %v", got, err)
	}
	if _, err := s.Get(t.Context(), "u"); !errors.Is(err, segment.ErrUnknownTag) {
		t.Fatalf("Create with a dead context created the tag: %v", err)
	}
}

// TestSegmentsLockWait: with the lock held elsewhere, a call waits until its
// deadline and fails with ErrUnavailable; a cancel ends the wait at once; once
// the lock is free, calls succeed, nothing was half-done, and no goroutine
// of a given-up wait is left behind.
func TestSegmentsLockWait(t *testing.T) {
	path, connect := sameFile(t)
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	s := connect()
	create(t, s, segment.Tag{Name: "t", Step: 10})
	// From another "process": the file lock.
	fault := segLockFault{&lockFault{t: t, path: path}}
	t.Cleanup(fault.Heal)
	fault.Cut()

	const wait = 300 * time.Millisecond
	ctx, cancel := context.WithTimeout(t.Context(), wait)
	start := time.Now()
	_, err := s.Fetch(ctx, "t", 5)
	took := time.Since(start)
	cancel()
	if !errors.Is(err, segment.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Fetch with the lock held: %v, want ErrUnavailable and DeadlineExceeded", err)
	}
	if took < wait-20*time.Millisecond || took > wait+500*time.Millisecond {
		t.Fatalf("Fetch with a %v deadline gave up after %v", wait, took)
	}

	ctx, cancel = context.WithCancel(t.Context())
	time.AfterFunc(100*time.Millisecond, cancel)
	start = time.Now()
	_, err = s.Fetch(ctx, "t", 5)
	took = time.Since(start)
	if !errors.Is(err, segment.ErrUnavailable) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Fetch cancelled while waiting: %v, want ErrUnavailable and Canceled", err)
	}
	if took > 400*time.Millisecond {
		t.Fatalf("a cancel ended the wait after %v", took)
	}

	fault.Heal()
	r, err := s.Fetch(t.Context(), "t", 5)
	if err != nil || r != (segment.Range{Start: 1, End: 6}) {
		t.Fatalf("Fetch after the lock was freed = %+v, %v; want [1, 6)", r, err)
	}
}

// --- benchmark ---------------------------------------------------------------

// BenchmarkSegmentFetch measures one Fetch — a committed, fsynced write
// transaction — per operation, serially and from parallel goroutines.
func BenchmarkSegmentFetch(b *testing.B) {
	stores := []struct {
		name string
		open func(b *testing.B) *Segments
	}{
		{"per-operation", func(b *testing.B) *Segments {
			return openS(b, filepath.Join(b.TempDir(), "segments.db"))
		}},
	}
	for _, st := range stores {
		b.Run(st.name, func(b *testing.B) {
			s := st.open(b)
			create(b, s, segment.Tag{Name: "bench", Step: 1000})
			ctx := context.Background()
			for b.Loop() {
				if _, err := s.Fetch(ctx, "bench", 1000); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "fetches/s")
		})
		b.Run(st.name+"/parallel", func(b *testing.B) {
			s := st.open(b)
			create(b, s, segment.Tag{Name: "bench", Step: 1000})
			ctx := context.Background()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := s.Fetch(ctx, "bench", 1000); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "fetches/s")
		})
	}
}
