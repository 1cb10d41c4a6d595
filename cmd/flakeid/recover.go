package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/flakeid/flakeid/backend/bolt"
	"github.com/flakeid/flakeid/internal/datadir"
	"github.com/flakeid/flakeid/segment"
	"github.com/flakeid/flakeid/worker"
)

// recoverCmd starts the damaged or lost state files of a data directory
// afresh, past floors that no ID issued before can reach.
type recoverCmd struct {
	TagFloor    map[string]int64 `placeholder:"TAG=N" help:"Re-create TAG in the recovered segment store with N as the next ID it hands out; repeat for every tag you want back. N must be above the highest ID the tag ever issued: the positions were in the lost file, so take it from where the IDs went (e.g. SELECT max(id) in the application's database) and add a margin."`
	TagFloorAll int64            `placeholder:"N" help:"Make N the lowest next ID of every tag of the recovered segment store: the --tag-floor tags and every tag created later (tags create, --auto-create-tags). N must be above the highest ID any tag ever issued."`
	TagStep     int64            `default:"1000" placeholder:"N" help:"Step of the tags --tag-floor re-creates, 1–2^31−1."`
	Margin      time.Duration    `placeholder:"DURATION" help:"How far past the later of now and the damaged file's last change the recovered worker coordinator's floor lies: no worker id issues before it. At least the default reservation (3s) + the default --max-clock-skew (1s), the default; give the nodes' --quarantine if they ran with a larger --reserve-ahead or --max-clock-skew."`
	Force       []string         `placeholder:"FILE" help:"Start this state file (e.g. segments.db) afresh too, although it looks intact: one restored from an old backup. Repeatable."`
	Data        dataFlags        `embed:""`
}

// stateFile is one state file recover looks at.
type stateFile struct {
	name   string
	kinds  []string
	listed bool // in the marker

	exists bool
	mtime  time.Time
	found  string // what is wrong; "" when intact
}

// Run recovers the data directory.
func (c *recoverCmd) Run(ctx context.Context, out *streams) error {
	def := worker.DefaultConfig()
	least := def.ReserveAhead + def.MaxClockSkew
	margin := c.Margin
	switch {
	case margin == 0:
		margin = least
	case margin < least || margin > 24*time.Hour:
		return fmt.Errorf("--margin %v: want %v (the reservation %v + the default max clock skew %v) to 24h", margin, least, def.ReserveAhead, def.MaxClockSkew)
	}
	if c.TagStep < 1 || c.TagStep > segment.MaxStep {
		return fmt.Errorf("--tag-step %d: want 1 to %d", c.TagStep, segment.MaxStep)
	}
	for tag, n := range c.TagFloor {
		if err := segment.ValidName(tag); err != nil {
			return fmt.Errorf("--tag-floor %s=%d: %w", tag, n, err)
		}
		if n < 1 {
			return fmt.Errorf("--tag-floor %s=%d: the floor is the next ID the tag hands out, at least 1", tag, n)
		}
	}
	if c.TagFloorAll < 0 {
		return fmt.Errorf("--tag-floor-all %d: want at least 1", c.TagFloorAll)
	}
	dir, err := c.Data.dir()
	if err != nil {
		return err
	}
	d, err := datadir.Lock(dir)
	if err != nil {
		return err
	}
	defer d.Close()

	m, _, merr := d.Read()
	if merr != nil && !errors.Is(merr, datadir.ErrMarker) {
		return merr
	}
	files, err := c.inspect(ctx, dir, m)
	if err != nil {
		return err
	}
	var broken []*stateFile
	var segs *stateFile // a segment store to recover
	for _, f := range files {
		if f.found != "" {
			broken = append(broken, f)
			if slices.Contains(f.kinds, datadir.Segments) {
				segs = f
			}
		}
	}
	floors := len(c.TagFloor) > 0 || c.TagFloorAll > 0
	switch {
	case segs != nil && !floors:
		return fmt.Errorf("the segment store %s is to be recovered (%s), and its tags' positions are lost with it: give --tag-floor TAG=N for every tag you want back, or --tag-floor-all N, with N above the highest ID the tag ever issued (e.g. from the application's database); nothing was changed",
			filepath.Join(dir, segs.name), segs.found)
	case segs == nil && floors:
		return fmt.Errorf("--tag-floor and --tag-floor-all apply to a segment store being recovered, and no segment store in %s needs it (see --force); nothing was changed", dir)
	}

	w := out.stdout
	fmt.Fprintf(w, "flakeid recover: %s\n", dir)
	if !d.Locked() {
		fmt.Fprintf(w, "  warning: this file system has no locks: make sure no flakeid uses %s\n", dir)
	}
	if merr != nil {
		aside, err := d.ResetMarker()
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "  %s: unreadable, moved aside to %s; a new one lists the files below\n", datadir.MarkerName, aside)
	}
	now := time.Now()
	for _, f := range files {
		if f.found != "" {
			if err := c.recreate(ctx, d, f, now, margin, w); err != nil {
				return err
			}
			continue
		}
		fmt.Fprintf(w, "  %s: intact, kept\n", f.name)
		if !f.listed {
			if err := d.Adopt(f.name, f.kinds); err != nil {
				return err
			}
		}
	}
	if len(broken) == 0 {
		fmt.Fprintf(w, "nothing to recover\n")
		return nil
	}
	fmt.Fprintf(w, "done: the nodes may start again\n")
	return nil
}

