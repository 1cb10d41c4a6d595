package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/flakeid/flakeid/node"
	"github.com/flakeid/flakeid/segment"
	"github.com/flakeid/flakeid/snowflake"
	"github.com/flakeid/flakeid/worker"
)

// API error codes, shared by the JSON API and (mapped) Connect. Each is
// answered with one HTTP status; docs/API.md lists them.
const (
	codeInvalid      = "invalid_argument"       // 400
	codeUnauth       = "unauthenticated"        // 401
	codeForbidden    = "permission_denied"      // 403
	codeNotFound     = "not_found"              // 404
	codeMethod       = "method_not_allowed"     // 405
	codeExists       = "already_exists"         // 409
	codePrecondition = "failed_precondition"    // 409: the state does not allow it yet (a resume while the store is behind)
	codeBodyTooLarge = "payload_too_large"      // 413
	codeTimeout      = "request_timeout"        // 408: the body did not arrive within the read timeout
	codeMediaType    = "unsupported_media_type" // 415
	codeCanceled     = "canceled"               // 499: the client went away
	codeInternal     = "internal"               // 500
	codeUnsupported  = "unimplemented"          // 501
	codeUnavailable  = "unavailable"            // 503
	codeTooLarge     = "resource_exhausted"     // 507: a tag or the time field ran out of IDs
)

// apiError is an error with the HTTP status and code it is answered with.
type apiError struct {
	Status  int
	Code    string
	Message string
}

func (e *apiError) Error() string { return e.Message }

func apiErrorf(status int, code, format string, args ...any) *apiError {
	return &apiError{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

// classify maps an error of the libraries to the status and code it is
// answered with; its message is kept.
func classify(err error) *apiError {
	var ae *apiError
	switch {
	case errors.As(err, &ae):
		return ae
	case errors.Is(err, snowflake.ErrInvalidID), errors.Is(err, snowflake.ErrInvalidCount),
		errors.Is(err, segment.ErrInvalidCount), errors.Is(err, segment.ErrInvalidTag),
		errors.Is(err, snowflake.ErrInvalidLayout), errors.Is(err, segment.ErrSeries), errors.Is(err, segment.ErrNotSeries):
		return &apiError{http.StatusBadRequest, codeInvalid, err.Error()}
	case errors.Is(err, segment.ErrUnknownTag):
		return &apiError{http.StatusNotFound, codeNotFound, err.Error()}
	case errors.Is(err, segment.ErrTagExists):
		return &apiError{http.StatusConflict, codeExists, err.Error()}
	case errors.Is(err, node.ErrNoLease), errors.Is(err, worker.ErrLeaseLost), errors.Is(err, snowflake.ErrFenced),
		errors.Is(err, snowflake.ErrClockBehind), errors.Is(err, segment.ErrUnavailable), errors.Is(err, segment.ErrClosed),
		errors.Is(err, segment.ErrRegressed), errors.Is(err, context.DeadlineExceeded), errors.Is(err, segment.ErrNoKey):
		return &apiError{http.StatusServiceUnavailable, codeUnavailable, err.Error()}
	case errors.Is(err, segment.ErrExhausted), errors.Is(err, snowflake.ErrTimeExhausted), errors.Is(err, segment.ErrPeriodFull):
		return &apiError{http.StatusInsufficientStorage, codeTooLarge, err.Error()}
	case errors.Is(err, context.Canceled):
		return &apiError{499, codeCanceled, err.Error()}
	}
	return &apiError{http.StatusInternalServerError, codeInternal, err.Error()}
}
