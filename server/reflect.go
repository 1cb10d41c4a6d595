package server

import (
	"net/http"

	connectv2 "connectrpc.com/connect/v2"
	"connectrpc.com/connect/v2/connecthttp"
	"connectrpc.com/grpcreflect/v2"

	"github.com/flakeid/flakeid/gen/flakeid/v1/flakeidv1connect"
)

// reflectionRoutes mounts gRPC server reflection (grpc.reflection.v1 and
// v1alpha) on mux, so that grpcurl and `buf curl` call the services without
// a copy of the schema. It is open, like the health service: it tells the
// schema, which is public (proto/), and hands out nothing.
func (s *Server) reflectionRoutes(mux *http.ServeMux) {
	rs := connectv2.NewServer()
	// The services reflection lists: what `grpcurl -plaintext host:port
	// list` prints.
	grpcreflect.Register(rs, grpcreflect.WithNamer(grpcreflect.NamerFunc(func() []string {
		return []string{flakeidv1connect.IDServiceName, "grpc.health.v1.Health",
			grpcreflect.ReflectV1ServiceName, grpcreflect.ReflectV1AlphaServiceName}
	})))
	connecthttp.Mount(mux, rs, connecthttp.WithReadMaxBytes(maxRPCRequest))
}
