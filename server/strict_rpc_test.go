package server

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"

	flakeidv1 "github.com/flakeid/flakeid/gen/flakeid/v1"
	"github.com/flakeid/flakeid/gen/flakeid/v1/flakeidv1connect"
)

// rpcTaken is how many IDs the env's server has handed out: Snowflake IDs
// over every generator, and segment IDs of every tag.
func (e *rpcEnv) rpcTaken() (uint64, int64) {
	var seg int64
	for _, st := range e.segs.Stats() {
		seg += st.Issued
	}
	return e.node.Status().Total.Issued, seg
}

// rawRPC posts body to path with Content-Type ct (none when ""), over
// HTTP/1.1, and returns the answer.
func (e *rpcEnv) rawRPC(t *testing.T, method, path, ct, body string) reply {
	t.Helper()
	req, err := http.NewRequest(method, e.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if ct != "" {
		req.Header.Set("Content-Type", ct)
	}
	resp, err := e.ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return reply{resp.StatusCode, resp.Header, string(b)}
}

// wantRPCError checks an answer in the Connect protocol's error shape.
func wantRPCError(t *testing.T, r reply, status int, code, mention string) {
	t.Helper()
	var body struct{ Code, Message string }
	if r.status != status || !strings.HasPrefix(r.header.Get("Content-Type"), "application/json") ||
		json.Unmarshal([]byte(r.body), &body) != nil || body.Code != code || !strings.Contains(body.Message, mention) {
		t.Fatalf("got %d %q %s; want %d JSON {code: %q} mentioning %q", r.status, r.header.Get("Content-Type"), r.body, status, code, mention)
	}
}

// unknownField is a varint field 99, which no message of the service has.
func unknownField() []byte {
	return protowire.AppendVarint(protowire.AppendTag(nil, 99, protowire.VarintType), 1)
}

// TestConnectRefusesUnknownFields: Connect refuses what the JSON API
// refuses, in JSON (an unknown or repeated field) and in binary protobuf
// (an unknown field), over every protocol, before anything is taken.
func TestConnectRefusesUnknownFields(t *testing.T) {
	e := newRPCEnv(t, nil)
	snow, seg := e.rpcTaken()
	for _, c := range []struct{ path, ct, body, mention string }{
		{flakeidv1connect.IDServiceNextSnowflakeProcedure, "application/json", `{"count":3,"bogus":1}`, `unknown field "bogus"`},
		{flakeidv1connect.IDServiceNextSnowflakeProcedure, "application/json; charset=utf-8", `{"count":3,"Count":1}`, `unknown field "Count"`},
		{flakeidv1connect.IDServiceNextSnowflakeProcedure, "application/json", `{"count":3,"count":4}`, `duplicate field "count"`},
		{flakeidv1connect.IDServiceNextSegmentProcedure, "application/json", `{"tag":"orders","count":3,"tags":"x"}`, `unknown field "tags"`},
		{flakeidv1connect.IDServiceNextSegmentProcedure, "application/json", `{"tag":"orders","tag":"orders"}`, `duplicate field "tag"`},
		{flakeidv1connect.IDServiceNextSnowflakeProcedure, "application/json", ``, "empty body"},
		{flakeidv1connect.IDServiceNextSnowflakeProcedure, "application/proto", string(append(protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), 3), unknownField()...)), "unknown field number 99"},
		{healthCheckProcedure, "application/json", `{"service":"","x":1}`, `unknown field "x"`},
	} {
		wantRPCError(t, e.rawRPC(t, "POST", c.path, c.ct, c.body), 400, "invalid_argument", c.mention)
	}
	for _, p := range rpcProtocols() {
		t.Run(p.name, func(t *testing.T) {
			c, ctx := e.idClient(p), t.Context()
			next := &flakeidv1.NextSnowflakeRequest{Count: 5}
			next.ProtoReflect().SetUnknown(unknownField())
			_, err := c.NextSnowflake(ctx, connect.NewRequest(next))
			wantCode(t, err, connect.CodeInvalidArgument, "unknown field number 99")
			segReq := &flakeidv1.NextSegmentRequest{Tag: rpcTag, Count: 5}
			segReq.ProtoReflect().SetUnknown(unknownField())
			_, err = c.NextSegment(ctx, connect.NewRequest(segReq))
			wantCode(t, err, connect.CodeInvalidArgument, "unknown field number 99")
			dec := &flakeidv1.DecodeRequest{Id: "1"}
			dec.ProtoReflect().SetUnknown(unknownField())
			_, err = c.Decode(ctx, connect.NewRequest(dec)) // connect-get: in the query
			wantCode(t, err, connect.CodeInvalidArgument, "unknown field number 99")
			streamReq := &flakeidv1.StreamSnowflakeRequest{Count: 5}
			streamReq.ProtoReflect().SetUnknown(unknownField())
			stream, err := c.StreamSnowflake(ctx, connect.NewRequest(streamReq))
			if err != nil {
				t.Fatal(err)
			}
			if stream.Receive() {
				t.Fatalf("stream with an unknown field sent %v", stream.Msg())
			}
			wantCode(t, stream.Err(), connect.CodeInvalidArgument, "unknown field number 99")
			stream.Close()
		})
	}
	// A stock grpc-go client sees the same.
	msg := &flakeidv1.NextSnowflakeRequest{Count: 5}
	msg.ProtoReflect().SetUnknown(unknownField())
	var res flakeidv1.NextSnowflakeResponse
	if err := e.grpcConn(t).Invoke(t.Context(), flakeidv1connect.IDServiceNextSnowflakeProcedure, msg, &res); status.Code(err) != codes.InvalidArgument {
		t.Errorf("grpc-go with an unknown field: %v", err)
	}
	if s2, g2 := e.rpcTaken(); s2 != snow || g2 != seg {
		t.Errorf("refused calls took IDs: Snowflake %d → %d, segment %d → %d", snow, s2, seg, g2)
	}
	// The same messages without the unknown field work (the codecs still
	// read every protocol).
	for _, p := range rpcProtocols() {
		c := e.idClient(p)
		if _, err := c.NextSnowflake(t.Context(), connect.NewRequest(&flakeidv1.NextSnowflakeRequest{Count: 5})); err != nil {
			t.Errorf("%s: %v", p.name, err)
		}
		if _, err := c.Decode(t.Context(), connect.NewRequest(&flakeidv1.DecodeRequest{Id: "1"})); err != nil {
			t.Errorf("%s decode: %v", p.name, err)
		}
	}
	if r := e.rawRPC(t, "POST", flakeidv1connect.IDServiceNextSnowflakeProcedure, "application/json", `{"count":"2"}`); r.status != 200 {
		t.Errorf("JSON with count as a string (protojson's int64): %d %s", r.status, r.body)
	}
	if s2, _ := e.rpcTaken(); s2 != snow+4*5+2 {
		t.Errorf("Snowflake IDs taken %d → %d, want %d more", snow, s2, 4*5+2)
	}
}

