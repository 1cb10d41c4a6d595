package idmask

import "testing"

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
