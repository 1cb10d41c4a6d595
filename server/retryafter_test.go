package server

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/flakeid/flakeid/node"
	"github.com/flakeid/flakeid/segment"
	"github.com/flakeid/flakeid/worker"
)

// TestRetryAfter: a 503 says in Retry-After when to come back — the node's
// own estimate (node.ResumeError) rounded up to whole seconds, else 1 — over
// the JSON API and Connect alike, and keeps the node's message.
func TestRetryAfter(t *testing.T) {
	lost := fmt.Errorf("%w: %w", node.ErrNoLease, worker.ErrReset)
	for _, c := range []struct {
		err  error
		want string
	}{
		{&node.ResumeError{Err: lost, RetryAfter: 7200 * time.Millisecond}, "8"},
		{&node.ResumeError{Err: lost, RetryAfter: 3 * time.Second}, "3"},
		{&node.ResumeError{Err: lost, RetryAfter: 300 * time.Millisecond}, "1"},
		{fmt.Errorf("wrapped: %w", &node.ResumeError{Err: lost, RetryAfter: 59*time.Second + time.Nanosecond}), "60"},
		{lost, "1"},
		{segment.ErrUnavailable, "1"},
	} {
		s := &Server{}
		rec := httptest.NewRecorder()
		ae := s.writeError(rec, c.err)
		if rec.Code != http.StatusServiceUnavailable || ae.Code != codeUnavailable || rec.Header().Get("Retry-After") != c.want {
			t.Errorf("%v: %d %s, Retry-After %q; want 503 unavailable, Retry-After %q", c.err, rec.Code, ae.Code, rec.Header().Get("Retry-After"), c.want)
		}
		if ae.Message != c.err.Error() {
			t.Errorf("message %q, want %q", ae.Message, c.err.Error())
		}
		var ce *connect.Error
		if !errors.As(connectError(c.err), &ce) || ce.Code() != connect.CodeUnavailable || ce.Meta().Get("Retry-After") != c.want {
			t.Errorf("%v over Connect: %v, Retry-After %q; want unavailable, %q", c.err, ce, ce.Meta().Get("Retry-After"), c.want)
		}
	}
}
