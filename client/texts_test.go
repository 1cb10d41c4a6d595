package client

import (
	"context"
	"encoding/hex"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flakeid/flakeid/idmask"
	"github.com/flakeid/flakeid/segment"
	"github.com/flakeid/flakeid/server"
	"github.com/flakeid/flakeid/snowflake"
)

const textsKey = "8d2f0c7e61a94b35d0e2f4a6c8b1e3d5"

// A masking server (Snowflake IDs and tag "orders", base62): NextTexts and
// NextSegmentTexts return its masked texts, which the key unmasks to
// distinct, increasing IDs of that server; DecodeAs reads them back.
func TestIntegrationMaskedTexts(t *testing.T) {
	cl := newClusterWith(t, 1, func(c *server.Config) {
		c.Mask = server.MaskConfig{Keys: []server.MaskKey{{ID: 5, Key: textsKey}}, Form: "base62",
			Snowflake: true, Tags: []string{"orders"}}
	})
	key, _ := hex.DecodeString(textsKey)
	m, err := idmask.New(key, 5, idmask.Bits63)
	if err != nil {
		t.Fatal(err)
	}
	c := newClient(t, Config{}, cl.urls()...)
	ctx := t.Context()
	st := cl.nodes[0].Status()

	unmask := func(texts []string, n int) []int64 {
		t.Helper()
		if len(texts) != n {
			t.Fatalf("%d texts, want %d", len(texts), n)
		}
		var ids []int64
		for _, s := range texts {
			if len(s) != 13 || s[0] != '5' {
				t.Fatalf("masked text %q: want 13 base62 characters starting with key id 5", s)
			}
			id, err := m.UnmaskTextAs(s, idmask.Base62)
			if err != nil {
				t.Fatalf("unmask %q: %v", s, err)
			}
			if len(ids) > 0 && id <= ids[len(ids)-1] {
				t.Fatalf("texts %v unmask to non-increasing IDs", texts)
			}
			ids = append(ids, id)
		}
		return ids
	}

	texts, err := c.NextTexts(ctx, 50)
	if err != nil {
		t.Fatal(err)
	}
	ids := unmask(texts, 50)
	for _, id := range ids {
		if p, _ := cl.nodes[0].Decode(snowflake.ID(id)); p.Worker != st.WorkerID {
			t.Fatalf("a text unmasks to %d, of worker %d; the server holds %d", id, p.Worker, st.WorkerID)
		}
	}
	segTexts, err := c.NextSegmentTexts(ctx, "orders", 20)
	if err != nil {
		t.Fatal(err)
	}
	segIDs := unmask(segTexts, 20)
	if segIDs[19]-segIDs[0] != 19 {
		t.Fatalf("20 segment IDs of one fetch unmask to %v: want consecutive IDs", segIDs)
	}

	// The range-reading calls get the server's refusal, not wrong IDs.
	if _, err := c.NextID(ctx); !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "masked") {
		t.Fatalf("NextID from a masking server: %v; want its 400 about masked IDs", err)
	}

	// Decoding a masked text, said or detected. Most base62 texts are valid
	// plain base32 too: those read both ways, and ReadAuto gets the
	// server's refusal as ambiguous.
	ambiguous := 0
	for i, text := range texts {
		for _, as := range []Reading{ReadMasked, ReadAuto} {
			p, err := c.DecodeAs(ctx, text, as)
			if _, perr := snowflake.ParseAny(text); perr == nil && as == ReadAuto {
				if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "reads both as a masked ID (key id 5) and as a plain ID") {
					t.Fatalf("DecodeAs(%q, auto), also a plain ID: %+v, %v; want ambiguous", text, p, err)
				}
				ambiguous++
				continue
			}
			if err != nil {
				t.Fatalf("DecodeAs(%q, %q): %v", text, as, err)
			}
			if p.ID != ids[i] || p.Masked != text || p.KeyID != 5 || p.Worker != st.WorkerID {
				t.Fatalf("DecodeAs(%q, %q) = %+v; want ID %d, key 5, worker %d", text, as, p, ids[i], st.WorkerID)
			}
		}
	}
	if ambiguous == 0 || ambiguous == len(texts) {
		t.Fatalf("%d of %d base62 texts ambiguous; want some (about 70 %%), not all", ambiguous, len(texts))
	}
	plain := strconv.FormatInt(ids[0], 10)
	if p, err := c.DecodeAs(ctx, plain, ReadPlain); err != nil || p.ID != ids[0] || p.Masked != "" {
		t.Fatalf("DecodeAs(%s, plain) = %+v, %v", plain, p, err)
	}
	if _, err := c.DecodeAs(ctx, plain, ReadMasked); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("DecodeAs(%s, masked) = %v; want ErrInvalidArgument", plain, err)
	}
	if _, err := c.DecodeAs(ctx, texts[0], "reversed"); !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), `"reversed"`) {
		t.Fatalf("DecodeAs with reading \"reversed\": %v; want ErrInvalidArgument naming it", err)
	}
}

