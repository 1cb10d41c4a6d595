// Package datadir makes a flakeid data directory remember the state files
// created in it, so that a file that existed and is now gone is refused
// instead of silently started afresh.
//
// A data directory is the directory holding a state file: --data-dir for
// the default workers.db and segments.db, or the directory of a file:// URL.
// It holds, beside the state files:
//
//   - flakeid-state.json, the marker: the files flakeid created (or found,
//     see below) there, each with its kinds (workers, segments), when it was
//     created, and its last recovery. It is written, atomically, only when a
//     file is added or recovered.
//   - flakeid-state.lock, an empty file whose lock serialises changes to the
//     marker.
//
// Every process that uses the directory holds a shared lock on it (Open)
// for as long as it uses it; `flakeid recover` takes it exclusively (Lock),
// so it refuses to run beside a serve, next or tags command, and they refuse
// to start while it runs.
//
// Use opens a state file through the marker: a file the marker lists that is
// gone is refused (ErrMissing), with when it was created, what starting
// afresh would risk and how to recover. A file found without a marker entry
// — a data directory of a flakeid older than the marker, or one whose marker
// was deleted — is adopted once the store has checked it: refusing it would
// stop every upgrade, and losing the marker alone loses no state. What a
// marker cannot see is a whole data directory lost at once (the marker with
// the files), or a file lost from a directory before it had a marker.
package datadir

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// File names in a data directory.
const (
	// MarkerName is the marker's file name.
	MarkerName = "flakeid-state.json"
	// lockName is the file whose lock serialises changes to the marker.
	lockName = "flakeid-state.lock"
)

// Kinds of state file.
const (
	Workers  = "workers"  // the worker-id coordinator: high-water marks
	Segments = "segments" // the segment store: each tag's next ID
)

// Sentinel errors.
var (
	// ErrMissing means a state file the marker lists is gone.
	ErrMissing = errors.New("datadir: state file missing")
	// ErrInUse means the directory is locked: by another process while
	// recovering, or by a recovery while opening.
	ErrInUse = errors.New("datadir: data directory in use")
	// ErrMarker means the marker cannot be read.
	ErrMarker = errors.New("datadir: marker unreadable")
)

// Marker is the content of flakeid-state.json.
type Marker struct {
	Version int       `json:"version"`
	Created time.Time `json:"created"`
	Files   []File    `json:"files"`
}

// File is a state file the marker lists.
type File struct {
	Name    string    `json:"name"`  // relative to the directory
	Kinds   []string  `json:"kinds"` // Workers, Segments
	Created time.Time `json:"created"`
	// Adopted is set when the file was found without a marker entry (made
	// by an older flakeid, or the marker was lost): Created is when it was
	// found.
	Adopted   bool      `json:"adopted,omitempty"`
	Recovered *Recovery `json:"recovered,omitempty"`
}

// Recovery is what `flakeid recover` did to a file.
type Recovery struct {
	At    time.Time `json:"at"`
	Found string    `json:"found"`           // what was wrong with the old file
	Aside string    `json:"aside,omitempty"` // where the old file was moved
	Floor string    `json:"floor"`           // the floor(s) the new file starts from
}

// file returns the entry of name, or nil.
func (m *Marker) file(name string) *File {
	for i := range m.Files {
		if m.Files[i].Name == name {
			return &m.Files[i]
		}
	}
	return nil
}

// File returns the entry of name and whether there is one.
func (m Marker) File(name string) (File, bool) {
	if f := m.file(name); f != nil {
		return *f, true
	}
	return File{}, false
}

// Dir is a data directory in use, locked shared (Open) or exclusively
// (Lock) until Close.
type Dir struct {
	path   string
	lock   *os.File // the directory itself, flock'ed
	locked bool     // false when the file system has no locks
	now    func() time.Time
}

// Open locks the data directory at path for use, shared with other users,
// creating it when missing. It fails with ErrInUse while a recovery runs.
func Open(path string) (*Dir, error) {
	if err := os.MkdirAll(path, 0o700); err != nil {
		return nil, fmt.Errorf("creating the data directory %s: %w", path, err)
	}
	return open(path, syscall.LOCK_SH, func() error {
		return fmt.Errorf("%w: %s is being recovered (`flakeid recover` holds it); start again when it has finished", ErrInUse, path)
	})
}

