package main

import (
	"bufio"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/flakeid/flakeid/idmask"
	"github.com/flakeid/flakeid/segment"
	"github.com/flakeid/flakeid/server"
	"github.com/flakeid/flakeid/snowflake"
)

// maskKeyFlags say which masking keys to use: one key (--key with its
// --key-id) or a keyring file (--keyring) whose first key masks and whose
// every key unmasks, for rotation. mask and unmask embed them as they are,
// serve with the prefix mask- (--mask-key, …); the environment variables
// are the same for all three, so one deployment's settings serve both.
type maskKeyFlags struct {
	Key     string `env:"FLAKEID_MASK_KEY" placeholder:"HEX" help:"The 128-bit masking key: 32 hex digits (make one with: openssl rand -hex 16). Prefer the environment variable: a key given on the command line can be seen by other users in ps and stays in the shell history."`
	KeyID   uint8  `name:"key-id" default:"0" env:"FLAKEID_MASK_KEY_ID" placeholder:"N" help:"The key's id, 0–31: written as the first character of every text, and checked when reading one, so that keys can be rotated."`
	Keyring string `type:"path" env:"FLAKEID_MASK_KEYRING" placeholder:"FILE" help:"Instead of a single key, a keyring file for rotation: one key-id:32-hex-digit key per line (# starts a comment); the first masks, every one unmasks. Keep it readable only by its users."`
	Bits    int    `env:"FLAKEID_MASK_BITS" placeholder:"N" help:"The ID space: 63 (every non-negative int64, the default layouts) or 53 (IDs below 2^53, the jssafe layout); a masked ID stays in the same space. Default 63; serve takes it from the layout and refuses another."`
}

// maskKey is one key of maskKeyFlags.
type maskKey struct {
	id  uint8
	key []byte
}

// keys returns the configured keys, the masking one first, or none when
// neither a key nor a keyring is given. prefix is the flags' prefix ("" or
// "mask-"), for the messages. Errors name the flag, or the keyring's file
// and line, and never quote a key.
func (f *maskKeyFlags) keys(prefix string) ([]maskKey, error) {
	switch {
	case f.Key != "" && f.Keyring != "":
		return nil, fmt.Errorf("--%skey and --%skeyring both given (FLAKEID_MASK_KEY, FLAKEID_MASK_KEYRING): give one", prefix, prefix)
	case f.Key != "":
		key, err := idmask.ParseKey(f.Key)
		if err != nil {
			return nil, fmt.Errorf("--%skey (or FLAKEID_MASK_KEY): %w", prefix, err)
		}
		if f.KeyID > idmask.MaxKeyID {
			return nil, fmt.Errorf("--%skey-id %d (or FLAKEID_MASK_KEY_ID): %w: want 0–%d", prefix, f.KeyID, idmask.ErrInvalidKeyID, idmask.MaxKeyID)
		}
		return []maskKey{{f.KeyID, key}}, nil
	case f.Keyring != "":
		keys, err := readKeyring(f.Keyring)
		if err != nil {
			return nil, fmt.Errorf("--%skeyring (or FLAKEID_MASK_KEYRING): %w", prefix, err)
		}
		return keys, nil
	}
	return nil, nil
}

// readKeyring reads a keyring file: one key-id:hex-key per line, the
// masking key first; blank lines and text after # are ignored.
func readKeyring(path string) ([]maskKey, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var keys []maskKey
	seen := map[uint8]bool{}
	n := 0
	for line := range strings.Lines(string(b)) {
		n++
		line, _, _ = strings.Cut(line, "#")
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		idText, hexKey, ok := strings.Cut(line, ":")
		if !ok {
			return nil, fmt.Errorf("%s line %d: not of the form key-id:hex-key", path, n)
		}
		id, err := strconv.ParseUint(strings.TrimSpace(idText), 10, 8)
		if err != nil || id > idmask.MaxKeyID {
			return nil, fmt.Errorf("%s line %d: the key id is not a whole number 0–%d (write key-id:hex-key)", path, n, idmask.MaxKeyID)
		}
		if seen[uint8(id)] {
			return nil, fmt.Errorf("%s line %d: key id %d is listed twice", path, n, id)
		}
		seen[uint8(id)] = true
		key, err := idmask.ParseKey(strings.TrimSpace(hexKey))
		if err != nil {
			return nil, fmt.Errorf("%s line %d (key id %d): %w", path, n, id, err)
		}
		keys = append(keys, maskKey{uint8(id), key})
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("%s holds no key", path)
	}
	return keys, nil
}

