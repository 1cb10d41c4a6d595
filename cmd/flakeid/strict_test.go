package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alecthomas/kong"

	"github.com/flakeid/flakeid/server"
)

// testModel is the kong model of the binary's command line.
func testModel(t testing.TB) *kong.Application {
	t.Helper()
	var c cli
	p, err := newParser(context.Background(), &c, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	return p.Model
}

// hiddenFlagEnv returns the environment variables of the hidden (test-only)
// flags; TestMain clears them.
func hiddenFlagEnv() map[string]bool {
	var c cli
	p, err := newParser(context.Background(), &c, io.Discard, io.Discard)
	if err != nil {
		panic(err)
	}
	hidden := map[string]bool{}
	kong.Visit(p.Model, func(node kong.Visitable, next kong.Next) error {
		if f, ok := node.(*kong.Flag); ok && f.Hidden && f.Tag != nil {
			for _, env := range f.Tag.Envs {
				hidden[env] = true
			}
		}
		return next(nil)
	})
	return hidden
}

// configTestShape is a config shape like configShape's, with a nested
// object, as kong.JSON would read a flag named "mask.bits".
func configTestShape() *shape {
	s := &shape{keys: map[string]*shape{}, aliases: map[string]string{}}
	for _, name := range []string{"coordinator", "listen", "max-count", "mask.bits", "mask.key", "data-dir"} {
		addConfigKey(s, name, "")
	}
	return s
}

func TestCheckJSON(t *testing.T) {
	t.Parallel()
	tokens := shapeOf(reflect.TypeFor[[]server.Token]())
	for _, tc := range []struct {
		name string
		s    *shape
		in   string
		want string // "" for no error
	}{
		{"valid", configTestShape(), `{"coordinator": "etcd://x", "listen": ":1", "max_count": 5, "mask": {"bits": 53}}`, ""},
		{"camelCase alias", configTestShape(), `{"maxCount": 5, "dataDir": "/x"}`, ""},
		{"null values", configTestShape(), `{"listen": null, "mask": null}`, ""},
		{"empty object", configTestShape(), ` {} `, ""},
		{"typo", configTestShape(), `{"coordinater": "etcd://x"}`, `unknown key "coordinater"; did you mean "coordinator"?`},
		{"dash for underscore", configTestShape(), `{"max-count": 5}`, `unknown key "max-count"; did you mean "max_count"?`},
		{"nested typo", configTestShape(), `{"mask": {"bitz": 53}}`, `unknown key "mask.bitz"; did you mean "mask.bits"?`},
		{"nested not an object", configTestShape(), `{"mask": 53}`, `key "mask": want a JSON object`},
		{"far off", configTestShape(), `{"zzzzzzzz": 1}`, `unknown key "zzzzzzzz"; the valid keys are: coordinator, data_dir, listen, mask, max_count`},
		{"duplicate", configTestShape(), `{"listen": ":1", "listen": ":2"}`, `key "listen" is given twice`},
		{"duplicate through an alias", configTestShape(), `{"max_count": 1, "maxCount": 2}`, `keys "max_count" and "maxCount" are both given, and both set "max_count"`},
		{"nested duplicate", configTestShape(), `{"mask": {"key": "a", "key": "b"}}`, `key "mask.key" is given twice`},
		{"trailing object", configTestShape(), "{\"listen\": \":1\"}\n{\"listen\": \":2\"}", "line 2, column 1: data after the JSON value"},
		{"trailing brace", configTestShape(), `{"listen": ":1"}}`, "line 1, column 17: data after the JSON value"},
		{"not an object", configTestShape(), `["listen"]`, "want a JSON object"},
		{"syntax", configTestShape(), "{\n  \"listen\": :1\n}", "line 2, column 13: invalid character ':'"},
		{"truncated", configTestShape(), `{"listen": ":1"`, "ends too soon"},
		{"empty", configTestShape(), "  \n", "empty file"},
		{"tokens", tokens, `[{"name": "a", "token": "0123456789abcdef", "tags": ["*"], "snowflake": true, "admin": false, "unmask": false}]`, ""},
		{"tokens typo", tokens, `[{"name": "a", "token": "0123456789abcdef"}, {"name": "b", "tokn": "x"}]`, `entry 2: unknown key "tokn"; did you mean "token"?`},
		{"tokens case", tokens, `[{"Name": "a"}]`, `entry 1: unknown key "Name"; did you mean "name"?`},
		{"tokens duplicate", tokens, `[{"admin": false, "admin": true}]`, `entry 1: key "admin" is given twice`},
		{"tokens not an array", tokens, `{"name": "a"}`, "want a JSON array"},
		{"tokens entry not an object", tokens, `["0123456789abcdef"]`, "entry 1: want a JSON object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := checkJSON([]byte(tc.in), tc.s)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("%s: %v", tc.in, err)
			case tc.want != "" && err == nil:
				t.Errorf("%s: no error, want %q", tc.in, tc.want)
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Errorf("%s:\n got %v\nwant %s", tc.in, err, tc.want)
			}
		})
	}
}

