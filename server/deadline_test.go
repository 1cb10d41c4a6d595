package server

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// deadlineRecorder is a net.Conn that only records the deadlines set on it
// (the unit under test is the bookkeeping, not the network).
type deadlineRecorder struct {
	net.Conn
	mu          sync.Mutex
	read, write time.Time
	calls       int
}

func (r *deadlineRecorder) SetReadDeadline(t time.Time) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.read, r.calls = t, r.calls+1
	return nil
}

func (r *deadlineRecorder) SetWriteDeadline(t time.Time) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.write, r.calls = t, r.calls+1
	return nil
}

func (r *deadlineRecorder) Close() error { return nil }

// TestDeadlinesModel runs random sequences of deadline moves, ticks of a
// fake clock and a hand-back against a model of net.Conn deadlines: after
// every step a direction's real deadline is in the past exactly when its
// deadline has passed by the last tick (or was set passed by then), and is
// none otherwise; after the hand-back it is the deadline itself, and moves
// go straight to the connection.
func TestDeadlinesModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		base := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
		now := base
		last := now // of the last tick
		d := newDeadlines(func() time.Time { return now })
		rec := &deadlineRecorder{}
		c := d.wrap(rec)
		var want [2]time.Time // the deadlines as set: read, write
		var tripped [2]bool   // the model: the real deadline is in the past
		handedBack := false
		real := func(write bool) time.Time {
			rec.mu.Lock()
			defer rec.mu.Unlock()
			if write {
				return rec.write
			}
			return rec.read
		}
		check := func(step string) {
			for i, write := range [2]bool{false, true} {
				got := real(write)
				switch {
				case handedBack:
					if !got.Equal(want[i]) {
						t.Fatalf("%s: handed back, %s deadline %v, want %v", step, dir(write), got, want[i])
					}
				case tripped[i]:
					if got.IsZero() || got.After(now) {
						t.Fatalf("%s: %s deadline %v passed (now %v), the connection's is %v, want in the past",
							step, dir(write), want[i], now, got)
					}
				default:
					if !got.IsZero() {
						t.Fatalf("%s: %s deadline %v not passed (now %v), the connection's is %v, want none",
							step, dir(write), want[i], now, got)
					}
				}
			}
		}
		t.Repeat(map[string]func(*rapid.T){
			"wait": func(t *rapid.T) { // time passes between ticks
				now = now.Add(time.Duration(rapid.Int64Range(0, int64(deadlineGrain)).Draw(t, "wait")))
				check("wait")
			},
			"set": func(t *rapid.T) {
				write := rapid.Bool().Draw(t, "write")
				var at time.Time
				if !rapid.Bool().Draw(t, "none") {
					at = last.Add(time.Duration(rapid.Int64Range(-int64(time.Second), int64(3*time.Second)).Draw(t, "in")))
				}
				i := 0
				if write {
					i = 1
				}
				var err error
				if write {
					err = c.SetWriteDeadline(at)
				} else {
					err = c.SetReadDeadline(at)
				}
				if err != nil {
					t.Fatal(err)
				}
				want[i] = at
				tripped[i] = !at.IsZero() && !at.After(last)
				check(fmt.Sprintf("set %s %v", dir(write), at))
			},
			"both": func(t *rapid.T) {
				at := last.Add(time.Duration(rapid.Int64Range(-int64(time.Second), int64(3*time.Second)).Draw(t, "in")))
				if err := c.SetDeadline(at); err != nil {
					t.Fatal(err)
				}
				want = [2]time.Time{at, at}
				p := !at.After(last)
				tripped = [2]bool{p, p}
				check(fmt.Sprintf("set both %v", at))
			},
			"tick": func(t *rapid.T) {
				now = now.Add(time.Duration(rapid.Int64Range(0, int64(time.Second)).Draw(t, "after")))
				last = now
				d.tick()
				for i := range want {
					if !want[i].IsZero() && !want[i].After(now) {
						tripped[i] = true
					}
				}
				check("tick at " + now.Sub(base).String())
			},
			"handBack": func(t *rapid.T) {
				if handedBack {
					t.Skip("once")
				}
				d.close()
				handedBack = true
				check("hand back")
			},
		})
	})
}

func dir(write bool) string {
	if write {
		return "write"
	}
	return "read"
}

