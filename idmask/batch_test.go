package idmask

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// batchMaskers are maskers of both widths, and of a small width whose
// halves are unbalanced like 63 and 53 bits.
func batchMaskers(t testing.TB) []*Masker {
	return []*Masker{
		mustNew(t, keyFIPS, 3, Bits63),
		mustNew(t, keyCount, 30, Bits53),
		mustNew(t, keyOnes, 0, 17),
	}
}

// wantMasked is the batch result as the single-ID functions compute it.
func wantMasked(t testing.TB, m *Masker, src []int64, backwards bool) []int64 {
	t.Helper()
	want := make([]int64, len(src))
	for i, x := range src {
		var err error
		if backwards {
			want[i], err = m.Unmask(x)
		} else {
			want[i], err = m.Mask(x)
		}
		if err != nil {
			t.Fatalf("%d bits: single-ID call on %d: %v", m.Bits(), x, err)
		}
	}
	return want
}

// tb is the part of testing.TB that rapid.T also has.
type tb interface {
	Helper()
	Fatal(args ...any)
}

// wantTexts is AppendMaskTexts as the single-ID AppendMaskText computes it.
func wantTexts(t tb, m *Masker, prefix []byte, ids []int64, f Form, sep string) []byte {
	t.Helper()
	want := bytes.Clone(prefix)
	for i, id := range ids {
		if i > 0 {
			want = append(want, sep...)
		}
		var err error
		if want, err = m.AppendMaskText(want, id, f); err != nil {
			t.Fatal(err)
		}
	}
	return want
}

// batchInputs returns n values of m's space: edges first, then random.
func batchInputs(rng *rand.Rand, m *Masker, n int) []int64 {
	max := maxID(m.Bits())
	edges := []int64{0, max, 1, max - 1, max / 2}
	x := make([]int64, n)
	for i := range x {
		if i < len(edges) && rng.IntN(2) == 0 {
			x[i] = edges[i]
		} else {
			x[i] = int64(rng.Uint64() >> (64 - m.Bits()))
		}
	}
	return x
}

// TestMaskNMatchesMask checks MaskN, UnmaskN and AppendMaskTexts against the
// single-ID functions for every length up to a few batches, including the
// odd lengths that leave the two groups of a batch unequal, for both
// directions, in place and into another slice.
func TestMaskNMatchesMask(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, m := range batchMaskers(t) {
		for n := 0; n <= 3*batchSize+3; n++ {
			src := batchInputs(rng, m, n)
			for _, backwards := range []bool{false, true} {
				name, fn := "MaskN", m.MaskN
				if backwards {
					name, fn = "UnmaskN", m.UnmaskN
				}
				want := wantMasked(t, m, src, backwards)

				// Into a longer slice: the elements past len(src) stay.
				dst := make([]int64, n+2)
				dst[n], dst[n+1] = -7, -8
				if err := fn(dst, src); err != nil {
					t.Fatalf("%d bits: %s of %d IDs: %v", m.Bits(), name, n, err)
				}
				if !slices.Equal(dst[:n], want) || dst[n] != -7 || dst[n+1] != -8 {
					t.Fatalf("%d bits: %s(%v) = %v, want %v followed by -7 -8", m.Bits(), name, src, dst, want)
				}

				// In place.
				in := slices.Clone(src)
				if err := fn(in, in); err != nil || !slices.Equal(in, want) {
					t.Fatalf("%d bits: %s in place of %v = %v, %v; want %v", m.Bits(), name, src, in, err, want)
				}
			}

			// The round trip, through the batch functions only.
			masked := make([]int64, n)
			back := make([]int64, n)
			if err := m.MaskN(masked, src); err != nil {
				t.Fatal(err)
			}
			if err := m.UnmaskN(back, masked); err != nil || !slices.Equal(back, src) {
				t.Fatalf("%d bits: UnmaskN(MaskN(%v)) = %v, %v", m.Bits(), src, back, err)
			}

			for _, f := range []Form{Base32, Base62} {
				for _, sep := range []string{"", "\n", ", "} {
					prefix := []byte("ids: ")
					got, err := m.AppendMaskTexts(bytes.Clone(prefix), src, f, sep)
					if want := wantTexts(t, m, prefix, src, f, sep); err != nil || !bytes.Equal(got, want) {
						t.Fatalf("%d bits: AppendMaskTexts(%v, %v, %q) = %q, %v; want %q", m.Bits(), src, f, sep, got, err, want)
					}
				}
			}
		}
	}
}

