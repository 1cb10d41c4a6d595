package main

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// startServe runs `flakeid serve` on a free port and returns its base URL.
func startServe(t *testing.T, bin string, args ...string) (*proc, string) {
	t.Helper()
	p := startProc(t, bin, "serve", append([]string{"serve", "--listen", "127.0.0.1:0"}, args...)...)
	re := regexp.MustCompile(`msg="flakeid: serving" addr=(\S+)`)
	var url string
	waitFor(t, "the server to listen", 20*time.Second, func() bool {
		_, stderr := p.snapshot()
		select {
		case <-p.done:
			t.Fatalf("serve exited before listening:\n%s", stderr)
		default:
		}
		if m := re.FindStringSubmatch(stderr); m != nil {
			url = "http://" + m[1]
			return true
		}
		return false
	})
	return p, url
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestServeBinary: `flakeid serve` with only a data directory runs a whole
// node; SIGTERM drains it and releases its worker-id lease.
func TestServeBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	bin := proofBin.get(t)
	data := t.TempDir()
	p, url := startServe(t, bin, "--data-dir", data)
	if code, body := get(t, url+"/readyz"); code != 200 {
		t.Fatalf("readyz: %d %s", code, body)
	}
	code, body := get(t, url+"/v1/snowflake/next?count=3")
	var ids struct{ IDs []string }
	if code != 200 || json.Unmarshal([]byte(body), &ids) != nil || len(ids.IDs) != 3 {
		t.Fatalf("next: %d %s", code, body)
	}
	resp, err := http.Post(url+"/v1/segment/tags", "application/json", strings.NewReader(`{"tag":"orders","step":10}`))
	if err != nil || resp.StatusCode != 201 {
		t.Fatalf("create tag: %v %v", err, resp)
	}
	resp.Body.Close()
	if code, body := get(t, url+"/api/segment/get/orders"); code != 200 || body != "1" {
		t.Fatalf("Leaf segment path: %d %q", code, body)
	}
	if code, body := get(t, url+"/metrics"); code != 200 || !strings.Contains(body, "flakeid_lease_held 1") {
		t.Fatalf("metrics: %d", code)
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		t.Fatal("serve did not stop within 15 s of SIGTERM")
	}
	if c := p.cmd.ProcessState.ExitCode(); c != 0 {
		_, stderr := p.snapshot()
		t.Fatalf("serve exited %d after SIGTERM:\n%s", c, stderr)
	}
	out, err := exec.Command(bin, "workers", "ls", "--json", "--data-dir", data).Output()
	if err != nil || strings.Contains(string(out), `"held":true`) {
		t.Fatalf("after shutdown the lease is still held: %s %v", out, err)
	}
	// The segment store kept the tag: a restarted node continues after it.
	p2, url2 := startServe(t, bin, "--data-dir", data)
	defer p2.kill()
	if code, body := get(t, url2+"/api/segment/get/orders"); code != 200 || body == "1" {
		t.Fatalf("after restart the tag handed out %q (reissued or failed: %d)", body, code)
	}
}