// TestDeadlinesSetNothingInTheCommonCase: a keep-alive request's three
// moves of deadlines still in the future touch the connection not at all,
// so no runtime timer is armed (what the bookkeeping is for).
func TestDeadlinesSetNothingInTheCommonCase(t *testing.T) {
	now := time.Now()
	d := newDeadlines(func() time.Time { return now })
	rec := &deadlineRecorder{}
	c := d.wrap(rec)
	for i := range 1000 {
		now = now.Add(time.Millisecond)
		c.SetReadDeadline(now.Add(30 * time.Second)) // idle
		c.SetReadDeadline(now.Add(10 * time.Second)) // headers
		c.SetWriteDeadline(now.Add(30 * time.Second))
		if i%100 == 0 {
			d.tick()
		}
	}
	if rec.calls != 0 {
		t.Fatalf("3000 moves of future deadlines set the connection's %d times, want 0", rec.calls)
	}
	d.close() // run was never started
}

// TestSlowHeadersAreCutOff: a client that sends a request's headers a
// byte every 100 ms (20 s in all) is closed once ReadHeaderTimeout (1 s)
// has passed, not before it, within the deadlines' grain and some slack.
func TestSlowHeadersAreCutOff(t *testing.T) {
	t.Parallel()
	e := newConnEnv(t, func(c *Config) { c.ReadTimeout, c.ReadHeaderTimeout = time.Second, time.Second }, nil)
	c := e.dial(t)
	head := "GET /healthz HTTP/1.1\r\nHost: flakeid\r\nX-Slow: " + strings.Repeat("a", 200) + "\r\n\r\n"
	stop := make(chan struct{})
	defer close(stop)
	start := time.Now()
	go func() {
		for i := range len(head) {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			if _, err := c.Write([]byte{head[i]}); err != nil {
				return
			}
		}
	}()
	// net/http answers a request line cut off by the timeout 400 (408 once
	// it has the line), and closes.
	br := bufio.NewReader(c)
	c.SetReadDeadline(start.Add(15 * time.Second))
	resp, err := http.ReadResponse(br, nil)
	if err == nil {
		io.Copy(io.Discard, resp.Body) // until the server closes (or the read deadline)
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestTimeout && resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("headers trickling in were answered %s, want 400, 408 or a closed connection", resp.Status)
		}
		waitClosed(t, c, br, 5*time.Second)
	} else if ne := net.Error(nil); errors.As(err, &ne) && ne.Timeout() {
		t.Fatal("headers trickling in for 15 s were not cut off (read header timeout 1 s)")
	}
	took := time.Since(start)
	if took < 900*time.Millisecond || took > 5*time.Second {
		t.Fatalf("headers trickling in were cut off after %v, want about the 1 s read header timeout", took)
	}
	t.Logf("cut off after %v", took.Round(time.Millisecond))
}

// TestNonReadingClientIsCutOff: a client that pipelines requests for
// 100,000 IDs each (about 2 MB of answer) and never reads the answers is
// closed once a write has been blocked for WriteTimeout (1 s); it would
// otherwise hold its connection, and a goroutine, for ever.
func TestNonReadingClientIsCutOff(t *testing.T) {
	t.Parallel()
	e := newConnEnv(t, func(c *Config) { c.WriteTimeout = time.Second }, nil)
	c := e.dial(t)
	const requests = 100 // 200 MB of answers, far beyond any socket buffer
	req := []byte("GET /v1/snowflake/next?count=100000 HTTP/1.1\r\nHost: flakeid\r\n\r\n")
	go func() {
		for range requests {
			if _, err := c.Write(req); err != nil {
				return
			}
		}
	}()
	waitFor(t, "a connection open", func() bool { return gaugeValue(t, e.srv.metrics.conns) == 1 })
	start := time.Now()
	for gaugeValue(t, e.srv.metrics.conns) != 0 {
		if time.Since(start) > 20*time.Second {
			t.Fatal("a client that never reads still holds its connection after 20 s (write timeout 1 s)")
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("closed %v after the first request", time.Since(start).Round(time.Millisecond))
	// What the server wrote before it gave up is less than what was asked.
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, _ := io.Copy(io.Discard, c)
	if n > requests*1_000_000 {
		t.Fatalf("the client read %d bytes: every answer, nothing was cut off", n)
	}
}

// TestDeadlinesAfterServe: a connection still open when Serve returns (the
// drain gave up on it) keeps its deadlines, now the runtime's: its read
// ends at the deadline it had.
func TestDeadlinesAfterServe(t *testing.T) {
	d := newDeadlines(time.Now)
	d.start(deadlineGrain)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	raw, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	c := d.wrap(raw)
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	d.close()
	start := time.Now()
	_, err = c.Read(make([]byte, 1))
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("read after the hand-back: %v, want a timeout", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("the read timed out after %v, want about 300 ms", took)
	}
	if _, err := io.ReadFull(c, nil); err != nil {
		t.Fatal(err)
	}
}
