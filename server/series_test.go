package server

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	flakeidv1 "github.com/flakeid/flakeid/gen/flakeid/v1"
	"github.com/flakeid/flakeid/segment"
)

// seriesClock is a settable clock for the allocator's periods.
type seriesClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *seriesClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *seriesClock) add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// seriesMaskKey is the fixtures' mask key 7.
const seriesMaskKey = "00112233445566778899aabbccddeeff"

// seriesFixture is a fixture whose allocator runs on clock and masks series
// with the server's mask key 7.
func seriesFixture(t *testing.T, clock *seriesClock) *fixture {
	mc := MaskConfig{Keys: []MaskKey{{ID: 7, Key: seriesMaskKey}}}
	keys, err := mc.CounterKeys()
	if err != nil {
		t.Fatal(err)
	}
	return newFixtureWith(t, func(c *Config) { c.Mask = mc }, func(sc *segment.Config) {
		sc.Now, sc.CounterKeys = clock.Now, keys
	})
}

// TestSeriesHTTP: a series is created over HTTP (settings validated, the
// capacity shown), hands out its numbers on every HTTP path (JSON, text,
// numeric form, Leaf's path), decodes them, refuses what does not apply
// (ranges, numeric form of a plain tag) without taking anything, and a
// full period answers 507, shows in /readyz and the metrics until the next
// period. Every answer is checked against the OpenAPI document.
func TestSeriesHTTP(t *testing.T) {
	clock := &seriesClock{now: time.Date(2026, 11, 28, 22, 30, 0, 0, time.UTC)}
	f := seriesFixture(t, clock)
	r := f.do(t, "POST", "/v1/segment/tags", `{"tag":"ord","step":10,"period":"day","tz":"Asia/Shanghai","template":"ORD-{yyyyMMdd}-{seq:6}","description":"shop"}`)
	var created tagJSON
	if r.status != 201 || json.Unmarshal([]byte(r.body), &created) != nil || created.Period != "day" || created.TZ != "Asia/Shanghai" ||
		created.Start == nil || *created.Start != 1 || created.Capacity != "at most 999,999 numbers a day" || created.Description != "shop" {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	for _, c := range []struct{ body, mention string }{
		{`{"tag":"x1","period":"day","template":"{yyyyMMdd}-{seq:4}-{DD}"}`, `unknown placeholder at "DD"`},
		{`{"tag":"x2","period":"day","template":"{yyyyMM}-{seq:4}"}`, "cannot show which day"},
		{`{"tag":"x3","step":100,"period":"hour","template":"{yyyyMMddHH}{seq:2}"}`, "step 100 is more than the 99 numbers"},
		{`{"tag":"x4","period":"day"}`, "a series needs period and template"},
		{`{"tag":"x5","period":"fortnight","template":"{yyyy}{seq:2}"}`, `period "fortnight"`},
		{`{"tag":"x6","period":"day","tz":"Moon/Base","template":"{yyyyMMdd}{seq:2}"}`, `time zone "Moon/Base"`},
		{`{"tag":"x7","period":"day","template":"{yyyyMMdd}{seq:2}","masked":"yes"}`, "masked must be true or false"},
		{`{"tag":"x8","period":"day","template":"{yyyyMMdd}{seq:2}","start":-1}`, "start -1 is out of range"},
		{`{"tag":"x::9","period":"day","template":"{yyyyMMdd}{seq:2}"}`, "kept for the periods"},
	} {
		wantError(t, f.do(t, "POST", "/v1/segment/tags", c.body), 400, codeInvalid, c.mention)
	}

	// 22:30 UTC is 06:30 on the 29th in Shanghai.
	r = f.do(t, "GET", "/v1/segment/ord/next?count=2", "")
	if r.status != 200 || r.body != `{"tag":"ord","series":true,"ids":["ORD-20261129-000001","ORD-20261129-000002"]}`+"\n" {
		t.Fatalf("next: %d %s", r.status, r.body)
	}
	if r = f.do(t, "GET", "/v1/segment/ord/next", "", "Accept", "text/plain"); r.body != "ORD-20261129-000003\n" {
		t.Fatalf("text next: %d %q", r.status, r.body)
	}
	if r = f.do(t, "GET", "/v1/segment/ord/next?format=numeric", ""); r.body != `{"tag":"ord","series":true,"ids":["20261129000004"]}`+"\n" {
		t.Fatalf("numeric next: %d %s", r.status, r.body)
	}
	if r = f.do(t, "GET", "/api/segment/get/ord", ""); r.status != 200 || r.body != "ORD-20261129-000005" {
		t.Fatalf("Leaf path: %d %q", r.status, r.body)
	}
	wantError(t, f.do(t, "GET", "/v1/segment/ord/next?format=ranges", ""), 400, codeInvalid, "series")
	wantError(t, f.do(t, "GET", "/v1/segment/orders/next?format=numeric", ""), 400, codeInvalid, "not a series")
	if r = f.do(t, "GET", "/v1/segment/ord/next", ""); r.body != `{"tag":"ord","series":true,"ids":["ORD-20261129-000006"]}`+"\n" {
		t.Fatalf("after the refusals, next: %s (a refusal took a number)", r.body)
	}
	if n, _ := f.taken(); n != 0 {
		t.Fatalf("series requests took %d Snowflake IDs", n)
	}

	// Decode, both forms; bad numbers name what is wrong.
	for _, in := range []string{"ORD-20261129-000002", "20261129000002"} {
		r = f.do(t, "GET", "/v1/segment/ord/decode/"+in, "")
		var d decodeNumberJSON
		if r.status != 200 || json.Unmarshal([]byte(r.body), &d) != nil || d.Number != "ORD-20261129-000002" || d.Numeric != "20261129000002" ||
			d.Label != "20261129" || d.Counter != 2 || d.Seq != 2 || d.PeriodStart != "2026-11-29T00:00:00+08:00" || d.PeriodEnd != "2026-11-30T00:00:00+08:00" {
			t.Fatalf("decode %s: %d %s", in, r.status, r.body)
		}
	}
	wantError(t, f.do(t, "GET", "/v1/segment/ord/decode/ORD-20261131-000002", ""), 400, codeInvalid, "shows no day")
	wantError(t, f.do(t, "GET", "/v1/segment/ord/decode/INV-20261129-000002", ""), 400, codeInvalid, `is not where "ORD-" should be`)
	wantError(t, f.do(t, "GET", "/v1/segment/orders/decode/5", ""), 400, codeInvalid, "not a series")
	wantError(t, f.do(t, "GET", "/v1/segment/nope/decode/5", ""), 404, codeNotFound, "nope")

	// The list shows the series' settings.
	r = f.do(t, "GET", "/v1/segment/tags", "")
	if !strings.Contains(r.body, `"template":"ORD-{yyyyMMdd}-{seq:6}"`) || strings.Contains(r.body, "ord::") {
		t.Fatalf("tags: %s", r.body)
	}

	// Masked: shuffled counters, decoded back to the real ones.
	r = f.do(t, "POST", "/v1/segment/tags", `{"tag":"inv","step":5,"period":"year","template":"INV{yy}{seq:5}","masked":true}`)
	if r.status != 201 || !strings.Contains(r.body, `"masked":true`) || !strings.Contains(r.body, `"key_id":7`) {
		t.Fatalf("create masked: %d %s", r.status, r.body)
	}
	r = f.do(t, "GET", "/v1/segment/inv/next?count=20", "")
	var got seriesNextJSON
	if err := json.Unmarshal([]byte(r.body), &got); err != nil || len(got.IDs) != 20 {
		t.Fatalf("masked next: %d %s", r.status, r.body)
	}
	for i, n := range got.IDs {
		var d decodeNumberJSON
		r = f.do(t, "GET", "/v1/segment/inv/decode/"+n, "")
		if json.Unmarshal([]byte(r.body), &d) != nil || d.Seq != int64(i)+1 || !d.Masked || !strings.HasPrefix(n, "INV26") {
			t.Fatalf("masked number %d %s decodes as %s", i, n, r.body)
		}
	}
	if sorted := slices.IsSorted(got.IDs); sorted {
		t.Fatalf("masked numbers come in order: %v", got.IDs)
	}

	// A full period: 507, not ready, the metric; the next period serves.
	if r = f.do(t, "POST", "/v1/segment/tags", `{"tag":"tiny","step":2,"period":"minute","template":"T{yyyyMMddHHmm}{seq:1}"}`); r.status != 201 {
		t.Fatalf("create tiny: %d %s", r.status, r.body)
	}
	if r = f.do(t, "GET", "/v1/segment/tiny/next?count=9", ""); r.status != 200 {
		t.Fatalf("the minute's 9 numbers: %d %s", r.status, r.body)
	}
	wantError(t, f.do(t, "GET", "/v1/segment/tiny/next", ""), 507, codeTooLarge, "has issued all its 9 numbers")
	if r = f.do(t, "GET", "/readyz", ""); r.status != 503 || !strings.Contains(r.body, "series full") || !strings.Contains(r.body, `"tiny"`) {
		t.Fatalf("/readyz with a full series: %d %s", r.status, r.body)
	}
	if r = f.do(t, "GET", "/metrics", ""); !strings.Contains(r.body, "flakeid_series_periods_full 1") {
		t.Fatal("the metrics do not show the full series")
	}
	if !strings.Contains(r.body, `flakeid_segment_fetches_total{tag="ord"}`) || strings.Contains(r.body, `tag="ord::`) {
		t.Fatal("the metrics label a series' periods by period, not by series")
	}
	clock.add(time.Minute)
	if r = f.do(t, "GET", "/v1/segment/tiny/next", ""); r.status != 200 || !strings.Contains(r.body, "202611282231") {
		t.Fatalf("the next minute: %d %s", r.status, r.body)
	}
	if r = f.do(t, "GET", "/readyz", ""); r.status != 200 {
		t.Fatalf("/readyz in the next minute: %d %s", r.status, r.body)
	}
}

// TestSeriesRESPAndConnect: ID.NEXT hands out a series' numbers, INCR
// refuses naming ID.NEXT, ID.DECODE … TAG reads them; the RPCs create a
// series, hand out its numbers (both forms) and decode them.
func TestSeriesRESPAndConnect(t *testing.T) {
	clock := &seriesClock{now: time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)}
	e := newRESPEnv(t, nil, func(sc *segment.Config) { sc.Now = clock.Now })
	if err := e.segs.Create(t.Context(), segment.Tag{Name: "ord", Step: 10,
		Series: &segment.Series{Period: segment.Day, Template: "ORD-{yyyyMMdd}-{seq:6}", Start: 1}}); err != nil {
		t.Fatal(err)
	}
	for _, proto := range []int{2, 3} {
		c := e.client(t, proto, nil)
		res, err := c.Do(t.Context(), "ID.NEXT", "ord", "2").StringSlice()
		if err != nil || len(res) != 2 || !strings.HasPrefix(res[0], "ORD-20261128-") || res[0] >= res[1] {
			t.Fatalf("RESP%d ID.NEXT ord 2 = %v, %v", proto, res, err)
		}
		if _, err := c.Incr(t.Context(), "ord").Result(); err == nil || !strings.Contains(err.Error(), "ID.NEXT ord") {
			t.Fatalf("RESP%d INCR of a series: %v, want an error naming ID.NEXT", proto, err)
		}
		d, err := c.Do(t.Context(), "ID.DECODE", res[1], "TAG", "ord").Result()
		if err != nil || !strings.Contains(strings.ReplaceAll(fmtAny(d), " ", ""), "20261128") {
			t.Fatalf("RESP%d ID.DECODE %s TAG ord = %v, %v", proto, res[1], d, err)
		}
		if _, err := c.Do(t.Context(), "ID.DECODE", "ORD-2026-1", "TAG", "ord").Result(); err == nil || !strings.Contains(err.Error(), "not a number of this series") {
			t.Fatalf("RESP%d ID.DECODE of a bad number: %v", proto, err)
		}
		if _, err := c.Do(t.Context(), "ID.DECODE", res[1], "TAG").Result(); err == nil || !strings.Contains(err.Error(), "syntax") {
			t.Fatalf("RESP%d ID.DECODE number TAG without a tag: %v", proto, err)
		}
	}

	env := newRPCEnv(t, nil)
	for _, p := range rpcProtocols() {
		c := env.idClient(p)
		tag := "s-" + p.name
		cr, err := c.CreateTag(t.Context(), connect.NewRequest(&flakeidv1.CreateTagRequest{Tag: tag, Step: 10,
			Series: &flakeidv1.SeriesSettings{Period: "month", Template: "M{yyyyMM}/{seq:4}", Start: proto.Int64(100)}}))
		if err != nil || cr.Msg.GetCapacity() != "at most 9,900 numbers a month" || cr.Msg.GetSeries().GetStart() != 100 {
			t.Fatalf("%s CreateTag: %v, %v", p.name, cr, err)
		}
		if _, err := c.CreateTag(t.Context(), connect.NewRequest(&flakeidv1.CreateTagRequest{Tag: tag + "x",
			Series: &flakeidv1.SeriesSettings{Period: "month", Template: "{seq:4}"}})); connect.CodeOf(err) != connect.CodeInvalidArgument {
			t.Fatalf("%s CreateTag of a template without the month: %v", p.name, err)
		}
		nr, err := c.NextSegment(t.Context(), connect.NewRequest(&flakeidv1.NextSegmentRequest{Tag: tag, Count: 2}))
		if err != nil || len(nr.Msg.GetNumbers()) != 2 || len(nr.Msg.GetRanges()) != 0 || !strings.HasSuffix(nr.Msg.GetNumbers()[0], "/0100") {
			t.Fatalf("%s NextSegment of a series: %v, %v", p.name, nr, err)
		}
		nn, err := c.NextSegment(t.Context(), connect.NewRequest(&flakeidv1.NextSegmentRequest{Tag: tag, Format: "numeric"}))
		if err != nil || len(nn.Msg.GetNumbers()) != 1 || !strings.HasSuffix(nn.Msg.GetNumbers()[0], "0102") {
			t.Fatalf("%s NextSegment numeric: %v, %v", p.name, nn, err)
		}
		dr, err := c.DecodeNumber(t.Context(), connect.NewRequest(&flakeidv1.DecodeNumberRequest{Tag: tag, Number: nr.Msg.GetNumbers()[1]}))
		if err != nil || dr.Msg.GetCounter() != 101 || dr.Msg.GetPeriod() != "month" || dr.Msg.GetNumeric()%10000 != 101 {
			t.Fatalf("%s DecodeNumber: %v, %v", p.name, dr, err)
		}
		if _, err := c.NextSegment(t.Context(), connect.NewRequest(&flakeidv1.NextSegmentRequest{Tag: rpcTag, Format: "numeric"})); connect.CodeOf(err) != connect.CodeInvalidArgument {
			t.Fatalf("%s NextSegment numeric of a plain tag: %v", p.name, err)
		}
	}
}

func fmtAny(v any) string { return fmt.Sprint(v) }
