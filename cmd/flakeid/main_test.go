package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/flakeid/flakeid/snowflake"
)

// TestMain clears FLAKEID_* variables, so a developer's environment cannot
// change what the commands under test do, and points the data directory (the
// default file coordinator) at a fresh temporary one. It keeps the
// FLAKEID_TEST_* variables (the service addresses of internal/testenv, which
// the proof tests read) except those of the binary's hidden test flags,
// which would shift the clock of every command under test.
func TestMain(m *testing.M) {
	hidden := hiddenFlagEnv()
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, envPrefix) && (!strings.HasPrefix(k, testEnvPrefix) || hidden[k]) {
			os.Unsetenv(k)
		}
	}
	dir, err := os.MkdirTemp("", "flakeid-cmd-test-")
	if err != nil {
		panic(err)
	}
	os.Setenv("FLAKEID_DATA_DIR", dir)
	proofBin.dir = filepath.Join(dir, "bin")
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// result is what one in-process run of the CLI produced.
type result struct {
	stdout, stderr string
	code           int
	// unsafe is set when the run warned that a static worker id is unsafe;
	// the warning is removed from stderr.
	unsafe bool
}

// unsafeWarning is what every use of a static worker id logs.
const unsafeWarning = "UNSAFE worker id"

// runCLI runs the CLI in-process with args.
func runCLI(t *testing.T, args ...string) result {
	t.Helper()
	return runCLIContext(t, t.Context(), args...)
}

func runCLIContext(t *testing.T, ctx context.Context, args ...string) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(ctx, args, &stdout, &stderr)
	r := result{stdout: stdout.String(), code: code}
	for _, line := range strings.SplitAfter(stderr.String(), "\n") {
		if strings.Contains(line, unsafeWarning) {
			r.unsafe = true
			continue
		}
		r.stderr += line
	}
	return r
}

// mustSucceed fails the test unless r is a success without anything on stderr.
func mustSucceed(t *testing.T, r result) {
	t.Helper()
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("exit %d, stderr:\n%s\nstdout:\n%s", r.code, r.stderr, r.stdout)
	}
}

// mustFail fails the test unless r exited with code and stderr holds every
// one of want.
func mustFail(t *testing.T, r result, code int, want ...string) {
	t.Helper()
	if r.code != code {
		t.Errorf("exit %d, want %d; stderr:\n%s", r.code, code, r.stderr)
	}
	for _, w := range want {
		if !strings.Contains(r.stderr, w) {
			t.Errorf("stderr does not mention %q:\n%s", w, r.stderr)
		}
	}
}

func TestUsageErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"no command", nil, []string{`"next", "decode", "layout"`, `flakeid --help`}},
		{"unknown command", []string{"generate"}, []string{"generate"}},
		{"unknown flag", []string{"next", "--bogus"}, []string{"unknown flag --bogus", "flakeid next --help"}},
		{"unknown layout flag", []string{"layout", "--node-bits", "3"}, []string{"--node-bits"}},
		{"count not a number", []string{"next", "-n", "five"}, []string{"--count", "five"}},
		{"count overflows int", []string{"next", "-n", "99999999999999999999999"}, []string{"--count"}},
		{"unknown format", []string{"next", "--format", "hex"}, []string{"--format", "hex"}},
		{"unknown policy", []string{"next", "--policy", "spin"}, []string{"--policy", "spin"}},
		{"bad epoch", []string{"layout", "--epoch", "yesterday"}, []string{"--epoch", "yesterday"}},
		{"bad time unit", []string{"layout", "--time-unit", "fast"}, []string{"--time-unit"}},
		{"decode without IDs", []string{"decode"}, []string{"<id>"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := runCLI(t, tc.args...)
			mustFail(t, r, exitUsage, tc.want...)
			if r.stdout != "" {
				t.Errorf("stdout not empty:\n%s", r.stdout)
			}
		})
	}
}

func TestHelp(t *testing.T) {
	t.Parallel()
	r := runCLI(t, "--help")
	mustSucceed(t, r)
	for _, cmd := range []string{"next", "decode", "layout"} {
		if !strings.Contains(r.stdout, cmd) {
			t.Errorf("--help does not list %s:\n%s", cmd, r.stdout)
		}
	}
	for _, cmd := range []string{"next", "decode", "layout"} {
		r := runCLI(t, cmd, "--help")
		mustSucceed(t, r)
		want := append(snowflake.PresetNames(), "--time-bits", "--epoch", "--time-unit", "FLAKEID_PRESET",
			"FLAKEID_WORKER_BITS", "overrides that one field")
		for _, w := range want {
			if !strings.Contains(r.stdout, w) {
				t.Errorf("%s --help does not mention %q:\n%s", cmd, w, r.stdout)
			}
		}
	}
}