// Lock locks the existing data directory at path for a recovery, excluding
// every other user. It fails with ErrInUse while another process uses it.
func Lock(path string) (*Dir, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("data directory: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("data directory %s is not a directory", path)
	}
	return open(path, syscall.LOCK_EX, func() error {
		return fmt.Errorf("%w: %s is used by another flakeid process (a running serve, next, workers or tags command): stop every one first", ErrInUse, path)
	})
}

func open(path string, how int, busy func() error) (*Dir, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("data directory: %w", err)
	}
	locked := true
	if err := syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB); err != nil {
		switch {
		case errors.Is(err, syscall.EWOULDBLOCK):
			f.Close()
			return nil, busy()
		case lockUnsupported(err):
			locked = false // a file system without locks: go on unguarded
		default:
			f.Close()
			return nil, fmt.Errorf("locking the data directory %s: %w", path, err)
		}
	}
	return &Dir{path: path, lock: f, locked: locked, now: time.Now}, nil
}

// lockUnsupported reports whether a flock error means the file system has
// no locks (some network and FUSE file systems).
func lockUnsupported(err error) bool {
	return errors.Is(err, syscall.ENOTSUP) || errors.Is(err, syscall.EOPNOTSUPP) || errors.Is(err, syscall.ENOLCK) || errors.Is(err, syscall.EINVAL)
}

// Locked reports whether the directory is locked; false on a file system
// without locks, where nothing keeps a recovery from running beside a user.
func (d *Dir) Locked() bool { return d.locked }

// Close releases the directory's lock.
func (d *Dir) Close() error { return d.lock.Close() }

// Path is the directory's path.
func (d *Dir) Path() string { return d.path }

// Read reads the marker; false when there is none. An unreadable marker is
// an error wrapping ErrMarker.
func (d *Dir) Read() (Marker, bool, error) {
	p := filepath.Join(d.path, MarkerName)
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return Marker{}, false, nil
	}
	if err != nil {
		return Marker{}, false, fmt.Errorf("%w: %w", ErrMarker, err)
	}
	var m Marker
	if err := json.Unmarshal(b, &m); err != nil || m.Version != 1 {
		why := "version is not 1"
		if err != nil {
			why = err.Error()
		}
		return Marker{}, false, fmt.Errorf("%w: %s: %s\n"+
			"  it lists the state files flakeid created in %s, so that one that is lost is refused rather than started afresh\n"+
			"  to recover: stop every flakeid using %s, then run `flakeid recover --data-dir %s`, which checks the files and writes it again (see docs/OPERATIONS.md)",
			ErrMarker, p, why, d.path, d.path, d.path)
	}
	return m, true, nil
}

// Use opens the state file name of kind in the directory through the
// marker: a file the marker lists that is gone is refused with an error
// wrapping ErrMissing; otherwise open (which creates a missing file, or
// checks an existing one) is called, and on success the file is recorded
// in the marker if it is not yet.
func (d *Dir) Use(name, kind string, open func() error) error {
	m, _, err := d.Read()
	if err != nil {
		return err
	}
	_, statErr := os.Lstat(filepath.Join(d.path, name))
	if f, listed := m.File(name); listed && errors.Is(statErr, fs.ErrNotExist) {
		return d.missing(f)
	}
	if err := open(); err != nil {
		return err
	}
	return d.Update(func(m *Marker) bool {
		f := m.file(name)
		switch {
		case f == nil:
			m.Files = append(m.Files, File{Name: name, Kinds: []string{kind}, Created: d.now().UTC(), Adopted: statErr == nil})
		case !slices.Contains(f.Kinds, kind):
			f.Kinds = append(f.Kinds, kind)
		default:
			return false
		}
		return true
	})
}

