package main

// The CLI as a newcomer meets it: error lines and usage hints that name the
// real command, --server without a scheme, --version, serve's first log
// line without credentials, help that shows every default and a --config
// example that fits the command.

import (
	"context"
	"encoding/json"
	"io"
	"os/exec"
	"regexp"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/alecthomas/kong"

	"github.com/flakeid/flakeid/server"
)

// TestTagCommandPaths: the error line and the usage hint of a nested
// command name it as it is typed (flakeid tags create, not flakeid create).
func TestTagCommandPaths(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	mustSucceed(t, runCLI(t, "tags", "create", "orders", "--data-dir", dir))
	r := runCLI(t, "tags", "create", "orders", "--data-dir", dir)
	mustFail(t, r, exitError)
	if want := `flakeid tags create: segment: tag already exists`; !strings.HasPrefix(r.stderr, want) {
		t.Errorf("stderr %q, want it to begin %q", r.stderr, want)
	}
	for _, tc := range []struct {
		args []string
		code int
		want []string
	}{
		{[]string{"tags", "create", "a/b", "--data-dir", dir}, exitError,
			[]string{`flakeid tags create: segment: invalid tag: tag "a/b" has '/' (U+002F) at character 2; a tag is 1–128 of A–Z a–z 0–9 - _ . : (not "." or "..")`}},
		{[]string{"tags", "create", "订单", "--data-dir", dir}, exitError,
			[]string{`flakeid tags create: segment: invalid tag: tag "订单" has '订' (U+8BA2) at character 1`}},
		{[]string{"tags", "set-step", "missing", "10", "--data-dir", dir}, exitError, []string{"flakeid tags set-step: "}},
		{[]string{"tags", "ls", "--store", "bogus://x", "--data-dir", dir}, exitError, []string{"flakeid tags ls: --store"}},
		{[]string{"workers", "ls", "--coordinator", "bogus://x", "--data-dir", dir}, exitError, []string{"flakeid workers ls: --coordinator"}},
		{[]string{"workers", "schema"}, exitError, []string{"flakeid workers schema: "}},
		{[]string{"tags", "create", "--bogus"}, exitUsage, []string{`Run "flakeid tags create --help" for usage.`}},
		{[]string{"tags", "set-step", "orders"}, exitUsage, []string{`Run "flakeid tags set-step --help" for usage.`}},
		{[]string{"tags", "ls", "--bogus"}, exitUsage, []string{`Run "flakeid tags ls --help" for usage.`}},
		{[]string{"tags", "schema", "--bogus"}, exitUsage, []string{`Run "flakeid tags schema --help" for usage.`}},
		{[]string{"workers", "ls", "--bogus"}, exitUsage, []string{`Run "flakeid workers ls --help" for usage.`}},
		{[]string{"workers", "schema", "--bogus"}, exitUsage, []string{`Run "flakeid workers schema --help" for usage.`}},
		{[]string{"tags"}, exitUsage, []string{`Run "flakeid tags --help" for usage.`}},
		{[]string{"next", "--bogus"}, exitUsage, []string{`Run "flakeid next --help" for usage.`}},
	} {
		r := runCLI(t, tc.args...)
		mustFail(t, r, tc.code, tc.want...)
		if strings.Contains(r.stderr, "flakeid create") || strings.Contains(r.stderr, "flakeid ls") ||
			strings.Contains(r.stderr, "flakeid schema") || strings.Contains(r.stderr, "flakeid set-step") {
			t.Errorf("%v: stderr names a command that does not exist:\n%s", tc.args, r.stderr)
		}
	}
}

// TestTagCommandPathEnv: the hint after an unknown FLAKEID_ variable names
// the nested command too. Not parallel: it sets a variable.
func TestTagCommandPathEnv(t *testing.T) {
	t.Setenv("FLAKEID_STOR", "x")
	r := runCLI(t, "tags", "ls")
	mustFail(t, r, exitUsage, "FLAKEID_STORE", `Run "flakeid tags ls --help" for the variables it reads.`)
}

