package server

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/flakeid/flakeid/segment"
)

// taken is how many IDs the fixture's server has handed out so far:
// Snowflake IDs over every generator of the node, and segment IDs of every
// tag.
func (f *fixture) taken() (snowflakeIDs uint64, segmentIDs int64) {
	for _, st := range f.segs.Stats() {
		segmentIDs += st.Issued
	}
	return f.node.Status().Total.Issued, segmentIDs
}

// nextOrder takes one ID of tag orders through the HTTP API.
func (f *fixture) nextOrder(t *testing.T) int64 {
	t.Helper()
	r := f.do(t, "GET", "/v1/segment/orders/next", "")
	var body struct{ IDs []string }
	if r.status != 200 || json.Unmarshal([]byte(r.body), &body) != nil || len(body.IDs) != 1 {
		t.Fatalf("next: %d %s", r.status, r.body)
	}
	id, err := strconv.ParseInt(body.IDs[0], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// wantNothingTaken runs bad, which must be refused, and checks that it took
// no ID: the server's counters are unchanged, and the segment IDs taken
// just before and just after it are consecutive.
func (f *fixture) wantNothingTaken(t *testing.T, what string, bad func() reply) reply {
	t.Helper()
	before := f.nextOrder(t)
	snow, seg := f.taken()
	r := bad()
	if r.status < 400 {
		t.Fatalf("%s: %d %s, want it refused", what, r.status, r.body)
	}
	if snow2, seg2 := f.taken(); snow2 != snow || seg2 != seg {
		t.Errorf("%s (answered %d) took IDs: Snowflake %d → %d, segment %d → %d", what, r.status, snow, snow2, seg, seg2)
	}
	if after := f.nextOrder(t); after != before+1 {
		t.Errorf("%s (answered %d) took segment IDs: %d before it, %d after", what, r.status, before, after)
	}
	return r
}

// TestHeadTakesNothing: HEAD on a path that hands out IDs is 405 with
// Allow: GET and takes nothing, whether singleIDPaths or the mux routes it
// (an escaped name goes through the mux); other GET paths still answer
// HEAD.
func TestHeadTakesNothing(t *testing.T) {
	f := newFixture(t, nil)
	for _, path := range []string{
		"/v1/snowflake/next", "/v1/snowflake/next?count=100000",
		"/v1/segment/orders/next?count=100000", "/v1/segment/%6Frders/next?count=5",
		"/api/snowflake/get/x", "/api/segment/get/orders", "/api/segment/get/%6Frders",
	} {
		r := f.wantNothingTaken(t, "HEAD "+path, func() reply { return f.do(t, "HEAD", path, "") })
		if r.status != 405 || r.header.Get("Allow") != "GET" || !strings.HasPrefix(r.header.Get("Content-Type"), "application/json") {
			t.Errorf("HEAD %s: %d, Allow %q, Content-Type %q; want 405, Allow GET, JSON", path, r.status, r.header.Get("Allow"), r.header.Get("Content-Type"))
		}
		// The body (which HEAD does not send) is the JSON error.
		rec := httptest.NewRecorder()
		f.srv.Handler().ServeHTTP(rec, httptest.NewRequest("HEAD", path, nil))
		wantError(t, reply{rec.Code, rec.Header(), rec.Body.String()}, 405, codeMethod, "only GET")
	}
	for _, path := range []string{"/v1/status", "/v1/segment/tags", "/healthz"} {
		if r := f.do(t, "HEAD", path, ""); r.status != 200 {
			t.Errorf("HEAD %s: %d, want 200", path, r.status)
		}
	}
}

// TestBadRequestsTakeNothing: every parameter of a request for IDs is
// checked before an ID is taken, on the JSON paths and Leaf's, and the
// error names what was wrong.
func TestBadRequestsTakeNothing(t *testing.T) {
	f := newFixture(t, nil)
	for _, prefix := range []string{"/v1/snowflake/next", "/v1/segment/orders/next"} {
		for _, c := range []struct {
			query   string
			header  []string
			mention string
		}{
			{"?format=bogus", nil, `format "bogus": want ids or ranges`},
			{"?count=5&format=bogus", nil, `format "bogus"`},
			{"?count=100000&format=xml", nil, `format "xml"`},
			{"?count=0", nil, "count 0 is out of range: want 1 to 100000"},
			{"?count=-1", nil, "count -1 is out of range: want 1 to 100000"},
			{"?count=100001", nil, "count 100001 is out of range: want 1 to 100000"},
			{"?count=99999999999999999999", nil, "count 99999999999999999999 is out of range: want 1 to 100000"},
			{"?count=abc", nil, `count "abc" is not a whole number: want 1 to 100000`},
			{"?count=1.5", nil, `count "1.5" is not a whole number`},
			{"?count=%2B5", nil, `count "+5" is not a whole number`},
			{"?count=1+2", nil, `count "1 2" is not a whole number`},
			{"?count=", nil, "query parameter count is empty"},
			{"?count", nil, "query parameter count is empty"},
			{"?count=2&count=7", nil, "query parameter count is given twice"},
			{"?count=2&c%6Funt=7", nil, "query parameter count is given twice"},
			{"?Count=3", nil, `unknown query parameter "Count" (names are case-sensitive: count)`},
			{"?limit=3", nil, `unknown query parameter "limit"; /v1/`},
			{"?=3", nil, `unknown query parameter ""`},
			{"?count=3;format=ranges", nil, "';'"},
			{"?count=%zz", nil, "bad query"},
			{"?count=3&format=ranges", []string{"Accept", "text/plain"}, "format=ranges answers JSON"},
		} {
			path := prefix + c.query
			r := f.wantNothingTaken(t, path, func() reply { return f.do(t, "GET", path, "", c.header...) })
			wantError(t, r, 400, codeInvalid, c.mention)
		}
		// Escaped queries follow the same rules and work.
		if r := f.do(t, "GET", prefix+"?c%6Funt=2&format=r%61nges", ""); r.status != 200 || !strings.Contains(r.body, `"count":2`) {
			t.Errorf("escaped query: %d %s", r.status, r.body)
		}
	}
	wantError(t, f.do(t, "GET", "/v1/snowflake/next?Count=3", ""), 400, codeInvalid,
		"/v1/snowflake/next takes count, format and prefix")
	wantError(t, f.do(t, "GET", "/v1/segment/orders/next?x=1", ""), 400, codeInvalid,
		"/v1/segment/{tag}/next takes count and format")
	for _, path := range []string{"/api/snowflake/get/x?count=2", "/api/segment/get/orders?x=1", "/api/segment/get/orders?"} {
		if strings.HasSuffix(path, "?") {
			if r := f.do(t, "GET", path, ""); r.status != 200 {
				t.Errorf("%s: %d %s", path, r.status, r.body)
			}
			continue
		}
		r := f.wantNothingTaken(t, path, func() reply { return f.do(t, "GET", path, "") })
		wantError(t, r, 400, codeInvalid, map[bool]string{true: "takes format and prefix", false: "takes no query parameters"}[strings.Contains(path, "snowflake")])
	}
	// Leaf's snowflake path takes a UUID format, and refuses others before
	// taking an ID.
	for path, mention := range map[string]string{
		"/api/snowflake/get/x?format=ids":             "want uuid7, typeid or ulid",
		"/api/snowflake/get/x?format=ulid&prefix=a":   "prefix is for format=typeid",
		"/api/snowflake/get/x?format=typeid&prefix=A": "TypeID prefix",
	} {
		r := f.wantNothingTaken(t, path, func() reply { return f.do(t, "GET", path, "") })
		wantError(t, r, 400, codeInvalid, mention)
	}
	// Bad tag names are refused before anything, with the rule.
	for _, path := range []string{"/v1/segment/a%2Fb/next", "/v1/segment/%E8%AE%A2%E5%8D%95/next", "/api/segment/get/a:b%20c"} {
		r := f.wantNothingTaken(t, path, func() reply { return f.do(t, "GET", path, "") })
		wantError(t, r, 400, codeInvalid, "a tag is 1–128 of A–Z a–z 0–9 - _ . :")
	}
	wantError(t, f.do(t, "GET", "/v1/segment/%E8%AE%A2%E5%8D%95/next", ""), 400, codeInvalid, `'订' (U+8BA2) at character 1`)

	// The query rules hold on every other path.
	for _, c := range []struct{ path, mention string }{
		{"/v1/status?verbose=1", "/v1/status takes no query parameters"},
		{"/v1/segment/tags?tag=orders", "/v1/segment/tags takes no query parameters"},
		{"/healthz?x", "/healthz takes no query parameters"},
		{"/readyz?x=1", "/readyz takes no query parameters"},
		{"/metrics?x=1", "/metrics takes no query parameters"},
		{"/v1/decode/1?As=plain", "/v1/decode/{id} takes as"},
		{"/v1/decode/1?as=", "query parameter as is empty"},
		{"/v1/decode/1?as=plain&as=masked", "query parameter as is given twice"},
		{"/decodeSnowflakeId?snowflakeid=1", "/decodeSnowflakeId takes snowflakeId and as"},
		{"/decodeSnowflakeId", "snowflakeId is required"},
	} {
		wantError(t, f.do(t, "GET", c.path, ""), 400, codeInvalid, c.mention)
	}
	if r := f.do(t, "GET", "/v1/decode/1?as=plain", ""); r.status != 200 {
		t.Errorf("decode ?as=plain: %d %s", r.status, r.body)
	}
}

// TestBadRequestsTakeNothingAuthMask: auth and masking are checked before
// an ID is taken too.
func TestBadRequestsTakeNothingAuthMask(t *testing.T) {
	const shop, admin = "shop-token-0123456789", "admin-token-0123456789"
	f := newFixture(t, func(c *Config) {
		c.Tokens = []Token{
			{Name: "shop", Token: shop, Tags: []string{"orders"}},
			{Name: "admin", Token: admin, Tags: []string{"*"}, Admin: true, Snowflake: true},
		}
		c.Mask = MaskConfig{Keys: []MaskKey{{ID: 3, Key: maskKeyOld}}, Snowflake: true}
	})
	auth := func(tok string) []string { return []string{"Authorization", "Bearer " + tok} }
	next := func() int64 {
		r := f.do(t, "GET", "/v1/segment/orders/next", "", auth(shop)...)
		var body struct{ IDs []string }
		if r.status != 200 || json.Unmarshal([]byte(r.body), &body) != nil || len(body.IDs) != 1 {
			t.Fatalf("next: %d %s", r.status, r.body)
		}
		id, _ := strconv.ParseInt(body.IDs[0], 10, 64)
		return id
	}
	for _, c := range []struct {
		path    string
		header  []string
		status  int
		code    string
		mention string
	}{
		{"/v1/snowflake/next?count=1000&format=ranges", auth(admin), 400, codeInvalid, "masked IDs"},
		{"/v1/snowflake/next?count=1000", nil, 401, codeUnauth, "missing bearer token"},
		{"/v1/snowflake/next?count=1000", auth(shop), 403, codeForbidden, "Snowflake"},
		{"/api/snowflake/get/x", auth(shop), 403, codeForbidden, "Snowflake"},
		{"/v1/segment/orders/next?count=1000", auth("wrong-token-0123456789"), 401, codeUnauth, "unknown bearer token"},
		{"/api/segment/get/orders", nil, 401, codeUnauth, "missing"},
	} {
		before := next()
		snow, seg := f.taken()
		wantError(t, f.do(t, "GET", c.path, "", c.header...), c.status, c.code, c.mention)
		if snow2, seg2 := f.taken(); snow2 != snow || seg2 != seg {
			t.Errorf("%s took IDs: Snowflake %d → %d, segment %d → %d", c.path, snow, snow2, seg, seg2)
		}
		if after := next(); after != before+1 {
			t.Errorf("%s took segment IDs: %d before, %d after", c.path, before, after)
		}
	}
}

func TestCheckQuery(t *testing.T) {
	params := []string{"count", "format"}
	for _, c := range []struct {
		raw, err string
	}{
		{"", ""},
		{"count=3", ""},
		{"count=3&format=ranges", ""},
		{"format=ranges&count=3", ""},
		{"count=3&", ""},
		{"&&count=3", ""},
		{"c%6Funt=3", ""},
		{"count=%33", ""},
		{"Count=3", `unknown query parameter "Count" (names are case-sensitive: count); /p takes count and format`},
		{"count=1&count=2", "query parameter count is given twice: give it once"},
		{"count=", "query parameter count is empty: give it a value (count=…) or leave it out"},
		{"count", "query parameter count is empty"},
		{"format=ranges&format=ids", "format is given twice"},
		{"count=1;format=ids", `bad query: "count=1;format=ids" has a ';'`},
		{"count=%", "bad query"},
		{"x%zz=1", "bad query"},
	} {
		err := checkQuery(c.raw, "/p", params)
		if c.err == "" && err != nil || c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)) {
			t.Errorf("checkQuery(%q) = %v, want %q", c.raw, err, c.err)
		}
	}
	if err := checkQuery("x=1", "/q", nil); err == nil || err.Error() != `unknown query parameter "x"; /q takes no query parameters` {
		t.Errorf("no parameters: %v", err)
	}
	for _, c := range []struct {
		text, want string
		n          int64
	}{
		{"7", "", 7},
		{"007", "", 7},
		{"10", "", 10},
		{"0", "n 0 is out of range: want 1 to 10", 0},
		{"11", "n 11 is out of range: want 1 to 10", 0},
		{"-3", "n -3 is out of range: want 1 to 10", 0},
		{"-0", "n -0 is out of range", 0},
		{"99999999999999999999", "n 99999999999999999999 is out of range: want 1 to 10", 0},
		{"-99999999999999999999", "n -99999999999999999999 is out of range: want 1 to 10", 0},
		{"", `n "" is not a whole number: want 1 to 10`, 0},
		{"-", `n "-" is not a whole number`, 0},
		{"+3", `n "+3" is not a whole number`, 0},
		{"3.0", `n "3.0" is not a whole number`, 0},
		{"1e1", `n "1e1" is not a whole number`, 0},
		{" 3", `n " 3" is not a whole number`, 0},
		{"٣", `is not a whole number`, 0},
	} {
		n, err := wholeNumber("n", c.text, 1, 10)
		if c.want == "" && (err != nil || n != c.n) || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("wholeNumber(%q) = %d, %v; want %d, %q", c.text, n, err, c.n, c.want)
		}
	}
}

