package bench

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	bwsnowflake "github.com/bwmarrin/snowflake"
	"github.com/flakeid/flakeid/snowflake"
)

// goroutineCounts are the numbers of goroutines that call one generator at
// once in BenchmarkNext.
var goroutineCounts = []int{1, 8, 64}

var sink atomic.Int64

// BenchmarkNext runs one suite over every implementation of Impls:
// BenchmarkNext/<impl>/g=<n> has exactly n goroutines share one generator
// and b.N calls between them. ns/op is wall time per call (per batch for
// flakeid-nextn); ids/s and ns/id count IDs, so they are comparable across
// implementations.
func BenchmarkNext(b *testing.B) {
	for _, im := range Impls() {
		b.Run(im.Name, func(b *testing.B) {
			for _, g := range goroutineCounts {
				b.Run(fmt.Sprintf("g=%d", g), func(b *testing.B) { runNext(b, im, g) })
			}
		})
	}
}

func runNext(b *testing.B, im Impl, goroutines int) {
	factory, err := im.New()
	if err != nil {
		b.Fatal(err)
	}
	var (
		start = make(chan struct{})
		ready sync.WaitGroup
		done  sync.WaitGroup
		ids   atomic.Int64
		fail  atomic.Value
	)
	for w := range goroutines {
		ops := b.N / goroutines
		if w < b.N%goroutines {
			ops++
		}
		c := factory()
		ready.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			ready.Done()
			<-start
			n, x, err := loop(c, ops)
			if err != nil {
				fail.CompareAndSwap(nil, err)
			}
			ids.Add(n)
			sink.Add(x)
		}()
	}
	ready.Wait()
	b.ResetTimer()
	close(start)
	done.Wait()
	b.StopTimer()
	if err, _ := fail.Load().(error); err != nil {
		b.Fatal(err)
	}
	sec := b.Elapsed().Seconds()
	b.ReportMetric(float64(ids.Load())/sec, "ids/s")
	b.ReportMetric(sec*1e9/float64(ids.Load()), "ns/id")
}

// loop makes ops calls of c and returns the IDs obtained and a value
// depending on them.
func loop(c Caller, ops int) (n, x int64, err error) {
	switch {
	case c.Int != nil:
		for range ops {
			id, err := c.Int()
			if err != nil {
				return n, x, err
			}
			x ^= id
		}
		return int64(ops), x, nil
	case c.Batch != nil:
		for range ops {
			first, k, err := c.Batch()
			if err != nil {
				return n, x, err
			}
			x ^= first
			n += int64(k)
		}
		return n, x, nil
	default:
		var buf [20]byte
		for range ops {
			if err := c.Bytes(&buf); err != nil {
				return n, x, err
			}
			x ^= int64(buf[19]) ^ int64(buf[15]) ^ int64(buf[11])
		}
		return int64(ops), x, nil
	}
}

// BenchmarkClockRead is one time.Now(), the baseline of the target "NextID
// costs no more than one clock read + 15 ns".
func BenchmarkClockRead(b *testing.B) {
	var x int64
	for b.Loop() {
		x ^= time.Now().UnixNano()
	}
	sink.Add(x)
}

// BenchmarkClockMono is one monotonic-only read, time.Since on a reading
// that carries one: what the generator itself reads (cheaper than time.Now,
// which also reads the wall clock).
func BenchmarkClockMono(b *testing.B) {
	anchor := time.Now()
	var x int64
	for b.Loop() {
		x ^= int64(time.Since(anchor))
	}
	sink.Add(x)
}