// TestCommandPathOfEveryCommand: commandPath names every command as it is
// typed, so no hint names one that does not exist.
func TestCommandPathOfEveryCommand(t *testing.T) {
	t.Parallel()
	for path := range leafCommands(t) {
		args := append(strings.Fields(strings.TrimPrefix(path, "flakeid ")), "--bogus-flag")
		r := runCLI(t, args...)
		mustFail(t, r, exitUsage, `Run "`+path+` --help" for usage.`)
	}
}

// leafCommands maps the path of every command without subcommands
// ("flakeid tags create") to its node.
func leafCommands(t *testing.T) map[string]*kong.Node {
	t.Helper()
	cmds := map[string]*kong.Node{}
	_ = kong.Visit(testModel(t), func(node kong.Visitable, next kong.Next) error {
		if n, ok := node.(*kong.Node); ok && n.Type == kong.CommandNode && len(n.Children) == 0 {
			cmds[commandPath(n)] = n
		}
		return next(nil)
	})
	if len(cmds) < 10 {
		t.Fatalf("only %d commands found", len(cmds))
	}
	return cmds
}

// TestServerURLs: --server takes host:port as http://host:port, and any
// other URL that is not http or https is an error saying what to write.
func TestServerURLs(t *testing.T) {
	t.Parallel()
	for in, want := range map[string][]string{
		"127.0.0.1:8080":                     {"http://127.0.0.1:8080"},
		"localhost:8080":                     {"http://localhost:8080"},
		"http://a:1,https://b:2":             {"http://a:1", "https://b:2"},
		" 10.0.0.1:8080 , 10.0.0.2:8080":     {"http://10.0.0.1:8080", "http://10.0.0.2:8080"},
		"[::1]:8080":                         {"http://[::1]:8080"},
		"https://ids.example.com":            {"https://ids.example.com"},
		"http://10.0.0.1:8080/flakeid/proxy": {"http://10.0.0.1:8080/flakeid/proxy"},
	} {
		got, err := serverURLs(in)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("serverURLs(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"ftp://x:1", "grpc://x:1", "http://", "http:/x", "", "a:1,", "a:b:c", "http://a b",
		"127.0.0.1:port", "https://u:secretpw@h:1"} {
		_, err := serverURLs(in)
		if err == nil {
			t.Errorf("serverURLs(%q) accepted it", in)
			continue
		}
		if strings.Contains(err.Error(), "secretpw") {
			t.Errorf("serverURLs(%q): the error shows the password: %v", in, err)
		}
		if !strings.Contains(err.Error(), "--server wants http://host:port or https://host:port") && !strings.Contains(err.Error(), "--token") {
			t.Errorf("serverURLs(%q) = %v, want it to say what to write", in, err)
		}
	}
	r := runCLI(t, "next", "--server", "ftp://127.0.0.1:8080")
	mustFail(t, r, exitError, `flakeid next: --server "ftp://127.0.0.1:8080": scheme "ftp"; --server wants http://host:port or https://host:port`)
}

// TestServerWithoutScheme: `next --server 127.0.0.1:PORT` gets IDs from a
// running server.
func TestServerWithoutScheme(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	t.Parallel()
	bin := proofBin.get(t)
	p, url := startServe(t, bin, "--data-dir", t.TempDir())
	defer p.kill()
	hostport := strings.TrimPrefix(url, "http://")
	r := runCLI(t, "next", "--server", hostport, "-n", "3")
	mustSucceed(t, r)
	if n := len(strings.Fields(r.stdout)); n != 3 {
		t.Fatalf("%d IDs, want 3:\n%s", n, r.stdout)
	}
}

// TestVersion: --version prints the version line, with or without a
// command, and exits 0.
func TestVersion(t *testing.T) {
	t.Parallel()
	re := regexp.MustCompile(`^flakeid \S+ \((commit [0-9a-f]{1,12}( dirty)?, )?go\S+\)\n$`)
	for _, args := range [][]string{{"--version"}, {"serve", "--version"}, {"tags", "create", "--version"}} {
		r := runCLI(t, args...)
		mustSucceed(t, r)
		if !re.MatchString(r.stdout) || !strings.Contains(r.stdout, runtime.Version()) {
			t.Errorf("%v: %q, want flakeid <version> (…, %s)", args, r.stdout, runtime.Version())
		}
	}
	r := runCLI(t, "--help")
	if !strings.Contains(r.stdout, "--version") {
		t.Errorf("--help does not list --version:\n%s", r.stdout)
	}
}

// TestVersionOf: the version line of a build with and without VCS
// information.
func TestVersionOf(t *testing.T) {
	t.Parallel()
	rev := "0123456789abcdef0123456789abcdef01234567"
	for _, tc := range []struct {
		bi   *debug.BuildInfo
		want string
	}{
		{nil, "devel (" + runtime.Version() + ")"},
		{&debug.BuildInfo{GoVersion: "go1.26.1", Main: debug.Module{Version: "(devel)"}}, "devel (go1.26.1)"},
		{&debug.BuildInfo{GoVersion: "go1.26.1", Main: debug.Module{Version: "v1.2.3"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: "false"}}},
			"v1.2.3 (commit 0123456789ab, go1.26.1)"},
		{&debug.BuildInfo{GoVersion: "go1.26.1", Main: debug.Module{Version: ""},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: "true"}}},
			"devel (commit 0123456789ab dirty, go1.26.1)"},
	} {
		if got := versionOf(tc.bi); got != tc.want {
			t.Errorf("versionOf(%+v) = %q, want %q", tc.bi, got, tc.want)
		}
	}
}

