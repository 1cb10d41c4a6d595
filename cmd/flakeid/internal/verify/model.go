package verify

import (
	"cmp"
	"context"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/flakeid/flakeid/gen/flakeid/v1/flakeidv1connect"
)

// api is the kind of call a client made.
type api uint8

const (
	apiHTTPOne        api = iota // GET /v1/snowflake/next?count=1 ({"ids":[…]})
	apiHTTPBatch                 // GET /v1/snowflake/next?count=1000&format=ranges
	apiConnectUnary              // IDService.NextSnowflake, count 1000
	apiConnectStream             // IDService.StreamSnowflake: one record per message
	apiHTTPSegment               // GET /v1/segment/{tag}/next?count=100&format=ranges
	apiConnectSegment            // IDService.NextSegment, count 100
	apiGoClient                  // the Go client's NextID, failover over the main group, no buffer (fixed rate)
	apiGoBuffered                // the Go client's NextID, failover, with a Snowflake buffer (fixed rate)
	apiPyBuffered                // the Python client's next_id, failover, buffered, in a driver process (fixed rate)
	apiJSBuffered                // the JavaScript client's nextId, the same
	apiJavaBuffered              // the Java client's nextId, the same
	apiHTTPNode                  // GET /v1/snowflake/next?count=1 to one node (fixed rate)
	apiRESPNode                  // INCR snowflake to one node's RESP port (fixed rate)
	apiProbe                     // the verifier's own calls: the nemesis's health probe (GET /v1/snowflake/next?count=1), a Go client's warm-up
	apiPyLocal                   // IDs a Python local generator made in its process, one batch per record
	apiJSLocal                   // the same of a JavaScript one
	apiJavaLocal                 // the same of a Java one
	numAPI
)

var apiNames = [numAPI]string{
	apiHTTPOne:        "HTTP snowflake count=1",
	apiHTTPBatch:      "HTTP snowflake count=1000 (ranges)",
	apiConnectUnary:   "Connect NextSnowflake count=1000",
	apiConnectStream:  "Connect StreamSnowflake (per message)",
	apiHTTPSegment:    "HTTP segment count=100",
	apiConnectSegment: "Connect NextSegment count=100",
	apiGoClient:       "Go client NextID, failover",
	apiGoBuffered:     "Go client NextID, failover, buffered",
	apiPyBuffered:     "Python client next_id, failover, buffered",
	apiJSBuffered:     "JavaScript client nextId, failover, buffered",
	apiJavaBuffered:   "Java client nextId, failover, buffered",
	apiHTTPNode:       "HTTP count=1, one node",
	apiRESPNode:       "RESP INCR snowflake, one node",
	apiProbe:          "verifier's own (health probes, warm-ups)",
	apiPyLocal:        "Python local generator (in-process, per batch)",
	apiJSLocal:        "JavaScript local generator (in-process, per batch)",
	apiJavaLocal:      "Java local generator (in-process, per batch)",
}

func (a api) String() string { return apiNames[a] }

// segment reports whether the call asks for segment IDs.
func (a api) segment() bool { return a == apiHTTPSegment || a == apiConnectSegment }

// paced reports whether the call is made by a fixed-rate client, whose
// latency is measured from the moment the schedule meant to send it.
func (a api) paced() bool { return a >= apiGoClient && a <= apiRESPNode }

// buffered reports whether the call is a buffered client's, which hands out
// IDs fetched earlier.
func (a api) buffered() bool {
	return a == apiGoBuffered || a == apiPyBuffered || a == apiJSBuffered || a == apiJavaBuffered
}

// local reports whether the record is a batch a local generator made in
// its own process (its start is the process's clock before the batch, its
// end when the verifier read it).
func (a api) local() bool { return a == apiPyLocal || a == apiJSLocal || a == apiJavaLocal }

// issuedFrom is the earliest moment q's IDs can have been issued: its start,
// except for a buffered client's, which hands out IDs fetched earlier.
func (q *request) issuedFrom() int64 {
	if q.api.buffered() {
		return 0
	}
	return q.start
}

