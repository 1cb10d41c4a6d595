package server

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	flakeidv1 "github.com/flakeid/flakeid/gen/flakeid/v1"
	"github.com/flakeid/flakeid/gen/flakeid/v1/flakeidv1connect"
	"github.com/flakeid/flakeid/node"
	"github.com/flakeid/flakeid/segment"
	"github.com/flakeid/flakeid/segment/segmenttest"
	"github.com/flakeid/flakeid/snowflake"
	"github.com/flakeid/flakeid/worker"
)

// connLog is a log destination that tests read while servers write.
type connLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *connLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *connLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// connEnv is a real Server served by Serve on a TCP port of 127.0.0.1.
type connEnv struct {
	srv  *Server
	node *node.Node
	segs *segment.Allocator
	addr string // host:port
	log  *connLog
}

// newConnEnv serves a Server (a node on a bbolt coordinator, segments on
// an in-memory store with tag "orders") with the default config changed by
// mod and the segment config by segMod (either may be nil), until the test
// ends.
func newConnEnv(t *testing.T, mod func(*Config), segMod func(*segment.Config)) *connEnv {
	t.Helper()
	return newConnEnvLease(t, fixtureLease(), mod, segMod)
}

// newConnEnvLease is newConnEnv with the node leasing with lease.
func newConnEnvLease(t *testing.T, lease worker.Config, mod func(*Config), segMod func(*segment.Config)) *connEnv {
	t.Helper()
	buf := &connLog{}
	log := slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelWarn}))
	coord := fixtureCoordinator()
	n, err := node.Start(t.Context(), node.Config{Coordinator: coord, Logger: log, Lease: lease})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	mem := segmenttest.NewMemory()
	if err := mem.Create(t.Context(), segment.Tag{Name: "orders", Step: 1000}); err != nil {
		t.Fatal(err)
	}
	scfg := segment.Config{Store: mem, Logger: log}
	if segMod != nil {
		segMod(&scfg)
	}
	segs, err := segment.New(scfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { segs.Close() })
	cfg := DefaultConfig()
	if mod != nil {
		mod(&cfg)
	}
	srv, err := New(Options{Config: cfg, Node: n, Segments: segs, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return &connEnv{srv: srv, node: n, segs: segs, addr: ln.Addr().String(), log: buf}
}

// dial opens a raw TCP connection to the server, closed when the test ends.
func (e *connEnv) dial(t *testing.T) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// rawGet sends a GET of path on c and reads the answer.
func rawGet(t *testing.T, c net.Conn, br *bufio.Reader, path string) (*http.Response, string) {
	t.Helper()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	defer c.SetDeadline(time.Time{})
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: flakeid\r\n\r\n", path); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("GET %s: reading the body: %v", path, err)
	}
	return resp, string(b)
}

// waitClosed waits up to limit for the server to close c (a read that ends
// in EOF or a reset rather than a timeout) and returns how long it took.
func waitClosed(t *testing.T, c net.Conn, br *bufio.Reader, limit time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	c.SetReadDeadline(start.Add(limit))
	b, err := br.ReadByte()
	switch {
	case err == nil:
		t.Fatalf("the server sent %q on an idle connection", b)
	case errors.Is(err, net.ErrClosed):
		t.Fatal("the test closed the connection itself")
	default:
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("the connection is still open after %v", limit)
		}
	}
	return time.Since(start)
}

func gaugeValue(t *testing.T, c prometheus.Collector) float64 {
	t.Helper()
	ch := make(chan prometheus.Metric, 1)
	c.Collect(ch)
	var m dto.Metric
	if err := (<-ch).Write(&m); err != nil {
		t.Fatal(err)
	}
	if m.Gauge != nil {
		return m.Gauge.GetValue()
	}
	return m.Counter.GetValue()
}

// waitFor polls cond for up to 5 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("5 s and still not %s", what)
		}
	}
}

// TestSlowBodyIsCutOff: a request body sent a byte every 200 ms is cut off
// once ReadTimeout (1 s) has passed since the request began, long before
// the body would be complete, and nothing it asked for is done.
func TestSlowBodyIsCutOff(t *testing.T) {
	t.Parallel()
	e := newConnEnv(t, func(c *Config) { c.ReadTimeout, c.ReadHeaderTimeout = time.Second, time.Second }, nil)
	body := `{"tag":"slowloris","step":10}` + strings.Repeat(" ", 30) // 60 bytes: 12 s at 5 bytes/s
	c := e.dial(t)
	start := time.Now()
	fmt.Fprintf(c, "POST /v1/segment/tags HTTP/1.1\r\nHost: flakeid\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", len(body))
	var sent atomic.Int64
	go func() {
		for i := range len(body) {
			if _, err := c.Write([]byte{body[i]}); err != nil {
				return
			}
			sent.Add(1)
			time.Sleep(200 * time.Millisecond)
		}
	}()
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	took, got := time.Since(start), sent.Load()
	if got == int64(len(body)) {
		t.Fatalf("the whole body (%d bytes, %v) was read: not cut off", got, took)
	}
	if err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(b), `"request_timeout"`) {
			t.Fatalf("a body cut off after %d of %d bytes answered %d %s, want 408 request_timeout (or a closed connection)", got, len(body), resp.StatusCode, b)
		}
		waitClosed(t, c, br, 5*time.Second)
	}
	t.Logf("cut off after %v, %d of %d bytes (answer: %v)", took.Round(time.Millisecond), got, len(body), err)
	tags, err := e.segs.Tags(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, tag := range tags {
		if tag.Name == "slowloris" {
			t.Fatal("the cut-off request created its tag")
		}
	}
}

