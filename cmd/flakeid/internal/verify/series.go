package verify

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"

	flakeidv1 "github.com/flakeid/flakeid/gen/flakeid/v1"
	"github.com/flakeid/flakeid/internal/humanize"
	"github.com/flakeid/flakeid/segment"
)

// The run's series of business numbers: a period of a minute, so that a
// run of a few minutes crosses several boundaries under the faults.
const (
	seriesTemplate = "V{yyyyMMdd}-{HHmm}-{seq:6}"
	seriesStep     = 50
	seriesCount    = 10 // numbers per call
	// seriesClockSlack is how far from a call's window the period a number
	// carries may lie, at least: the node's clock bound against the
	// coordinator's (--max-clock-skew, 1 s by default) plus the offset
	// restart-behind gives a node's clock (5 s), with a second to spare.
	// Where the nemesis took a clock farther (a restart behind, then a
	// step back), seriesSlack widens it to that.
	seriesClockSlack = 6*time.Second + time.Second
	// seriesPrefetchLead is how long before a period a node fetches its
	// first segment (segment's prefetchLead).
	seriesPrefetchLead = 10 * time.Second
)

// seriesSettings are the run's series: minute periods in UTC from 1.
func seriesSettings() segment.Series {
	return segment.Series{Period: segment.Minute, Template: seriesTemplate, Start: 1}
}

// seriesTag is the run's series tag.
func (r *runner) seriesTag() string { return r.cfg.Tag + "-series" }

// createSeries creates the run's series on the server at base (an existing
// one is fine).
func (r *runner) createSeries(ctx context.Context, base string) error {
	body := fmt.Sprintf(`{"tag":%q,"step":%d,"period":"minute","template":%q}`, r.seriesTag(), seriesStep, seriesTemplate)
	_, err := r.postTag(ctx, base, r.seriesTag(), body)
	return err
}

// seriesNumber is one number a client was given, with the call's window.
type seriesNumber struct {
	text   string
	t0, t1 int64 // ns since the run started
	inc    int32
}

// seriesRecorder keeps the numbers of the series clients.
type seriesRecorder struct {
	mu    sync.Mutex
	nums  []seriesNumber
	calls int
	fails int
}

// seriesClient asks for numbers of the series until ctx ends: over HTTP
// (viaRPC false) or Connect, at a node chosen at random per call.
func (r *runner) seriesClient(ctx context.Context, i int, viaRPC bool, rec *seriesRecorder) {
	rnd := rand.New(rand.NewPCG(r.cfg.Seed, uint64(1000+i)))
	tag := r.seriesTag()
	for ctx.Err() == nil {
		inc := r.nodes[rnd.IntN(len(r.nodes))].cur.Load()
		if inc == nil {
			sleepCtx(ctx, failPause)
			continue
		}
		t0 := r.now()
		nums, err := r.seriesCall(ctx, inc, tag, viaRPC)
		t1 := r.now()
		rec.mu.Lock()
		rec.calls++
		if err != nil {
			rec.fails++
		}
		for _, n := range nums {
			rec.nums = append(rec.nums, seriesNumber{text: n, t0: t0, t1: t1, inc: inc.id})
		}
		rec.mu.Unlock()
		if err != nil {
			sleepCtx(ctx, failPause)
		}
	}
}

// seriesCall takes seriesCount numbers from inc.
func (r *runner) seriesCall(ctx context.Context, inc *incarnation, tag string, viaRPC bool) ([]string, error) {
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	if viaRPC {
		res, err := inc.rpc.NextSegment(cctx, connect.NewRequest(&flakeidv1.NextSegmentRequest{Tag: tag, Count: seriesCount}))
		if err != nil {
			return nil, err
		}
		return res.Msg.GetNumbers(), nil
	}
	req, err := http.NewRequestWithContext(cctx, http.MethodGet, fmt.Sprintf("%s/v1/segment/%s/next?count=%d", inc.url, url.PathEscape(tag), seriesCount), nil)
	if err != nil {
		return nil, err
	}
	resp, err := r.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var body struct {
		IDs []string `json:"ids"`
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s", resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, err
	}
	return body.IDs, nil
}

// seriesChecks are the results of the series checks.
type seriesChecks struct {
	numbers, calls, fails, periods int
	duplicates                     []string
	malformed                      []string // texts that do not read under the template
	offPeriod                      []string // numbers whose period lies outside their call's window (with the slack)
	waste                          []string // periods whose unused counters pass the bound
	maxWaste                       int64
}

// seriesSlack is how far from a call's window the period of a number may
// lie in this run: seriesClockSlack, or the farthest any process's clock was
// from the real time and the default clock bound (1 s), when that is more.
func seriesSlack(incs []*incarnation) time.Duration {
	slack := time.Duration(seriesClockSlack)
	for _, inc := range incs {
		slack = max(slack, time.Duration(inc.farthest.Load())+time.Second)
	}
	return slack
}

