package server

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestSegmentStoreWentBackwards: a tag whose store went backwards answers
// 503 with a JSON error naming it, on every path; readiness, status and
// metrics name it; only an admin's resume, once the store is raised, serves
// it again.
func TestSegmentStoreWentBackwards(t *testing.T) {
	const shop, admin = "shop-token-0123456789", "admin-token-0123456789"
	f := newFixture(t, func(c *Config) {
		c.Tokens = []Token{
			{Name: "shop", Token: shop, Tags: []string{"orders"}},
			{Name: "admin", Token: admin, Tags: []string{"*"}, Admin: true, Snowflake: true},
		}
	})
	as := func(tok string) []string { return []string{"Authorization", "Bearer " + tok} }
	if r := f.do(t, "GET", "/v1/segment/orders/next?count=600", "", as(shop)...); r.status != 200 {
		t.Fatalf("next: %d %s", r.status, r.body)
	}
	var high int64
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		if st := f.segs.Stats(); len(st) == 1 && st[0].Next.Len() > 0 {
			high = st[0].HighMark
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no prefetched segment")
		}
	}
	f.mem.SetMaxID("orders", 1) // restored from a backup taken at the start

	var r reply
	for range 20 {
		if r = f.do(t, "GET", "/v1/segment/orders/next?count=100", "", as(shop)...); r.status != 200 {
			break
		}
	}
	wantError(t, r, 503, codeUnavailable, fmt.Sprintf(`tag "orders": fetched up to %d, store now at 1`, high))
	if r.header.Get("Retry-After") == "" {
		t.Error("503 without Retry-After")
	}
	wantError(t, f.do(t, "GET", "/api/segment/get/orders", "", as(shop)...), 503, codeUnavailable, "went backwards")
	if r := f.do(t, "GET", "/v1/snowflake/next", "", as(admin)...); r.status != 200 {
		t.Fatalf("Snowflake IDs while a tag is refused: %d %s", r.status, r.body)
	}

	r = f.do(t, "GET", "/readyz", "")
	if r.status != 503 || !strings.Contains(r.body, `1 segment tag(s) refused`) || !strings.Contains(r.body, `tag "orders"`) {
		t.Fatalf("readyz: %d %q", r.status, r.body)
	}
	var st statusJSON
	if r := f.do(t, "GET", "/v1/status", "", as(shop)...); json.Unmarshal([]byte(r.body), &st) != nil ||
		st.Ready || !strings.Contains(st.Reason, `"orders"`) || len(st.Segments) != 1 ||
		!strings.Contains(st.Segments[0].Refused, "went backwards") || st.Segments[0].HighMark != high ||
		!strings.Contains(r.body, `"high_mark":"`+strconv.FormatInt(high, 10)+`"`) { // a bound is a string
		t.Fatalf("status: %s", r.body)
	}
	metricsHave := func(want ...string) {
		t.Helper()
		body := f.do(t, "GET", "/metrics", "").body
		for _, w := range want {
			if !strings.Contains(body, w+"\n") {
				t.Errorf("metrics lack %q", w)
			}
		}
	}
	metricsHave(`flakeid_segment_tags_refused 1`, `flakeid_segment_refused{tag="orders"} 1`,
		`flakeid_segment_regressions_total{tag="orders"} 1`)

	const resume = "/v1/segment/tags/orders/resume"
	f.mem.SetMaxID("orders", 1) // still behind (the refused fetch may have moved it past the mark)
	wantError(t, f.do(t, "POST", resume, "", as(shop)...), 403, codeForbidden, "change tags")
	wantError(t, f.do(t, "POST", resume, "", as(admin)...), 409, codePrecondition, "below "+strconv.FormatInt(high, 10))
	wantError(t, f.do(t, "POST", resume, `{"floor":5}`, as(admin)...), 400, codeInvalid, "floor 5")
	wantError(t, f.do(t, "POST", resume, `{"flor":5}`, as(admin)...), 400, codeInvalid, "flor")
	wantError(t, f.do(t, "POST", resume, `{"floor":5,"floor":6}`, as(admin)...), 400, codeInvalid, `"floor" is given twice`)
	wantError(t, f.do(t, "POST", resume, `{"floor":"x"}`, as(admin)...), 400, codeInvalid, `floor "x" is not a whole number`)
	wantError(t, f.do(t, "POST", resume, `{"floor":-1}`, as(admin)...), 400, codeInvalid, "floor -1 is out of range")
	wantError(t, f.do(t, "POST", resume, `{"floor":5}`, append(as(admin), "Content-Type", "text/plain")...), 415, codeMediaType, "text/plain")
	wantError(t, f.do(t, "POST", "/v1/segment/tags/nope/resume", "", as(admin)...), 404, codeNotFound, "nope")
	if r := f.do(t, "GET", "/readyz", ""); r.status != 503 {
		t.Fatalf("readyz after refused resumes: %d", r.status)
	}

	floor := high + 1000
	r = f.do(t, "POST", resume, fmt.Sprintf(`{"floor":%d}`, floor), as(admin)...)
	var row tagJSON
	if r.status != 200 || json.Unmarshal([]byte(r.body), &row) != nil || row.Tag != "orders" || row.MaxID < floor ||
		!strings.Contains(r.body, `"max_id":"`) { // an ID is a string

		t.Fatalf("resume: %d %s", r.status, r.body)
	}
	if r := f.do(t, "GET", "/readyz", ""); r.status != 200 {
		t.Fatalf("readyz after resume: %d %q", r.status, r.body)
	}
	r = f.do(t, "GET", "/v1/segment/orders/next?count=2", "", as(shop)...)
	var body struct{ IDs []string }
	if json.Unmarshal([]byte(r.body), &body) != nil || len(body.IDs) != 2 || body.IDs[0] != strconv.FormatInt(floor, 10) {
		t.Fatalf("next after resume: %d %s; want IDs from %d", r.status, r.body, floor)
	}
	metricsHave(`flakeid_segment_tags_refused 0`, `flakeid_segment_refused{tag="orders"} 0`,
		`flakeid_segment_regressions_total{tag="orders"} 1`)
}