// TestIdleConnectionsClosed: keep-alive connections left idle, HTTP/1.1
// and h2c, are closed by the server after IdleTimeout (1 s), and the
// connection gauge goes back to 0.
func TestIdleConnectionsClosed(t *testing.T) {
	t.Parallel()
	e := newConnEnv(t, func(c *Config) { c.IdleTimeout = time.Second }, nil)

	t.Run("http1", func(t *testing.T) {
		c := e.dial(t)
		br := bufio.NewReader(c)
		for range 2 { // kept alive between requests
			if resp, body := rawGet(t, c, br, "/healthz"); resp.StatusCode != 200 || resp.Close {
				t.Fatalf("GET /healthz: %d %q (close %v)", resp.StatusCode, body, resp.Close)
			}
		}
		if took := waitClosed(t, c, br, 10*time.Second); took < 500*time.Millisecond {
			t.Fatalf("closed %v after the answer, before the 1 s idle timeout", took)
		}
	})

	t.Run("h2c", func(t *testing.T) {
		closed := make(chan time.Time, 1)
		tr := &http.Transport{Protocols: new(http.Protocols)}
		tr.Protocols.SetUnencryptedHTTP2(true)
		tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return &watchedConn{Conn: c, closed: closed}, nil
		}
		defer tr.CloseIdleConnections()
		client := &http.Client{Transport: tr}
		var done time.Time
		for range 2 {
			resp, err := client.Get("http://" + e.addr + "/healthz")
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.ProtoMajor != 2 || resp.StatusCode != 200 {
				t.Fatalf("GET /healthz over h2c: %s %d", resp.Proto, resp.StatusCode)
			}
			done = time.Now()
		}
		select {
		case at := <-closed:
			if took := at.Sub(done); took < 500*time.Millisecond {
				t.Fatalf("closed %v after the answer, before the 1 s idle timeout", took)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the idle h2c connection is still open after 10 s")
		}
	})

	waitFor(t, "0 connections open", func() bool { return gaugeValue(t, e.srv.metrics.conns) == 0 })
}

// watchedConn reports the time its first read failed: the server closed
// the connection (the client's transport always has a read pending).
type watchedConn struct {
	net.Conn
	closed chan<- time.Time
	once   sync.Once
}

func (c *watchedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if err != nil {
		c.once.Do(func() { c.closed <- time.Now() })
	}
	return n, err
}