// TestConfigShape: the keys of a config file are the flags of every
// command, with _ for -, besides --help and --config.
func TestConfigShape(t *testing.T) {
	t.Parallel()
	s := configShape(testModel(t), nil)
	for _, key := range []string{"coordinator", "listen", "max_count", "mask_key", "mask_keyring", "data_dir",
		"worker_bits", "count", "key_id", "etcd_bin", "json"} {
		if _, ok := s.keys[key]; !ok {
			t.Errorf("%q is not a config key", key)
		}
	}
	for _, key := range []string{"help", "config", "max-count", "maxCount"} {
		if _, ok := s.keys[key]; ok {
			t.Errorf("%q is a config key", key)
		}
	}
	if s.aliases["maxCount"] != "max_count" {
		t.Errorf("maxCount is not an alias of max_count: %v", s.aliases["maxCount"])
	}
}

// TestStrictConfig: a --config file with an unknown key fails every command
// (a usage error), naming the file, the key and the key meant; a valid one
// still sets the flags.
func TestStrictConfig(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, body string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	typo := write("typo.json", `{"worker_bits": 6, "coordinater": "etcd://127.0.0.1:2379"}`)
	mustFail(t, runCLI(t, "--config", typo, "layout"), exitUsage,
		"config "+typo+`: unknown key "coordinater"; did you mean "coordinator"?`)
	// A key of another command's flag is valid (one file may serve serve
	// and workers ls); the chosen command lists its keys when none is near.
	far := write("far.json", `{"listen": ":1", "qqqqqqqq": 1}`)
	r := runCLI(t, "--config", far, "layout")
	mustFail(t, r, exitUsage, `unknown key "qqqqqqqq"; the valid keys of flakeid layout are: `, "worker_bits")
	if strings.Contains(r.stderr, "listen") {
		t.Errorf("the keys of layout include serve's listen:\n%s", r.stderr)
	}
	ok := write("ok.json", `{"worker_bits": 6, "sequenceBits": 11, "listen": ":1"}`)
	r = runCLI(t, "--config", ok, "layout")
	mustSucceed(t, r)
	if !strings.Contains(r.stdout, "worker 6 | seq 11") {
		t.Errorf("layout ignores the config file:\n%s", r.stdout)
	}
}

// TestStrictTokensFile: the tokens file is read as strictly as --config.
func TestStrictTokensFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens.json")
	os.WriteFile(tokens, []byte(`[{"name": "ci", "token": "0123456789abcdef", "snowflak": true}]`), 0o600)
	mustFail(t, runCLI(t, "serve", "--data-dir", dir, "--tokens-file", tokens), exitError,
		"--tokens-file "+tokens+`: entry 1: unknown key "snowflak"; did you mean "snowflake"?`)
	os.WriteFile(tokens, []byte(`[{"name": "ci", "token": "0123456789abcdef"}] [{"name": "other"}]`), 0o600)
	mustFail(t, runCLI(t, "serve", "--data-dir", dir, "--tokens-file", tokens), exitError,
		"--tokens-file "+tokens+": line 1, column 47: data after the JSON value")
}