// missing is the refusal of a listed file that is gone.
func (d *Dir) missing(f File) error {
	path := filepath.Join(d.path, f.Name)
	when := "was created on " + f.Created.UTC().Format("2006-01-02 15:04:05 MST")
	if f.Adopted {
		when = "was found on " + f.Created.UTC().Format("2006-01-02 15:04:05 MST")
	}
	if f.Recovered != nil {
		when = "was re-created by `flakeid recover` on " + f.Recovered.At.UTC().Format("2006-01-02 15:04:05 MST")
	}
	var held []string
	if slices.Contains(f.Kinds, Workers) {
		held = append(held, "the worker ids' high-water marks")
	}
	if slices.Contains(f.Kinds, Segments) {
		held = append(held, "each segment tag's next ID")
	}
	hint := ""
	if slices.Contains(f.Kinds, Segments) {
		hint = " with --tag-floor TAG=N for each tag (N above the highest ID it ever issued)"
	}
	return fmt.Errorf("%w: %s %s and is gone (%s lists it)\n"+
		"  starting afresh in its place could reissue IDs: %s were in it\n"+
		"  to recover: if it was moved, move it back; otherwise stop every flakeid using %s and run `flakeid recover --data-dir %s`%s (see docs/OPERATIONS.md)",
		ErrMissing, path, when, MarkerName, strings.Join(held, " and "), d.path, d.path, hint)
}

// Update changes the marker under the directory's marker lock: fn changes
// m (a new Marker when there is none) and reports whether it did; the
// marker is then written atomically. An unreadable marker is an error.
func (d *Dir) Update(fn func(m *Marker) bool) error {
	lf, err := os.OpenFile(filepath.Join(d.path, lockName), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("locking the marker of %s: %w", d.path, err)
	}
	defer lf.Close()
	if err := syscall.Flock(int(lf.Fd()), syscall.LOCK_EX); err != nil && !lockUnsupported(err) {
		return fmt.Errorf("locking the marker of %s: %w", d.path, err)
	}
	m, ok, err := d.Read()
	if err != nil {
		return err
	}
	if !ok {
		m = Marker{Version: 1, Created: d.now().UTC()}
	}
	if !fn(&m) {
		return nil
	}
	return d.write(m)
}

// write writes the marker atomically: a temporary file, synced, renamed
// over the marker.
func (d *Dir) write(m Marker) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(d.path, "."+MarkerName+".new-*")
	if err != nil {
		return fmt.Errorf("writing the marker of %s: %w", d.path, err)
	}
	defer os.Remove(f.Name())
	_, err = f.Write(append(b, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), filepath.Join(d.path, MarkerName))
	}
	if err != nil {
		return fmt.Errorf("writing the marker of %s: %w", d.path, err)
	}
	syncDir(d.path)
	return nil
}

func syncDir(path string) {
	if f, err := os.Open(path); err == nil {
		_ = f.Sync()
		f.Close()
	}
}

// MoveAside renames the file name to "<name>.damaged-<UTC time>" (never
// deleting anything) and returns the new name; an unused suffix is added
// when that name is taken. Only a recovery (Lock) may call it.
func (d *Dir) MoveAside(name string) (string, error) {
	stamp := d.now().UTC().Format("20060102T150405Z")
	for i := 0; ; i++ {
		aside := name + ".damaged-" + stamp
		if i > 0 {
			aside += fmt.Sprintf("-%d", i)
		}
		if _, err := os.Lstat(filepath.Join(d.path, aside)); !errors.Is(err, fs.ErrNotExist) {
			if err != nil {
				return "", err
			}
			continue
		}
		if err := os.Rename(filepath.Join(d.path, name), filepath.Join(d.path, aside)); err != nil {
			return "", fmt.Errorf("moving %s aside: %w", filepath.Join(d.path, name), err)
		}
		syncDir(d.path)
		return aside, nil
	}
}

// Recovered records in the marker that the file name was re-created with
// kinds by a recovery, replacing its entry. An unreadable marker is moved
// aside first (see ResetMarker).
func (d *Dir) Recovered(name string, kinds []string, r Recovery) error {
	return d.Update(func(m *Marker) bool {
		f := File{Name: name, Kinds: slices.Clone(kinds), Created: r.At.UTC(), Recovered: &r}
		if old := m.file(name); old != nil {
			*old = f
		} else {
			m.Files = append(m.Files, f)
		}
		return true
	})
}

// Adopt records the existing file name of kinds in the marker, as Use does
// for a file found without an entry.
func (d *Dir) Adopt(name string, kinds []string) error {
	return d.Update(func(m *Marker) bool {
		if m.file(name) != nil {
			return false
		}
		m.Files = append(m.Files, File{Name: name, Kinds: slices.Clone(kinds), Created: d.now().UTC(), Adopted: true})
		return true
	})
}

// ResetMarker moves an unreadable marker aside (MoveAside), so that the
// next Update starts a new one, and returns its new name.
func (d *Dir) ResetMarker() (string, error) {
	return d.MoveAside(MarkerName)
}