// bits returns --bits, or def when it is not given.
func (f *maskKeyFlags) bits(prefix string, def int) (int, error) {
	switch f.Bits {
	case 0:
		return def, nil
	case idmask.Bits63, idmask.Bits53:
		return f.Bits, nil
	}
	return 0, fmt.Errorf("--%sbits %d (or FLAKEID_MASK_BITS): want %d or %d", prefix, f.Bits, idmask.Bits63, idmask.Bits53)
}

// validate checks, for mask and unmask, that the flags name one key source
// and a valid space: mistakes in the command line, reported as usage errors.
func (f *maskKeyFlags) validate() error {
	if f.Key == "" && f.Keyring == "" {
		return errors.New("no masking key: give --key (or FLAKEID_MASK_KEY), or --keyring (or FLAKEID_MASK_KEYRING)")
	}
	if f.Key != "" && f.Keyring != "" {
		return errors.New("--key and --keyring both given (FLAKEID_MASK_KEY, FLAKEID_MASK_KEYRING): give one")
	}
	_, err := f.bits("", idmask.Bits63)
	return err
}

// keyring builds the Keyring the flags describe, for mask and unmask.
func (f *maskKeyFlags) keyring() (*idmask.Keyring, error) { return f.keyringFor("", idmask.Bits63) }

// keyringFor builds the Keyring of the configured keys in the space --bits
// names, def when it is not given; nil when no key is configured. prefix is
// the flags' prefix, for the messages.
func (f *maskKeyFlags) keyringFor(prefix string, def int) (*idmask.Keyring, error) {
	keys, err := f.keys(prefix)
	if err != nil || len(keys) == 0 {
		return nil, err
	}
	bits, err := f.bits(prefix, def)
	if err != nil {
		return nil, err
	}
	ms := make([]*idmask.Masker, len(keys))
	for i, k := range keys {
		if ms[i], err = idmask.New(k.key, k.id, bits); err != nil {
			return nil, err
		}
	}
	return idmask.NewKeyring(ms[0], ms[1:]...)
}

// maskCmd masks internal IDs into external ones.
//
// Every argument is masked on its own: one that does not parse or does not
// fit the space is reported on stderr (naming the argument) and skipped, the
// others are still printed, and the exit status is 1 if any failed.
type maskCmd struct {
	maskKeyFlags `embed:""`

	Form string   `default:"base32" enum:"base32,base62,decimal" env:"FLAKEID_MASK_FORM" help:"How to print masked IDs: base32 (Crockford, case-insensitive, 15 characters for 63 bits, 13 for 53), base62 (case-sensitive, 13 or 11 characters) or decimal (the bare masked integer, without key id or check character)."`
	IDs  []string `arg:"" name:"id" help:"Internal IDs to mask, in decimal. An ID that does not parse or does not fit --bits is reported on stderr and skipped; the exit status is then 1."`
}

// Validate reports a missing or doubled key source as a usage error.
func (c *maskCmd) Validate() error { return c.validate() }

// Run masks every argument.
func (c *maskCmd) Run(out *streams) error {
	ring, err := c.keyring()
	if err != nil {
		return err
	}
	m := ring.Current()
	return eachArg(out, "mask", c.IDs, "IDs could not be masked", func(arg string) (string, error) {
		id, err := snowflake.Parse(arg)
		if err != nil {
			return "", err
		}
		if c.Form == "decimal" {
			v, err := m.Mask(int64(id))
			return strconv.FormatInt(v, 10), err
		}
		f, err := idmask.ParseForm(c.Form)
		if err != nil {
			return "", err
		}
		return m.MaskText(int64(id), f)
	})
}

