package bolt

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"time"

	bbolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// A damaged file must be an error of a few lines, never a crash: bbolt maps
// the file into memory and trusts its header, so a file shorter than its
// header says faults (SIGBUS) on the first read past its end, and a page it
// cannot make sense of panics. Every open here therefore reads the header
// with ordinary reads first (checkHeader), runs bbolt with memory faults
// turned into panics and those into errors (guard, onFault), and checks the
// whole file once when a store is opened (CheckFile).

// bbolt's on-disk format (go.etcd.io/bbolt/internal/common): every page
// starts with a 16-byte header {id u64, flags u16, count u16, overflow u32};
// pages 0 and 1 are meta pages whose body is {magic u32, version u32,
// pageSize u32, flags u32, root {pgid u64, sequence u64}, freelist u64,
// pgid u64, txid u64, checksum u64}, the checksum being FNV-64a of the body
// before it. Integers are in the machine's byte order.
const (
	boltMagic      = 0xED0CDAED
	boltVersion    = 2
	pageHeaderSize = 16
	metaSize       = 64 // the meta body, checksum included
	noFreelist     = ^uint64(0)
)

// checkLimit is the largest file whose every page is read and checked when
// a store is opened; a larger one gets its header checked only.
const checkLimit = 64 << 20

// meta is what checkHeader reads of a meta page.
type meta struct {
	pageSize             uint32
	root, freelist, pgid uint64
	txid                 uint64
}

// header is what checkHeader found: the file's size and its newest valid
// meta page.
type header struct {
	size int64
	meta meta
}

// parseMeta reads the meta page at the start of b, returning why it is not
// a valid one ("" when it is).
func parseMeta(b []byte) (meta, string) {
	if len(b) < pageHeaderSize+metaSize {
		return meta{}, "cut short"
	}
	body := b[pageHeaderSize : pageHeaderSize+metaSize]
	u32 := func(off int) uint32 { return binary.NativeEndian.Uint32(body[off:]) }
	u64 := func(off int) uint64 { return binary.NativeEndian.Uint64(body[off:]) }
	m := meta{pageSize: u32(8), root: u64(16), freelist: u64(32), pgid: u64(40), txid: u64(48)}
	h := fnv.New64a()
	h.Write(body[:56])
	switch {
	case u32(0) != boltMagic:
		return m, "no bbolt magic number"
	case u32(4) != boltVersion:
		return m, fmt.Sprintf("format version %d, not %d", u32(4), boltVersion)
	case u64(56) != h.Sum64():
		return m, "wrong checksum"
	case m.pageSize < 512 || m.pageSize > 1<<30 || m.pageSize&(m.pageSize-1) != 0:
		return m, fmt.Sprintf("impossible page size %d", m.pageSize)
	case m.pgid < 2 || m.root >= m.pgid || (m.freelist >= m.pgid && m.freelist != noFreelist):
		return m, fmt.Sprintf("root page %d or freelist page %d beyond its %d pages", m.root, m.freelist, m.pgid)
	}
	return m, ""
}

// checkHeader reads the file's size and both meta pages with ordinary reads
// (no mapping, so nothing can fault), and refuses, with an error wrapping
// ErrDamaged, a file that is gone, empty, without a valid meta page, or
// shorter than the newest valid one describes. Other errors (permissions,
// I/O) are returned as they are.
func checkHeader(path string) (header, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return header{}, &damageError{damaged(path, "the file is gone: it was deleted or moved"), err}
	}
	if err != nil {
		return header{}, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return header{}, err
	}
	size := fi.Size()
	if size == 0 {
		return header{}, damaged(path, "0 bytes: the file is empty (flakeid creates its files complete, so an empty one has lost its data)")
	}
	read := func(off int64) ([]byte, error) {
		buf := make([]byte, pageHeaderSize+metaSize)
		n, err := f.ReadAt(buf, off)
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, err
		}
		return buf[:n], nil
	}
	b0, err := read(0)
	if err != nil {
		return header{}, err
	}
	m0, why0 := parseMeta(b0)
	m1, why1 := meta{}, "not found"
	// The second meta page is one page in; with the first one invalid, try
	// every page size bbolt could have used, as bbolt does.
	offsets := []int64{int64(m0.pageSize)}
	if why0 != "" {
		offsets = offsets[:0]
		for i := range 15 {
			offsets = append(offsets, 1024<<i)
		}
	}
	for _, off := range offsets {
		if off+pageHeaderSize+metaSize > size {
			break
		}
		b1, err := read(off)
		if err != nil {
			return header{}, err
		}
		if m1, why1 = parseMeta(b1); why1 == "" && int64(m1.pageSize) == off {
			break
		} else if why1 == "" {
			why1 = fmt.Sprintf("page size %d at offset %d", m1.pageSize, off)
		}
	}
	var m meta
	switch {
	case why0 == "" && (why1 != "" || m0.txid >= m1.txid):
		m = m0
	case why1 == "":
		m = m1
	case size < 2*1024:
		return header{}, damaged(path, fmt.Sprintf("%s, too short for the two meta pages every bbolt file starts with", humanSize(size)))
	default:
		return header{}, damaged(path, fmt.Sprintf("no valid meta page (the first: %s; the second: %s): the file is not a bbolt database, or its first pages were overwritten", why0, why1))
	}
	if need := int64(m.pgid) * int64(m.pageSize); size < need {
		return header{}, damaged(path, fmt.Sprintf("%s of the %s its header describes (%d pages of %s): the file was cut short",
			humanSize(size), humanSize(need), m.pgid, humanSize(int64(m.pageSize))))
	}
	return header{size: size, meta: m}, nil
}

