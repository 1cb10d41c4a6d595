package server

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/flakeid/flakeid/idmask"
	"github.com/flakeid/flakeid/idview"
	"github.com/flakeid/flakeid/segment"
	"github.com/flakeid/flakeid/snowflake"
)

// MaskConfig makes the server hand out masked IDs: keyed, reversible,
// non-guessable external forms of its IDs (package idmask), so that order
// numbers and the like do not reveal how many were made. Masked IDs are
// texts of fixed length with a key-id and a check character, in every API:
// JSON strings, text lines, Leaf's plain-text answers and the RPCs'
// masked_ids. /v1/decode and the RPC Decode read them back (with a token
// allowed to unmask, when tokens are configured).
//
// A zero field means its default: the zero MaskConfig masks nothing.
type MaskConfig struct {
	// Keys are the masking keys. The first masks; every one unmasks texts
	// made with it (told by the text's key-id character), so a key is
	// rotated by putting a new key with a new id first and keeping the old
	// one listed while its texts are in use. Required when Snowflake or
	// Tags is set; at most 32 keys, ids distinct. Default none.
	Keys []MaskKey `json:"keys"`
	// Form is the text form: "base32" (Crockford, case-insensitive; 15
	// characters for 63-bit IDs, 13 for the jssafe layout's 53-bit IDs) or
	// "base62" (case-sensitive; 13 or 11 characters). Default "base32".
	Form string `json:"form"`
	// Snowflake masks every Snowflake ID the server hands out. Default
	// false.
	Snowflake bool `json:"snowflake"`
	// Tags lists the segment tags whose IDs are masked; "*" means every
	// tag. Default none.
	Tags []string `json:"tags"`
	// Bits is the ID space the keys mask: 63 or 53, what `flakeid mask
	// --bits` was given. 0 (the default) takes it from the layout: 53 when
	// every ID of the layout is below 2^53 (jssafe), else 63. Another value
	// than the layout's is refused: texts masked in one space do not unmask
	// in the other.
	Bits int `json:"bits"`
}

// MaskKey is one masking key.
type MaskKey struct {
	// ID is the key id, 0–31: the first character of every text made with
	// the key.
	ID uint8 `json:"id"`
	// Key is the 128-bit AES key as 32 hex digits, from a cryptographic
	// random source (openssl rand -hex 16). It is a secret: keep it in a
	// file readable only by the service (flakeid serve --mask-keyring), or
	// in FLAKEID_MASK_KEY.
	Key string `json:"key"`
}

// enabled reports whether anything is masked.
func (c MaskConfig) enabled() bool { return c.Snowflake || len(c.Tags) > 0 }

// validate checks c; its errors never quote a key.
func (c MaskConfig) validate() error {
	if _, err := idmask.ParseForm(c.formName()); err != nil {
		return fmt.Errorf("mask form %q: want base32 or base62", c.Form)
	}
	if c.Bits != 0 && c.Bits != idmask.Bits63 && c.Bits != idmask.Bits53 {
		return fmt.Errorf("mask bits %d: want %d or %d (or 0: from the layout)", c.Bits, idmask.Bits63, idmask.Bits53)
	}
	if c.enabled() && len(c.Keys) == 0 {
		return errors.New("masking is on (snowflake or tags) but no mask keys are configured")
	}
	if len(c.Keys) > idmask.MaxKeyID+1 {
		return fmt.Errorf("%d mask keys, want at most %d", len(c.Keys), idmask.MaxKeyID+1)
	}
	seen := map[uint8]bool{}
	for i, k := range c.Keys {
		if k.ID > idmask.MaxKeyID {
			return fmt.Errorf("mask key %d: key id %d, want 0–%d", i, k.ID, idmask.MaxKeyID)
		}
		if seen[k.ID] {
			return fmt.Errorf("mask key %d: key id %d is listed twice", i, k.ID)
		}
		seen[k.ID] = true
		if _, err := idmask.ParseKey(k.Key); err != nil {
			return fmt.Errorf("mask key %d (id %d): %v", i, k.ID, err)
		}
	}
	for _, tag := range c.Tags {
		if tag != "*" {
			if err := segment.ValidName(tag); err != nil {
				return fmt.Errorf("mask tags: %v", err)
			}
		}
	}
	return nil
}

func (c MaskConfig) formName() string {
	if c.Form == "" {
		return "base32"
	}
	return c.Form
}

// masking is a server's masking state, built from a valid MaskConfig.
type masking struct {
	ring      *idmask.Keyring
	form      idmask.Form
	snowflake bool
	tags      map[string]bool // "*": every tag
}

// newMasking builds the masking of c for IDs of bits bits (63, or 53 for a
// layout that fits 53 bits). It returns nil when c has no keys.
func newMasking(c MaskConfig, bits int) (*masking, error) {
	if len(c.Keys) == 0 {
		return nil, nil
	}
	form, err := idmask.ParseForm(c.formName())
	if err != nil {
		return nil, err
	}
	ms := make([]*idmask.Masker, len(c.Keys))
	for i, k := range c.Keys {
		key, err := idmask.ParseKey(k.Key)
		if err != nil {
			return nil, fmt.Errorf("mask key %d: %v", i, err)
		}
		if ms[i], err = idmask.New(key, k.ID, bits); err != nil {
			return nil, err
		}
	}
	ring, err := idmask.NewKeyring(ms[0], ms[1:]...)
	if err != nil {
		return nil, err
	}
	m := &masking{ring: ring, form: form, snowflake: c.Snowflake, tags: map[string]bool{}}
	for _, t := range c.Tags {
		m.tags[t] = true
	}
	return m, nil
}