// errClass is why a request was not answered with IDs.
type errClass uint8

const (
	errNone        errClass = iota
	errDown                 // the node had no running process (killed, restarting)
	errUnavailable          // the node answered 503 / Unavailable
	errTimeout              // the client's deadline passed
	errNetwork              // refused, reset, closed
	errBadAnswer            // an answer that did not parse or held the wrong number of IDs
	errOther                // any other status
	numErr
)

var errNames = [numErr]string{"ok", "node down", "503 unavailable", "timeout", "network error", "malformed answer", "other error"}

func (e errClass) String() string { return errNames[e] }

// request is one call (or one message of a stream) and its outcome. Times
// are nanoseconds since the run started, on the monotonic clock: start is
// taken before the request is sent (for a fixed-rate client's call, the
// moment its schedule meant to send it, which is no later), end after its
// answer was read. node is -1 for a Go client's call, which any node of the
// main group may have answered.
type request struct {
	start, end int64
	min, max   int64 // the smallest and largest ID acknowledged (when ok)
	inc        int32 // the incarnation asked, -1 when the node had none
	prev       int32 // the previous message of the same stream, or -1
	node       int8
	api        api
	err        errClass
}

func (r *request) ok() bool { return r.err == errNone }

// span is a run of consecutive IDs one request acknowledged.
type span struct {
	first int64
	n     int32
	req   int32
}

func (s span) last() int64 { return s.first + int64(s.n) - 1 }

// rng is a run of IDs as the API returns it.
type rng struct{ first, count, stride int64 }

// recorder keeps one client's requests and acknowledged IDs; each client
// goroutine has its own, merged when the run ends.
type recorder struct {
	reqs []request
	sf   []span // Snowflake IDs
	seg  []span // segment IDs of the tag
}

// fail records a request that was not answered with IDs.
func (r *recorder) fail(q request, why errClass) int32 {
	q.err = why
	q.prev = -1
	q.min, q.max = 1, 0 // no IDs
	r.reqs = append(r.reqs, q)
	return int32(len(r.reqs) - 1)
}

// ack records an answered request and the IDs in it, in answer order. A
// range whose stride is not 1 is stored one ID per span. want is the number
// of IDs asked for; an answer with another number is recorded as
// malformed (and its IDs are still kept: they were handed out).
func (r *recorder) ack(q request, prev int32, ranges []rng, want int64) int32 {
	q.prev = prev
	idx := int32(len(r.reqs))
	dst := &r.sf
	if q.api.segment() {
		dst = &r.seg
	}
	var total int64
	q.min, q.max = 1<<63-1, -1<<63
	for _, x := range ranges {
		if x.count <= 0 {
			continue
		}
		total += x.count
		stride := x.stride
		if stride == 0 {
			stride = 1
		}
		last := x.first + (x.count-1)*stride
		q.min, q.max = min(q.min, x.first, last), max(q.max, x.first, last)
		if stride == 1 {
			for left, first := x.count, x.first; left > 0; {
				n := min(left, 1<<30)
				*dst = append(*dst, span{first: first, n: int32(n), req: idx})
				first += n
				left -= n
			}
			continue
		}
		for i := range x.count {
			*dst = append(*dst, span{first: x.first + i*stride, n: 1, req: idx})
		}
	}
	if total != want || total == 0 {
		q.err = errBadAnswer
	}
	r.reqs = append(r.reqs, q)
	return idx
}

// incarnation is one process of a node (or one target server).
type incarnation struct {
	id     int32 // index in the history's incarnations
	node   int
	n      int    // 1 for a node's first process
	url    string // http://host:port
	resp   string // host:port of its Redis-protocol listener ("" for a target)
	pid    int
	offset time.Duration // --test-clock-offset it started with
	clock  atomic.Int64  // its clock's offset now, ns: offset plus the shifts applied
	// farthest is the largest distance of its clock from the real time
	// it has had, ns (setClock keeps it).
	farthest atomic.Int64
	log      string // its log file ("" for a target)

	started, serving, ended int64 // ns since the run started; ended 0 while running

	polls []poll // written by its poller only; read once the poller is done

	cmd      *exec.Cmd     // nil for a target
	killed   atomic.Bool   // the verifier killed it
	crashed  bool          // it exited without being killed; valid once exited is closed
	exited   chan struct{} // closed when the process has exited
	stopPoll context.CancelFunc
	pollDone chan struct{}
	rpc      flakeidv1connect.IDServiceClient
}

