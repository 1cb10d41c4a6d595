package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	flakeidv1 "github.com/flakeid/flakeid/gen/flakeid/v1"
	"github.com/flakeid/flakeid/gen/flakeid/v1/flakeidv1connect"
	"github.com/flakeid/flakeid/idview"
	"github.com/flakeid/flakeid/segment"
	"github.com/flakeid/flakeid/snowflake"
)

// maxRPCRequest bounds a Connect/gRPC request message; every request of the
// service is a few bytes.
const maxRPCRequest = 64 << 10

// connectRoutes mounts the Connect handlers on mux: flakeid.v1.IDService
// (Connect, gRPC and gRPC-Web, with auth and request metrics) and
// grpc.health.v1.Health (open, like /healthz). Both read requests with the
// strict codecs (rpcCodecs) and answer what connect-go refuses before it
// dispatches in the Connect error shape (rpcPaths).
func (s *Server) connectRoutes(mux *http.ServeMux) {
	path, h := flakeidv1connect.NewIDServiceHandler(idService{s},
		connect.WithInterceptors(rpcInterceptor{s}),
		connect.WithReadMaxBytes(maxRPCRequest), rpcCodecs())
	mux.Handle(path, rpcPaths(h, flakeidv1connect.IDServiceNextSnowflakeProcedure,
		flakeidv1connect.IDServiceStreamSnowflakeProcedure, flakeidv1connect.IDServiceNextSegmentProcedure,
		flakeidv1connect.IDServiceDecodeProcedure, flakeidv1connect.IDServiceDeleteTagProcedure,
		flakeidv1connect.IDServiceCreateTagProcedure, flakeidv1connect.IDServiceDecodeNumberProcedure,
		flakeidv1connect.IDServiceBoundsProcedure, flakeidv1connect.IDServiceAcquireLeaseProcedure,
		flakeidv1connect.IDServiceRenewLeaseProcedure, flakeidv1connect.IDServiceReleaseLeaseProcedure))
	s.healthRoutes(mux)
	s.reflectionRoutes(mux)
}

// rpcError is the Connect protocol's error body: {"code","message"}.
type rpcError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// rpcPaths serves the procedures of one service with h, and answers as
// JSON {"code","message"} (the Connect protocol's error shape, which
// Connect clients parse; Content-Type application/json) what connect-go
// would answer with an empty or plain-text body: a procedure the service
// does not have (404 not_found), a method it does not take (405
// method_not_allowed, with Allow), a Content-Type no protocol of it reads
// (415 unsupported_media_type, with Accept-Post). Everything else is
// connect-go's answer, untouched.
func rpcPaths(h http.Handler, procedures ...string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !slices.Contains(procedures, r.URL.Path) {
			writeRPCError(w, http.StatusNotFound, codeNotFound, fmt.Sprintf("no such procedure: %s; the service has %s",
				clip(r.URL.Path), list(procedures, "and")))
			return
		}
		h.ServeHTTP(&rpcWriter{ResponseWriter: w, r: r}, r)
	})
}

func writeRPCError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, rpcError{Code: code, Message: msg})
}

// rpcWriter passes a Connect handler's answer through, except a 405 or 415
// that connect-go writes without a body, which it answers as JSON.
type rpcWriter struct {
	http.ResponseWriter
	r       *http.Request
	started bool // a status or body went out
	swallow bool // the handler's own 405/415 body is dropped
}

// WriteHeader implements http.ResponseWriter.
func (w *rpcWriter) WriteHeader(status int) {
	if !w.started {
		w.started = true
		h := w.Header()
		if (status == http.StatusMethodNotAllowed || status == http.StatusUnsupportedMediaType) && h.Get("Content-Type") == "" {
			w.swallow = true
			if status == http.StatusMethodNotAllowed {
				writeRPCError(w.ResponseWriter, status, codeMethod, fmt.Sprintf("method %s is not allowed on %s; use %s",
					clip(w.r.Method), w.r.URL.Path, h.Get("Allow")))
				return
			}
			msg := fmt.Sprintf("a GET request of %s has no body: send the message in the query (Connect GET)", w.r.URL.Path)
			if accept := h.Get("Accept-Post"); accept != "" {
				ct := w.r.Header.Get("Content-Type")
				if ct == "" {
					ct = "none"
				}
				msg = fmt.Sprintf("Content-Type %q is not supported on %s: send one of %s", clip(ct), w.r.URL.Path, accept)
			}
			writeRPCError(w.ResponseWriter, status, codeMediaType, msg)
			return
		}
	}
	w.ResponseWriter.WriteHeader(status)
}

