package client

import (
	"errors"
	"fmt"
	"net/http"
	"time"
)

// Sentinel errors. Errors of the client wrap them, and an *APIError matches
// the one of its code or status, so errors.Is works on anything a call
// returns.
var (
	// ErrUnavailable: no endpoint could serve the call within MaxAttempts
	// (network errors, timeouts, 408, 429, 5xx), or a server answered 503
	// (not ready, no worker-id lease, store down).
	ErrUnavailable = errors.New("client: service unavailable")
	// ErrNotFound: the server answered 404 (an unknown segment tag, or
	// segment mode is not enabled).
	ErrNotFound = errors.New("client: not found")
	// ErrInvalidArgument: the request is malformed (a count out of range,
	// an undecodable ID), found by the client or answered 400 by the server.
	ErrInvalidArgument = errors.New("client: invalid argument")
	// ErrUnauthenticated: the server answered 401 (missing or unknown
	// token).
	ErrUnauthenticated = errors.New("client: unauthenticated")
	// ErrPermissionDenied: the server answered 403 (the token may not use
	// this tag or kind of ID).
	ErrPermissionDenied = errors.New("client: permission denied")
	// ErrClosed: the Client was closed.
	ErrClosed = errors.New("client: closed")
	// ErrOverlap: two endpoints of the client can issue the same Snowflake
	// IDs — they hold the same (datacenter, worker) pair at once, or use
	// different layouts — so they share no coordinator (two `flakeid serve`
	// on their own file coordinators behind one load balancer, say). The
	// error names both; the client hands out no Snowflake ID from then on.
	ErrOverlap = errors.New("client: endpoints can issue the same IDs")
)

// APIError is an error answer of a server: a non-2xx status with the body
// {"error":{"code":…,"message":…}}. A 4xx other than 408 and 429 is returned
// at once (the request itself is wrong, another endpoint would answer the
// same); other statuses are retried on the next endpoint and, after the last
// attempt, returned wrapped together with ErrUnavailable.
type APIError struct {
	// Status is the HTTP status code.
	Status int
	// Code is the API's error code, such as "invalid_argument",
	// "not_found", "unavailable", "unauthenticated" or
	// "permission_denied"; when the body has none, it is derived from
	// Status.
	Code string
	// Message is the server's explanation.
	Message string
	// Endpoint is the base URL that answered.
	Endpoint string
	// RetryAfter is the answer's Retry-After (of a 503 or 429: how long
	// until the server expects to serve again), zero when it had none.
	RetryAfter time.Duration
}

// Error implements error.
func (e *APIError) Error() string {
	return fmt.Sprintf("client: %s answered %d %s: %s", e.Endpoint, e.Status, e.Code, e.Message)
}

// Is reports whether the sentinel target describes e: ErrNotFound for 404 or
// code not_found, ErrUnavailable for 503 or code unavailable,
// ErrInvalidArgument for 400 or invalid_argument, ErrUnauthenticated for 401
// or unauthenticated, ErrPermissionDenied for 403 or permission_denied.
func (e *APIError) Is(target error) bool {
	switch target {
	case ErrNotFound:
		return e.Status == http.StatusNotFound || e.Code == "not_found"
	case ErrUnavailable:
		return e.Status == http.StatusServiceUnavailable || e.Code == "unavailable"
	case ErrInvalidArgument:
		return e.Status == http.StatusBadRequest || e.Code == "invalid_argument"
	case ErrUnauthenticated:
		return e.Status == http.StatusUnauthorized || e.Code == "unauthenticated"
	case ErrPermissionDenied:
		return e.Status == http.StatusForbidden || e.Code == "permission_denied"
	}
	return false
}

// retryable reports whether a status may succeed on another endpoint or
// later: 408, 429 and 5xx.
func retryable(status int) bool {
	return status == http.StatusRequestTimeout || status == http.StatusTooManyRequests || status >= 500
}

// codeOf derives an API error code from a status, for bodies without one.
func codeOf(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "invalid_argument"
	case http.StatusUnauthorized:
		return "unauthenticated"
	case http.StatusForbidden:
		return "permission_denied"
	case http.StatusNotFound:
		return "not_found"
	case http.StatusConflict:
		return "already_exists"
	case http.StatusTooManyRequests:
		return "resource_exhausted"
	case http.StatusServiceUnavailable:
		return "unavailable"
	case http.StatusNotImplemented:
		return "unimplemented"
	case http.StatusRequestTimeout, http.StatusGatewayTimeout:
		return "deadline_exceeded"
	}
	if status >= 500 {
		return "internal"
	}
	return "unknown"
}