// checkSeries checks the series' numbers: none handed out twice, each
// matches the template and carries a period its call's window (widened by
// seriesClockSlack) touches, and in each period the counters start at 1
// and the counters never handed out stay within one step per process that
// served during the period (a process loses at most a step of each period
// it loads: at a restart, a kill, or the period's end).
func (r *runner) checkSeries(rec *seriesRecorder, incs []*incarnation) seriesChecks {
	var out seriesChecks
	f, err := segment.CompileSeries(seriesSettings(), seriesStep)
	if err != nil {
		out.malformed = append(out.malformed, err.Error())
		return out
	}
	out.numbers, out.calls, out.fails = len(rec.nums), rec.calls, rec.fails
	seen := make(map[string]bool, len(rec.nums))
	counters := map[int64][]int64{}
	slack := int64(seriesSlack(incs))
	for _, n := range rec.nums {
		if seen[n.text] {
			out.duplicates = append(out.duplicates, n.text)
			continue
		}
		seen[n.text] = true
		label, counter, err := f.Parse(n.text)
		if err != nil {
			out.malformed = append(out.malformed, err.Error())
			continue
		}
		counters[label] = append(counters[label], counter)
		start, end := periodBounds(f, label)
		if start.Sub(r.t0) > time.Duration(n.t1+slack) || end.Sub(r.t0) < time.Duration(n.t0-slack) {
			out.offPeriod = append(out.offPeriod, fmt.Sprintf("%s, asked at +%.3fs–+%.3fs (%s)", n.text,
				time.Duration(n.t0).Seconds(), time.Duration(n.t1).Seconds(), r.t0.Add(time.Duration(n.t0)).UTC().Format(time.RFC3339)))
		}
	}
	out.periods = len(counters)
	for label, cs := range counters {
		slices.Sort(cs)
		start, end := periodBounds(f, label)
		procs := 0
		for _, inc := range incs {
			from, to := r.t0.Add(time.Duration(inc.started)), r.t0.Add(time.Duration(inc.ended))
			if inc.ended == 0 {
				to = end.Add(time.Hour)
			}
			// A process serves a period from up to 10 s before it (the
			// prefetch of its first segment) to its end, each within the
			// clock slack.
			if from.Before(end.Add(time.Duration(slack))) && to.After(start.Add(-time.Duration(slack)-seriesPrefetchLead)) {
				procs++
			}
		}
		unused := cs[len(cs)-1] - int64(len(cs)) // counters 1..max never handed out
		out.maxWaste = max(out.maxWaste, unused)
		if bound := int64(procs) * seriesStep; unused > bound {
			out.waste = append(out.waste, fmt.Sprintf("period %d: %d numbers up to counter %d (first %d): %d unused, more than %d processes × step %d",
				label, len(cs), cs[len(cs)-1], cs[0], unused, procs, seriesStep))
		}
	}
	return out
}

// periodBounds returns the start and end of the period with label l.
func periodBounds(f *segment.Format, label int64) (time.Time, time.Time) {
	// The label of a minute is yyyyMMddHHmm in UTC.
	t := time.Date(int(label/100000000), time.Month(label/1000000%100), int(label/10000%100), int(label/100%100), int(label%100), 0, 0, time.UTC)
	p := f.Period(t)
	return p.Start, p.End
}

// addSeries puts the series checks into the report.
func (rep *report) addSeries(tag string, sc seriesChecks) {
	verdict := func(bad bool) string {
		if bad {
			rep.failed = true
			return "**FAIL**"
		}
		return "ok"
	}
	rep.checks.add(fmt.Sprintf("series numbers acknowledged (tag %q, %s, a period a minute)", tag, seriesTemplate),
		fmt.Sprintf("%s numbers in %d periods, from %s calls (%s failed)", humanize.Thousands(int64(sc.numbers)), sc.periods, humanize.Thousands(int64(sc.calls)), humanize.Thousands(int64(sc.fails))), verdict(sc.numbers == 0))
	rep.checks.add("no series number handed out twice", fmt.Sprintf("%d duplicates", len(sc.duplicates)), verdict(len(sc.duplicates) > 0))
	rep.checks.add("every series number matches its template and shows a period within the clock bound of its call",
		fmt.Sprintf("%d malformed, %d off their period", len(sc.malformed), len(sc.offPeriod)), verdict(len(sc.malformed)+len(sc.offPeriod) > 0))
	rep.checks.add(fmt.Sprintf("each period's counters start at 1; unused ones within one step (%d) per process serving in it", seriesStep),
		fmt.Sprintf("%d periods past the bound (most unused in a period: %d)", len(sc.waste), sc.maxWaste), verdict(len(sc.waste) > 0))
	for _, d := range []struct {
		title string
		list  []string
	}{{"series numbers handed out twice", sc.duplicates}, {"series numbers that do not read", sc.malformed},
		{"series numbers off their period", sc.offPeriod}, {"series periods past the waste bound", sc.waste}} {
		if len(d.list) == 0 {
			continue
		}
		var b strings.Builder
		fmt.Fprintf(&b, "\n### %s: %d (the first %d)\n", d.title, len(d.list), min(len(d.list), 10))
		for _, x := range d.list[:min(len(d.list), 10)] {
			fmt.Fprintf(&b, "- %s\n", x)
		}
		rep.details = append(rep.details, b.String())
	}
}
