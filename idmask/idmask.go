// Package idmask turns internal IDs into keyed, reversible, non-guessable
// external IDs, for numbers such as order numbers that must not reveal how
// many were issued or how fast.
//
// A [Masker] is a keyed permutation of the 63-bit space [0, 2^63) (every
// non-negative int64: Snowflake IDs of the default layouts) or of the 53-bit
// space [0, 2^53) (the JavaScript-safe layout, snowflake.Preset("jssafe")). Each
// internal ID maps to exactly one external ID of the same space and back, and
// consecutive internal IDs map to outputs that look unrelated, so a customer
// who sees order 7J3…, then order 2QX… an hour later, learns nothing about
// the orders in between.
//
// # Construction
//
// The permutation is a Feistel network in the style of NIST SP 800-38G's FF1
// for radix 2, built only from the standard library:
//
//   - The n-bit input (n = 63 or 53) is split into a high part A of
//     u = ⌊n/2⌋ bits and a low part B of v = n − u bits (31/32 for 63 bits,
//     26/27 for 53). Because the halves alternate in width from round to
//     round, as in FF1, the network is a permutation of exactly n bits: no
//     padding to an even width and no cycle walking is needed, so every ID
//     costs the same (no data-dependent number of iterations, and no timing
//     signal from it).
//   - Round i (0 ≤ i < 10) computes C = A ⊕ F_K(i, B) truncated to the width
//     of A (u bits in even rounds, v bits in odd rounds), then A, B = B, C.
//     After an even number of rounds A is u bits wide again and the output
//     is A‖B.
//   - The round function F_K is AES-128 (crypto/aes, with the key schedule
//     computed once in [New]) used as a pseudo-random function on one block:
//     the tag "IDMK", a format version (1) and three zero bytes; then the
//     width n, the round number i, two zero bytes and the round's input (A's
//     neighbour, at most 32 bits) as four big-endian bytes. The first 8
//     bytes of the output, big-endian and truncated, are F. Putting n in the
//     block makes the 63-bit and 53-bit maskers of the same key unrelated
//     permutations.
//
// Unmask runs the rounds backwards: B, A = A, B ⊕ F_K(i, A).
//
// # Rounds and security level
//
// The network has 10 rounds, as FF1 does; 8 (as in FF3-1) is the least this
// package would accept. The number of rounds matters here because the
// halves are small. With AES as the round function, the rounds behave as
// independent random functions (up to AES's own security), and what is left
// is the combinatorics of the Feistel structure on n-bit blocks:
//
//   - Luby and Rackoff showed that 3 rounds give a pseudo-random permutation
//     and 4 a strong one, but only while the attacker sees far fewer than
//     2^(n/4) input–output pairs: 2^13 for 53 bits, 2^16 for 63 — a few
//     thousand orders, which is not enough.
//   - Patarin showed that 5 or more rounds (6 against an attacker who can
//     also unmask) stay secure up to about 2^(n/2) pairs, 2^26 to 2^32, the
//     size of a half; and the known generic attacks on more rounds need
//     more pairs and much more work for every round added.
//   - The published attacks on FF1 and FF3 (Bellare–Hoang–Tessaro 2016,
//     Durak–Vaudenay 2017, Hoang–Tessaro–Trieu 2018) exploit small domains;
//     NIST answered them in SP 800-38G Rev. 1 by raising the minimum domain
//     to 10^6 values. These domains are 2^53 ≈ 9·10^15 and 2^63 ≈ 9·10^18
//     values.
//
// Ten rounds leave margin above those bounds for the 53-bit space, whose
// halves are the smallest, at the price of two more AES calls per ID than
// eight; each round is one AES block, computed one after the other, so an
// ID costs about ten times the latency of one AES block. The blocks of
// different IDs do not depend on each other: [Masker.MaskN],
// [Masker.UnmaskN] and [Masker.AppendMaskTexts] mask many IDs in one call
// and keep several IDs' blocks in flight at once, with the same results as
// one call per ID (see Batches).
//
// This is format-preserving encryption built on the ideas of FF1 and FF3, not
// an implementation of either standard (no tweak, radix 2, its own round
// input encoding), and it has no security proof beyond the generic Feistel
// bounds with AES as the PRF. It is meant to hide volume and order: without
// the key, masked IDs of consecutive internal IDs are indistinguishable from
// random values of the space, and the internal ID cannot be recovered. It is
// not authentication: anyone can pick an external ID at random and it
// unmasks to some internal ID, so a service must still look the unmasked ID
// up and treat a miss as "not found". The check character of the text forms
// catches typing mistakes, not forgeries. Keep the key secret
// — whoever has it can unmask every ID — and treat it like any other
// 128-bit secret.
//
// # Text forms and key rotation
//
// [Masker.MaskText] writes a masked ID as text with a key-id character in
// front and a check character at the end; [Keyring] reads such texts back
// with whichever key the key-id character names, so a key can be replaced
// while texts made with the old one stay readable. See [Form] for the
// alphabets, widths, case rules and what the check character catches.
//
// Keys are 16 bytes (AES-128); key ids are 0–31, one character of either
// alphabet.
//
// # Batches
//
// [Masker.Mask] waits for each of its ten AES blocks before it can start the
// next, so its cost is set by the latency of the AES calls, not by how many
// the CPU could run at once. [Masker.MaskN], [Masker.UnmaskN] and
// [Masker.AppendMaskTexts] take a slice of IDs and run the rounds of up to
// 16 IDs side by side, alternating between two groups of up to 8 so that
// one group's AES blocks are computed while the next inputs of the other
// are written. They compute exactly what Mask, Unmask and AppendMaskText
// compute, ID by ID — the permutation, its rounds and its round function
// are the same — and check every ID before writing anything, so an error
// leaves the destination as it was. Use them when many IDs are masked at
// once, such as a page of results.
package idmask