// Without masking, the texts are the decimal IDs.
func TestIntegrationPlainTexts(t *testing.T) {
	cl := newCluster(t, 1)
	c := newClient(t, Config{}, cl.urls()...)
	for _, get := range []func() ([]string, error){
		func() ([]string, error) { return c.NextTexts(t.Context(), 30) },
		func() ([]string, error) { return c.NextSegmentTexts(t.Context(), "orders", 30) },
	} {
		texts, err := get()
		if err != nil || len(texts) != 30 {
			t.Fatalf("%d texts, %v", len(texts), err)
		}
		prev := int64(-1)
		for _, s := range texts {
			id, err := strconv.ParseInt(s, 10, 64)
			if err != nil || id <= prev {
				t.Fatalf("texts %v: want increasing decimal IDs", texts)
			}
			prev = id
		}
	}
	if _, err := c.NextTexts(t.Context(), 0); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("NextTexts(0): %v", err)
	}
	if _, err := c.NextSegmentTexts(t.Context(), "", 1); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("NextSegmentTexts with no tag: %v", err)
	}
	if _, err := c.NextSegmentTexts(t.Context(), "nosuchtag", 1); !errors.Is(err, ErrNotFound) {
		t.Fatalf("NextSegmentTexts of an unknown tag: %v", err)
	}
}

func TestParseTexts(t *testing.T) {
	for _, tc := range []struct {
		body, tag, want string // want: the texts joined by ",", or "error: <part of it>"
		n               int
	}{
		{`{"ids":["1","2"]}`, "", "1,2", 2},
		{`{"ids":[1,2]}`, "", "1,2", 2},
		{`{"masked":true,"ids":["5aZ","5bQ"]}`, "", "5aZ,5bQ", 2},
		{`{"tag":"a","ids":["7"]}`, "a", "7", 1},
		{`{"tag":"b","ids":["7"]}`, "a", `error: IDs of tag "b"`, 1},
		{`{"ids":["1"]}`, "", "error: 1 IDs, asked for 2", 2},
		{`{"ids":["x1"]}`, "", `error: "x1", is not a decimal`, 1},
		{`{"ids":[""]}`, "", "error: empty", 1},
		{`{"masked":true,"ids":["51PWE0WJAQ6B1J$","5ABC*","5X~","5Y=","5ZU"]}`, "", "51PWE0WJAQ6B1J$,5ABC*,5X~,5Y=,5ZU", 5},
		{`{"masked":true,"ids":["5a-"]}`, "", "error: not base32 or base62", 1},
		{`{"ids":[`, "", "error: unexpected EOF", 1},
		{`{"tag":"a","series":true,"ids":["ORD-20261128-000001"]}`, "a", "error: take them with NextNumbers", 1},
	} {
		got, err := parseTexts(strings.NewReader(tc.body), tc.n, tc.tag, false)
		if w, ok := strings.CutPrefix(tc.want, "error: "); ok {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("parseTexts(%s) = %v, %v; want an error with %q", tc.body, got, err, w)
			}
			continue
		}
		if err != nil || strings.Join(got, ",") != tc.want {
			t.Errorf("parseTexts(%s) = %v, %v; want %s", tc.body, got, err, tc.want)
		}
	}
}

