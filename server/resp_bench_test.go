package server

import (
	"bytes"
	"context"
	"io"
	"net"
	"testing"
	"time"
)

// batchConn is an in-memory net.Conn for benchmarks: every Read returns
// batch again, n times, then EOF; writes are counted and dropped.
type batchConn struct {
	batch   []byte
	left    int
	written int
}

func (c *batchConn) Read(p []byte) (int, error) {
	if c.left == 0 {
		return 0, io.EOF
	}
	c.left--
	return copy(p, c.batch), nil
}
func (c *batchConn) Write(p []byte) (int, error)      { c.written += len(p); return len(p), nil }
func (c *batchConn) Close() error                     { return nil }
func (c *batchConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (c *batchConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (c *batchConn) SetDeadline(time.Time) error      { return nil }
func (c *batchConn) SetReadDeadline(time.Time) error  { return nil }
func (c *batchConn) SetWriteDeadline(time.Time) error { return nil }

// BenchmarkRESP is the server's own work per command of a pipeline of 16
// (what redis-benchmark -P 16 sends): framing checks, redcon's parsing,
// dispatch, auth, generation and the reply, without the network. ns/op and
// allocs/op are per command.
func BenchmarkRESP(b *testing.B) {
	for _, bc := range []struct{ name, cmd string }{
		{"incr-tag", "*2\r\n$4\r\nINCR\r\n$6\r\norders\r\n"},
		{"incr-snowflake", "*2\r\n$4\r\nINCR\r\n$9\r\nsnowflake\r\n"},
		{"ping", "*1\r\n$4\r\nPING\r\n"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			f := newFixture(b, nil)
			const pipeline = 16
			batch := bytes.Repeat([]byte(bc.cmd), pipeline)
			l := &respListener{s: f.srv, conns: map[*respConn]struct{}{}}
			b.ReportAllocs()
			b.ResetTimer()
			nc := &batchConn{batch: batch, left: (b.N + pipeline - 1) / pipeline}
			c := l.add(context.Background(), nc)
			c.serve()
			b.StopTimer()
			if nc.written == 0 {
				b.Fatal("no replies")
			}
		})
	}
}