// unmaskCmd turns masked IDs back into internal ones.
type unmaskCmd struct {
	maskKeyFlags `embed:""`

	Form  string   `default:"auto" enum:"auto,base32,base62,decimal" env:"FLAKEID_MASK_FORM" help:"The form of the texts: auto (base32 or base62, told apart by length), base32, base62 or decimal (a bare masked integer, as mask --form decimal prints)."`
	Texts []string `arg:"" name:"text" help:"Masked IDs to unmask. One that is mistyped (the check character catches single typos), made with another key id or otherwise unreadable is reported on stderr and skipped; the exit status is then 1."`
}

// Validate reports a missing or doubled key source as a usage error.
func (c *unmaskCmd) Validate() error { return c.validate() }

// Run unmasks every argument.
func (c *unmaskCmd) Run(out *streams) error {
	ring, err := c.keyring()
	if err != nil {
		return err
	}
	m := ring.Current()
	return eachArg(out, "unmask", c.Texts, "texts could not be unmasked", func(arg string) (string, error) {
		var (
			id  int64
			err error
		)
		switch c.Form {
		case "decimal":
			var v snowflake.ID
			if v, err = snowflake.Parse(arg); err == nil {
				id, err = m.Unmask(int64(v))
			}
		case "auto":
			id, err = ring.UnmaskText(arg)
			if err != nil && allDigits(arg) && len(arg) != m.TextLen(idmask.Base32) && len(arg) != m.TextLen(idmask.Base62) {
				err = fmt.Errorf("%w (for a masked integer, give --form decimal)", err)
			}
		default:
			var f idmask.Form
			if f, err = idmask.ParseForm(c.Form); err == nil {
				id, err = ring.UnmaskTextAs(arg, f)
			}
		}
		if errors.Is(err, idmask.ErrUnknownKeyID) {
			err = fmt.Errorf("%w (give that key with its --key-id, or a --keyring that holds it)", err)
		}
		return strconv.FormatInt(id, 10), err
	})
}

// eachArg runs do on every argument (trimmed of spaces) and prints its
// results on stdout, one per line. An argument that fails is reported on
// stderr with its position and skipped; eachArg then fails saying how many
// of the arguments did (what: "IDs could not be masked").
func eachArg(out *streams, cmd string, args []string, what string, do func(string) (string, error)) error {
	w := bufio.NewWriter(out.stdout)
	failed := 0
	for i, arg := range args {
		s, err := do(strings.TrimSpace(arg))
		if err != nil {
			// Keep stdout and stderr in order when both are a terminal.
			if err := w.Flush(); err != nil {
				return err
			}
			fmt.Fprintf(out.stderr, "flakeid %s: argument %d %q: %v\n", cmd, i+1, arg, err)
			failed++
			continue
		}
		if _, err := io.WriteString(w, s+"\n"); err != nil {
			return err
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d %s", failed, len(args), what)
	}
	return nil
}

func allDigits(s string) bool {
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// counterKeys returns the keys of the flags for a masked series
// (segment.Config.CounterKeys), and the id of the first (the one a new
// series is masked with); nil when no key is given.
func (f *maskKeyFlags) counterKeys() (func(uint8) (segment.CounterMasker, error), uint8, error) {
	keys, err := f.keys("mask-")
	if err != nil || len(keys) == 0 {
		return nil, 0, err
	}
	mc := server.MaskConfig{}
	for _, k := range keys {
		mc.Keys = append(mc.Keys, server.MaskKey{ID: k.id, Key: hex.EncodeToString(k.key)})
	}
	ck, err := mc.CounterKeys()
	return ck, keys[0].id, err
}
