package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/flakeid/flakeid/idmask"
	"github.com/flakeid/flakeid/segment"
	"github.com/flakeid/flakeid/snowflake"
)

// The browser tests drive the console in Debian's headless Chromium through
// the DevTools protocol (chromedp) against a real server. Without Chromium
// they skip, except under CI=true, where they fail: CI must install it.

const chromiumInstall = "apt-get update && apt-get install -y chromium"

// chromiumPath finds the browser: $FLAKEID_CHROMIUM, then chromium or
// chromium-browser on the PATH.
func chromiumPath(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("FLAKEID_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "/usr/bin/chromium"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("headless Chromium is needed for the console's browser test and is not installed; install it with: %s (or set FLAKEID_CHROMIUM to its path)", chromiumInstall)
	}
	t.Skipf("no Chromium (install it with: %s); skipping the browser test", chromiumInstall)
	return ""
}

// browser starts a fresh headless Chromium for the test and returns a
// context for a tab in it, and a func that returns the page's JavaScript
// errors so far (uncaught exceptions, console.error, CSP and other
// non-network error messages).
func browser(t *testing.T) (context.Context, func() []string) {
	t.Helper()
	path := chromiumPath(t)
	var out browserOutput
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(path),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-default-apps", true),
		chromedp.Flag("disable-background-timer-throttling", true),
		chromedp.Flag("disable-renderer-backgrounding", true),
		chromedp.Flag("force-color-profile", "srgb"),
		chromedp.Flag("lang", "en-US"),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Env("TMPDIR="+t.TempDir()), // Chromium's own singleton files, removed with the test
		chromedp.WindowSize(1360, 1000),
		chromedp.CombinedOutput(&out),
	)
	var mu sync.Mutex
	var jsErrors []string
	ctx, cancelTab := chromedp.NewContext(actx, chromedp.WithListener(func(ev any) {
		var msg string
		switch ev := ev.(type) {
		case *runtime.EventExceptionThrown:
			msg = "uncaught: " + ev.ExceptionDetails.Text
			if ex := ev.ExceptionDetails.Exception; ex != nil && ex.Description != "" {
				msg += " " + ex.Description
			}
		case *runtime.EventConsoleAPICalled:
			if ev.Type == runtime.ConsoleAPICalledTypeError {
				msg = "console.error"
				for _, a := range ev.Args {
					msg += " " + string(a.Value)
				}
			}
		case *cdplog.EventEntryAdded:
			// Failed requests (401, 400) are expected and shown by the page;
			// anything else at error level (a CSP violation, a script error)
			// is a bug.
			if ev.Entry.Level == cdplog.EntryLevelError && ev.Entry.Source != cdplog.EntrySourceNetwork {
				msg = fmt.Sprintf("%s: %s (%s)", ev.Entry.Source, ev.Entry.Text, ev.Entry.URL)
			}
		}
		if msg != "" {
			mu.Lock()
			jsErrors = append(jsErrors, msg)
			mu.Unlock()
		}
	}))
	t.Cleanup(func() {
		cancelTab()
		cancelAlloc()
		if t.Failed() && out.Len() > 0 {
			t.Logf("chromium output:\n%s", out.String())
		}
	})
	// Start the browser on the untimed context (a timeout on the first Run
	// would bound the browser's life), then bound each step separately.
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1360, 960)); err != nil {
		t.Fatalf("starting %s: %v\n%s", path, err, out.String())
	}
	return ctx, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), jsErrors...)
	}
}