// damaged is an error wrapping ErrDamaged that says what was found in the
// file at path, what reusing it would risk, and how to recover.
func damaged(path, found string) error {
	dir := filepath.Dir(path)
	return fmt.Errorf("%w: %s: %s\n"+
		"  reusing it, or starting afresh in its place, could reissue IDs: worker high-water marks and segment positions are in this file\n"+
		"  to recover: stop every flakeid using %s, then run `flakeid recover --data-dir %s`, which moves the file aside and starts afresh past a safe floor (see docs/OPERATIONS.md)",
		ErrDamaged, path, found, dir, dir)
}

// damageError is damage with its cause (a missing file's fs.ErrNotExist).
type damageError struct {
	err   error // wraps ErrDamaged
	cause error
}

func (e *damageError) Error() string   { return e.err.Error() }
func (e *damageError) Unwrap() []error { return []error{e.err, e.cause} }

// humanSize formats a size in bytes: "0 bytes", "900 bytes", "16 KiB",
// "2.5 MiB".
func humanSize(n int64) string {
	units := []string{"KiB", "MiB", "GiB", "TiB"}
	if n < 1024 {
		return strconv.FormatInt(n, 10) + " bytes"
	}
	v, u := float64(n)/1024, 0
	for v >= 1024 && u < len(units)-1 {
		v, u = v/1024, u+1
	}
	return strconv.FormatFloat(math.Round(v*10)/10, 'f', -1, 64) + " " + units[u]
}

// guard runs fn with memory faults turned into panics (a file shorter than
// its mapping raises SIGBUS on the first read past its end) and turns any
// panic into an error wrapping ErrDamaged: bbolt panics on pages it cannot
// make sense of. It is for code that only reads the file through bbolt;
// doing says what fn does, for the message.
func guard(path, doing string, fn func() error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = damaged(path, fmt.Sprintf("%s failed: %v", doing, r))
		}
	}()
	return fn()
}

// onFault turns a memory fault of the calling function into an error
// wrapping ErrDamaged in *err; other panics go on. Call it as
//
//	defer onFault(path, &err)()
func onFault(path string, err *error) func() {
	old := debug.SetPanicOnFault(true)
	return func() {
		debug.SetPanicOnFault(old)
		r := recover()
		if r == nil {
			return
		}
		if _, fault := r.(interface{ Addr() uintptr }); !fault {
			panic(r)
		}
		*err = damaged(path, fmt.Sprintf("reading it faulted (%v): it is shorter than bbolt mapped, or damaged", r))
	}
}

// openNoCreate is bbolt's OpenFile without O_CREATE: the files are created
// complete by createFile, never by an open.
func openNoCreate(name string, flag int, perm os.FileMode) (*os.File, error) {
	return os.OpenFile(name, flag&^os.O_CREATE, perm)
}

