package server

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"connectrpc.com/connect"

	flakeidv1 "github.com/flakeid/flakeid/gen/flakeid/v1"
	"github.com/flakeid/flakeid/segment"
)

// TestTagsDeleteHTTP: DELETE /v1/segment/tags/{tag} takes a tag out of
// service (404 for its IDs, gone from the list, a second DELETE 404), and
// creating it again continues above every ID it handed out; a body, a bad
// name and a token without admin rights are refused, deleting nothing.
func TestTagsDeleteHTTP(t *testing.T) {
	t.Parallel()
	const admin, user = "admin-token-0123456789", "user-token-0123456789"
	f := newFixture(t, func(c *Config) {
		c.Tokens = []Token{{Name: "admin", Token: admin, Admin: true, Tags: []string{"*"}}, {Name: "user", Token: user, Tags: []string{"*"}}}
	})
	do := func(method, path, body, token string) (int, string) {
		t.Helper()
		var h []string
		if token != "" {
			h = []string{"Authorization", "Bearer " + token}
		}
		r := f.do(t, method, path, body, h...)
		return r.status, r.body
	}
	next := func() int64 {
		t.Helper()
		code, body := do("GET", "/v1/segment/invoices/next?count=3", "", user)
		var v struct{ IDs []string }
		if code != 200 || json.Unmarshal([]byte(body), &v) != nil || len(v.IDs) != 3 {
			t.Fatalf("next: %d %s", code, body)
		}
		n, _ := strconv.ParseInt(v.IDs[2], 10, 64)
		return n
	}
	if code, body := do("POST", "/v1/segment/tags", `{"tag":"invoices","step":10}`, admin); code != 201 {
		t.Fatalf("create: %d %s", code, body)
	}
	last := next()
	for _, tc := range []struct {
		path, body, token string
		code              int
		want              string
	}{
		{"/v1/segment/tags/invoices", "", user, 403, "permission_denied"},
		{"/v1/segment/tags/invoices", "", "", 401, "unauthenticated"},
		{"/v1/segment/tags/invoices", `{"force":true}`, admin, 400, "DELETE takes no body"},
		{"/v1/segment/tags/bad%20tag", "", admin, 400, "invalid"},
		{"/v1/segment/tags/nope", "", admin, 404, "not_found"},
	} {
		if code, body := do("DELETE", tc.path, tc.body, tc.token); code != tc.code || !strings.Contains(body, tc.want) {
			t.Errorf("DELETE %s (body %q): %d %s, want %d %s", tc.path, tc.body, code, body, tc.code, tc.want)
		}
	}
	if got := next(); got <= last { // the refusals deleted nothing
		t.Fatalf("after refused deletes: %d, want above %d", got, last)
	} else {
		last = got
	}
	if code, body := do("DELETE", "/v1/segment/tags/invoices", "", admin); code != 200 || body != `{"tag":"invoices","deleted":true}`+"\n" {
		t.Fatalf("DELETE: %d %s", code, body)
	}
	if code, body := do("GET", "/v1/segment/invoices/next", "", user); code != 404 {
		t.Errorf("next after DELETE: %d %s, want 404", code, body)
	}
	if code, body := do("GET", "/v1/segment/tags", "", admin); code != 200 || strings.Contains(body, "invoices") {
		t.Errorf("list after DELETE: %d %s", code, body)
	}
	if code, body := do("DELETE", "/v1/segment/tags/invoices", "", admin); code != 404 {
		t.Errorf("second DELETE: %d %s, want 404", code, body)
	}
	code, body := do("POST", "/v1/segment/tags", `{"tag":"invoices","step":10,"max_id":1}`, admin)
	var row struct {
		MaxID string `json:"max_id"`
	}
	if code != 201 || json.Unmarshal([]byte(body), &row) != nil {
		t.Fatalf("create again: %d %s", code, body)
	}
	if m, _ := strconv.ParseInt(row.MaxID, 10, 64); m <= last {
		t.Errorf("created again with max_id %d, want above %d (the kept mark)", m, last)
	}
	if got := next(); got <= last {
		t.Errorf("next after creating again: %d, want above %d", got, last)
	}
}

