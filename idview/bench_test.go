package idview

import (
	"encoding/binary"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/flakeid/flakeid/snowflake"
)

// BenchmarkText is the cost of an ID's UUID-shaped text forms (snowflake's
// BenchmarkText has the plain ones): each appends one ID's text to a reused buffer.
// The UUID forms include building the UUID (the view's arithmetic and 80
// bits from a ChaCha8 generator, as the server draws them).
func BenchmarkText(b *testing.B) {
	l := snowflake.DefaultLayout()
	id, _ := l.Compose(snowflake.Parts{Tick: 60_000_000_000, Datacenter: 3, Worker: 17, Sequence: 42})
	v, err := New(l)
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.NewChaCha8([32]byte{1})
	buf := make([]byte, 0, 64)
	uuidText := func(f Form, prefix string) func() {
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
	l := snowflake.Layout{TimeBits: 41, SequenceBits: 22}
	g, err := snowflake.New(snowflake.Settings{Layout: l})
	if err != nil {
		b.Fatal(err)
	}
	v, _ := New(l)
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