// FuzzParseTexts: any body gives an error or exactly n non-empty texts,
// never a panic.
func FuzzParseTexts(f *testing.F) {
	f.Add(`{"ids":["1","2"]}`, 2)
	f.Add(`{"masked":true,"tag":"a","ids":["5aZ"]}`, 1)
	f.Add(`{"ids":[1e3]}`, 1)
	f.Fuzz(func(t *testing.T, body string, n int) {
		got, err := parseTexts(strings.NewReader(body), n, "a", n%2 == 0)
		if err != nil {
			return
		}
		if len(got) != n {
			t.Fatalf("%d texts, asked for %d", len(got), n)
		}
		for _, s := range got {
			if s == "" {
				t.Fatal("an empty text")
			}
		}
	})
}

// TestTextBuffers: with buffering on, NextText and NextSegmentText come from
// buffers of texts refilled a batch at a time; NextTexts/NextSegmentTexts
// take from them up to half a batch and ask the server beyond; the text
// buffers are apart from the ID buffers, and an unknown tag's text buffer is
// forgotten. The fake answers decimal texts, as a server that does not mask.
func TestTextBuffers(t *testing.T) {
	f := newFake(t, newBackend())
	f.plainIDs.Store(true)
	c := newClient(t, Config{Buffer: BufferConfig{Snowflake: 100, Segment: 50}}, f.URL())
	ctx := t.Context()
	prev := int64(-1)
	next := func(s string) {
		t.Helper()
		id, err := strconv.ParseInt(s, 10, 64)
		if err != nil || id <= prev {
			t.Fatalf("text %q after %d: want a larger decimal ID", s, prev)
		}
		prev = id
	}
	for range 1000 {
		s, err := c.NextText(ctx)
		if err != nil {
			t.Fatal(err)
		}
		next(s)
	}
	if n := f.snow.Load(); n < 10 || n > 12 {
		t.Fatalf("%d requests for 1000 buffered texts in batches of 100; want 10–12", n)
	}
	before := f.snow.Load()
	few, err := c.NextTexts(ctx, 50) // half a batch: from the buffer
	if err != nil || len(few) != 50 {
		t.Fatalf("NextTexts(50): %d, %v", len(few), err)
	}
	for _, s := range few {
		next(s)
	}
	if n := f.snow.Load() - before; n > 1 { // at most the background refill
		t.Fatalf("NextTexts(50) from a buffer of 100 made %d requests", n)
	}
	waitFor(t, func() bool { return refillDone(c.texts) })
	before = f.snow.Load()
	many, err := c.NextTexts(ctx, 51) // more than half: a request of its own
	if err != nil || len(many) != 51 || f.snow.Load()-before != 1 {
		t.Fatalf("NextTexts(51): %d texts, %v, %d requests; want 51 texts in one request", len(many), err, f.snow.Load()-before)
	}
	// The ID buffer is apart from the text buffer: NextID makes its own
	// request and its IDs are none of the texts'.
	id, err := c.NextID(ctx)
	if err != nil || id <= prev {
		t.Fatalf("NextID = %d, %v; want an ID past the texts' %d", id, err, prev)
	}

	segPrev := int64(0)
	for range 500 {
		s, err := c.NextSegmentText(ctx, "orders")
		if err != nil {
			t.Fatal(err)
		}
		if v, err := strconv.ParseInt(s, 10, 64); err != nil || v != segPrev+1 && segPrev != 0 {
			t.Fatalf("segment text %q after %d: want the next ID", s, segPrev)
		} else {
			segPrev = v
		}
	}
	if n := f.seg.Load(); n < 10 || n > 12 {
		t.Fatalf("%d segment requests for 500 buffered texts in batches of 50; want 10–12", n)
	}
	segs, err := c.NextSegmentTexts(ctx, "orders", 3)
	if err != nil || len(segs) != 3 || segs[0] != strconv.FormatInt(segPrev+1, 10) {
		t.Fatalf("NextSegmentTexts(3) = %v, %v; want from %d", segs, err, segPrev+1)
	}
	for range 3 {
		if _, err := c.NextSegmentText(ctx, "nope"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("unknown tag: %v", err)
		}
	}
	waitFor(t, func() bool { _, ok := c.tagTxt.Load("nope"); return !ok })
	if _, err := c.NextSegmentText(ctx, ""); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("NextSegmentText with no tag: %v", err)
	}
}

