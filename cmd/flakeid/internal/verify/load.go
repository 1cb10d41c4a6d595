package verify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"syscall"
	"time"

	"connectrpc.com/connect"

	"github.com/flakeid/flakeid/client"
	flakeidv1 "github.com/flakeid/flakeid/gen/flakeid/v1"
	"github.com/flakeid/flakeid/internal/backoff"
	"github.com/flakeid/flakeid/snowflake"
)

// What each client asks for.
const (
	batchCount   = 1000  // HTTP batch and Connect unary
	streamCount  = 20000 // IDs per stream …
	streamBatch  = 1000  // … in messages of this many
	segmentCount = 100
	callTimeout  = 2 * time.Second
	failPause    = 10 * time.Millisecond // after a failure, so a dead node is not hammered
)

// clientAPIs is the mix: client i runs clientAPIs[i % len].
var clientAPIs = []api{apiHTTPBatch, apiConnectUnary, apiHTTPOne, apiConnectStream, apiHTTPSegment, apiHTTPBatch, apiConnectSegment, apiHTTPOne}

// client runs one client goroutine until ctx ends: each call goes to a node
// chosen at random, and its outcome is recorded.
func (r *runner) client(ctx context.Context, i int, rec *recorder) {
	a := clientAPIs[i%len(clientAPIs)]
	if a.segment() && !r.segments {
		a = apiHTTPBatch
	}
	rnd := rand.New(rand.NewPCG(r.cfg.Seed, uint64(i)+1))
	for ctx.Err() == nil {
		n := rnd.IntN(len(r.nodes))
		inc := r.nodes[n].cur.Load()
		q := request{start: r.now(), node: int8(n), inc: -1, api: a}
		if inc == nil {
			q.end = q.start
			rec.fail(q, errDown)
			sleepCtx(ctx, failPause)
			continue
		}
		q.inc = inc.id
		if !r.call(ctx, inc, q, rec) {
			sleepCtx(ctx, failPause)
		}
	}
}

// sleepCtx waits for d, or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) { _ = backoff.Sleep(ctx, d) }

// call makes one call of q.api to inc and records it; it reports whether
// IDs came back.
func (r *runner) call(ctx context.Context, inc *incarnation, q request, rec *recorder) bool {
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	switch q.api {
	case apiHTTPOne, apiProbe, apiHTTPNode:
		var body struct {
			IDs []snowflake.ID `json:"ids"`
		}
		if !r.httpGet(ctx, cctx, inc.url+"/v1/snowflake/next?count=1", &q, &body, rec) {
			return false
		}
		ranges := make([]rng, len(body.IDs))
		for i, id := range body.IDs {
			ranges[i] = rng{int64(id), 1, 1}
		}
		rec.ack(q, -1, ranges, 1)
		return rec.reqs[len(rec.reqs)-1].ok()
	case apiHTTPBatch, apiHTTPSegment:
		u, want := fmt.Sprintf("%s/v1/snowflake/next?count=%d&format=ranges", inc.url, batchCount), int64(batchCount)
		if q.api == apiHTTPSegment {
			u, want = fmt.Sprintf("%s/v1/segment/%s/next?count=%d&format=ranges", inc.url, url.PathEscape(r.cfg.Tag), segmentCount), segmentCount
		}
		var body struct {
			Ranges []struct {
				First  snowflake.ID `json:"first"`
				Count  int64        `json:"count"`
				Stride int64        `json:"stride"`
			} `json:"ranges"`
			Count int64 `json:"count"`
		}
		if !r.httpGet(ctx, cctx, u, &q, &body, rec) {
			return false
		}
		ranges := make([]rng, len(body.Ranges))
		for i, x := range body.Ranges {
			ranges[i] = rng{int64(x.First), x.Count, x.Stride}
		}
		if body.Count != want {
			want = -1 // the count field disagrees with what was asked: malformed
		}
		rec.ack(q, -1, ranges, want)
		return rec.reqs[len(rec.reqs)-1].ok()
	case apiConnectUnary:
		res, err := inc.rpc.NextSnowflake(cctx, connect.NewRequest(&flakeidv1.NextSnowflakeRequest{Count: batchCount}))
		q.end = r.now()
		if err != nil {
			r.failed(ctx, &q, err, rec)
			return false
		}
		rec.ack(q, -1, pbRanges(res.Msg.GetRanges()), batchCount)
		return rec.reqs[len(rec.reqs)-1].ok()
	case apiConnectSegment:
		res, err := inc.rpc.NextSegment(cctx, connect.NewRequest(&flakeidv1.NextSegmentRequest{Tag: r.cfg.Tag, Count: segmentCount}))
		q.end = r.now()
		if err != nil {
			r.failed(ctx, &q, err, rec)
			return false
		}
		rec.ack(q, -1, pbRanges(res.Msg.GetRanges()), segmentCount)
		return rec.reqs[len(rec.reqs)-1].ok()
	case apiConnectStream:
		return r.stream(ctx, cctx, inc, q, rec)
	}
	panic("verify: unknown api")
}

