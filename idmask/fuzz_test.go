package idmask

import (
	"errors"
	"math"
	"strings"
	"testing"
)

// fuzzMaskers are the maskers the fuzz targets use: both widths, and a
// keyring holding them under two key ids each.
type fuzzSet struct {
	m    *Masker
	ring *Keyring
}

func fuzzSets(t testing.TB) []fuzzSet {
	var sets []fuzzSet
	for _, bits := range []int{Bits63, Bits53} {
		m := mustNew(t, keyFIPS, 4, bits)
		sets = append(sets, fuzzSet{m, mustKeyring(t, m, mustNew(t, keyCount, 0, bits))})
	}
	return sets
}

// FuzzRoundTrip checks that Unmask inverts Mask, and Mask inverts Unmask,
// for any value of either space, and that the text forms read back.
func FuzzRoundTrip(f *testing.F) {
	for _, x := range []uint64{0, 1, 2, 1<<53 - 1, 1 << 53, 1<<63 - 1, 1 << 63, math.MaxUint64, 0x5555555555555555} {
		f.Add(x)
	}
	sets := fuzzSets(f)
	f.Fuzz(func(t *testing.T, x uint64) {
		for _, s := range sets {
			m := s.m
			id := int64(x >> (64 - m.Bits())) // the top bits, so every value of the space is reachable
			v, err := m.Mask(id)
			if err != nil || v < 0 || v>>m.Bits() != 0 {
				t.Fatalf("%d bits: Mask(%d) = %d, %v", m.Bits(), id, v, err)
			}
			if back, err := m.Unmask(v); err != nil || back != id {
				t.Fatalf("%d bits: Unmask(Mask(%d)) = %d, %v", m.Bits(), id, back, err)
			}
			u, err := m.Unmask(id)
			if err != nil {
				t.Fatal(err)
			}
			if again, _ := m.Mask(u); again != id {
				t.Fatalf("%d bits: Mask(Unmask(%d)) = %d", m.Bits(), id, again)
			}
			for _, f := range []Form{Base32, Base62} {
				txt, err := s.ring.MaskText(id, f)
				if err != nil || len(txt) != m.TextLen(f) {
					t.Fatalf("%d bits: MaskText(%d, %v) = %q, %v", m.Bits(), id, f, txt, err)
				}
				if back, err := s.ring.UnmaskText(txt); err != nil || back != id {
					t.Fatalf("%d bits: UnmaskText(%q) = %d, %v; want %d", m.Bits(), txt, back, err, id)
				}
			}
			// Out of range values fail, not wrap.
			if _, err := m.Mask(^id); !errors.Is(err, ErrOutOfRange) {
				t.Fatalf("Mask(%d): %v", ^id, err)
			}
		}
	})
}

// FuzzUnmaskText feeds arbitrary strings to UnmaskText: it must not panic,
// every error must wrap ErrInvalidText or ErrUnknownKeyID, and a text it
// accepts must be, up to base32's case and aliases, exactly what MaskText
// writes for the ID it returns — so garbage is never silently accepted as
// something MaskText would not have written.
func FuzzUnmaskText(f *testing.F) {
	sets := fuzzSets(f)
	for _, s := range sets {
		for _, id := range []int64{0, 1, maxID(s.m.Bits())} {
			for _, form := range []Form{Base32, Base62} {
				txt, _ := s.m.MaskText(id, form)
				f.Add(txt)
				f.Add(strings.ToLower(txt))
				f.Add(txt[:len(txt)-1] + "*")
			}
		}
	}
	f.Add("")
	f.Add("0000000000000000")
	f.Add("ZZZZZZZZZZZZZZZ")
	f.Add("zzzzzzzzzzzzz")
	f.Add("\xff\xfe")
	f.Fuzz(func(t *testing.T, in string) {
		for _, s := range sets {
			for _, form := range []Form{0, Base32, Base62} {
				var (
					id  int64
					err error
				)
				if form == 0 {
					id, err = s.ring.UnmaskText(in)
				} else {
					id, err = s.ring.UnmaskTextAs(in, form)
				}
				if err != nil {
					if !errors.Is(err, ErrInvalidText) && !errors.Is(err, ErrUnknownKeyID) {
						t.Fatalf("UnmaskText(%q): %v wraps neither ErrInvalidText nor ErrUnknownKeyID", in, err)
					}
					continue
				}
				if id < 0 || id>>s.m.Bits() != 0 {
					t.Fatalf("UnmaskText(%q) = %d, out of range", in, id)
				}
				got := form
				if got == 0 {
					got = Base32
					if len(in) == s.m.TextLen(Base62) {
						got = Base62
					}
				}
				keyID := in[0]
				var m *Masker
				for _, cand := range []*Masker{s.ring.Current(), s.ring.byID[0]} {
					if txt, _ := cand.MaskText(id, got); canonical(in, got) == txt {
						m = cand
					}
				}
				if m == nil {
					t.Fatalf("%d bits: UnmaskText(%q) = %d, but no key writes that text for %d (key character %q)",
						s.m.Bits(), in, id, id, keyID)
				}
			}
		}
	})
}

// canonical is how MaskText would write a text UnmaskText accepts: base32 in
// upper case with the aliases resolved.
func canonical(s string, f Form) string {
	if f == Base62 {
		return s
	}
	return strings.NewReplacer("I", "1", "L", "1", "O", "0").Replace(strings.ToUpper(s))
}
