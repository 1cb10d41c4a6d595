package idmask

import (
	"fmt"
	"testing"
)

var benchKey = []byte{0x2b, 0x7e, 0x15, 0x16, 0x28, 0xae, 0xd2, 0xa6, 0xab, 0xf7, 0x15, 0x88, 0x09, 0xcf, 0x4f, 0x3c}

var (
	sinkInt  int64
	sinkText string
)

func benchMaskers(b *testing.B) []*Masker {
	b.Helper()
	var ms []*Masker
	for _, bits := range []int{Bits63, Bits53} {
		m, err := New(benchKey, 1, bits)
		if err != nil {
			b.Fatal(err)
		}
		ms = append(ms, m)
	}
	return ms
}

func BenchmarkMask(b *testing.B) {
	for _, m := range benchMaskers(b) {
		b.Run(bitsName(m), func(b *testing.B) {
			b.ReportAllocs()
			id := int64(1_000_000)
			for b.Loop() {
				v, err := m.Mask(id)
				if err != nil {
					b.Fatal(err)
				}
				sinkInt += v
				id++
			}
		})
	}
}

func BenchmarkUnmask(b *testing.B) {
	for _, m := range benchMaskers(b) {
		b.Run(bitsName(m), func(b *testing.B) {
			b.ReportAllocs()
			v := int64(1_000_000)
			for b.Loop() {
				id, err := m.Unmask(v)
				if err != nil {
					b.Fatal(err)
				}
				sinkInt += id
				v++
			}
		})
	}
}

// BenchmarkMaskText is Mask plus encoding, allocating the string.
func BenchmarkMaskText(b *testing.B) {
	for _, m := range benchMaskers(b) {
		for _, f := range []Form{Base32, Base62} {
			b.Run(bitsName(m)+"/"+f.String(), func(b *testing.B) {
				b.ReportAllocs()
				id := int64(1_000_000)
				for b.Loop() {
					s, err := m.MaskText(id, f)
					if err != nil {
						b.Fatal(err)
					}
					sinkText = s
					id++
				}
			})
		}
	}
}

// BenchmarkAppendMaskText is Mask plus encoding into a reused buffer.
func BenchmarkAppendMaskText(b *testing.B) {
	for _, m := range benchMaskers(b) {
		for _, f := range []Form{Base32, Base62} {
			b.Run(bitsName(m)+"/"+f.String(), func(b *testing.B) {
				b.ReportAllocs()
				buf := make([]byte, 0, maxTextLen)
				id := int64(1_000_000)
				for b.Loop() {
					var err error
					buf, err = m.AppendMaskText(buf[:0], id, f)
					if err != nil {
						b.Fatal(err)
					}
					id++
				}
				sinkText = string(buf)
			})
		}
	}
}

func BenchmarkUnmaskText(b *testing.B) {
	for _, m := range benchMaskers(b) {
		k, err := NewKeyring(m)
		if err != nil {
			b.Fatal(err)
		}
		for _, f := range []Form{Base32, Base62} {
			s, err := m.MaskText(1_000_000, f)
			if err != nil {
				b.Fatal(err)
			}
			b.Run(bitsName(m)+"/"+f.String(), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					id, err := k.UnmaskText(s)
					if err != nil {
						b.Fatal(err)
					}
					sinkInt += id
				}
			})
		}
	}
}

// BenchmarkMaskParallel is Mask from every P at once, sharing one Masker.
func BenchmarkMaskParallel(b *testing.B) {
	m := benchMaskers(b)[0]
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		id, sum := int64(0), int64(0)
		for pb.Next() {
			v, _ := m.Mask(id)
			sum += v
			id++
		}
		_ = sum
	})
}

func bitsName(m *Masker) string {
	if m.Bits() == Bits53 {
		return "53bit"
	}
	return "63bit"
}

// BenchmarkAESChain is the floor under Mask: ten AES-128 blocks, each
// depending on the one before, through crypto/aes as Mask calls it.
func BenchmarkAESChain(b *testing.B) {
	m := benchMaskers(b)[0]
	var buf [16]byte
	for b.Loop() {
		for range rounds {
			m.block.Encrypt(buf[:], buf[:])
		}
	}
}

// batchBenchSize is the number of IDs per call in the batch benchmarks: a
// large page, so the cost per ID is the steady state.
const batchBenchSize = 1024

// benchIDs returns n consecutive IDs from 1,000,000.
func benchIDs(n int) []int64 {
	ids := make([]int64, n)
	for i := range ids {
		ids[i] = 1_000_000 + int64(i)
	}
	return ids
}

