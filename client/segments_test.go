package client

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/flakeid/flakeid/segment"
	"github.com/flakeid/flakeid/server"
)

// TakeSegment against real servers: a whole segment for this client alone,
// disjoint from every other segment and from the IDs the servers hand out
// themselves; a tag's share (delta, remainder) is kept; an unknown tag is
// ErrNotFound at once; a token is needed where the servers ask for one; a
// store that is down fails over, then fails as unavailable.
func TestTakeSegment(t *testing.T) {
	cl := newCluster(t, 2, server.Token{Token: integrationToken, Name: "test", Tags: []string{"orders", "odd", "nosuch"}})
	if err := cl.store.Create(t.Context(), segment.Tag{Name: "odd", Step: 30, Delta: 3, Remainder: 1}); err != nil {
		t.Fatal(err)
	}
	c := newClient(t, Config{Token: integrationToken}, cl.urls()...)
	ctx := t.Context()
	seen := map[int64]bool{}
	add := func(id int64, from string) {
		if seen[id] {
			t.Fatalf("ID %d handed out twice (now by %s)", id, from)
		}
		seen[id] = true
	}
	for range 20 {
		seg, err := c.TakeSegment(ctx, "orders")
		if err != nil {
			t.Fatal(err)
		}
		if seg.Stride != 1 || seg.Count() != 1000 || seg.Tag != "orders" {
			t.Fatalf("segment of orders (step 1000): %+v, %d IDs", seg, seg.Count())
		}
		n := int64(0)
		for id := range seg.All() {
			add(id, "TakeSegment")
			n++
		}
		if n != seg.Count() {
			t.Fatalf("All yielded %d IDs, Count says %d", n, seg.Count())
		}
		ids, err := c.NextSegmentIDs(ctx, "orders", 7)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range ids {
			add(id, "NextSegmentIDs")
		}
	}
	seg, err := c.TakeSegment(ctx, "odd")
	if err != nil || seg.Stride != 3 || seg.First%3 != 1 || seg.Count() != 10 {
		t.Fatalf("segment of odd (step 30, delta 3, remainder 1): %+v, %v", seg, err)
	}
	for id := range seg.All() {
		if id%3 != 1 {
			t.Fatalf("ID %d of odd is not ≡ 1 (mod 3)", id)
		}
	}
	if _, err := c.TakeSegment(ctx, "nosuch"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("an unknown tag: %v, want ErrNotFound", err)
	}
	anon := newClient(t, Config{}, cl.urls()...)
	if _, err := anon.TakeSegment(ctx, "orders"); !errors.Is(err, ErrPermissionDenied) {
		t.Fatalf("without a token: %v, want ErrPermissionDenied", err)
	}
	cl.store.Cut()
	if _, err := c.TakeSegment(ctx, "orders"); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("store down: %v, want ErrUnavailable", err)
	}
	cl.store.Heal()
	if _, err := c.TakeSegment(ctx, ""); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("no tag: %v", err)
	}
}

// TakeSegment reads a Tinyid server's answers too (a fake of its JSON, for
// the client's reading of it): codes 5 and 6 without flakeid's header are
// permission_denied (returned at once) and unavailable (the next endpoint
// is tried); a segment that does not make a run of IDs is refused.
func TestTakeSegmentTinyidAnswers(t *testing.T) {
	var calls atomic.Int64
	answer := func(body string) string {
		hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			calls.Add(1)
			if r.URL.Path != "/tinyid/id/nextSegmentId" || r.URL.Query().Get("bizType") != "test" {
				http.NotFound(w, r)
				return
			}
			fmt.Fprint(w, body)
		}))
		t.Cleanup(hs.Close)
		return hs.URL
	}
	good := answer(`{"data":{"currentId":100,"loadingId":120,"maxId":200,"delta":2,"remainder":0,"bizType":"test"},"code":200,"message":""}`)
	down := answer(`{"data":null,"code":6,"message":"sys error"}`)
	refused := answer(`{"data":null,"code":5,"message":"token is error"}`)
	broken := answer(`{"data":{"currentId":100,"loadingId":120,"maxId":201,"delta":2,"remainder":0},"code":200,"message":""}`)

	seg, err := newClient(t, Config{}, down, good).TakeSegment(t.Context(), "test")
	if err != nil || seg.First != 102 || seg.Last != 200 || seg.Stride != 2 || seg.Count() != 50 {
		t.Fatalf("after a Tinyid sys error, the next endpoint: %+v, %v", seg, err)
	}
	calls.Store(0)
	if _, err := newClient(t, Config{}, refused, good).TakeSegment(t.Context(), "test"); !errors.Is(err, ErrPermissionDenied) || calls.Load() != 1 {
		t.Fatalf("a token Tinyid refuses: %v after %d calls; want ErrPermissionDenied at once", err, calls.Load())
	}
	if _, err := newClient(t, Config{MaxAttempts: 3}, broken).TakeSegment(t.Context(), "test"); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("a segment that is not a run of IDs: %v", err)
	}
}