// TestLogRedactURL: passwords in user info and secret-looking query
// parameters are masked; the rest of the URL stays readable.
func TestLogRedactURL(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"redis://:hunter2@10.0.0.1:6379/0?prefix=p":                   "redis://:xxxxx@10.0.0.1:6379/0?prefix=p",
		"rediss://default:hunter2@r:6380":                             "rediss://default:xxxxx@r:6380",
		"postgres://u:pw@h:5432/db?sslmode=disable&password=pw2":      "postgres://u:xxxxx@h:5432/db?sslmode=disable&password=xxxxx",
		"mysql://root@h/db?table=t&Token=abc&sslpassword=x&api_key=k": "mysql://root@h/db?table=t&Token=xxxxx&sslpassword=xxxxx&api_key=xxxxx",
		"etcd://10.0.0.1:2379,10.0.0.2:2379/flakeid?registry=r":       "etcd://10.0.0.1:2379,10.0.0.2:2379/flakeid?registry=r",
		"file:///var/lib/flakeid/workers.db":                          "file:///var/lib/flakeid/workers.db",
		"postgres://u:p%40ss@h/db?pass%77ord=x":                       "postgres://u:xxxxx@h/db?pass%77ord=xxxxx",
		"redis://:a b@h":                                              "(a URL that does not parse)",
		"":                                                            "",
	} {
		if got := redactURL(in); got != want {
			t.Errorf("redactURL(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestLogNoCredentials: serve's first log line says where its state lives,
// and neither it nor anything else serve or tags prints shows a password
// given in --coordinator or --store.
func TestLogNoCredentials(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	t.Parallel()
	bin := proofBin.get(t)
	secrets := []string{"hunter2pw", "tok3nval", "pgsecret1", "pgsecret2", "mysecret9"}
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"redis coordinator", []string{"serve", "--coordinator", "redis://:hunter2pw@127.0.0.1:1/0?token=tok3nval&prefix=p"},
			[]string{`coordinator="redis://:xxxxx@127.0.0.1:1/0?token=xxxxx&prefix=p"`}},
		{"postgres store", []string{"serve", "--store", "postgres://u:pgsecret1@127.0.0.1:1/db?sslmode=disable&password=pgsecret2"},
			[]string{`store="postgres://u:xxxxx@127.0.0.1:1/db?sslmode=disable&password=xxxxx"`, `flakeid serve: --store "postgres://u:xxxxx@`}},
		{"mysql coordinator", []string{"serve", "--coordinator", "mysql://root:mysecret9@127.0.0.1:1/db"},
			[]string{"coordinator=mysql://root:xxxxx@127.0.0.1:1/db"}},
		{"tags ls", []string{"tags", "ls", "--store", "postgres://u:pgsecret1@127.0.0.1:1/db?password=pgsecret2"},
			[]string{"flakeid tags ls: --store"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			args := append(tc.args, "--data-dir", dir)
			if tc.args[0] == "serve" {
				args = append(args, "--listen", "127.0.0.1:0")
			}
			ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, args...)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("%v succeeded against an unreachable service:\n%s", args, out)
			}
			for _, s := range secrets {
				if strings.Contains(string(out), s) {
					t.Errorf("the output shows the secret %q:\n%s", s, out)
				}
			}
			want := tc.want
			if tc.args[0] == "serve" {
				want = append(want, `msg="flakeid: starting"`, "data_dir="+dir, "layout=", "datacenter=0", "listen=127.0.0.1:0", "version=")
			}
			for _, w := range want {
				if !strings.Contains(string(out), w) {
					t.Errorf("the output does not say %q:\n%s", w, out)
				}
			}
		})
	}
}

