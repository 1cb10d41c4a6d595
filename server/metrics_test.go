package server

import (
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flakeid/flakeid/node"
	"github.com/flakeid/flakeid/segment"
	"github.com/flakeid/flakeid/snowflake"
)

// TestNodeCollectorOneStatusPerScrape: a scrape reads the node's status
// once, and the counters come from its totals since start, not from the
// current generator's stats.
func TestNodeCollectorOneStatusPerScrape(t *testing.T) {
	calls := 0
	st := node.Status{Held: true, WorkerID: 7, DatacenterID: 1, Leases: 3,
		Stats: snowflake.Stats{Issued: 5, Waits: 1, BorrowedTicks: 1, ClockBackwards: 0, ClockForwards: 1, Lead: 2 * time.Millisecond},
		Total: snowflake.Stats{Issued: 500, Waits: 11, BorrowedTicks: 12, ClockBackwards: 13, ClockForwards: 14}}
	reg := prometheus.NewRegistry()
	reg.MustRegister(newNodeCollector(func() node.Status { calls++; return st }))
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if calls != 1 {
		t.Fatalf("one scrape read the status %d times, want 1", calls)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		m := mf.GetMetric()[0]
		if c := m.GetCounter(); c != nil {
			got[mf.GetName()] = c.GetValue()
		} else {
			got[mf.GetName()] = m.GetGauge().GetValue()
		}
	}
	for name, want := range map[string]float64{
		"flakeid_snowflake_generated_total":  500,
		"flakeid_sequence_waits_total":       11,
		"flakeid_borrowed_ticks_total":       12,
		"flakeid_clock_backward_jumps_total": 13,
		"flakeid_clock_forward_jumps_total":  14,
		"flakeid_borrowed_lead_seconds":      0.002,
		"flakeid_lease_held":                 1,
		"flakeid_lease_on_reservation":       0,
		"flakeid_worker_id":                  7,
		"flakeid_leases_total":               3,
	} {
		if got[name] != want {
			t.Errorf("%s = %v, want %v", name, got[name], want)
		}
	}
	if len(got) != 16 {
		t.Errorf("%d node metrics, want 16: %v", len(got), got)
	}
}

// scrape returns the server's /metrics text.
func (e *connEnv) scrape(t *testing.T) string {
	t.Helper()
	resp, err := http.Get("http://" + e.addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("/metrics: %d %v", resp.StatusCode, err)
	}
	return string(b)
}

// sample returns the value of the series line (name{labels}) in text, and
// whether there is one.
func sample(t *testing.T, text, series string) (float64, bool) {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindStringSubmatch(text)
	if m == nil {
		return 0, false
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatal(err)
	}
	return v, true
}