// TestBatchVectors runs the known answers of testdata through the batch
// functions, all IDs of a set in one call.
func TestBatchVectors(t *testing.T) {
	vf := readVectors(t)
	for _, s := range vf.Sets {
		m := mustNew(t, mustHex(s.Key), s.KeyID, s.Bits)
		var ids, masked []int64
		var b32, b62 string
		for _, v := range s.Vectors {
			ids = append(ids, v.ID)
			masked = append(masked, v.Masked)
			b32 += v.Base32
			b62 += v.Base62
		}
		name := fmt.Sprintf("key %s… id %d bits %d", s.Key[:8], s.KeyID, s.Bits)
		got := make([]int64, len(ids))
		if err := m.MaskN(got, ids); err != nil || !slices.Equal(got, masked) {
			t.Errorf("%s: MaskN = %v, %v; want %v", name, got, err, masked)
		}
		if err := m.UnmaskN(got, masked); err != nil || !slices.Equal(got, ids) {
			t.Errorf("%s: UnmaskN = %v, %v; want %v", name, got, err, ids)
		}
		for _, c := range []struct {
			f    Form
			want string
		}{{Base32, b32}, {Base62, b62}} {
			if txt, err := m.AppendMaskTexts(nil, ids, c.f, ""); err != nil || string(txt) != c.want {
				t.Errorf("%s: AppendMaskTexts(%v) = %q, %v; want %q", name, c.f, txt, err, c.want)
			}
		}
	}
}

// TestBatchErrors checks that an out-of-range ID anywhere in the input is
// reported by its index and value, that it is the first such index, and
// that nothing is written: not dst of MaskN and UnmaskN, not dst's spare
// capacity of AppendMaskTexts.
func TestBatchErrors(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, m := range batchMaskers(t) {
		max := maxID(m.Bits())
		bad := []int64{-1, math.MinInt64}
		if m.Bits() < 63 {
			bad = append(bad, max+1, math.MaxInt64)
		}
		for _, n := range []int{1, 2, 7, batchSize - 1, batchSize, batchSize + 1, 3*batchSize + 5} {
			for _, at := range []int{0, n / 2, n - 1} {
				v := bad[rng.IntN(len(bad))]
				src := batchInputs(rng, m, n)
				src[at] = v
				if at+1 < n {
					src[n-1] = bad[0] // a later bad value is not the one reported
				}
				wantMsg := fmt.Sprintf("[%d] = %d:", at, v)
				orig := slices.Clone(src)
				for _, fn := range []struct {
					name string
					f    func(dst, src []int64) error
				}{{"MaskN", m.MaskN}, {"UnmaskN", m.UnmaskN}} {
					dst := make([]int64, n)
					for i := range dst {
						dst[i] = -42
					}
					err := fn.f(dst, src)
					if !errors.Is(err, ErrOutOfRange) || !strings.Contains(err.Error(), "src"+wantMsg) {
						t.Errorf("%d bits: %s with %d at %d of %d: %v; want ErrOutOfRange naming src%s", m.Bits(), fn.name, v, at, n, err, wantMsg)
					}
					for i, d := range dst {
						if d != -42 {
							t.Fatalf("%d bits: %s failed but wrote dst[%d] = %d", m.Bits(), fn.name, i, d)
						}
					}
					if err := fn.f(src, src); !errors.Is(err, ErrOutOfRange) || !slices.Equal(src, orig) {
						t.Fatalf("%d bits: %s in place failed with %v and changed src to %v", m.Bits(), fn.name, err, src)
					}
				}
				for _, f := range []Form{Base32, Base62} {
					dst := append(make([]byte, 0, 1024), "keep"...)
					full := dst[:cap(dst)]
					for i := len(dst); i < len(full); i++ {
						full[i] = '#'
					}
					got, err := m.AppendMaskTexts(dst, src, f, ",")
					if !errors.Is(err, ErrOutOfRange) || !strings.Contains(err.Error(), "ids"+wantMsg) {
						t.Errorf("%d bits: AppendMaskTexts with %d at %d: %v; want ErrOutOfRange naming ids%s", m.Bits(), v, at, err, wantMsg)
					}
					if string(got) != "keep" || &got[0] != &dst[0] {
						t.Errorf("%d bits: AppendMaskTexts failed and returned %q, want the original dst", m.Bits(), got)
					}
					if i := bytes.IndexFunc(full[4:], func(r rune) bool { return r != '#' }); i >= 0 {
						t.Errorf("%d bits: AppendMaskTexts failed but wrote byte %d past dst", m.Bits(), i)
					}
				}
			}
		}
		// An invalid form is reported before the IDs are looked at.
		if got, err := m.AppendMaskTexts([]byte("x"), []int64{-1}, Form(7), ""); !errors.Is(err, ErrInvalidForm) || string(got) != "x" {
			t.Errorf("AppendMaskTexts with Form(7) = %q, %v; want ErrInvalidForm", got, err)
		}
	}
}

