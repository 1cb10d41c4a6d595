package main

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// boundAddrs waits for serve's "listening" line and returns its addresses.
func boundAddrs(t *testing.T, p *proc) (httpAddr, respAddr string) {
	t.Helper()
	re := regexp.MustCompile(`msg="flakeid: listening; not ready until a worker id is leased" addr=(\S+)(?: resp_addr=(\S+))?`)
	waitFor(t, "serve to bind its ports", respTimeout, func() bool {
		_, stderr := p.snapshot()
		if m := re.FindStringSubmatch(stderr); m != nil {
			httpAddr, respAddr = m[1], m[2]
			return true
		}
		select {
		case <-p.done:
			t.Fatalf("serve exited:\n%s", stderr)
		default:
		}
		return false
	})
	return httpAddr, respAddr
}

// TestServeBindsFirst: serve binds its ports before it leases a worker id.
// A port in use (HTTP or RESP) fails the start at once, leasing nothing; a
// node waiting for a lease answers on its ports — /healthz 200, /readyz and
// the API 503 unavailable, RESP -UNAVAILABLE — and serves on the same ports
// once it holds one. On a real Redis coordinator whose layout has one
// worker id, so that a second node waits for the first to leave.
func TestServeBindsFirst(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	t.Parallel()
	addr := ownRedis(t) // the registry is the database's one: a Redis of the test's own
	bin := proofBin.get(t)
	prefix := randomName("flakeid-bind-")
	coord := []string{"--coordinator", "redis://" + addr + "/0?prefix=" + prefix,
		"--worker-bits", "0", "--datacenter", "3"}
	first, firstURL := startServe(t, bin, append([]string{"--resp-listen", "127.0.0.1:0"}, coord...)...)
	firstRESP := regexp.MustCompile(`msg="flakeid: serving RESP" addr=(\S+)`)
	var inUseRESP string
	waitFor(t, "the first node's RESP port", respTimeout, func() bool {
		_, stderr := first.snapshot()
		if m := firstRESP.FindStringSubmatch(stderr); m != nil {
			inUseRESP = m[1]
			return true
		}
		return false
	})

	// Ports in use: the start fails at once, before any lease (the only
	// worker id is held, so a node that tried to lease would wait).
	for _, args := range [][]string{
		{"serve", "--listen", strings.TrimPrefix(firstURL, "http://")},
		{"serve", "--listen", "127.0.0.1:0", "--resp-listen", inUseRESP},
	} {
		start := time.Now()
		ctx, cancel := context.WithTimeout(t.Context(), respTimeout)
		r := runCLIContext(t, ctx, append(append(args, "--data-dir", t.TempDir()), coord...)...)
		cancel()
		if r.code == exitOK || !strings.Contains(r.stderr, "address already in use") || !strings.Contains(r.stderr, "nothing was leased") {
			t.Fatalf("%v: exit %d after %v\n%s", args, r.code, time.Since(start), r.stderr)
		}
		if strings.Contains(r.stderr, "worker id leased") || strings.Contains(r.stderr, "waiting") {
			t.Fatalf("%v leased or waited before failing:\n%s", args, r.stderr)
		}
	}

	// A second node waits for the worker id, answering on its ports.
	second := startProc(t, bin, "serve", append([]string{"serve", "--listen", "127.0.0.1:0", "--resp-listen", "127.0.0.1:0"}, coord...)...)
	httpAddr, respAddr := boundAddrs(t, second)
	for path, want := range map[string]struct {
		code int
		body string
	}{
		"/healthz":                   {200, "ok"},
		"/readyz":                    {503, "starting"},
		"/v1/snowflake/next?count=1": {503, `"code":"unavailable"`},
	} {
		resp, err := http.Get("http://" + httpAddr + path)
		if err != nil {
			t.Fatalf("GET %s while starting: %v", path, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want.code || !strings.Contains(string(b), want.body) {
			t.Errorf("GET %s while starting: %d %s, want %d with %q", path, resp.StatusCode, b, want.code, want.body)
		}
		if want.code == 503 && resp.Header.Get("Retry-After") == "" {
			t.Errorf("GET %s while starting: no Retry-After", path)
		}
	}
	c, err := net.DialTimeout("tcp", respAddr, respTimeout)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(respTimeout))
	io.WriteString(c, "*1\r\n$4\r\nPING\r\n")
	line, _ := bufio.NewReader(c).ReadString('\n')
	c.Close()
	if !strings.HasPrefix(line, "-UNAVAILABLE starting") {
		t.Errorf("PING while starting: %q, want -UNAVAILABLE starting…", line)
	}

	// The first node leaves; the second takes the worker id and serves on
	// the ports it bound.
	first.cmd.Process.Signal(syscall.SIGTERM)
	<-first.done
	waitFor(t, "the second node to serve", 3*respTimeout, func() bool {
		_, stderr := second.snapshot()
		return strings.Contains(stderr, `msg="flakeid: serving" addr=`+httpAddr)
	})
	waitFor(t, "the second node to be ready", respTimeout, func() bool {
		code, _ := get(t, "http://"+httpAddr+"/readyz")
		return code == 200
	})
	rc := respClient(t, respAddr, nil)
	if n, err := rc.Incr(respCtx(t), "snowflake").Result(); err != nil || n <= 0 {
		t.Errorf("INCR snowflake on the second node: %d %v", n, err)
	}
}
