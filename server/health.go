package server

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"connectrpc.com/connect"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/flakeid/flakeid/gen/flakeid/v1/flakeidv1connect"
)

// The standard gRPC health service (grpc.health.v1.Health), served with
// Connect so that it speaks gRPC, gRPC-Web and Connect like the ID service.
const (
	healthServicePath    = "/grpc.health.v1.Health/"
	healthCheckProcedure = "/grpc.health.v1.Health/Check"
	healthWatchProcedure = "/grpc.health.v1.Health/Watch"
	// healthPoll is how often Watch reads Ready for changes.
	healthPoll = time.Second
)

// healthRoutes mounts the health service on mux. It is open, like /healthz
// and /readyz: load balancers and orchestrators probe without tokens.
func (s *Server) healthRoutes(mux *http.ServeMux) {
	check := connect.NewUnaryHandler(healthCheckProcedure, s.healthCheck,
		connect.WithIdempotency(connect.IdempotencyNoSideEffects), connect.WithReadMaxBytes(maxRPCRequest), rpcCodecs())
	watch := connect.NewServerStreamHandler(healthWatchProcedure, s.healthWatch,
		connect.WithReadMaxBytes(maxRPCRequest), rpcCodecs())
	mux.Handle(healthServicePath, rpcPaths(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == healthCheckProcedure {
			check.ServeHTTP(w, r)
		} else {
			watch.ServeHTTP(w, r)
		}
	}), healthCheckProcedure, healthWatchProcedure))
}

// healthStatus is the status of service: "" (the whole server) and the ID
// service are SERVING while Ready is nil and NOT_SERVING otherwise; any
// other service is SERVICE_UNKNOWN.
func (s *Server) healthStatus(service string) healthpb.HealthCheckResponse_ServingStatus {
	switch service {
	case "", flakeidv1connect.IDServiceName:
		if s.Ready() == nil {
			return healthpb.HealthCheckResponse_SERVING
		}
		return healthpb.HealthCheckResponse_NOT_SERVING
	}
	return healthpb.HealthCheckResponse_SERVICE_UNKNOWN
}

// healthCheck answers Check; an unknown service is NotFound, as the
// protocol says.
func (s *Server) healthCheck(_ context.Context, req *connect.Request[healthpb.HealthCheckRequest]) (*connect.Response[healthpb.HealthCheckResponse], error) {
	st := s.healthStatus(req.Msg.GetService())
	if st == healthpb.HealthCheckResponse_SERVICE_UNKNOWN {
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("unknown service %q", clip(req.Msg.GetService())))
	}
	return connect.NewResponse(&healthpb.HealthCheckResponse{Status: st}), nil
}

// healthWatch answers Watch: the current status at once, then each change
// (Ready is polled every second) until the client cancels. An unknown
// service gets SERVICE_UNKNOWN and the call stays open, as the protocol
// says. When the server drains, the stream sends NOT_SERVING and ends, so
// that watchers do not hold the graceful shutdown to its timeout.
func (s *Server) healthWatch(ctx context.Context, req *connect.Request[healthpb.HealthCheckRequest], stream *connect.ServerStream[healthpb.HealthCheckResponse]) error {
	service := req.Msg.GetService()
	last := s.healthStatus(service)
	if err := stream.Send(&healthpb.HealthCheckResponse{Status: last}); err != nil {
		return err
	}
	t := time.NewTicker(healthPoll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return connect.NewError(connect.CodeCanceled, ctx.Err())
		case <-s.draining:
			if last == healthpb.HealthCheckResponse_SERVING {
				return stream.Send(&healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_NOT_SERVING})
			}
			return nil
		case <-t.C:
			if st := s.healthStatus(service); st != last {
				last = st
				if err := stream.Send(&healthpb.HealthCheckResponse{Status: st}); err != nil {
					return err
				}
			}
		}
	}
}