import (
	"crypto/aes"
	"crypto/cipher"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
)

// Widths New accepts: the spaces of 63-bit and 53-bit (JavaScript-safe) IDs.
const (
	Bits63 = 63
	Bits53 = 53
)

// KeySize is the length of a key in bytes: AES-128.
const KeySize = 16

// MaxKeyID is the largest key id: the key-id character is one digit of the
// base32 alphabet (and of base62, which has more).
const MaxKeyID = 31

// rounds is the number of Feistel rounds; see the package documentation.
// It must be even: encrypt and decrypt split and join the halves as u and v
// bits, which they are again only after an even number of rounds.
const rounds = 10

// An odd number of rounds does not compile: the index is out of range.
var _ = [1]struct{}{}[rounds%2]

// header is the first half of every AES input block: the tag "IDMK" and the
// version, so that another construction (or a later version of this one)
// using the same key never computes the same blocks.
const (
	version = 1
	header  = 0x49444d4b<<32 | version<<24 // "IDMK", version, 0, 0, 0
)

// Sentinel errors. Every error returned by this package wraps one of them
// (test with errors.Is) and says what was wrong.
var (
	// ErrInvalidKey means a key is not KeySize bytes.
	ErrInvalidKey = errors.New("idmask: invalid key")
	// ErrInvalidKeyID means a key id is past MaxKeyID.
	ErrInvalidKeyID = errors.New("idmask: invalid key id")
	// ErrInvalidBits means a width other than 63 or 53 was asked for.
	ErrInvalidBits = errors.New("idmask: invalid width")
	// ErrOutOfRange means an ID given to Mask or Unmask is negative or does
	// not fit the masker's width.
	ErrOutOfRange = errors.New("idmask: ID out of range")
	// ErrInvalidText means a text form could not be read: wrong length, a
	// character outside the alphabet, a wrong check character (those errors
	// also wrap ErrCheck) or a value too large for the width.
	ErrInvalidText = errors.New("idmask: invalid text")
	// ErrCheck means a text's check character does not match the rest of
	// it: the text was mistyped or corrupted. Errors wrapping it also wrap
	// ErrInvalidText.
	ErrCheck = errors.New("check character mismatch")
	// ErrUnknownKeyID means a well-formed text names a key id that the
	// Keyring (or Masker) reading it does not have.
	ErrUnknownKeyID = errors.New("idmask: unknown key id")
	// ErrInvalidForm means a Form other than Base32 and Base62 was given.
	ErrInvalidForm = errors.New("idmask: invalid form")
	// ErrInvalidKeyring means NewKeyring was given no masker, maskers of
	// different widths or two maskers with the same key id.
	ErrInvalidKeyring = errors.New("idmask: invalid keyring")
)