// TestTagsDeleteRESP: a RESP connection that used a tag gets its IDs no
// more once the tag is deleted (an error, nothing taken), and, on the same
// connection, IDs above every earlier one once it is created again.
func TestTagsDeleteRESP(t *testing.T) {
	t.Parallel()
	e := newRESPEnv(t, nil, nil)
	c := e.dial(t)
	var last int64
	for range 3 {
		last = wantInt(t, "INCR orders", c.do(t, "INCR", "orders"))
	}
	if err := e.segs.Delete(t.Context(), "orders"); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "INCR orders after the delete", c.do(t, "INCR", "orders"), "ERR", "orders")
	wantErr(t, "ID.NEXT orders after the delete", c.do(t, "ID.NEXT", "orders", "2"), "ERR", "orders")
	if err := e.segs.Create(t.Context(), segment.Tag{Name: "orders", Step: 1000}); err != nil {
		t.Fatal(err)
	}
	if id := wantInt(t, "INCR orders created again", c.do(t, "INCR", "orders")); id <= last {
		t.Errorf("INCR orders created again: %d, want above %d", id, last)
	}
}

// TestTagsDeleteConnect: DeleteTag over Connect, gRPC and gRPC-Web deletes
// as the HTTP API does: admin tokens only, NotFound once deleted, and the
// tag created again continues above.
func TestTagsDeleteConnect(t *testing.T) {
	t.Parallel()
	const admin, user = "admin-token-0123456789", "user-token-0123456789"
	e := newRPCEnv(t, func(c *Config) {
		c.Tokens = []Token{{Name: "admin", Token: admin, Admin: true, Tags: []string{"*"}}, {Name: "user", Token: user, Tags: []string{"*"}}}
	})
	for i, p := range rpcProtocols() {
		if p.name == "connect-get" {
			continue
		}
		tag := fmt.Sprintf("del-%d", i)
		if err := e.segs.Create(t.Context(), segment.Tag{Name: tag, Step: 10}); err != nil {
			t.Fatal(err)
		}
		c := e.idClient(p)
		res, err := c.NextSegment(t.Context(), withToken(&flakeidv1.NextSegmentRequest{Tag: tag, Count: 5}, user))
		if err != nil {
			t.Fatalf("%s: NextSegment: %v", p.name, err)
		}
		rs := res.Msg.GetRanges()
		last := rs[len(rs)-1].GetFirst() + rs[len(rs)-1].GetCount() - 1
		_, err = c.DeleteTag(t.Context(), withToken(&flakeidv1.DeleteTagRequest{Tag: tag}, user))
		wantCode(t, err, connect.CodePermissionDenied, "")
		_, err = c.DeleteTag(t.Context(), withToken(&flakeidv1.DeleteTagRequest{Tag: "bad tag"}, admin))
		wantCode(t, err, connect.CodeInvalidArgument, "")
		if d, err := c.DeleteTag(t.Context(), withToken(&flakeidv1.DeleteTagRequest{Tag: tag}, admin)); err != nil || d.Msg.GetTag() != tag {
			t.Fatalf("%s: DeleteTag: %v %v", p.name, d, err)
		}
		_, err = c.NextSegment(t.Context(), withToken(&flakeidv1.NextSegmentRequest{Tag: tag}, user))
		wantCode(t, err, connect.CodeNotFound, tag)
		_, err = c.DeleteTag(t.Context(), withToken(&flakeidv1.DeleteTagRequest{Tag: tag}, admin))
		wantCode(t, err, connect.CodeNotFound, tag)
		if err := e.segs.Create(t.Context(), segment.Tag{Name: tag, Step: 10}); err != nil {
			t.Fatal(err)
		}
		res, err = c.NextSegment(t.Context(), withToken(&flakeidv1.NextSegmentRequest{Tag: tag}, user))
		if err != nil || res.Msg.GetRanges()[0].GetFirst() <= last {
			t.Fatalf("%s: NextSegment after creating again: %v %v, want above %d", p.name, res, err, last)
		}
	}
}
