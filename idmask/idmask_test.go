package idmask

import (
	"bytes"
	"crypto/aes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"math/big"
	"math/bits"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/vectors.json from the current implementation")

// Fixed test keys: FIPS-197's AES-128 example key, 00…0f, and ff…ff.
var (
	keyFIPS  = mustHex("2b7e151628aed2a6abf7158809cf4f3c")
	keyCount = mustHex("000102030405060708090a0b0c0d0e0f")
	keyOnes  = mustHex("ffffffffffffffffffffffffffffffff")
)

func mustHex(s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return b
}

func mustNew(t testing.TB, key []byte, keyID uint8, bits int) *Masker {
	t.Helper()
	m, err := newMasker(key, keyID, bits)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func mustKeyring(t testing.TB, current *Masker, older ...*Masker) *Keyring {
	t.Helper()
	k, err := NewKeyring(current, older...)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// --- known answers ---

// vectorFile is testdata/vectors.json: for each key, id and width, the masked
// value and both text forms. IDs and masked values are decimal strings, so
// readers that hold JSON numbers in a float64 read them exactly.
type vectorFile struct {
	Comment string      `json:"comment"`
	Sets    []vectorSet `json:"sets"`
}

type vectorSet struct {
	Key     string   `json:"key"`
	KeyID   uint8    `json:"key_id"`
	Bits    int      `json:"bits"`
	Vectors []vector `json:"vectors"`
}

type vector struct {
	ID     int64  `json:"id,string"`
	Masked int64  `json:"masked,string"`
	Base32 string `json:"base32"`
	Base62 string `json:"base62"`
}

const vectorsPath = "testdata/vectors.json"

// vectorIDs are the inputs of the known answers at a width: edges and a few
// Snowflake-shaped values.
func vectorIDs(bits int) []int64 {
	max := maxID(bits)
	ids := []int64{0, 1, 2, 3, 255, 256, 65535, 1_000_000, max / 2, max - 1, max}
	if bits >= 53 {
		ids = append(ids, 1<<52, 1<<53-1, 258346119238828042, 9_007_199_254_740_000)
	}
	if bits == 63 {
		ids = append(ids, 1<<62, 1234567890123456789)
	}
	var in []int64
	for _, id := range ids {
		if id >= 0 && id <= max {
			in = append(in, id)
		}
	}
	return in
}

func generateVectors(t *testing.T) vectorFile {
	vf := vectorFile{Comment: "Known answers of package idmask (10-round FF1-style Feistel, AES-128 round function, " +
		"version 1). IDs and masked values are decimal strings. Regenerate only on purpose: " +
		"go test ./idmask -run TestVectors -update"}
	for _, s := range []struct {
		key   []byte
		keyID uint8
		bits  int
	}{
		{keyFIPS, 0, 63}, {keyFIPS, 0, 53}, {keyCount, 7, 63}, {keyCount, 7, 53},
		{keyOnes, 31, 63}, {keyOnes, 31, 53}, {keyFIPS, 1, 16},
	} {
		m := mustNew(t, s.key, s.keyID, s.bits)
		set := vectorSet{Key: hex.EncodeToString(s.key), KeyID: s.keyID, Bits: s.bits}
		for _, id := range vectorIDs(s.bits) {
			v := vector{ID: id}
			var err error
			if v.Masked, err = m.Mask(id); err != nil {
				t.Fatal(err)
			}
			if v.Base32, err = m.MaskText(id, Base32); err != nil {
				t.Fatal(err)
			}
			if v.Base62, err = m.MaskText(id, Base62); err != nil {
				t.Fatal(err)
			}
			set.Vectors = append(set.Vectors, v)
		}
		vf.Sets = append(vf.Sets, set)
	}
	return vf
}

// TestVectors checks Mask, MaskText, Unmask and UnmaskText against the known
// answers in testdata, so that any change to the construction, the round
// input, the alphabets or the check characters is caught.
func TestVectors(t *testing.T) {
	if *update {
		b, err := json.MarshalIndent(generateVectors(t), "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(vectorsPath, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s", vectorsPath)
	}
	vf := readVectors(t)
	n := 0
	for _, s := range vf.Sets {
		m := mustNew(t, mustHex(s.Key), s.KeyID, s.Bits)
		k := mustKeyring(t, m)
		for _, v := range s.Vectors {
			n++
			name := fmt.Sprintf("key %s… id %d bits %d: id %d", s.Key[:8], s.KeyID, s.Bits, v.ID)
			if got, err := m.Mask(v.ID); err != nil || got != v.Masked {
				t.Errorf("%s: Mask = %d, %v; want %d", name, got, err, v.Masked)
			}
			if got, err := m.Unmask(v.Masked); err != nil || got != v.ID {
				t.Errorf("%s: Unmask(%d) = %d, %v", name, v.Masked, got, err)
			}
			if got := refMask(m, v.ID); got != v.Masked {
				t.Errorf("%s: the reference implementation masks to %d, want %d", name, got, v.Masked)
			}
			for _, c := range []struct {
				f    Form
				want string
			}{{Base32, v.Base32}, {Base62, v.Base62}} {
				if got, err := m.MaskText(v.ID, c.f); err != nil || got != c.want {
					t.Errorf("%s: MaskText(%v) = %q, %v; want %q", name, c.f, got, err, c.want)
				}
				if got := refText(m, v.Masked, c.f); got != c.want {
					t.Errorf("%s: the reference %v text is %q, want %q", name, c.f, got, c.want)
				}
				if got, err := k.UnmaskText(c.want); err != nil || got != v.ID {
					t.Errorf("%s: UnmaskText(%q) = %d, %v", name, c.want, got, err)
				}
			}
		}
	}
	if n < 80 {
		t.Errorf("only %d vectors", n)
	}
}

// refMask is the construction as the package documentation describes it,
// written independently of encrypt: a fresh AES block per round, built byte
// by byte.
func refMask(m *Masker, id int64) int64 {
	n := uint(m.bits)
	u, v := n/2, n-n/2
	a, b := uint64(id)>>v, uint64(id)&(1<<v-1)
	for i := range rounds {
		var in, out [16]byte
		copy(in[:4], "IDMK")
		in[4] = version
		in[8], in[9] = byte(n), byte(i)
		binary.BigEndian.PutUint32(in[12:], uint32(b))
		m.block.Encrypt(out[:], in[:])
		f := binary.BigEndian.Uint64(out[:8])
		w := u
		if i%2 == 1 {
			w = v
		}
		a, b = b, (a^f)%(1<<w)
	}
	return int64(a<<v | b)
}

// refText writes the text of a masked value as the Form documentation
// describes it, in arbitrary precision.
func refText(m *Masker, masked int64, f Form) string {
	alphabet, base, checkMod := base32Alphabet, int64(32), int64(37)
	digits := (int(m.bits) + 4) / 5
	if f == Base62 {
		alphabet, base, checkMod = base62Alphabet, 62, 62
		digits = 0
		for p := big.NewInt(1); p.Cmp(new(big.Int).Lsh(big.NewInt(1), uint(m.bits))) < 0; p.Mul(p, big.NewInt(62)) {
			digits++
		}
	}
	vals := []int64{int64(m.keyID)}
	rest := make([]int64, digits)
	for i, v := digits-1, masked; i >= 0; i-- {
		rest[i], v = v%base, v/base
	}
	vals = append(vals, rest...)
	var s strings.Builder
	for _, d := range vals {
		s.WriteByte(alphabet[d])
	}
	s.WriteByte(refCheck(f, vals, checkMod))
	return s.String()
}

// refCheck is the check character of the symbol values vals: base32 reads
// them as one number mod 37, base62 weights them by powers of 3 mod 62.
func refCheck(f Form, vals []int64, mod int64) byte {
	sum := new(big.Int)
	for i, d := range vals {
		var w *big.Int
		if f == Base32 {
			w = new(big.Int).Exp(big.NewInt(32), big.NewInt(int64(len(vals)-1-i)), nil)
		} else {
			w = new(big.Int).Exp(big.NewInt(3), big.NewInt(int64(len(vals)-1-i)), big.NewInt(62))
		}
		sum.Add(sum, w.Mul(w, big.NewInt(d)))
	}
	c := sum.Mod(sum, big.NewInt(mod)).Int64()
	if f == Base32 {
		return base32Check[c]
	}
	return base62Alphabet[c]
}

// --- construction ---

func TestNewErrors(t *testing.T) {
	for _, c := range []struct {
		key   []byte
		keyID uint8
		bits  int
		err   error
		want  string
	}{
		{keyFIPS[:15], 0, 63, ErrInvalidKey, "15 bytes, want 16"},
		{append(keyFIPS[:16:16], 0), 0, 63, ErrInvalidKey, "17 bytes, want 16"},
		{nil, 0, 63, ErrInvalidKey, "0 bytes"},
		{make([]byte, 32), 0, 63, ErrInvalidKey, "32 bytes, want 16 (AES-128)"},
		{keyFIPS, 32, 63, ErrInvalidKeyID, "32, want 0–31"},
		{keyFIPS, 255, 53, ErrInvalidKeyID, "255"},
		{keyFIPS, 0, 64, ErrInvalidBits, "64 bits; want 63"},
		{keyFIPS, 0, 52, ErrInvalidBits, "52 bits"},
		{keyFIPS, 0, 0, ErrInvalidBits, "0 bits"},
		{keyFIPS, 0, 16, ErrInvalidBits, "16 bits"}, // small widths are for tests only
	} {
		m, err := New(c.key, c.keyID, c.bits)
		if !errors.Is(err, c.err) || !strings.Contains(fmt.Sprint(err), c.want) || m != nil {
			t.Errorf("New(%d-byte key, %d, %d) = %v, %v; want %v mentioning %q", len(c.key), c.keyID, c.bits, m, err, c.err, c.want)
		}
	}
	for _, bits := range []int{Bits63, Bits53} {
		m, err := New(keyFIPS, MaxKeyID, bits)
		if err != nil || m.Bits() != bits || m.KeyID() != MaxKeyID {
			t.Errorf("New(key, 31, %d) = %v, %v", bits, m, err)
		}
	}
}

func TestRange(t *testing.T) {
	for _, bits := range []int{Bits63, Bits53} {
		m := mustNew(t, keyFIPS, 0, bits)
		max := maxID(bits)
		for _, v := range []int64{0, 1, max - 1, max} {
			if _, err := m.Mask(v); err != nil {
				t.Errorf("%d bits: Mask(%d): %v", bits, v, err)
			}
			if _, err := m.Unmask(v); err != nil {
				t.Errorf("%d bits: Unmask(%d): %v", bits, v, err)
			}
		}
		bad := []int64{-1, math.MinInt64}
		if bits < 63 {
			bad = append(bad, max+1, math.MaxInt64)
		}
		for _, v := range bad {
			if _, err := m.Mask(v); !errors.Is(err, ErrOutOfRange) || !strings.Contains(err.Error(), fmt.Sprint(v)) {
				t.Errorf("%d bits: Mask(%d) error %v, want ErrOutOfRange naming the value", bits, v, err)
			}
			if _, err := m.Unmask(v); !errors.Is(err, ErrOutOfRange) {
				t.Errorf("%d bits: Unmask(%d) error %v, want ErrOutOfRange", bits, v, err)
			}
			if _, err := m.MaskText(v, Base32); !errors.Is(err, ErrOutOfRange) {
				t.Errorf("%d bits: MaskText(%d) error %v, want ErrOutOfRange", bits, v, err)
			}
		}
		if _, err := m.MaskText(1, Form(9)); !errors.Is(err, ErrInvalidForm) {
			t.Errorf("MaskText with Form(9): %v, want ErrInvalidForm", err)
		}
	}
}

// TestBijection checks on every small width, exhaustively, that the network
// maps [0, 2^n) onto itself one to one and that Unmask inverts Mask: the
// odd widths exercise the unbalanced halves that 63 and 53 bits use.
func TestBijection(t *testing.T) {
	maxBits := 18
	if testing.Short() {
		maxBits = 14
	}
	for bits := 2; bits <= maxBits; bits++ {
		m := mustNew(t, keyCount, 0, bits)
		size := 1 << bits
		seen := make([]bool, size)
		moved := 0
		for x := range size {
			y, err := m.Mask(int64(x))
			if err != nil {
				t.Fatal(err)
			}
			if y < 0 || y >= int64(size) {
				t.Fatalf("%d bits: Mask(%d) = %d, out of range", bits, x, y)
			}
			if seen[y] {
				t.Fatalf("%d bits: Mask(%d) = %d, which another input also maps to", bits, x, y)
			}
			seen[y] = true
			if y != int64(x) {
				moved++
			}
			if back, err := m.Unmask(y); err != nil || back != int64(x) {
				t.Fatalf("%d bits: Unmask(Mask(%d)) = %d, %v", bits, x, back, err)
			}
		}
		// A random permutation has one fixed point on average.
		if size >= 256 && moved < size-8 {
			t.Errorf("%d bits: %d of %d inputs map to themselves", bits, size-moved, size)
		}
	}
}

// TestWidthsIndependent checks that the 63- and 53-bit maskers of one key
// are different permutations: the width is part of the round input.
func TestWidthsIndependent(t *testing.T) {
	m63, m53 := mustNew(t, keyFIPS, 0, 63), mustNew(t, keyFIPS, 0, 53)
	same := 0
	for id := range int64(1000) {
		a, _ := m63.Mask(id)
		b, _ := m53.Mask(id)
		if a&(1<<53-1) == b {
			same++
		}
	}
	if same > 0 {
		t.Errorf("%d of 1000 IDs mask alike (mod 2^53) under the 63- and 53-bit maskers of one key", same)
	}
}

func TestWrongKey(t *testing.T) {
	flipped := bytes.Clone(keyFIPS)
	flipped[15] ^= 1 // one bit away
	for _, bits := range []int{Bits63, Bits53} {
		right := mustNew(t, keyFIPS, 0, bits)
		for _, key := range [][]byte{keyCount, flipped} {
			wrong := mustNew(t, key, 0, bits)
			for id := range int64(2000) {
				v, _ := right.Mask(id)
				if got, err := wrong.Unmask(v); err != nil || got == id {
					t.Fatalf("%d bits: a wrong key unmasks Mask(%d) to %d, %v", bits, id, got, err)
				}
				if w, _ := wrong.Mask(id); w == v {
					t.Fatalf("%d bits: two keys mask %d alike", bits, id)
				}
			}
		}
	}
}

// --- statistics ---

// TestAvalanche flips each input bit of random inputs: about half the output
// bits must flip, each output bit about half the time, in both directions.
func TestAvalanche(t *testing.T) {
	const samples = 2000
	for _, bits := range []int{Bits63, Bits53} {
		m := mustNew(t, keyFIPS, 0, bits)
		for _, dir := range []struct {
			name string
			f    func(int64) (int64, error)
		}{{"Mask", m.Mask}, {"Unmask", m.Unmask}} {
			rng := rand.New(rand.NewPCG(uint64(bits), 1))
			var flips [63][63]int // [input bit][output bit]
			total := 0
			for range samples {
				x := int64(rng.Uint64() >> (64 - bits))
				y, _ := dir.f(x)
				for j := range bits {
					y2, _ := dir.f(x ^ 1<<j)
					d := uint64(y ^ y2)
					total += popcount(d)
					for k := range bits {
						flips[j][k] += int(d >> k & 1)
					}
				}
			}
			mean := float64(total) / float64(samples*bits)
			half := float64(bits) / 2
			if mean < half-1 || mean > half+1 {
				t.Errorf("%d bits %s: flipping one input bit flips %.3f output bits on average, want %.1f±1", bits, dir.name, mean, half)
			}
			worst, wj, wk := 0.5, 0, 0
			for j := range bits {
				for k := range bits {
					r := float64(flips[j][k]) / samples
					if math.Abs(r-0.5) > math.Abs(worst-0.5) {
						worst, wj, wk = r, j, k
					}
				}
			}
			if worst < 0.4 || worst > 0.6 {
				t.Errorf("%d bits %s: flipping input bit %d flips output bit %d with rate %.3f, want 0.4–0.6", bits, dir.name, wj, wk, worst)
			}
			t.Logf("%d bits %s: mean flips %.3f of %d; worst bit pair rate %.3f", bits, dir.name, mean, bits, worst)
		}
	}
}

// TestConsecutiveLookRandom masks runs of 10,000 consecutive internal IDs
// (and of IDs that differ only in their high bits, as Snowflake IDs one tick
// apart with the same worker and sequence do) and runs simple randomness
// tests on the outputs: NIST SP 800-22's frequency (monobit) and runs tests
// on the concatenated bits, the balance of each output bit, how often an
// output is larger than the one before, and the Hamming distance between
// neighbours.
func TestConsecutiveLookRandom(t *testing.T) {
	const count = 10_000
	for _, bits := range []int{Bits63, Bits53} {
		m := mustNew(t, keyCount, 7, bits)
		for _, run := range []struct {
			name        string
			first, step int64
		}{
			{"0, 1, 2, …", 0, 1},
			{"consecutive Snowflake sequence numbers", 59567246425 << 22 & maxID(bits), 1},
			{"consecutive ticks, sequence 0", 1 << 30, 1 << 22},
		} {
			outs := make([]uint64, count)
			for i := range outs {
				v, err := m.Mask(run.first + int64(i)*run.step)
				if err != nil {
					t.Fatal(err)
				}
				outs[i] = uint64(v)
			}
			name := fmt.Sprintf("%d bits, %s", bits, run.name)
			checkRandom(t, name, outs, bits)
		}
	}
}

// checkRandom fails t if the bits-bit values vals fail a simple randomness
// test. The thresholds are at p = 0.001 or at least 6 standard deviations,
// so a sound permutation fails them by chance about once in a thousand keys;
// the keys here are fixed, so the test is deterministic.
func checkRandom(t *testing.T, name string, vals []uint64, bits int) {
	t.Helper()
	n := float64(len(vals) * bits)

	// Monobit: the count of ones in all bits.
	ones, perBit := 0, make([]int, bits)
	for _, v := range vals {
		ones += popcount(v)
		for k := range bits {
			perBit[k] += int(v >> k & 1)
		}
	}
	s := math.Abs(2*float64(ones) - n)
	if p := math.Erfc(s / math.Sqrt(2*n)); p < 0.001 {
		t.Errorf("%s: monobit test: %d ones in %.0f bits, p = %.5f", name, ones, n, p)
	}
	for k, c := range perBit {
		if r := float64(c) / float64(len(vals)); r < 0.45 || r > 0.55 {
			t.Errorf("%s: output bit %d is set in %.3f of the outputs", name, k, r)
		}
	}

	// Runs: the number of runs of equal bits in the concatenated bits.
	pi := float64(ones) / n
	runs, prev := 1, -1
	for _, v := range vals {
		for k := bits - 1; k >= 0; k-- {
			b := int(v >> k & 1)
			if prev >= 0 && b != prev {
				runs++
			}
			prev = b
		}
	}
	if p := math.Erfc(math.Abs(float64(runs)-2*n*pi*(1-pi)) / (2 * math.Sqrt(2*n) * pi * (1 - pi))); p < 0.001 {
		t.Errorf("%s: runs test: %d runs in %.0f bits, p = %.5f", name, runs, n, p)
	}

	// Order and distance between neighbours.
	up, dist := 0, 0
	for i := 1; i < len(vals); i++ {
		if vals[i] > vals[i-1] {
			up++
		}
		dist += popcount(vals[i] ^ vals[i-1])
	}
	if r := float64(up) / float64(len(vals)-1); r < 0.47 || r > 0.53 {
		t.Errorf("%s: %.3f of the outputs are larger than the one before, want about 0.5", name, r)
	}
	if d := float64(dist) / float64(len(vals)-1); math.Abs(d-float64(bits)/2) > 0.5 {
		t.Errorf("%s: neighbouring outputs differ in %.2f bits on average, want %.1f", name, d, float64(bits)/2)
	}
}

// --- text forms ---

func TestTextShape(t *testing.T) {
	for _, c := range []struct {
		bits   int
		f      Form
		length int
	}{{63, Base32, 15}, {53, Base32, 13}, {63, Base62, 13}, {53, Base62, 11}} {
		m := mustNew(t, keyFIPS, MaxKeyID, c.bits)
		if got := m.TextLen(c.f); got != c.length {
			t.Errorf("%d bits %v: TextLen = %d, want %d", c.bits, c.f, got, c.length)
		}
		// The largest masked value needs the most digits.
		max := maxID(c.bits)
		if got, want := string(appendText(nil, MaxKeyID, uint64(max), c.f, mustShape(t, m, c.f))), refText(m, max, c.f); got != want || len(got) != c.length {
			t.Errorf("%d bits %v: text of the largest value %q, want %q", c.bits, c.f, got, want)
		}
		for _, id := range []int64{0, 1, max / 3, max} {
			txt, err := m.MaskText(id, c.f)
			if err != nil || len(txt) != c.length || txt[0] != "ZV"[c.f-1] {
				t.Errorf("%d bits %v: MaskText(%d) = %q, %v", c.bits, c.f, id, txt, err)
			}
		}
	}
	if m := mustNew(t, keyFIPS, 0, 16); m.TextLen(Base32) != 6 || m.TextLen(Base62) != 5 || m.TextLen(0) != 0 {
		t.Errorf("16 bits: TextLen %d %d %d", m.TextLen(Base32), m.TextLen(Base62), m.TextLen(0))
	}
	if Base32.String() != "base32" || Base62.String() != "base62" || Form(7).String() != "Form(7)" {
		t.Errorf("Form.String: %v %v %v", Base32, Base62, Form(7))
	}
	for in, want := range map[string]Form{"base32": Base32, "BASE62": Base62, "Base32": Base32} {
		if f, err := ParseForm(in); err != nil || f != want {
			t.Errorf("ParseForm(%q) = %v, %v", in, f, err)
		}
	}
	if _, err := ParseForm("hex"); !errors.Is(err, ErrInvalidForm) {
		t.Errorf("ParseForm(hex): %v", err)
	}
}

func mustShape(t *testing.T, m *Masker, f Form) textWidth {
	w, ok := m.textShape(f)
	if !ok {
		t.Fatalf("no shape for %v", f)
	}
	return w
}

// TestCheckMath proves the check characters' claims for every position a
// text can have: every single substitution changes the check value, base32
// catches every adjacent swap, base62 misses exactly the swaps of two values
// 31 apart.
func TestCheckMath(t *testing.T) {
	for j := range maxTextLen - 1 {
		w32 := new(big.Int).Exp(big.NewInt(32), big.NewInt(int64(j)), big.NewInt(37)).Int64()
		w32next := w32 * 32 % 37
		w62, w62next := int64(base62Weight[j]), int64(base62Weight[j+1])
		for delta := int64(1); delta < 62; delta++ {
			if delta < 32 && delta*w32%37 == 0 {
				t.Errorf("base32: changing the digit %d places before the check by %d goes unnoticed", j, delta)
			}
			if delta*w62%62 == 0 {
				t.Errorf("base62: changing the digit %d places before the check by %d goes unnoticed", j, delta)
			}
			// Swapping neighbours a (weight next) and b (weight w) with a − b = delta.
			if delta < 32 && delta*(w32next-w32)%37 == 0 {
				t.Errorf("base32: a swap of digits %d apart, %d places before the check, goes unnoticed", delta, j)
			}
			if missed := delta*(w62next-w62)%62 == 0; missed != (delta == 31) {
				t.Errorf("base62: a swap of digits %d apart, %d places before the check: missed = %v", delta, j, missed)
			}
		}
	}
}

// TestSubstitutions replaces each character of valid texts by every byte:
// the result must be rejected, naming the position for a byte outside the
// alphabet and as a check mismatch otherwise — unless the new byte reads as
// the same symbol (base32's other case and aliases), when it must unmask to
// the same ID.
func TestSubstitutions(t *testing.T) {
	for _, bits := range []int{Bits63, Bits53} {
		m := mustNew(t, keyCount, 5, bits)
		k := mustKeyring(t, m)
		for _, id := range []int64{0, 1, 42, maxID(bits), 1234567890123 & maxID(bits)} {
			for _, f := range []Form{Base32, Base62} {
				s, err := m.MaskText(id, f)
				if err != nil {
					t.Fatal(err)
				}
				rejected := 0
				for i := range len(s) {
					table := &base62Value
					if f == Base32 {
						table = &base32Value
						if i == len(s)-1 {
							table = &base32CheckValue
						}
					}
					for c := range 256 {
						if byte(c) == s[i] {
							continue
						}
						bad := s[:i] + string([]byte{byte(c)}) + s[i+1:]
						got, err := k.UnmaskText(bad)
						switch {
						case table[c] == table[s[i]]:
							if err != nil || got != id {
								t.Errorf("%d bits: %q reads %c as %c, but unmasks to %d, %v; want %d", bits, bad, c, s[i], got, err, id)
							}
							continue
						case err == nil:
							t.Errorf("%d bits: %v %q (from %q) unmasks to %d; want an error", bits, f, bad, s, got)
						case table[c] < 0:
							if !errors.Is(err, ErrInvalidText) || !strings.Contains(err.Error(), fmt.Sprintf("position %d", i+1)) {
								t.Errorf("%d bits: %q: %v; want a bad character at position %d", bits, bad, err, i+1)
							}
						case !errors.Is(err, ErrCheck) || !errors.Is(err, ErrInvalidText):
							t.Errorf("%d bits: %q: %v; want ErrCheck", bits, bad, err)
						}
						rejected++
					}
				}
				if rejected < len(s)*190 {
					t.Errorf("%d bits %v: only %d substitutions rejected", bits, f, rejected)
				}
			}
		}
	}
}

// TestTranspositions swaps every pair of neighbouring characters before the
// check character: base32 rejects every swap of different symbols, base62
// every swap of symbols whose values are not 31 apart.
func TestTranspositions(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, bits := range []int{Bits63, Bits53} {
		m := mustNew(t, keyOnes, 9, bits)
		k := mustKeyring(t, m)
		missed62 := 0
		for range 300 {
			id := int64(rng.Uint64() >> (64 - bits))
			for _, f := range []Form{Base32, Base62} {
				s, _ := m.MaskText(id, f)
				for i := 0; i+2 < len(s); i++ {
					if s[i] == s[i+1] {
						continue
					}
					b := []byte(s)
					b[i], b[i+1] = b[i+1], b[i]
					_, err := k.UnmaskText(string(b))
					d := int(base62Value[s[i]]) - int(base62Value[s[i+1]])
					switch {
					case f == Base32 && err == nil:
						t.Errorf("base32 %q with characters %d and %d swapped is accepted", s, i+1, i+2)
					case f == Base62 && (d == 31 || d == -31):
						if !errors.Is(err, ErrCheck) {
							missed62++ // the documented blind spot
						}
					case f == Base62 && !errors.Is(err, ErrCheck):
						t.Errorf("base62 %q with characters %d and %d swapped: %v, want ErrCheck", s, i+1, i+2, err)
					}
				}
			}
		}
		t.Logf("%d bits: %d base62 swaps of characters 31 apart passed the check, as documented", bits, missed62)
	}
}

func TestCaseAndAliases(t *testing.T) {
	m := mustNew(t, keyFIPS, 1, Bits63)
	k := mustKeyring(t, m)
	for id := range int64(300) {
		s, _ := m.MaskText(id, Base32)
		if s != strings.ToUpper(s) {
			t.Fatalf("MaskText writes %q, not upper case", s)
		}
		variants := []string{strings.ToLower(s),
			strings.NewReplacer("1", "I", "0", "O").Replace(s),
			strings.NewReplacer("1", "l", "0", "o").Replace(s),
			strings.NewReplacer("1", "L", "0", "o").Replace(strings.ToLower(s))}
		for _, v := range variants {
			if got, err := k.UnmaskText(v); err != nil || got != id {
				t.Errorf("UnmaskText(%q) (from %q) = %d, %v; want %d", v, s, got, err, id)
			}
		}
		// Base62 is case-sensitive: swapping the case of any letter is a
		// different text, which the check rejects.
		s62, _ := m.MaskText(id, Base62)
		for i := range len(s62) {
			c := s62[i]
			if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' {
				b := []byte(s62)
				b[i] ^= 0x20
				if _, err := k.UnmaskText(string(b)); !errors.Is(err, ErrCheck) {
					t.Errorf("base62 %q with the case of character %d swapped: %v, want ErrCheck", s62, i+1, err)
				}
			}
		}
	}
}

func TestUnmaskTextErrors(t *testing.T) {
	m := mustNew(t, keyFIPS, 0, Bits63)
	k := mustKeyring(t, m)
	good32, _ := m.MaskText(12345, Base32)
	good62, _ := m.MaskText(12345, Base62)
	// A base32 text with a valid check character whose value is 2^63.
	over32 := "08000000000000"
	over32 += string(refCheck(Base32, symbolValues(over32, &base32Value), 37))
	over62 := "0" + "zzzzzzzzzzz" // 62^11 − 1 > 2^63
	over62 += string(refCheck(Base62, symbolValues(over62, &base62Value), 62))
	key40 := "e" + good62[1:12] // key id 40: its check is computed below
	key40 += string(refCheck(Base62, symbolValues(key40, &base62Value), 62))
	for _, c := range []struct {
		in   string
		errs []error
		want []string
	}{
		{"", []error{ErrInvalidText}, []string{"empty"}},
		{"ABC", []error{ErrInvalidText}, []string{`"ABC" is 3 bytes long; want 15 characters (base32) or 13 (base62) for 63-bit IDs`}},
		{good32 + "0", []error{ErrInvalidText}, []string{"16 bytes"}},
		{strings.Repeat("x", 100), []error{ErrInvalidText}, []string{"... (100 bytes)"}},
		{good32[:4] + "U" + good32[5:], []error{ErrInvalidText}, []string{"bad character 'U' at position 5", "allowed only as the last character"}},
		{good32[:2] + "é" + good32[4:], []error{ErrInvalidText}, []string{"bad character 'é' at position 3"}},
		{good32[:6] + "\xff" + good32[7:], []error{ErrInvalidText}, []string{"byte 0xff at position 7"}},
		{good32[:14] + "#", []error{ErrInvalidText}, []string{"'#' at position 15"}},
		{good62[:3] + "-" + good62[4:], []error{ErrInvalidText}, []string{"bad character '-' at position 4", "0–9, A–Z and a–z"}},
		{swapLast(good32), []error{ErrInvalidText, ErrCheck}, []string{"base32", "check character mismatch", "mistyped or corrupted"}},
		{swapLast(good62), []error{ErrInvalidText, ErrCheck}, []string{"base62", "check character mismatch"}},
		{over32, []error{ErrInvalidText}, []string{"past 2^63−1"}},
		{over62, []error{ErrInvalidText}, []string{"past 2^63−1"}},
		{key40, []error{ErrInvalidText}, []string{"key id 40"}},
	} {
		got, err := k.UnmaskText(c.in)
		if err == nil {
			t.Errorf("UnmaskText(%q) = %d, want an error", c.in, got)
			continue
		}
		for _, e := range c.errs {
			if !errors.Is(err, e) {
				t.Errorf("UnmaskText(%q): %v; does not wrap %v", c.in, err, e)
			}
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("UnmaskText(%q): %v; does not mention %q", c.in, err, w)
			}
		}
	}
	// UnmaskTextAs insists on the form.
	if _, err := k.UnmaskTextAs(good62, Base32); !errors.Is(err, ErrInvalidText) || !strings.Contains(err.Error(), "13 bytes long, want 15") {
		t.Errorf("UnmaskTextAs(base62 text, Base32): %v", err)
	}
	if _, err := k.UnmaskTextAs(good62, Form(0)); !errors.Is(err, ErrInvalidForm) {
		t.Errorf("UnmaskTextAs(Form(0)): %v", err)
	}
	if got, err := k.UnmaskTextAs(good62, Base62); err != nil || got != 12345 {
		t.Errorf("UnmaskTextAs(base62 text, Base62) = %d, %v", got, err)
	}
}

// symbolValues returns the digit values of s under table.
func symbolValues(s string, table *[256]int8) []int64 {
	v := make([]int64, len(s))
	for i := range len(s) {
		v[i] = int64(table[s[i]])
	}
	return v
}

// swapLast replaces the check character by another valid one.
func swapLast(s string) string {
	c := byte('0')
	if s[len(s)-1] == '0' {
		c = '1'
	}
	return s[:len(s)-1] + string(c)
}

// --- keyrings ---

func TestKeyringRotation(t *testing.T) {
	for _, bits := range []int{Bits63, Bits53} {
		old := mustNew(t, keyFIPS, 0, bits)
		cur := mustNew(t, keyCount, 1, bits)
		ring := mustKeyring(t, cur, old)
		onlyOld := mustKeyring(t, old)
		onlyCur := mustKeyring(t, cur)
		if ring.Current() != cur || ring.Bits() != bits {
			t.Fatalf("Current %p Bits %d", ring.Current(), ring.Bits())
		}
		for id := range int64(200) {
			for _, f := range []Form{Base32, Base62} {
				oldText, _ := onlyOld.MaskText(id, f)
				newText, _ := ring.MaskText(id, f)
				if newText[0] != '1' || oldText[0] != '0' {
					t.Fatalf("key-id characters: %q %q", oldText, newText)
				}
				for i, s := range []string{oldText, newText} {
					if got, err := ring.UnmaskText(s); err != nil || got != id {
						t.Errorf("ring.UnmaskText(%q) = %d, %v; want %d", s, got, err, id)
					}
					if got, key, err := ring.UnmaskTextKey(s); err != nil || got != id || key != uint8(i) {
						t.Errorf("ring.UnmaskTextKey(%q) = %d, key %d, %v; want %d, key %d", s, got, key, err, id, i)
					}
				}
				if _, err := onlyCur.UnmaskText(oldText); !errors.Is(err, ErrUnknownKeyID) ||
					!strings.Contains(err.Error(), "made with key id 0; this keyring has key id 1") {
					t.Errorf("UnmaskText of an old text without the old key: %v", err)
				}
				if _, err := cur.UnmaskText(oldText); !errors.Is(err, ErrUnknownKeyID) {
					t.Errorf("Masker.UnmaskText of another key id's text: %v", err)
				}
				if got, err := old.UnmaskTextAs(oldText, f); err != nil || got != id {
					t.Errorf("Masker.UnmaskTextAs(%q) = %d, %v", oldText, got, err)
				}
			}
			v, _ := ring.Mask(id)
			if w, _ := cur.Mask(id); v != w {
				t.Errorf("Keyring.Mask does not use the current key")
			}
			if got, _ := ring.Unmask(v); got != id {
				t.Errorf("Keyring.Unmask(%d) = %d, want %d", v, got, id)
			}
			buf, err := ring.AppendMaskText([]byte("x"), id, Base32)
			if s, _ := cur.MaskText(id, Base32); err != nil || string(buf) != "x"+s {
				t.Errorf("AppendMaskText = %q, %v", buf, err)
			}
		}
		// Another key with the same key id: the text is well formed, so it
		// unmasks, but to another ID — a keyring cannot tell.
		impostor := mustKeyring(t, mustNew(t, keyOnes, 0, bits))
		for id := range int64(200) {
			s, _ := onlyOld.MaskText(id, Base32)
			if got, err := impostor.UnmaskText(s); err != nil || got == id {
				t.Errorf("a keyring with another key of the same id unmasks %q to %d, %v", s, got, err)
			}
		}
	}
	if _, err := NewKeyring(mustNew(t, keyFIPS, 0, 63), mustNew(t, keyCount, 3, 53)); !errors.Is(err, ErrInvalidKeyring) ||
		!strings.Contains(err.Error(), "53-bit") {
		t.Errorf("NewKeyring of mixed widths: %v", err)
	}
	if _, err := NewKeyring(mustNew(t, keyFIPS, 2, 63), mustNew(t, keyCount, 3, 63), mustNew(t, keyOnes, 2, 63)); !errors.Is(err, ErrInvalidKeyring) ||
		!strings.Contains(err.Error(), "key id 2") {
		t.Errorf("NewKeyring with a repeated key id: %v", err)
	}
	if _, err := NewKeyring(nil); !errors.Is(err, ErrInvalidKeyring) {
		t.Errorf("NewKeyring(nil): %v", err)
	}
	if _, err := NewKeyring(mustNew(t, keyFIPS, 2, 63), nil); !errors.Is(err, ErrInvalidKeyring) {
		t.Errorf("NewKeyring(m, nil): %v", err)
	}
	ring := mustKeyring(t, mustNew(t, keyFIPS, 2, 63), mustNew(t, keyCount, 0, 63))
	s, _ := mustNew(t, keyOnes, 7, 63).MaskText(1, Base62)
	if _, err := ring.UnmaskText(s); !strings.Contains(fmt.Sprint(err), "key id 7; this keyring has key ids 0, 2") {
		t.Errorf("unknown key id error: %v", err)
	}
}

// TestAllocations checks that masking, unmasking (one ID at a time and in
// batches) and the append and parse halves of the text forms do not
// allocate. The race detector makes sync.Pool drop items at random, so it
// is skipped there.
func TestAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items under the race detector")
	}
	m := mustNew(t, keyFIPS, 0, Bits63)
	k := mustKeyring(t, m)
	s32, _ := m.MaskText(99, Base32)
	s62, _ := m.MaskText(99, Base62)
	buf := make([]byte, 0, 32)
	ids := []int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20}
	var sink int64
	for _, c := range []struct {
		name string
		f    func()
	}{
		{"Mask", func() { v, _ := m.Mask(99); sink += v }},
		{"Unmask", func() { v, _ := m.Unmask(99); sink += v }},
		{"AppendMaskText base32", func() { buf, _ = m.AppendMaskText(buf[:0], 99, Base32) }},
		{"AppendMaskText base62", func() { buf, _ = m.AppendMaskText(buf[:0], 99, Base62) }},
		{"Keyring.UnmaskText base32", func() { v, _ := k.UnmaskText(s32); sink += v }},
		{"Keyring.UnmaskText base62", func() { v, _ := k.UnmaskText(s62); sink += v }},
		{"Masker.UnmaskText", func() { v, _ := m.UnmaskText(s32); sink += v }},
		{"MaskN", func() { _ = m.MaskN(ids, ids) }},
		{"UnmaskN", func() { _ = m.UnmaskN(ids, ids) }},
		{"AppendMaskTexts base32", func() { buf, _ = m.AppendMaskTexts(buf[:0], ids[:2], Base32, "\n") }},
		{"AppendMaskTexts base62", func() { buf, _ = m.AppendMaskTexts(buf[:0], ids[:2], Base62, "\n") }},
	} {
		if got := testing.AllocsPerRun(200, c.f); got != 0 {
			t.Errorf("%s: %v allocations per call", c.name, got)
		}
	}
	_ = sink
}