// Masker is a keyed permutation of [0, 2^bits). It is safe for concurrent
// use; create it once per key with New and share it.
type Masker struct {
	// block is AES-128 under the key. Its concrete type is internal to
	// crypto/aes, so calls go through the interface; the buffers passed to
	// it escape, which is why they come from the pools below.
	block cipher.Block
	keyID uint8
	bits  uint8  // n
	hi    uint8  // u = ⌊n/2⌋, the width of A
	lo    uint8  // v = n − u, the width of B
	tweak uint64 // n << 56: the fixed part of the block's second half
	max   uint64 // 2^n − 1
	b32   textWidth
	b62   textWidth

	blocks  sync.Pool // *aesBuf, for one ID at a time
	batches sync.Pool // *batch, for MaskN and the other batch functions
}

// New returns the Masker for a 16-byte key (AES-128), with key id keyID
// (0–31, written into the text forms so that a Keyring can pick the key) and
// width bits: 63 for the whole non-negative int64 space, 53 for IDs below
// 2^53. It fails with ErrInvalidKey, ErrInvalidKeyID or ErrInvalidBits.
//
// The key must come from a cryptographic random source (crypto/rand) and be
// kept secret; the key id is not secret.
func New(key []byte, keyID uint8, bits int) (*Masker, error) {
	if bits != Bits63 && bits != Bits53 {
		return nil, fmt.Errorf("%w: %d bits; want %d (every non-negative int64) or %d (IDs below 2^53)",
			ErrInvalidBits, bits, Bits63, Bits53)
	}
	return newMasker(key, keyID, bits)
}

// newMasker is New for any width from 2 to 63 bits; the tests use small
// widths to check exhaustively that the network is a permutation.
func newMasker(key []byte, keyID uint8, bits int) (*Masker, error) {
	if len(key) != KeySize {
		return nil, fmt.Errorf("%w: %d bytes, want %d (AES-128)", ErrInvalidKey, len(key), KeySize)
	}
	if keyID > MaxKeyID {
		return nil, fmt.Errorf("%w: %d, want 0–%d (one base32 character)", ErrInvalidKeyID, keyID, MaxKeyID)
	}
	if bits < 2 || bits > 63 {
		return nil, fmt.Errorf("%w: %d bits, want 2–63", ErrInvalidBits, bits)
	}
	block, err := aes.NewCipher(key)
	if err != nil { // cannot happen for 16 bytes
		return nil, fmt.Errorf("%w: %v", ErrInvalidKey, err)
	}
	n := uint8(bits)
	m := &Masker{
		block: block,
		keyID: keyID,
		bits:  n,
		hi:    n / 2,
		lo:    n - n/2,
		tweak: uint64(n) << 56,
		max:   1<<n - 1,
		b32:   newTextWidth(Base32, bits),
		b62:   newTextWidth(Base62, bits),
	}
	m.blocks.New = func() any {
		buf := new(aesBuf)
		binary.BigEndian.PutUint64(buf.in[:8], header)
		return buf
	}
	m.batches.New = func() any { return newBatch() }
	return m, nil
}

// KeyID returns the key id the Masker writes into its text forms.
func (m *Masker) KeyID() uint8 { return m.keyID }

// Bits returns the width of the space the Masker permutes: 63 or 53.
func (m *Masker) Bits() int { return int(m.bits) }

