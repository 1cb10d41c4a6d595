package server

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	flakeidv1 "github.com/flakeid/flakeid/gen/flakeid/v1"
	"github.com/flakeid/flakeid/gen/flakeid/v1/flakeidv1connect"
	"github.com/flakeid/flakeid/node"
	"github.com/flakeid/flakeid/segment"
	"github.com/flakeid/flakeid/segment/segmenttest"
	"github.com/flakeid/flakeid/snowflake"
)

// rpcTag is the segment tag every rpcEnv creates.
const rpcTag = "orders"

// rpcEnv is a real Server (a node over a bbolt coordinator, an allocator
// over the in-memory store) behind an h2c test server.
type rpcEnv struct {
	s      *Server
	node   *node.Node
	segs   *segment.Allocator
	ts     *httptest.Server
	url    string
	client *http.Client // h2c only, as gRPC needs
}

// newRPCEnv starts an rpcEnv; mod, if not nil, changes the default config.
func newRPCEnv(t testing.TB, mod func(*Config)) *rpcEnv {
	t.Helper()
	return newRPCEnvLayout(t, snowflake.Layout{}, mod)
}

// newRPCEnvLayout is newRPCEnv with the node's Snowflake layout.
func newRPCEnvLayout(t testing.TB, layout snowflake.Layout, mod func(*Config)) *rpcEnv {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	coord := fixtureCoordinator()
	n, err := node.Start(t.Context(), node.Config{Coordinator: coord, Logger: log, Lease: fixtureLease(), Settings: snowflake.Settings{Layout: layout}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	a, err := segment.New(segment.Config{Store: segmenttest.NewMemory(), Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	if err := a.Create(t.Context(), segment.Tag{Name: rpcTag, Step: 1000}); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	if mod != nil {
		mod(&cfg)
	}
	s, err := New(Options{Config: cfg, Node: n, Segments: a, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewUnstartedServer(s.Handler())
	ts.Config.Protocols = new(http.Protocols)
	ts.Config.Protocols.SetHTTP1(true)
	ts.Config.Protocols.SetUnencryptedHTTP2(true)
	ts.Start()
	t.Cleanup(ts.Close)
	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true)
	t.Cleanup(tr.CloseIdleConnections)
	return &rpcEnv{s: s, node: n, segs: a, ts: ts, url: ts.URL, client: &http.Client{Transport: tr}}
}

// rpcProtocol is a way for a connect-go client to call.
type rpcProtocol struct {
	name string
	opts []connect.ClientOption
}

func rpcProtocols() []rpcProtocol {
	return []rpcProtocol{
		{"connect", nil},
		{"connect-get", []connect.ClientOption{connect.WithHTTPGet()}}, // Decode as GET
		{"grpc", []connect.ClientOption{connect.WithGRPC()}},
		{"grpc-web", []connect.ClientOption{connect.WithGRPCWeb()}},
	}
}

func (e *rpcEnv) idClient(p rpcProtocol) flakeidv1connect.IDServiceClient {
	return flakeidv1connect.NewIDServiceClient(e.client, e.url, p.opts...)
}

// grpcConn dials the test server with a stock grpc-go client.
func (e *rpcEnv) grpcConn(t testing.TB) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient("passthrough:///"+e.ts.Listener.Addr().String(),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

func withToken[T any](msg *T, token string) *connect.Request[T] {
	req := connect.NewRequest(msg)
	if token != "" {
		req.Header().Set("Authorization", "Bearer "+token)
	}
	return req
}

// checkRanges checks that rs are runs of increasing IDs after prev, n in
// all, and returns the last one.
func checkRanges(t testing.TB, rs []*flakeidv1.IDRange, prev int64, n int64) int64 {
	t.Helper()
	var total int64
	for _, r := range rs {
		stride := max(r.GetStride(), 1)
		if r.GetCount() < 1 || r.GetFirst() <= prev {
			t.Fatalf("range %v after ID %d", r, prev)
		}
		prev = r.GetFirst() + (r.GetCount()-1)*stride
		total += r.GetCount()
	}
	if total != n {
		t.Fatalf("ranges %v hold %d IDs, want %d", rs, total, n)
	}
	return prev
}

// rpcCounter reads a counter.
func rpcCounter(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		panic(err)
	}
	return m.GetCounter().GetValue()
}

// wantCode checks err's Connect code and that its message has part.
func wantCode(t testing.TB, err error, code connect.Code, part string) {
	t.Helper()
	if connect.CodeOf(err) != code || !strings.Contains(connect.NewError(code, err).Message(), part) {
		t.Fatalf("error %v (code %v), want %v with %q", err, connect.CodeOf(err), code, part)
	}
}

func TestConnectRPCs(t *testing.T) {
	e := newRPCEnv(t, nil)
	st := e.node.Status()
	for _, p := range rpcProtocols() {
		t.Run(p.name, func(t *testing.T) {
			c := e.idClient(p)
			ctx := t.Context()

			// NextSnowflake: count 0 means 1.
			res, err := c.NextSnowflake(ctx, connect.NewRequest(&flakeidv1.NextSnowflakeRequest{}))
			if err != nil {
				t.Fatal(err)
			}
			last := checkRanges(t, res.Msg.GetRanges(), 0, 1)
			if res.Msg.GetDatacenterId() != st.DatacenterID || res.Msg.GetWorkerId() != st.WorkerID {
				t.Fatalf("response node %d/%d, node status %d/%d", res.Msg.GetDatacenterId(), res.Msg.GetWorkerId(), st.DatacenterID, st.WorkerID)
			}
			res, err = c.NextSnowflake(ctx, connect.NewRequest(&flakeidv1.NextSnowflakeRequest{Count: 100_000}))
			if err != nil {
				t.Fatal(err)
			}
			checkRanges(t, res.Msg.GetRanges(), last, 100_000)

			// NextSegment.
			seg1, err := c.NextSegment(ctx, connect.NewRequest(&flakeidv1.NextSegmentRequest{Tag: rpcTag}))
			if err != nil {
				t.Fatal(err)
			}
			if seg1.Msg.GetTag() != rpcTag {
				t.Fatalf("tag %q", seg1.Msg.GetTag())
			}
			prev := checkRanges(t, seg1.Msg.GetRanges(), 0, 1)
			seg, err := c.NextSegment(ctx, connect.NewRequest(&flakeidv1.NextSegmentRequest{Tag: rpcTag, Count: 2500}))
			if err != nil {
				t.Fatal(err)
			}
			checkRanges(t, seg.Msg.GetRanges(), prev, 2500)

			// Decode, in each text form.
			id := snowflake.ID(last)
			want, err := e.node.Decode(id)
			if err != nil {
				t.Fatal(err)
			}
			for _, text := range textForms(id, id.String(), id.Base58(), " "+id.String()+"\n") {
				dec, err := c.Decode(ctx, connect.NewRequest(&flakeidv1.DecodeRequest{Id: text}))
				if err != nil {
					t.Fatalf("Decode(%q): %v", text, err)
				}
				m := dec.Msg
				if m.GetId() != last || m.GetTick() != want.Tick || m.GetWorker() != want.Worker ||
					m.GetDatacenter() != want.Datacenter || m.GetSequence() != want.Sequence ||
					m.GetUnixMs() != want.Time.UnixMilli() || m.GetTime() != want.Time.UTC().Format("2006-01-02T15:04:05.000Z07:00") {
					t.Fatalf("Decode(%q) = %v, want %+v", text, m, want)
				}
			}
		})
	}
	// The RPCs are counted in the request metrics by procedure.
	if got := rpcCounter(e.s.metrics.requests.WithLabelValues(flakeidv1connect.IDServiceNextSnowflakeProcedure, "200")); got != 8 {
		t.Fatalf("NextSnowflake counted %v times with 200, want 8", got)
	}
}

func TestConnectErrors(t *testing.T) {
	e := newRPCEnv(t, func(c *Config) { c.MaxCount = 1000; c.StreamBatch = 100 })
	for _, p := range rpcProtocols() {
		t.Run(p.name, func(t *testing.T) {
			c := e.idClient(p)
			ctx := t.Context()
			_, err := c.NextSnowflake(ctx, connect.NewRequest(&flakeidv1.NextSnowflakeRequest{Count: 1001}))
			wantCode(t, err, connect.CodeInvalidArgument, "count 1001 is out of range: want 1 to 1000")
			_, err = c.NextSnowflake(ctx, connect.NewRequest(&flakeidv1.NextSnowflakeRequest{Count: -1}))
			wantCode(t, err, connect.CodeInvalidArgument, "count -1 is out of range")
			_, err = c.NextSegment(ctx, connect.NewRequest(&flakeidv1.NextSegmentRequest{Tag: "nope", Count: 1}))
			wantCode(t, err, connect.CodeNotFound, "nope")
			_, err = c.NextSegment(ctx, connect.NewRequest(&flakeidv1.NextSegmentRequest{Tag: rpcTag, Count: 1001}))
			wantCode(t, err, connect.CodeInvalidArgument, "count 1001 is out of range")
			_, err = c.NextSegment(ctx, connect.NewRequest(&flakeidv1.NextSegmentRequest{Tag: "bad tag!"}))
			wantCode(t, err, connect.CodeInvalidArgument, "")
			for _, bad := range []string{"", "x", "-5", "123abc", "99999999999999999999999"} {
				_, err = c.Decode(ctx, connect.NewRequest(&flakeidv1.DecodeRequest{Id: bad}))
				wantCode(t, err, connect.CodeInvalidArgument, "")
			}
			for _, req := range []*flakeidv1.StreamSnowflakeRequest{{Count: -1}, {Batch: -1}} {
				stream, err := c.StreamSnowflake(ctx, connect.NewRequest(req))
				if err != nil {
					t.Fatal(err)
				}
				if stream.Receive() {
					t.Fatalf("stream %v sent %v", req, stream.Msg())
				}
				wantCode(t, stream.Err(), connect.CodeInvalidArgument, "negative")
				stream.Close()
			}
		})
	}

	// Without segment mode NextSegment is NotFound.
	noSegs, err := New(Options{Config: DefaultConfig(), Node: e.node, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(noSegs.Handler())
	defer ts.Close()
	_, err = flakeidv1connect.NewIDServiceClient(ts.Client(), ts.URL).NextSegment(t.Context(), connect.NewRequest(&flakeidv1.NextSegmentRequest{Tag: rpcTag}))
	wantCode(t, err, connect.CodeNotFound, "segment mode is not enabled")

	// With the node closed (no lease) the Snowflake RPCs are Unavailable.
	e.node.Close()
	_, err = e.idClient(rpcProtocols()[2]).NextSnowflake(t.Context(), connect.NewRequest(&flakeidv1.NextSnowflakeRequest{}))
	wantCode(t, err, connect.CodeUnavailable, "")
}

func TestConnectErrorMapping(t *testing.T) {
	for _, c := range []struct {
		err  error
		want connect.Code
	}{
		{apiErrorf(400, codeInvalid, "m"), connect.CodeInvalidArgument},
		{apiErrorf(404, codeNotFound, "m"), connect.CodeNotFound},
		{apiErrorf(409, codeExists, "m"), connect.CodeAlreadyExists},
		{apiErrorf(503, codeUnavailable, "m"), connect.CodeUnavailable},
		{apiErrorf(401, codeUnauth, "m"), connect.CodeUnauthenticated},
		{apiErrorf(403, codeForbidden, "m"), connect.CodePermissionDenied},
		{apiErrorf(507, codeTooLarge, "m"), connect.CodeResourceExhausted},
		{apiErrorf(500, codeInternal, "m"), connect.CodeInternal},
		{apiErrorf(405, codeMethod, "m"), connect.CodeInternal},
		{apiErrorf(409, codePrecondition, "m"), connect.CodeFailedPrecondition},
		{segment.ErrUnknownTag, connect.CodeNotFound},
		{segment.ErrRegressed, connect.CodeUnavailable},
		{context.Canceled, connect.CodeCanceled},
		{errors.New("m"), connect.CodeInternal},
	} {
		got := connectError(c.err)
		var ce *connect.Error
		if !errors.As(got, &ce) || ce.Code() != c.want || ce.Message() != c.err.Error() {
			t.Errorf("connectError(%v) = %v, want code %v with the message kept", c.err, got, c.want)
		}
		if ae := classify(c.err); httpStatus(got) != ae.Status {
			t.Errorf("httpStatus(connectError(%v)) = %d, want %d", c.err, httpStatus(got), ae.Status)
		}
	}
	if connectError(nil) != nil {
		t.Error("connectError(nil) != nil")
	}
}

func TestConnectStream(t *testing.T) {
	e := newRPCEnv(t, nil)
	for _, p := range rpcProtocols() {
		t.Run(p.name, func(t *testing.T) {
			c := e.idClient(p)
			stream, err := c.StreamSnowflake(t.Context(), connect.NewRequest(&flakeidv1.StreamSnowflakeRequest{Count: 100_000}))
			if err != nil {
				t.Fatal(err)
			}
			defer stream.Close()
			var total, last, msgs int64
			seen := make(map[int64]bool, 100_000)
			for stream.Receive() {
				msgs++
				var n int64
				for _, r := range stream.Msg().GetRanges() {
					n += r.GetCount()
					for i := range r.GetCount() {
						id := r.GetFirst() + i
						if id <= last || seen[id] {
							t.Fatalf("ID %d after %d (seen %v)", id, last, seen[id])
						}
						seen[id], last = true, id
					}
				}
				if n < 1 || n > int64(e.s.cfg.StreamBatch) {
					t.Fatalf("message %d holds %d IDs, want 1–%d", msgs, n, e.s.cfg.StreamBatch)
				}
				total += n
			}
			if err := stream.Err(); err != nil {
				t.Fatal(err)
			}
			if total != 100_000 || len(seen) != 100_000 {
				t.Fatalf("stream sent %d IDs (%d distinct), want 100,000", total, len(seen))
			}
			if want := int64((100_000 + 4095) / 4096); msgs != want {
				t.Fatalf("%d messages, want %d", msgs, want)
			}
		})
	}
}

func TestConnectStreamBatch(t *testing.T) {
	e := newRPCEnv(t, func(c *Config) { c.MaxCount = 500; c.StreamBatch = 100 })
	c := e.idClient(rpcProtocols()[0])
	for _, tc := range []struct{ batch, per int64 }{{0, 100}, {7, 7}, {10_000, 500}} {
		stream, err := c.StreamSnowflake(t.Context(), connect.NewRequest(&flakeidv1.StreamSnowflakeRequest{Count: 1234, Batch: tc.batch}))
		if err != nil {
			t.Fatal(err)
		}
		var total, last int64
		for stream.Receive() {
			var n int64
			for _, r := range stream.Msg().GetRanges() {
				n += r.GetCount()
			}
			if n != min(tc.per, 1234-total) {
				t.Fatalf("batch %d: message of %d IDs after %d, want %d per message", tc.batch, n, total, tc.per)
			}
			last = checkRanges(t, stream.Msg().GetRanges(), last, n)
			total += n
		}
		if err := stream.Err(); err != nil || total != 1234 {
			t.Fatalf("batch %d: %d IDs, %v", tc.batch, total, err)
		}
		stream.Close()
	}
}

// TestConnectStreamCancel: an endless stream (count 0) runs until the
// client cancels, and the handler then returns.
func TestConnectStreamCancel(t *testing.T) {
	e := newRPCEnv(t, nil)
	for _, p := range rpcProtocols() {
		t.Run(p.name, func(t *testing.T) {
			before := rpcCounter(e.s.metrics.requests.WithLabelValues(flakeidv1connect.IDServiceStreamSnowflakeProcedure, "499"))
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			stream, err := e.idClient(p).StreamSnowflake(ctx, connect.NewRequest(&flakeidv1.StreamSnowflakeRequest{Batch: 1000}))
			if err != nil {
				t.Fatal(err)
			}
			var total, last int64
			for total < 50_000 && stream.Receive() {
				last = checkRanges(t, stream.Msg().GetRanges(), last, 1000)
				total += 1000
			}
			cancel()
			for stream.Receive() { // what was in flight
			}
			wantCode(t, stream.Err(), connect.CodeCanceled, "")
			stream.Close()
			// The handler notices and returns: counted as cancelled (499).
			deadline := time.Now().Add(5 * time.Second)
			for rpcCounter(e.s.metrics.requests.WithLabelValues(flakeidv1connect.IDServiceStreamSnowflakeProcedure, "499")) == before {
				if time.Now().After(deadline) {
					t.Fatal("the stream handler did not return after the client cancelled")
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
}

// TestConnectStreamDrain: a graceful shutdown ends endless streams (and
// health watches) at once instead of waiting out ShutdownTimeout.
func TestConnectStreamDrain(t *testing.T) {
	e := newRPCEnv(t, func(c *Config) { c.ShutdownTimeout = time.Minute })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(t.Context())
	defer stop()
	served := make(chan error, 1)
	go func() { served <- e.s.Serve(ctx, ln) }()
	url := "http://" + ln.Addr().String()
	c := flakeidv1connect.NewIDServiceClient(e.client, url, connect.WithGRPC())
	stream, err := c.StreamSnowflake(t.Context(), connect.NewRequest(&flakeidv1.StreamSnowflakeRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	if !stream.Receive() {
		t.Fatal(stream.Err())
	}
	hc := connect.NewClient[healthpb.HealthCheckRequest, healthpb.HealthCheckResponse](e.client, url+healthWatchProcedure, connect.WithGRPC())
	watch, err := hc.CallServerStream(t.Context(), connect.NewRequest(&healthpb.HealthCheckRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	defer watch.Close()
	if !watch.Receive() || watch.Msg().GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("watch: %v, %v", watch.Msg(), watch.Err())
	}
	start := time.Now()
	stop()
	for stream.Receive() {
	}
	wantCode(t, stream.Err(), connect.CodeUnavailable, "shutting down")
	if !watch.Receive() || watch.Msg().GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("watch while draining: %v, %v", watch.Msg(), watch.Err())
	}
	if watch.Receive() || watch.Err() != nil {
		t.Fatalf("watch did not end cleanly: %v, %v", watch.Msg(), watch.Err())
	}
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("shutdown took %v", d)
	}
}

func TestConnectAuth(t *testing.T) {
	const (
		full     = "full-token-0123456789"
		segOnly  = "segment-only-0123456789"
		otherTag = "other-tag-0123456789"
	)
	e := newRPCEnv(t, func(c *Config) {
		c.Tokens = []Token{
			{Token: full, Name: "full", Tags: []string{"*"}, Snowflake: true},
			{Token: segOnly, Name: "seg", Tags: []string{rpcTag}},
			{Token: otherTag, Name: "other", Tags: []string{"invoices"}, Snowflake: true},
		}
	})
	for _, p := range rpcProtocols() {
		t.Run(p.name, func(t *testing.T) {
			c := e.idClient(p)
			ctx := t.Context()
			next := func(tok string) error {
				_, err := c.NextSnowflake(ctx, withToken(&flakeidv1.NextSnowflakeRequest{}, tok))
				return err
			}
			seg := func(tok, tag string) error {
				_, err := c.NextSegment(ctx, withToken(&flakeidv1.NextSegmentRequest{Tag: tag}, tok))
				return err
			}
			stream := func(tok string) error {
				st, err := c.StreamSnowflake(ctx, withToken(&flakeidv1.StreamSnowflakeRequest{Count: 10}, tok))
				if err != nil {
					return err
				}
				defer st.Close()
				for st.Receive() {
				}
				return st.Err()
			}
			wantCode(t, next(""), connect.CodeUnauthenticated, "missing bearer token")
			wantCode(t, next("not-a-token-0123456789"), connect.CodeUnauthenticated, "unknown bearer token")
			wantCode(t, seg("", rpcTag), connect.CodeUnauthenticated, "")
			wantCode(t, stream(""), connect.CodeUnauthenticated, "")
			wantCode(t, next(segOnly), connect.CodePermissionDenied, "Snowflake")
			wantCode(t, stream(segOnly), connect.CodePermissionDenied, "Snowflake")
			wantCode(t, seg(otherTag, rpcTag), connect.CodePermissionDenied, `may not use tag "orders"`)
			for _, err := range []error{next(full), stream(full), next(otherTag), seg(full, rpcTag), seg(segOnly, rpcTag)} {
				if err != nil {
					t.Fatal(err)
				}
			}
			// Decode is open, as on the JSON API.
			if _, err := c.Decode(ctx, connect.NewRequest(&flakeidv1.DecodeRequest{Id: "1"})); err != nil {
				t.Fatal(err)
			}
		})
	}
	// Health stays open.
	if _, err := healthpb.NewHealthClient(e.grpcConn(t)).Check(t.Context(), &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}
	// And so does a stock grpc-go client see the same codes.
	var res flakeidv1.NextSnowflakeResponse
	err := e.grpcConn(t).Invoke(t.Context(), flakeidv1connect.IDServiceNextSnowflakeProcedure, &flakeidv1.NextSnowflakeRequest{}, &res)
	if status.Code(err) != codes.Unauthenticated {
		t.Fatalf("grpc-go without a token: %v", err)
	}
}

func TestConnectHealth(t *testing.T) {
	e := newRPCEnv(t, nil)
	for _, p := range rpcProtocols() {
		t.Run(p.name, func(t *testing.T) {
			check := connect.NewClient[healthpb.HealthCheckRequest, healthpb.HealthCheckResponse](e.client, e.url+healthCheckProcedure, p.opts...)
			for _, svc := range []string{"", flakeidv1connect.IDServiceName} {
				res, err := check.CallUnary(t.Context(), connect.NewRequest(&healthpb.HealthCheckRequest{Service: svc}))
				if err != nil || res.Msg.GetStatus() != healthpb.HealthCheckResponse_SERVING {
					t.Fatalf("Check(%q) = %v, %v", svc, res, err)
				}
			}
			_, err := check.CallUnary(t.Context(), connect.NewRequest(&healthpb.HealthCheckRequest{Service: "nope.v1.Nope"}))
			wantCode(t, err, connect.CodeNotFound, "nope.v1.Nope")

			// Watch of an unknown service: SERVICE_UNKNOWN, and the call stays.
			watch := connect.NewClient[healthpb.HealthCheckRequest, healthpb.HealthCheckResponse](e.client, e.url+healthWatchProcedure, p.opts...)
			ctx, cancel := context.WithCancel(t.Context())
			w, err := watch.CallServerStream(ctx, connect.NewRequest(&healthpb.HealthCheckRequest{Service: "nope.v1.Nope"}))
			if err != nil {
				t.Fatal(err)
			}
			if !w.Receive() || w.Msg().GetStatus() != healthpb.HealthCheckResponse_SERVICE_UNKNOWN {
				t.Fatalf("Watch(unknown) = %v, %v", w.Msg(), w.Err())
			}
			cancel()
			if w.Receive() {
				t.Fatalf("Watch after cancel: %v", w.Msg())
			}
			w.Close()
		})
	}

	// Watch follows readiness: closing the node (no lease) turns it
	// NOT_SERVING within about a second; the stock grpc-go client sees the
	// same.
	w, err := connect.NewClient[healthpb.HealthCheckRequest, healthpb.HealthCheckResponse](e.client, e.url+healthWatchProcedure, connect.WithGRPC()).
		CallServerStream(t.Context(), connect.NewRequest(&healthpb.HealthCheckRequest{Service: flakeidv1connect.IDServiceName}))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if !w.Receive() || w.Msg().GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("Watch = %v, %v", w.Msg(), w.Err())
	}
	gw, err := healthpb.NewHealthClient(e.grpcConn(t)).Watch(t.Context(), &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if m, err := gw.Recv(); err != nil || m.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("grpc-go Watch = %v, %v", m, err)
	}
	start := time.Now()
	e.node.Close()
	if !w.Receive() || w.Msg().GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("Watch after the node closed = %v, %v", w.Msg(), w.Err())
	}
	if d := time.Since(start); d > 4*healthPoll {
		t.Fatalf("NOT_SERVING took %v", d)
	}
	if m, err := gw.Recv(); err != nil || m.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("grpc-go Watch after the node closed = %v, %v", m, err)
	}
	res, err := healthpb.NewHealthClient(e.grpcConn(t)).Check(t.Context(), &healthpb.HealthCheckRequest{})
	if err != nil || res.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("grpc-go Check after the node closed = %v, %v", res, err)
	}
}

// TestGRPCGoClient: a stock grpc-go client (no generated grpc-go stubs:
// the protobuf messages with Invoke and NewStream) gets the same answers.
func TestGRPCGoClient(t *testing.T) {
	e := newRPCEnv(t, func(c *Config) { c.MaxCount = 1000; c.StreamBatch = 1000 })
	cc := e.grpcConn(t)
	ctx := t.Context()

	var next flakeidv1.NextSnowflakeResponse
	if err := cc.Invoke(ctx, flakeidv1connect.IDServiceNextSnowflakeProcedure, &flakeidv1.NextSnowflakeRequest{Count: 1000}, &next); err != nil {
		t.Fatal(err)
	}
	last := checkRanges(t, next.GetRanges(), 0, 1000)
	if st := e.node.Status(); next.GetWorkerId() != st.WorkerID {
		t.Fatalf("worker %d, node has %d", next.GetWorkerId(), st.WorkerID)
	}
	err := cc.Invoke(ctx, flakeidv1connect.IDServiceNextSnowflakeProcedure, &flakeidv1.NextSnowflakeRequest{Count: 1001}, &next)
	if s := status.Convert(err); s.Code() != codes.InvalidArgument || !strings.Contains(s.Message(), "out of range") {
		t.Fatalf("count too large: %v", err)
	}

	var dec flakeidv1.DecodeResponse
	if err := cc.Invoke(ctx, flakeidv1connect.IDServiceDecodeProcedure, &flakeidv1.DecodeRequest{Id: snowflake.ID(last).Base58()}, &dec); err != nil {
		t.Fatal(err)
	}
	if p, _ := e.node.Decode(snowflake.ID(last)); dec.GetId() != last || dec.GetSequence() != p.Sequence || dec.GetUnixMs() != p.Time.UnixMilli() {
		t.Fatalf("Decode = %v, want %+v", &dec, p)
	}
	err = cc.Invoke(ctx, flakeidv1connect.IDServiceDecodeProcedure, &flakeidv1.DecodeRequest{Id: "not an id"}, &dec)
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("bad ID: %v", err)
	}

	var seg flakeidv1.NextSegmentResponse
	if err := cc.Invoke(ctx, flakeidv1connect.IDServiceNextSegmentProcedure, &flakeidv1.NextSegmentRequest{Tag: rpcTag, Count: 10}, &seg); err != nil {
		t.Fatal(err)
	}
	checkRanges(t, seg.GetRanges(), 0, 10)
	err = cc.Invoke(ctx, flakeidv1connect.IDServiceNextSegmentProcedure, &flakeidv1.NextSegmentRequest{Tag: "nope"}, &seg)
	if status.Code(err) != codes.NotFound {
		t.Fatalf("unknown tag: %v", err)
	}

	// The server stream.
	stream, err := cc.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, flakeidv1connect.IDServiceStreamSnowflakeProcedure)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.SendMsg(&flakeidv1.StreamSnowflakeRequest{Count: 10_000, Batch: 300}); err != nil {
		t.Fatal(err)
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	var total int64
	for {
		var m flakeidv1.NextSnowflakeResponse
		err := stream.RecvMsg(&m)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		n := int64(min(300, 10_000-total))
		last = checkRanges(t, m.GetRanges(), last, n)
		total += n
	}
	if total != 10_000 {
		t.Fatalf("stream sent %d IDs", total)
	}

	// The health service, with grpc-go's own client.
	hc := healthpb.NewHealthClient(cc)
	for _, svc := range []string{"", flakeidv1connect.IDServiceName} {
		res, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: svc})
		if err != nil || res.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("Check(%q) = %v, %v (Ready: %v)", svc, res, err, e.s.Ready())
		}
	}
	if _, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: "nope"}); status.Code(err) != codes.NotFound {
		t.Fatalf("Check(unknown): %v", err)
	}
}

// TestGeneratedCodeFresh regenerates gen/ into a temporary directory and
// compares. It needs protoc and the plugins in ./bin (scripts/gen.sh
// installs them), so it is skipped without them and in -short mode.
func TestGeneratedCodeFresh(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	if _, err := exec.LookPath("protoc"); err != nil {
		t.Skip("protoc is not installed")
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range []string{"protoc-gen-go", "protoc-gen-connect-go"} {
		if _, err := os.Stat(filepath.Join(root, "bin", tool)); err != nil {
			t.Skipf("bin/%s is not installed (run scripts/gen.sh)", tool)
		}
	}
	out, err := exec.CommandContext(t.Context(), filepath.Join(root, "scripts", "gen.sh"), "--check").CombinedOutput()
	if err != nil {
		t.Fatalf("scripts/gen.sh --check: %v\n%s", err, out)
	}
}

// BenchmarkStreamSnowflake measures the IDs per second a Connect client
// receives from one StreamSnowflake stream (counting the ranges, not
// expanding them). The default layout caps one node at 4,096 IDs per
// millisecond, so with it the generator, not the stream, is the limit; the
// "wide" layout (20 sequence bits) shows what the stream itself carries.
func BenchmarkStreamSnowflake(b *testing.B) {
	wide := snowflake.Layout{DatacenterBits: 5, WorkerBits: 5, SequenceBits: 20,
		Epoch: time.Now().Add(-time.Hour).Truncate(time.Millisecond), TimeUnit: time.Millisecond}
	for _, layout := range []struct {
		name string
		l    snowflake.Layout
	}{{"default", snowflake.Layout{}}, {"wide", wide}} {
		for _, p := range []rpcProtocol{rpcProtocols()[0], rpcProtocols()[2]} {
			for _, batch := range []int64{256, 4096, 100_000} {
				b.Run(layout.name+"/"+p.name+"/batch="+strconv.FormatInt(batch, 10), func(b *testing.B) {
					e := newRPCEnvLayout(b, layout.l, nil)
					c := e.idClient(p)
					b.ReportAllocs()
					b.ResetTimer()
					stream, err := c.StreamSnowflake(b.Context(), connect.NewRequest(&flakeidv1.StreamSnowflakeRequest{Count: int64(b.N), Batch: batch}))
					if err != nil {
						b.Fatal(err)
					}
					var total int64
					for stream.Receive() {
						for _, r := range stream.Msg().GetRanges() {
							total += r.GetCount()
						}
					}
					if err := stream.Err(); err != nil {
						b.Fatal(err)
					}
					stream.Close()
					if total != int64(b.N) {
						b.Fatalf("received %d IDs, want %d", total, b.N)
					}
					b.ReportMetric(float64(total)/b.Elapsed().Seconds(), "ids/s")
				})
			}
		}
	}
}

// textForms is forms and id's base32 text, unless that text is digits only:
// such a text reads as decimal, by design, and some IDs' base32 texts are
// (for minutes at a time, as the time field's digits come up).
func textForms(id snowflake.ID, forms ...string) []string {
	if b32 := id.Base32(); strings.ContainsFunc(b32, func(r rune) bool { return r < '0' || r > '9' }) {
		forms = append(forms, b32)
	}
	return forms
}
