package server

import (
	"strings"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/flakeid/flakeid/node"
)

// otherTag is the tag label under which the segment tags beyond
// Config.MetricsMaxTags are counted. No tag can have this name.
const otherTag = "(other)"

// metrics are the server's Prometheus metrics (all prefixed flakeid_).
type metrics struct {
	issued *prometheus.CounterVec
	// issuedSnowflake is issued's {kind="snowflake",tag=""} series.
	issuedSnowflake prometheus.Counter
	requests        *prometheus.CounterVec
	latency         *prometheus.HistogramVec
	// conns counts the open connections of Serve's listeners;
	// connsRejected those turned away beyond Config.MaxConns.
	conns         prometheus.Gauge
	connsRejected prometheus.Counter
	tags          *tagLabels
	// The RESP listener's: connections open, turned away beyond
	// RESPConfig.MaxConns, commands by name and result, protocol errors.
	respConns          prometheus.Gauge
	respRejected       prometheus.Counter
	respCommands       *prometheus.CounterVec
	respProtocolErrors prometheus.Counter
}

// newMetrics registers the metrics of s on its registry: request counts and
// latency, IDs issued per kind and tag, connections, and the node's
// (lease, worker id, clock, totals) and the segment allocator's (buffers,
// fetches) read at scrape time.
func newMetrics(s *Server) (*metrics, error) {
	m := &metrics{
		issued: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "flakeid_ids_issued_total",
			Help: `IDs handed out, by kind (snowflake, segment) and segment tag (tags beyond the first metrics_max_tags are counted as tag="(other)").`},
			[]string{"kind", "tag"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "flakeid_http_requests_total",
			Help: "HTTP API requests, by route and status code."}, []string{"route", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "flakeid_http_request_duration_seconds",
			Help:    "HTTP API request latency, by route.",
			Buckets: []float64{.00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5}},
			[]string{"route"}),
		conns: prometheus.NewGauge(prometheus.GaugeOpts{Name: "flakeid_http_connections",
			Help: "Connections open now (idle keep-alive ones included)."}),
		connsRejected: prometheus.NewCounter(prometheus.CounterOpts{Name: "flakeid_http_connections_rejected_total",
			Help: "Connections turned away because max_conns were open."}),
		respConns: prometheus.NewGauge(prometheus.GaugeOpts{Name: "flakeid_resp_connections",
			Help: "Redis-protocol connections open now."}),
		respRejected: prometheus.NewCounter(prometheus.CounterOpts{Name: "flakeid_resp_connections_rejected_total",
			Help: "Redis-protocol connections turned away because resp max_conns were open."}),
		respCommands: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "flakeid_resp_commands_total",
			Help: `Redis-protocol commands, by command (lower case; "other" for unknown ones) and result (ok, error).`},
			[]string{"command", "result"}),
		respProtocolErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "flakeid_resp_protocol_errors_total",
			Help: "Redis-protocol connections closed for a framing error or a request over the limits."}),
	}
	m.issuedSnowflake = m.issued.WithLabelValues("snowflake", "")
	m.tags = newTagLabels(m.issued, max(s.cfg.MetricsMaxTags, 0)) // negative: none
	cs := []prometheus.Collector{
		m.issued, m.requests, m.latency, m.conns, m.connsRejected,
		m.respConns, m.respRejected, m.respCommands, m.respProtocolErrors,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		newNodeCollector(s.node.Status),
	}
	if s.segs != nil {
		cs = append(cs, &segmentCollector{s: s})
	}
	for _, c := range cs {
		if err := s.reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// segmentIssued is the counter of segment IDs issued for tag: the tag's own
// series, or the "(other)" one once MetricsMaxTags tags have their own. For
// a tag that has its own it neither locks nor allocates.
func (m *metrics) segmentIssued(tag string) prometheus.Counter {
	c, _ := m.tags.lookup(tag)
	return c
}

// tagLabels caps the distinct values of the tag label: the first max tags
// seen (by an issue or a scrape) get their own, the rest share otherTag.
type tagLabels struct {
	issued   *prometheus.CounterVec
	max      int
	admitted sync.Map    // tag → prometheus.Counter (issued's series of the tag)
	full     atomic.Bool // max tags were admitted; other is set
	mu       sync.Mutex  // admitting
	n        int         // tags admitted, under mu
	other    prometheus.Counter
}

func newTagLabels(issued *prometheus.CounterVec, max int) *tagLabels {
	t := &tagLabels{issued: issued, max: max}
	if max == 0 {
		t.other = issued.WithLabelValues("segment", otherTag)
		t.full.Store(true)
	}
	return t
}

// lookup returns tag's counter of issued IDs and whether the tag has a label
// of its own (admitting it while there is room), or the "(other)" counter
// and false.
func (t *tagLabels) lookup(tag string) (prometheus.Counter, bool) {
	if c, ok := t.admitted.Load(tag); ok {
		return c.(prometheus.Counter), true
	}
	if t.full.Load() {
		return t.other, false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if c, ok := t.admitted.Load(tag); ok {
		return c.(prometheus.Counter), true
	}
	if t.n >= t.max {
		return t.other, false
	}
	tag = strings.Clone(tag) // not a piece of a request's URL, kept alive
	c := t.issued.WithLabelValues("segment", tag)
	t.admitted.Store(tag, c)
	if t.n++; t.n == t.max {
		t.other = t.issued.WithLabelValues("segment", otherTag)
		t.full.Store(true)
	}
	return c, true
}

// nodeMetric is one metric of nodeCollector.
type nodeMetric struct {
	desc  *prometheus.Desc
	typ   prometheus.ValueType
	value func(st *node.Status) float64
}

// nodeCollector reports the node's lease, clock and Snowflake counters
// from one node.Status per scrape. The counters are the node's totals since
// start (node.Status.Total), so they never decrease when the lease, and
// with it the generator, changes.
type nodeCollector struct {
	status  func() node.Status
	metrics []nodeMetric
}

var _ prometheus.Collector = (*nodeCollector)(nil)

// newNodeCollector reads the node's state with status (node.Node.Status).
func newNodeCollector(status func() node.Status) *nodeCollector {
	b2f := func(b bool) float64 {
		if b {
			return 1
		}
		return 0
	}
	gauge := func(name, help string, f func(*node.Status) float64) nodeMetric {
		return nodeMetric{prometheus.NewDesc(name, help, nil, nil), prometheus.GaugeValue, f}
	}
	counter := func(name, help string, f func(*node.Status) float64) nodeMetric {
		return nodeMetric{prometheus.NewDesc(name, help, nil, nil), prometheus.CounterValue, f}
	}
	return &nodeCollector{status: status, metrics: []nodeMetric{
		gauge("flakeid_lease_held", "1 while the node holds its worker-id lease.", func(st *node.Status) float64 { return b2f(st.Held) }),
		gauge("flakeid_lease_on_reservation", "1 while the lease is lost and the node still issues on the reservation it stored, acquiring another.",
			func(st *node.Status) float64 { return b2f(st.OnReservation) }),
		gauge("flakeid_worker_id", "The leased worker id.", func(st *node.Status) float64 { return float64(st.WorkerID) }),
		gauge("flakeid_datacenter_id", "The datacenter id.", func(st *node.Status) float64 { return float64(st.DatacenterID) }),
		counter("flakeid_leases_total", "Worker-id leases acquired since start.", func(st *node.Status) float64 { return float64(st.Leases) }),
		counter("flakeid_coordinator_resets_total", "Leases ended because the coordinator lost or rolled back its state.", func(st *node.Status) float64 { return float64(st.Resets) }),
		counter("flakeid_clock_skew_refusals_total", "Leases refused or ended because this node's clock differs from the coordinator's by more than the bound.", func(st *node.Status) float64 { return float64(st.SkewRefusals) }),
		gauge("flakeid_coordinator_clock_skew_seconds", "This node's clock minus the coordinator's (or its etcd peers'), at the last renewal.", func(st *node.Status) float64 { return st.ClockSkew.Seconds() }),
		gauge("flakeid_lease_reserved_seconds", "How far the stored reservation (high-water mark) is ahead of the generator's clock; near 0 or negative means renewals are failing.", func(st *node.Status) float64 {
			if st.Until.IsZero() {
				return 0
			}
			return st.Until.Sub(st.Now).Seconds()
		}),
		counter("flakeid_snowflake_generated_total", "Snowflake IDs generated since start (by every generator of the node).", func(st *node.Status) float64 { return float64(st.Total.Issued) }),
		counter("flakeid_clock_backward_jumps_total", "Wall-clock steps backwards seen since start (IDs do not follow them).", func(st *node.Status) float64 { return float64(st.Total.ClockBackwards) }),
		counter("flakeid_clock_forward_jumps_total", "Wall-clock steps forwards followed since start.", func(st *node.Status) float64 { return float64(st.Total.ClockForwards) }),
		gauge("flakeid_clock_offset_seconds", "Wall clock minus the generator's clock at the last check.", func(st *node.Status) float64 { return st.Stats.ClockOffset.Seconds() }),
		counter("flakeid_borrowed_ticks_total", "Ticks the Borrow policy took ahead of the clock since start.", func(st *node.Status) float64 { return float64(st.Total.BorrowedTicks) }),
		gauge("flakeid_borrowed_lead_seconds", "How far the newest tick is ahead of the clock.", func(st *node.Status) float64 { return st.Stats.Lead.Seconds() }),
		counter("flakeid_sequence_waits_total", "Times a request waited for the next tick, since start.", func(st *node.Status) float64 { return float64(st.Total.Waits) }),
	}}
}

// Describe implements prometheus.Collector.
func (c *nodeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, m := range c.metrics {
		ch <- m.desc
	}
}

// Collect implements prometheus.Collector: one node.Status for every
// metric, so that they agree with each other.
func (c *nodeCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.status()
	for _, m := range c.metrics {
		ch <- prometheus.MustNewConstMetric(m.desc, m.typ, m.value(&st))
	}
}

// segmentCollector reports each loaded tag's buffers at scrape time; the
// tags without a label of their own (see tagLabels) are summed under
// tag="(other)" where a sum means something.
type segmentCollector struct{ s *Server }

var _ prometheus.Collector = (*segmentCollector)(nil)

func segDesc(name, help string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, []string{"tag"}, nil)
}

func (c *segmentCollector) descs() []*prometheus.Desc {
	return []*prometheus.Desc{
		segDesc("flakeid_segment_buffered_ids", "IDs left in a tag's current and next segments."),
		segDesc("flakeid_segment_step", `A tag's dynamic step (not reported for tag="(other)").`),
		segDesc("flakeid_segment_fetches_total", "Segments fetched from the store."),
		segDesc("flakeid_segment_fetch_failures_total", "Failed fetches."),
		segDesc("flakeid_segment_waits_total", "Requests that waited for a fetch."),
		segDesc("flakeid_segment_fetch_seconds", `Latency of the last fetch (not reported for tag="(other)").`),
		segDesc("flakeid_segment_refused", `1 while the tag is refused because its store went backwards (max_id below what this node fetched); POST /v1/segment/tags/{tag}/resume after fixing the store. For tag="(other)", how many of those tags are refused.`),
		segDesc("flakeid_segment_regressions_total", "Times the tag's store was seen going backwards."),
		prometheus.NewDesc("flakeid_segment_tags_refused", "Segment tags refused because their store went backwards.", nil, nil),
		prometheus.NewDesc("flakeid_series_periods_full", "Series whose current period has handed out every number its counter can show; they refuse until the next period starts.", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *segmentCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs() {
		ch <- d
	}
}

// Collect implements prometheus.Collector. A series' periods (rows
// <tag>::<label>) are reported as their series, summed: one label per
// series, not one per period.
func (c *segmentCollector) Collect(ch chan<- prometheus.Metric) {
	d := c.descs()
	refused := 0
	type tagSums struct {
		buffered, fetches, failures, waits, refused, regress float64
		step                                                 int64
		lastFetch                                            float64
	}
	var other struct {
		tags int
		tagSums
	}
	var names []string
	sums := map[string]*tagSums{}
	for _, st := range c.s.segs.Stats() {
		name, _, _ := strings.Cut(st.Tag, "::")
		x, ok := sums[name]
		if !ok {
			x = &tagSums{}
			sums[name] = x
			names = append(names, name)
		}
		x.buffered += float64(st.Size-st.Used) + float64(st.Next.Len())
		x.fetches += float64(st.Fetches)
		x.failures += float64(st.Failures)
		x.waits += float64(st.Waits)
		x.regress += float64(st.Regressions)
		x.step = max(x.step, st.Step)
		x.lastFetch = max(x.lastFetch, st.LastFetch.Seconds())
		if st.Refused != "" {
			x.refused++
			refused++
		}
	}
	for _, name := range names {
		x := sums[name]
		r := min(x.refused, 1)
		if _, own := c.s.metrics.tags.lookup(name); !own {
			other.tags++
			other.buffered += x.buffered
			other.fetches += x.fetches
			other.failures += x.failures
			other.waits += x.waits
			other.refused += r
			other.regress += x.regress
			continue
		}
		ch <- prometheus.MustNewConstMetric(d[0], prometheus.GaugeValue, x.buffered, name)
		ch <- prometheus.MustNewConstMetric(d[1], prometheus.GaugeValue, float64(x.step), name)
		ch <- prometheus.MustNewConstMetric(d[2], prometheus.CounterValue, x.fetches, name)
		ch <- prometheus.MustNewConstMetric(d[3], prometheus.CounterValue, x.failures, name)
		ch <- prometheus.MustNewConstMetric(d[4], prometheus.CounterValue, x.waits, name)
		ch <- prometheus.MustNewConstMetric(d[5], prometheus.GaugeValue, x.lastFetch, name)
		ch <- prometheus.MustNewConstMetric(d[6], prometheus.GaugeValue, r, name)
		ch <- prometheus.MustNewConstMetric(d[7], prometheus.CounterValue, x.regress, name)
	}
	if other.tags > 0 {
		ch <- prometheus.MustNewConstMetric(d[0], prometheus.GaugeValue, other.buffered, otherTag)
		ch <- prometheus.MustNewConstMetric(d[2], prometheus.CounterValue, other.fetches, otherTag)
		ch <- prometheus.MustNewConstMetric(d[3], prometheus.CounterValue, other.failures, otherTag)
		ch <- prometheus.MustNewConstMetric(d[4], prometheus.CounterValue, other.waits, otherTag)
		ch <- prometheus.MustNewConstMetric(d[6], prometheus.GaugeValue, other.refused, otherTag)
		ch <- prometheus.MustNewConstMetric(d[7], prometheus.CounterValue, other.regress, otherTag)
	}
	ch <- prometheus.MustNewConstMetric(d[8], prometheus.GaugeValue, float64(refused))
	ch <- prometheus.MustNewConstMetric(d[9], prometheus.GaugeValue, float64(len(c.s.segs.Full())))
}
