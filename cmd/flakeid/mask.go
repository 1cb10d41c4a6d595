package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/flakeid/flakeid/idmask"
	"github.com/flakeid/flakeid/snowflake"
)

// maskKeyFlags choose the masking key; mask and unmask embed them.
type maskKeyFlags struct {
	Key   string `required:"" env:"FLAKEID_MASK_KEY" placeholder:"HEX" help:"The 128-bit masking key: 32 hex digits (make one with: openssl rand -hex 16). Prefer the environment variable: a key given on the command line can be seen by other users in ps and stays in the shell history."`
	KeyID uint8  `name:"key-id" default:"0" env:"FLAKEID_MASK_KEY_ID" placeholder:"N" help:"The key's id, 0–31: written as the first character of every text, and checked when reading one, so that keys can be rotated."`
	Bits  int    `default:"63" enum:"63,53" env:"FLAKEID_MASK_BITS" placeholder:"N" help:"The ID space: 63 (every non-negative int64, the default layouts) or 53 (IDs below 2^53, the jssafe layout). A masked ID stays in the same space."`
}

// masker builds the Masker the flags describe. Errors never quote the key.
func (f *maskKeyFlags) masker() (*idmask.Masker, error) {
	key, err := parseMaskKey(f.Key)
	if err != nil {
		return nil, fmt.Errorf("--key (or FLAKEID_MASK_KEY): %w", err)
	}
	m, err := idmask.New(key, f.KeyID, f.Bits)
	if errors.Is(err, idmask.ErrInvalidKeyID) {
		return nil, fmt.Errorf("--key-id %d: %w", f.KeyID, err)
	}
	return m, err
}

// parseMaskKey reads a 128-bit key written as 32 hex digits, in either
// case. Its errors describe what is wrong without repeating the key, which
// is a secret.
func parseMaskKey(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	if len(s) != 2*idmask.KeySize {
		return nil, fmt.Errorf("the key is %d characters long, want %d hex digits (a %d-bit key)", len(s), 2*idmask.KeySize, 8*idmask.KeySize)
	}
	key := make([]byte, idmask.KeySize)
	for i := range len(s) {
		d, ok := hexDigit(s[i])
		if !ok {
			return nil, fmt.Errorf("character %d of the key is not a hex digit (0–9, a–f)", i+1)
		}
		key[i/2] = key[i/2]<<4 | d
	}
	return key, nil
}

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

// Run masks every argument.
func (c *maskCmd) Run(out *streams) error {
	m, err := c.masker()
	if err != nil {
		return err
	}
	return eachArg(out, "mask", c.IDs, "IDs could not be masked", func(arg string) (string, error) {
		id, err := snowflake.Parse(arg)
		if err != nil {
			return "", err
		}
		if c.Form == "decimal" {
			v, err := m.Mask(id.Int64())
			return strconv.FormatInt(v, 10), err
		}
		f, err := idmask.ParseForm(c.Form)
		if err != nil {
			return "", err
		}
		return m.MaskText(id.Int64(), f)
	})
}

// unmaskCmd turns masked IDs back into internal ones.
type unmaskCmd struct {
	maskKeyFlags `embed:""`

	Form  string   `default:"auto" enum:"auto,base32,base62,decimal" env:"FLAKEID_MASK_FORM" help:"The form of the texts: auto (base32 or base62, told apart by length), base32, base62 or decimal (a bare masked integer, as mask --form decimal prints)."`
	Texts []string `arg:"" name:"text" help:"Masked IDs to unmask. One that is mistyped (the check character catches single typos), made with another key id or otherwise unreadable is reported on stderr and skipped; the exit status is then 1."`
}

// Run unmasks every argument.
func (c *unmaskCmd) Run(out *streams) error {
	m, err := c.masker()
	if err != nil {
		return err
	}
	ring, err := idmask.NewKeyring(m)
	if err != nil {
		return err
	}
	return eachArg(out, "unmask", c.Texts, "texts could not be unmasked", func(arg string) (string, error) {
		var (
			id  int64
			err error
		)
		switch c.Form {
		case "decimal":
			var v snowflake.ID
			if v, err = snowflake.Parse(arg); err == nil {
				id, err = m.Unmask(v.Int64())
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
			err = fmt.Errorf("%w (give that key with its --key-id)", err)
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