// TestTextBuffersConcurrent: goroutines sharing the text buffers never get
// one text twice, and each sees increasing IDs.
func TestTextBuffersConcurrent(t *testing.T) {
	f := newFake(t, newBackend())
	f.plainIDs.Store(true)
	c := newClient(t, Config{Buffer: BufferConfig{Snowflake: 500, Segment: 200}}, f.URL())
	const G, N = 16, 3000
	got := make([][]string, G)
	errs := make(chan error, G)
	var wg sync.WaitGroup
	for g := range G {
		wg.Go(func() {
			for i := range N {
				var texts []string
				var err error
				switch {
				case i%100 == 99:
					texts, err = c.NextTexts(t.Context(), 7)
				case i%5 == 0:
					var s string
					s, err = c.NextSegmentText(t.Context(), "orders")
					texts = []string{"s" + s}
				default:
					var s string
					s, err = c.NextText(t.Context())
					texts = []string{s}
				}
				if err != nil {
					errs <- err
					return
				}
				got[g] = append(got[g], texts...)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for g, texts := range got {
		last := map[bool]int64{}
		for _, s := range texts {
			if seen[s] {
				t.Fatalf("%s handed out twice", s)
			}
			seen[s] = true
			seg := strings.HasPrefix(s, "s")
			v, err := strconv.ParseInt(strings.TrimPrefix(s, "s"), 10, 64)
			if err != nil || v <= last[seg] {
				t.Fatalf("goroutine %d: %q after %d", g, s, last[seg])
			}
			last[seg] = v
		}
	}
	t.Logf("%d unique texts; %d snowflake and %d segment requests", len(seen), f.snow.Load(), f.seg.Load())
}

// refillDone reports whether b has no refill in flight.
func refillDone(b *buffer) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.refill == nil
}

// countingTransport counts the requests it sends.
type countingTransport struct{ n atomic.Int64 }

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return http.DefaultTransport.RoundTrip(r)
}

// A buffered client of a masking server: NextText and NextSegmentText hand
// out its masked texts from buffers, a batch per request, and every text
// unmasks to a distinct ID (increasing, from one goroutine).
func TestIntegrationMaskedTextBuffers(t *testing.T) {
	cl := newClusterWith(t, 1, func(c *server.Config) {
		c.Mask = server.MaskConfig{Keys: []server.MaskKey{{ID: 5, Key: textsKey}}, Form: "base32",
			Snowflake: true, Tags: []string{"orders"}}
	})
	key, _ := hex.DecodeString(textsKey)
	m, err := idmask.New(key, 5, idmask.Bits63)
	if err != nil {
		t.Fatal(err)
	}
	rt := &countingTransport{}
	hc := &http.Client{Transport: rt}
	t.Cleanup(hc.CloseIdleConnections)
	c := newClient(t, Config{HTTPClient: hc, Buffer: BufferConfig{Snowflake: 64, Segment: 32}}, cl.urls()...)
	ctx := t.Context()
	const n = 640
	var symbol []string // texts whose check character is a symbol
	for _, kind := range []struct {
		name string
		next func() (string, error)
	}{
		{"snowflake", func() (string, error) { return c.NextText(ctx) }},
		{"segment", func() (string, error) { return c.NextSegmentText(ctx, "orders") }},
	} {
		before := rt.n.Load()
		prev := int64(-1)
		for range n {
			s, err := kind.next()
			if strings.ContainsAny(s, "*~$=") {
				symbol = append(symbol, s)
			}
			if err != nil {
				t.Fatalf("%s: %v", kind.name, err)
			}
			id, err := m.UnmaskTextAs(s, idmask.Base32)
			if err != nil {
				t.Fatalf("%s: %q does not unmask: %v", kind.name, s, err)
			}
			if id <= prev {
				t.Fatalf("%s: %q unmasks to %d, after %d", kind.name, s, id, prev)
			}
			prev = id
		}
		if reqs := rt.n.Load() - before; reqs < 2 || reqs > n/20 {
			t.Fatalf("%s: %d requests for %d buffered texts; want a batch per request", kind.name, reqs, n)
		}
	}
	texts, err := c.NextTexts(ctx, 20)
	if err != nil || len(texts) != 20 {
		t.Fatalf("NextTexts(20) from the buffer: %d, %v", len(texts), err)
	}
	// One text in nine ends in a check symbol (*~$=); such a text decodes
	// too (it goes into the request's path).
	if len(symbol) == 0 {
		t.Fatalf("none of %d base32 texts ends in a check symbol", 2*n)
	}
	for _, s := range symbol[:min(len(symbol), 8)] {
		want, _ := m.UnmaskTextAs(s, idmask.Base32)
		if p, err := c.Decode(ctx, s); err != nil || p.ID != want || p.Masked != s {
			t.Fatalf("Decode(%q) = %+v, %v; want ID %d, masked", s, p, err, want)
		}
	}
	for _, s := range texts {
		if _, err := m.UnmaskTextAs(s, idmask.Base32); err != nil {
			t.Fatalf("NextTexts: %q does not unmask: %v", s, err)
		}
	}
}

// BenchmarkNextTextBuffered measures NextText served from the text buffer,
// against the local fake answering batches of 100,000 decimal texts.
func BenchmarkNextTextBuffered(b *testing.B) {
	f := newFake(b, newBackend())
	f.plainIDs.Store(true)
	c := newClient(b, Config{Buffer: BufferConfig{Snowflake: 100_000}}, f.URL())
	ctx := context.Background()
	if _, err := c.NextText(ctx); err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	for b.Loop() {
		if _, err := c.NextText(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "ids/s")
}

// TestIntegrationSeriesNumbers: NextNumber and NextNumbers take a series'
// numbers from the servers (every call a request, with or without segment
// buffering), distinct and in each server's order; the calls for plain
// texts refuse a series' answer, and NextNumbers a plain tag's, naming the
// call to use, after one request.
func TestIntegrationSeriesNumbers(t *testing.T) {
	cl := newCluster(t, 2)
	a, err := segment.New(segment.Config{Store: cl.store, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	ser := segment.Series{Period: segment.Year, Template: "INV-{yyyy}-{seq:7}", Start: 1}
	if err := a.Create(t.Context(), segment.Tag{Name: "inv", Step: 10, Series: &ser}); err != nil {
		t.Fatal(err)
	}
	year := strconv.Itoa(time.Now().UTC().Year()) // or the year before, were the test run across New Year
	for _, buffered := range []bool{false, true} {
		cfg := Config{}
		if buffered {
			cfg.Buffer.Segment = 100
		}
		c := newClient(t, cfg, cl.urls()...)
		seen := map[string]bool{}
		for range 20 {
			nums, err := c.NextNumbers(t.Context(), "inv", 3)
			if err != nil || len(nums) != 3 {
				t.Fatalf("buffered=%v: NextNumbers = %v, %v", buffered, nums, err)
			}
			one, err := c.NextNumber(t.Context(), "inv")
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range append(nums, one) {
				if seen[n] || !strings.HasPrefix(n, "INV-") || len(n) != len("INV-2026-0000001") || !strings.Contains(n, year) && !strings.Contains(n, strconv.Itoa(time.Now().UTC().Year()-1)) {
					t.Fatalf("buffered=%v: number %q (seen before, or not INV-<year>-NNNNNNN)", buffered, n)
				}
				seen[n] = true
			}
		}
		if _, err := c.NextSegmentTexts(t.Context(), "inv", 2); !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "NextNumbers") {
			t.Fatalf("buffered=%v: NextSegmentTexts of a series: %v, want ErrInvalidArgument naming NextNumbers", buffered, err)
		}
		if _, err := c.NextNumbers(t.Context(), "orders", 2); !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "not a series") {
			t.Fatalf("buffered=%v: NextNumbers of a plain tag: %v, want ErrInvalidArgument", buffered, err)
		}
	}
}