// browserOutput is the browser's output, written by chromedp's goroutine.
type browserOutput struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *browserOutput) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}
func (l *browserOutput) Len() int { l.mu.Lock(); defer l.mu.Unlock(); return l.b.Len() }
func (l *browserOutput) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// step runs actions with a time limit, failing the test with what it was
// doing.
func step(t *testing.T, ctx context.Context, what string, d time.Duration, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	if err := chromedp.Do(sctx, actions...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// text reads an element's text content.
func text(t *testing.T, ctx context.Context, id string) string {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	s, err := chromedp.Run(sctx, chromedp.TextContent(chromedp.ID(id)))
	if err != nil {
		t.Fatalf("reading #%s: %v", id, err)
	}
	return strings.TrimSpace(s)
}

// waitJS waits until a JavaScript expression is truthy.
func waitJS(t *testing.T, ctx context.Context, what, expr string, d time.Duration) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, d+5*time.Second)
	defer cancel()
	if _, err := chromedp.Run(sctx, chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingInterval(100*time.Millisecond),
		chromedp.WithPollingTimeout(d))); err != nil {
		page, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerText`))
		t.Fatalf("waiting for %s (%s): %v\nthe page reads:\n%s", what, expr, err, page)
	}
}

// typeInto clears an input and types v into it as keystrokes.
func typeInto(id, v string) chromedp.Action[chromedp.Void] {
	return chromedp.Steps(
		// chromedp.Clear resets only the value attribute, not what is typed.
		chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`document.getElementById(%q).value = ""`, id)),
		chromedp.SendKeys(chromedp.ID(id), v),
	)
}

func textIs(id, want string) string {
	return fmt.Sprintf(`document.getElementById(%q).textContent.trim() === %q`, id, want)
}

// TestUIBrowser loads the console in Chromium and uses it as a person
// would: the status shows the node, a pasted ID decodes, a bad one shows the
// server's message, the IDs/s chart follows IDs issued in the background,
// and the layout calculator shows the library's error for an impossible
// layout. It saves a screenshot to docs/ui.png when it changed.
func TestUIBrowser(t *testing.T) {
	ctx, jsErrors := browser(t)
	f := newFixture(t, nil)
	st := f.node.Status()

	step(t, ctx, "loading /ui", 20*time.Second, chromedp.Navigate(f.http.URL+"/ui"))
	if loc, err := chromedp.Run(ctx, chromedp.Location()); err != nil || !strings.HasSuffix(loc, "/ui/") {
		t.Fatalf("/ui did not redirect to /ui/: %q %v", loc, err)
	}
	waitJS(t, ctx, "the status to show the worker id", textIs("worker-id", strconv.FormatInt(st.WorkerID, 10)), 10*time.Second)
	waitJS(t, ctx, "ready", textIs("ready", "ready"), 5*time.Second)
	if got := text(t, ctx, "lease"); got != "held" {
		t.Errorf("lease shows %q, want held", got)
	}
	if got := strings.Join(strings.Fields(text(t, ctx, "layout")), " "); got != f.node.Layout().String() {
		t.Errorf("layout shows %q, want %q", got, f.node.Layout().String())
	}
	if got := text(t, ctx, "reserved-until"); !strings.HasPrefix(got, st.Until.UTC().Format("2006-01-02")) {
		t.Errorf("reserved until shows %q, the lease has %v", got, st.Until)
	}
	// The segment tag of the fixture shows with its step once it is loaded.
	if r := f.do(t, "GET", "/v1/segment/orders/next?count=250", ""); r.status != 200 {
		t.Fatalf("segment: %d %s", r.status, r.body)
	}
	waitJS(t, ctx, "the orders segment buffer",
		`(() => { const s = document.querySelector('#segments .seg[data-tag="orders"]'); return s && /250 \/ [0-9,]+ used/.test(s.textContent) && /step 1,000/.test(s.textContent); })()`,
		5*time.Second)

	// Decode: paste an ID from the API, click Decode, read its parts.
	var next struct{ IDs []string }
	if r := f.do(t, "GET", "/v1/snowflake/next", ""); r.status != 200 || json.Unmarshal([]byte(r.body), &next) != nil || len(next.IDs) != 1 {
		t.Fatalf("next: %d %s", r.status, r.body)
	}
	id, err := snowflake.Parse(next.IDs[0])
	if err != nil {
		t.Fatal(err)
	}
	parts, err := f.node.Decode(id)
	if err != nil {
		t.Fatal(err)
	}
	for _, form := range textForms(id, id.String(), id.Base58()) {
		step(t, ctx, "decoding "+form, 10*time.Second,
			typeInto("decode-input", form),
			chromedp.Click(chromedp.ID("decode-btn")),
		)
		waitJS(t, ctx, "the decoded ID of "+form,
			`!document.getElementById("decode-out").hidden && `+textIs("d-id", id.String()), 5*time.Second)
		if w, s := text(t, ctx, "d-worker"), text(t, ctx, "d-sequence"); w != strconv.FormatInt(parts.Worker, 10) || s != strconv.FormatInt(parts.Sequence, 10) {
			t.Errorf("%s decodes to worker %q sequence %q, want %d and %d", form, w, s, parts.Worker, parts.Sequence)
		}
		if got := text(t, ctx, "d-unix"); got != strconv.FormatInt(parts.Time.UnixMilli(), 10) {
			t.Errorf("%s: unix ms %q, want %d", form, got, parts.Time.UnixMilli())
		}
	}
	// A bad ID shows the server's JSON error message.
	var badBody errorBody
	if r := f.do(t, "GET", "/v1/decode/garbage!", ""); json.Unmarshal([]byte(r.body), &badBody) != nil || badBody.Error.Message == "" {
		t.Fatalf("decode garbage: %s", r.body)
	}
	step(t, ctx, "decoding a bad ID", 10*time.Second, typeInto("decode-input", "garbage!"), chromedp.Click(chromedp.ID("decode-btn")))
	waitJS(t, ctx, "the decode error", `!document.getElementById("decode-error").hidden && `+
		textIs("decode-error", badBody.Error.Message)+` && document.getElementById("decode-out").hidden`, 5*time.Second)

	// The layout calculator: an impossible layout shows the library's error.
	step(t, ctx, "typing 37/0/20/16", 10*time.Second,
		typeInto("l-time", "37"), typeInto("l-datacenter", "0"), typeInto("l-worker", "20"), typeInto("l-sequence", "16"))
	waitJS(t, ctx, "the overflow error", `!document.getElementById("l-error").hidden && `+
		`/overflows the 63 bits below the sign bit by 10/.test(document.getElementById("l-error").textContent) && `+
		textIs("l-valid", "invalid"), 5*time.Second)
	// … and a preset fills the fields from the server and computes its numbers.
	step(t, ctx, "choosing the sonyflake preset", 10*time.Second,
		chromedp.SetValue(chromedp.ID("l-preset"), "sonyflake"),
		chromedp.Evaluate[chromedp.Void](`document.getElementById("l-preset").dispatchEvent(new Event("change")), undefined`))
	waitJS(t, ctx, "the sonyflake layout", textIs("l-bits", "39/0/16/8")+` && `+textIs("l-valid", "valid")+
		` && document.getElementById("l-error").hidden && document.getElementById("l-worker").value === "16"`, 5*time.Second)
	if got := text(t, ctx, "l-ips"); !strings.HasPrefix(got, "25,600") {
		t.Errorf("sonyflake IDs/s shows %q", got)
	}
	step(t, ctx, "choosing this node's layout", 10*time.Second,
		chromedp.SetValue(chromedp.ID("l-preset"), "node"),
		chromedp.Evaluate[chromedp.Void](`document.getElementById("l-preset").dispatchEvent(new Event("change")), undefined`))
	waitJS(t, ctx, "the node's layout", textIs("l-bits", "41/5/5/12")+` && `+textIs("l-valid", "valid"), 5*time.Second)
	if got := text(t, ctx, "l-until"); !strings.HasPrefix(got, "2094-09-07") {
		t.Errorf("runs until %q", got)
	}

	// IDs/s: issue IDs in the background and watch the chart's newest value.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		client := f.http.Client()
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			resp, err := client.Get(f.http.URL + "/v1/snowflake/next?count=200")
			if err != nil {
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	})
	waitJS(t, ctx, "the IDs/s chart to show IDs issued",
		`Number(document.getElementById("rate-chart").dataset.last) > 0 && Number(document.getElementById("rate-chart").dataset.points) >= 3`,
		15*time.Second)
	// Let the chart draw a few seconds of load for the screenshot.
	waitJS(t, ctx, "a few seconds of the chart", `Number(document.getElementById("rate-chart").dataset.points) >= 7`, 15*time.Second)
	close(stop)
	wg.Wait()
	if got := text(t, ctx, "rate-now"); got == "–" || got == "" {
		t.Errorf("rate-now shows %q", got)
	}
	if got := text(t, ctx, "errors-empty"); got == "" {
		t.Error("no errors note")
	}
	if n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("#errors li").length`)); err != nil || n != 0 {
		t.Errorf("recent errors lists %d entries with a healthy server (%v)", n, err)
	}
	// Decode a fresh ID again so the screenshot shows a decoded ID, not the
	// error of the bad one.
	step(t, ctx, "decoding for the screenshot", 10*time.Second, typeInto("decode-input", id.String()), chromedp.Click(chromedp.ID("decode-btn")))
	waitJS(t, ctx, "the decoded ID", `!document.getElementById("decode-out").hidden`, 5*time.Second)

	if errs := jsErrors(); len(errs) > 0 {
		t.Errorf("the page logged errors:\n%s", strings.Join(errs, "\n"))
	}
	saveScreenshot(t, ctx)
}