// TestHelpShowsDefaults: every flag with a default shows it, also where a
// placeholder takes the default's place after the = (--datacenter=D).
func TestHelpShowsDefaults(t *testing.T) {
	t.Parallel()
	r := runCLI(t, "serve", "--help")
	mustSucceed(t, r)
	help := strings.Join(strings.Fields(r.stdout), " ")
	if !regexp.MustCompile(`--datacenter=D Datacenter id[^$]*\(default 0\) \(\$FLAKEID_DATACENTER\)`).MatchString(help) {
		t.Errorf("serve --help does not show --datacenter's default:\n%s", r.stdout)
	}
	for _, f := range []string{"--read-timeout=10s", "--write-timeout=30s", "--idle-timeout=30s", "--max-conns=1024",
		"--metrics-max-tags=1000", "FLAKEID_READ_TIMEOUT", "FLAKEID_WRITE_TIMEOUT", "FLAKEID_IDLE_TIMEOUT",
		"FLAKEID_MAX_CONNS", "FLAKEID_METRICS_MAX_TAGS", "1s–5m", "1s–10m", "1s–1h", "1–1,000,000", "0–100,000"} {
		if !strings.Contains(help, f) {
			t.Errorf("serve --help does not show %s", f)
		}
	}
	_ = kong.Visit(testModel(t), func(node kong.Visitable, next kong.Next) error {
		if f, ok := node.(*kong.Flag); ok && f.HasDefault && f.Default != "" && !f.IsBool() {
			shown := f.Tag.PlaceHolder == "" || strings.Contains(helpWithDefault(f.Value), "default "+f.Default) ||
				strings.Contains(helpWithDefault(f.Value), "default "+`"`+f.Default+`"`)
			if !shown {
				t.Errorf("--%s: its default %s is not shown: %s", f.Name, f.Default, helpWithDefault(f.Value))
			}
		}
		return next(nil)
	})
}

