package main

import (
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/flakeid/flakeid/idmask"
)

// maskTestKey is the masking key of these tests, and maskTestKey2 another.
const (
	maskTestKey  = "2b7e151628aed2a6abf7158809cf4f3c"
	maskTestKey2 = "000102030405060708090A0B0C0D0E0F"
)

// testMasker is the Masker the CLI should build from key, keyID and bits.
func testMasker(t *testing.T, key string, keyID uint8, bits int) *idmask.Masker {
	t.Helper()
	k, err := hex.DecodeString(key)
	if err != nil {
		t.Fatal(err)
	}
	m, err := idmask.New(k, keyID, bits)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func lines(s string) []string { return strings.Split(strings.TrimSuffix(s, "\n"), "\n") }

func TestMaskForms(t *testing.T) {
	t.Parallel()
	ids := []int64{0, 1, 1000, 1234567890123456789}
	args := make([]string, len(ids))
	for i, id := range ids {
		args[i] = strconv.FormatInt(id, 10)
	}
	for _, c := range []struct {
		flags []string
		bits  int
		keyID uint8
		form  string
	}{
		{nil, 63, 0, "base32"},
		{[]string{"--form", "base62"}, 63, 0, "base62"},
		{[]string{"--form", "decimal", "--key-id", "5"}, 63, 5, "decimal"},
		{[]string{"--bits", "53", "--key-id", "31"}, 53, 31, "base32"},
		{[]string{"--bits", "53", "--form", "base62"}, 53, 0, "base62"},
	} {
		t.Run(strings.Join(c.flags, " "), func(t *testing.T) {
			t.Parallel()
			m := testMasker(t, maskTestKey, c.keyID, c.bits)
			in := ids
			if c.bits == 53 {
				in = ids[:3]
			}
			r := runCLI(t, append(append([]string{"mask", "--key", maskTestKey}, c.flags...), args[:len(in)]...)...)
			mustSucceed(t, r)
			got := lines(r.stdout)
			if len(got) != len(in) {
				t.Fatalf("%d lines for %d IDs:\n%s", len(got), len(in), r.stdout)
			}
			for i, id := range in {
				var want string
				if c.form == "decimal" {
					v, _ := m.Mask(id)
					want = strconv.FormatInt(v, 10)
				} else {
					f, _ := idmask.ParseForm(c.form)
					want, _ = m.MaskText(id, f)
				}
				if got[i] != want {
					t.Errorf("mask %d: %q, want %q", id, got[i], want)
				}
			}

			// unmask reads them back, in the auto form or the one named.
			forms := []string{"auto", c.form}
			if c.form == "decimal" {
				forms = forms[1:]
			}
			for _, form := range forms {
				r := runCLI(t, append([]string{"unmask", "--key", maskTestKey, "--key-id", strconv.Itoa(int(c.keyID)),
					"--bits", strconv.Itoa(c.bits), "--form", form}, got...)...)
				mustSucceed(t, r)
				if want := strings.Join(args[:len(in)], "\n") + "\n"; r.stdout != want {
					t.Errorf("unmask --form %s: %q, want %q", form, r.stdout, want)
				}
			}
		})
	}
}

// TestMaskKeyFromEnvironment cannot run in parallel: it sets environment
// variables.
func TestMaskKeyFromEnvironment(t *testing.T) {
	t.Setenv("FLAKEID_MASK_KEY", maskTestKey)
	t.Setenv("FLAKEID_MASK_KEY_ID", "2")
	t.Setenv("FLAKEID_MASK_BITS", "53")
	m := testMasker(t, maskTestKey, 2, 53)
	want, _ := m.MaskText(77, idmask.Base32)
	r := runCLI(t, "mask", "77")
	mustSucceed(t, r)
	if r.stdout != want+"\n" {
		t.Errorf("mask with the key from FLAKEID_MASK_KEY: %q, want %q", r.stdout, want)
	}
	r = runCLI(t, "unmask", want)
	mustSucceed(t, r)
	if r.stdout != "77\n" {
		t.Errorf("unmask: %q", r.stdout)
	}
	// A flag wins over its variable.
	other := testMasker(t, maskTestKey2, 2, 53)
	want2, _ := other.MaskText(77, idmask.Base32)
	r = runCLI(t, "mask", "--key", maskTestKey2, "77")
	mustSucceed(t, r)
	if r.stdout != want2+"\n" {
		t.Errorf("mask --key over FLAKEID_MASK_KEY: %q, want %q", r.stdout, want2)
	}
	// A bad key from the environment is reported without being shown.
	t.Setenv("FLAKEID_MASK_KEY", "sekrit-sekrit-sekrit-sekrit-1234")
	r = runCLI(t, "mask", "1")
	mustFail(t, r, exitError, "FLAKEID_MASK_KEY", "character 1 of the key is not a hex digit")
	if strings.Contains(r.stderr, "sekrit") {
		t.Errorf("the error shows the key:\n%s", r.stderr)
	}
}

func TestMaskBadKey(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		code int
		want []string
	}{
		{[]string{"mask", "1"}, exitUsage, []string{"no masking key: give --key (or FLAKEID_MASK_KEY), or --keyring", "flakeid mask --help"}},
		{[]string{"mask", "--key", maskTestKey, "--keyring", "ring", "1"}, exitUsage, []string{"--key and --keyring both given"}},
		{[]string{"unmask", "--keyring", "/nonexistent/ring", "0ABC"}, exitError, []string{"--keyring", "/nonexistent/ring", "no such file"}},
		{[]string{"unmask", "0ABC"}, exitUsage, []string{"--key"}},
		{[]string{"mask", "--key", maskTestKey[:30], "1"}, exitError, []string{"--key", "30 characters long, want 32 hex digits (a 128-bit key)"}},
		{[]string{"unmask", "--key", maskTestKey + "00", "0ABC"}, exitError, []string{"--key", "34 characters long"}},
		{[]string{"mask", "--key", maskTestKey[:31] + "g", "1"}, exitError, []string{"character 32 of the key is not a hex digit"}},
		{[]string{"mask", "--key", maskTestKey, "--key-id", "32", "1"}, exitError, []string{"--key-id 32", "want 0–31"}},
		{[]string{"mask", "--key", maskTestKey, "--key-id", "256", "1"}, exitUsage, []string{"--key-id"}},
		{[]string{"mask", "--key", maskTestKey, "--bits", "64", "1"}, exitUsage, []string{"--bits", "63", "53"}},
		{[]string{"mask", "--key", maskTestKey, "--form", "hex", "1"}, exitUsage, []string{"--form", "hex"}},
		{[]string{"unmask", "--key", maskTestKey, "--form", "base58", "x"}, exitUsage, []string{"--form", "base58"}},
		{[]string{"mask", "--key", maskTestKey}, exitUsage, []string{"<id>"}},
		{[]string{"unmask", "--key", maskTestKey}, exitUsage, []string{"<text>"}},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			t.Parallel()
			r := runCLI(t, c.args...)
			mustFail(t, r, c.code, c.want...)
			if r.stdout != "" {
				t.Errorf("stdout not empty:\n%s", r.stdout)
			}
			if strings.Contains(r.stderr, maskTestKey[:30]) {
				t.Errorf("the error shows the key:\n%s", r.stderr)
			}
		})
	}
}

