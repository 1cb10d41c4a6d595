package server

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
)

// BenchmarkServe is one single-ID GET of Leaf's path over a real keep-alive
// loopback connection, answered by Server.Serve (connection limits,
// deadlines, routing, metrics, generation) and, in the same run, by a bare
// net/http server whose handler writes a constant ID (as `idload hello`):
// the ratio of the two is what a request costs besides the bare minimum.
// Profile it with -cpuprofile to see where.
func BenchmarkServe(b *testing.B) {
	ctype, body := []string{"text/plain; charset=utf-8"}, []byte("1234567890123456789")
	bare := func(ctx context.Context, ln net.Listener) error {
		hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header()["Content-Type"] = ctype
			w.Write(body)
		})}
		go func() { <-ctx.Done(); hs.Close() }()
		if err := hs.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	}
	for _, tc := range []struct {
		name  string
		serve func(context.Context, net.Listener) error
	}{{"flakeid", nil}, {"bare", bare}} {
		b.Run(tc.name, func(b *testing.B) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			serve := tc.serve
			if serve == nil { // a Server serves once: a fresh one per run
				serve = newFixture(b, nil).srv.Serve
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- serve(ctx, ln) }()
			defer func() {
				cancel()
				if err := <-done; err != nil {
					b.Error(err)
				}
			}()
			conn, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				b.Fatal(err)
			}
			defer conn.Close()
			req := []byte("GET /api/snowflake/get/x HTTP/1.1\r\nHost: bench\r\n\r\n")
			br := bufio.NewReader(conn)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := conn.Write(req); err != nil {
					b.Fatal(err)
				}
				resp, err := http.ReadResponse(br, nil)
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					b.Fatalf("status %d", resp.StatusCode)
				}
			}
		})
	}
}