// TestUIBrowserToken: with tokens configured the page shows that it needs
// one; typing a token makes the status work, and the token stays in
// sessionStorage.
func TestUIBrowserToken(t *testing.T) {
	ctx, jsErrors := browser(t)
	const secret = "ui-token-0123456789"
	f := newFixture(t, func(c *Config) { c.Tokens = []Token{{Name: "ui", Token: secret}} })

	step(t, ctx, "loading /ui/", 20*time.Second, chromedp.Navigate(f.http.URL+"/ui/"))
	waitJS(t, ctx, "the token prompt", textIs("ready", "token needed"), 10*time.Second)
	waitJS(t, ctx, "the 401 in recent errors", `/missing bearer token/.test(document.getElementById("errors").textContent)`, 5*time.Second)
	waitJS(t, ctx, "the segment list saying a token is needed", `/token is needed.*401/.test(document.getElementById("segments-empty").textContent) && !document.getElementById("segments-empty").hidden`, 5*time.Second)
	step(t, ctx, "entering the token", 10*time.Second, typeInto("token-input", secret), chromedp.Click(chromedp.ID("token-save")))
	waitJS(t, ctx, "the status with the token", textIs("ready", "ready")+" && "+
		textIs("worker-id", strconv.FormatInt(f.node.Status().WorkerID, 10)), 10*time.Second)
	if got := text(t, ctx, "segments-empty"); strings.Contains(got, "token") {
		t.Errorf("with the token, the segment list still says %q", got)
	}
	if got, err := chromedp.Run(ctx, chromedp.Evaluate[string](`sessionStorage.getItem("flakeid.token")`)); err != nil || got != secret {
		t.Errorf("sessionStorage token %q (%v)", got, err)
	}
	// It survives a reload (same tab session).
	step(t, ctx, "reloading", 20*time.Second, chromedp.Reload())
	waitJS(t, ctx, "the status after a reload", textIs("ready", "ready"), 10*time.Second)
	if errs := jsErrors(); len(errs) > 0 {
		t.Errorf("the page logged errors:\n%s", strings.Join(errs, "\n"))
	}
}