// openGuarded opens the file with bbolt, never creating it, a fault or a
// panic while bbolt reads its meta pages and freelist being an error
// wrapping ErrDamaged.
func openGuarded(path string, opts *bbolt.Options) (*bbolt.DB, error) {
	o := *opts
	o.OpenFile = openNoCreate
	var db *bbolt.DB
	err := guard(path, "opening it", func() (err error) {
		db, err = bbolt.Open(path, 0o600, &o)
		return err
	})
	if errors.Is(err, bolterrors.ErrInvalid) || errors.Is(err, bolterrors.ErrVersionMismatch) || errors.Is(err, bolterrors.ErrChecksum) {
		// bbolt's own refusals of the file's contents.
		return nil, damaged(path, fmt.Sprintf("bbolt cannot open it: %v", err))
	}
	return db, err
}

// prepareFile makes the file at path ready for a store: a missing file is
// created complete, an existing one checked (CheckFile). Damage is an error
// wrapping ErrDamaged; other errors are returned as they are.
func prepareFile(ctx context.Context, path string) error {
	if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
		return createFile(path)
	} else if err != nil {
		return err
	}
	return CheckFile(ctx, path)
}

// createFile creates an empty bbolt database at path without ever leaving
// an empty or half-written file there: bbolt initialises it under a
// temporary name, and a hard link puts it in place unless another process
// did first. An empty file at path is therefore always damage.
func createFile(path string) error {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+base+".new-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	f.Close()
	defer os.Remove(tmp)
	db, err := bbolt.Open(tmp, 0o600, &bbolt.Options{Timeout: time.Second})
	if err != nil {
		return fmt.Errorf("creating %s: %w", path, err)
	}
	if err := db.Close(); err != nil {
		return fmt.Errorf("creating %s: %w", path, err)
	}
	if err := os.Link(tmp, path); err != nil && !errors.Is(err, fs.ErrExist) {
		// A file system without hard links: a rename, which replaces a
		// file created in the meantime by another process (an empty one,
		// like this).
		if _, serr := os.Lstat(path); !errors.Is(serr, fs.ErrNotExist) {
			return err
		}
		if err := os.Rename(tmp, path); err != nil {
			return err
		}
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}

// CheckFile checks the bbolt file at path without changing it: its size and
// meta pages first (checkHeader: a file that is gone, empty, cut short or
// without a valid header), then, for files up to 64 MiB, every record and
// page — read with faults and panics turned into errors — and bbolt's
// consistency check (tx.Check). Damage is an error wrapping ErrDamaged that
// says what was found, what reusing the file would risk and how to recover.
// It waits for another process's lock as long as ctx allows (DefaultLockWait
// without a deadline).
func CheckFile(ctx context.Context, path string) error {
	h, err := checkHeader(path)
	if err != nil {
		return err
	}
	wait := DefaultLockWait
	if d, ok := ctx.Deadline(); ok {
		wait = time.Until(d)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	db, err := openGuarded(path, &bbolt.Options{ReadOnly: true, PreLoadFreelist: true, Timeout: max(wait, time.Millisecond)})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return fmt.Errorf("%s is locked by another process for longer than %v: %w", path, wait.Round(time.Millisecond), err)
	}
	if err != nil {
		return err
	}
	defer db.Close()
	if h.size > checkLimit {
		return nil
	}
	return db.View(func(tx *bbolt.Tx) error { return checkTx(path, tx) })
}

// checkTx reads every bucket, key and value of tx in this goroutine (faults
// and panics become errors), then runs bbolt's consistency check, which
// follows the same pages on its own goroutine.
func checkTx(path string, tx *bbolt.Tx) error {
	err := guard(path, "reading its records", func() error {
		h := fnv.New64a()
		var walk func(b *bbolt.Bucket, depth int) error
		walk = func(b *bbolt.Bucket, depth int) error {
			if depth > 8 {
				return damaged(path, "buckets nested more than 8 deep, which flakeid never writes")
			}
			return b.ForEach(func(k, v []byte) error {
				h.Write(k)
				h.Write(v) // reads every byte, overflow pages too
				if v == nil {
					if c := b.Bucket(k); c != nil {
						return walk(c, depth+1)
					}
				}
				return nil
			})
		}
		return tx.ForEach(func(name []byte, b *bbolt.Bucket) error {
			h.Write(name)
			return walk(b, 0)
		})
	})
	if err != nil {
		return err
	}
	var problems []error
	for err := range tx.Check() {
		problems = append(problems, err)
	}
	if len(problems) > 0 {
		return damaged(path, fmt.Sprintf("bbolt's consistency check found %d problem(s), the first: %v", len(problems), problems[0]))
	}
	return nil
}