func TestServeBadConfig(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens.json")
	os.WriteFile(tokens, []byte(`[{"name":"x","token":"short"}]`), 0o600)
	badJSON := filepath.Join(dir, "bad.json")
	os.WriteFile(badJSON, []byte(`[{"name":`), 0o600)
	ring := filepath.Join(dir, "keyring")
	os.WriteFile(ring, []byte("1:000102030405060708090a0b0c0d0e0f\n"), 0o600)
	badRing := filepath.Join(dir, "bad-keyring")
	os.WriteFile(badRing, []byte("0:000102030405060708090a0b0c0d0e0f\n0:f0e0d0c0b0a090807060504030201000\n"), 0o600)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--max-count", "0"}, "max count 0"},
		{[]string{"--tls-cert", "cert.pem"}, "both a certificate and a key"},
		{[]string{"--tokens-file", tokens}, "shorter than 16"},
		{[]string{"--tokens-file", badJSON}, "--tokens-file"},
		{[]string{"--tokens-file", filepath.Join(dir, "missing.json")}, "no such file"},
		{[]string{"--listen", "nonsense"}, "listen address"},
		{[]string{"--time-bits", "60"}, "overflows"},
		{[]string{"--mask-snowflake"}, "no mask keys"},
		{[]string{"--mask-key", "abcd", "--mask-snowflake"}, "--mask-key (or FLAKEID_MASK_KEY): idmask: invalid key: the key is 4 characters long"},
		{[]string{"--mask-key", "000102030405060708090a0b0c0d0e0f", "--mask-key-id", "40"}, "--mask-key-id 40 (or FLAKEID_MASK_KEY_ID)"},
		{[]string{"--mask-key", "000102030405060708090a0b0c0d0e0f", "--mask-keyring", ring}, "--mask-key and --mask-keyring both given"},
		{[]string{"--mask-keyring", badRing, "--mask-snowflake"}, badRing + " line 2: key id 0 is listed twice"},
		{[]string{"--mask-keyring", filepath.Join(dir, "missing")}, "--mask-keyring (or FLAKEID_MASK_KEYRING)"},
		{[]string{"--mask-key", "000102030405060708090a0b0c0d0e0f", "--mask-bits", "53"}, "mask bits 53, but the layout's IDs are masked in 63 bits"},
		{[]string{"--mask-key", "000102030405060708090a0b0c0d0e0f", "--mask-bits", "64"}, "--mask-bits 64 (or FLAKEID_MASK_BITS): want 63 or 53"},
	} {
		r := runCLI(t, append([]string{"serve", "--data-dir", dir}, tc.args...)...)
		mustFail(t, r, exitError, tc.want)
	}
}

// TestConfigFile: a JSON config file sets serve's flags (keys are flag names
// with _ for -), and a flag on the command line wins over it.
func TestConfigFile(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	bin := proofBin.get(t)
	cfg := filepath.Join(t.TempDir(), "flakeid.json")
	os.WriteFile(cfg, []byte(`{"max_count": 5, "stream_batch": 5, "data_dir": "`+t.TempDir()+`", "listen": "127.0.0.1:1"}`), 0o600)
	p, url := startServe(t, bin, "--config", cfg) // --listen 127.0.0.1:0 from startServe wins
	defer p.kill()
	if code, _ := get(t, url+"/v1/snowflake/next?count=5"); code != 200 {
		t.Fatalf("count=5: %d", code)
	}
	if code, body := get(t, url+"/v1/snowflake/next?count=6"); code != 400 || !strings.Contains(body, "1 to 5") {
		t.Fatalf("count=6 with max_count 5 from the file: %d %s", code, body)
	}
	mustFail(t, runCLI(t, "--config", filepath.Join(t.TempDir(), "missing.json"), "layout"), exitUsage, "missing.json")
}