// saveScreenshot writes the page to docs/ui.png when the picture changed.
// A failure to write is logged, not failed: the page worked. The path can be
// changed with FLAKEID_UI_SCREENSHOT ("off" writes nothing).
func saveScreenshot(t *testing.T, ctx context.Context) {
	t.Helper()
	// CI keeps the screenshot as an artifact under docs/; elsewhere it is
	// written only when asked for, so a test run leaves the tree clean.
	dst := os.Getenv("FLAKEID_UI_SCREENSHOT")
	if dst == "off" || t.Failed() || (dst == "" && os.Getenv("CI") != "true") {
		return // a failed page is no picture of the console
	}
	if dst == "" {
		dst = filepath.Join("..", "docs", "ui.png")
	}
	sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	png, err := chromedp.Run(sctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) {
		t.Fatalf("screenshot is not a PNG (%d bytes)", len(png))
	}
	if old, err := os.ReadFile(dst); err == nil && bytes.Equal(old, png) {
		return
	}
	if err := os.WriteFile(dst, png, 0o644); err != nil {
		t.Logf("screenshot not saved: %v", err)
		return
	}
	t.Logf("screenshot saved to %s (%d bytes)", dst, len(png))
}

// TestUIBrowserMasked: on a server that masks Snowflake IDs the console
// says so (without the key), and its decode tool reads a masked ID: the
// "New ID" button takes one, and the decoded parts are those of the
// internal ID the test unmasks with its own copy of the key.
func TestUIBrowserMasked(t *testing.T) {
	ctx, jsErrors := browser(t)
	key := MaskKey{ID: 5, Key: maskKeyNew}
	f := maskedFixture(t, MaskConfig{Keys: []MaskKey{key}, Snowflake: true})
	kr := ring(t, 63, key)

	step(t, ctx, "loading /ui/", 20*time.Second, chromedp.Navigate(f.http.URL+"/ui/"))
	waitJS(t, ctx, "the masking line", `/^Snowflake IDs · base32, 15 characters, 63-bit, key id 5$/.test(document.getElementById("masking").textContent.trim())`, 10*time.Second)
	if html := text(t, ctx, "node-card"); strings.Contains(html, maskKeyNew) {
		t.Fatal("the console shows the key")
	}
	step(t, ctx, "taking a new (masked) ID", 10*time.Second, chromedp.Click(chromedp.ID("decode-fresh")))
	waitJS(t, ctx, "the decoded masked ID", `!document.getElementById("decode-out").hidden && !document.getElementById("d-masked-row").hidden`, 5*time.Second)
	masked := text(t, ctx, "d-masked")
	want, err := kr.UnmaskText(masked)
	if err != nil {
		t.Fatalf("the console decoded %q, which does not unmask: %v", masked, err)
	}
	parts, _ := f.node.Decode(snowflake.ID(want))
	if got := text(t, ctx, "d-id"); got != strconv.FormatInt(want, 10) {
		t.Errorf("masked %s shows ID %q, want %d", masked, got, want)
	}
	if got := text(t, ctx, "d-key-id"); got != "5" {
		t.Errorf("key id shows %q, want 5", got)
	}
	if got := text(t, ctx, "d-sequence"); got != strconv.FormatInt(parts.Sequence, 10) {
		t.Errorf("sequence shows %q, want %d", got, parts.Sequence)
	}
	// A plain ID after a masked one hides the masked row again.
	id, _ := f.node.NextID()
	step(t, ctx, "decoding a plain ID", 10*time.Second, typeInto("decode-input", id.String()), chromedp.Click(chromedp.ID("decode-btn")))
	waitJS(t, ctx, "the plain ID", textIs("d-id", id.String())+` && document.getElementById("d-masked-row").hidden`, 5*time.Second)
	if errs := jsErrors(); len(errs) > 0 {
		t.Fatalf("JavaScript errors: %v", errs)
	}
}