// TestHelpConfigExample: every command's --help gives a --config example
// made of that command's own flags (serve's keys under serve only).
func TestHelpConfigExample(t *testing.T) {
	t.Parallel()
	re := regexp.MustCompile(`Config file \(--config FILE, \$FLAKEID_CONFIG\): Read flag values from a JSON file whose keys are flag names with _ for -(?:, e\.g\. for (flakeid [a-z -]+?) (\{.*?\}))?; `)
	for path := range leafCommands(t) {
		r := runCLI(t, append(strings.Fields(strings.TrimPrefix(path, "flakeid ")), "--help")...)
		mustSucceed(t, r)
		help := strings.Join(strings.Fields(r.stdout), " ")
		m := re.FindStringSubmatch(help)
		if m == nil {
			t.Errorf("%s --help: no --config help:\n%s", path, r.stdout)
			continue
		}
		// The paragraph follows the flags; the flag itself has one line.
		if strings.Index(r.stdout, "Config file (") < strings.LastIndex(r.stdout, "\n  -") ||
			!strings.Contains(help, "--config=FILE "+strings.TrimSuffix(configFlagHelp, ".")+" ($FLAKEID_CONFIG).") {
			t.Errorf("%s --help: the config file paragraph is not after the flags, or --config's own help is not %q:\n%s", path, configFlagHelp, r.stdout)
		}
		if m[1] == "" {
			continue // a command with no flag to show
		}
		if m[1] != path {
			t.Errorf("%s --help: the --config example is for %q", path, m[1])
		}
		var example map[string]any
		if err := json.Unmarshal([]byte(m[2]), &example); err != nil || len(example) == 0 {
			t.Errorf("%s --help: the --config example %s is not a JSON object: %v", path, m[2], err)
		}
		for key := range example {
			flag := "--" + strings.ReplaceAll(key, "_", "-")
			if !strings.Contains(help, flag+"=") && !strings.Contains(help, flag+" ") {
				t.Errorf("%s --help: the --config example has %q, which is no flag of the command", path, key)
			}
		}
	}
	r := runCLI(t, "--help")
	if help := strings.Join(strings.Fields(r.stdout), " "); !strings.Contains(help, `e.g. {"data_dir": "/var/lib/flakeid"`) {
		t.Errorf("flakeid --help: no generic --config example:\n%s", r.stdout)
	}
}

// TestConfigServeTimeouts: the timeout, connection and metrics flags reach
// server.Config, with the server's defaults, and a value out of range is
// refused naming it.
func TestConfigServeTimeouts(t *testing.T) {
	t.Parallel()
	parse := func(args ...string) (server.Config, error) {
		t.Helper()
		var c cli
		p, err := newParser(t.Context(), &c, io.Discard, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.Parse(append([]string{"serve"}, args...)); err != nil {
			t.Fatal(err)
		}
		return c.Serve.config()
	}
	got, err := parse()
	if err != nil {
		t.Fatal(err)
	}
	def := server.DefaultConfig()
	if got.ReadTimeout != def.ReadTimeout || got.WriteTimeout != def.WriteTimeout || got.IdleTimeout != def.IdleTimeout ||
		got.MaxConns != def.MaxConns || got.MetricsMaxTags != def.MetricsMaxTags || got.ReadHeaderTimeout != def.ReadHeaderTimeout {
		t.Errorf("defaults: %+v, want the server's %+v", got, def)
	}
	got, err = parse("--read-timeout", "5s", "--write-timeout", "2m", "--idle-timeout", "1h", "--max-conns", "7", "--metrics-max-tags", "0")
	if err != nil {
		t.Fatal(err)
	}
	type fields struct {
		read, header, write, idle time.Duration
		conns, tags               int
	}
	if g, w := (fields{got.ReadTimeout, got.ReadHeaderTimeout, got.WriteTimeout, got.IdleTimeout, got.MaxConns, got.MetricsMaxTags}),
		(fields{5 * time.Second, 5 * time.Second, 2 * time.Minute, time.Hour, 7, -1}); g != w { // tags 0: none (-1)
		t.Errorf("flags: %+v, want %+v", g, w)
	}
	for _, bad := range [][]string{{"--read-timeout", "0s"}, {"--read-timeout", "6m"}, {"--write-timeout", "11m"},
		{"--idle-timeout", "500ms"}, {"--max-conns", "0"}, {"--max-conns", "1000001"}, {"--metrics-max-tags=-1"},
		{"--metrics-max-tags", "100001"}} {
		if _, err := parse(bad...); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}
