package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/flakeid/flakeid/internal/testenv"
)

// TestGRPCurl runs the grpcurl lines of docs/API.md ("From the command
// line") against a live server, through gRPC server reflection, and checks
// what each prints.
func TestGRPCurl(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	grpcurl, err := filepath.Abs("../../bin/grpcurl")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(grpcurl); err != nil {
		msg := "bin/grpcurl: " + err.Error() + "; ./scripts/tools.sh installs it"
		if testenv.CI() {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	t.Parallel()
	b, err := os.ReadFile("../../docs/API.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)<!-- snippet: grpcurl -->\n```sh\n(.*?)```\n").FindSubmatch(b)
	if m == nil {
		t.Fatal("docs/API.md has no grpcurl snippet")
	}
	lines := strings.Split(strings.TrimSpace(string(m[1])), "\n")
	// What each line must print, in order.
	want := [][]string{
		{"flakeid.v1.IDService\n", "grpc.health.v1.Health\n", "grpc.reflection.v1.ServerReflection\n"},
		{"rpc NextSnowflake", "rpc StreamSnowflake", "rpc NextSegment", "rpc Decode"},
		{`"ranges"`, `"first"`, `"count": "3"`},
		{`"id": "5"`, `"datacenter": "0"`, `"worker": "0"`, `"sequence": "5"`, `"tick": "0"`},
		{`"status": "SERVING"`},
	}
	if len(lines) != len(want) {
		t.Fatalf("docs/API.md's grpcurl snippet has %d lines, the test checks %d:\n%s", len(lines), len(want), m[1])
	}
	_, url := startServe(t, proofBin.get(t))
	addr := strings.TrimPrefix(url, "http://")
	for i, line := range lines {
		if !strings.HasPrefix(line, "grpcurl ") || !strings.Contains(line, "127.0.0.1:8080") {
			t.Fatalf("line %d of the snippet is no grpcurl call of 127.0.0.1:8080: %s", i+1, line)
		}
		line = strings.ReplaceAll(line, "127.0.0.1:8080", addr)
		ctx, cancel := context.WithTimeout(t.Context(), respTimeout)
		cmd := exec.CommandContext(ctx, "bash", "-c", line)
		cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(grpcurl)+":"+os.Getenv("PATH"))
		out, err := cmd.CombinedOutput()
		cancel()
		if err != nil {
			t.Errorf("%s: %v\n%s", line, err, out)
			continue
		}
		for _, w := range want[i] {
			if !strings.Contains(string(out), w) {
				t.Errorf("%s printed\n%s\nwithout %q", line, out, w)
			}
		}
	}
}