// TestUIBrowserAmbiguous: on a server with base62 texts most masked IDs are
// valid plain base32 IDs too. The console's "New ID" decodes its own masked
// ID as masked; a pasted text that reads both ways gets the server's
// refusal and the hint to choose, and "read as: masked" decodes it.
func TestUIBrowserAmbiguous(t *testing.T) {
	ctx, jsErrors := browser(t)
	key := MaskKey{ID: 0, Key: maskKeyNew}
	f := maskedFixture(t, MaskConfig{Keys: []MaskKey{key}, Form: "base62", Snowflake: true})
	kr := ring(t, 63, key)
	var amb string
	var internal int64
	for amb == "" {
		id, err := f.node.NextID()
		if err != nil {
			t.Fatal(err)
		}
		tx, err := kr.MaskText(int64(id), idmask.Base62)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := snowflake.ParseAny(tx); err == nil {
			amb, internal = tx, int64(id)
		}
	}

	step(t, ctx, "loading /ui/", 20*time.Second, chromedp.Navigate(f.http.URL+"/ui/"))
	waitJS(t, ctx, "the masking line", `/base62/.test(document.getElementById("masking").textContent)`, 10*time.Second)
	for range 5 { // most fresh base62 IDs read both ways too
		step(t, ctx, "taking a new (masked) ID", 10*time.Second,
			chromedp.Evaluate[chromedp.Void](`document.getElementById("decode-out").hidden = true`),
			chromedp.Click(chromedp.ID("decode-fresh")))
		waitJS(t, ctx, "the decoded new ID", `!document.getElementById("decode-out").hidden && !document.getElementById("d-masked-row").hidden`, 5*time.Second)
	}
	step(t, ctx, "decoding an ambiguous text", 10*time.Second, typeInto("decode-input", amb), chromedp.Click(chromedp.ID("decode-btn")))
	waitJS(t, ctx, "the refusal", `!document.getElementById("decode-error").hidden && document.getElementById("decode-out").hidden`, 5*time.Second)
	if msg := text(t, ctx, "decode-error"); !strings.Contains(msg, "reads both as a masked ID") || !strings.Contains(msg, "Choose masked or plain") {
		t.Fatalf("the refusal of %q says %q", amb, msg)
	}
	step(t, ctx, "decoding it as masked", 10*time.Second,
		chromedp.SetValue(chromedp.ID("decode-as"), "masked"), chromedp.Click(chromedp.ID("decode-btn")))
	waitJS(t, ctx, "the masked reading", textIs("d-id", strconv.FormatInt(internal, 10))+` && document.getElementById("decode-error").hidden`, 5*time.Second)
	if errs := jsErrors(); len(errs) > 0 {
		t.Fatalf("JavaScript errors: %v", errs)
	}
}

