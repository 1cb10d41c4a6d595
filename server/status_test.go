package server

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flakeid/flakeid/segment"
)

// bigMaxID is a tag's max_id above 2^62: its bounds do not fit a float64
// (which holds every integer only up to 2^53), so a client that reads them
// as numbers gets other digits.
const bigMaxID int64 = 1<<62 + 1

// createBigTag creates a tag that hands out IDs from bigMaxID: over the API
// when POST /v1/segment/tags takes max_id as a string, else in the store.
func createBigTag(t *testing.T, f *fixture, name string) {
	t.Helper()
	body := fmt.Sprintf(`{"tag":%q,"step":1000,"max_id":"%d"}`, name, bigMaxID)
	r := f.do(t, "POST", "/v1/segment/tags", body, "Content-Type", "application/json")
	if r.status/100 == 2 {
		return
	}
	if err := f.mem.Create(context.Background(), segment.Tag{Name: name, Step: 1000, MaxID: bigMaxID}); err != nil {
		t.Fatalf("creating %s (the API answered %d %s): %v", name, r.status, r.body, err)
	}
}

// getStatus reads /v1/status into a map, as a client that knows nothing of
// Go would, and checks every key is snake_case.
func getStatus(t *testing.T, f *fixture) map[string]any {
	t.Helper()
	r := f.do(t, "GET", "/v1/status", "")
	if r.status != 200 || !strings.HasPrefix(r.header.Get("Content-Type"), "application/json") {
		t.Fatalf("status: %d %s", r.status, r.body)
	}
	var st map[string]any
	if err := json.Unmarshal([]byte(r.body), &st); err != nil {
		t.Fatalf("status: %v: %s", err, r.body)
	}
	snake := regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, e := range v {
				if !snake.MatchString(k) {
					t.Errorf("status key %s.%s is not snake_case", path, k)
				}
				if strings.HasSuffix(k, "_ns") {
					t.Errorf("status key %s.%s: durations are in _ms", path, k)
				}
				walk(path+"."+k, e)
			}
		case []any:
			for i, e := range v {
				walk(fmt.Sprintf("%s[%d]", path, i), e)
			}
		}
	}
	walk("status", st)
	return st
}

// wantKinds checks that obj has each key with a value of the JSON kind given:
// "string", "number", "bool", "object", "null" or "digits" (a string of
// decimal digits: an ID or a bound).
func wantKinds(t *testing.T, what string, obj map[string]any, kinds map[string]string) {
	t.Helper()
	for k, kind := range kinds {
		v, ok := obj[k]
		if !ok {
			t.Errorf("%s has no %q: %v", what, k, obj)
			continue
		}
		var good bool
		switch kind {
		case "string":
			_, good = v.(string)
		case "digits":
			s, isStr := v.(string)
			_, err := strconv.ParseInt(s, 10, 64)
			good = isStr && err == nil && !strings.HasPrefix(s, "+")
		case "number":
			_, good = v.(float64)
		case "bool":
			_, good = v.(bool)
		case "object":
			_, good = v.(map[string]any)
		case "null":
			good = v == nil
		}
		if !good {
			t.Errorf("%s.%s is %T %v, want %s", what, k, v, v, kind)
		}
	}
}