// TestMaskBadIDs checks that bad arguments are reported, naming them, while
// the good ones are still masked.
func TestMaskBadIDs(t *testing.T) {
	t.Parallel()
	m := testMasker(t, maskTestKey, 0, 53)
	a, _ := m.MaskText(5, idmask.Base32)
	b, _ := m.MaskText(9007199254740991, idmask.Base32)
	r := runCLI(t, "mask", "--key", maskTestKey, "--bits", "53", "--", "5", "x7", "-3", "9007199254740992", " 9007199254740991 ")
	mustFail(t, r, exitError,
		`argument 2 "x7": `, "non-digit 'x' at position 1",
		`argument 3 "-3": `, "negative",
		`argument 4 "9007199254740992": `, "out of range", "2^53−1",
		"3 of 5 IDs could not be masked")
	if r.stdout != a+"\n"+b+"\n" {
		t.Errorf("stdout %q, want the two good IDs masked: %q %q", r.stdout, a, b)
	}
	if strings.Contains(r.stderr, "argument 1 ") || strings.Contains(r.stderr, "argument 5 ") {
		t.Errorf("good arguments reported:\n%s", r.stderr)
	}
}

// TestUnmaskBadTexts feeds unmask a good text, corrupted ones, one of another
// key id and one of another width.
func TestUnmaskBadTexts(t *testing.T) {
	t.Parallel()
	m := testMasker(t, maskTestKey, 0, 63)
	good, _ := m.MaskText(4242, idmask.Base32)
	good62, _ := m.MaskText(4343, idmask.Base62)
	typo := good[:6] + "0" + good[7:]
	if typo == good {
		typo = good[:6] + "1" + good[7:]
	}
	badChar := good[:3] + "U" + good[4:]
	otherKeyID, _ := testMasker(t, maskTestKey2, 7, 63).MaskText(4242, idmask.Base32)
	narrow, _ := testMasker(t, maskTestKey, 0, 53).MaskText(4242, idmask.Base62)
	masked, _ := m.Mask(4242)

	r := runCLI(t, "unmask", "--key", maskTestKey, good, typo, badChar, otherKeyID, strings.ToLower(good), narrow, good62,
		strconv.FormatInt(masked, 10))
	mustFail(t, r, exitError,
		fmt.Sprintf("argument 2 %q: ", typo), "check character mismatch", "mistyped or corrupted",
		fmt.Sprintf("argument 3 %q: ", badChar), "bad character 'U' at position 4",
		fmt.Sprintf("argument 4 %q: ", otherKeyID), "made with key id 7", "--key-id",
		fmt.Sprintf("argument 6 %q: ", narrow), "11 bytes long; want 15 characters (base32) or 13 (base62) for 63-bit IDs",
		"argument 8", "--form decimal",
		"5 of 8 texts could not be unmasked")
	if r.stdout != "4242\n4242\n4343\n" {
		t.Errorf("stdout %q, want the three good texts unmasked", r.stdout)
	}

	// Naming the form rejects the other one.
	r = runCLI(t, "unmask", "--key", maskTestKey, "--form", "base32", good62, good)
	mustFail(t, r, exitError, "argument 1", "13 bytes long, want 15 characters")
	if r.stdout != "4242\n" {
		t.Errorf("stdout %q", r.stdout)
	}

	// --form decimal unmasks a masked integer, and checks its range.
	r = runCLI(t, "unmask", "--key", maskTestKey, "--bits", "53", "--form", "decimal", "9007199254740992", "12")
	mustFail(t, r, exitError, `argument 1 "9007199254740992"`, "out of range")
	m53 := testMasker(t, maskTestKey, 0, 53)
	if want, _ := m53.Unmask(12); r.stdout != strconv.FormatInt(want, 10)+"\n" {
		t.Errorf("unmask --form decimal 12: %q, want %d", r.stdout, want)
	}

	// The right key id reads the other key's text.
	r = runCLI(t, "unmask", "--key", maskTestKey2, "--key-id", "7", otherKeyID)
	mustSucceed(t, r)
	if r.stdout != "4242\n" {
		t.Errorf("stdout %q", r.stdout)
	}
}

