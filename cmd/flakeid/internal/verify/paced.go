package verify

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flakeid/flakeid/client"
)

// The fixed-rate clients measure what a client of the service sees, beside
// the saturating ones that look for duplicates: each sends one call every
// 1/Rate seconds on a schedule that does not wait for slow answers, through
// pacedLanes callers, and times every call from the moment its schedule
// meant to send it (wrk2's correction for coordinated omission): when the
// service stalls every caller, the calls the schedule owed are sent as soon
// as a caller is free and carry the stall in their latency, instead of not
// being sent at all. Every ID they get is recorded and checked with the rest.
// The load generator's own stalls are told apart: a sleep until a send
// that returns late shows the verifier's process (or the whole machine) not
// running for that long, and the report gives the share within the
// deadline both ways — from the schedule, as wrk2 counts, and less the
// time any schedule was overdue while the call was due or in flight
// (stalls, in seen.go). A wait for a free lane is the service's: the
// schedule does not sleep while it waits, and that wait stays in.
//
// The kinds: the Go client over the main group's nodes (failover, per
// attempt timeout Deadline/2), once without and once with a Snowflake buffer
// of bufferSeconds of its traffic; and, per node, a plain client of that one
// node over HTTP and over the Redis protocol, which sees every outage of its
// node.

// pacedLanes is how many calls a fixed-rate client has in flight at most,
// as a service calls through a few connections at once: a call slower than
// the period does not hold up the next, so a machine that answers every
// call in more than one period (a loaded CI runner under the race detector:
// 19 ms at p50 against the 10 ms period of 100 calls/s) is measured as
// slow, not as a schedule that falls further behind with every call until
// nothing is answered in time. A stall of the service stalls every lane,
// and shows in full.
const pacedLanes = 4

// bufferSeconds is how many seconds of its own traffic the buffered Go
// client's buffer holds (one refill; it refills at half, so 20–40 s are on
// hand): more than a coordinator's loss of its state costs the main group
// (its quarantine, 18 s, from the renewal that finds the loss), which no
// failover hides since every node waits it out.
const bufferSeconds = 40

// goClientEndpoint is the stable URL of node i for the Go clients; their
// transport dials the node's current process (each process listens on a
// fresh port). Targets are given by their own URLs.
func goClientEndpoint(i int) string { return fmt.Sprintf("http://%s.verify.invalid", nodeName(i)) }

// pacedClients starts the fixed-rate clients; each gets its own recorder
// (appended to recs) and its own list of wake-up delays (the schedule's
// own lateness). wg covers them; stop is called once they have ended.
func (r *runner) pacedClients(ctx context.Context, wg *sync.WaitGroup) (recs []*recorder, late *lateness, stop func(), err error) {
	late = &lateness{}
	var main []int
	for _, n := range r.nodes {
		if n.target != nil || n.grp.kind == r.cfg.Coordinator {
			main = append(main, n.idx)
		}
	}
	var closers []func()
	stop = func() {
		for _, c := range closers {
			c()
		}
	}
	// start runs a fixed-rate client of a, with a recorder per lane.
	start := func(a api, phase int, call func(ctx context.Context, q request, rec *recorder)) {
		lanes := make([]*recorder, pacedLanes)
		for i := range lanes {
			lanes[i] = &recorder{}
		}
		recs = append(recs, lanes...)
		wg.Go(func() { r.paced(ctx, a, lanes, late, phase, call) })
	}
	// The Go clients, each warmed up before any schedule starts, so that
	// every schedule runs for the run's duration.
	warm := &recorder{}
	recs = append(recs, warm)
	var gos []*client.Client
	for _, buffered := range []bool{false, true} {
		cl, tr, err := r.goClient(main, buffered)
		if err != nil {
			stop()
			return nil, nil, nil, err
		}
		closers = append(closers, func() { cl.Close(); tr.CloseIdleConnections() })
		r.warmUp(ctx, cl, warm)
		gos = append(gos, cl)
	}
	phase := 0
	for i, a := range []api{apiGoClient, apiGoBuffered} {
		cl := gos[i]
		start(a, phase, func(ctx context.Context, q request, rec *recorder) { r.goClientCall(ctx, cl, q, rec) })
		phase++
	}
	if r.langs != nil {
		for _, c := range r.langs.callers {
			r.warmUpCaller(ctx, c, warm)
		}
		for _, c := range r.langs.callers {
			start(c.lang.buffered, phase, func(ctx context.Context, q request, rec *recorder) { r.driverCall(ctx, c, q, rec) })
			phase++
		}
	}
	for _, n := range r.nodes {
		start(apiHTTPNode, phase, func(ctx context.Context, q request, rec *recorder) { r.nodeCall(ctx, n, q, rec) })
		phase++
		if n.target != nil {
			continue // a target's Redis-protocol port is not known
		}
		rc := &respNodeClient{}
		closers = append(closers, rc.close)
		start(apiRESPNode, phase, func(ctx context.Context, q request, rec *recorder) { r.respCall(ctx, n, rc, q, rec) })
		phase++
	}
	return recs, late, stop, nil
}