// TestConcurrent masks from many goroutines at once through one Masker (run
// it with -race).
func TestConcurrent(t *testing.T) {
	m := mustNew(t, keyFIPS, 0, Bits63)
	want := make([]int64, 1000)
	for i := range want {
		want[i], _ = m.Mask(int64(i))
	}
	concurrently(t, 8, func(g int) error {
		for i := range want {
			i := (i + g*125) % len(want)
			if v, _ := m.Mask(int64(i)); v != want[i] {
				return fmt.Errorf("goroutine %d: Mask(%d) = %d, want %d", g, i, v, want[i])
			}
			if id, _ := m.Unmask(want[i]); id != int64(i) {
				return fmt.Errorf("goroutine %d: Unmask(%d) = %d, want %d", g, want[i], id, i)
			}
		}
		return nil
	})
}

// concurrently runs f(0) … f(n-1) in n goroutines at once and reports
// their errors.
func concurrently(t *testing.T, n int, f func(g int) error) {
	t.Helper()
	errs := make(chan error, n)
	for g := range n {
		go func() { errs <- f(g) }()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

// The AES block must match crypto/aes's: a sanity check that the masker
// holds the key it was given.
func TestKeySchedule(t *testing.T) {
	m := mustNew(t, keyFIPS, 0, 63)
	c, _ := aes.NewCipher(keyFIPS)
	var a, b [16]byte
	m.block.Encrypt(a[:], make([]byte, 16))
	c.Encrypt(b[:], make([]byte, 16))
	if a != b {
		t.Error("the masker's AES block differs from crypto/aes with the same key")
	}
}

func popcount(x uint64) int { return bits.OnesCount64(x) }

// maxID is the largest ID of a bits-bit space, 2^bits − 1.
func maxID(bits int) int64 { return math.MaxInt64 >> (63 - bits) }

// readVectors reads the known answers of testdata; there must be at least
// seven sets.
func readVectors(t *testing.T) vectorFile {
	t.Helper()
	b, err := os.ReadFile(vectorsPath)
	if err != nil {
		t.Fatal(err)
	}
	var vf vectorFile
	if err := json.Unmarshal(b, &vf); err != nil {
		t.Fatal(err)
	}
	if len(vf.Sets) < 7 {
		t.Fatalf("%s has %d sets, want at least 7", vectorsPath, len(vf.Sets))
	}
	return vf
}