// TestConnectPreDispatchErrors: what connect-go refuses before it
// dispatches (a procedure the service lacks, a method, a Content-Type) is
// answered in the Connect error shape, which Connect clients read; nothing
// is taken.
func TestConnectPreDispatchErrors(t *testing.T) {
	e := newRPCEnv(t, nil)
	snow, seg := e.rpcTaken()
	next := flakeidv1connect.IDServiceNextSnowflakeProcedure
	for _, c := range []struct {
		method, path, ct, body string
		status                 int
		code, mention, header  string
	}{
		{"POST", "/flakeid.v1.IDService/Nope", "application/json", `{}`, 404, codeNotFound, "no such procedure: /flakeid.v1.IDService/Nope; the service has /flakeid.v1.IDService/NextSnowflake", ""},
		{"POST", "/flakeid.v1.IDService/", "application/proto", ``, 404, codeNotFound, "no such procedure", ""},
		{"POST", "/grpc.health.v1.Health/Nope", "application/grpc", ``, 404, codeNotFound, "/grpc.health.v1.Health/Check and /grpc.health.v1.Health/Watch", ""},
		{"GET", next, "", ``, 405, codeMethod, "method GET is not allowed on " + next + "; use POST", "Allow"},
		{"HEAD", next, "", ``, 405, "", "", "Allow"},
		{"PUT", flakeidv1connect.IDServiceDecodeProcedure, "application/json", `{}`, 405, codeMethod, "use GET, POST", "Allow"},
		{"GET", healthWatchProcedure, "", ``, 405, codeMethod, "use POST", "Allow"},
		{"POST", next, "text/plain", `{"count":3}`, 415, codeMediaType, `Content-Type "text/plain" is not supported on ` + next + ": send one of", "Accept-Post"},
		{"POST", next, "", `{"count":3}`, 415, codeMediaType, `Content-Type "none"`, "Accept-Post"},
		{"POST", next, "application/connect+json", `{"count":3}`, 415, codeMediaType, "application/json", "Accept-Post"},
		{"POST", flakeidv1connect.IDServiceStreamSnowflakeProcedure, "application/json", `{"count":3}`, 415, codeMediaType, "application/connect+json", "Accept-Post"},
		{"GET", flakeidv1connect.IDServiceDecodeProcedure + "?encoding=json&message=%7B%7D", "", `{"id":"1"}`, 415, codeMediaType, "has no body", ""},
	} {
		r := e.rawRPC(t, c.method, c.path, c.ct, c.body)
		if c.method == "HEAD" {
			if r.status != c.status || r.header.Get(c.header) == "" || !strings.HasPrefix(r.header.Get("Content-Type"), "application/json") {
				t.Errorf("HEAD %s: %d %v", c.path, r.status, r.header)
			}
			continue
		}
		wantRPCError(t, r, c.status, c.code, c.mention)
		if c.header != "" && r.header.Get(c.header) == "" {
			t.Errorf("%s %s: no %s header", c.method, c.path, c.header)
		}
	}
	// Connect clients read the code and message.
	nope := connect.NewClient[flakeidv1.DecodeRequest, flakeidv1.DecodeResponse](e.client, e.url+"/flakeid.v1.IDService/Nope")
	_, err := nope.CallUnary(t.Context(), connect.NewRequest(&flakeidv1.DecodeRequest{Id: "1"}))
	wantCode(t, err, connect.CodeNotFound, "no such procedure")
	// gRPC clients see an unknown method as Unimplemented (from the 404).
	err = e.grpcConn(t).Invoke(t.Context(), "/grpc.health.v1.Health/Nope", &healthpb.HealthCheckRequest{}, &healthpb.HealthCheckResponse{})
	if status.Code(err) != codes.Unimplemented {
		t.Errorf("grpc-go, unknown method: %v", err)
	}
	// A message over the read limit is refused by Connect as
	// resource_exhausted, with a JSON error body.
	big := `{"count":3,"bogus":"` + strings.Repeat("x", maxRPCRequest) + `"}`
	wantRPCError(t, e.rawRPC(t, "POST", next, "application/json", big), http.StatusTooManyRequests, "resource_exhausted", "larger than configured max 65536")
	if s2, g2 := e.rpcTaken(); s2 != snow || g2 != seg {
		t.Errorf("refused calls took IDs: Snowflake %d → %d, segment %d → %d", snow, s2, seg, g2)
	}
}