// maskBits is the masking width for IDs of layout l: 53 when every ID of
// the layout is below 2^53 (the jssafe preset), so masked IDs stay exact in
// JavaScript, else 63.
func maskBits(l snowflake.Layout) int {
	n, err := l.Normalize()
	if err == nil && n.TimeBits+n.DatacenterBits+n.WorkerBits+n.SequenceBits <= idmask.Bits53 {
		return idmask.Bits53
	}
	return idmask.Bits63
}

// forSnowflake returns the masking of Snowflake IDs, or nil.
func (m *masking) forSnowflake() *masking {
	if m == nil || !m.snowflake {
		return nil
	}
	return m
}

// forTag returns the masking of tag's IDs, or nil.
func (m *masking) forTag(tag string) *masking {
	if m == nil || !(m.tags["*"] || m.tags[tag]) {
		return nil
	}
	return m
}

// appendText appends the masked text of id. An ID past the masking width
// (a segment ID of 2^53 or more under the 53-bit width) is an error naming
// the ID; the caller answers 500, since the server cannot mask it.
func (m *masking) appendText(dst []byte, id int64) ([]byte, error) {
	out, err := m.ring.AppendMaskText(dst, id, m.form)
	if err != nil {
		return dst, apiErrorf(http.StatusInternalServerError, codeInternal,
			"ID %d cannot be masked in the %d-bit space: %v", id, m.ring.Bits(), err)
	}
	return out, nil
}

// texts appends the masked texts of the IDs of runs to dst (for the RPCs'
// masked_ids): masked in one batch, all cut from one string, since every
// text has the same length.
func (m *masking) texts(dst []string, runs []run) ([]string, error) {
	if err := m.check(runs); err != nil {
		return dst, err
	}
	var total int64
	for _, rn := range runs {
		total += rn.count
	}
	all := make([]int64, 0, total)
	for _, id := range ids(runs) {
		all = append(all, id)
	}
	buf, err := m.ring.AppendMaskTexts(nil, all, m.form, "")
	if err != nil {
		return dst, apiErrorf(http.StatusInternalServerError, codeInternal, "masking: %v", err)
	}
	texts, n := string(buf), m.ring.Current().TextLen(m.form)
	for i := range all {
		dst = append(dst, texts[i*n:(i+1)*n])
	}
	return dst, nil
}

// check fails, naming the ID, when a run's first or last ID cannot be
// masked; writeIDs checks every run before it writes a byte, so that a
// failure is a clean error answer and not a cut-off body.
func (m *masking) check(runs []run) error {
	max := int64(1)<<m.ring.Bits() - 1
	for _, rn := range runs {
		for _, id := range [2]int64{rn.first, rn.first + (rn.count-1)*rn.stride} {
			if id < 0 || id > max {
				return apiErrorf(http.StatusInternalServerError, codeInternal,
					"ID %d cannot be masked: the masking space is %d bits (IDs 0 to %d)", id, m.ring.Bits(), max)
			}
		}
	}
	return nil
}

// appendTexts appends the masked texts of the IDs of runs to buf, masked
// in chunks through the batch API (about half the cost per ID of one call
// per ID): as JSON strings separated by commas when json is set, else one
// per line. It writes buf out to w whenever it passes flushAt; check(runs)
// must have passed, so that a failure cannot cut a body short.
func (m *masking) appendTexts(w io.Writer, buf []byte, runs []run, json bool) ([]byte, error) {
	var chunk [256]int64
	n, first := 0, true
	sep := "\n"
	if json {
		sep = `","`
	}
	flush := func() error {
		if n == 0 {
			return nil
		}
		if json {
			if !first {
				buf = append(buf, ',')
			}
			buf = append(buf, '"')
		}
		var err error
		if buf, err = m.ring.AppendMaskTexts(buf, chunk[:n], m.form, sep); err != nil {
			return apiErrorf(http.StatusInternalServerError, codeInternal, "masking: %v", err)
		}
		if json {
			buf = append(buf, '"')
		} else {
			buf = append(buf, '\n')
		}
		first, n = false, 0
		if len(buf) > flushAt {
			w.Write(buf)
			buf = buf[:0]
		}
		return nil
	}
	for _, id := range ids(runs) {
		chunk[n] = id
		if n++; n == len(chunk) {
			if err := flush(); err != nil {
				return buf, err
			}
		}
	}
	return buf, flush()
}