// TestMaxConns: with MaxConns 2, a third connection is answered 503 (JSON,
// Connection: close, Retry-After: 1) and closed while the first two keep
// working; once one of them closes, a new connection is served.
func TestMaxConns(t *testing.T) {
	t.Parallel()
	e := newConnEnv(t, func(c *Config) { c.MaxConns = 2 }, nil)
	type conn struct {
		c  net.Conn
		br *bufio.Reader
	}
	var open []conn
	for range 2 {
		c := e.dial(t)
		cc := conn{c, bufio.NewReader(c)}
		if resp, body := rawGet(t, cc.c, cc.br, "/healthz"); resp.StatusCode != 200 {
			t.Fatalf("connection %d: %d %q", len(open)+1, resp.StatusCode, body)
		}
		open = append(open, cc)
	}
	if got := gaugeValue(t, e.srv.metrics.conns); got != 2 {
		t.Fatalf("flakeid_http_connections %v, want 2", got)
	}

	// The third, raw: the whole answer, then the close.
	c := e.dial(t)
	br := bufio.NewReader(c)
	resp, body := rawGet(t, c, br, "/healthz")
	var eb errorBody
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") != "1" || !resp.Close ||
		resp.Header.Get("Content-Type") != "application/json" || json.Unmarshal([]byte(body), &eb) != nil ||
		eb.Error.Code != codeUnavailable || !strings.Contains(eb.Error.Message, "too many connections (limit 2)") {
		t.Fatalf("connection 3: %d %v %q; want 503 unavailable, too many connections (limit 2), Retry-After: 1, Connection: close",
			resp.StatusCode, resp.Header, body)
	}
	waitClosed(t, c, br, 5*time.Second)

	// A Go client sees the 503 too.
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	r, err := (&http.Client{Transport: tr}).Get("http://" + e.addr + "/v1/snowflake/next")
	if err != nil {
		t.Fatalf("a Go client turned away: %v, want a 503 answer", err)
	}
	io.Copy(io.Discard, r.Body)
	r.Body.Close()
	if r.StatusCode != 503 {
		t.Fatalf("a Go client turned away: %d, want 503", r.StatusCode)
	}
	if got := gaugeValue(t, e.srv.metrics.connsRejected); got != 2 {
		t.Fatalf("flakeid_http_connections_rejected_total %v, want 2", got)
	}
	if logged := strings.Count(e.log.String(), "too many connections"); logged != 1 {
		t.Fatalf("%d warnings for 2 rejections within a second, want 1:\n%s", logged, e.log.String())
	}

	// The first two still work.
	for i, cc := range open {
		if resp, body := rawGet(t, cc.c, cc.br, "/v1/snowflake/next"); resp.StatusCode != 200 {
			t.Fatalf("connection %d after the rejection: %d %q", i+1, resp.StatusCode, body)
		}
	}

	// One closes: a new connection is served.
	open[0].c.Close()
	waitFor(t, "1 connection open", func() bool { return gaugeValue(t, e.srv.metrics.conns) == 1 })
	c = e.dial(t)
	if resp, body := rawGet(t, c, bufio.NewReader(c), "/healthz"); resp.StatusCode != 200 {
		t.Fatalf("a new connection after one closed: %d %q", resp.StatusCode, body)
	}
}

// TestStreamsOutliveWriteTimeout: with WriteTimeout and ReadTimeout of 1 s,
// a StreamSnowflake read slowly keeps receiving for 3.5 s, and a health
// Watch that sends nothing for 3 s still delivers the next change — over
// HTTP/1.1 (Connect) and h2c (Connect and gRPC).
func TestStreamsOutliveWriteTimeout(t *testing.T) {
	t.Parallel()
	e := newConnEnvLease(t, streamLease(), func(c *Config) {
		c.WriteTimeout, c.ReadTimeout, c.ReadHeaderTimeout = time.Second, time.Second, time.Second
	}, nil)
	h1 := &http.Transport{}
	h2c := &http.Transport{Protocols: new(http.Protocols)}
	h2c.Protocols.SetUnencryptedHTTP2(true)
	t.Cleanup(h1.CloseIdleConnections)
	t.Cleanup(h2c.CloseIdleConnections)
	url := "http://" + e.addr
	for _, tc := range []struct {
		name string
		tr   *http.Transport
		opts []connect.ClientOption
	}{
		{"connect-http1", h1, nil},
		{"connect-h2c", h2c, nil},
		{"grpc-h2c", h2c, []connect.ClientOption{connect.WithGRPC()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			client := flakeidv1connect.NewIDServiceClient(&http.Client{Transport: tc.tr}, url, tc.opts...)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			st, err := client.StreamSnowflake(ctx, connect.NewRequest(&flakeidv1.StreamSnowflakeRequest{Batch: 16}))
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			// Read until an ID made after 3× WriteTimeout arrives (the
			// buffers between server and client hold IDs made earlier).
			start := time.Now()
			for msgs := 1; ; msgs++ {
				if !st.Receive() {
					t.Fatalf("the stream ended after %v and %d messages: %v", time.Since(start).Round(time.Millisecond), msgs-1, st.Err())
				}
				r := st.Msg().GetRanges()
				if len(r) == 0 {
					t.Fatalf("message %d has no IDs", msgs)
				}
				p, err := e.node.Decode(snowflake.ID(r[0].GetFirst()))
				if err != nil {
					t.Fatal(err)
				}
				if p.Time.After(start.Add(3 * time.Second)) {
					break
				}
				if time.Since(start) > 30*time.Second {
					t.Fatalf("after 30 s and %d messages, no ID made after 3 s (last made at %v)", msgs, p.Time.Sub(start))
				}
				if msgs%100 == 0 {
					time.Sleep(time.Millisecond) // a client slower than the server
				}
			}
		})
	}
	t.Run("watch", func(t *testing.T) {
		t.Parallel()
		e := newConnEnv(t, func(c *Config) { // its own node, which it closes
			c.WriteTimeout, c.ReadTimeout, c.ReadHeaderTimeout = time.Second, time.Second, time.Second
		}, nil)
		url := "http://" + e.addr
		type watch struct {
			name   string
			stream *connect.ServerStreamForClient[healthpb.HealthCheckResponse]
		}
		var ws []watch
		for _, tc := range []struct {
			name string
			tr   *http.Transport
			opts []connect.ClientOption
		}{
			{"connect-http1", h1, nil},
			{"connect-h2c", h2c, nil},
			{"grpc-h2c", h2c, []connect.ClientOption{connect.WithGRPC()}},
		} {
			c := connect.NewClient[healthpb.HealthCheckRequest, healthpb.HealthCheckResponse](&http.Client{Transport: tc.tr}, url+healthWatchProcedure, tc.opts...)
			st, err := c.CallServerStream(t.Context(), connect.NewRequest(&healthpb.HealthCheckRequest{}))
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			if !st.Receive() || st.Msg().GetStatus() != healthpb.HealthCheckResponse_SERVING {
				t.Fatalf("%s: first message %v, %v; want SERVING", tc.name, st.Msg(), st.Err())
			}
			ws = append(ws, watch{tc.name, st})
		}
		time.Sleep(3 * time.Second) // nothing changes: nothing is sent
		e.node.Close()              // no lease: not serving
		for _, w := range ws {
			if !w.stream.Receive() || w.stream.Msg().GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
				t.Fatalf("%s: after 3 s idle, %v, %v; want NOT_SERVING", w.name, w.stream.Msg(), w.stream.Err())
			}
		}
	})
}

