package snowflake

import (
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// wideLayout is a layout whose 22-bit sequence does not bind at any rate a
// benchmark reaches, to measure the generator's own cost.
func wideLayout() Layout {
	return Layout{TimeBits: 41, SequenceBits: 22, Epoch: defaultEpoch()}
}

func BenchmarkNextID(b *testing.B) {
	for _, bc := range []struct {
		name   string
		layout Layout
	}{{"default", DefaultLayout()}, {"wide", wideLayout()}} {
		b.Run(bc.name, func(b *testing.B) {
			g, err := New(Settings{Layout: bc.layout})
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if _, err := g.NextID(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ids/s")
		})
	}
}

func BenchmarkNextIDParallel(b *testing.B) {
	for _, bc := range []struct {
		name   string
		layout Layout
	}{{"default", DefaultLayout()}, {"wide", wideLayout()}} {
		b.Run(bc.name, func(b *testing.B) {
			g, err := New(Settings{Layout: bc.layout})
			if err != nil {
				b.Fatal(err)
			}
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := g.NextID(); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ids/s")
		})
	}
}

func BenchmarkNextN(b *testing.B) {
	g, err := New(Settings{Layout: wideLayout()})
	if err != nil {
		b.Fatal(err)
	}
	const n = 4096
	for b.Loop() {
		left := n
		for left > 0 {
			bt, err := g.NextN(left)
			if err != nil {
				b.Fatal(err)
			}
			left -= bt.Count
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/id")
}

// BenchmarkClockRead is the cost of one read of the generator's clock, the
// baseline NextID is measured against.
func BenchmarkClockRead(b *testing.B) {
	c := newClock(nil, defaultEpoch().UnixNano(), int64(time.Millisecond))
	var sink atomic.Int64
	for b.Loop() {
		sink.Store(c.ns())
	}
}

// BenchmarkText is the cost of an ID's plain text forms: each appends one
// ID's text to a reused buffer (idview's BenchmarkText adds the UUID-shaped
// ones).
func BenchmarkText(b *testing.B) {
	l := DefaultLayout()
	id, _ := l.Compose(Parts{Tick: 60_000_000_000, Datacenter: 3, Worker: 17, Sequence: 42})
	buf := make([]byte, 0, 64)
	for _, tc := range []struct {
		name string
		do   func()
	}{
		{"decimal", func() { buf = strconv.AppendInt(buf[:0], int64(id), 10) }},
		{"base32", func() { buf = append(buf[:0], id.Base32()...) }},
		{"base58", func() { buf = append(buf[:0], id.Base58()...) }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				tc.do()
			}
		})
	}
}
