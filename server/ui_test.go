package server

import (
	"encoding/json"
	"maps"
	"net/http"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flakeid/flakeid/snowflake"
)

// TestUIAssets: the console's files are served with their content types,
// open without a token, with no external resources.
func TestUIAssets(t *testing.T) {
	f := newFixture(t, func(c *Config) {
		c.Tokens = []Token{{Name: "ids", Token: "ids-token-0123456789", Snowflake: true}}
	})
	page := f.do(t, "GET", "/ui/", "")
	if page.status != 200 || page.header.Get("Content-Type") != "text/html; charset=utf-8" {
		t.Fatalf("GET /ui/: %d %q", page.status, page.header.Get("Content-Type"))
	}
	for _, id := range []string{
		"ready", "ready-reason", "worker-id", "lease", "reserved-until", "high-water", "clock-offset", "clock-back",
		"rate-chart", "rate-now", "segments", "errors", "token-form", "token-input",
		"decode-form", "decode-input", "decode-btn", "decode-error", "d-worker", "d-sequence",
		"layout-form", "l-time", "l-datacenter", "l-worker", "l-sequence", "l-epoch", "l-unit", "l-error", "l-ips", "l-until",
	} {
		if !strings.Contains(page.body, `id="`+id+`"`) {
			t.Errorf("the page has no element #%s", id)
		}
	}
	csp := page.header.Get("Content-Security-Policy")
	if !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "script-src 'self'") {
		t.Errorf("CSP %q", csp)
	}
	for path, ct := range map[string]string{"/ui/ui.css": "text/css; charset=utf-8", "/ui/ui.js": "text/javascript; charset=utf-8"} {
		r := f.do(t, "GET", path, "")
		if r.status != 200 || r.header.Get("Content-Type") != ct || len(r.body) < 500 {
			t.Errorf("GET %s: %d %q, %d bytes", path, r.status, r.header.Get("Content-Type"), len(r.body))
		}
		if r.header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s: no nosniff", path)
		}
		// Nothing from elsewhere: no absolute URLs in src, href, url() or fetch.
		if m := regexp.MustCompile(`(?i)(src=|href=|url\(|fetch\(|import )\s*["']?(https?:)?//`).FindString(r.body + page.body); m != "" {
			t.Errorf("%s loads an external resource: %q", path, m)
		}
	}
	// The page and its files are cached with revalidation.
	etag := page.header.Get("ETag")
	if r := f.do(t, "GET", "/ui/", "", "If-None-Match", etag); etag == "" || r.status != 304 {
		t.Errorf("If-None-Match %q: %d", etag, r.status)
	}
	if r := f.do(t, "HEAD", "/ui/ui.js", ""); r.status != 200 || r.body != "" {
		t.Errorf("HEAD: %d %q", r.status, r.body)
	}
	// /ui redirects to /ui/ (relatively, for proxies with a path prefix).
	client := f.http.Client()
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := client.Get(f.http.URL + "/ui")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if loc, _ := resp.Location(); resp.StatusCode != 301 || loc == nil || loc.Path != "/ui/" {
		t.Errorf("GET /ui: %d → %v", resp.StatusCode, loc)
	}
	wantError(t, f.do(t, "GET", "/ui/secret.txt", ""), 404, codeNotFound, "/ui/secret.txt")
	wantError(t, f.do(t, "POST", "/ui/", ""), 405, codeMethod, "use GET")
	// The API behind the page still asks for the token.
	wantError(t, f.do(t, "GET", "/v1/status", ""), 401, codeUnauth, "missing bearer token")
	if r := f.do(t, "GET", "/v1/status", "", "Authorization", "Bearer ids-token-0123456789"); r.status != 200 {
		t.Errorf("status with the token: %d %s", r.status, r.body)
	}
}

// jsonKeys are the JSON keys of a struct type's fields.
func jsonKeys(t reflect.Type) map[string]bool {
	out := map[string]bool{}
	for f := range t.Fields() {
		if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); name != "" && name != "-" {
			out[name] = true
		}
	}
	return out
}

// TestUIReadsStatus: the console reads only keys that /v1/status has (its
// wire structs), and never turns a value into a JavaScript number with
// Number(), parseInt() or parseFloat(): IDs and bounds are strings of up to
// 19 digits and stay strings.
func TestUIReadsStatus(t *testing.T) {
	f := newFixture(t, nil)
	js := f.do(t, "GET", "/ui/ui.js", "").body
	if js == "" {
		t.Fatal("no ui.js")
	}
	// fn is the text of one of ui.js's functions (two-space indented).
	fn := func(name string) string {
		t.Helper()
		m := regexp.MustCompile(`(?s)\n  function ` + name + `\(.*?\n  \}\n`).FindString(js)
		if m == "" {
			t.Fatalf("ui.js has no function %s", name)
		}
		return m
	}
	for _, c := range []struct {
		what, text, variable string
		keys                 map[string]bool
	}{
		{"status", js, "st", jsonKeys(reflect.TypeFor[statusJSON]())},
		{"status.snowflake", js, "sf", jsonKeys(reflect.TypeFor[snowflakeStatusJSON]())},
		{"status.snowflake_totals", js, "tot", jsonKeys(reflect.TypeFor[snowflakeTotalsJSON]())},
		{"status.segments[]", fn("renderSegments"), "s", jsonKeys(reflect.TypeFor[segmentStatusJSON]())},
		{"status.mask", fn("maskingText"), "m", jsonKeys(reflect.TypeFor[maskStatusJSON]())},
		{"a segment range", fn("rangeLen") + fn("fmtRange"), "r", jsonKeys(reflect.TypeFor[segmentRangeJSON]())},
	} {
		var read []string
		for _, m := range regexp.MustCompile(`\b`+c.variable+`\.([a-zA-Z_]+)`).FindAllStringSubmatch(c.text, -1) {
			read = append(read, m[1])
			if !c.keys[m[1]] {
				t.Errorf("ui.js reads %s.%s, which %s does not have (it has %v)", c.variable, m[1], c.what, slices.Sorted(maps.Keys(c.keys)))
			}
		}
		if len(read) == 0 {
			t.Errorf("ui.js reads nothing of %s through %q: the test's patterns are stale", c.what, c.variable)
		}
	}
	if m := regexp.MustCompile(`\b(Number|parseInt|parseFloat)\(`).FindString(js); m != "" {
		t.Errorf("ui.js converts with %s…): IDs are shown from their strings (BigInt for arithmetic)", m)
	}
}

