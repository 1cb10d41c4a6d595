package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/flakeid/flakeid/bench/load"
	flakeidv1 "github.com/flakeid/flakeid/gen/flakeid/v1"
	"github.com/flakeid/flakeid/gen/flakeid/v1/flakeidv1connect"
)

func TestRawConn(t *testing.T) {
	var closes atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/small":
			fmt.Fprintf(w, "%s %s\n", r.Header.Get("Accept"), r.URL.RawQuery)
		case "/chunked":
			for i := range 3 {
				fmt.Fprintf(w, "%d\n", i)
				w.(http.Flusher).Flush()
			}
		case "/close":
			closes.Add(1)
			w.Header().Set("Connection", "close")
			fmt.Fprint(w, "bye")
		default:
			http.Error(w, "no", http.StatusNotFound)
		}
	}))
	defer srv.Close()
	ctx := context.Background()
	get := func(path, accept string) (int, string) {
		t.Helper()
		u, _ := url.Parse(srv.URL + path)
		c := newRawConn(u, accept)
		defer c.Close()
		var status int
		var body []byte
		for range 3 { // the same connection, kept alive (or redialled)
			var err error
			if status, body, err = c.get(ctx); err != nil {
				t.Fatalf("%s: %v", path, err)
			}
		}
		return status, string(body)
	}
	if s, b := get("/small?count=2", "text/plain"); s != 200 || b != "text/plain count=2\n" {
		t.Errorf("small: %d %q", s, b)
	}
	if s, b := get("/chunked", ""); s != 200 || b != "0\n1\n2\n" {
		t.Errorf("chunked: %d %q", s, b)
	}
	if s, b := get("/close", ""); s != 200 || b != "bye" || closes.Load() != 3 {
		t.Errorf("close: %d %q after %d requests", s, b, closes.Load())
	}
	if s, _ := get("/nothing", ""); s != 404 {
		t.Errorf("missing: %d", s)
	}
}

func TestIDCounter(t *testing.T) {
	for _, tc := range []struct {
		kind, body string
		want       int64
		bad        bool
	}{
		{"one", "123\n", 1, false},
		{"one", " \n", 0, true},
		{"lines", "1\n2\n3\n", 3, false},
		{"ranges", `{"count":100000,"ranges":[{"first":"1","count":100000,"stride":1}]}`, 100000, false},
		{"ranges", `{"ids":["1"]}`, 0, true},
	} {
		f, err := idCounter(tc.kind)
		if err != nil {
			t.Fatal(err)
		}
		n, err := f([]byte(tc.body))
		if (err != nil) != tc.bad || n != tc.want {
			t.Errorf("%s %q: %d, %v", tc.kind, tc.body, n, err)
		}
	}
	if _, err := idCounter("json"); err == nil {
		t.Error("unknown -ids accepted")
	}
}

func TestRefusesNonLoopback(t *testing.T) {
	for _, o := range []options{
		{mode: "http", url: "http://10.1.2.3:8080/x", ids: "one", client: "raw"},
		{mode: "redis-incr", redisAddr: "192.168.0.1:6379"},
		{mode: "pg-nextval", pgDSN: "postgres://u@db.example.com:5432/test"},
		{mode: "connect-unary", base: "http://172.16.0.1:8080", protocol: "grpc", count: 1},
	} {
		if err := run(o); err == nil || !strings.Contains(err.Error(), "loopback") {
			t.Errorf("%s: %v", o.mode, err)
		}
	}
}

