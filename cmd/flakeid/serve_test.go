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
