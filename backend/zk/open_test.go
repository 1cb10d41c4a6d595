package zk

import (
	"errors"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flakeid/flakeid/internal/testenv"
	"github.com/flakeid/flakeid/worker"
	"github.com/flakeid/flakeid/worker/workertest"
)

// TestParseURL: what OpenWorkers makes of a URL, before it connects.
func TestParseURL(t *testing.T) {
	for _, tc := range []struct {
		url      string
		servers  []string
		prefix   string
		registry string
		leaf     *LeafConfig
	}{
		{"zk://127.0.0.1:2181", []string{"127.0.0.1:2181"}, DefaultPrefix, DefaultRegistry, nil},
		{"zk://127.0.0.1:2181/", []string{"127.0.0.1:2181"}, DefaultPrefix, DefaultRegistry, nil},
		{"zk://a:1,b:2,c:3/ids/prod/", []string{"a:1", "b:2", "c:3"}, "/ids/prod", DefaultRegistry, nil},
		{"zk://a:1/p?leaf=/snowflake/app", []string{"a:1"}, "/p", DefaultRegistry,
			&LeafConfig{Path: "/snowflake/app", Interval: DefaultLeafInterval, Margin: DefaultLeafMargin}},
		{"zk://a:1/p?leaf=/snowflake/app/&leaf_margin=10s&leaf_interval=1s", []string{"a:1"}, "/p", DefaultRegistry,
			&LeafConfig{Path: "/snowflake/app", Interval: time.Second, Margin: 10 * time.Second}},
	} {
		u, err := url.Parse(tc.url)
		if err != nil {
			t.Fatal(err)
		}
		servers, prefix, opts, err := parseURL(u)
		if err != nil {
			t.Errorf("%s: %v", tc.url, err)
			continue
		}
		w := &Workers{registry: DefaultRegistry}
		for _, o := range opts {
			o(w)
		}
		if !slices.Equal(servers, tc.servers) || prefix != tc.prefix || w.registry != tc.registry ||
			(w.leaf == nil) != (tc.leaf == nil) || (w.leaf != nil && *w.leaf != *tc.leaf) || w.optErr != nil {
			t.Errorf("%s: %v %q registry %q leaf %+v (%v); want %v %q %q %+v", tc.url, servers, prefix, w.registry, w.leaf, w.optErr,
				tc.servers, tc.prefix, tc.registry, tc.leaf)
		}
	}
	for _, tc := range []struct{ url, want string }{
		{"etcd://a:1/p", "scheme"},
		{"zk:///p", "no ZooKeeper server"},
		{"zk://a:1,,b:2/p", "no ZooKeeper server"},
		{"zk://a:1/p?timeout=3s", `"timeout"`},
		{"zk://a:1/p?registry=rel", "registry= is not accepted"},
		{"zk://a:1/p?registry=" + DefaultRegistry, DefaultRegistry},
		{"zk://a:1/p?leaf=/snowflake/app&registry=/r/dcs", "registry= is not accepted"},
		{"zk://a:1/p?leaf=snowflake", "leaf="},
		{"zk://a:1/p?leaf_margin=5s", "leaf="},
		{"zk://a:1/p?leaf=/s/a&leaf_margin=soon", "leaf_margin="},
		{"zk://a:1/p?leaf=/s/a&leaf_margin=1s&leaf_margin=2s", "leaf_margin="},
		{"zk://a:1/p//q", "path"},
		{"zk://u:pw@a:1/p", "credentials"},
	} {
		u, err := url.Parse(tc.url)
		if err != nil {
			t.Fatal(err)
		}
		_, _, _, err = parseURL(u)
		if !errors.Is(err, worker.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want ErrInvalidConfig saying %s", tc.url, err, tc.want)
		}
		// The caller shows the URL (redacted) before the error.
		if err != nil && strings.Contains(err.Error(), "a:1") {
			t.Errorf("%s: the error shows the URL: %v", tc.url, err)
		}
	}
}

// TestOpenWorkers opens a coordinator of a real ZooKeeper from its URL and
// leases through it.
func TestOpenWorkers(t *testing.T) {
	t.Parallel()
	addr := testenv.ZooKeeper().Require(t)
	sp := testSpace(t, addr)
	u, _ := url.Parse("zk://" + addr + sp.prefix)
	// The shared ensemble's registry is other tests' too: the smoke test
	// claims its datacenter in the test's own (no URL has a way to).
	w, err := OpenWorkers(t.Context(), u, withRegistry(sp.registry))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if w.Prefix() != sp.prefix || w.Registry() != sp.registry || !slices.Equal(w.servers, []string{addr}) {
		t.Fatalf("OpenWorkers(%s) = %s, %s, %v", u, w.Prefix(), w.Registry(), w.servers)
	}
	workertest.Smoke(t, w, testTTL)
}