// BenchmarkOverhead measures, in one goroutine, blocks of 1024 time.Now()
// reads, 1024 monotonic reads (time.Since) and 1024 NextID calls on the
// wide layout, interleaved, so that the three costs are taken in the same
// moments of a noisy machine and their differences are meaningful. It
// reports each cost per call and NextID minus each clock read.
func BenchmarkOverhead(b *testing.B) {
	g, err := snowflake.New(snowflake.Settings{Layout: WideLayout()})
	if err != nil {
		b.Fatal(err)
	}
	const block = 1024
	anchor := time.Now()
	var (
		tNow, tMono, tGen time.Duration
		x                 int64
	)
	for b.Loop() {
		t0 := time.Now()
		for range block {
			x ^= time.Now().UnixNano()
		}
		t1 := time.Now()
		for range block {
			x ^= int64(time.Since(anchor))
		}
		t2 := time.Now()
		for range block {
			id, err := g.NextID()
			if err != nil {
				b.Fatal(err)
			}
			x ^= int64(id)
		}
		t3 := time.Now()
		tNow += t1.Sub(t0)
		tMono += t2.Sub(t1)
		tGen += t3.Sub(t2)
	}
	sink.Add(x)
	per := func(d time.Duration) float64 { return float64(d) / float64(b.N*block) }
	b.ReportMetric(per(tNow), "now-ns")
	b.ReportMetric(per(tMono), "mono-ns")
	b.ReportMetric(per(tGen), "nextid-ns")
	b.ReportMetric(per(tGen)-per(tNow), "nextid-minus-now-ns")
	b.ReportMetric(per(tGen)-per(tMono), "nextid-minus-mono-ns")
}

// BenchmarkNextNUnbound is one NextN(4096) call on a layout with a 32-bit
// sequence, which no rate reached here exhausts (the 22-bit wide layout
// holds 1024 such batches per millisecond, so BenchmarkNext/flakeid-nextn
// measures that cap). ns/id is the reservation cost per ID.
func BenchmarkNextNUnbound(b *testing.B) {
	l := snowflake.Layout{TimeBits: 31, SequenceBits: 32, Epoch: time.Now().Add(-time.Hour).Truncate(time.Millisecond)}
	g, err := snowflake.New(snowflake.Settings{Layout: l})
	if err != nil {
		b.Fatal(err)
	}
	var ids, x int64
	for b.Loop() {
		bt, err := g.NextN(BatchSize)
		if err != nil {
			b.Fatal(err)
		}
		ids += int64(bt.Count)
		x ^= int64(bt.First)
	}
	sink.Add(x)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(ids), "ns/id")
}

// BenchmarkDirect calls the integer generators without the suite's closure,
// from one goroutine.
func BenchmarkDirect(b *testing.B) {
	for _, bc := range []struct {
		name   string
		layout snowflake.Layout
	}{{"flakeid", snowflake.Layout{}}, {"flakeid-wide", WideLayout()}} {
		b.Run(bc.name, func(b *testing.B) {
			g, err := snowflake.New(snowflake.Settings{Layout: bc.layout})
			if err != nil {
				b.Fatal(err)
			}
			var x snowflake.ID
			for b.Loop() {
				id, err := g.NextID()
				if err != nil {
					b.Fatal(err)
				}
				x ^= id
			}
			sink.Add(int64(x))
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ids/s")
		})
	}
	b.Run("bwmarrin", func(b *testing.B) {
		n, err := bwsnowflake.NewNode(1)
		if err != nil {
			b.Fatal(err)
		}
		var x bwsnowflake.ID
		for b.Loop() {
			x ^= n.Generate()
		}
		sink.Add(int64(x))
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ids/s")
	})
}

// BenchmarkNextNAppend reserves 4096 IDs with NextN on the wide layout and
// also writes each one to a slice with Batch.AppendTo, so ns/id includes
// handing every ID out.
func BenchmarkNextNAppend(b *testing.B) {
	g, err := snowflake.New(snowflake.Settings{Layout: WideLayout()})
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]snowflake.ID, 0, BatchSize)
	var ids int64
	for b.Loop() {
		buf = buf[:0]
		for len(buf) < BatchSize {
			bt, err := g.NextN(BatchSize - len(buf))
			if err != nil {
				b.Fatal(err)
			}
			buf = bt.AppendTo(buf)
		}
		ids += int64(len(buf))
	}
	sink.Add(int64(buf[len(buf)-1]))
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(ids), "ns/id")
}
