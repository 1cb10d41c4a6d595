package server

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/flakeid/flakeid/segment"
)

// tinyidReply is Tinyid's Response.
type tinyidReply struct {
	Data    json.RawMessage `json:"data"`
	Code    int             `json:"code"`
	Message string          `json:"message"`
}

func (f *fixture) tinyid(t *testing.T, method, path string, header ...string) tinyidReply {
	t.Helper()
	r := f.do(t, method, path, "", header...)
	var out tinyidReply
	if r.status != 200 || json.Unmarshal([]byte(r.body), &out) != nil {
		t.Fatalf("%s %s: %d %q", method, path, r.status, r.body)
	}
	return out
}

func tinyidIDs(t *testing.T, r tinyidReply) []int64 {
	t.Helper()
	var ids []int64
	if r.Code != 200 || json.Unmarshal(r.Data, &ids) != nil {
		t.Fatalf("nextId: %+v", r)
	}
	return ids
}

// clientIDs are the IDs Tinyid's client hands out of a segment
// (SegmentId.init and nextId): currentId + delta, … up to maxId.
func clientIDs(t *testing.T, seg tinyidSegment) []int64 {
	t.Helper()
	if seg.Delta < 1 || seg.Remainder < 0 || seg.Remainder >= seg.Delta || seg.LoadingID < seg.CurrentID || seg.LoadingID > seg.MaxID {
		t.Fatalf("segment %+v", seg)
	}
	var ids []int64
	for id := seg.CurrentID + seg.Delta; id <= seg.MaxID; id += seg.Delta {
		if id%seg.Delta != seg.Remainder {
			t.Fatalf("segment %+v hands out %d", seg, id)
		}
		ids = append(ids, id)
	}
	return ids
}

