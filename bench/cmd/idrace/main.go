// Command idrace has every ID generator of package bench issue IDs for a
// fixed wall-clock window (one second by default) from 1, 8 and 64
// goroutines, counts them, checks them for duplicates and prints markdown
// tables: IDs per second, the fraction of the theoretical ceiling for the
// snowflake-type generators, and duplicates. With -lowtraffic it also draws
// one ID about every millisecond from the snowflake-type generators and
// reports the fraction of even IDs and a chi-square of id mod 16.
//
//	go run ./cmd/idrace -lowtraffic
//	go run ./cmd/idrace -impl flakeid,bwmarrin -goroutines 1,64 -count 3
package main

import (
	"cmp"
	"encoding/binary"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flakeid/flakeid/bench"
	"github.com/flakeid/flakeid/bench/load"
)

// parityImpls are the generators the low-traffic check covers.
var parityImpls = []string{"flakeid", "bwmarrin", "sonyflake", "yitter"}

func main() {
	var (
		implFlag  = flag.String("impl", "", "comma-separated implementations (default all): "+strings.Join(names(bench.Impls()), ","))
		gFlag     = flag.String("goroutines", "1,8,64", "comma-separated goroutine counts")
		duration  = flag.Duration("duration", time.Second, "length of each window")
		count     = flag.Int("count", 1, "windows per implementation and goroutine count; the table shows the median")
		low       = flag.Bool("lowtraffic", false, "also run the low-traffic parity check")
		lowLength = flag.Duration("lowtraffic-duration", 2*time.Second, "length of the low-traffic check per implementation")
	)
	flag.Parse()
	if err := run(*implFlag, *gFlag, *duration, *count, *low, *lowLength); err != nil {
		fmt.Fprintln(os.Stderr, "idrace:", err)
		os.Exit(1)
	}
}

func names(impls []bench.Impl) []string {
	var out []string
	for _, im := range impls {
		out = append(out, im.Name)
	}
	return out
}