func TestMaskNShortDst(t *testing.T) {
	m := mustNew(t, keyFIPS, 0, Bits63)
	for _, fn := range []struct {
		name string
		f    func(dst, src []int64) error
	}{{"MaskN", m.MaskN}, {"UnmaskN", m.UnmaskN}} {
		func() {
			defer func() {
				r := recover()
				if r == nil || !strings.Contains(fmt.Sprint(r), "dst has 2 elements, fewer than src's 3") {
					t.Errorf("%s with a short dst: recovered %v, want a panic naming the lengths", fn.name, r)
				}
			}()
			_ = fn.f(make([]int64, 2), []int64{1, 2, 3})
		}()
	}
	// Empty and nil slices are fine.
	if err := m.MaskN(nil, nil); err != nil {
		t.Error(err)
	}
	if got, err := m.AppendMaskTexts(nil, nil, Base32, ","); err != nil || got != nil {
		t.Errorf("AppendMaskTexts(nil, nil) = %q, %v", got, err)
	}
}

// TestBatchProperty is the property MaskN(x)[i] == Mask(x[i]) (and the same
// for UnmaskN and AppendMaskTexts) for random slices of random lengths,
// mostly short, on both widths, with an out-of-range value sometimes planted
// at a random index.
func TestBatchProperty(t *testing.T) {
	maskers := map[int]*Masker{Bits63: mustNew(t, keyCount, 9, Bits63), Bits53: mustNew(t, keyFIPS, 21, Bits53)}
	rapid.Check(t, func(rt *rapid.T) {
		bits := rapid.SampledFrom([]int{Bits63, Bits53}).Draw(rt, "bits")
		m := maskers[bits]
		max := maxID(bits)
		value := rapid.OneOf(rapid.Int64Range(0, max), rapid.Int64Range(0, 40), rapid.Int64Range(max-40, max))
		n := rapid.OneOf(rapid.IntRange(0, 9), rapid.IntRange(0, 3*batchSize+1)).Draw(rt, "n")
		src := rapid.SliceOfN(value, n, n).Draw(rt, "ids")
		backwards := rapid.Bool().Draw(rt, "backwards")
		inPlace := rapid.Bool().Draw(rt, "inPlace")

		badAt := -1
		if len(src) > 0 && rapid.Bool().Draw(rt, "plantBad") {
			badAt = rapid.IntRange(0, len(src)-1).Draw(rt, "badAt")
			bad := rapid.Int64Range(math.MinInt64, -1)
			if bits < 63 {
				bad = rapid.OneOf(bad, rapid.Int64Range(max+1, math.MaxInt64))
			}
			src[badAt] = bad.Draw(rt, "bad")
		}

		fn, single := m.MaskN, m.Mask
		if backwards {
			fn, single = m.UnmaskN, m.Unmask
		}
		orig := slices.Clone(src)
		dst := src
		if !inPlace {
			dst = make([]int64, len(src))
		}
		before := slices.Clone(dst)
		err := fn(dst, src)
		if badAt >= 0 {
			if !errors.Is(err, ErrOutOfRange) || !strings.Contains(err.Error(), fmt.Sprintf("src[%d] = %d:", badAt, orig[badAt])) {
				rt.Fatalf("bad value %d at %d: error %v", orig[badAt], badAt, err)
			}
			if !slices.Equal(dst, before) {
				rt.Fatalf("failed call changed dst from %v to %v", before, dst)
			}
			txt, err := m.AppendMaskTexts([]byte("p"), orig, Base32, "")
			if !errors.Is(err, ErrOutOfRange) || string(txt) != "p" {
				rt.Fatalf("AppendMaskTexts with a bad value = %q, %v", txt, err)
			}
			return
		}
		if err != nil {
			rt.Fatal(err)
		}
		for i, x := range orig {
			if want, _ := single(x); dst[i] != want {
				rt.Fatalf("%d bits, backwards %v: batch[%d] = %d, single-ID call on %d = %d", bits, backwards, i, dst[i], x, want)
			}
		}
		f := rapid.SampledFrom([]Form{Base32, Base62}).Draw(rt, "form")
		sep := rapid.SampledFrom([]string{"", " ", "\r\n"}).Draw(rt, "sep")
		txt, err := m.AppendMaskTexts(nil, orig, f, sep)
		if want := wantTexts(rt, m, nil, orig, f, sep); err != nil || !bytes.Equal(txt, want) {
			rt.Fatalf("AppendMaskTexts = %q, %v; want %q", txt, err, want)
		}
	})
}

