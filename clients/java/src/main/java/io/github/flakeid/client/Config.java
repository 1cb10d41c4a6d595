package io.github.flakeid.client;

import java.net.URI;
import java.time.Duration;
import java.util.HashSet;
import java.util.List;

/**
 * The settings of a {@link Client}. A zero field means its default;
 * endpoints are required. {@link #defaults()} gives the recommended
 * settings.
 *
 * @param endpoints the servers' base URLs ("http://127.0.0.1:8080",
 *     "https://ids.example.com/prefix"), each once; no default
 * @param token sent as "Authorization: Bearer &lt;token&gt;" when not empty
 * @param timeout per attempt (one request to one endpoint), up to 5 minutes;
 *     zero means 2 s. A call's own timeout bounds the whole call.
 * @param maxAttempts requests one call may make over all endpoints, 0–1000;
 *     0 means 2 × endpoints, at least 3
 * @param backoffMin with backoffMax, the bounds of the jittered exponential
 *     backoff for which an endpoint that failed (a network error, a timeout,
 *     408, 429 or 5xx) is passed over, or longer when its server sent
 *     Retry-After; zero means 100 ms and 5 s
 * @param backoffMax see backoffMin
 * @param buffer the prefetch buffers; none by default
 * @param sslContext for https endpoints: the trust (a private CA) and keys
 *     to use; null means the JVM's default trust store
 */
public record Config(List<String> endpoints, String token, Duration timeout, int maxAttempts, Duration backoffMin, Duration backoffMax,
        BufferConfig buffer, javax.net.ssl.SSLContext sslContext) {
    /** The server's default address. */
    public static final String DEFAULT_ENDPOINT = "http://127.0.0.1:8080";

    /** The settings with these endpoints and every other field zero (no buffer). */
    public static Config of(String... endpoints) {
        return new Config(List.of(endpoints), "", Duration.ZERO, 0, Duration.ZERO, Duration.ZERO, BufferConfig.NONE, null);
    }

    /** The recommended settings: the server's default address, a 2 s per-attempt timeout, a Snowflake buffer of 10,000 IDs. */
    public static Config defaults() {
        return of(DEFAULT_ENDPOINT).withTimeout(Duration.ofSeconds(2)).withBuffer(new BufferConfig(10_000, 0, 0));
    }

    public Config withEndpoints(String... e) {
        return new Config(List.of(e), token, timeout, maxAttempts, backoffMin, backoffMax, buffer, sslContext);
    }

    public Config withToken(String t) {
        return new Config(endpoints, t, timeout, maxAttempts, backoffMin, backoffMax, buffer, sslContext);
    }

    public Config withTimeout(Duration t) {
        return new Config(endpoints, token, t, maxAttempts, backoffMin, backoffMax, buffer, sslContext);
    }

    public Config withMaxAttempts(int n) {
        return new Config(endpoints, token, timeout, n, backoffMin, backoffMax, buffer, sslContext);
    }

    public Config withBackoff(Duration min, Duration max) {
        return new Config(endpoints, token, timeout, maxAttempts, min, max, buffer, sslContext);
    }

    public Config withBuffer(BufferConfig b) {
        return new Config(endpoints, token, timeout, maxAttempts, backoffMin, backoffMax, b, sslContext);
    }

    /**
     * The same with an SSLContext for https endpoints: a private CA's trust,
     * say (see docs/OPERATIONS.md, "Java client").
     */
    public Config withSslContext(javax.net.ssl.SSLContext c) {
        return new Config(endpoints, token, timeout, maxAttempts, backoffMin, backoffMax, buffer, c);
    }

    /** Checks every field; throws InvalidConfig naming the first bad one. */
    public void validate() {
        if (endpoints == null || endpoints.isEmpty()) {
            throw new FlakeidException.InvalidConfig("endpoints: at least one is required");
        }
        var seen = new HashSet<String>();
        for (String e : endpoints) {
            URI u;
            try {
                u = new URI(e);
            } catch (Exception ex) {
                throw new FlakeidException.InvalidConfig("endpoint \"" + e + "\": not a URL");
            }
            if (!("http".equals(u.getScheme()) || "https".equals(u.getScheme())) || u.getHost() == null || u.getQuery() != null || u.getFragment() != null) {
                throw new FlakeidException.InvalidConfig("endpoint \"" + e + "\": want an http:// or https:// base URL without query or fragment");
            }
            if (!seen.add(e.replaceAll("/+$", ""))) {
                throw new FlakeidException.InvalidConfig("endpoint \"" + e + "\" is listed twice");
            }
        }
        if (token == null || token.chars().anyMatch(c -> c < 0x20 || c == 0x7f)) {
            throw new FlakeidException.InvalidConfig("token: null, or contains a control character");
        }
        check("timeout", timeout, Duration.ofMinutes(5));
        check("backoffMin", backoffMin, null);
        check("backoffMax", backoffMax, null);
        if (maxAttempts < 0 || maxAttempts > 1000) {
            throw new FlakeidException.InvalidConfig("maxAttempts " + maxAttempts + ": want 0–1000");
        }
        if (!backoffMin.isZero() && !backoffMax.isZero() && backoffMin.compareTo(backoffMax) > 0) {
            throw new FlakeidException.InvalidConfig("backoffMin " + backoffMin + " is above backoffMax " + backoffMax);
        }
        if (buffer == null || buffer.snowflake() < 0 || buffer.snowflake() > Client.MAX_COUNT || buffer.segment() < 0
                || buffer.segment() > Client.MAX_COUNT || !(buffer.lowWater() >= 0 && buffer.lowWater() <= 1)) {
            throw new FlakeidException.InvalidConfig("buffer " + buffer + ": want sizes 0–" + Client.MAX_COUNT + " and lowWater 0–1");
        }
    }

    private static void check(String name, Duration d, Duration max) {
        if (d == null || d.isNegative() || (max != null && d.compareTo(max) > 0)) {
            throw new FlakeidException.InvalidConfig(name + " " + d + ": want 0" + (max != null ? "–" + max : " or more"));
        }
    }
}
