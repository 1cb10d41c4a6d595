"""The errors of the flakeid client.

Every error the client raises is a FlakeidError. A server's error answer is
an APIError that is also the kind its code or status says (NotFound for 404
or not_found, …), so ``except flakeid.NotFound`` catches both the client's
own and the server's.
"""

from __future__ import annotations


class FlakeidError(Exception):
    """The base class of the client's errors."""


class InvalidConfig(FlakeidError):
    """A Config field is out of range (raised by Config.validate and Client)."""


class Unavailable(FlakeidError):
    """No endpoint could serve the call within max_attempts (network errors,
    timeouts, 408, 429, 5xx), or the call's deadline ended first."""


class NotFound(FlakeidError):
    """The server answered 404: an unknown segment tag, or segment mode off."""


class InvalidArgument(FlakeidError):
    """The request is malformed: found by the client, or answered 400."""


class Unauthenticated(FlakeidError):
    """The server answered 401: a missing or unknown token."""


class PermissionDenied(FlakeidError):
    """The server answered 403: the token may not do this."""


class Closed(FlakeidError):
    """The Client was closed."""


class Overlap(FlakeidError):
    """Two endpoints of the client can issue the same Snowflake IDs: they
    hold the same (datacenter, worker) pair at once, or use different
    layouts, so they share no coordinator (two `flakeid serve` on their own
    file coordinators behind one load balancer, say). The message names
    both; the client hands out no Snowflake ID from then on."""


class APIError(FlakeidError):
    """An error answer of a server: a non-2xx status with the body
    {"error": {"code": …, "message": …}}.

    Attributes: status (the HTTP status), code (the API's error code, or one
    derived from the status), message, endpoint (the base URL that answered)
    and retry_after (the answer's Retry-After in seconds, 0 when none).
    """

    def __init__(self, status: int, code: str, message: str, endpoint: str, retry_after: float = 0.0):
        super().__init__(f"{endpoint}: {status} {code}: {message}")
        self.status, self.code, self.message = status, code, message
        self.endpoint, self.retry_after = endpoint, retry_after


class _InvalidArgumentAPIError(APIError, InvalidArgument):
    pass


class _UnauthenticatedAPIError(APIError, Unauthenticated):
    pass


class _PermissionDeniedAPIError(APIError, PermissionDenied):
    pass


class _NotFoundAPIError(APIError, NotFound):
    pass


class _UnavailableAPIError(APIError, Unavailable):
    pass


_STATUS_CODES = {400: "invalid_argument", 401: "unauthenticated", 403: "permission_denied", 404: "not_found",
                 408: "request_timeout", 429: "resource_exhausted", 503: "unavailable"}
_KINDS = {"invalid_argument": _InvalidArgumentAPIError, "unauthenticated": _UnauthenticatedAPIError,
          "permission_denied": _PermissionDeniedAPIError, "not_found": _NotFoundAPIError,
          "unavailable": _UnavailableAPIError}


def api_error(status: int, code: str, message: str, endpoint: str, retry_after: float = 0.0) -> APIError:
    """The APIError of an answer, also of the kind its code (or, without
    one, its status) names: a 503 is Unavailable whatever its code."""
    code = code or _STATUS_CODES.get(status, "unavailable" if status >= 500 else "unknown")
    cls = _UnavailableAPIError if status == 503 else _KINDS.get(code, APIError)
    return cls(status, code, message, endpoint, retry_after)
