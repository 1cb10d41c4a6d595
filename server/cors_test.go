package server

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// corsDo sends method path with the headers to f's server.
func corsDo(t *testing.T, f *fixture, method, path string, h map[string]string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, f.http.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range h {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// TestCORSPreflight: with origins configured, an allowed origin's preflight
// on every kind of path is answered 204 with what the browser checks, and
// its requests carry Access-Control-Allow-Origin; another origin's preflight
// is 403 and its requests carry none; without origins nothing changes
// (OPTIONS is 405, no CORS header).
func TestCORSPreflight(t *testing.T) {
	t.Parallel()
	const app, evil = "https://app.example.com", "https://evil.example.com"
	f := newFixture(t, func(c *Config) { c.CORSOrigins = []string{app, "http://127.0.0.1:3000"} })
	paths := []string{"/v1/snowflake/next", "/v1/segment/orders/next", "/v1/decode/5", "/v1/segment/tags",
		"/flakeid.v1.IDService/NextSnowflake", "/grpc.health.v1.Health/Check", "/api/snowflake/get/x"}
	for _, p := range paths {
		pre := map[string]string{"Origin": app, "Access-Control-Request-Method": "POST",
			"Access-Control-Request-Headers": "authorization, content-type, connect-protocol-version, x-grpc-web"}
		resp, body := corsDo(t, f, "OPTIONS", p, pre)
		if resp.StatusCode != 204 || resp.Header.Get("Access-Control-Allow-Origin") != app ||
			!strings.Contains(resp.Header.Get("Access-Control-Allow-Methods"), "POST") {
			t.Errorf("preflight of %s from %s: %d %v %s", p, app, resp.StatusCode, resp.Header, body)
		}
		for _, h := range strings.Split(pre["Access-Control-Request-Headers"], ", ") {
			if !strings.Contains(strings.ToLower(resp.Header.Get("Access-Control-Allow-Headers")), h) {
				t.Errorf("preflight of %s: Access-Control-Allow-Headers %q lacks %s", p, resp.Header.Get("Access-Control-Allow-Headers"), h)
			}
		}
		pre["Origin"] = evil
		resp, body = corsDo(t, f, "OPTIONS", p, pre)
		var e errorBody
		if resp.StatusCode != 403 || resp.Header.Get("Access-Control-Allow-Origin") != "" ||
			json.Unmarshal([]byte(body), &e) != nil || !strings.Contains(e.Error.Message, evil) {
			t.Errorf("preflight of %s from %s: %d %v %s, want 403 naming the origin", p, evil, resp.StatusCode, resp.Header, body)
		}
	}
	resp, body := corsDo(t, f, "GET", "/v1/snowflake/next", map[string]string{"Origin": app})
	if resp.StatusCode != 200 || resp.Header.Get("Access-Control-Allow-Origin") != app ||
		!strings.Contains(resp.Header.Get("Vary"), "Origin") || !strings.Contains(resp.Header.Get("Access-Control-Expose-Headers"), "Grpc-Status") {
		t.Errorf("GET from %s: %d %v %s", app, resp.StatusCode, resp.Header, body)
	}
	resp, _ = corsDo(t, f, "GET", "/v1/snowflake/next", map[string]string{"Origin": evil})
	if resp.StatusCode != 200 || resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("GET from %s: %d %v, want no Access-Control-Allow-Origin", evil, resp.StatusCode, resp.Header)
	}

	off := newFixture(t, nil)
	resp, _ = corsDo(t, off, "OPTIONS", "/v1/snowflake/next", map[string]string{"Origin": app, "Access-Control-Request-Method": "GET"})
	if resp.StatusCode != 405 || resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("preflight with CORS off: %d %v, want 405 without CORS headers", resp.StatusCode, resp.Header)
	}
	resp, _ = corsDo(t, off, "GET", "/v1/snowflake/next", map[string]string{"Origin": app})
	if resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("GET with CORS off: Access-Control-Allow-Origin %q", resp.Header.Get("Access-Control-Allow-Origin"))
	}

	anyOrigin := newFixture(t, func(c *Config) { c.CORSOrigins = []string{"*"} })
	resp, _ = corsDo(t, anyOrigin, "GET", "/v1/decode/5", map[string]string{"Origin": evil})
	if resp.Header.Get("Access-Control-Allow-Origin") != evil {
		t.Errorf("GET with origins *: Access-Control-Allow-Origin %q, want %s", resp.Header.Get("Access-Control-Allow-Origin"), evil)
	}
}