// TestUIBrowserBigIDsAndLongNames: the segment card shows bounds above
// 2^53 with every digit (a JavaScript number would round them), as first –
// last ID; a tag name of 128 characters stays inside its card, and the card
// inside its grid column; the decode and token boxes show their whole
// placeholders; at desktop and phone widths alike.
func TestUIBrowserBigIDsAndLongNames(t *testing.T) {
	ctx, jsErrors := browser(t)
	f := newFixture(t, nil)
	const big = "big-ids"
	createBigTag(t, f, big)
	long := strings.Repeat("long_tag.name:", 10)[:127] + "z" // no hyphen: nothing to break at
	if len(long) != 128 {
		t.Fatalf("long name of %d characters", len(long))
	}
	if err := f.mem.Create(context.Background(), segment.Tag{Name: long, Step: 1000}); err != nil {
		t.Fatal(err)
	}
	for _, tag := range []string{big, long} {
		if r := f.do(t, "GET", "/v1/segment/"+tag+"/next?count=3", ""); r.status != 200 {
			t.Fatalf("next of %s: %d %s", tag, r.status, r.body)
		}
	}
	stats := func(tag string) segment.TagStats {
		for _, s := range f.segs.Stats() {
			if s.Tag == tag {
				return s
			}
		}
		t.Fatalf("tag %s is not loaded", tag)
		return segment.TagStats{}
	}
	// A range shows as its first and last ID, the bound as it is.
	shown := func(r segment.Range) string { return fmt.Sprintf("%d\u00a0– %d", r.Start, r.End-1) }
	seg := func(tag, cls string) string {
		return fmt.Sprintf(`document.querySelector('#segments .seg[data-tag=%q] .%s').textContent`, tag, cls)
	}
	st := stats(big)
	if st.Current.Start != bigMaxID || st.Next.Len() != 0 {
		t.Fatalf("%s: %+v", big, st)
	}
	if s := strconv.FormatFloat(float64(st.Current.End-1), 'f', -1, 64); s == strconv.FormatInt(st.Current.End-1, 10) {
		t.Fatalf("the test's bound %s fits a float64", s)
	}

	step(t, ctx, "loading /ui/", 20*time.Second, chromedp.Navigate(f.http.URL+"/ui/"))
	waitJS(t, ctx, "the big tag's segment", fmt.Sprintf(`(() => { try { return %s === %q && %s === %q && /not fetched/.test(%s) && !document.querySelector('#segments .seg[data-tag=%q] .range-next'); } catch (e) { return false; } })()`,
		seg(big, "range-current"), shown(st.Current), seg(big, "high-mark"), strconv.FormatInt(st.HighMark, 10), seg(big, "seg-rows"), big), 10*time.Second)

	// Past the prefetch point the next segment shows, every digit of it.
	if r := f.do(t, "GET", "/v1/segment/"+big+"/next?count="+strconv.FormatInt(st.Current.Len()*3/4, 10), ""); r.status != 200 {
		t.Fatalf("next: %d %s", r.status, r.body)
	}
	for deadline := time.Now().Add(10 * time.Second); st.Next.Len() == 0; time.Sleep(time.Millisecond) {
		if st = stats(big); time.Now().After(deadline) {
			t.Fatal("no prefetched segment")
		}
	}
	waitJS(t, ctx, "the big tag's next segment", fmt.Sprintf(`(() => { try { return %s === %q && %s === %q; } catch (e) { return false; } })()`,
		seg(big, "range-next"), shown(st.Next), seg(big, "high-mark"), strconv.FormatInt(st.HighMark, 10)), 10*time.Second)

	// The layout at several widths: three columns, two, one, a phone.
	const measure = `(() => {
		const main = document.querySelector("main");
		const card = document.getElementById("segments-card");
		const seg = document.querySelector('#segments .seg[data-tag="` + "%s" + `"]');
		const tag = seg.querySelector(".seg-tag");
		const ctx = document.createElement("canvas").getContext("2d");
		// A placeholder's width in its box's font, and the box's room for it.
		const box = (id) => {
			const input = document.getElementById(id), cs = getComputedStyle(input);
			ctx.font = cs.font;
			return { id: id, placeholder: input.placeholder, width: ctx.measureText(input.placeholder).width,
				room: input.clientWidth - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight),
				scroll: input.scrollWidth, client: input.clientWidth };
		};
		const tracks = getComputedStyle(main).gridTemplateColumns.split(" ").map(parseFloat);
		return JSON.stringify({
			column: Math.max(...tracks), columns: tracks.length,
			card: card.getBoundingClientRect().width, cardScroll: card.scrollWidth, cardClient: card.clientWidth,
			cardRight: card.getBoundingClientRect().right, tagRight: tag.getBoundingClientRect().right,
			segRight: seg.getBoundingClientRect().right, tagText: tag.textContent, tagTitle: tag.title,
			page: document.documentElement.scrollWidth, viewport: document.documentElement.clientWidth,
			boxes: [box("decode-input"), box("token-input")],
		});
	})()`
	for _, width := range []int64{1360, 1000, 760, 360} {
		step(t, ctx, fmt.Sprintf("a %d px wide window", width), 10*time.Second, chromedp.EmulateViewport(width, 960))
		waitJS(t, ctx, "the layout at the new width", fmt.Sprintf(`document.documentElement.clientWidth === %d`, width), 5*time.Second)
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		raw, err := chromedp.Run(sctx, chromedp.Evaluate[string](fmt.Sprintf(measure, long)))
		cancel()
		if err != nil {
			t.Fatalf("%d px: measuring: %v", width, err)
		}
		var m struct {
			Column, Card, CardRight, TagRight, SegRight     float64
			Columns, CardScroll, CardClient, Page, Viewport int
			TagText, TagTitle                               string
			Boxes                                           []struct {
				ID, Placeholder string
				Width, Room     float64
				Scroll, Client  int
			}
		}
		if err := json.Unmarshal([]byte(raw), &m); err != nil {
			t.Fatalf("%d px: %v: %s", width, err, raw)
		}
		t.Logf("%d px: %s", width, raw)
		if m.Card > m.Column+0.5 || m.CardScroll > m.CardClient {
			t.Errorf("%d px: the segment card is %.1f px wide (content %d of %d px) in a %.1f px column", width, m.Card, m.CardScroll, m.CardClient, m.Column)
		}
		if m.TagRight > m.CardRight+0.5 || m.SegRight > m.CardRight+0.5 {
			t.Errorf("%d px: the 128-character tag name ends at %.1f px, its buffer at %.1f px, the card at %.1f px", width, m.TagRight, m.SegRight, m.CardRight)
		}
		if m.TagText != long || m.TagTitle != long {
			t.Errorf("%d px: the tag shows %q (title %q), want all of %q", width, m.TagText, m.TagTitle, long)
		}
		if m.Page > m.Viewport {
			t.Errorf("%d px: the page is %d px wide: it scrolls sideways", width, m.Page)
		}
		// The placeholder's text measured in the box's font: Chromium's
		// scrollWidth of an empty input does not count its placeholder.
		for _, b := range m.Boxes {
			if b.Placeholder == "" || b.Width > b.Room || b.Scroll > b.Client {
				t.Errorf("%d px: the placeholder of #%s, %q, is %.1f px wide in a %.1f px box (scroll %d of %d px)",
					width, b.ID, b.Placeholder, b.Width, b.Room, b.Scroll, b.Client)
			}
		}
	}
	if errs := jsErrors(); len(errs) > 0 {
		t.Fatalf("JavaScript errors: %v", errs)
	}
}