// TestLayoutEndpoint: /v1/layout answers the library's numbers, valid or
// not, and 400 for values that are not numbers, times or durations.
func TestLayoutEndpoint(t *testing.T) {
	f := newFixture(t, nil)
	get := func(query string) layoutJSON {
		t.Helper()
		r := f.do(t, "GET", "/v1/layout?"+query, "")
		var out layoutJSON
		if r.status != 200 || !strings.HasPrefix(r.header.Get("Content-Type"), "application/json") || json.Unmarshal([]byte(r.body), &out) != nil {
			t.Fatalf("/v1/layout?%s: %d %s", query, r.status, r.body)
		}
		return out
	}

	def := snowflake.DefaultLayout().Capacity()
	for _, q := range []string{"", "time_bits=41&datacenter_bits=5&worker_bits=5&sequence_bits=12&epoch=2025-01-01T00:00:00Z&unit=1ms",
		"preset=default", "time_bits=41&datacenter_bits=5&worker_bits=5&sequence_bits=12&epoch=1735689600000&unit=1ms"} {
		got := get(q)
		if !got.Valid || got.Error != "" || got.Bits != "41/5/5/12" || got.IDsPerSecond != def.IDsPerSecond || got.Nodes != 1024 ||
			got.LifetimeYears != def.LifetimeYears || got.RunsUntil != def.RunsUntil.Format(time.RFC3339) ||
			!strings.HasPrefix(got.RunsUntil, "2094-09-07") || got.Unit != "1ms" || got.Epoch != "2025-01-01T00:00:00Z" {
			t.Errorf("?%s: %+v", q, got)
		}
	}
	if got := get("preset=sonyflake"); !got.Valid || got.Bits != "39/0/16/8" || got.IDsPerSecond != 25600 || got.Unit != "10ms" {
		t.Errorf("sonyflake: %+v", got)
	}
	// A zero time width takes the rest of the 63 bits.
	if got := get("time_bits=0&datacenter_bits=0&worker_bits=10&sequence_bits=12"); !got.Valid || got.Bits != "41/0/10/12" {
		t.Errorf("time bits 0: %+v", got)
	}

	bad := get("time_bits=37&datacenter_bits=0&worker_bits=20&sequence_bits=16")
	if bad.Valid || bad.Bits != "37/0/20/16" || bad.IDsPerSecond != 0 || bad.RunsUntil != "" ||
		!strings.Contains(bad.Error, "37 + datacenter 0 + worker 20 + sequence 16 = 73 bits overflows the 63 bits below the sign bit by 10") {
		t.Errorf("37/0/20/16: %+v", bad)
	}
	if got := get("time_bits=63&datacenter_bits=1"); got.Valid || !strings.Contains(got.Error, "overflows") {
		t.Errorf("63 time bits and a datacenter bit: %+v", got)
	}
	if got := get("unit=500ns"); got.Valid || !strings.Contains(got.Error, "time unit 500ns") {
		t.Errorf("unit 500ns: %+v", got)
	}
	// Structurally fine but not usable now: the capacity is still reported.
	future := time.Now().AddDate(1, 0, 0).UTC().Format("2006-01-02")
	if got := get("epoch=" + future); got.Valid || !strings.Contains(got.Error, "in the future") || got.IDsPerSecond != def.IDsPerSecond {
		t.Errorf("future epoch: %+v", got)
	}
	if got := get("time_bits=20&epoch=2020-01-01"); got.Valid || !strings.Contains(got.Error, "ran out") || got.RunsUntil == "" {
		t.Errorf("run-out layout: %+v", got)
	}

	for q, mention := range map[string]string{
		"time_bits=abc":                      `time_bits "abc" is not a whole number: want 0 to 63`,
		"worker_bits=1.5":                    "worker_bits",
		"time_bits=70":                       "time_bits 70 is out of range: want 0 to 63",
		"datacenter_bits=-1":                 "datacenter_bits -1 is out of range: want 0 to 63",
		"sequence_bits=99999999999999999999": "sequence_bits 99999999999999999999 is out of range: want 0 to 63",
		"epoch=":                             "epoch is empty",
		"unit=1ms&unit=2ms":                  "unit is given twice",
		"Unit=1ms":                           "names are case-sensitive: unit",
		"bits=41":                            "/v1/layout takes preset, time_bits",
		"epoch=yesterday":                    "epoch",
		"epoch=99999999999999999":            "epoch",
		"unit=fast":                          "unit",
		"unit=-1ms":                          "unit",
		"unit=0":                             "unit",
		"preset=nope":                        "unknown preset",
	} {
		wantError(t, f.do(t, "GET", "/v1/layout?"+q, ""), 400, codeInvalid, mention)
	}
	wantError(t, f.do(t, "POST", "/v1/layout", ""), 405, codeMethod, "use GET")
}