func TestCheckEnv(t *testing.T) {
	t.Parallel()
	app := testModel(t)
	for _, tc := range []struct {
		env  []string
		want []string // nil: no error
	}{
		{[]string{"PATH=/bin", "FLAKEID_LISTEN=:1", "FLAKEID_COORDINATOR=etcd://x", "FLAKEID_MASK_KEY=k", "FLAKEID_VERIFY_NODES=3"}, nil},
		{[]string{"FLAKEID_TEST_ANYTHING=1", "FLAKEID_TEST_CLOCK_OFFSET=1s", "FLAKEID_TEST_=", "FLAKEIDX=1", "flakeid_listen=1"}, nil},
		{[]string{"FLAKEID_COORDINATER=etcd://x"}, []string{"unknown environment variable FLAKEID_COORDINATER; did you mean FLAKEID_COORDINATOR?"}},
		{[]string{"FLAKEID_LISTN=:1"}, []string{"FLAKEID_LISTN; did you mean FLAKEID_LISTEN?"}},
		{[]string{"FLAKEID_DATACENTRE=1"}, []string{"did you mean FLAKEID_DATACENTER?"}},
		{[]string{"FLAKEID_listen=1"}, []string{"did you mean FLAKEID_LISTEN?"}},
		{[]string{"FLAKEID_TESTS_ETCD=1"}, []string{"FLAKEID_TESTS_ETCD"}},
		{[]string{"FLAKEID_=1"}, []string{"unknown environment variable FLAKEID_: no flag of flakeid reads it", "FLAKEID_TEST_"}},
		{[]string{"FLAKEID_STEPS_DIR=/tmp", "FLAKEID_LISTN=:1", "FLAKEID_LISTEN=:1"},
			[]string{"FLAKEID_LISTN; did you mean FLAKEID_LISTEN?\nflakeid: ", "FLAKEID_STEPS_DIR: no flag"}},
	} {
		err := checkEnv(app, tc.env)
		if tc.want == nil {
			if err != nil {
				t.Errorf("%v: %v", tc.env, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%v: no error, want %q", tc.env, tc.want)
			continue
		}
		msg := strings.ReplaceAll(err.Error(), "\n", "\nflakeid: ")
		for _, w := range tc.want {
			if !strings.Contains(msg, w) {
				t.Errorf("%v:\n got %s\nwant %s", tc.env, msg, w)
			}
		}
	}
}

// TestNoDirectEnvReads: the binary reads its FLAKEID_ variables only
// through the env tags of its flags, so that checkEnv, which builds its list
// from them, knows every one. A variable read with os.Getenv or
// os.LookupEnv would be refused as unknown.
func TestNoDirectEnvReads(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) == 0 {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || (sel.Sel.Name != "Getenv" && sel.Sel.Name != "LookupEnv") {
				return true
			}
			lit, ok := call.Args[0].(*ast.BasicLit)
			if !ok {
				t.Errorf("%s: %s with a computed name; declare the variable in a flag's env tag", fset.Position(call.Pos()), sel.Sel.Name)
				return true
			}
			if v, _ := strconv.Unquote(lit.Value); strings.HasPrefix(v, envPrefix) {
				t.Errorf("%s: %s(%s); declare it in a flag's env tag instead, or checkEnv refuses it", fset.Position(call.Pos()), sel.Sel.Name, lit.Value)
			}
			return true
		})
	}
}

