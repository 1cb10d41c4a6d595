package main

import (
	"bytes"
	"fmt"
	"net"
	"strings"
	"testing"
)

// TestRespHelloAnswersSplitPipelines feeds a pipeline cut at every byte:
// each whole command gets the next counter value, a partial one waits.
func TestRespHelloAnswersSplitPipelines(t *testing.T) {
	cmd := "*2\r\n$4\r\nINCR\r\n$13\r\ncounter:12345\r\n"
	pipeline := []byte(strings.Repeat(cmd, 3))
	for cut := 0; cut <= len(pipeline); cut++ {
		h := &respHello{}
		used, out, err := h.answer(pipeline[:cut], nil)
		if err != nil {
			t.Fatalf("cut %d: %v", cut, err)
		}
		rest, out2, err := h.answer(pipeline[used:], out)
		if err != nil || used+rest != len(pipeline) {
			t.Fatalf("cut %d: used %d+%d of %d, err %v", cut, used, rest, len(pipeline), err)
		}
		if got := string(out2); got != ":1\r\n:2\r\n:3\r\n" {
			t.Fatalf("cut %d: replies %q", cut, got)
		}
	}
	if _, _, err := (&respHello{}).answer([]byte("PING\r\n"), nil); err == nil {
		t.Fatal("an inline command was accepted")
	}
}

// TestRespHelloServes runs both loops on a socket and pipelines INCRs.
func TestRespHelloServes(t *testing.T) {
	for _, loop := range []string{"goroutines", "epoll"} {
		t.Run(loop, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			h := &respHello{}
			done := make(chan error, 1)
			go func() {
				if loop == "epoll" {
					done <- h.serveEpoll(ln)
				} else {
					done <- h.serveGoroutines(ln)
				}
			}()
			c, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.Write(bytes.Repeat([]byte("*2\r\n$4\r\nINCR\r\n$1\r\nx\r\n"), 16))
			want := ""
			for i := 1; i <= 16; i++ {
				want += fmt.Sprintf(":%d\r\n", i)
			}
			got := make([]byte, 0, len(want))
			buf := make([]byte, 256)
			for len(got) < len(want) {
				n, err := c.Read(buf)
				if err != nil {
					if loop == "epoll" && strings.Contains(err.Error(), "needs Linux") {
						t.Skip(err)
					}
					t.Fatal(err)
				}
				got = append(got, buf[:n]...)
			}
			if string(got) != want {
				t.Fatalf("replies %q, want %q", got, want)
			}
			ln.Close()
			<-done
		})
	}
}
