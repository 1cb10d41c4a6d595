package server

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
)

// openapiRouter is the document loaded once for the package's tests.
type openapiRouter struct {
	once   sync.Once
	router routers.Router
	err    error
}

func (o *openapiRouter) get(t testing.TB) routers.Router {
	t.Helper()
	o.once.Do(func() {
		loader := openapi3.NewLoader()
		doc, err := loader.LoadFromData(openapiDocument)
		if err != nil {
			o.err = err
			return
		}
		if err := doc.Validate(context.Background()); err != nil {
			o.err = err
			return
		}
		o.router, o.err = legacy.NewRouter(doc)
	})
	if o.err != nil {
		t.Fatalf("server/openapi/openapi.json: %v", o.err)
	}
	return o.router
}

var theOpenAPI openapiRouter

// undocumented are the paths outside the HTTP/JSON API's document: Connect
// and gRPC (described by the .proto), the console, the test clock.
func undocumented(path string) bool {
	return strings.HasPrefix(path, "/flakeid.") || strings.HasPrefix(path, "/grpc.") ||
		path == "/ui" || strings.HasPrefix(path, "/ui/") || strings.HasPrefix(path, "/admin/test/")
}

// checkedByOpenAPI wraps h so that every answer to a request the document
// describes is validated against it — its status among the operation's,
// its content type and body against the schema — failing t otherwise. A
// request for a path the document lacks fails t unless it is undocumented
// by design, or answered 404 or 405 (a test of unknown paths and methods).
func checkedByOpenAPI(t testing.TB, h http.Handler) http.Handler {
	router := theOpenAPI.get(t)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if undocumented(r.URL.Path) || r.Method == http.MethodOptions || r.Method == http.MethodHead {
			h.ServeHTTP(w, r)
			return
		}
		rec := &recordingWriter{ResponseWriter: w, status: http.StatusOK}
		var body []byte
		if r.Body != nil {
			body, _ = io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		h.ServeHTTP(rec, r)

		vr := r.Clone(context.Background())
		vr.Body = io.NopCloser(bytes.NewReader(body))
		if vr.URL.Host == "" {
			vr.URL.Scheme, vr.URL.Host = "http", "127.0.0.1:8080"
		}
		route, params, err := router.FindRoute(vr)
		if err != nil {
			if rec.status == http.StatusNotFound || rec.status == http.StatusMethodNotAllowed {
				return
			}
			t.Errorf("openapi: %s %s answered %d, but the document has no such operation: %v", r.Method, r.URL, rec.status, err)
			return
		}
		in := &openapi3filter.ResponseValidationInput{
			RequestValidationInput: &openapi3filter.RequestValidationInput{Request: vr, PathParams: params, Route: route,
				Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}},
			Status:  rec.status,
			Header:  rec.Header(),
			Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
		}
		in.SetBodyBytes(rec.body.Bytes())
		if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
			var me openapi3.MultiError
			msg := err.Error()
			if errors.As(err, &me) {
				msg = me.Error()
			}
			t.Errorf("openapi: %s %s answered %d %s %q, which the document does not allow: %s",
				r.Method, r.URL, rec.status, rec.Header().Get("Content-Type"), clipBody(rec.body.Bytes()), msg)
		}
	})
}

func clipBody(b []byte) string {
	if len(b) > 300 {
		return string(b[:300]) + "…"
	}
	return string(b)
}

// recordingWriter passes an answer through and keeps its status and body.
type recordingWriter struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
	wrote  bool
}