// Tinyid's four paths hand out IDs of the same tag as flakeid's own
// paths, never one twice: nextId and nextIdSimple from the buffers,
// nextSegmentId(Simple) a whole segment for the client, by GET or POST.
func TestTinyidPaths(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.MaxCount, c.StreamBatch = 50, 50 })
	seen := map[int64]string{}
	add := func(who string, ids ...int64) {
		t.Helper()
		for _, id := range ids {
			if prev, ok := seen[id]; ok {
				t.Fatalf("ID %d from %s and from %s", id, prev, who)
			}
			seen[id] = who
		}
	}
	for _, m := range []string{"GET", "POST"} {
		ids := tinyidIDs(t, f.tinyid(t, m, "/tinyid/id/nextId?bizType=orders&batchSize=3", ""))
		if len(ids) != 3 || ids[0] >= ids[1] || ids[1] >= ids[2] {
			t.Fatalf("%s nextId: %v", m, ids)
		}
		add("nextId", ids...)
		if ids := tinyidIDs(t, f.tinyid(t, m, "/tinyid/id/nextId?bizType=orders", "")); len(ids) != 1 {
			t.Fatalf("nextId without batchSize: %v", ids)
		}
		// batchSize is capped at max_count, as Tinyid caps it.
		if ids := tinyidIDs(t, f.tinyid(t, m, "/tinyid/id/nextId?bizType=orders&batchSize=100000", "")); len(ids) != 50 {
			t.Fatalf("batchSize past max_count gave %d IDs", len(ids))
		} else {
			add("nextId", ids...)
		}
		r := f.do(t, m, "/tinyid/id/nextIdSimple?bizType=orders&batchSize=4", "")
		parts := strings.Split(r.body, ",")
		if r.status != 200 || len(parts) != 4 {
			t.Fatalf("nextIdSimple: %d %q", r.status, r.body)
		}
		for _, p := range parts {
			id, err := strconv.ParseInt(p, 10, 64)
			if err != nil {
				t.Fatalf("nextIdSimple %q", r.body)
			}
			add("nextIdSimple", id)
		}
		sr := f.tinyid(t, m, "/tinyid/id/nextSegmentId?bizType=orders")
		var seg tinyidSegment
		if sr.Code != 200 || json.Unmarshal(sr.Data, &seg) != nil {
			t.Fatalf("nextSegmentId: %+v", sr)
		}
		segIDs := clientIDs(t, seg)
		if len(segIDs) != 1000 || seg.LoadingID != seg.CurrentID+200 {
			t.Fatalf("segment %+v: %d IDs, want the tag's step, 1000, loading at 20 %%", seg, len(segIDs))
		}
		add("nextSegmentId", segIDs...)
		r = f.do(t, m, "/tinyid/id/nextSegmentIdSimple?bizType=orders", "")
		var nums []int64
		for _, p := range strings.Split(r.body, ",") {
			v, err := strconv.ParseInt(p, 10, 64)
			if err != nil {
				t.Fatalf("nextSegmentIdSimple: %q", r.body)
			}
			nums = append(nums, v)
		}
		if len(nums) != 5 {
			t.Fatalf("nextSegmentIdSimple: %q", r.body)
		}
		add("nextSegmentIdSimple", clientIDs(t, tinyidSegment{nums[0], nums[1], nums[2], nums[3], nums[4]})...)
		// flakeid's own path: still none of them.
		var body struct{ IDs []string }
		if r := f.do(t, "GET", "/v1/segment/orders/next?count=50", ""); json.Unmarshal([]byte(r.body), &body) != nil {
			t.Fatal(r.body)
		}
		for _, s := range body.IDs {
			id, _ := strconv.ParseInt(s, 10, 64)
			add("/v1/segment", id)
		}
	}

	// Failures answer as Tinyid: code 6 and the reason, or an empty body.
	for path, mention := range map[string]string{
		"/tinyid/id/nextId?bizType=nosuch":                 "nosuch",
		"/tinyid/id/nextId?bizType=orders&batchSize=0":     "batchSize",
		"/tinyid/id/nextId?bizType=orders&batchSize=x":     "batchSize",
		"/tinyid/id/nextSegmentId?bizType=nosuch":          "nosuch",
		"/tinyid/id/nextId?bizType=a%20b":                  "a b",
		"/tinyid/id/nextSegmentId?bizType=orders%3A%3Ax":   "period",
		"/tinyid/id/nextId?bizType=orders&batchSize=-5":    "batchSize",
		"/tinyid/id/nextId?bizType=orders&batchSize=1e309": "batchSize",
	} {
		if r := f.tinyid(t, "GET", path); r.Code != 6 || !strings.Contains(r.Message, mention) || string(r.Data) != "null" {
			t.Errorf("%s: %+v, want code 6 mentioning %q", path, r, mention)
		}
		if got := f.do(t, "GET", path, "").header.Get("X-Flakeid-Error-Code"); got == "" || got == codeInternal {
			t.Errorf("%s: X-Flakeid-Error-Code %q, want the code flakeid's API answers", path, got)
		}
	}
	for _, path := range []string{"/tinyid/id/nextIdSimple?bizType=nosuch", "/tinyid/id/nextSegmentIdSimple?bizType=nosuch"} {
		if r := f.do(t, "GET", path, ""); r.status != 200 || r.body != "" || !strings.Contains(r.header.Get("X-Flakeid-Error"), "nosuch") || r.header.Get("X-Flakeid-Error-Code") != codeNotFound {
			t.Errorf("%s: %d %q %v", path, r.status, r.body, r.header)
		}
	}
	for _, m := range []string{"PUT", "DELETE", "HEAD"} {
		if r := f.do(t, m, "/tinyid/id/nextId?bizType=orders", ""); r.status != 405 || !strings.Contains(r.header.Get("Allow"), "POST") {
			t.Errorf("%s: %d %v", m, r.status, r.header)
		}
	}
	if r := f.do(t, "GET", "/tinyid/id/nextId?bizType=orders&bizTyp=x", ""); r.status != 400 {
		t.Errorf("an unknown parameter: %d %s", r.status, r.body)
	}
}