// TestUIBrowserDeleteTag: the console deletes a segment tag on a second
// click of its delete button: the tag leaves the list and the store, and a
// single click deletes nothing.
func TestUIBrowserDeleteTag(t *testing.T) {
	t.Parallel()
	ctx, jsErrors := browser(t)
	f := newFixture(t, nil)
	if r := f.do(t, "GET", "/v1/segment/orders/next?count=5", ""); r.status != 200 {
		t.Fatalf("segment: %d %s", r.status, r.body)
	}
	step(t, ctx, "loading /ui/", 20*time.Second, chromedp.Navigate(f.http.URL+"/ui/"))
	const seg = `#segments .seg[data-tag="orders"]`
	waitJS(t, ctx, "the orders tag", `document.querySelector('`+seg+`') !== null`, 10*time.Second)
	step(t, ctx, "clicking delete once", 10*time.Second, chromedp.Click(chromedp.CSS(seg+` .seg-delete`)))
	waitJS(t, ctx, "the button asking to confirm", `/confirm delete/.test(document.querySelector('`+seg+` .seg-delete').textContent)`, 5*time.Second)
	if _, err := f.mem.Get(t.Context(), "orders"); err != nil {
		t.Fatalf("one click deleted the tag: %v", err)
	}
	step(t, ctx, "clicking delete again", 10*time.Second, chromedp.Click(chromedp.CSS(seg+` .seg-delete`)))
	waitJS(t, ctx, "the tag to leave the list", `document.querySelector('`+seg+`') === null`, 10*time.Second)
	if _, err := f.mem.Get(t.Context(), "orders"); !errors.Is(err, segment.ErrUnknownTag) {
		t.Errorf("after the console's delete, the store's orders: %v, want ErrUnknownTag", err)
	}
	if errs := jsErrors(); len(errs) > 0 {
		t.Errorf("the page logged errors:\n%s", strings.Join(errs, "\n"))
	}
}