// TestQueryAllocations: the query check allocates nothing for the queries
// of the hot path.
func TestQueryAllocations(t *testing.T) {
	params := []string{"count", "format"}
	for _, raw := range []string{"", "count=10", "count=10&format=ranges", "format=ids&count=1"} {
		if n := testing.AllocsPerRun(100, func() {
			if err := checkQuery(raw, "/p", params); err != nil {
				t.Fatal(err)
			}
		}); n != 0 {
			t.Errorf("checkQuery(%q): %v allocations", raw, n)
		}
	}
}

// TestJSONBodyRules: the tag changes read strict JSON: application/json,
// one object, known keys once each, values of the right kind and range.
func TestJSONBodyRules(t *testing.T) {
	f := newFixture(t, nil)
	const tags = "/v1/segment/tags"
	post := func(body string, header ...string) reply { return f.do(t, "POST", tags, body, header...) }
	for _, c := range []struct {
		body    string
		header  []string
		status  int
		code    string
		mention string
	}{
		{`{"tag":"a1"}`, []string{"Content-Type", "text/plain"}, 415, codeMediaType, `Content-Type "text/plain" is not supported: send the body as application/json`},
		{`{"tag":"a1"}`, []string{"Content-Type", ""}, 415, codeMediaType, "no Content-Type"},
		{`{"tag":"a1"}`, []string{"Content-Type", "application/x-www-form-urlencoded"}, 415, codeMediaType, "application/json"},
		{`{"tag":"a1"}`, []string{"Content-Type", "application/json; charset=latin1"}, 415, codeMediaType, `charset "latin1"`},
		{`{"tag":"a1"}`, []string{"Content-Type", "application/json;;"}, 415, codeMediaType, "Content-Type"},
		{"", []string{"Content-Type", "application/json"}, 400, codeInvalid, "empty body"},
		{" \n", []string{"Content-Type", "application/json"}, 400, codeInvalid, "empty body"},
		{`{"tag":"a1","tag":"a2"}`, nil, 400, codeInvalid, `key "tag" is given twice`},
		{`{"tag":"a1","step":10,"step":20}`, nil, 400, codeInvalid, `key "step" is given twice`},
		{`{"tag":"a1","Step":10}`, nil, 400, codeInvalid, `unknown key "Step": POST /v1/segment/tags takes tag, step, description and max_id`},
		{`{"tag":"a1","stepp":10}`, nil, 400, codeInvalid, `unknown key "stepp"`},
		{`{"tag":"a1"} {"tag":"a2"}`, nil, 400, codeInvalid, "data after the object"},
		{`{"tag":"a1"}x`, nil, 400, codeInvalid, "data after the object"},
		{`{"tag":"a1"`, nil, 400, codeInvalid, "bad JSON body: it ends before the object does"},
		{`{"tag":"a1",}`, nil, 400, codeInvalid, "bad JSON body"},
		{`["a1"]`, nil, 400, codeInvalid, "want an object"},
		{`"a1"`, nil, 400, codeInvalid, "want an object"},
		{`{}`, nil, 400, codeInvalid, "tag is required"},
		{`{"step":10}`, nil, 400, codeInvalid, "tag is required"},
		{`{"tag":5}`, nil, 400, codeInvalid, "tag must be a JSON string, not 5"},
		{`{"tag":null}`, nil, 400, codeInvalid, "tag must be a JSON string, not null"},
		{`{"tag":"a/b"}`, nil, 400, codeInvalid, `tag "a/b" has '/'`},
		{`{"tag":".."}`, nil, 400, codeInvalid, `not "." or ".."`},
		{`{"tag":"订单"}`, nil, 400, codeInvalid, `'订' (U+8BA2) at character 1`},
		{`{"tag":"a1","step":0}`, nil, 400, codeInvalid, "step 0 is out of range: want 1 to 2147483647"},
		{`{"tag":"a1","step":-3}`, nil, 400, codeInvalid, "step -3 is out of range"},
		{`{"tag":"a1","step":2147483648}`, nil, 400, codeInvalid, "step 2147483648 is out of range: want 1 to 2147483647"},
		{`{"tag":"a1","step":1e400}`, nil, 400, codeInvalid, `step "1e400" is not a whole number`},
		{`{"tag":"a1","step":1.5}`, nil, 400, codeInvalid, `step "1.5" is not a whole number`},
		{`{"tag":"a1","step":"10"}`, nil, 400, codeInvalid, `step must be a whole number from 1 to 2147483647, not "10"`},
		{`{"tag":"a1","step":null}`, nil, 400, codeInvalid, "step must be a whole number"},
		{`{"tag":"a1","description":7}`, nil, 400, codeInvalid, "description must be a JSON string"},
		{`{"tag":"a1","description":"` + strings.Repeat("d", 300) + `"}`, nil, 400, codeInvalid, "description"},
		{`{"tag":"a1","max_id":-1}`, nil, 400, codeInvalid, "max_id -1 is out of range: want 0 to 9223372036854775807"},
		{`{"tag":"a1","max_id":"9223372036854775808"}`, nil, 400, codeInvalid, "max_id 9223372036854775808 is out of range"},
		{`{"tag":"a1","max_id":"12x"}`, nil, 400, codeInvalid, `max_id "12x" is not a whole number`},
		{`{"tag":"a1","max_id":true}`, nil, 400, codeInvalid, "max_id must be a whole number (a JSON number or a string of digits)"},
		{`{"tag":"a1","description":"` + strings.Repeat("a", maxBody) + `"}`, nil, 413, codeBodyTooLarge, "larger than 65536 bytes"},
		{`{"tag":"orders"}`, nil, 409, codeExists, "orders"},
	} {
		wantError(t, post(c.body, c.header...), c.status, c.code, c.mention)
	}
	// A body over the limit of unknown length (chunked) is 413 too.
	req, _ := http.NewRequest("POST", f.http.URL+tags, struct{ *strings.Reader }{strings.NewReader(`{"description":"` + strings.Repeat("a", 2*maxBody) + `"}`)})
	req.Header.Set("Content-Type", "application/json")
	if resp, err := f.http.Client().Do(req); err != nil || resp.StatusCode != 413 || resp.ContentLength == 0 {
		t.Errorf("chunked body over the limit: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	wantTags := func(want map[string]tagJSON) {
		t.Helper()
		r := f.do(t, "GET", tags, "")
		var body struct{ Tags []tagJSON }
		if r.status != 200 || json.Unmarshal([]byte(r.body), &body) != nil {
			t.Fatalf("list: %d %s", r.status, r.body)
		}
		for _, got := range body.Tags {
			if w, ok := want[got.Tag]; ok && (got.Step != w.Step || got.MaxID != w.MaxID || got.Description != w.Description) {
				t.Errorf("tag %s: %+v, want %+v", got.Tag, got, w)
			}
			delete(want, got.Tag)
		}
		if len(want) > 0 {
			t.Errorf("tags missing from the list: %v (%s)", want, r.body)
		}
	}
	// Nothing refused above was created.
	wantTags(map[string]tagJSON{"orders": {Tag: "orders", Step: 1000, MaxID: 1}})
	if r := f.do(t, "GET", tags, ""); strings.Contains(r.body, `"a1"`) || !strings.Contains(r.body, `"max_id":"1"`) {
		t.Errorf("list: %s; want no a1, and max_id as a string", r.body)
	}

	// Step absent → the default step; max_id as a string or a number.
	for _, c := range []struct {
		body string
		want tagJSON
	}{
		{`{"tag":"d1"}`, tagJSON{Tag: "d1", Step: 1000, MaxID: 1}},
		{`{"tag":"d2","step":7,"description":"x","max_id":"9007199254740993"}`, tagJSON{Tag: "d2", Step: 7, MaxID: 9007199254740993, Description: "x"}},
		{`{"tag":"d3","max_id":500}`, tagJSON{Tag: "d3", Step: 1000, MaxID: 500}},
		{`{"tag":"A-b_c.d:e","step":2147483647}`, tagJSON{Tag: "A-b_c.d:e", Step: segment.MaxStep, MaxID: 1}},
	} {
		r := post(c.body, "Content-Type", "application/json; charset=UTF-8")
		var row tagJSON
		if r.status != 201 || json.Unmarshal([]byte(r.body), &row) != nil || row.Tag != c.want.Tag || row.Step != c.want.Step ||
			row.MaxID != c.want.MaxID || row.Description != c.want.Description || !strings.Contains(r.body, `"max_id":"`) {
			t.Errorf("create %s: %d %s, want %+v", c.body, r.status, r.body, c.want)
		}
		wantTags(map[string]tagJSON{c.want.Tag: c.want})
	}

	// PATCH takes step and description only.
	const d1 = "/v1/segment/tags/d1"
	for _, c := range []struct {
		body    string
		header  []string
		status  int
		code    string
		mention string
	}{
		{`{"max_id":5}`, nil, 400, codeInvalid, "max_id cannot be changed: PATCH takes step and description"},
		{`{"step":5,"max_id":"5"}`, nil, 400, codeInvalid, "max_id cannot be changed"},
		{`{"tag":"d9"}`, nil, 400, codeInvalid, "tag cannot be changed: PATCH takes step and description"},
		{`{"steps":5}`, nil, 400, codeInvalid, `unknown key "steps": PATCH takes step and description`},
		{`{"step":0}`, nil, 400, codeInvalid, "step 0 is out of range: want 1 to 2147483647"},
		{`{"step":5,"step":6}`, nil, 400, codeInvalid, `key "step" is given twice`},
		{`{}`, nil, 400, codeInvalid, "nothing to change"},
		{``, []string{"Content-Type", "application/json"}, 400, codeInvalid, "empty body"},
		{`{"step":5}`, []string{"Content-Type", "text/plain"}, 415, codeMediaType, "application/json"},
		{`{"step":5}{}`, nil, 400, codeInvalid, "data after the object"},
	} {
		wantError(t, f.do(t, "PATCH", d1, c.body, c.header...), c.status, c.code, c.mention)
	}
	wantTags(map[string]tagJSON{"d1": {Tag: "d1", Step: 1000, MaxID: 1}})
	wantError(t, f.do(t, "PATCH", "/v1/segment/tags/a%2Fb", `{"step":5}`), 400, codeInvalid, "invalid tag")
	if r := f.do(t, "PATCH", d1, `{"step":5,"description":"five"}`); r.status != 200 || !strings.Contains(r.body, `"step":5`) {
		t.Errorf("PATCH: %d %s", r.status, r.body)
	}
	wantTags(map[string]tagJSON{"d1": {Tag: "d1", Step: 5, MaxID: 1, Description: "five"}})
}