// stream reads one StreamSnowflake call. Each message is a record of its
// own: it was generated after the call started and before it arrived, so
// its window is [call start, arrival]; prev links the messages, whose IDs
// must increase.
func (r *runner) stream(ctx, cctx context.Context, inc *incarnation, q request, rec *recorder) bool {
	st, err := inc.rpc.StreamSnowflake(cctx, connect.NewRequest(&flakeidv1.StreamSnowflakeRequest{Count: streamCount, Batch: streamBatch}))
	if err != nil {
		q.end = r.now()
		r.failed(ctx, &q, err, rec)
		return false
	}
	defer st.Close()
	prev, total, ok := int32(-1), int64(0), true
	for st.Receive() {
		m := q
		m.end = r.now()
		ranges := pbRanges(st.Msg().GetRanges())
		var n int64
		for _, x := range ranges {
			n += x.count
		}
		want := n
		if n < 1 || n > streamBatch {
			want = -1
		}
		prev = rec.ack(m, prev, ranges, want)
		ok = ok && rec.reqs[prev].ok()
		total += n
	}
	if err := st.Err(); err != nil {
		q.end = r.now()
		r.failed(ctx, &q, err, rec)
		return false
	}
	if total != streamCount {
		q.end = r.now()
		rec.fail(q, errBadAnswer)
		r.sample(q.api, errBadAnswer, fmt.Sprintf("stream ended after %d of %d IDs without an error", total, streamCount))
		return false
	}
	return ok
}

func pbRanges(rs []*flakeidv1.IDRange) []rng {
	out := make([]rng, len(rs))
	for i, x := range rs {
		out[i] = rng{x.GetFirst(), x.GetCount(), x.GetStride()}
	}
	return out
}

// httpGet makes a GET and decodes a 200 answer into v; anything else is
// recorded as a failure (unless the run is ending).
func (r *runner) httpGet(ctx, cctx context.Context, u string, q *request, v any, rec *recorder) bool {
	req, err := http.NewRequestWithContext(cctx, http.MethodGet, u, nil)
	if err != nil {
		panic(err)
	}
	resp, err := r.hc.Do(req)
	if err != nil {
		q.end = r.now()
		r.failed(ctx, q, err, rec)
		return false
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	resp.Body.Close()
	q.end = r.now()
	if err != nil {
		r.failed(ctx, q, err, rec)
		return false
	}
	if resp.StatusCode != http.StatusOK {
		why := errOther
		if resp.StatusCode == http.StatusServiceUnavailable {
			why = errUnavailable
		}
		rec.fail(*q, why)
		r.sample(q.api, why, fmt.Sprintf("%d %s", resp.StatusCode, bytes.TrimSpace(b)))
		return false
	}
	if err := json.Unmarshal(b, v); err != nil {
		rec.fail(*q, errBadAnswer)
		r.sample(q.api, errBadAnswer, fmt.Sprintf("%v: %.200s", err, b))
		return false
	}
	return true
}

// failed records a call that returned an error, classified; a call cut
// short because the run is ending is not recorded.
func (r *runner) failed(ctx context.Context, q *request, err error, rec *recorder) {
	if ctx.Err() != nil {
		return
	}
	why := classify(err)
	rec.fail(*q, why)
	r.sample(q.api, why, err.Error())
}

// classify sorts an error of a call into the classes of the report.
func classify(err error) errClass {
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return errTimeout
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, io.EOF),
		errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed), errors.Is(err, syscall.EPIPE):
		return errNetwork
	}
	var oe *net.OpError
	if errors.As(err, &oe) {
		return errNetwork
	}
	switch connect.CodeOf(err) {
	case connect.CodeUnavailable:
		if strings.Contains(err.Error(), "connection") || strings.Contains(err.Error(), "EOF") {
			return errNetwork
		}
		return errUnavailable
	case connect.CodeDeadlineExceeded:
		return errTimeout
	}
	if errors.Is(err, client.ErrUnavailable) {
		return errUnavailable
	}
	return errOther
}

var digits = regexp.MustCompile(`[0-9]+`)

// sample keeps a few error messages of each kind for the report.
func (r *runner) sample(a api, why errClass, msg string) {
	msg = digits.ReplaceAllString(msg, "#") // ports, IDs and durations vary; the kind of message does not
	if len(msg) > 160 {
		msg = msg[:160] + "…"
	}
	key := fmt.Sprintf("%s: %s: %s", a, why, msg)
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.samples[key]; ok || len(r.samples) < 200 {
		r.samples[key]++
	}
}