// inspect lists the state files of the directory — those the marker lists,
// and the default workers.db and segments.db found without an entry — and
// finds what is wrong with each.
func (c *recoverCmd) inspect(ctx context.Context, dir string, m datadir.Marker) ([]*stateFile, error) {
	var files []*stateFile
	for _, f := range m.Files {
		files = append(files, &stateFile{name: f.Name, kinds: f.Kinds, listed: true})
	}
	for name, kind := range map[string]string{"workers.db": datadir.Workers, "segments.db": datadir.Segments} {
		if _, ok := m.File(name); ok {
			continue
		}
		if _, err := os.Lstat(filepath.Join(dir, name)); err == nil {
			files = append(files, &stateFile{name: name, kinds: []string{kind}})
		}
	}
	slices.SortFunc(files, func(a, b *stateFile) int { return strings.Compare(a.name, b.name) })
	for _, name := range c.Force {
		if !slices.ContainsFunc(files, func(f *stateFile) bool { return f.name == name }) {
			return nil, fmt.Errorf("--force %s: not a state file of %s (it has: %s)", name, dir, names(files))
		}
	}
	for _, f := range files {
		path := filepath.Join(dir, f.name)
		fi, err := os.Lstat(path)
		if errors.Is(err, fs.ErrNotExist) {
			if entry, _ := m.File(f.name); f.listed {
				f.found = "gone (created on " + entry.Created.UTC().Format("2006-01-02 15:04:05 MST") + ")"
			}
			continue
		}
		if err != nil {
			return nil, err
		}
		f.exists, f.mtime = true, fi.ModTime()
		if fileLocked(path) {
			return nil, fmt.Errorf("%s is locked by another process: stop every flakeid using %s first; nothing was changed", path, dir)
		}
		err = bolt.CheckFile(ctx, path)
		switch {
		case errors.Is(err, bolt.ErrDamaged):
			first, _, _ := strings.Cut(err.Error(), "\n")
			f.found = "damaged: " + strings.TrimPrefix(first, bolt.ErrDamaged.Error()+": "+path+": ")
		case err != nil:
			return nil, err
		case slices.Contains(c.Force, f.name):
			f.found = "intact, started afresh as --force asks"
		}
	}
	return files, nil
}

// recreate moves the file aside and creates a new one past the floors.
func (c *recoverCmd) recreate(ctx context.Context, d *datadir.Dir, f *stateFile, now time.Time, margin time.Duration, w io.Writer) error {
	out := &strings.Builder{}
	fmt.Fprintf(out, "  %s: %s\n", f.name, f.found)
	rec := datadir.Recovery{At: now.UTC(), Found: f.found}
	if f.exists {
		aside, err := d.MoveAside(f.name)
		if err != nil {
			return err
		}
		rec.Aside = aside
		fmt.Fprintf(out, "    moved aside to %s (kept; delete it when you no longer need it)\n", aside)
	}
	var floors []string
	if slices.Contains(f.kinds, datadir.Workers) {
		from, why := now, "now"
		if f.mtime.After(from) {
			from, why = f.mtime, "the old file's last change, later than this machine's clock now: did the clock go back?"
		}
		floor := from.Add(margin).Truncate(time.Millisecond).Add(time.Millisecond)
		ws, err := bolt.OpenWorkersForRecovery(ctx, d, f.name)
		if err != nil {
			return err
		}
		defer ws.Close()
		if err := ws.RaiseFloor(ctx, floor); err != nil {
			return err
		}
		floors = append(floors, "worker floor "+stamp(floor))
		fmt.Fprintf(out, "    new %s: worker floor %s (%s + %v): no worker id issues before it\n", f.name, stamp(floor), why, margin)
	}
	if slices.Contains(f.kinds, datadir.Segments) {
		s, err := bolt.OpenSegmentsForRecovery(ctx, d, f.name)
		if err != nil {
			return err
		}
		defer s.Close()
		if c.TagFloorAll > 0 {
			if err := s.RaiseFloor(ctx, c.TagFloorAll); err != nil {
				return err
			}
			floors = append(floors, fmt.Sprintf("every tag from %d", c.TagFloorAll))
			fmt.Fprintf(out, "    new %s: every tag, and every tag created later, hands out IDs from %d on\n", f.name, c.TagFloorAll)
		}
		tags := make([]string, 0, len(c.TagFloor))
		for tag := range c.TagFloor {
			tags = append(tags, tag)
		}
		slices.Sort(tags)
		for _, tag := range tags {
			next := max(c.TagFloor[tag], c.TagFloorAll)
			t := segment.Tag{Name: tag, Step: c.TagStep, MaxID: next,
				Description: fmt.Sprintf("re-created by flakeid recover on %s from the floor %d", now.UTC().Format(time.DateOnly), next)}
			if err := s.Create(ctx, t); err != nil {
				return err
			}
			floors = append(floors, fmt.Sprintf("tag %s from %d", tag, next))
			fmt.Fprintf(out, "    new %s: tag %s hands out IDs from %d on (step %d)\n", f.name, tag, next, c.TagStep)
		}
	}
	rec.Floor = strings.Join(floors, "; ")
	if err := d.Recovered(f.name, f.kinds, rec); err != nil {
		return err
	}
	_, err := io.WriteString(w, out.String())
	return err
}

// names lists the files' names.
func names(files []*stateFile) string {
	var n []string
	for _, f := range files {
		n = append(n, f.name)
	}
	if len(n) == 0 {
		return "none"
	}
	return strings.Join(n, ", ")
}

// fileLocked reports whether another process holds the file's lock (bbolt
// locks its file during every operation of a flakeid process).
func fileLocked(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return errors.Is(err, syscall.EWOULDBLOCK)
	}
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return false
}