// warmUp makes one call of a Go client before its schedule starts, as a
// service warms its client before it takes traffic: the buffered client's
// first refill and the client's first connection are not counted as calls
// of the schedule (they were the only misses outside every fault in runs
// whose load started on a busy machine). The ID is recorded in rec as a
// call of the verifier's own (apiProbe: checked with the rest, in no
// client's figures); a failed warm-up (on a machine too busy to answer
// within the client's per-attempt timeout for callTimeout), which gets no
// ID, is logged.
func (r *runner) warmUp(ctx context.Context, cl *client.Client, rec *recorder) {
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	start := r.now()
	id, err := cl.NextID(cctx)
	if err != nil {
		r.logf("warming up a Go client: %v", err)
		return
	}
	rec.ack(request{start: start, end: r.now(), inc: -1, node: -1, api: apiProbe}, -1, []rng{{id, 1, 1}}, 1)
}

// goClient returns a Go client of the given nodes; its transport dials each
// node's current process.
func (r *runner) goClient(nodes []int, buffered bool) (*client.Client, *http.Transport, error) {
	dial := &net.Dialer{Timeout: time.Second, KeepAlive: 30 * time.Second}
	tr := &http.Transport{MaxIdleConnsPerHost: 8, DisableCompression: true,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			host, _, _ := net.SplitHostPort(addr)
			for _, n := range r.nodes {
				if host != nodeName(n.idx)+".verify.invalid" {
					continue
				}
				inc := n.cur.Load()
				if inc == nil {
					return nil, &net.OpError{Op: "dial", Net: network, Err: errNoProcess}
				}
				return dial.DialContext(ctx, network, strings.TrimPrefix(inc.url, "http://"))
			}
			return dial.DialContext(ctx, network, addr) // a target's own address
		}}
	cfg := client.Config{HTTPClient: &http.Client{Transport: tr}, Timeout: r.cfg.Deadline / 2}
	for _, i := range nodes {
		if t := r.nodes[i].target; t != nil {
			cfg.Endpoints = append(cfg.Endpoints, t.url)
		} else {
			cfg.Endpoints = append(cfg.Endpoints, goClientEndpoint(i))
		}
	}
	if buffered {
		cfg.Buffer.Snowflake = min(r.cfg.Rate*bufferSeconds, 100_000)
	}
	cl, err := client.New(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("verify: the Go client: %w", err)
	}
	return cl, tr, nil
}

// errNoProcess is a dial to a node that has no process (killed, restarting).
var errNoProcess = errors.New("the node has no process")

