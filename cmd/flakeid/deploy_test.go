package main

import (
	"bufio"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The deployment files of deploy/ checked against the server and the build:
// the Grafana dashboard's and the Prometheus rules' queries name only
// metrics and labels that /metrics has, and the Dockerfile's build command
// builds a static binary.

// metricLabels scrapes url's /metrics and returns every metric name (with a
// histogram's _bucket, _sum and _count) and the label names it carries.
func metricLabels(t *testing.T, url string) map[string][]string {
	t.Helper()
	code, body := get(t, url+"/metrics")
	if code != 200 {
		t.Fatalf("GET /metrics: %d", code)
	}
	out := map[string][]string{}
	re := regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? `)
	label := regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="`)
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		m := re.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		ls := out[m[1]]
		for _, l := range label.FindAllStringSubmatch(m[2], -1) {
			if !slices.Contains(ls, l[1]) {
				ls = append(ls, l[1])
			}
		}
		out[m[1]] = ls
	}
	return out
}

// checkQuery checks that every flakeid metric expr names is in metrics, and
// that every label it selects or groups by is one of those metrics' (job
// and instance come from Prometheus's scrape).
func checkQuery(t *testing.T, where, expr string, metrics map[string][]string) {
	t.Helper()
	names := regexp.MustCompile(`\bflakeid_[a-z_]+`).FindAllString(expr, -1)
	if len(names) == 0 {
		t.Errorf("%s: %q queries no flakeid metric", where, expr)
	}
	labels := []string{"job", "instance"}
	for _, n := range names {
		ls, ok := metrics[n]
		if !ok {
			t.Errorf("%s: %q queries %s, which /metrics does not have", where, expr, n)
		}
		labels = append(labels, ls...)
	}
	var used []string
	for _, m := range regexp.MustCompile(`\b(?:by|without)\s*\(([^)]*)\)`).FindAllStringSubmatch(expr, -1) {
		for _, l := range strings.Split(m[1], ",") {
			used = append(used, strings.TrimSpace(l))
		}
	}
	for _, m := range regexp.MustCompile(`([a-z_]+)\s*(?:=~|!~|!=|=)\s*"`).FindAllStringSubmatch(expr, -1) {
		used = append(used, m[1])
	}
	for _, l := range used {
		if l != "" && !slices.Contains(labels, l) {
			t.Errorf("%s: %q uses label %q, which none of %v carries", where, expr, l, names)
		}
	}
}

// TestDeployQueriesMatchMetrics: every query of the Grafana dashboard and
// of the Prometheus rules names metrics and labels a live server exports
// (after some traffic on HTTP, RESP and a segment tag).
func TestDeployQueriesMatchMetrics(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	t.Parallel()
	_, url, addr := startRESP(t, proofBin.get(t), "--auto-create-tags")
	for _, p := range []string{"/v1/segment/orders/next?count=3", "/v1/snowflake/next", "/v1/decode/5"} {
		if code, body := get(t, url+p); code != 200 {
			t.Fatalf("GET %s: %d %s", p, code, body)
		}
	}
	if err := respClient(t, addr, nil).Incr(respCtx(t), "snowflake").Err(); err != nil {
		t.Fatal(err)
	}
	metrics := metricLabels(t, url)

	b, err := os.ReadFile("../../deploy/grafana/flakeid-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
		Templating struct {
			List []struct {
				Name       string
				Definition string
			}
		}
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("the dashboard: %v", err)
	}
	n := 0
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("dashboard panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			checkQuery(t, "dashboard panel "+p.Title, tg.Expr, metrics)
			n++
		}
	}
	for _, v := range dash.Templating.List {
		if v.Definition != "" {
			checkQuery(t, "dashboard variable "+v.Name, v.Definition, metrics)
		}
	}
	if n < 10 {
		t.Errorf("the dashboard has %d queries", n)
	}

	rules, err := os.ReadFile("../../deploy/prometheus/flakeid-rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// expr: one line, or a block (expr: |) of the lines indented below it.
	lines := strings.Split(string(rules), "\n")
	for i := 0; i < len(lines); i++ {
		l := strings.TrimSpace(lines[i])
		expr, ok := strings.CutPrefix(l, "expr:")
		if !ok {
			continue
		}
		expr = strings.TrimSpace(expr)
		if expr == "|" || expr == ">" {
			indent := len(lines[i]) - len(strings.TrimLeft(lines[i], " "))
			expr = ""
			for i+1 < len(lines) && (strings.TrimSpace(lines[i+1]) == "" || len(lines[i+1])-len(strings.TrimLeft(lines[i+1], " ")) > indent) {
				i++
				expr += lines[i] + "\n"
			}
		}
		checkQuery(t, fmt.Sprintf("rule at line %d", i+1), expr, metrics)
	}
}

