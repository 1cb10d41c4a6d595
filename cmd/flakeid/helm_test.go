package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/flakeid/flakeid/internal/testenv"
)

// helmChart is the chart's directory, from this package.
const helmChart = "../../deploy/helm/flakeid"

// helmBin finds the pinned helm that scripts/tools.sh installs.
func helmBin(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(toolCache(t, "FLAKEID_TEST_HELM_DIR", "helm-v3.22.0"), "helm")
	if _, err := os.Stat(bin); err != nil {
		msg := bin + ": " + err.Error() + "; ./scripts/tools.sh installs helm v3.22.0"
		if testenv.CI() {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return bin
}

// helm runs the chart's helm with args, in a home of its own.
func helm(t *testing.T, bin string, args ...string) (string, error) {
	t.Helper()
	home := t.TempDir()
	cmd := exec.CommandContext(t.Context(), bin, args...)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+home, "HELM_CONFIG_HOME="+home, "HELM_DATA_HOME="+home)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// TestHelmChart: helm lint --strict passes; helm template renders a
// StatefulSet with probes on /readyz and /healthz, the two Services, the
// PodDisruptionBudget, the URL Secret, and, when asked, the ServiceMonitor
// and the PrometheusRule (with the rules of deploy/prometheus); every
// FLAKEID_ variable it sets is one serve reads; without a coordinator or a
// store it refuses to render.
func TestHelmChart(t *testing.T) {
	if testing.Short() {
		t.Skip("runs helm")
	}
	bin := helmBin(t)
	t.Parallel()
	required := []string{"--set", "coordinator.url=etcd://etcd-0.etcd:2379/flakeid/workers",
		"--set", "store.url=postgres://flakeid:secret@pg:5432/ids?table=leaf_alloc"}
	if out, err := helm(t, bin, append([]string{"lint", "--strict", helmChart}, required...)...); err != nil {
		t.Fatalf("helm lint --strict: %v\n%s", err, out)
	}
	out, err := helm(t, bin, append([]string{"template", "ids", helmChart, "--namespace", "ids",
		"--set", "serviceMonitor.enabled=true", "--set", "prometheusRule.enabled=true", "--set", "resp.enabled=true",
		"--set", "tokens.json=[]", "--set", "corsOrigins={https://app.example.com}"}, required...)...)
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, out)
	}
	for _, want := range []string{"kind: StatefulSet", "kind: Service\n", "name: ids-flakeid-headless", "kind: PodDisruptionBudget",
		"kind: ServiceMonitor", "kind: PrometheusRule", "path: /readyz", "path: /healthz", "name: ids-flakeid-urls",
		"name: ids-flakeid-tokens", "alert: FlakeidNoLease", "containerPort: 6380", `value: "https://app.example.com"`} {
		if !strings.Contains(out, want) {
			t.Errorf("helm template: no %q in\n%s", want, out)
		}
	}
	// The rules are deploy/prometheus's.
	rules, err := os.ReadFile("../../deploy/prometheus/flakeid-rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	chartRules, err := os.ReadFile(helmChart + "/files/flakeid-rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(rules, chartRules) {
		t.Errorf("deploy/helm/flakeid/files/flakeid-rules.yaml differs from deploy/prometheus/flakeid-rules.yaml: copy it")
	}
	// Every variable set is one serve reads (its --help names them all).
	help := runCLI(t, "serve", "--help")
	for _, v := range regexp.MustCompile(`name: (FLAKEID_[A-Z_]+)`).FindAllStringSubmatch(out, -1) {
		if !strings.Contains(help.stdout, "$"+v[1]) {
			t.Errorf("the chart sets %s, which serve does not read", v[1])
		}
	}
	// The README's and OPERATIONS.md's helm install lines render (helm
	// template takes the same arguments; values files are left out).
	for _, doc := range []string{"../../README.md", "../../docs/OPERATIONS.md"} {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		blocks := regexp.MustCompile("(?s)```sh\n(helm install .*?)```").FindAllSubmatch(b, -1)
		if len(blocks) == 0 {
			t.Errorf("%s has no helm install block", doc)
		}
		for _, m := range blocks {
			line := strings.SplitN(strings.ReplaceAll(string(m[1]), "\\\n", " "), "\n", 2)[0]
			line = strings.Split(line, " #")[0]
			line = strings.Replace(line, "helm install", "\"$HELM\" template", 1)
			line = strings.Replace(line, "deploy/helm/flakeid", helmChart, 1)
			line = strings.Replace(line, "--create-namespace", "", 1)
			// A Secret name instead of a URL renders too.
			cmd := exec.CommandContext(t.Context(), "bash", "-c", line)
			home := t.TempDir()
			cmd.Env = append(os.Environ(), "HELM="+bin, "HELM_CACHE_HOME="+home, "HELM_CONFIG_HOME="+home, "HELM_DATA_HOME="+home)
			if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "kind: StatefulSet") {
				t.Errorf("%s: %s: %v\n%s", doc, line, err, out)
			}
		}
	}
	// No shared coordinator or store: refused, naming it.
	for _, tc := range []struct{ set, want string }{
		{"store.url=postgres://x", "coordinator.url"},
		{"coordinator.url=etcd://x:2379", "store.url"},
	} {
		out, err := helm(t, bin, "template", "ids", helmChart, "--set", tc.set)
		if err == nil || !strings.Contains(out, tc.want+" (or") {
			t.Errorf("helm template --set %s: %v\n%s; want a refusal naming %s", tc.set, err, out, tc.want)
		}
	}
}