// TestMaskKeyring: a keyring file masks with its first key and unmasks
// texts of every key it holds (rotation), from the flag or the environment.
func TestMaskKeyring(t *testing.T) {
	t.Parallel()
	ring := filepath.Join(t.TempDir(), "keyring")
	os.WriteFile(ring, []byte("# the new key masks\n3:"+maskTestKey2+"\n\n1:"+maskTestKey+"  # the old one, until its texts are gone\n"), 0o600)
	oldText, _ := testMasker(t, maskTestKey, 1, 63).MaskText(4242, idmask.Base32)
	newText, _ := testMasker(t, maskTestKey2, 3, 63).MaskText(4242, idmask.Base32)

	r := runCLI(t, "mask", "--keyring", ring, "4242")
	mustSucceed(t, r)
	if r.stdout != newText+"\n" {
		t.Errorf("mask --keyring: %q, want %q (the first key's)", r.stdout, newText)
	}
	r = runCLI(t, "unmask", "--keyring", ring, oldText, newText)
	mustSucceed(t, r)
	if r.stdout != "4242\n4242\n" {
		t.Errorf("unmask --keyring of an old and a new text: %q", r.stdout)
	}
	// A text of a key the ring does not hold names the way out.
	other, _ := testMasker(t, maskTestKey, 9, 63).MaskText(1, idmask.Base32)
	mustFail(t, runCLI(t, "unmask", "--keyring", ring, other), exitError, "key id 9", "--keyring that holds it")
}

// TestMaskBadKeyring: a keyring's mistakes are reported with the file and
// line, never quoting a key.
func TestMaskBadKeyring(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for i, c := range []struct {
		text, want string
	}{
		{"", "holds no key"},
		{"# only a comment\n", "holds no key"},
		{"1:" + maskTestKey + "\n" + maskTestKey2 + "\n", "line 2: not of the form key-id:hex-key"},
		{"x:" + maskTestKey + "\n", "line 1: the key id is not a whole number 0–31"},
		{"32:" + maskTestKey + "\n", "line 1: the key id is not a whole number 0–31"},
		{"1:" + maskTestKey + "\n1:" + maskTestKey2 + "\n", "line 2: key id 1 is listed twice"},
		{"\n\n4:" + maskTestKey[:31] + "z\n", "line 3 (key id 4): idmask: invalid key: character 32 of the key is not a hex digit"},
	} {
		path := filepath.Join(dir, fmt.Sprintf("ring%d", i))
		os.WriteFile(path, []byte(c.text), 0o600)
		r := runCLI(t, "mask", "--keyring", path, "1")
		mustFail(t, r, exitError, "--keyring (or FLAKEID_MASK_KEYRING)", path, c.want)
		if strings.Contains(r.stderr, maskTestKey[:20]) || strings.Contains(r.stderr, maskTestKey2[:20]) {
			t.Errorf("the error quotes a key:\n%s", r.stderr)
		}
	}
}

func TestMaskHelp(t *testing.T) {
	t.Parallel()
	r := runCLI(t, "--help")
	mustSucceed(t, r)
	for _, cmd := range []string{"mask", "unmask"} {
		if !strings.Contains(r.stdout, cmd) {
			t.Errorf("--help does not list %s", cmd)
		}
	}
	for _, cmd := range []string{"mask", "unmask"} {
		r := runCLI(t, cmd, "--help")
		mustSucceed(t, r)
		for _, w := range []string{"FLAKEID_MASK_KEY", "in ps", "32 hex digits", "--key-id", "0–31", "--bits", "53", "--form", "--keyring", "FLAKEID_MASK_KEYRING"} {
			if !strings.Contains(r.stdout, w) {
				t.Errorf("%s --help does not mention %q:\n%s", cmd, w, r.stdout)
			}
		}
	}
}