// paced calls call once every 1/Rate seconds until ctx ends, each with a
// request whose start is the moment the schedule meant to send it, through
// one lane per recorder in lanes (each records its calls in its own): a
// scheduled call goes to a free lane, and waits while none is. When the run
// ends behind schedule, the calls it owed, and those it cut short, whose
// deadline has passed are recorded as timed out: a stall at the end is not
// forgotten. phase spreads the clients' schedules over the period.
func (r *runner) paced(ctx context.Context, a api, lanes []*recorder, late *lateness, phase int,
	call func(ctx context.Context, q request, rec *recorder)) {
	every := int64(time.Second) / int64(r.cfg.Rate)
	sends := make(chan request)
	cut := make([][]request, len(lanes)) // per lane, its calls the run's end cut short
	var wg sync.WaitGroup
	for i, rec := range lanes {
		wg.Go(func() {
			for q := range sends {
				n := len(rec.reqs)
				call(ctx, q, rec)
				if len(rec.reqs) == n && ctx.Err() != nil {
					cut[i] = append(cut[i], q)
				}
			}
		})
	}
	sleep := r.sleep
	if sleep == nil {
		sleep = sleepCtx
	}
	next := r.now() + every*int64(phase%16)/16
	var lates []wake
	for ctx.Err() == nil {
		if now := r.now(); now < next {
			sleep(ctx, time.Duration(next-now))
			if ctx.Err() != nil {
				break
			}
			lates = append(lates, wake{at: next, late: r.now() - next})
		}
		select {
		case sends <- request{start: next, inc: -1, node: -1, api: a}:
			next += every
		case <-ctx.Done():
		}
	}
	close(sends)
	wg.Wait()
	end := r.now()
	timedOut := func(rec *recorder, q request) {
		if q.start+int64(r.cfg.Deadline) <= end {
			q.end = end
			rec.fail(q, errTimeout)
		}
	}
	for i, qs := range cut {
		for _, q := range qs {
			timedOut(lanes[i], q)
		}
	}
	for ; next+int64(r.cfg.Deadline) <= end; next += every {
		timedOut(lanes[0], request{start: next, inc: -1, node: -1, api: a})
	}
	late.add(lates)
}

// lateness collects the fixed-rate clients' wake-ups: how late each sleep
// until a scheduled send returned. A late wake-up is the machine's stall
// (the load generator's), not the service's: the report shows them beside
// the calls of each window.
type lateness struct {
	mu    sync.Mutex
	wakes []wake
}

// wake is one wake-up: the send it was scheduled for (ns since the run's
// start) and how late the sleep returned (ns).
type wake struct{ at, late int64 }

func (l *lateness) add(w []wake) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.wakes = append(l.wakes, w...)
}

// goClientCall is one NextID of a Go client, by a caller that gives up at
// its deadline: a call that cannot be answered in time does not hold up the
// calls scheduled after it (the client's own retries and backoff would,
// for up to callTimeout, and a sequential caller would then miss those too).
func (r *runner) goClientCall(ctx context.Context, cl *client.Client, q request, rec *recorder) {
	cctx, cancel := context.WithTimeout(ctx, r.cfg.Deadline)
	defer cancel()
	id, err := cl.NextID(cctx)
	q.end = r.now()
	if err != nil {
		r.failed(ctx, &q, err, rec)
		return
	}
	rec.ack(q, -1, []rng{{id, 1, 1}}, 1)
}

// nodeCall is one HTTP count=1 call to node n's current process.
func (r *runner) nodeCall(ctx context.Context, n *node, q request, rec *recorder) {
	q.node = int8(n.idx)
	inc := n.cur.Load()
	if inc == nil {
		q.end = r.now()
		rec.fail(q, errDown)
		return
	}
	q.inc = inc.id
	r.call(ctx, inc, q, rec)
}

// respNodeClient is a plain Redis client of one node, reconnected to each
// new process of the node.
type respNodeClient struct {
	mu  sync.Mutex
	inc int32
	c   *redis.Client
}

func (c *respNodeClient) get(inc *incarnation) *redis.Client {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.c == nil || c.inc != inc.id {
		if c.c != nil {
			c.c.Close()
		}
		c.inc = inc.id
		c.c = redis.NewClient(&redis.Options{Addr: inc.resp, MaxRetries: -1, PoolSize: pacedLanes,
			DialTimeout: time.Second, ReadTimeout: callTimeout, WriteTimeout: callTimeout, ContextTimeoutEnabled: true})
	}
	return c.c
}

func (c *respNodeClient) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.c != nil {
		c.c.Close()
		c.c = nil
	}
}

// respCall is one INCR snowflake to node n's current process.
func (r *runner) respCall(ctx context.Context, n *node, rc *respNodeClient, q request, rec *recorder) {
	q.node = int8(n.idx)
	inc := n.cur.Load()
	if inc == nil || inc.resp == "" {
		q.end = r.now()
		rec.fail(q, errDown)
		return
	}
	q.inc = inc.id
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	id, err := rc.get(inc).Incr(cctx, "snowflake").Result()
	q.end = r.now()
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		why := classify(err)
		if strings.HasPrefix(err.Error(), "UNAVAILABLE") {
			why = errUnavailable
		}
		rec.fail(q, why)
		r.sample(q.api, why, err.Error())
		return
	}
	rec.ack(q, -1, []rng{{id, 1, 1}}, 1)
}