func splitList(s string) []string {
	var out []string
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func run(implList, gList string, duration time.Duration, count int, low bool, lowLength time.Duration) error {
	impls, err := bench.Select(splitList(implList))
	if err != nil {
		return err
	}
	var gs []int
	for _, f := range splitList(gList) {
		g, err := strconv.Atoi(f)
		if err != nil || g < 1 {
			return fmt.Errorf("bad goroutine count %q", f)
		}
		gs = append(gs, g)
	}
	if duration <= 0 || count < 1 {
		return fmt.Errorf("want a positive -duration and -count")
	}
	fmt.Printf("idrace: %s %s/%s, GOMAXPROCS %d, NumCPU %d, window %v × %d, %s\n\n",
		runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.GOMAXPROCS(0), runtime.NumCPU(),
		duration, count, time.Now().UTC().Format(time.RFC3339))

	// Goroutine count outermost, so that the implementations compared at one
	// count run close together in time.
	res := map[string]map[int][]window{}
	for range count {
		for _, g := range gs {
			for _, im := range impls {
				w, err := race(im, g, duration)
				if err != nil {
					return fmt.Errorf("%s g=%d: %w", im.Name, g, err)
				}
				if res[im.Name] == nil {
					res[im.Name] = map[int][]window{}
				}
				res[im.Name][g] = append(res[im.Name][g], w)
				fmt.Fprintf(os.Stderr, "%-14s g=%-3d %12.0f IDs/s  dups %d  (%v)\n", im.Name, g, w.rate(), w.dups, w.elapsed.Round(time.Microsecond))
			}
		}
	}
	printRace(impls, gs, res)
	if low {
		fmt.Println()
		if err := lowTraffic(impls, lowLength); err != nil {
			return err
		}
	}
	return nil
}

type window struct {
	ids     int64
	dups    int64
	elapsed time.Duration
}

func (w window) rate() float64 { return float64(w.ids) / w.elapsed.Seconds() }

// chunks collects values without ever copying what it holds.
type chunks[T any] struct {
	full [][]T
	cur  []T
}

const chunkLen = 1 << 16

func (c *chunks[T]) add(v T) {
	if len(c.cur) == cap(c.cur) {
		if c.cur != nil {
			c.full = append(c.full, c.cur)
		}
		c.cur = make([]T, 0, chunkLen)
	}
	c.cur = append(c.cur, v)
}

func (c *chunks[T]) appendTo(dst []T) []T {
	for _, f := range c.full {
		dst = append(dst, f...)
	}
	return append(dst, c.cur...)
}

func (c *chunks[T]) len() int { return len(c.full)*chunkLen + len(c.cur) }

type collector struct {
	ints   chunks[int64]
	bytes  chunks[[20]byte]
	ranges chunks[bench.Range]
	ids    int64
	err    error
}

// race runs one window of im from g goroutines.
func race(im bench.Impl, g int, d time.Duration) (window, error) {
	factory, err := im.New()
	if err != nil {
		return window{}, err
	}
	gc := debug.SetGCPercent(-1) // the collected IDs hold no pointers; collect after the window
	defer func() {
		debug.SetGCPercent(gc)
		runtime.GC()
	}()
	var (
		cols  = make([]*collector, g)
		stop  atomic.Bool
		start = make(chan struct{})
		ready sync.WaitGroup
		done  sync.WaitGroup
		t0    time.Time
	)
	for i := range cols {
		c := factory()
		col := &collector{}
		cols[i] = col
		ready.Add(1)
		done.Go(func() {
			ready.Done()
			<-start
			col.err = collect(c, col, &stop, t0, d)
		})
	}
	ready.Wait()
	t0 = time.Now()
	// The timer stops goroutines blocked in a slow generator; the busy ones
	// also read the clock every few calls, in case the timer fires late.
	timer := time.AfterFunc(d, func() { stop.Store(true) })
	close(start)
	done.Wait()
	elapsed := time.Since(t0)
	timer.Stop()

	w := window{elapsed: elapsed}
	var nInts, nBytes, nRanges int
	for _, col := range cols {
		if col.err != nil {
			return w, col.err
		}
		w.ids += col.ids
		nInts += col.ints.len()
		nBytes += col.bytes.len()
		nRanges += col.ranges.len()
	}
	// Each collector holds one kind only: the shape of im's Caller.
	ints := make([]int64, 0, nInts)
	bytes := make([][20]byte, 0, nBytes)
	ranges := make([]bench.Range, 0, nRanges)
	for _, col := range cols {
		ints = col.ints.appendTo(ints)
		bytes = col.bytes.appendTo(bytes)
		ranges = col.ranges.appendTo(ranges)
		*col = collector{} // let the chunks go
	}
	w.dups = int64(bench.DupsInt64(ints)) + int64(dupsBytes(bytes)) + bench.DupsRanges(ranges)
	return w, nil
}

// collect calls c until stop is set or d has passed since t0, keeping every
// ID in col.
func collect(c bench.Caller, col *collector, stop *atomic.Bool, t0 time.Time, d time.Duration) error {
	const every = 32 // calls between clock reads
	for i := 0; ; i++ {
		if stop.Load() || i%every == 0 && time.Since(t0) >= d {
			return nil
		}
		switch {
		case c.Int != nil:
			id, err := c.Int()
			if err != nil {
				return err
			}
			col.ints.add(id)
			col.ids++
		case c.Batch != nil:
			first, n, err := c.Batch()
			if err != nil {
				return err
			}
			col.ranges.add(bench.Range{First: first, Count: n})
			col.ids += int64(n)
		default:
			var b [20]byte
			if err := c.Bytes(&b); err != nil {
				return err
			}
			col.bytes.add(b)
			col.ids++
		}
	}
}

// dupsBytes is bench.DupsBytes with a faster comparison (big-endian words).
func dupsBytes(ids [][20]byte) int {
	slices.SortFunc(ids, func(a, b [20]byte) int {
		if c := cmp.Compare(binary.BigEndian.Uint64(a[:8]), binary.BigEndian.Uint64(b[:8])); c != 0 {
			return c
		}
		if c := cmp.Compare(binary.BigEndian.Uint64(a[8:16]), binary.BigEndian.Uint64(b[8:16])); c != 0 {
			return c
		}
		return cmp.Compare(binary.BigEndian.Uint32(a[16:]), binary.BigEndian.Uint32(b[16:]))
	})
	d := 0
	for i := 1; i < len(ids); i++ {
		if ids[i] == ids[i-1] {
			d++
		}
	}
	return d
}

func median(ws []window) window {
	s := slices.Clone(ws)
	slices.SortFunc(s, func(a, b window) int { return cmp.Compare(a.rate(), b.rate()) })
	return s[len(s)/2]
}

func printRace(impls []bench.Impl, gs []int, res map[string]map[int][]window) {
	fmt.Println("| implementation | goroutines | windows | elapsed (median) | IDs (median) | IDs/s median | IDs/s min–max | % of ceiling | duplicates (all windows) |")
	fmt.Println("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, im := range impls {
		for _, g := range gs {
			ws := res[im.Name][g]
			m := median(ws)
			lo, hi := ws[0].rate(), ws[0].rate()
			var dups int64
			for _, w := range ws {
				lo, hi = min(lo, w.rate()), max(hi, w.rate())
				dups += w.dups
			}
			ceil := "–"
			if im.Ceiling > 0 {
				ceil = fmt.Sprintf("%.2f %%", 100*m.rate()/im.Ceiling)
			}
			fmt.Printf("| %s | %d | %d | %.4f s | %d | %s | %s–%s | %s | %d |\n", im.Name, g, len(ws),
				m.elapsed.Seconds(), m.ids, load.Si(m.rate()), load.Si(lo), load.Si(hi), ceil, dups)
		}
	}
	fmt.Println()
	for _, im := range impls {
		c := "none"
		if im.Ceiling > 0 {
			c = load.Si(im.Ceiling) + "/s"
		}
		fmt.Printf("- %s: %s; ceiling %s\n", im.Name, im.Note, c)
	}
	if f, b := res["flakeid"], res["bwmarrin"]; f != nil && b != nil {
		fmt.Println()
		fmt.Println("Same-run ratio flakeid / bwmarrin (median IDs/s):")
		fmt.Println()
		for _, g := range gs {
			fmt.Printf("- g=%d: %.3f× (%s / %s)\n", g, median(f[g]).rate()/median(b[g]).rate(),
				load.Si(median(f[g]).rate()), load.Si(median(b[g]).rate()))
		}
	}
}

// lowTraffic draws one ID about every millisecond for length from each
// snowflake-type generator selected and prints the parity table.
func lowTraffic(impls []bench.Impl, length time.Duration) error {
	fmt.Printf("Low traffic: one ID, then a 1 ms sleep, for %v per generator.\n\n", length)
	fmt.Printf("| implementation | IDs | even | chi-square of id mod 16 (15 df; 5 %% critical %.1f) | counts of id mod 16 |\n", bench.ChiSq15Crit05)
	fmt.Println("|---|---:|---:|---:|---|")
	for _, im := range impls {
		if !slices.Contains(parityImpls, im.Name) {
			continue
		}
		factory, err := im.New()
		if err != nil {
			return err
		}
		c := factory()
		var ids []int64
		deadline := time.Now().Add(length)
		for time.Now().Before(deadline) {
			id, err := c.Int()
			if err != nil {
				return fmt.Errorf("%s: %w", im.Name, err)
			}
			ids = append(ids, id)
			time.Sleep(time.Millisecond)
		}
		if d := bench.DupsInt64(slices.Clone(ids)); d != 0 {
			return fmt.Errorf("%s: %d duplicates at low traffic", im.Name, d)
		}
		p := bench.ParityOf(ids)
		counts := make([]string, 16)
		for i, n := range p.Residues {
			counts[i] = strconv.Itoa(n)
		}
		fmt.Printf("| %s | %d | %.1f %% | %.1f | %s |\n", im.Name, p.N, 100*p.Even, p.ChiSq, strings.Join(counts, " "))
	}
	return nil
}
