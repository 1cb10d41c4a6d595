package snowflake

import (
	"encoding/binary"
	"math/rand/v2"
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

// BenchmarkText is the cost of an ID's text forms, the UUID-shaped ones
// beside the plain ones: each appends one ID's text to a reused buffer.
// The UUID forms include building the UUID (the view's arithmetic and 80
// bits from a ChaCha8 generator, as the server draws them).
func BenchmarkText(b *testing.B) {
	l := DefaultLayout()
	id, _ := l.Compose(Parts{Tick: 60_000_000_000, Datacenter: 3, Worker: 17, Sequence: 42})
	v, err := NewUUIDView(l)
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.NewChaCha8([32]byte{1})
	buf := make([]byte, 0, 64)
	uuidText := func(f UUIDForm, prefix string) func() {
		return func() {
			var random [10]byte
			binary.LittleEndian.PutUint64(random[2:], rng.Uint64())
			binary.LittleEndian.PutUint16(random[:2], uint16(rng.Uint64()))
			u, _ := v.UUID(id, random)
			buf = u.AppendForm(buf[:0], f, prefix)
		}
	}
	for _, tc := range []struct {
		name string
		do   func()
	}{
		{"decimal", func() { buf = strconv.AppendInt(buf[:0], int64(id), 10) }},
		{"base32", func() { buf = append(buf[:0], id.Base32()...) }},
		{"base58", func() { buf = append(buf[:0], id.Base58()...) }},
		{"uuid7", uuidText(FormUUID, "")},
		{"typeid", uuidText(FormTypeID, "order")},
		{"ulid", uuidText(FormULID, "")},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				tc.do()
			}
		})
	}
}

// BenchmarkNextText is an issued ID and its text: NextID then the decimal
// or the UUIDv7 text, so that the UUID's cost shows on top of the ID's.
func BenchmarkNextText(b *testing.B) {
	l := wideLayout()
	g, err := New(Settings{Layout: l})
	if err != nil {
		b.Fatal(err)
	}
	v, _ := NewUUIDView(l)
	rng := rand.NewChaCha8([32]byte{1})
	buf := make([]byte, 0, 64)
	b.Run("decimal", func(b *testing.B) {
		for b.Loop() {
			id, _ := g.NextID()
			buf = strconv.AppendInt(buf[:0], int64(id), 10)
		}
	})
	b.Run("uuid7", func(b *testing.B) {
		for b.Loop() {
			id, _ := g.NextID()
			var random [10]byte
			binary.LittleEndian.PutUint64(random[2:], rng.Uint64())
			u, _ := v.UUID(id, random)
			buf = u.AppendForm(buf[:0], FormUUID, "")
		}
	})
}
