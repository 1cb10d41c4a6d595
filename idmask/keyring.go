package idmask

import (
	"fmt"
	"strconv"
	"strings"
)

// Keyring masks with its current key and unmasks texts made with any of its
// keys, chosen by the key-id character of the text. It lets a key be
// replaced: start masking with a new key (and a new key id) while texts
// handed out under the old one still unmask.
//
// Rotating keys changes every ID's external form, so an order that was shown
// as one text under the old key is shown as another under the new one; both
// unmask to the same internal ID as long as the old key stays on the ring.
// The masked int64 form carries no key id: Keyring.Unmask can only use the
// current key, so store and exchange the text forms if keys will rotate.
//
// A Keyring is immutable and safe for concurrent use.
type Keyring struct {
	current *Masker
	byID    [MaxKeyID + 1]*Masker
}

// NewKeyring returns a Keyring that masks with current and unmasks with
// current and every masker in older. All maskers must have the same width
// and distinct key ids; otherwise it fails with ErrInvalidKeyring.
func NewKeyring(current *Masker, older ...*Masker) (*Keyring, error) {
	if current == nil {
		return nil, fmt.Errorf("%w: no current masker", ErrInvalidKeyring)
	}
	k := &Keyring{current: current}
	k.byID[current.keyID] = current
	for i, m := range older {
		switch {
		case m == nil:
			return nil, fmt.Errorf("%w: older masker %d is nil", ErrInvalidKeyring, i+1)
		case m.bits != current.bits:
			return nil, fmt.Errorf("%w: older masker %d (key id %d) is for %d-bit IDs, the current one for %d-bit IDs",
				ErrInvalidKeyring, i+1, m.keyID, m.bits, current.bits)
		case k.byID[m.keyID] != nil:
			return nil, fmt.Errorf("%w: two maskers have key id %d; give every key its own id", ErrInvalidKeyring, m.keyID)
		}
		k.byID[m.keyID] = m
	}
	return k, nil
}

// Current returns the masker the Keyring masks with.
func (k *Keyring) Current() *Masker { return k.current }

// Bits returns the width of the Keyring's maskers: 63 or 53.
func (k *Keyring) Bits() int { return k.current.Bits() }

// Mask masks id with the current key; see Masker.Mask.
func (k *Keyring) Mask(id int64) (int64, error) { return k.current.Mask(id) }

// Unmask unmasks an int64 with the current key; see Masker.Unmask. An int64
// carries no key id, so values masked with an older key do not unmask to
// their IDs: use the text forms across key rotations.
func (k *Keyring) Unmask(masked int64) (int64, error) { return k.current.Unmask(masked) }

// MaskText masks id with the current key and writes it in form f; see
// Masker.MaskText.
func (k *Keyring) MaskText(id int64, f Form) (string, error) { return k.current.MaskText(id, f) }

// AppendMaskText appends MaskText(id, f) to dst; see Masker.AppendMaskText.
func (k *Keyring) AppendMaskText(dst []byte, id int64, f Form) ([]byte, error) {
	return k.current.AppendMaskText(dst, id, f)
}

// UnmaskText reads a text written by MaskText with any of the Keyring's keys
// and returns the internal ID. The form is told by the length (see Form):
// 15 characters are base32 and 13 base62 for 63-bit IDs; 13 are base32 and
// 11 base62 for 53-bit IDs. Base32 is read in either case and with
// Crockford's aliases; base62 is case-sensitive.
//
// It fails with ErrInvalidText for a text of neither length, a bad
// character (naming its position), a check character that does not match
// (also ErrCheck) or a value past the width; and with ErrUnknownKeyID for a
// well-formed text whose key id the Keyring does not have. A well-formed
// text with a known key id always unmasks to some ID, even if it was never
// handed out (see the package documentation).
func (k *Keyring) UnmaskText(s string) (int64, error) {
	id, _, err := k.UnmaskTextKey(s)
	return id, err
}

// UnmaskTextKey is UnmaskText that also returns the id of the key the text
// was made with.
func (k *Keyring) UnmaskTextKey(s string) (id int64, keyID uint8, err error) {
	f, err := k.current.detectForm(s)
	if err != nil {
		return 0, 0, err
	}
	return k.unmaskTextAs(s, f)
}

