package io.github.flakeid.client;

import java.time.Instant;

/**
 * The smallest and largest Snowflake IDs (both included) whose time lies in
 * [start, end), the window they cover exactly; note is set by a server that
 * masks Snowflake IDs (the bounds are internal IDs).
 */
public record Bounds(long min, long max, Instant start, Instant end, String layout, String note) {
}
