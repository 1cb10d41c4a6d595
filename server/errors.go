package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

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
	// RetryAfter, of a 503, is when the node says it issues again
	// (node.ResumeError); zero when it does not know.
	RetryAfter time.Duration
}

// retryAfter is the Retry-After header of a 503: the node's own estimate
// rounded up to whole seconds, else 1.
func (e *apiError) retryAfter() string {
	if e.RetryAfter <= time.Second {
		return "1"
	}
	return strconv.FormatInt(int64((e.RetryAfter+time.Second-1)/time.Second), 10)
}

func (e *apiError) Error() string { return e.Message }

func apiErrorf(status int, code, format string, args ...any) *apiError {
	return &apiError{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

// classify maps an error of the libraries to the status and code it is
// answered with; its message is kept.
func classify(err error) *apiError {
	var ae *apiError
	var re *node.ResumeError
	switch {
	case errors.As(err, &ae):
		return ae
	case errors.As(err, &re):
		return &apiError{Status: http.StatusServiceUnavailable, Code: codeUnavailable, Message: err.Error(), RetryAfter: re.RetryAfter}
	case errors.Is(err, snowflake.ErrInvalidID), errors.Is(err, snowflake.ErrInvalidCount),
		errors.Is(err, segment.ErrInvalidCount), errors.Is(err, segment.ErrInvalidTag),
		errors.Is(err, snowflake.ErrInvalidLayout), errors.Is(err, segment.ErrSeries), errors.Is(err, segment.ErrNotSeries):
		return &apiError{Status: http.StatusBadRequest, Code: codeInvalid, Message: err.Error()}
	case errors.Is(err, node.ErrInvalidOwner):
		return &apiError{Status: http.StatusBadRequest, Code: codeInvalid, Message: err.Error()}
	case errors.Is(err, node.ErrStaticWorkerID):
		return &apiError{Status: http.StatusConflict, Code: codePrecondition, Message: err.Error()}
	case errors.Is(err, worker.ErrExhausted), errors.Is(err, worker.ErrUnavailable), errors.Is(err, worker.ErrClockSkew):
		return &apiError{Status: http.StatusServiceUnavailable, Code: codeUnavailable, Message: err.Error()}
	case errors.Is(err, segment.ErrUnknownTag):
		return &apiError{Status: http.StatusNotFound, Code: codeNotFound, Message: err.Error()}
	case errors.Is(err, segment.ErrTagExists):
		return &apiError{Status: http.StatusConflict, Code: codeExists, Message: err.Error()}
	case errors.Is(err, node.ErrNoLease), errors.Is(err, worker.ErrLeaseLost), errors.Is(err, snowflake.ErrFenced),
		errors.Is(err, snowflake.ErrClockBehind), errors.Is(err, segment.ErrUnavailable), errors.Is(err, segment.ErrClosed),
		errors.Is(err, segment.ErrRegressed), errors.Is(err, context.DeadlineExceeded), errors.Is(err, segment.ErrNoKey):
		return &apiError{Status: http.StatusServiceUnavailable, Code: codeUnavailable, Message: err.Error()}
	case errors.Is(err, segment.ErrExhausted), errors.Is(err, snowflake.ErrTimeExhausted), errors.Is(err, segment.ErrPeriodFull):
		return &apiError{Status: http.StatusInsufficientStorage, Code: codeTooLarge, Message: err.Error()}
	case errors.Is(err, context.Canceled):
		return &apiError{Status: 499, Code: codeCanceled, Message: err.Error()}
	}
	return &apiError{Status: http.StatusInternalServerError, Code: codeInternal, Message: err.Error()}
}