// dockerBuildLine is deploy/Dockerfile's go build command, without its
// -o and package: the proof binary is built with it.
func dockerBuildLine() (string, error) {
	b, err := os.ReadFile("../../deploy/Dockerfile")
	if err != nil {
		return "", err
	}
	m := regexp.MustCompile(`(?m)^RUN (CGO_ENABLED=0 go build .*) -o /out/flakeid \./cmd/flakeid$`).FindSubmatch(b)
	if m == nil {
		return "", errors.New("deploy/Dockerfile has no line RUN CGO_ENABLED=0 go build … -o /out/flakeid ./cmd/flakeid")
	}
	return string(m[1]), nil
}

// TestDockerfileBuild: the binary the tests run is built with the
// Dockerfile's build command (without Docker, which CI does not have; see
// builtBinary); it is static, as the distroless static image needs, and
// runs; the image's Go is go.mod's.
func TestDockerfileBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	t.Parallel()
	b, err := os.ReadFile("../../deploy/Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	from := regexp.MustCompile(`(?m)^FROM golang:(\d+\.\d+)`).FindSubmatch(b)
	mod, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	goLine := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(mod)
	if from == nil || goLine == nil || string(from[1]) != string(goLine[1]) {
		t.Errorf("the Dockerfile builds with golang:%s, go.mod says go %s", from, goLine)
	}
	bin := proofBin.get(t)
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("the binary is dynamically linked (%v); the distroless static image cannot run it", p.Type)
		}
	}
	if o, err := exec.CommandContext(t.Context(), bin, "--version").CombinedOutput(); err != nil || !strings.HasPrefix(string(o), "flakeid ") {
		t.Errorf("the built binary's --version: %v %s", err, o)
	}
}

// TestDeployGODEBUG: the Dockerfile, the systemd unit and the benchmark
// scripts run the server with one GODEBUG, and its schedtrace period is one
// the runtime takes (it reads it as an int32 and silently ignores what does
// not parse, which would quietly bring back the monitor thread's cost).
func TestDeployGODEBUG(t *testing.T) {
	t.Parallel()
	re := regexp.MustCompile(`(?m)^\s*(?:ENV |Environment=|FLAKEID_GODEBUG=)(?:GODEBUG=)?(\S+)\s*$`)
	var values []string
	for _, f := range []string{"../../deploy/Dockerfile", "../../deploy/flakeid.service", "../../scripts/lib/bench.sh"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var found []string
		for _, m := range re.FindAllSubmatch(b, -1) {
			if v := string(m[1]); strings.Contains(v, "schedtrace=") {
				found = append(found, v)
			}
		}
		if len(found) != 1 {
			t.Errorf("%s: %d GODEBUG settings with schedtrace (%q), want 1", f, len(found), found)
			continue
		}
		values = append(values, found[0])
	}
	if len(values) != 3 {
		t.FailNow()
	}
	// Every benchmark script runs flakeid as deployed, but for a case that
	// measures Go's default on purpose (-u GODEBUG).
	scripts, err := filepath.Glob("../../scripts/bench-*.sh")
	if err != nil || len(scripts) == 0 {
		t.Fatalf("no benchmark scripts: %v", err)
	}
	for _, f := range scripts {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			if !strings.Contains(line, `/flakeid" serve`) {
				continue
			}
			// $G: a script's own prefix, when it is defined with the setting.
			viaG := strings.Contains(line, " $G ") && strings.Contains(string(b), `G="env -u GOGC GODEBUG=$FLAKEID_GODEBUG"`)
			if !strings.Contains(line, `$FLAKEID_GODEBUG`) && !strings.Contains(line, "-u GODEBUG") && !viaG {
				t.Errorf("%s:%d starts flakeid without GODEBUG=$FLAKEID_GODEBUG: %s", f, i+1, strings.TrimSpace(line))
			}
		}
	}
	for _, v := range values[1:] {
		if v != values[0] {
			t.Fatalf("GODEBUG differs between the deployment files and the benchmarks: %q", values)
		}
	}
	for _, kv := range strings.Split(values[0], ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			t.Errorf("GODEBUG %q: %q is not key=value", values[0], kv)
		}
		if k == "schedtrace" {
			if n, err := strconv.ParseInt(v, 10, 32); err != nil || n <= 0 {
				t.Errorf("GODEBUG schedtrace=%s: want a period in ms of 1–2147483647 (an int32), or the runtime ignores it", v)
			}
		}
	}
}