// Write implements http.ResponseWriter.
func (w *rpcWriter) Write(b []byte) (int, error) {
	if w.swallow {
		return len(b), nil
	}
	w.started = true
	return w.ResponseWriter.Write(b)
}

// Flush implements http.Flusher, which streams need.
func (w *rpcWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap gives http.ResponseController the writer underneath.
func (w *rpcWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// idService implements flakeidv1connect.IDServiceHandler. It is a type of
// its own so that the RPC methods stay off Server's exported API.
type idService struct{ s *Server }

var _ flakeidv1connect.IDServiceHandler = idService{}

// NextSnowflake implements flakeidv1connect.IDServiceHandler.
func (x idService) NextSnowflake(_ context.Context, req *connect.Request[flakeidv1.NextSnowflakeRequest]) (*connect.Response[flakeidv1.NextSnowflakeResponse], error) {
	n := req.Msg.GetCount()
	if n == 0 {
		n = 1
	}
	f, prefix, err := x.s.rpcFormat(req.Msg.GetFormat(), req.Msg.GetPrefix())
	if err != nil {
		return nil, connectError(err)
	}
	batches, err := x.s.nextSnowflake(n, nil)
	if err != nil {
		return nil, connectError(err)
	}
	res := &flakeidv1.NextSnowflakeResponse{}
	if err := x.s.fillSnowflake(res, batches, f, prefix); err != nil {
		return nil, connectError(err)
	}
	return connect.NewResponse(res), nil
}

// StreamSnowflake implements flakeidv1connect.IDServiceHandler.
func (x idService) StreamSnowflake(ctx context.Context, req *connect.Request[flakeidv1.StreamSnowflakeRequest], stream *connect.ServerStream[flakeidv1.NextSnowflakeResponse]) error {
	s := x.s
	total, batch := req.Msg.GetCount(), req.Msg.GetBatch()
	switch {
	case total < 0:
		return connectError(apiErrorf(http.StatusBadRequest, codeInvalid, "count %d is negative: want 0 (until cancelled) or more", total))
	case batch < 0:
		return connectError(apiErrorf(http.StatusBadRequest, codeInvalid, "batch %d is negative: want 0 (the server's default, %d) or more", batch, s.cfg.StreamBatch))
	case batch == 0:
		batch = int64(s.cfg.StreamBatch)
	}
	batch = min(batch, int64(s.cfg.MaxCount))
	f, prefix, err := s.rpcFormat(req.Msg.GetFormat(), req.Msg.GetPrefix())
	if err != nil {
		return connectError(err)
	}
	var (
		batches []snowflake.Batch
		res     flakeidv1.NextSnowflakeResponse // reused: Send marshals at once
	)
	for sent := int64(0); total == 0 || sent < total; {
		// A stream ends when the client cancels (ctx), or when the server
		// drains: an endless stream would otherwise hold Shutdown to its
		// timeout.
		select {
		case <-ctx.Done():
			return connect.NewError(connect.CodeCanceled, ctx.Err())
		case <-s.draining:
			return connectError(apiErrorf(http.StatusServiceUnavailable, codeUnavailable, "server is shutting down after %d IDs", sent))
		default:
		}
		n := batch
		if total > 0 {
			n = min(n, total-sent)
		}
		if batches, err = s.nextSnowflake(n, batches[:0]); err != nil {
			return connectError(err)
		}
		if err := s.fillSnowflake(&res, batches, f, prefix); err != nil {
			return connectError(err)
		}
		if err := stream.Send(&res); err != nil {
			return err
		}
		sent += n
	}
	return nil
}

// rpcFormat reads an RPC's format and prefix: the UUID form (0 for the
// IDs themselves) and the TypeID prefix.
func (s *Server) rpcFormat(format, prefix string) (idview.Form, string, error) {
	if format != "" && idview.FormOf(format) == 0 {
		return 0, "", apiErrorf(http.StatusBadRequest, codeInvalid, "format %q: want uuid7, typeid or ulid (or none, for the IDs)", clip(format))
	}
	return s.uuids.query(format, prefix, prefix != "")
}

// fillSnowflake sets res to batches, reusing res's ranges (or its masked
// texts, when the server masks Snowflake IDs), or to their texts in form f
// when f is not 0. The datacenter and worker ids are those the IDs were
// issued under (decoded from the last batch), which may differ from the
// node's status if its lease changed since.
func (s *Server) fillSnowflake(res *flakeidv1.NextSnowflakeResponse, batches []snowflake.Batch, f idview.Form, prefix string) error {
	var rarr [4]run
	var err error
	runs := batchRuns(rarr[:0], batches)
	if f != 0 {
		res.Ranges, res.MaskedIds = res.Ranges[:0], res.MaskedIds[:0]
		if res.Texts, err = s.uuids.texts(res.Texts[:0], runs, f, prefix, s.mask.forSnowflake()); err != nil {
			return err
		}
	} else if res.Ranges, res.MaskedIds, err = s.mask.forSnowflake().fill(res.Ranges, res.MaskedIds, runs); err != nil {
		return err
	}
	res.DatacenterId, res.WorkerId = 0, 0
	if len(batches) == 0 {
		return nil
	}
	if p, err := s.node.Decode(batches[len(batches)-1].First); err == nil {
		res.DatacenterId, res.WorkerId = p.Datacenter, p.Worker
	} else {
		st := s.node.Status()
		res.DatacenterId, res.WorkerId = st.DatacenterID, st.WorkerID
	}
	return nil
}

// fill sets an RPC answer's IDs from runs, reusing the messages and
// strings of rs and texts: the masked texts when m is not nil, else the
// ranges (the other field comes back empty). A stride of 1 is sent as 0
// (omitted on the wire; the proto says 0 means 1).
func (m *masking) fill(rs []*flakeidv1.IDRange, texts []string, runs []run) ([]*flakeidv1.IDRange, []string, error) {
	if m != nil {
		texts, err := m.texts(texts[:0], runs)
		return rs[:0], texts, err
	}
	for len(rs) < len(runs) {
		rs = append(rs, &flakeidv1.IDRange{})
	}
	rs = rs[:len(runs)]
	for i, rn := range runs {
		rs[i].First, rs[i].Count, rs[i].Stride = rn.first, rn.count, rn.stride
		if rn.stride == 1 {
			rs[i].Stride = 0
		}
	}
	return rs, texts[:0], nil
}

// NextSegment implements flakeidv1connect.IDServiceHandler.
func (x idService) NextSegment(ctx context.Context, req *connect.Request[flakeidv1.NextSegmentRequest]) (*connect.Response[flakeidv1.NextSegmentResponse], error) {
	tag, n := req.Msg.GetTag(), req.Msg.GetCount()
	if n == 0 {
		n = 1
	}
	if err := segment.ValidName(tag); err != nil {
		return nil, connectError(err)
	}
	var numeric bool
	switch f := req.Msg.GetFormat(); f {
	case "":
	case "numeric":
		numeric = true
	default:
		return nil, connectError(apiErrorf(http.StatusBadRequest, codeInvalid, "format %q: want \"\" or numeric (for a series tag)", clip(f)))
	}
	res := &flakeidv1.NextSegmentResponse{Tag: tag}
	numbers := func(nums []segment.Number) error {
		for _, num := range nums {
			res.Numbers = append(res.Numbers, numberText(num, numeric))
		}
		return nil
	}
	if numeric {
		if err := x.s.serveSeriesNext(ctx, tag, idsQuery{n: n, numeric: true}, numbers); err != nil {
			return nil, connectError(err)
		}
		return connect.NewResponse(res), nil
	}
	spans, err := x.s.nextSegment(ctx, tag, n, nil)
	if isSeriesErr(err) {
		if err := x.s.serveSeriesNext(ctx, tag, idsQuery{n: n}, numbers); err != nil {
			return nil, connectError(err)
		}
		return connect.NewResponse(res), nil
	}
	if err != nil {
		return nil, connectError(err)
	}
	if res.Ranges, res.MaskedIds, err = x.s.mask.forTag(tag).fill(nil, nil, spanRuns(nil, spans)); err != nil {
		return nil, connectError(err)
	}
	return connect.NewResponse(res), nil
}

// DeleteTag implements flakeidv1connect.IDServiceHandler: as DELETE
// /v1/segment/tags/{tag}.
func (x idService) DeleteTag(ctx context.Context, req *connect.Request[flakeidv1.DeleteTagRequest]) (*connect.Response[flakeidv1.DeleteTagResponse], error) {
	tag := req.Msg.GetTag()
	if err := segment.ValidName(tag); err != nil {
		return nil, connectError(err)
	}
	a, err := x.s.segments()
	if err != nil {
		return nil, connectError(err)
	}
	if err := a.Delete(ctx, tag); err != nil {
		return nil, connectError(err)
	}
	return connect.NewResponse(&flakeidv1.DeleteTagResponse{Tag: tag}), nil
}

// CreateTag implements flakeidv1connect.IDServiceHandler: as POST
// /v1/segment/tags.
func (x idService) CreateTag(ctx context.Context, req *connect.Request[flakeidv1.CreateTagRequest]) (*connect.Response[flakeidv1.CreateTagResponse], error) {
	a, err := x.s.segments()
	if err != nil {
		return nil, connectError(err)
	}
	m := req.Msg
	if err := segment.ValidName(m.GetTag()); err != nil {
		return nil, connectError(err)
	}
	t := segment.Tag{Name: m.GetTag(), Step: m.GetStep(), Description: m.GetDescription(), MaxID: m.GetMaxId()}
	if t.Step < 0 || t.Step > segment.MaxStep {
		return nil, connectError(apiErrorf(http.StatusBadRequest, codeInvalid, "step %d, want 1–%d (0: the server's default)", t.Step, segment.MaxStep))
	}
	if sr := m.GetSeries(); sr != nil {
		ser := segment.Series{Period: segment.Period(sr.GetPeriod()), TZ: sr.GetTz(), Template: sr.GetTemplate(), Start: sr.GetStart(), Masked: sr.GetMasked()}
		has := map[string]bool{"period": sr.GetPeriod() != "", "template": sr.GetTemplate() != "", "start": sr.Start != nil}
		if err := x.s.prepareSeries(&ser, has); err != nil {
			return nil, connectError(err)
		}
		t.Series = &ser
	}
	if err := a.Create(ctx, t); err != nil {
		return nil, connectError(err)
	}
	row, err := x.s.tagRow(ctx, a, t.Name)
	if err != nil {
		return nil, connectError(err)
	}
	res := &flakeidv1.CreateTagResponse{Tag: row.Name, Step: row.Step, Description: row.Description}
	if ser := row.Series; ser != nil {
		res.Series = &flakeidv1.SeriesSettings{Period: string(ser.Period), Tz: ser.TZ, Template: ser.Template, Start: proto.Int64(ser.Start), Masked: ser.Masked}
		res.Capacity = newSeriesTagFields(row).Capacity
	}
	return connect.NewResponse(res), nil
}

// DecodeNumber implements flakeidv1connect.IDServiceHandler: as GET
// /v1/segment/{tag}/decode/{number}.
func (x idService) DecodeNumber(ctx context.Context, req *connect.Request[flakeidv1.DecodeNumberRequest]) (*connect.Response[flakeidv1.DecodeNumberResponse], error) {
	d, err := x.s.decodeNumber(ctx, req.Msg.GetTag(), req.Msg.GetNumber(), x.s.unmaskCheck(req.Header()))
	if err != nil {
		return nil, connectError(err)
	}
	numeric, _ := strconv.ParseInt(d.Numeric, 10, 64)
	label, _ := strconv.ParseInt(d.Label, 10, 64)
	return connect.NewResponse(&flakeidv1.DecodeNumberResponse{Tag: d.Tag, Number: d.Number, Numeric: numeric, Period: d.Period,
		Label: label, PeriodStart: d.PeriodStart, PeriodEnd: d.PeriodEnd, Counter: d.Counter, Seq: d.Seq, Masked: d.Masked}), nil
}

// Decode implements flakeidv1connect.IDServiceHandler.
func (x idService) Decode(_ context.Context, req *connect.Request[flakeidv1.DecodeRequest]) (*connect.Response[flakeidv1.DecodeResponse], error) {
	in, p, err := x.s.decode(req.Msg.GetId(), req.Msg.GetAs(), x.s.unmaskCheck(req.Header()))
	if err != nil {
		return nil, connectError(err)
	}
	var keyID *uint32
	if in.masked != "" {
		k := uint32(in.keyID)
		keyID = &k
	}
	return connect.NewResponse(&flakeidv1.DecodeResponse{
		Id:         proto.Int64(int64(in.id)),
		Masked:     in.masked,
		KeyId:      keyID,
		Time:       p.Time.UTC().Format("2006-01-02T15:04:05.000Z07:00"),
		UnixMs:     proto.Int64(p.Time.UnixMilli()),
		Tick:       proto.Int64(p.Tick),
		Datacenter: proto.Int64(p.Datacenter),
		Worker:     proto.Int64(p.Worker),
		Sequence:   proto.Int64(p.Sequence),
		Form:       formName(in.form),
		Uuid:       uuidText(in),
		Prefix:     in.prefix,
	}), nil
}

// formName is f's name, or "" for none.
func formName(f idview.Form) string {
	if f == 0 {
		return ""
	}
	return f.String()
}

// uuidText is the UUID of a decoded UUID-shaped text, or "".
func uuidText(in decodeInput) string {
	if in.form == 0 {
		return ""
	}
	return in.uuid.String()
}

// Bounds implements flakeidv1connect.IDServiceHandler.
func (x idService) Bounds(_ context.Context, req *connect.Request[flakeidv1.BoundsRequest]) (*connect.Response[flakeidv1.BoundsResponse], error) {
	b, err := x.s.bounds(req.Msg.GetFrom(), req.Msg.GetTo())
	if err != nil {
		return nil, connectError(err)
	}
	return connect.NewResponse(&flakeidv1.BoundsResponse{Min: int64(b.Min), Max: int64(b.Max), From: b.From, To: b.To,
		Layout: b.Layout, Note: b.Note}), nil
}

// connectCode maps an API error code to Connect's.
func connectCode(code string) connect.Code {
	switch code {
	case codeInvalid:
		return connect.CodeInvalidArgument
	case codeNotFound:
		return connect.CodeNotFound
	case codeExists:
		return connect.CodeAlreadyExists
	case codeUnavailable:
		return connect.CodeUnavailable
	case codeUnauth:
		return connect.CodeUnauthenticated
	case codeForbidden:
		return connect.CodePermissionDenied
	case codeTooLarge:
		return connect.CodeResourceExhausted
	case codeUnsupported:
		return connect.CodeUnimplemented
	case codePrecondition:
		return connect.CodeFailedPrecondition
	case codeCanceled:
		return connect.CodeCanceled
	case codeBodyTooLarge:
		return connect.CodeResourceExhausted
	}
	return connect.CodeInternal
}

// connectError turns err into a *connect.Error with the code classify gives
// it and its message. The *apiError stays wrapped inside, so the metrics
// see its HTTP status.
func connectError(err error) error {
	var ce *connect.Error
	if err == nil || errors.As(err, &ce) {
		return err
	}
	ae := classify(err)
	code := connectCode(ae.Code)
	ce = connect.NewError(code, ae)
	if code == connect.CodeUnavailable {
		ce.Meta().Set("Retry-After", ae.retryAfter())
	}
	return ce
}

// httpStatus is the status an RPC's outcome is counted under in the
// request metrics: the JSON API's status for the same error.
func httpStatus(err error) int {
	if err == nil {
		return http.StatusOK
	}
	var ae *apiError
	if errors.As(err, &ae) {
		return ae.Status
	}
	switch connect.CodeOf(err) {
	case connect.CodeCanceled:
		return 499
	case connect.CodeDeadlineExceeded:
		return http.StatusGatewayTimeout
	case connect.CodeInvalidArgument:
		return http.StatusBadRequest
	case connect.CodeResourceExhausted:
		return http.StatusTooManyRequests // e.g. a message over the read limit
	case connect.CodeUnavailable:
		return http.StatusServiceUnavailable
	case connect.CodeUnimplemented:
		return http.StatusNotImplemented
	}
	return http.StatusInternalServerError
}

// rpcInterceptor authorizes each IDService call (as the JSON API does: the
// Snowflake RPCs need Snowflake permission, NextSegment its tag, Decode is
// open) and counts and times it in the request metrics, by procedure.
type rpcInterceptor struct{ s *Server }

var _ connect.Interceptor = rpcInterceptor{}

// authorize checks the token of a call to procedure; msg is its request
// (nil for a stream, whose message is not read yet).
func (i rpcInterceptor) authorize(procedure string, h http.Header, msg any) error {
	switch procedure {
	case flakeidv1connect.IDServiceNextSnowflakeProcedure, flakeidv1connect.IDServiceStreamSnowflakeProcedure,
		flakeidv1connect.IDServiceAcquireLeaseProcedure, flakeidv1connect.IDServiceRenewLeaseProcedure,
		flakeidv1connect.IDServiceReleaseLeaseProcedure:
		return i.s.authorize(h, "", true, false)
	case flakeidv1connect.IDServiceNextSegmentProcedure:
		req, _ := msg.(*flakeidv1.NextSegmentRequest)
		tag := req.GetTag()
		if err := segment.ValidName(tag); err != nil {
			return err
		}
		return i.s.authorize(h, tag, false, false)
	case flakeidv1connect.IDServiceDecodeProcedure, flakeidv1connect.IDServiceBoundsProcedure:
		return nil
	case flakeidv1connect.IDServiceDeleteTagProcedure, flakeidv1connect.IDServiceCreateTagProcedure:
		return i.s.authorize(h, "", false, true)
	case flakeidv1connect.IDServiceDecodeNumberProcedure:
		req, _ := msg.(*flakeidv1.DecodeNumberRequest)
		tag := req.GetTag()
		if err := segment.ValidName(tag); err != nil {
			return err
		}
		return i.s.authorize(h, tag, false, false)
	}
	// A procedure added later is closed until listed here.
	return i.s.authorize(h, "", true, true)
}

func (i rpcInterceptor) done(procedure string, start time.Time, err error) {
	status := httpStatus(err)
	if status >= 500 && status != http.StatusServiceUnavailable {
		i.s.log.Warn("server: RPC failed", "procedure", procedure, "status", status, "err", err)
	}
	i.s.metrics.requests.WithLabelValues(procedure, strconv.Itoa(status)).Inc()
	i.s.metrics.latency.WithLabelValues(procedure).Observe(time.Since(start).Seconds())
}

// WrapUnary implements connect.Interceptor.
func (i rpcInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (res connect.AnyResponse, err error) {
		start, procedure := time.Now(), req.Spec().Procedure
		defer func() { i.done(procedure, start, err) }()
		if err := i.authorize(procedure, req.Header(), req.Any()); err != nil {
			return nil, connectError(err)
		}
		return next(ctx, req)
	}
}

// WrapStreamingClient implements connect.Interceptor; it is for handlers only.
func (rpcInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

// WrapStreamingHandler implements connect.Interceptor.
func (i rpcInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) (err error) {
		start, procedure := time.Now(), conn.Spec().Procedure
		defer func() { i.done(procedure, start, err) }()
		if err := i.authorize(procedure, conn.RequestHeader(), nil); err != nil {
			return connectError(err)
		}
		return next(ctx, conn)
	}
}