// TestEnvironment cannot run in parallel: it sets environment variables.
func TestEnvironment(t *testing.T) {
	t.Run("flags from the environment", func(t *testing.T) {
		t.Setenv("FLAKEID_COUNT", "3")
		t.Setenv("FLAKEID_WORKER", "9")
		t.Setenv("FLAKEID_DATACENTER", "2")
		ids := nextIDs(t)
		if len(ids) != 3 {
			t.Fatalf("got %d IDs, want 3 from FLAKEID_COUNT", len(ids))
		}
		p, err := snowflake.DefaultLayout().Decode(ids[0])
		if err != nil {
			t.Fatal(err)
		}
		if p.Worker != 9 || p.Datacenter != 2 {
			t.Errorf("decoded %+v, want datacenter 2 worker 9", p)
		}
	})
	t.Run("a flag wins over its variable", func(t *testing.T) {
		t.Setenv("FLAKEID_COUNT", "3")
		if ids := nextIDs(t, "-n", "2"); len(ids) != 2 {
			t.Errorf("got %d IDs, want 2", len(ids))
		}
	})
	t.Run("layout flags", func(t *testing.T) {
		t.Setenv("FLAKEID_PRESET", "sonyflake")
		t.Setenv("FLAKEID_WORKER_BITS", "15")
		t.Setenv("FLAKEID_SEQUENCE_BITS", "9")
		r := runCLI(t, "layout")
		mustSucceed(t, r)
		if !strings.Contains(r.stdout, "0 | time 39 | worker 15 | seq 9") {
			t.Errorf("layout ignores FLAKEID_ variables:\n%s", r.stdout)
		}
	})
	t.Run("bad value names the variable", func(t *testing.T) {
		t.Setenv("FLAKEID_COUNT", "lots")
		mustFail(t, runCLI(t, "next"), exitUsage, "FLAKEID_COUNT")
	})
}

func TestEpochFlag(t *testing.T) {
	t.Parallel()
	want := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, in := range []string{"1735689600000", "2025-01-01T00:00:00Z", "2025-01-01T01:00:00+01:00", "2025-01-01", " 2025-01-01 "} {
		var e epochFlag
		if err := e.UnmarshalText([]byte(in)); err != nil {
			t.Errorf("%q: %v", in, err)
		} else if got := time.Time(e); !got.Equal(want) || got.Location() != time.UTC {
			t.Errorf("%q = %v, want %v", in, got, want)
		}
	}
	for _, in := range []string{"", "2025-13-01", "tomorrow", "1.5e12"} {
		var e epochFlag
		if err := e.UnmarshalText([]byte(in)); err == nil {
			t.Errorf("%q parsed as %v, want an error", in, time.Time(e))
		}
	}
}

// TestBinary builds the real binary and runs it, to check what the
// in-process tests cannot: main's exit status and the streams it writes to.
func TestBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	gobin, err := exec.LookPath("go") // go test puts its own go first in PATH
	if err != nil {
		t.Skip("no go command to build with")
	}
	bin := filepath.Join(t.TempDir(), "flakeid")
	if runtime.GOOS == "windows" {
		bin += ".exe"
	}
	build := exec.CommandContext(t.Context(), gobin, "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	exe := func(args ...string) (stdout, stderr string, code int) {
		t.Helper()
		cmd := exec.CommandContext(t.Context(), bin, args...)
		cmd.Env = []string{"FLAKEID_DATA_DIR=" + t.TempDir()} // and no other FLAKEID_* from the caller
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		err := cmd.Run()
		if _, ok := err.(*exec.ExitError); err != nil && !ok {
			t.Fatalf("running %v: %v", args, err)
		}
		return o.String(), e.String(), cmd.ProcessState.ExitCode()
	}

	stdout, stderr, code := exe("next", "-n", "5")
	if code != 0 || stderr != "" {
		t.Fatalf("next -n 5: exit %d, stderr %q", code, stderr)
	}
	lines := strings.Fields(stdout)
	if len(lines) != 5 {
		t.Fatalf("next -n 5 printed %d IDs:\n%s", len(lines), stdout)
	}
	var prev snowflake.ID = -1
	for _, l := range lines {
		id, err := snowflake.Parse(l)
		if err != nil {
			t.Fatal(err)
		}
		if id <= prev {
			t.Errorf("IDs not increasing: %v after %v", id, prev)
		}
		prev = id
	}

	stdout, stderr, code = exe("layout", "--time-bits", "37", "--worker-bits", "20", "--sequence-bits", "16")
	if code == 0 {
		t.Errorf("impossible layout exited 0; stdout:\n%s", stdout)
	}
	if !strings.Contains(stderr, "overflows") || stdout != "" {
		t.Errorf("impossible layout: stdout %q, stderr %q", stdout, stderr)
	}
}
