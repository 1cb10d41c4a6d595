package server

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"
)

// FuzzCheckQuery checks the strict query rules (checkQuery) against net/url:
// a query passes exactly when url.ParseQuery reads it without error and
// every name it holds is a parameter of the path, once, with a value; and
// then query (the hot path's reader) reads each value as net/url does.
func FuzzCheckQuery(f *testing.F) {
	for _, q := range []string{"", "count=10", "format=ranges&count=3", "count=1&count=2", "count", "count=", "Count=3",
		"a=b&&count=%31", "count=1+2", "x=1;count=2", "=&count=", "count=é", "c%6Funt=2&count=3", "count=%zz", "&", "count=3&",
		"format=ids&format=ranges", "%63ount=1&format=%72anges", "count=%3B"} {
		f.Add(q, false)
		f.Add(q, true)
	}
	f.Fuzz(func(t *testing.T, raw string, none bool) {
		params := []string{"count", "format"}
		if none {
			params = nil
		}
		err := checkQuery(raw, "/p", params)
		vals, perr := url.ParseQuery(raw)
		want := perr == nil
		for k, v := range vals {
			want = want && slices.Contains(params, k) && len(v) == 1 && v[0] != ""
		}
		if (err == nil) != want {
			t.Fatalf("checkQuery(%q) = %v; net/url reads %v (%v)", raw, err, vals, perr)
		}
		if err != nil {
			if ae, ok := err.(*apiError); !ok || ae.Status != http.StatusBadRequest || ae.Code != codeInvalid {
				t.Fatalf("checkQuery(%q) = %#v, want a 400 invalid_argument", raw, err)
			}
			return
		}
		r := httptest.NewRequest(http.MethodGet, "/p", nil)
		r.URL.RawQuery = raw
		for _, p := range params {
			if got := query(r, p); got != vals.Get(p) {
				t.Fatalf("query(%q, %q) = %q, net/url says %q", raw, p, got, vals.Get(p))
			}
		}
	})
}