// TestConnConfigValidate: the connection settings' ranges and relation.
func TestConnConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		mut  func(*Config)
		want string
	}{
		{func(c *Config) { c.ReadTimeout = -1 }, "read timeout -1ns, want 1s–5m"},
		{func(c *Config) { c.ReadTimeout = 6 * time.Minute }, "read timeout 6m0s"},
		{func(c *Config) { c.ReadTimeout = 5 * time.Second }, "read header timeout 10s is longer than the read timeout 5s"},
		{func(c *Config) { c.WriteTimeout = 999 * time.Millisecond }, "write timeout 999ms, want 1s–10m"},
		{func(c *Config) { c.WriteTimeout = 11 * time.Minute }, "write timeout"},
		{func(c *Config) { c.IdleTimeout = -1 }, "idle timeout -1ns, want 1s–1h"},
		{func(c *Config) { c.IdleTimeout = 2 * time.Hour }, "idle timeout"},
		{func(c *Config) { c.MaxConns = -1 }, "max conns -1, want 1–1,000,000"},
		{func(c *Config) { c.MaxConns = 1_000_001 }, "max conns"},
		{func(c *Config) { c.MetricsMaxTags = 100_001 }, "metrics max tags 100001, want at most 100,000"},
	} {
		c := DefaultConfig()
		tc.mut(&c)
		if err := c.Validate(); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate = %v, want an error naming %q", err, tc.want)
		}
	}
	c := DefaultConfig()
	c.ReadTimeout, c.ReadHeaderTimeout, c.WriteTimeout, c.IdleTimeout = time.Second, time.Second, 10*time.Minute, time.Hour
	c.MaxConns, c.MetricsMaxTags = 1_000_000, 100_000
	if err := c.Validate(); err != nil {
		t.Fatalf("the ranges' ends: %v", err)
	}
	c.MetricsMaxTags = -1 // none
	if err := c.Validate(); err != nil {
		t.Fatalf("metrics max tags -1 (none): %v", err)
	}
	d := DefaultConfig()
	if d.ReadTimeout != 10*time.Second || d.WriteTimeout != 30*time.Second || d.IdleTimeout != 30*time.Second ||
		d.MaxConns != 1024 || d.MetricsMaxTags != 1000 {
		t.Fatalf("defaults %+v", d)
	}
}

// selfSigned writes a certificate for 127.0.0.1 and its key to dir.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "flakeid test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

// TestMaxConnsTLS: under TLS a connection beyond MaxConns is closed at once
// (no handshake), while the open one keeps working over HTTP/2.
func TestMaxConnsTLS(t *testing.T) {
	t.Parallel()
	cert, key, pool := selfSigned(t, t.TempDir())
	e := newConnEnv(t, func(c *Config) { c.MaxConns, c.TLSCert, c.TLSKey = 1, cert, key }, nil)
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	get := func() {
		t.Helper()
		resp, err := client.Get("https://" + e.addr + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.ProtoMajor != 2 {
			t.Fatalf("GET /healthz: %s %d", resp.Proto, resp.StatusCode)
		}
	}
	get()
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", e.addr, &tls.Config{RootCAs: pool})
	if err == nil {
		c.Close()
		t.Fatal("a second TLS connection beyond max conns 1 completed its handshake")
	}
	get() // the first connection, still open, still served
	if got := gaugeValue(t, e.srv.metrics.connsRejected); got != 1 {
		t.Fatalf("flakeid_http_connections_rejected_total %v, want 1", got)
	}
}