// Mask returns the external ID of the internal ID id: a value of the same
// space, [0, 2^Bits()). Distinct IDs give distinct results, and Unmask
// reverses it. It fails with ErrOutOfRange for a negative id or, for 53
// bits, one of 2^53 or more. It does not allocate.
func (m *Masker) Mask(id int64) (int64, error) {
	if !m.inRange(id) {
		return 0, m.errRange(id)
	}
	return int64(m.encrypt(uint64(id))), nil
}

// Unmask returns the internal ID whose external ID is masked. It fails with
// ErrOutOfRange for a value outside [0, 2^Bits()). Every value in range
// unmasks to some ID — Unmask cannot tell a forged or mistyped value, or one
// masked with another key, from a real one. It does not allocate.
func (m *Masker) Unmask(masked int64) (int64, error) {
	if !m.inRange(masked) {
		return 0, m.errRange(masked)
	}
	return int64(m.decrypt(uint64(masked))), nil
}

// inRange reports whether v is in [0, 2^n).
func (m *Masker) inRange(v int64) bool { return uint64(v) <= m.max } // a negative v is past max

// errRange reports a value outside [0, 2^n).
func (m *Masker) errRange(v int64) error {
	return fmt.Errorf("%w: %d: want 0 to 2^%d−1 (%d)", ErrOutOfRange, v, m.bits, m.max)
}

// aesBuf is an AES input block and its output. A buffer passed to
// cipher.Block.Encrypt, an interface method, escapes to the heap, so each
// Masker keeps a pool of them rather than allocating one on every call. The
// first half of in holds the header from the moment the buffer is made; only
// the second half is written afterwards.
type aesBuf struct {
	in, out [aes.BlockSize]byte
}

// encrypt runs the Feistel network forwards on x < 2^n.
func (m *Masker) encrypt(x uint64) uint64 {
	buf := m.blocks.Get().(*aesBuf)
	r, s := m.split(x, false)
	r, s = m.feistel(buf, r, s, false)
	m.blocks.Put(buf)
	return m.join(r, s, false)
}

// decrypt runs the Feistel network backwards: decrypt(encrypt(x)) == x.
func (m *Masker) decrypt(y uint64) uint64 {
	buf := m.blocks.Get().(*aesBuf)
	r, s := m.split(y, true)
	r, s = m.feistel(buf, r, s, true)
	m.blocks.Put(buf)
	return m.join(r, s, true)
}

// split splits x into the halves the first round reads (see laneGroup):
// forwards r is the low half and s the high one, backwards the other way
// round.
func (m *Masker) split(x uint64, backwards bool) (r, s uint64) {
	lo, hi := x&(1<<m.lo-1), x>>m.lo
	if backwards {
		return hi, lo
	}
	return lo, hi
}

// join is the inverse of split for the halves the last round leaves.
func (m *Masker) join(r, s uint64, backwards bool) uint64 {
	if backwards {
		return r<<m.lo | s
	}
	return s<<m.lo | r
}

// feistel runs the ten rounds on the halves r and s, forwards or backwards
// (see laneGroup for r, s and the round). The round function F_K(i, r) is
// the first 8 bytes, big-endian, of
// AES_K("IDMK" ‖ version ‖ 0 0 0 ‖ n ‖ i ‖ 0 0 ‖ r), r < 2^32; the header
// is already in place (see aesBuf), so only the second half of the block
// changes from round to round, in one store. The Masker's fields are
// copied to locals first, so that the loop reads only buf and its frame.
func (m *Masker) feistel(buf *aesBuf, r, s uint64, backwards bool) (uint64, uint64) {
	block, tweak, hi, lo := m.block, m.tweak, m.hi, m.lo
	for k := range uint64(rounds) {
		i := k
		if backwards {
			i = rounds - 1 - k
		}
		w := hi
		if i&1 == 1 {
			w = lo
		}
		binary.BigEndian.PutUint64(buf.in[8:], tweak|i<<48|r)
		block.Encrypt(buf.out[:], buf.in[:])
		r, s = (s^binary.BigEndian.Uint64(buf.out[:8]))&(1<<w-1), r
	}
	return r, s
}