// status is what /v1/status tells of the masking (never a key).
func (m *masking) status() *maskStatusJSON {
	if m == nil {
		return nil
	}
	st := &maskStatusJSON{Form: m.form.String(), Bits: m.ring.Bits(), KeyID: m.ring.Current().KeyID(),
		Snowflake: m.snowflake, TextLen: m.ring.Current().TextLen(m.form)}
	st.Tags = slices.Sorted(maps.Keys(m.tags))
	return st
}

// maskStatusJSON is the "mask" object of /v1/status.
type maskStatusJSON struct {
	Form      string   `json:"form"`
	Bits      int      `json:"bits"`
	KeyID     uint8    `json:"key_id"`
	TextLen   int      `json:"text_len"`
	Snowflake bool     `json:"snowflake"`
	Tags      []string `json:"tags"`
}

// How decode reads its input: ?as= of /v1/decode.
const (
	decodeAuto   = ""
	decodePlain  = "plain"
	decodeMasked = "masked"
)

// decodeInput is a text read for decoding: the internal ID, and the masked
// text and its key id when the text was masked.
type decodeInput struct {
	id     snowflake.ID
	masked string
	keyID  uint8
	// form is set when the text was a UUIDv7, TypeID or ULID: the form,
	// the 128-bit value and the TypeID's prefix.
	form   idview.Form
	uuid   idview.UUID
	prefix string
}

// readID reads text as a plain ID (decimal, base32, base58) or a masked
// one, as told by as (decodeAuto, decodePlain or decodeMasked).
//
// In auto mode on a server with mask keys, a text is read the one way it
// can be read: as masked when it unmasks (its length, a key id the server
// has and its check character are all right), as plain when it parses as a
// decimal, base32 or base58 ID. A text that reads both ways is refused as
// ambiguous, naming both readings and ?as= (RPC: as), never guessed: an
// answer about the wrong ID is worse than a question.
//
// How often that happens depends on the form: with the default (base32 and
// 63-bit IDs) a masked text is 15 characters, which no plain form is, so
// only an all-digit one (about 1 in 10⁷) reads both ways. With base62
// texts, or 53-bit IDs (jssafe), most masked texts are also valid plain
// base32 or base58, so clients there decode with ?as=masked (the console's
// "read as", the Go client's DecodeAs). A real plain ID that passes the
// masked checks (1 in 37 base32, 1 in 62 base62, when its first character
// is a key id the server has) is refused likewise.
func (s *Server) readID(text, as string, mayUnmask func() error) (decodeInput, error) {
	text = strings.TrimSpace(text)
	if idview.LooksLikeText(text) {
		return s.readUUIDAs(text, as, mayUnmask)
	}
	plain := func() (decodeInput, error) {
		id, err := snowflake.ParseAny(text)
		return decodeInput{id: id}, err
	}
	unmask := func() (decodeInput, error) {
		if s.mask == nil {
			return decodeInput{}, apiErrorf(http.StatusBadRequest, codeInvalid, "this server has no mask keys, so it cannot read masked IDs")
		}
		id, keyID, err := s.mask.ring.UnmaskTextKey(text)
		if err != nil {
			return decodeInput{}, apiErrorf(http.StatusBadRequest, codeInvalid, "masked ID: %v", err)
		}
		return decodeInput{id: snowflake.ID(id), masked: text, keyID: keyID}, nil
	}
	authorized := func(in decodeInput, err error) (decodeInput, error) {
		if err == nil {
			err = mayUnmask()
		}
		if err != nil {
			return decodeInput{}, err
		}
		return in, nil
	}
	switch as {
	case decodePlain:
		return plain()
	case decodeMasked:
		return authorized(unmask())
	case decodeAuto:
	default:
		return decodeInput{}, apiErrorf(http.StatusBadRequest, codeInvalid, "as %q: want plain or masked (or nothing, to tell by the text)", clip(as))
	}
	if s.mask == nil {
		return plain()
	}
	m, merr := unmask()
	p, perr := plain()
	switch {
	case merr == nil && perr == nil:
		return decodeInput{}, apiErrorf(http.StatusBadRequest, codeInvalid,
			"%q reads both as a masked ID (key id %d) and as a plain ID (%d); say which with ?as=masked or ?as=plain (RPC Decode: as)",
			clip(text), m.keyID, p.id)
	case merr == nil:
		return authorized(m, nil)
	case perr == nil:
		return p, nil
	}
	return decodeInput{}, apiErrorf(http.StatusBadRequest, codeInvalid,
		"%q is neither a plain ID (%v) nor a masked ID (%v)", clip(text), perr, merr)
}

// unmaskCheck is readID's check of an HTTP or Connect request: with tokens
// configured, only a bearer token with Unmask (or Admin) may turn masked IDs
// into internal ones.
func (s *Server) unmaskCheck(h http.Header) func() error {
	return func() error {
		if s.tokens == nil {
			return nil
		}
		tok, err := s.token(h)
		if err != nil {
			return err
		}
		return tokenMayUnmask(tok)
	}
}

// tokenMayUnmask checks that tok may unmask IDs (Unmask or Admin).
func tokenMayUnmask(tok *Token) error {
	if !tok.Unmask && !tok.Admin {
		return apiErrorf(http.StatusForbidden, codeForbidden, "token %q may not unmask IDs", tok.Name)
	}
	return nil
}