// TestServeMasked: --mask-snowflake and --mask-tags with the key from the
// variables `flakeid mask` reads (as a deployment would give a secret) hand
// out masked IDs, and `flakeid unmask` with the same key reads them back.
func TestServeMasked(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	bin := proofBin.get(t)
	const key = "000102030405060708090a0b0c0d0e0f"
	t.Setenv("FLAKEID_MASK_KEY", key)
	t.Setenv("FLAKEID_MASK_KEY_ID", "2")
	p, url := startServe(t, bin, "--data-dir", t.TempDir(), "--mask-snowflake", "--mask-tags", "orders", "--auto-create-tags")
	defer p.kill()
	code, text := get(t, url+"/api/snowflake/get/x")
	if code != 200 || len(text) != 15 || text[0] != '2' {
		t.Fatalf("masked Snowflake ID: %d %q", code, text)
	}
	out, err := exec.Command(bin, "unmask", "--key", key, "--key-id", "2", text).Output()
	if err != nil {
		t.Fatalf("unmask %s: %v", text, err)
	}
	id := strings.TrimSpace(string(out))
	if _, err := strconv.ParseInt(id, 10, 64); err != nil {
		t.Fatalf("unmask printed %q", out)
	}
	if code, body := get(t, url+"/v1/decode/"+text); code != 200 || !strings.Contains(body, `"id":"`+id+`"`) {
		t.Fatalf("decode %s: %d %s (want id %s)", text, code, body, id)
	}
	if code, seg := get(t, url+"/api/segment/get/orders"); code != 200 || len(seg) != 15 {
		t.Fatalf("masked segment ID: %d %q", code, seg)
	}
	if code, seg := get(t, url+"/api/segment/get/plain"); code != 200 || seg != "1" {
		t.Fatalf("tag plain is not masked: %d %q", code, seg)
	}

	// `flakeid next --server` prints the masked texts the server hands out
	// (it refuses the ranges the client reads first), of Snowflake IDs and
	// of a masked tag, and the plain IDs of a tag it does not mask.
	for _, tc := range []struct {
		args   []string
		masked bool
	}{
		{nil, true},
		{[]string{"--tag", "orders"}, true},
		{[]string{"--tag", "plain"}, false},
	} {
		r := runCLI(t, append([]string{"next", "-n", "4", "--server", url}, tc.args...)...)
		mustSucceed(t, r)
		lines := strings.Fields(r.stdout)
		if len(lines) != 4 {
			t.Fatalf("next %v: %q, want 4 lines", tc.args, r.stdout)
		}
		prev := int64(0)
		for _, l := range lines {
			if tc.masked {
				if len(l) != 15 || l[0] != '2' {
					t.Fatalf("next %v: %q is not a masked text of key 2", tc.args, l)
				}
				out, err := exec.Command(bin, "unmask", "--key", key, "--key-id", "2", l).Output()
				if err != nil {
					t.Fatalf("unmask %s: %v", l, err)
				}
				l = strings.TrimSpace(string(out))
			}
			v, err := strconv.ParseInt(l, 10, 64)
			if err != nil || v <= prev {
				t.Fatalf("next %v: %q after %d; want increasing IDs", tc.args, r.stdout, prev)
			}
			prev = v
		}
	}
	// A format that re-encodes IDs cannot apply to masked texts.
	mustFail(t, runCLI(t, "next", "-n", "2", "--format", "base58", "--server", url), 1,
		"masked IDs", "--format base58")

	// UUID-shaped texts of a masking server are keyed: `next --server
	// --format` prints them, and `flakeid decode` with the key (the
	// variables) reads them back to the IDs the server reads them as.
	for _, format := range []string{"uuid7", "typeid", "ulid"} {
		r := runCLI(t, "next", "-n", "3", "--format", format, "--server", url)
		mustSucceed(t, r)
		lines := strings.Fields(r.stdout)
		if len(lines) != 3 { // keyed payloads: they sort by millisecond only
			t.Fatalf("next --format %s --server: %q", format, r.stdout)
		}
		for _, l := range lines {
			_, body := get(t, url+"/v1/decode/"+l)
			r := runCLI(t, "decode", "--json", l)
			mustSucceed(t, r)
			var d struct {
				ID    string `json:"id"`
				Form  string `json:"form"`
				KeyID *int   `json:"key_id"`
			}
			if err := json.Unmarshal([]byte(r.stdout), &d); err != nil || d.KeyID == nil || *d.KeyID != 2 || d.Form != format ||
				!strings.Contains(body, `"id":"`+d.ID+`"`) || !strings.Contains(body, `"masked":"`+l+`"`) {
				t.Fatalf("decode %s: CLI %s, server %s", l, r.stdout, body)
			}
		}
	}
	// Bounds from the server say they are internal IDs.
	r := runCLI(t, "bounds", "--server", url, "--from=-1h")
	mustSucceed(t, r)
	if !strings.Contains(r.stdout, "note:") || !strings.Contains(r.stdout, "internal IDs") {
		t.Fatalf("bounds --server of a masking server:\n%s", r.stdout)
	}
}