// FuzzRequest throws arbitrary methods, paths, queries, Content-Types and
// bodies at the whole handler, of a plain server and of one that masks
// Snowflake IDs, and checks the promises of the API: no 500 (only 503 and
// 507 of the 5xx, which name their cause), every error answer a JSON body
// with a code (the JSON API's {"error":{"code"}} or Connect's {"code"}),
// and no ID taken by a request that was not answered 200.
func FuzzRequest(f *testing.F) {
	for _, s := range []struct{ method, path, query, ct, body string }{
		{"GET", "/v1/snowflake/next", "count=3", "", ""},
		{"HEAD", "/v1/snowflake/next", "count=100000", "", ""},
		{"HEAD", "/v1/segment/orders/next", "count=100000", "", ""},
		{"HEAD", "/api/segment/get/orders", "", "", ""},
		{"HEAD", "/api/snowflake/get/x", "", "", ""},
		{"GET", "/v1/segment/orders/next", "count=2&format=ranges", "", ""},
		{"GET", "/v1/segment/orders/next", "format=bogus", "", ""},
		{"GET", "/v1/snowflake/next", "count=100000&format=bogus", "", ""},
		{"GET", "/v1/snowflake/next", "count=", "", ""},
		{"GET", "/v1/snowflake/next", "count=2&count=7", "", ""},
		{"GET", "/v1/snowflake/next", "Count=3", "", ""},
		{"GET", "/v1/snowflake/next", "count=99999999999999999999", "", ""},
		{"GET", "/v1/snowflake/next", "count=3&format=ranges", "", ""},
		{"GET", "/v1/segment/a%2Fb/next", "", "", ""},
		{"GET", "/v1/segment/%E8%AE%A2%E5%8D%95/next", "", "", ""},
		{"GET", "/v1/segment/../next", "", "", ""},
		{"GET", "/api/segment/get/%00", "", "", ""},
		{"GET", "/v1/decode/7ZZZZZZZZZZZZ", "as=plain", "", ""},
		{"GET", "/decodeSnowflakeId", "snowflakeId=-1", "", ""},
		{"GET", "/v1/status", "x=1", "", ""},
		{"POST", "/v1/segment/tags", "", "application/json", `{"tag":"a","step":1}`},
		{"POST", "/v1/segment/tags", "", "text/plain", `{"tag":"a","step":1}`},
		{"POST", "/v1/segment/tags", "", "application/json", `{"tag":"a","tag":"b"}`},
		{"POST", "/v1/segment/tags", "", "application/json", `{"tag":"a","step":0}`},
		{"POST", "/v1/segment/tags", "", "application/json", `{"tag":"a/b"}`},
		{"POST", "/v1/segment/tags", "", "application/json", `{"tag":"x","max_id":"12"} {}`},
		{"PATCH", "/v1/segment/tags/orders", "", "application/json", `{"description":"x"}`},
		{"PATCH", "/v1/segment/tags/orders", "", "application/json", `{"max_id":5}`},
		{"POST", "/v1/segment/tags/orders/resume", "", "application/json", `{"floor":"1"}`},
		{"PUT", "/v1/status", "", "", "{"},
		{"POST", "/flakeid.v1.IDService/NextSnowflake", "", "application/json", `{"count":3,"bogus":1}`},
		{"POST", "/flakeid.v1.IDService/NextSnowflake", "", "application/json", `{"count":3}`},
		{"POST", "/flakeid.v1.IDService/NextSegment", "", "application/json", `{"tag":"orders","count":"-1"}`},
		{"POST", "/flakeid.v1.IDService/StreamSnowflake", "", "application/connect+json", "\x00\x00\x00\x00\x0b{\"count\":3}"},
		{"POST", "/flakeid.v1.IDService/Nope", "", "application/json", `{}`},
		{"GET", "/flakeid.v1.IDService/NextSnowflake", "", "", ""},
		{"POST", "/flakeid.v1.IDService/NextSnowflake", "", "text/plain", `{}`},
		{"GET", "/flakeid.v1.IDService/Decode", "encoding=json&message=%7B%22id%22%3A%221%22%7D", "", ""},
		{"POST", "/grpc.health.v1.Health/Check", "", "application/json", `{"service":"x"}`},
		{"POST", "/grpc.health.v1.Health/Nope", "", "application/grpc", ""},
		{"GET", "/ui/", "", "", ""},
		{"GET", "/v1/layout", "preset=jssafe", "", ""},
	} {
		f.Add(s.method, s.path, s.query, s.ct, s.body, false)
		f.Add(s.method, s.path, s.query, s.ct, s.body, true)
	}
	plain := newFixture(f, nil)
	masked := newFixture(f, func(c *Config) {
		c.Mask = MaskConfig{Keys: []MaskKey{{ID: 3, Key: maskKeyOld}}, Form: "base62", Snowflake: true}
	})
	f.Fuzz(func(t *testing.T, method, path, rawQuery, ct, body string, mask bool) {
		fx := plain
		if mask {
			fx = masked
		}
		if !strings.HasPrefix(path, "/") {
			path = "/" + path
		}
		target := "http://x" + path
		if rawQuery != "" {
			target += "?" + rawQuery
		}
		req, err := http.NewRequest(method, target, strings.NewReader(body))
		if err != nil {
			return // not a request a client could send
		}
		if ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		// Streams (health Watch, StreamSnowflake with count 0) run until
		// the client goes; the deadline plays the client.
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		snow, seg := fx.taken()
		rec := httptest.NewRecorder()
		fx.srv.Handler().ServeHTTP(rec, req.WithContext(ctx))
		what := method + " " + target + " (" + ct + ") " + clip(body)
		if rec.Code >= 500 && rec.Code != http.StatusServiceUnavailable && rec.Code != http.StatusInsufficientStorage {
			t.Fatalf("%s → %d %s", what, rec.Code, rec.Body.String())
		}
		if rec.Code >= 400 && !(req.URL.Path == "/readyz" && rec.Code == http.StatusServiceUnavailable) {
			var e struct {
				Code  string
				Error *struct{ Code, Message string }
			}
			ok := strings.HasPrefix(rec.Header().Get("Content-Type"), "application/json") && json.Unmarshal(rec.Body.Bytes(), &e) == nil
			if !ok || e.Code == "" && (e.Error == nil || e.Error.Code == "" || e.Error.Message == "") {
				t.Fatalf("%s → %d %q %q: want a JSON error with a code", what, rec.Code, rec.Header().Get("Content-Type"), rec.Body.String())
			}
		}
		if snow2, seg2 := fx.taken(); rec.Code != http.StatusOK && (snow2 != snow || seg2 != seg) {
			t.Fatalf("%s → %d took IDs: Snowflake %d → %d, segment %d → %d", what, rec.Code, snow, snow2, seg, seg2)
		}
	})
}