// TestStatusWire: /v1/status has snake_case keys everywhere, its IDs and
// bounds as strings that round-trip exactly (above 2^53 too), counts as
// numbers, durations in _ms, next null when nothing is prefetched, and the
// keys the verifier reads.
func TestStatusWire(t *testing.T) {
	f := newFixture(t, nil)
	const tag = "big-ids"
	createBigTag(t, f, tag)
	if r := f.do(t, "GET", "/v1/segment/"+tag+"/next?count=3", ""); r.status != 200 || !strings.Contains(r.body, strconv.FormatInt(bigMaxID+2, 10)) {
		t.Fatalf("next of %s: %d %s", tag, r.status, r.body)
	}

	st := getStatus(t, f)
	// The verifier (cmd/flakeid/internal/verify) and scripts/cluster.sh read these.
	wantKinds(t, "status", st, map[string]string{"ready": "bool", "lease_held": "bool", "datacenter_id": "number",
		"worker_id": "number", "leases": "number", "layout": "string", "reserved_until": "string", "snowflake": "object",
		"snowflake_totals": "object", "uptime_ms": "number", "lease_resets": "number", "skew_refusals": "number", "clock_skew_ms": "number"})
	if st["layout"] != f.node.Layout().String() || st["worker_id"] != float64(f.node.Status().WorkerID) {
		t.Errorf("status layout %v worker %v", st["layout"], st["worker_id"])
	}
	tot, _ := st["snowflake_totals"].(map[string]any)
	wantKinds(t, "snowflake_totals", tot, map[string]string{"issued": "number", "waits": "number", "borrowed_ticks": "number",
		"clock_backwards": "number", "clock_forwards": "number"})
	sf, _ := st["snowflake"].(map[string]any)
	wantKinds(t, "snowflake", sf, map[string]string{"issued": "number", "waits": "number", "borrowed_ticks": "number",
		"lead_ms": "number", "last_tick": "number", "high_water": "string", "clock_backwards": "number",
		"clock_forwards": "number", "clock_offset_ms": "number"})

	seg := func(st map[string]any) map[string]any {
		t.Helper()
		segs, _ := st["segments"].([]any)
		for _, s := range segs {
			if m, _ := s.(map[string]any); m["tag"] == tag {
				return m
			}
		}
		t.Fatalf("status has no tag %s: %v", tag, st["segments"])
		return nil
	}
	s := seg(st)
	// 3 of the first segment taken: nothing is prefetched yet.
	wantKinds(t, tag, s, map[string]string{"tag": "string", "current": "object", "next": "null", "used": "number",
		"size": "number", "step": "number", "min_step": "number", "fetches": "number", "failures": "number",
		"waits": "number", "issued": "number", "regressions": "number", "last_fetch_ms": "number",
		"mean_fetch_ms": "number", "high_mark": "digits"})
	cur, _ := s["current"].(map[string]any)
	wantKinds(t, tag+".current", cur, map[string]string{"start": "digits", "end": "digits"})
	var cst segment.TagStats
	for _, a := range f.segs.Stats() {
		if a.Tag == tag {
			cst = a
		}
	}
	want := map[string]string{"start": strconv.FormatInt(cst.Current.Start, 10), "end": strconv.FormatInt(cst.Current.End, 10)}
	if cst.Current.Start != bigMaxID || cur["start"] != want["start"] || cur["end"] != want["end"] ||
		s["high_mark"] != want["end"] || s["used"] != 3.0 || s["size"] != float64(cst.Current.Len()) {
		t.Errorf("%s: current %v, high mark %v, used %v of %v; the allocator has [%d, %d), 3 used",
			tag, cur, s["high_mark"], s["used"], s["size"], cst.Current.Start, cst.Current.End)
	}
	// A float64 reading would not give these digits back.
	if strconv.FormatFloat(float64(cst.Current.End), 'f', -1, 64) == want["end"] {
		t.Fatalf("test bound %s fits a float64", want["end"])
	}

	// Past the prefetch point the next segment shows, its bounds exact.
	if r := f.do(t, "GET", "/v1/segment/"+tag+"/next?count=600", ""); r.status != 200 {
		t.Fatalf("next: %d %s", r.status, r.body)
	}
	var stats segment.TagStats
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		if all := f.segs.Stats(); len(all) > 0 {
			for _, a := range all {
				if a.Tag == tag && a.Next.Len() > 0 {
					stats = a
				}
			}
		}
		if stats.Tag != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no prefetched segment")
		}
	}
	s = seg(getStatus(t, f))
	next, ok := s["next"].(map[string]any)
	if !ok {
		t.Fatalf("%s: next %v, want the prefetched segment", tag, s["next"])
	}
	wantKinds(t, tag+".next", next, map[string]string{"start": "digits", "end": "digits"})
	for k, v := range map[string]int64{"next.start": stats.Next.Start, "next.end": stats.Next.End, "high_mark": stats.HighMark} {
		var got any
		switch k {
		case "next.start":
			got = next["start"]
		case "next.end":
			got = next["end"]
		default:
			got = s["high_mark"]
		}
		if g, _ := got.(string); g != strconv.FormatInt(v, 10) {
			t.Errorf("%s %s is %v, the allocator has %d", tag, k, got, v)
		}
	}
	if stats.HighMark <= 1<<53 {
		t.Errorf("high mark %d is not above 2^53", stats.HighMark)
	}

	// The masking object follows the same rules.
	mf := maskedFixture(t, MaskConfig{Keys: []MaskKey{{ID: 4, Key: maskKeyNew}}, Tags: []string{"orders"}})
	if m, ok := getStatus(t, mf)["mask"].(map[string]any); !ok {
		t.Error("masked status has no mask object")
	} else {
		wantKinds(t, "mask", m, map[string]string{"form": "string", "bits": "number", "key_id": "number", "text_len": "number", "snowflake": "bool"})
	}
}