// TestServeKeyring: with a keyring file the server masks with the ring's
// first key and decodes texts of every key in it, so a key is rotated
// without breaking the texts already handed out; `flakeid unmask` with the
// same file reads both.
func TestServeKeyring(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	t.Parallel()
	bin := proofBin.get(t)
	const oldKey, newKey = "000102030405060708090a0b0c0d0e0f", "f0e0d0c0b0a090807060504030201000"
	ring := filepath.Join(t.TempDir(), "keyring")
	os.WriteFile(ring, []byte("5:"+newKey+"  # masks\n2:"+oldKey+"  # unmasks texts made before the rotation\n"), 0o600)
	p, url := startServe(t, bin, "--data-dir", t.TempDir(), "--mask-snowflake", "--mask-keyring", ring)
	defer p.kill()

	code, text := get(t, url+"/api/snowflake/get/x")
	if code != 200 || len(text) != 15 || text[0] != '5' {
		t.Fatalf("masked Snowflake ID: %d %q, want a text of key 5", code, text)
	}
	out, err := exec.Command(bin, "unmask", "--keyring", ring, text).CombinedOutput()
	if err != nil {
		t.Fatalf("unmask --keyring %s: %v\n%s", text, err, out)
	}
	id := strings.TrimSpace(string(out))
	if code, body := get(t, url+"/v1/decode/"+text); code != 200 || !strings.Contains(body, `"id":"`+id+`"`) || !strings.Contains(body, `"key_id":5`) {
		t.Fatalf("decode %s: %d %s (want id %s, key 5)", text, code, body, id)
	}
	// A text of the old key, as handed out before the rotation.
	out, err = exec.Command(bin, "mask", "--key", oldKey, "--key-id", "2", id).CombinedOutput()
	if err != nil {
		t.Fatalf("mask: %v\n%s", err, out)
	}
	old := strings.TrimSpace(string(out))
	if code, body := get(t, url+"/v1/decode/"+old); code != 200 || !strings.Contains(body, `"id":"`+id+`"`) || !strings.Contains(body, `"key_id":2`) {
		t.Fatalf("decode of the old key's text %s: %d %s (want id %s, key 2)", old, code, body, id)
	}
}

// TestTestClockAdmin: the hidden test flag mounts POST /admin/test/clock; a
// shift back does not move IDs back; without the flag there is no endpoint.
func TestTestClockAdmin(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	bin := proofBin.get(t)
	plain, url := startServe(t, bin, "--data-dir", t.TempDir())
	resp, err := http.Post(url+"/admin/test/clock?shift=-5s", "", nil)
	if err != nil || resp.StatusCode != 404 {
		t.Fatalf("without the flag: %v %v", err, resp)
	}
	resp.Body.Close()
	plain.kill()

	p, url := startServe(t, bin, "--data-dir", t.TempDir(), "--test-clock-admin")
	defer p.kill()
	last := func() int64 {
		_, body := get(t, url+"/v1/snowflake/next?count=1")
		var r struct{ IDs []string }
		json.Unmarshal([]byte(body), &r)
		v, _ := strconv.ParseInt(r.IDs[0], 10, 64)
		return v
	}
	before := last()
	resp, err = http.Post(url+"/admin/test/clock?shift=-5s", "", nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("shift: %v %v", err, resp)
	}
	resp.Body.Close()
	for range 50 {
		if id := last(); id <= before {
			t.Fatalf("after the clock went back 5 s: ID %d ≤ %d", id, before)
		} else {
			before = id
		}
	}
	if code, body := get(t, url+"/metrics"); code != 200 || strings.Contains(body, "flakeid_clock_backward_jumps_total 0\n") {
		t.Fatalf("the step back was not counted")
	}
}
