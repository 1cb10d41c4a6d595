package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"time"
)

// rawConn is a minimal HTTP/1.1 keep-alive client for one GET: it writes a
// request built once and reads the answer (Content-Length or chunked) into
// a reused buffer. It costs the load tool far less CPU per request than
// net/http's client, much as wrk's own C client does; on two shared cores
// that leaves more of the machine to the server under test.
type rawConn struct {
	addr string
	req  []byte
	conn net.Conn
	r    *bufio.Reader
	body []byte
}

func newRawConn(u *url.URL, accept string) *rawConn {
	host := u.Host
	addr := host
	if u.Port() == "" {
		addr = net.JoinHostPort(u.Hostname(), "80")
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "GET %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: idload\r\n", u.RequestURI(), host)
	if accept != "" {
		fmt.Fprintf(&b, "Accept: %s\r\n", accept)
	}
	b.WriteString("\r\n")
	return &rawConn{addr: addr, req: b.Bytes()}
}

func (c *rawConn) Close() {
	if c.conn != nil {
		c.conn.Close()
		c.conn = nil
	}
}

// get sends the request and returns the status and body (valid until the
// next call). A connection the server closed is redialled once.
func (c *rawConn) get(ctx context.Context) (int, []byte, error) {
	for attempt := 0; ; attempt++ {
		fresh := false
		if c.conn == nil {
			var d net.Dialer
			conn, err := d.DialContext(ctx, "tcp", c.addr)
			if err != nil {
				return 0, nil, err
			}
			c.conn, fresh = conn, true
			// The run's end (its context) unblocks a read in flight.
			context.AfterFunc(ctx, func() { conn.SetDeadline(time.Now()) })
			if c.r == nil {
				c.r = bufio.NewReaderSize(conn, 64<<10)
			} else {
				c.r.Reset(conn)
			}
		}
		status, body, keep, err := c.roundTrip()
		if err != nil {
			c.Close()
			// A kept-alive connection the server had closed: retry once.
			if !fresh && attempt == 0 && (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)) {
				continue
			}
			return 0, nil, err
		}
		if !keep {
			c.Close()
		}
		return status, body, nil
	}
}

func (c *rawConn) roundTrip() (status int, body []byte, keep bool, err error) {
	if _, err = c.conn.Write(c.req); err != nil {
		return
	}
	line, err := c.readLine()
	if err != nil {
		return
	}
	// HTTP/1.1 200 OK
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) {
		return 0, nil, false, fmt.Errorf("bad status line %q", line)
	}
	if status, err = strconv.Atoi(string(line[9:12])); err != nil {
		return 0, nil, false, fmt.Errorf("bad status line %q", line)
	}
	keep = line[7] == '1'
	length, chunked := -1, false
	for {
		if line, err = c.readLine(); err != nil {
			return
		}
		if len(line) == 0 {
			break
		}
		k, v, ok := bytes.Cut(line, []byte{':'})
		if !ok {
			continue
		}
		v = bytes.TrimSpace(v)
		switch {
		case asciiEqualFold(k, "content-length"):
			if length, err = strconv.Atoi(string(v)); err != nil {
				return 0, nil, false, fmt.Errorf("bad Content-Length %q", v)
			}
		case asciiEqualFold(k, "transfer-encoding"):
			chunked = asciiEqualFold(v, "chunked")
		case asciiEqualFold(k, "connection"):
			if asciiEqualFold(v, "close") {
				keep = false
			} else if asciiEqualFold(v, "keep-alive") {
				keep = true
			}
		}
	}
	c.body = c.body[:0]
	switch {
	case chunked:
		for {
			if line, err = c.readLine(); err != nil {
				return
			}
			size, _, _ := bytes.Cut(line, []byte{';'})
			n, perr := strconv.ParseInt(string(bytes.TrimSpace(size)), 16, 32)
			if perr != nil {
				return 0, nil, false, fmt.Errorf("bad chunk size %q", line)
			}
			if n == 0 {
				for { // trailers up to the blank line
					if line, err = c.readLine(); err != nil {
						return
					}
					if len(line) == 0 {
						break
					}
				}
				break
			}
			if err = c.readN(int(n)); err != nil {
				return
			}
			if _, err = c.readLine(); err != nil {
				return
			}
		}
	case length >= 0:
		if err = c.readN(length); err != nil {
			return
		}
	default: // body until close
		keep = false
		var b []byte
		b, err = io.ReadAll(c.r)
		c.body = append(c.body, b...)
		if err != nil {
			return
		}
	}
	return status, c.body, keep, nil
}

func (c *rawConn) readN(n int) error {
	start := len(c.body)
	c.body = append(c.body, make([]byte, n)...)
	_, err := io.ReadFull(c.r, c.body[start:])
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return err
}

// readLine returns one line without its CRLF (valid until the next read).
func (c *rawConn) readLine() ([]byte, error) {
	line, err := c.r.ReadSlice('\n')
	if err != nil {
		if errors.Is(err, bufio.ErrBufferFull) {
			return nil, errors.New("header line too long")
		}
		return nil, err
	}
	return bytes.TrimRight(line, "\r\n"), nil
}

func asciiEqualFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range len(b) {
		x, y := b[i], s[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}