// UnmaskTextAs is UnmaskText for a text that must be in form f: a text of
// the other form's length is reported as the wrong length.
func (k *Keyring) UnmaskTextAs(s string, f Form) (int64, error) {
	id, _, err := k.unmaskTextAs(s, f)
	return id, err
}

func (k *Keyring) unmaskTextAs(s string, f Form) (int64, uint8, error) {
	w, ok := k.current.textShape(f)
	if !ok {
		return 0, 0, errForm(f)
	}
	keyID, v, err := decodeText(s, f, w, k.current.bits)
	if err != nil {
		return 0, 0, err
	}
	m := k.byID[keyID]
	if m == nil {
		return 0, 0, fmt.Errorf("%w: %v %s was made with key id %d; this keyring has key id%s",
			ErrUnknownKeyID, f, quote(s), keyID, k.keyIDs())
	}
	return int64(m.decrypt(v)), keyID, nil
}

// keyIDs lists the key ids on the ring, for an error message: " 0" or
// "s 0, 3".
func (k *Keyring) keyIDs() string {
	var ids []string
	for id, m := range k.byID {
		if m != nil {
			ids = append(ids, strconv.Itoa(id))
		}
	}
	if len(ids) == 1 {
		return " " + ids[0]
	}
	return "s " + strings.Join(ids, ", ")
}

// UnmaskText reads a text written by m.MaskText; see Keyring.UnmaskText. A
// text made with another key id fails with ErrUnknownKeyID.
func (m *Masker) UnmaskText(s string) (int64, error) {
	k := Keyring{current: m}
	k.byID[m.keyID] = m
	return k.UnmaskText(s)
}

// UnmaskTextAs reads a text of form f written by m.MaskText; see
// Keyring.UnmaskTextAs.
func (m *Masker) UnmaskTextAs(s string, f Form) (int64, error) {
	k := Keyring{current: m}
	k.byID[m.keyID] = m
	return k.UnmaskTextAs(s, f)
}

// detectForm tells the form of s by its length.
func (m *Masker) detectForm(s string) (Form, error) {
	switch len(s) {
	case m.b32.length:
		return Base32, nil
	case m.b62.length:
		return Base62, nil
	case 0:
		return 0, fmt.Errorf("%w: empty text", ErrInvalidText)
	}
	return 0, fmt.Errorf("%w: %s is %d bytes long; want %d characters (base32) or %d (base62) for %d-bit IDs",
		ErrInvalidText, quote(s), len(s), m.b32.length, m.b62.length, m.bits)
}

// MaskN masks src into dst with the current key; see Masker.MaskN.
func (k *Keyring) MaskN(dst, src []int64) error { return k.current.MaskN(dst, src) }

// UnmaskN unmasks src into dst with the current key; see Masker.UnmaskN and
// Keyring.Unmask on why int64 values carry no key id.
func (k *Keyring) UnmaskN(dst, src []int64) error { return k.current.UnmaskN(dst, src) }

// AppendMaskTexts appends the texts of ids, made with the current key, to
// dst; see Masker.AppendMaskTexts.
func (k *Keyring) AppendMaskTexts(dst []byte, ids []int64, f Form, sep string) ([]byte, error) {
	return k.current.AppendMaskTexts(dst, ids, f, sep)
}

// ParseKey reads a 128-bit key written as 32 hex digits, in either case,
// with surrounding space ignored. It fails with an error wrapping
// ErrInvalidKey that says what is wrong without repeating the key, which is
// a secret.
func ParseKey(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	if len(s) != 2*KeySize {
		return nil, fmt.Errorf("%w: the key is %d characters long, want %d hex digits (a %d-bit key)", ErrInvalidKey, len(s), 2*KeySize, 8*KeySize)
	}
	key := make([]byte, KeySize)
	for i := range len(s) {
		d, ok := hexDigit(s[i])
		if !ok {
			return nil, fmt.Errorf("%w: character %d of the key is not a hex digit (0–9, a–f)", ErrInvalidKey, i+1)
		}
		key[i/2] = key[i/2]<<4 | d
	}
	return key, nil
}

// hexDigit returns the value of the hex digit c.
func hexDigit(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}