// name is "n2" for a target, "n2.3" for node 2's third process.
func (c *incarnation) name() string {
	if c.n == 0 {
		return nodeName(c.node)
	}
	return nodeName(c.node) + "." + strconv.Itoa(c.n)
}

// nodeName is "n1" for the first node.
func nodeName(i int) string { return "n" + strconv.Itoa(i+1) }

// poll is one answer (or failure) of GET /v1/status; the node took the
// snapshot somewhere in [t0, t1].
type poll struct {
	t0, t1             int64
	ok, held           bool
	dc, worker, leases int64
	// onRes: the lease is lost and the process still issues on the
	// reservation it stored, which ends at until (Unix ns).
	onRes bool
	until int64
}

// fault is one nemesis action.
type fault struct {
	kind      string
	node      int   // -1 for a coordinator or PostgreSQL as a whole
	inc       int32 // the incarnation hit, -1
	start     int64 // the fault began
	end       int64 // it was removed: healed, resumed, restarted
	recovered int64 // every node answered Snowflake requests steadily again (0: not within the wait)
	stuck     bool  // the cluster did not recover within healthWait (before the run ended)
	note      string
	failed    bool  // the fault could not be applied as intended
	lost      bool  // the coordinator of datacenter dc lost or rolled back its state
	dc        int64 // with lost
}

// history is everything a run recorded, merged.
type history struct {
	reqs   []request
	sf     []span
	seg    []span
	incs   []*incarnation
	faults []fault
	// refusals are the starts of misconfigured or damaged nodes, which had
	// to be refused.
	refusals []refusal
	wall0    time.Time // the wall-clock time of the run's start
	length   int64     // how long the load ran, ns
}

// merge appends the recorders' requests and spans, renumbering them. It
// moves one kind of record at a time and lets the recorders' copies go
// before the next, so that the history is not held twice.
func merge(recs []*recorder) (reqs []request, sf, seg []span) {
	var nr, ns, ng int
	base := make([]int32, len(recs))
	for i, r := range recs {
		base[i] = int32(nr)
		nr, ns, ng = nr+len(r.reqs), ns+len(r.sf), ng+len(r.seg)
	}
	reqs = make([]request, 0, nr)
	for i, r := range recs {
		for _, q := range r.reqs {
			if q.prev >= 0 {
				q.prev += base[i]
			}
			reqs = append(reqs, q)
		}
		r.reqs = nil
	}
	runtime.GC()
	sf = mergeSpans(recs, base, ns, func(r *recorder) *[]span { return &r.sf })
	runtime.GC()
	seg = mergeSpans(recs, base, ng, func(r *recorder) *[]span { return &r.seg })
	return reqs, sf, seg
}

// mergeSpans moves the spans of kind of every recorder into one slice of
// capacity n, renumbering their requests by the recorders' bases.
func mergeSpans(recs []*recorder, base []int32, n int, kind func(*recorder) *[]span) []span {
	out := make([]span, 0, n)
	for i, r := range recs {
		for _, s := range *kind(r) {
			s.req += base[i]
			out = append(out, s)
		}
		*kind(r) = nil
	}
	return out
}

// sortedFaults returns the faults by start.
func sortedFaults(fs []fault) []fault {
	fs = slices.Clone(fs)
	slices.SortFunc(fs, func(a, b fault) int { return cmp.Compare(a.start, b.start) })
	return fs
}

// setClock records that inc's clock is now offset from the real time.
func (inc *incarnation) setClock(offset time.Duration) {
	inc.clock.Store(int64(offset))
	for d := int64(offset.Abs()); ; {
		f := inc.farthest.Load()
		if d <= f || inc.farthest.CompareAndSwap(f, d) {
			return
		}
	}
}
