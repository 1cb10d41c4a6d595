package idmask

import (
	"crypto/aes"
	"encoding/binary"
	"fmt"
	"slices"
)

// A batch runs the rounds of up to batchSize IDs side by side, in two
// groups of up to batchLanes. Mask is bound by latency: each AES block waits
// for the one before. The blocks of different IDs are independent, so a
// batch encrypts one block of every ID of a group, one call after another,
// and the CPU overlaps those calls.
//
// The groups alternate: a round encrypts group 0, then derives group 0's
// next inputs from the results, then encrypts group 1, then derives group
// 1's next inputs. Each AES input is read as 16 bytes just after its second
// half was written as 8, which the CPU cannot forward from its store buffer:
// the read waits until the write has retired, and so until every older
// instruction has. Writing one group's inputs before the other group's AES
// calls keeps that wait off the critical path; with a single group, every
// round would drain the pipeline.
const (
	batchLanes = 8
	batchSize  = 2 * batchLanes
)

// laneGroup is one group of a batch: an AES block pair and the two Feistel
// halves for each of its n IDs. r is the half the next round reads, s the
// other. Forwards (Masker.encrypt), A, B = s, r; backwards
// (Masker.decrypt), A, B = r, s. Either way a round i computes
//
//	r, s = (s ⊕ F_K(i, r)) mod 2^w(i), r
//
// where w(i) is u for even i and v for odd i, with i = 0, 1, …, 9 forwards
// and 9, 8, …, 0 backwards.
type laneGroup struct {
	in   [batchLanes][aes.BlockSize]byte // the first halves hold the header
	out  [batchLanes][aes.BlockSize]byte
	r, s [batchLanes]uint64
	n    int
}

// batch is the working memory of the batch functions. Its blocks are passed
// to cipher.Block.Encrypt and so live on the heap, pooled per Masker.
type batch struct {
	g [2]laneGroup
}

// newBatch returns a batch with the header in every AES input block.
func newBatch() *batch {
	b := new(batch)
	for gi := range b.g {
		for j := range b.g[gi].in {
			binary.BigEndian.PutUint64(b.g[gi].in[j][:8], header)
		}
	}
	return b
}

// MaskN masks src into dst: dst[i] = Mask(src[i]) for every i, exactly, but
// faster than one Mask call per ID, because it keeps the AES blocks of
// several IDs in flight at once (see Batches in the package documentation).
// dst must be at least as long as src (MaskN panics otherwise); only
// dst[:len(src)] is written. dst and src may be the same slice, to mask in
// place, but must not otherwise overlap.
//
// It checks every ID before it writes anything: if any is out of range it
// returns an error wrapping ErrOutOfRange that names the first such index
// and value, and dst is left unchanged. It does not allocate.
func (m *Masker) MaskN(dst, src []int64) error {
	return m.crypt(dst, src, false, "MaskN")
}

// UnmaskN unmasks src into dst: dst[i] = Unmask(src[i]) for every i, the
// inverse of MaskN. Its rules on lengths, overlap and errors are MaskN's: it
// panics if dst is shorter than src, checks every value before writing, and
// on a value outside [0, 2^Bits()) returns an error wrapping ErrOutOfRange
// naming its index, with dst unchanged. As with Unmask, every value in range
// unmasks to some ID. It does not allocate.
func (m *Masker) UnmaskN(dst, src []int64) error {
	return m.crypt(dst, src, true, "UnmaskN")
}

// crypt is MaskN (backwards false) and UnmaskN (true).
func (m *Masker) crypt(dst, src []int64, backwards bool, name string) error {
	if len(dst) < len(src) {
		panic(fmt.Sprintf("idmask: %s: dst has %d elements, fewer than src's %d", name, len(dst), len(src)))
	}
	if i := m.firstOutOfRange(src); i >= 0 {
		return m.errRangeAt("src", i, src[i])
	}
	if len(src) == 0 {
		return nil
	}
	b := m.batches.Get().(*batch)
	for len(src) > 0 {
		n := min(len(src), batchSize)
		m.load(b, src[:n], backwards)
		m.run(b, backwards)
		for j := range dst[:n] {
			dst[j] = int64(m.result(b, j, backwards))
		}
		src, dst = src[n:], dst[n:]
	}
	m.batches.Put(b)
	return nil
}