func TestCORSOriginsValidated(t *testing.T) {
	t.Parallel()
	for _, o := range []string{"app.example.com", "https://app.example.com/", "https://app.example.com/x", "ftp://x",
		"https://", "https://a?b", "HTTPS://a", "https://u@a", ""} {
		c := DefaultConfig()
		c.CORSOrigins = []string{o}
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%q", o)) {
			t.Errorf("origin %q: %v, want an error naming it", o, err)
		}
	}
	for _, o := range []string{"*", "https://app.example.com", "http://127.0.0.1:3000", "http://[::1]:8080"} {
		c := DefaultConfig()
		c.CORSOrigins = []string{o}
		if err := c.Validate(); err != nil {
			t.Errorf("origin %q: %v", o, err)
		}
	}
}

// TestCORSBrowser: a page in Chromium on another origin calls the JSON API
// (with a token: a preflight), Connect (JSON) and gRPC-Web; a page on an
// origin not listed cannot read any answer.
func TestCORSBrowser(t *testing.T) {
	t.Parallel()
	ctx, _ := browser(t)
	blank := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, "<!doctype html><title>an app</title><p>app</p>")
	})
	app := httptest.NewServer(blank)
	t.Cleanup(app.Close)
	other := httptest.NewServer(blank)
	t.Cleanup(other.Close)
	const secret = "cors-token-0123456789"
	f := newFixture(t, func(c *Config) {
		c.CORSOrigins = []string{app.URL}
		c.Tokens = []Token{{Name: "app", Token: secret, Snowflake: true, Tags: []string{"*"}}}
	})
	script := fmt.Sprintf(`window.__r = null;
(async () => {
  const base = %q, auth = {Authorization: "Bearer %s"}, out = {};
  const call = async (name, f) => { try { out[name] = await f(); } catch (e) { out[name] = "error " + e; } };
  await call("json", async () => { const r = await fetch(base + "/v1/snowflake/next?count=2", {headers: auth});
    return r.status + " " + await r.text(); });
  await call("connect", async () => { const r = await fetch(base + "/flakeid.v1.IDService/NextSnowflake", {method: "POST",
    headers: {...auth, "Content-Type": "application/json", "Connect-Protocol-Version": "1"}, body: JSON.stringify({count: 2})});
    return r.status + " " + await r.text(); });
  await call("grpcweb", async () => { const r = await fetch(base + "/flakeid.v1.IDService/NextSnowflake", {method: "POST",
    headers: {...auth, "Content-Type": "application/grpc-web+proto", "X-Grpc-Web": "1"}, body: new Uint8Array([0, 0, 0, 0, 2, 8, 2])});
    const b = new Uint8Array(await r.arrayBuffer());
    return r.status + " " + b.length + " " + Array.from(b, c => String.fromCharCode(c)).join("").replace(/[^ -~]/g, "."); });
  await call("decode", async () => { const r = await fetch(base + "/v1/decode/5"); return r.status + " " + await r.text(); });
  window.__r = JSON.stringify(out);
})();`, f.http.URL, secret)
	run := func(page string) map[string]string {
		step(t, ctx, "loading "+page, 20*time.Second, chromedp.Navigate(page))
		step(t, ctx, "calling "+f.http.URL, 10*time.Second, chromedp.Evaluate[chromedp.Void](script))
		waitJS(t, ctx, "the calls", `window.__r !== null`, 15*time.Second)
		s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`window.__r`))
		if err != nil {
			t.Fatal(err)
		}
		var out map[string]string
		if err := json.Unmarshal([]byte(s), &out); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		return out
	}
	out := run(app.URL)
	for name, want := range map[string][]string{
		"json":    {"200 ", `"ids":["`},
		"connect": {"200 ", `"ranges":[{"first":"`, `"count":"2"`},
		"grpcweb": {"200 ", "grpc-status: 0"},
		"decode":  {"200 ", `"sequence":5`},
	} {
		for _, w := range want {
			if !strings.Contains(out[name], w) {
				t.Errorf("from %s: %s answered %q, want %q in it", app.URL, name, out[name], w)
			}
		}
	}
	out = run(other.URL)
	for _, name := range []string{"json", "connect", "grpcweb", "decode"} {
		if !strings.HasPrefix(out[name], "error TypeError") {
			t.Errorf("from %s (not allowed): %s answered %q, want the browser to refuse it", other.URL, name, out[name])
		}
	}
}
