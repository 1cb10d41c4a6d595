package io.github.flakeid.client;

import java.time.Duration;

/**
 * The base class of the client's errors. A server's error answer is an
 * instance of the kind its code or status names (NotFound, InvalidArgument,
 * …) with {@link #isApiError()} true and its status, code, endpoint and
 * Retry-After set.
 */
public class FlakeidException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    private final int status;
    private final String code;
    private final String endpoint;
    private final Duration retryAfter;

    FlakeidException(String message, Throwable cause) {
        this(message, cause, 0, "", "", Duration.ZERO);
    }

    FlakeidException(String message, Throwable cause, int status, String code, String endpoint, Duration retryAfter) {
        super(message, cause);
        this.status = status;
        this.code = code;
        this.endpoint = endpoint;
        this.retryAfter = retryAfter;
    }

    /** Whether this is a server's error answer. */
    public boolean isApiError() {
        return status != 0;
    }

    /** The HTTP status of a server's error answer; 0 otherwise. */
    public int status() {
        return status;
    }

    /** The API's error code ("not_found", …) of a server's error answer; "" otherwise. */
    public String code() {
        return code;
    }

    /** The base URL that answered; "" when no server did. */
    public String endpoint() {
        return endpoint;
    }

    /** The answer's Retry-After; zero when none. */
    public Duration retryAfter() {
        return retryAfter;
    }

    /** A Config field is out of range. */
    public static final class InvalidConfig extends FlakeidException {
        private static final long serialVersionUID = 1L;

        InvalidConfig(String message) {
            super(message, null);
        }
    }

    /** No endpoint could serve the call within maxAttempts, or its timeout ended first. */
    public static final class Unavailable extends FlakeidException {
        private static final long serialVersionUID = 1L;

        Unavailable(String message, Throwable cause) {
            super(message, cause);
        }

        Unavailable(String message, int status, String code, String endpoint, Duration retryAfter) {
            super(message, null, status, code, endpoint, retryAfter);
        }
    }

    /** The server answered 404: an unknown segment tag, or segment mode off. */
    public static final class NotFound extends FlakeidException {
        private static final long serialVersionUID = 1L;

        NotFound(String message, int status, String code, String endpoint, Duration retryAfter) {
            super(message, null, status, code, endpoint, retryAfter);
        }
    }

    /** The request is malformed: found by the client, or answered 400. */
    public static final class InvalidArgument extends FlakeidException {
        private static final long serialVersionUID = 1L;

        InvalidArgument(String message) {
            super(message, null);
        }

        InvalidArgument(String message, int status, String code, String endpoint, Duration retryAfter) {
            super(message, null, status, code, endpoint, retryAfter);
        }
    }

    /** The server answered 401: a missing or unknown token. */
    public static final class Unauthenticated extends FlakeidException {
        private static final long serialVersionUID = 1L;

        Unauthenticated(String message, int status, String code, String endpoint, Duration retryAfter) {
            super(message, null, status, code, endpoint, retryAfter);
        }
    }

    /** The server answered 403: the token may not do this. */
    public static final class PermissionDenied extends FlakeidException {
        private static final long serialVersionUID = 1L;

        PermissionDenied(String message, int status, String code, String endpoint, Duration retryAfter) {
            super(message, null, status, code, endpoint, retryAfter);
        }
    }

    /** The client was closed. */
    /**
     * Two endpoints of the client can issue the same Snowflake IDs: they
     * hold the same (datacenter, worker) pair at once, or use different
     * layouts, so they share no coordinator (two {@code flakeid serve} on
     * their own file coordinators behind one load balancer, say). The
     * message names both; the client hands out no Snowflake ID from then on.
     */
    public static final class Overlap extends FlakeidException {
        private static final long serialVersionUID = 1L;

        Overlap(String message) {
            super(message, null);
        }
    }

    /** The Client was closed. */
    public static final class Closed extends FlakeidException {
        private static final long serialVersionUID = 1L;

        Closed(String message) {
            super(message, null);
        }

        Closed() {
            super("the client is closed", null);
        }
    }

    /** The error of a server's answer, of the kind its code (or status) names. */
    static FlakeidException of(int status, String code, String message, String endpoint, Duration retryAfter) {
        if (code.isEmpty()) {
            code = switch (status) {
                case 400 -> "invalid_argument";
                case 401 -> "unauthenticated";
                case 403 -> "permission_denied";
                case 404 -> "not_found";
                case 408 -> "request_timeout";
                case 429 -> "resource_exhausted";
                default -> status >= 500 ? "unavailable" : "unknown";
            };
        }
        String text = endpoint + ": " + status + " " + code + ": " + message;
        if (status == 503) {
            return new Unavailable(text, status, code, endpoint, retryAfter);
        }
        return switch (code) {
            case "invalid_argument" -> new InvalidArgument(text, status, code, endpoint, retryAfter);
            case "unauthenticated" -> new Unauthenticated(text, status, code, endpoint, retryAfter);
            case "permission_denied" -> new PermissionDenied(text, status, code, endpoint, retryAfter);
            case "not_found" -> new NotFound(text, status, code, endpoint, retryAfter);
            case "unavailable" -> new Unavailable(text, status, code, endpoint, retryAfter);
            default -> new FlakeidException(text, null, status, code, endpoint, retryAfter);
        };
    }
}