// TestDocumentedEnvVariables: every FLAKEID_ variable the deployment files
// and the docs name is one the binary reads (or reserved for the tests):
// one that is not would stop a node at start.
func TestDocumentedEnvVariables(t *testing.T) {
	t.Parallel()
	known := knownEnv(testModel(t))
	files := []string{"../../README.md"}
	for _, root := range []string{"../../deploy", "../../docs"} {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				files = append(files, path)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	name := regexp.MustCompile(`FLAKEID_[A-Z0-9_]*[A-Z0-9]`)
	// The misspellings the docs show as examples of what is refused.
	misspelt := map[string]bool{"FLAKEID_COORDINATER": true}
	for _, path := range files {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range name.FindAllString(string(b), -1) {
			// FLAKEID_TEST_ may be cut at its last underscore ("FLAKEID_TEST_*").
			if !known[v] && !strings.HasPrefix(v+"_", testEnvPrefix) && !misspelt[v] {
				t.Errorf("%s names %s, which no flag of flakeid reads", path, v)
			}
		}
	}
}

// runBinary runs the built binary with args and, besides the test's own
// environment (TestMain's), the variables env; it gives up after 20 s.
func runBinary(t *testing.T, bin string, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(append(os.Environ(), "FLAKEID_DATA_DIR="+t.TempDir()), env...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatalf("running %v: %v", args, err)
	}
	if ctx.Err() != nil {
		t.Fatalf("%v did not exit within 20 s; stderr:\n%s", args, e.String())
	}
	return o.String(), e.String(), cmd.ProcessState.ExitCode()
}

// TestServeConfigUnknownKey: `flakeid serve --config FILE` with a misspelt
// key (the "coordinater", which made every node fall back to its own
// file coordinator) exits with a usage error before it listens, naming the
// key and the one meant; so do a misspelt nested key, a key given twice and
// a second value after the object. A valid file still works (see also
// TestConfigFile).
func TestServeConfigUnknownKey(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	t.Parallel()
	bin := proofBin.get(t)
	dir := t.TempDir()
	for _, tc := range []struct {
		name, body string
		want       []string
	}{
		{"typo", `{"coordinater": "etcd://127.0.0.1:2379/flakeid", "datacenter": 1}`,
			[]string{`unknown key "coordinater"; did you mean "coordinator"?`}},
		{"nested", `{"mask": {"bitz": 53}}`,
			[]string{`unknown key "mask.bitz"; did you mean "mask_bits"?`, "nested objects are not read"}},
		{"twice", `{"max_count": 10, "max_count": 20}`, []string{`key "max_count" is given twice`}},
		{"trailing", `{"max_count": 10}, {"datacenter": 1}`, []string{"line 1, column 18: data after the JSON value"}},
		{"listed", `{"zzzzzzzzzz": 1}`, []string{`unknown key "zzzzzzzzzz"; the valid keys of flakeid serve are: `, "coordinator", "max_count"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := filepath.Join(dir, tc.name+".json")
			if err := os.WriteFile(cfg, []byte(tc.body), 0o600); err != nil {
				t.Fatal(err)
			}
			stdout, stderr, code := runBinary(t, bin, nil, "serve", "--listen", "127.0.0.1:0", "--config", cfg)
			if code != exitUsage {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, exitUsage, stderr)
			}
			if strings.Contains(stderr, "serving") || stdout != "" {
				t.Errorf("serve got as far as listening; stdout %q, stderr:\n%s", stdout, stderr)
			}
			for _, w := range append(tc.want, "flakeid: config "+cfg+": ") {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr does not say %q:\n%s", w, stderr)
				}
			}
		})
	}
	// The variable FLAKEID_CONFIG names the file as well as --config does.
	cfg := filepath.Join(dir, "typo.json")
	_, stderr, code := runBinary(t, bin, []string{"FLAKEID_CONFIG=" + cfg}, "serve", "--listen", "127.0.0.1:0")
	if code != exitUsage || !strings.Contains(stderr, `did you mean "coordinator"?`) {
		t.Errorf("FLAKEID_CONFIG=%s: exit %d, stderr:\n%s", cfg, code, stderr)
	}
	// A valid file, with a key of another command's flag, serves.
	ok := filepath.Join(dir, "ok.json")
	os.WriteFile(ok, []byte(`{"max_count": 5, "stream_batch": 5, "datacenter": 3, "count": 7, "data_dir": "`+t.TempDir()+`"}`), 0o600)
	p, url := startServe(t, bin, "--config", ok)
	defer p.kill()
	code, body := get(t, url+"/v1/snowflake/next?count=6")
	if code != 400 || !strings.Contains(body, "1 to 5") {
		t.Fatalf("count=6 with max_count 5 from the file: %d %s", code, body)
	}
}

