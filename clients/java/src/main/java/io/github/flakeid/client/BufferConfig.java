package io.github.flakeid.client;

/**
 * The local prefetch buffers: a buffer holds prefetched ranges of IDs and
 * hands them out in-process; a background thread refills it before it runs
 * dry.
 *
 * @param snowflake how many Snowflake IDs one prefetch asks for, 0 to
 *     {@link Client#MAX_COUNT}; 0 (the default) means no buffer
 * @param segment the same for each segment tag (a buffer per tag, on first
 *     use); 0 (the default) means none, and segment IDs stay dense
 * @param lowWater the fraction of a batch below which a buffer is refilled,
 *     0 to 1; 0 means 0.5. A buffer rides out an outage of every server
 *     shorter than the lowWater × batch IDs it holds when it asks, at the
 *     caller's rate.
 */
public record BufferConfig(int snowflake, int segment, double lowWater) {
    /** No buffers. */
    public static final BufferConfig NONE = new BufferConfig(0, 0, 0);
}