// reportPerID reports the time per ID of a benchmark that handles ids IDs
// per iteration.
func reportPerID(b *testing.B, ids int) {
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(ids), "ns/id")
}

// BenchmarkMaskN is MaskN on batches of 16 (one batch of lanes) and 1024
// IDs; ns/id is the cost per ID.
func BenchmarkMaskN(b *testing.B) {
	for _, m := range benchMaskers(b) {
		for _, n := range []int{batchSize, batchBenchSize} {
			b.Run(fmt.Sprintf("%s/n=%d", bitsName(m), n), func(b *testing.B) {
				b.ReportAllocs()
				src, dst := benchIDs(n), make([]int64, n)
				for b.Loop() {
					if err := m.MaskN(dst, src); err != nil {
						b.Fatal(err)
					}
				}
				sinkInt += dst[0]
				reportPerID(b, n)
			})
		}
	}
}

// BenchmarkUnmaskN is UnmaskN on batches of 1024 values.
func BenchmarkUnmaskN(b *testing.B) {
	for _, m := range benchMaskers(b) {
		b.Run(fmt.Sprintf("%s/n=%d", bitsName(m), batchBenchSize), func(b *testing.B) {
			b.ReportAllocs()
			src, dst := benchIDs(batchBenchSize), make([]int64, batchBenchSize)
			for b.Loop() {
				if err := m.UnmaskN(dst, src); err != nil {
					b.Fatal(err)
				}
			}
			sinkInt += dst[0]
			reportPerID(b, batchBenchSize)
		})
	}
}

// BenchmarkAppendMaskTexts is mask plus encoding of 1024 IDs per call into a
// reused buffer, with no separator.
func BenchmarkAppendMaskTexts(b *testing.B) {
	for _, m := range benchMaskers(b) {
		for _, f := range []Form{Base32, Base62} {
			b.Run(fmt.Sprintf("%s/%v/n=%d", bitsName(m), f, batchBenchSize), func(b *testing.B) {
				b.ReportAllocs()
				ids := benchIDs(batchBenchSize)
				buf := make([]byte, 0, batchBenchSize*maxTextLen)
				for b.Loop() {
					var err error
					if buf, err = m.AppendMaskTexts(buf[:0], ids, f, ""); err != nil {
						b.Fatal(err)
					}
				}
				sinkText = string(buf[:m.TextLen(f)])
				reportPerID(b, batchBenchSize)
			})
		}
	}
}

// BenchmarkMaskNParallel is MaskN of 1024 IDs per call from every P at
// once, sharing one Masker; ns/id is wall time per ID over all Ps.
func BenchmarkMaskNParallel(b *testing.B) {
	m := benchMaskers(b)[0]
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		src, dst := benchIDs(batchBenchSize), make([]int64, batchBenchSize)
		for pb.Next() {
			_ = m.MaskN(dst, src)
		}
	})
	reportPerID(b, batchBenchSize)
}

// BenchmarkAESIndependent is the floor under MaskN: ten AES-128 blocks for
// each of 8 independent in-place chains per iteration, through crypto/aes as
// MaskN calls it, so the CPU may overlap the chains. ns/id is the time per
// ten blocks, one ID's worth.
func BenchmarkAESIndependent(b *testing.B) {
	m := benchMaskers(b)[0]
	var bufs [8][16]byte
	for i := range bufs {
		bufs[i][0] = byte(i)
	}
	for b.Loop() {
		for range rounds {
			for j := range bufs {
				m.block.Encrypt(bufs[j][:], bufs[j][:])
			}
		}
	}
	reportPerID(b, len(bufs))
}

// BenchmarkEncode is the text encoding alone: 1024 masked values per
// iteration written in form f, as AppendMaskText and AppendMaskTexts write
// them.
func BenchmarkEncode(b *testing.B) {
	for _, m := range benchMaskers(b) {
		for _, f := range []Form{Base32, Base62} {
			w, _ := m.textShape(f)
			b.Run(bitsName(m)+"/"+f.String(), func(b *testing.B) {
				buf := make([]byte, 0, batchBenchSize*maxTextLen)
				for b.Loop() {
					buf = buf[:0]
					v := uint64(1_000_000)
					for range batchBenchSize {
						buf = appendText(buf, m.keyID, v&m.max, f, w)
						v = v*0x9E3779B97F4A7C15 + 1 // values spread over the space
					}
				}
				sinkText = string(buf[:w.length])
				reportPerID(b, batchBenchSize)
			})
		}
	}
}