// TestUIBrowserCreateSeries: the console's New tag form creates a series
// of business numbers (the server's answer, with its capacity, is shown,
// and the series hands out numbers), and shows the server's reason when a
// template cannot be a series.
func TestUIBrowserCreateSeries(t *testing.T) {
	t.Parallel()
	ctx, jsErrors := browser(t)
	f := newFixture(t, nil)
	step(t, ctx, "loading /ui/", 20*time.Second, chromedp.Navigate(f.http.URL+"/ui/"))
	step(t, ctx, "filling in a bad series", 10*time.Second,
		chromedp.SetValue(chromedp.ID("c-tag"), "bad"),
		chromedp.SetValue(chromedp.ID("c-period"), "day"),
		chromedp.SetValue(chromedp.ID("c-template"), "ORD-{yyyyMM}-{seq:6}"),
		chromedp.Click(chromedp.ID("c-submit")))
	waitJS(t, ctx, "the error", `!document.getElementById("c-error").hidden && /cannot show which day/.test(document.getElementById("c-error").textContent)`, 10*time.Second)
	step(t, ctx, "filling in a good series", 10*time.Second,
		chromedp.SetValue(chromedp.ID("c-tag"), "invoices"),
		chromedp.SetValue(chromedp.ID("c-step"), "20"),
		chromedp.SetValue(chromedp.ID("c-template"), "INV-{yyyyMMdd}-{seq:5}"),
		chromedp.SetValue(chromedp.ID("c-tz"), "Europe/Paris"),
		chromedp.Click(chromedp.ID("c-submit")))
	waitJS(t, ctx, "the result", `/Created series invoices: INV-\{yyyyMMdd\}-\{seq:5\} every day \(Europe\/Paris\), at most 99,999 numbers a day/.test(document.getElementById("c-result").textContent)`, 10*time.Second)
	if r := f.do(t, "GET", "/v1/segment/invoices/next", ""); r.status != 200 || !strings.Contains(r.body, `"INV-`) {
		t.Fatalf("the console's series: %d %s", r.status, r.body)
	}
	if errs := jsErrors(); len(errs) > 0 {
		t.Errorf("the page logged errors:\n%s", strings.Join(errs, "\n"))
	}
}