func (w *recordingWriter) WriteHeader(code int) {
	if !w.wrote {
		w.status, w.wrote = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *recordingWriter) Write(b []byte) (int, error) {
	w.wrote = true
	w.body.Write(b)
	return w.ResponseWriter.Write(b)
}

func (w *recordingWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// TestOpenAPIDocument: the document is valid OpenAPI 3.1, served at
// /openapi.json as it is, the same as docs/openapi.json, and describes
// every route of the JSON API, each answer of which the handler tests
// check against it (newFixture).
func TestOpenAPIDocument(t *testing.T) {
	t.Parallel()
	theOpenAPI.get(t)
	doc, err := openapi3.NewLoader().LoadFromData(openapiDocument)
	if err != nil {
		t.Fatal(err)
	}
	if !doc.IsOpenAPI31OrLater() {
		t.Errorf("openapi %q, want 3.1", doc.OpenAPI)
	}
	docs, err := os.ReadFile("../docs/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(docs, openapiDocument) {
		t.Errorf("docs/openapi.json differs from server/openapi/openapi.json: copy it")
	}
	f := newFixture(t, nil)
	r := f.do(t, "GET", "/openapi.json", "")
	if r.status != 200 || r.body != string(openapiDocument) {
		t.Errorf("GET /openapi.json: %d, %d bytes", r.status, len(r.body))
	}
	// Every path the server routes is in the document (or undocumented
	// by design).
	for _, p := range []string{"GET /v1/snowflake/next", "GET /v1/segment/x/next", "GET /v1/decode/5", "GET /v1/segment/tags",
		"POST /v1/segment/tags", "PATCH /v1/segment/tags/x", "POST /v1/segment/tags/x/resume", "GET /v1/status", "GET /v1/layout",
		"GET /api/snowflake/get/x", "GET /api/segment/get/x", "GET /decodeSnowflakeId", "GET /healthz", "GET /readyz",
		"GET /metrics", "GET /openapi.json"} {
		method, path, _ := strings.Cut(p, " ")
		req := httptest.NewRequest(method, "http://127.0.0.1:8080"+path, nil)
		if _, _, err := theOpenAPI.get(t).FindRoute(req); err != nil {
			t.Errorf("the document has no path for %s: %v", p, err)
		}
	}
	// A sweep of answers, good and bad, each checked by the fixture.
	for _, q := range []struct{ method, path, body string }{
		{"GET", "/v1/snowflake/next?count=3", ""}, {"GET", "/v1/snowflake/next?count=3&format=ranges", ""},
		{"GET", "/v1/snowflake/next?count=0", ""}, {"GET", "/v1/segment/orders/next?count=2", ""},
		{"GET", "/v1/segment/orders/next?format=ranges&count=5", ""}, {"GET", "/v1/segment/nope/next", ""},
		{"GET", "/v1/decode/5", ""}, {"GET", "/v1/decode/x", ""}, {"GET", "/v1/segment/tags", ""},
		{"POST", "/v1/segment/tags", `{"tag":"invoices","step":10,"description":"d"}`}, {"POST", "/v1/segment/tags", `{"tag":"orders"}`},
		{"POST", "/v1/segment/tags", `{"tag":"bad tag"}`}, {"PATCH", "/v1/segment/tags/invoices", `{"step":20}`},
		{"PATCH", "/v1/segment/tags/nope", `{"step":20}`}, {"POST", "/v1/segment/tags/invoices/resume", `{}`},
		{"GET", "/v1/status", ""}, {"GET", "/v1/layout?worker_bits=6", ""}, {"GET", "/v1/layout?worker_bits=99", ""},
		{"GET", "/api/snowflake/get/x", ""}, {"GET", "/api/segment/get/orders", ""}, {"GET", "/decodeSnowflakeId?snowflakeId=5", ""},
		{"GET", "/decodeSnowflakeId", ""}, {"GET", "/healthz", ""}, {"GET", "/readyz", ""}, {"GET", "/metrics", ""},
	} {
		f.do(t, q.method, q.path, q.body)
	}
}

// TestOpenAPICatchesAWrongAnswer: the check fails a test whose answer the
// document does not allow (here, an ID as a JSON number).
func TestOpenAPICatchesAWrongAnswer(t *testing.T) {
	t.Parallel()
	wrong := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"ids":[123]}`)
	})
	ft := &fakeT{TB: t}
	hs := httptest.NewServer(checkedByOpenAPI(ft, wrong))
	defer hs.Close()
	resp, err := http.Get(hs.URL + "/v1/snowflake/next")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if len(ft.errors) == 0 {
		t.Fatal("an ID as a JSON number passed the check")
	}
}

// fakeT records Errorf instead of failing.
type fakeT struct {
	testing.TB
	mu     sync.Mutex
	errors []string
}

func (f *fakeT) Errorf(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.errors = append(f.errors, format)
}