// A tag whose store records a stride (Tinyid's delta and remainder): the
// segment says so, and Tinyid's client hands out only its IDs.
func TestTinyidSegmentStride(t *testing.T) {
	f := newFixture(t, nil)
	if err := f.mem.Create(context.Background(), segment.Tag{Name: "odd", Step: 100, Delta: 2, Remainder: 1}); err != nil {
		t.Fatal(err)
	}
	if r := f.do(t, "GET", "/v1/segment/tags", ""); !strings.Contains(r.body, `"tag":"odd","max_id":"1","step":100,"description":"","update_time":`) ||
		!strings.Contains(r.body, `"delta":2,"remainder":1`) {
		t.Fatalf("tags list: %s", r.body)
	}
	seen := map[int64]bool{}
	for range 3 {
		var seg tinyidSegment
		sr := f.tinyid(t, "POST", "/tinyid/id/nextSegmentId?bizType=odd")
		if sr.Code != 200 || json.Unmarshal(sr.Data, &seg) != nil || seg.Delta != 2 || seg.Remainder != 1 {
			t.Fatalf("nextSegmentId: %+v %+v", sr, seg)
		}
		ids := clientIDs(t, seg)
		if len(ids) != 50 {
			t.Fatalf("segment %+v: %d IDs, want 50 (step 100, delta 2)", seg, len(ids))
		}
		ids = append(ids, tinyidIDs(t, f.tinyid(t, "GET", "/tinyid/id/nextId?bizType=odd&batchSize=7"))...)
		for _, id := range ids {
			if seen[id] || id%2 != 1 {
				t.Fatalf("ID %d: seen %v, or even", id, seen[id])
			}
			seen[id] = true
		}
	}
}

// Tokens: Tinyid's table (read once a minute), or flakeid's tokens by
// ?token= or bearer; a masked tag is refused on Tinyid's paths.
func TestTinyidTokens(t *testing.T) {
	var loads atomic.Int64
	table := func(context.Context) (map[string][]string, error) {
		loads.Add(1)
		return map[string][]string{"0f673adf80504e2eaa552f5d791b644c": {"orders"}, "other": {"invoices"}}, nil
	}
	const secret = "flakeid-token-0123456789"
	f := newFixtureOpts(t, func(c *Config) {
		c.Tokens = []Token{{Token: secret, Name: "svc", Tags: []string{"orders"}}}
	}, nil, func(o *Options) { o.TinyidTokens = table })
	for path, want := range map[string]int{
		"/tinyid/id/nextId?bizType=orders&token=0f673adf80504e2eaa552f5d791b644c":        200,
		"/tinyid/id/nextId?bizType=orders&token=" + secret:                               200,
		"/tinyid/id/nextId?bizType=orders":                                               5,
		"/tinyid/id/nextId?bizType=orders&token=other":                                   5,
		"/tinyid/id/nextId?bizType=orders&token=nope":                                    5,
		"/tinyid/id/nextId?token=0f673adf80504e2eaa552f5d791b644c":                       5,
		"/tinyid/id/nextSegmentId?bizType=orders&token=other":                            5,
		"/tinyid/id/nextSegmentId?bizType=orders&token=0f673adf80504e2eaa552f5d791b644c": 200,
	} {
		r := f.tinyid(t, "GET", path)
		if r.Code != want || want == 5 && r.Message != "token is error" {
			t.Errorf("%s: %+v, want code %d", path, r, want)
		}
	}
	if r := f.tinyid(t, "GET", "/tinyid/id/nextId?bizType=orders", "Authorization", "Bearer "+secret); r.Code != 200 {
		t.Errorf("bearer token: %+v", r)
	}
	if r := f.do(t, "GET", "/tinyid/id/nextIdSimple?bizType=orders&token=other", ""); r.body != "" {
		t.Errorf("nextIdSimple with a refused token: %q", r.body)
	}
	if n := loads.Load(); n != 1 {
		t.Errorf("the token table was read %d times within a minute, want once", n)
	}

	m := newFixture(t, func(c *Config) {
		c.Mask = MaskConfig{Keys: []MaskKey{{ID: 3, Key: maskKeyOld}}, Form: "base62", Tags: []string{"orders"}}
	})
	for _, p := range []string{"nextId", "nextSegmentId"} {
		if r := m.tinyid(t, "GET", "/tinyid/id/"+p+"?bizType=orders"); r.Code != 6 || !strings.Contains(r.Message, "masked") {
			t.Errorf("%s of a masked tag: %+v", p, r)
		}
	}
}