func TestHTTPMode(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"count":7,"ranges":[]}`)
	}))
	defer srv.Close()
	for _, client := range []string{"raw", "nethttp"} {
		nw, err := httpWorkers(options{url: srv.URL + "/x", ids: "ranges", client: client})
		if err != nil {
			t.Fatal(err)
		}
		rec, _, err := load.Run(context.Background(), load.RunConfig{Workers: 2, Duration: 50 * time.Millisecond, NewWorker: nw})
		if err != nil || rec.Ops == 0 || rec.IDs != 7*rec.Ops || rec.Errors != 0 {
			t.Errorf("%s: %+v, %v", client, rec, err)
		}
	}
}

// fakeIDs answers NextSnowflake with count IDs in two ranges and streams
// batches.
type fakeIDs struct {
	flakeidv1connect.UnimplementedIDServiceHandler
}

func (fakeIDs) NextSnowflake(_ context.Context, req *connect.Request[flakeidv1.NextSnowflakeRequest]) (*connect.Response[flakeidv1.NextSnowflakeResponse], error) {
	n := req.Msg.GetCount()
	return connect.NewResponse(&flakeidv1.NextSnowflakeResponse{Ranges: []*flakeidv1.IDRange{
		{First: 1, Count: n / 2}, {First: 1000, Count: n - n/2}}}), nil
}

func (fakeIDs) NextSegment(_ context.Context, req *connect.Request[flakeidv1.NextSegmentRequest]) (*connect.Response[flakeidv1.NextSegmentResponse], error) {
	return connect.NewResponse(&flakeidv1.NextSegmentResponse{Tag: req.Msg.GetTag(),
		Ranges: []*flakeidv1.IDRange{{First: 1, Count: req.Msg.GetCount()}}}), nil
}

func (fakeIDs) StreamSnowflake(ctx context.Context, req *connect.Request[flakeidv1.StreamSnowflakeRequest], st *connect.ServerStream[flakeidv1.NextSnowflakeResponse]) error {
	total, batch := req.Msg.GetCount(), req.Msg.GetBatch()
	for sent := int64(0); total == 0 || sent < total; sent += batch {
		n := batch
		if total > 0 {
			n = min(n, total-sent)
		}
		if err := st.Send(&flakeidv1.NextSnowflakeResponse{Ranges: []*flakeidv1.IDRange{{First: sent, Count: n}}}); err != nil {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return nil
}

func TestConnectModes(t *testing.T) {
	mux := http.NewServeMux()
	mux.Handle(flakeidv1connect.NewIDServiceHandler(fakeIDs{}))
	srv := httptest.NewUnstartedServer(mux)
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetHTTP1(true)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	defer srv.Close()
	for _, tc := range []struct {
		o     options
		perOp int64 // IDs per op; 0: any
	}{
		{options{mode: "connect-unary", protocol: "connect", count: 1000}, 1000},
		{options{mode: "connect-unary", protocol: "grpc", count: 7}, 7},
		{options{mode: "connect-unary", protocol: "grpcweb", count: 3, tag: "bench"}, 3},
		{options{mode: "connect-stream", protocol: "grpc", count: 0, batch: 50}, 50},
		{options{mode: "connect-stream", protocol: "connect", count: 120, batch: 50}, 0}, // 50, 50, 20, then a new call
	} {
		tc.o.base = srv.URL
		nw, err := connectWorkers(tc.o)
		if err != nil {
			t.Fatal(err)
		}
		rec, _, err := load.Run(context.Background(), load.RunConfig{Workers: 2, Duration: 100 * time.Millisecond, NewWorker: nw})
		name := tc.o.mode + "/" + tc.o.protocol
		if err != nil || rec.Ops == 0 || rec.Errors != 0 {
			t.Errorf("%s: %+v, %v", name, rec, err)
			continue
		}
		if tc.perOp > 0 && rec.IDs != tc.perOp*rec.Ops {
			t.Errorf("%s: %d IDs in %d ops, want %d per op", name, rec.IDs, rec.Ops, tc.perOp)
		}
		if tc.perOp == 0 && (rec.IDs >= 50*rec.Ops || rec.IDs <= 20*rec.Ops) {
			t.Errorf("%s: %d IDs in %d ops, want between 20 and 50 per op", name, rec.IDs, rec.Ops)
		}
	}
}