// TestUnknownEnvVariable: a FLAKEID_ variable that no flag reads fails
// every command with a usage error naming the variable meant; the
// FLAKEID_TEST_ prefix is left to the tests and scripts.
func TestUnknownEnvVariable(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	t.Parallel()
	bin := proofBin.get(t)
	for _, tc := range []struct {
		env  []string
		args []string
		want []string
	}{
		{[]string{"FLAKEID_COORDINATER=etcd://127.0.0.1:2379/flakeid"}, []string{"serve", "--listen", "127.0.0.1:0"},
			[]string{"flakeid: unknown environment variable FLAKEID_COORDINATER; did you mean FLAKEID_COORDINATOR?"}},
		{[]string{"FLAKEID_LISTN=127.0.0.1:0"}, []string{"serve"},
			[]string{"flakeid: unknown environment variable FLAKEID_LISTN; did you mean FLAKEID_LISTEN?"}},
		{[]string{"FLAKEID_WORKER_BIT=3", "FLAKEID_PRESETS=sonyflake"}, []string{"layout"},
			[]string{"FLAKEID_PRESETS; did you mean FLAKEID_PRESET?", "FLAKEID_WORKER_BIT; did you mean FLAKEID_WORKER_BITS?"}},
		{[]string{"FLAKEID_STEPS_DIR=/tmp"}, []string{"layout"},
			[]string{"unknown environment variable FLAKEID_STEPS_DIR: no flag of flakeid reads it", "FLAKEID_TEST_"}},
	} {
		stdout, stderr, code := runBinary(t, bin, tc.env, tc.args...)
		if code != exitUsage {
			t.Errorf("%v %v: exit %d, want %d; stderr:\n%s", tc.env, tc.args, code, exitUsage, stderr)
		}
		if stdout != "" || strings.Contains(stderr, "serving") {
			t.Errorf("%v %v: the command ran; stdout %q, stderr:\n%s", tc.env, tc.args, stdout, stderr)
		}
		for _, w := range tc.want {
			if !strings.Contains(stderr, w) {
				t.Errorf("%v %v: stderr does not say %q:\n%s", tc.env, tc.args, w, stderr)
			}
		}
	}
	// --help still shows the variables.
	if stdout, stderr, code := runBinary(t, bin, []string{"FLAKEID_COUNTT=3"}, "next", "--help"); code != 0 || !strings.Contains(stdout, "FLAKEID_COUNT") {
		t.Errorf("next --help with FLAKEID_COUNTT set: exit %d, stdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	// FLAKEID_TEST_* is not checked, and valid variables still work.
	stdout, stderr, code := runBinary(t, bin, []string{"FLAKEID_TEST_ANYTHING=1", "FLAKEID_TEST_STEPS_DIR=/tmp",
		"FLAKEID_WORKER_BITS=6", "FLAKEID_SEQUENCE_BITS=11"}, "layout")
	if code != 0 || stderr != "" || !strings.Contains(stdout, "worker 6 | seq 11") {
		t.Errorf("with FLAKEID_TEST_ANYTHING and FLAKEID_WORKER_BITS: exit %d, stdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
}

// FuzzCheckJSON: checkJSON never panics, accepts only what encoding/json
// can decode, and whatever it accepts for the tokens shape decodes into
// tokens without an unknown field.
func FuzzCheckJSON(f *testing.F) {
	for _, seed := range []string{
		`{"coordinator": "etcd://x", "listen": ":1"}`,
		`{"coordinater": 1}`,
		`{"mask": {"bitz": 53}}`,
		`{"mask": {"bits": 53, "bits": 63}}`,
		`{"max_count": 1, "maxCount": 2}`,
		`{"a": 1} {"b": 2}`,
		`[{"name": "a", "token": "0123456789abcdef", "tags": ["*"]}]`,
		`[{"Name": "a"}, null, {"tokn": 1}]`,
		`{"\u00e9\u0301": {"": {"": []}}}`,
		"{\n\"listen\":",
		"",
		"\xff",
	} {
		f.Add([]byte(seed))
	}
	config := configTestShape()
	tokens := shapeOf(reflect.TypeFor[[]server.Token]())
	f.Fuzz(func(t *testing.T, data []byte) {
		if checkJSON(data, config) == nil {
			var m map[string]any
			if err := json.Unmarshal(data, &m); err != nil {
				t.Fatalf("config accepted, but does not decode: %v", err)
			}
		}
		if checkJSON(data, tokens) == nil {
			dec := json.NewDecoder(bytes.NewReader(data))
			dec.DisallowUnknownFields()
			var ts []server.Token
			// A value of the wrong type is left to the decoder.
			var typeErr *json.UnmarshalTypeError
			if err := dec.Decode(&ts); err != nil && !errors.As(err, &typeErr) {
				t.Fatalf("tokens accepted, but: %v", err)
			}
		}
	})
}

// TestConfigValueKinds: a config value of the wrong JSON kind for its flag
// (a string where a number or a boolean is meant) is refused naming the
// key, never read as the value it spells.
func TestConfigValueKinds(t *testing.T) {
	app := testModel(t)
	dir := t.TempDir()
	for i, tc := range []struct {
		json, want string
	}{
		{`{"worker_bits": "3"}`, `key "worker_bits": want a number, not a string`},
		{`{"datacenter": "1"}`, `key "datacenter": want a number, not a string`},
		{`{"max_count": true}`, `key "max_count": want a number, not a boolean`},
		{`{"wait_lease": "true"}`, `key "wait_lease": want a boolean, not a string`},
		{`{"worker_bits": 3, "datacenter": 1, "wait_lease": true, "lease_ttl": "3s", "listen": "127.0.0.1:0"}`, ""},
	} {
		path := filepath.Join(dir, fmt.Sprintf("c%d.json", i))
		if err := os.WriteFile(path, []byte(tc.json), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := loadConfig(app, nil, path)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.json, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want an error saying %q", tc.json, err, tc.want)
		}
	}
}

// TestUnusedSettings: a config key or FLAKEID_ variable of another
// command's flag is named as unused by the command that runs (serve leases
// its worker id, so {"worker": 3} and FLAKEID_WORKER do nothing there),
// while the settings it reads are not.
func TestUnusedSettings(t *testing.T) {
	path := filepath.Join(t.TempDir(), "flakeid.json")
	if err := os.WriteFile(path, []byte(`{"worker": 3, "listen": "127.0.0.1:0", "datacenter": 1}`), 0o600); err != nil {
		t.Fatal(err)
	}
	var c cli
	p, err := newParser(t.Context(), &c, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"serve", "--config", path}, []string{`the key "worker" of the config file ` + path, "the environment variable FLAKEID_WORKER"}},
		{[]string{"next", "--config", path}, []string{`the key "listen" of the config file ` + path}},
	} {
		kctx, err := p.Parse(tc.args)
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		got, err := unusedSettings(kctx, path, []string{"FLAKEID_WORKER=3", "FLAKEID_DATACENTER=1", "PATH=/bin"})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%v: unused %q, want %q", tc.args, got, tc.want)
		}
	}
}

// TestServeNamesUnusedSettings: serve given next's --worker through its
// config file and the environment says, before it starts, that neither is
// read there (its worker id is leased).
func TestServeNamesUnusedSettings(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	t.Parallel()
	bin := proofBin.get(t)
	cfg := filepath.Join(t.TempDir(), "flakeid.json")
	if err := os.WriteFile(cfg, []byte(`{"worker": 3}`), 0o600); err != nil {
		t.Fatal(err)
	}
	// An address that cannot be listened on ends serve right after the
	// warnings.
	_, stderr, _ := runBinary(t, bin, []string{"FLAKEID_WORKER=3"}, "serve", "--listen", "256.0.0.1:0", "--config", cfg)
	for _, want := range []string{
		`flakeid serve: warning: the key "worker" of the config file ` + cfg + ` is not read by this command`,
		"flakeid serve: warning: the environment variable FLAKEID_WORKER is not read by this command",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr does not say %q:\n%s", want, stderr)
		}
	}
}