// AppendMaskTexts appends the text of every ID of ids in form f, as
// AppendMaskText writes it, to dst, with sep between consecutive texts (not
// after the last): the result is dst followed by
// MaskText(ids[0], f) + sep + MaskText(ids[1], f) + sep + … exactly. With
// an empty sep the texts follow one another with nothing between them, and
// text i is at offset i·TextLen(f) of what was appended.
//
// Like MaskN it is faster than one call per ID. It fails with
// ErrInvalidForm, or with an error wrapping ErrOutOfRange that names the
// index and value of the first ID out of range; it checks every ID before
// it writes anything, and on an error returns dst unchanged (same length,
// and nothing written past it). It allocates at most once, to grow dst, and
// not at all when dst has room for the len(ids)·TextLen(f) +
// (len(ids)−1)·len(sep) bytes it appends.
func (m *Masker) AppendMaskTexts(dst []byte, ids []int64, f Form, sep string) ([]byte, error) {
	w, ok := m.textShape(f)
	if !ok {
		return dst, errForm(f)
	}
	if i := m.firstOutOfRange(ids); i >= 0 {
		return dst, m.errRangeAt("ids", i, ids[i])
	}
	if len(ids) == 0 {
		return dst, nil
	}
	start := len(dst)
	size := len(ids)*w.length + (len(ids)-1)*len(sep)
	dst = slices.Grow(dst, size)[:start+size]
	out := dst[start:]
	b := m.batches.Get().(*batch)
	for len(ids) > 0 {
		n := min(len(ids), batchSize)
		m.load(b, ids[:n], false)
		m.run(b, false)
		for j := range n {
			putText(out[:w.length], m.keyID, m.result(b, j, false), f, w.keyWeight)
			out = out[w.length:]
			if len(out) > 0 {
				out = out[copy(out, sep):]
			}
		}
		ids = ids[n:]
	}
	m.batches.Put(b)
	return dst, nil
}

// firstOutOfRange returns the index of the first value of v outside
// [0, 2^n), or −1.
func (m *Masker) firstOutOfRange(v []int64) int {
	for i, x := range v {
		if !m.inRange(x) {
			return i
		}
	}
	return -1
}

// errRangeAt reports the out-of-range value v at index i of the slice name.
func (m *Masker) errRangeAt(name string, i int, v int64) error {
	return fmt.Errorf("%w: %s[%d] = %d: want 0 to 2^%d−1 (%d)", ErrOutOfRange, name, i, v, m.bits, m.max)
}

// load splits the n ≤ batchSize values of x between the groups of b, the
// first ⌈n/2⌉ to group 0 and the rest to group 1, splits each into its
// halves (see laneGroup) and writes the first round's AES inputs.
func (m *Masker) load(b *batch, x []int64, backwards bool) {
	n0 := (len(x) + 1) / 2
	m.loadGroup(&b.g[0], x[:n0], backwards)
	m.loadGroup(&b.g[1], x[n0:], backwards)
}

// loadGroup loads the ≤ batchLanes values of x into g; see load.
func (m *Masker) loadGroup(g *laneGroup, x []int64, backwards bool) {
	g.n = len(x)
	first := uint64(0)
	if backwards {
		first = rounds - 1
	}
	tweak := m.tweak | first<<48
	for j, v := range x {
		g.r[j], g.s[j] = m.split(uint64(v), backwards)
		binary.BigEndian.PutUint64(g.in[j][8:], tweak|g.r[j])
	}
}

// run computes the ten rounds of every ID loaded into b, alternating
// between the groups (see batchLanes).
func (m *Masker) run(b *batch, backwards bool) {
	g0, g1 := &b.g[0], &b.g[1]
	for k := range uint64(rounds) {
		i, next := k, k+1
		if backwards {
			i, next = rounds-1-k, rounds-2-k // next wraps after the last round; step then writes inputs no one reads
		}
		w := m.hi
		if i&1 == 1 {
			w = m.lo
		}
		mask, tweak := uint64(1)<<w-1, m.tweak|next<<48
		m.encryptGroup(g0)
		step(g0, mask, tweak)
		m.encryptGroup(g1)
		step(g1, mask, tweak)
	}
}

// encryptGroup encrypts the AES input block of every ID of g.
func (m *Masker) encryptGroup(g *laneGroup) {
	block := m.block
	for j := range g.n {
		block.Encrypt(g.out[j][:], g.in[j][:])
	}
}

// step finishes a round for every ID of g from its AES output,
// r, s = (s ⊕ F) mod 2^w, r, and writes the next round's input; mask is
// 2^w − 1 and tweak the second half of the next block without r.
func step(g *laneGroup, mask, tweak uint64) {
	n := min(g.n, batchLanes)
	for j := range n {
		f := binary.BigEndian.Uint64(g.out[j][:8])
		r := (g.s[j] ^ f) & mask
		g.r[j], g.s[j] = r, g.r[j]
		binary.BigEndian.PutUint64(g.in[j][8:], tweak|r)
	}
}

// result returns the output for the j-th value given to load after run.
func (m *Masker) result(b *batch, j int, backwards bool) uint64 {
	g := &b.g[0]
	if j >= g.n {
		g, j = &b.g[1], j-g.n
	}
	return m.join(g.r[j], g.s[j], backwards)
}