// TestBatchConcurrent runs the batch functions from several goroutines at
// once on one Masker (run it with -race).
func TestBatchConcurrent(t *testing.T) {
	m := mustNew(t, keyFIPS, 0, Bits53)
	src := batchInputs(rand.New(rand.NewPCG(1, 2)), m, 100)
	want := wantMasked(t, m, src, false)
	wantTxt := wantTexts(t, m, nil, src, Base62, "\n")
	concurrently(t, 8, func(g int) error {
		dst := make([]int64, len(src))
		var buf []byte
		for range 50 {
			if err := m.MaskN(dst, src); err != nil || !slices.Equal(dst, want) {
				return fmt.Errorf("goroutine %d: MaskN = %v, %v", g, dst, err)
			}
			if err := m.UnmaskN(dst, dst); err != nil || !slices.Equal(dst, src) {
				return fmt.Errorf("goroutine %d: UnmaskN = %v, %v", g, dst, err)
			}
			var err error
			if buf, err = m.AppendMaskTexts(buf[:0], src, Base62, "\n"); err != nil || !bytes.Equal(buf, wantTxt) {
				return fmt.Errorf("goroutine %d: AppendMaskTexts = %q, %v", g, buf, err)
			}
		}
		return nil
	})
}

// TestKeyringBatch checks that the Keyring's batch functions use its
// current key.
func TestKeyringBatch(t *testing.T) {
	old, cur := mustNew(t, keyFIPS, 0, Bits63), mustNew(t, keyCount, 1, Bits63)
	ring := mustKeyring(t, cur, old)
	src := []int64{0, 1, 2, 3, 1 << 40}
	got := make([]int64, len(src))
	if err := ring.MaskN(got, src); err != nil || !slices.Equal(got, wantMasked(t, cur, src, false)) {
		t.Errorf("Keyring.MaskN = %v, %v", got, err)
	}
	back := make([]int64, len(src))
	if err := ring.UnmaskN(back, got); err != nil || !slices.Equal(back, src) {
		t.Errorf("Keyring.UnmaskN = %v, %v", back, err)
	}
	txt, err := ring.AppendMaskTexts(nil, src, Base32, " ")
	if want := wantTexts(t, cur, nil, src, Base32, " "); err != nil || !bytes.Equal(txt, want) {
		t.Errorf("Keyring.AppendMaskTexts = %q, %v; want %q", txt, err, want)
	}
	for i, s := range strings.Fields(string(txt)) {
		if id, err := ring.UnmaskText(s); err != nil || id != src[i] {
			t.Errorf("UnmaskText(%q) = %d, %v; want %d", s, id, err, src[i])
		}
	}
}
