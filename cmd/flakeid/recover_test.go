package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flakeid/flakeid/snowflake"
)

// stateDir makes a data directory with both state files in use: a worker
// coordinator that leased ids, and a segment store with the tag orders.
func stateDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if r := runCLIContext(t, ctx, "next", "--data-dir", dir, "-n", "3"); r.code != 0 {
		t.Fatalf("next: exit %d\n%s", r.code, r.stderr)
	}
	if r := runCLIContext(t, ctx, "tags", "create", "orders", "--step", "10", "--data-dir", dir); r.code != 0 {
		t.Fatalf("tags create: exit %d\n%s", r.code, r.stderr)
	}
	return dir
}

// runBin runs the binary with args and returns its exit code and stderr.
func runBin(t *testing.T, bin string, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("%v: still running after 30 s\n%s", args, stderr.String())
	}
	if err != nil && cmd.ProcessState == nil {
		t.Fatal(err)
	}
	return cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()
}

// mustRefuseShortly fails unless the run failed with a short error that
// says want, and is no crash.
func mustRefuseShortly(t *testing.T, what string, code int, stderr string, want ...string) {
	t.Helper()
	if code == 0 {
		t.Errorf("%s: exit 0 on a damaged data directory\n%s", what, stderr)
		return
	}
	if strings.Contains(stderr, "goroutine ") || strings.Contains(stderr, "SIGBUS") || strings.Contains(stderr, "panic") {
		t.Errorf("%s crashed:\n%s", what, stderr)
	}
	if n := strings.Count(stderr, "\n"); n > 20 {
		t.Errorf("%s: %d lines of error:\n%s", what, n, stderr)
	}
	for _, w := range want {
		if !strings.Contains(stderr, w) {
			t.Errorf("%s: stderr does not say %q:\n%s", what, w, stderr)
		}
	}
}

// TestDamagedStateRefused: serve, next and the listing commands refuse a
// state file truncated to 0 bytes or to half with a short error — no
// SIGBUS, no goroutine dump — and leave it as it is.
func TestDamagedStateRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	t.Parallel()
	bin := proofBin.get(t)
	for _, file := range []string{"workers.db", "segments.db"} {
		for _, cut := range []string{"empty", "half"} {
			t.Run(file+"/"+cut, func(t *testing.T) {
				t.Parallel()
				dir := stateDir(t)
				path := filepath.Join(dir, file)
				size := int64(0)
				if cut == "half" {
					fi, err := os.Stat(path)
					if err != nil {
						t.Fatal(err)
					}
					size = fi.Size() / 2
				}
				if err := os.Truncate(path, size); err != nil {
					t.Fatal(err)
				}
				cmds := [][]string{{"serve", "--listen", "127.0.0.1:0"}, {"tags", "ls"}}
				if file == "workers.db" {
					cmds = [][]string{{"serve", "--listen", "127.0.0.1:0"}, {"next"}, {"workers", "ls"}}
				}
				for _, args := range cmds {
					code, _, stderr := runBin(t, bin, append(args, "--data-dir", dir)...)
					mustRefuseShortly(t, strings.Join(args[:1], " "), code, stderr,
						"state file damaged", path, "could reissue IDs", "flakeid recover --data-dir "+dir)
				}
				if fi, err := os.Stat(path); err != nil || fi.Size() != size {
					t.Fatalf("the refused file was changed: %v, %v", fi, err)
				}
			})
		}
	}
}

// TestLostStateRefused: a state file the data directory remembers and that
// is gone is refused, not re-created.
func TestLostStateRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	t.Parallel()
	bin := proofBin.get(t)
	dir := stateDir(t)
	for _, file := range []string{"workers.db", "segments.db"} {
		path := filepath.Join(dir, file)
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		args := []string{"tags", "ls"}
		if file == "workers.db" {
			args = []string{"serve", "--listen", "127.0.0.1:0"}
		}
		code, _, stderr := runBin(t, bin, append(args, "--data-dir", dir)...)
		mustRefuseShortly(t, args[0], code, stderr, path+" was created on", "is gone", "flakeid recover --data-dir "+dir)
		if _, err := os.Stat(path); !os.IsNotExist(err) {
			t.Fatalf("%s was re-created: %v", path, err)
		}
	}
}

// TestRecover: after recover (which wants a floor for every tag of a lost
// segment store, and refuses to run beside a serve), serve starts, its first
// IDs lie after the recovery's worker floor, and the tag resumes from its
// floor; the damaged files are kept aside.
func TestRecover(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	t.Parallel()
	bin := proofBin.get(t)
	dir := stateDir(t)
	if err := os.Truncate(filepath.Join(dir, "workers.db"), 0); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(filepath.Join(dir, "segments.db"), 16<<10); err != nil {
		t.Fatal(err)
	}

	code, _, stderr := runBin(t, bin, "recover", "--data-dir", dir)
	mustRefuseShortly(t, "recover without --tag-floor", code, stderr, "--tag-floor TAG=N", "nothing was changed")
	if fi, err := os.Stat(filepath.Join(dir, "workers.db")); err != nil || fi.Size() != 0 {
		t.Fatalf("the refused recovery changed workers.db: %v, %v", fi, err)
	}

	code, stdout, stderr := runBin(t, bin, "recover", "--data-dir", dir, "--tag-floor", "orders=1000000")
	if code != 0 {
		t.Fatalf("recover: exit %d\n%s%s", code, stdout, stderr)
	}
	t.Logf("recover:\n%s", stdout)
	m := regexp.MustCompile(`worker floor (\S+)`).FindStringSubmatch(stdout)
	if m == nil {
		t.Fatalf("recover did not print the worker floor:\n%s", stdout)
	}
	floor, err := time.Parse(time.RFC3339Nano, m[1])
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"workers.db: damaged: 0 bytes", "segments.db: damaged: 16 KiB of the", "tag orders hands out IDs from 1000000"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("recover did not say %q:\n%s", want, stdout)
		}
	}
	aside, _ := filepath.Glob(filepath.Join(dir, "*.damaged-*"))
	if len(aside) != 2 {
		t.Fatalf("damaged files kept aside: %v, want both", aside)
	}

	p, url := startServe(t, bin, "--data-dir", dir)
	defer p.kill()
	code, body := get(t, url+"/v1/snowflake/next?count=3")
	var ids struct{ IDs []string }
	if code != 200 || json.Unmarshal([]byte(body), &ids) != nil || len(ids.IDs) != 3 {
		t.Fatalf("next: %d %s", code, body)
	}
	l, _ := snowflake.Preset("default")
	for _, s := range ids.IDs {
		id, err := snowflake.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		parts, err := l.Decode(id)
		if err != nil {
			t.Fatal(err)
		}
		if parts.Time.Before(floor) {
			t.Fatalf("ID %s is of %v, before the recovery's worker floor %v", s, parts.Time, floor)
		}
	}
	code, body = get(t, url+"/api/segment/get/orders")
	if n, err := strconv.ParseInt(body, 10, 64); code != 200 || err != nil || n < 1000000 {
		t.Fatalf("orders after recovery: %d %q, want an ID from 1000000 on", code, body)
	}

	code, _, stderr = runBin(t, bin, "recover", "--data-dir", dir)
	mustRefuseShortly(t, "recover beside a running serve", code, stderr, "used by another flakeid process")
}