// TestMetricsTagCap: with MetricsMaxTags 2 and tags created on first use,
// the first two tags served get their own tag label, and the IDs and
// buffers of the rest are summed under tag="(other)"; the counters of the
// Snowflake generator are served too.
func TestMetricsTagCap(t *testing.T) {
	t.Parallel()
	e := newConnEnv(t, func(c *Config) { c.MetricsMaxTags = 2 }, func(c *segment.Config) {
		c.AutoCreate, c.DefaultStep = true, 100
	})
	issue := func(tag string, n int) {
		t.Helper()
		resp, err := http.Get(fmt.Sprintf("http://%s/v1/segment/%s/next?count=%d", e.addr, tag, n))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", tag, resp.StatusCode, b)
		}
	}
	issue("orders", 3) // created by the env (step 1000)
	issue("auto-1", 5)
	issue("auto-2", 7)
	issue("auto-3", 11)
	issue("auto-2", 2)
	text := e.scrape(t)
	for series, want := range map[string]float64{
		`flakeid_ids_issued_total{kind="segment",tag="orders"}`:  3,
		`flakeid_ids_issued_total{kind="segment",tag="auto-1"}`:  5,
		`flakeid_ids_issued_total{kind="segment",tag="(other)"}`: 20,
		`flakeid_segment_step{tag="orders"}`:                     1000,
		`flakeid_segment_step{tag="auto-1"}`:                     100,
		// Each auto tag fetched one segment of 100 (and maybe its next).
		`flakeid_segment_fetches_total{tag="(other)"}`: -1,
		`flakeid_segment_buffered_ids{tag="(other)"}`:  -1,
	} {
		got, ok := sample(t, text, series)
		switch {
		case !ok:
			t.Errorf("no %s", series)
		case want >= 0 && got != want:
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}
	for _, absent := range []string{`tag="auto-2"`, `tag="auto-3"`, `flakeid_segment_step{tag="(other)"}`, `flakeid_segment_fetch_seconds{tag="(other)"}`} {
		if strings.Contains(text, absent) {
			t.Errorf("the metrics have %s", absent)
		}
	}
	// The buffered IDs of the capped tags are their sum (read when no
	// background prefetch lands between the allocator's stats and the
	// scrape).
	capped := func() float64 {
		var buffered float64
		for _, st := range e.segs.Stats() {
			if st.Tag == "auto-2" || st.Tag == "auto-3" {
				buffered += float64(st.Size-st.Used) + float64(st.Next.Len())
			}
		}
		return buffered
	}
	var got, buffered float64
	for range 100 {
		before := capped()
		got, _ = sample(t, e.scrape(t), `flakeid_segment_buffered_ids{tag="(other)"}`)
		if buffered = capped(); before == buffered {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got != buffered {
		t.Errorf(`flakeid_segment_buffered_ids{tag="(other)"} = %v, want %v (auto-2 and auto-3)`, got, buffered)
	}
	if got, _ := sample(t, text, `flakeid_segment_fetches_total{tag="(other)"}`); got < 2 {
		t.Errorf(`flakeid_segment_fetches_total{tag="(other)"} = %v, want at least 2`, got)
	}
	if got, ok := sample(t, text, "flakeid_http_connections"); !ok || got < 1 {
		t.Errorf("flakeid_http_connections = %v, %v; want at least the scrape's", got, ok)
	}
	if _, ok := sample(t, text, "flakeid_http_connections_rejected_total"); !ok {
		t.Error("no flakeid_http_connections_rejected_total")
	}
}

// TestTagLabelsConcurrent: tags admitted by many goroutines at once get
// exactly max labels of their own; every other lookup gets "(other)".
func TestTagLabelsConcurrent(t *testing.T) {
	vec := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "x_total", Help: "x"}, []string{"kind", "tag"})
	tl := newTagLabels(vec, 10)
	var wg sync.WaitGroup
	var mu sync.Mutex
	own := map[string]bool{}
	for g := range 8 {
		wg.Go(func() {
			for i := range 50 {
				tag := fmt.Sprintf("t%d", (i*7+g)%40)
				c, ok := tl.lookup(tag)
				c.Inc()
				if ok {
					mu.Lock()
					own[tag] = true
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if len(own) != 10 {
		t.Fatalf("%d tags with labels of their own, want 10", len(own))
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(vec)
	mfs, _ := reg.Gather()
	total, series := 0.0, 0
	for _, m := range mfs[0].GetMetric() {
		total += m.GetCounter().GetValue()
		series++
	}
	if total != 8*50 || series != 11 {
		t.Fatalf("%v counted in %d series, want %d in 11 (10 tags and (other))", total, series, 8*50)
	}
}

// TestSegmentIssuedAllocations: counting a segment tag's IDs allocates
// nothing, with a label of its own or under "(other)".
func TestSegmentIssuedAllocations(t *testing.T) {
	vec := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "x_total", Help: "x"}, []string{"kind", "tag"})
	m := &metrics{tags: newTagLabels(vec, 1)}
	path := "/v1/segment/orders/next"
	own, other := path[12:18], strings.Clone("capped")
	m.segmentIssued(own).Add(1)
	for _, tag := range []string{own, other} {
		if got := testing.AllocsPerRun(1000, func() { m.segmentIssued(tag).Add(1) }); got != 0 {
			t.Errorf("segmentIssued(%q): %v allocations, want 0", tag, got)
		}
	}
	if _, ok := m.tags.lookup("orders"); !ok {
		t.Fatal("orders, the first tag, has no label of its own")
	}
}
