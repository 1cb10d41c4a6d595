package io.github.flakeid.client;

import java.util.PrimitiveIterator;
import java.util.stream.LongStream;

/**
 * A whole segment of a tag that a server handed to this client alone
 * ({@link Client#takeSegment}): the IDs first, first + stride, …, last. stride
 * is above 1 when the tag is served from several databases, each with its
 * share of the IDs.
 */
public record Segment(String tag, long first, long last, long stride) implements Iterable<Long> {
    /** The number of IDs in the segment. */
    public long count() {
        return (last - first) / stride + 1;
    }

    /** The segment's IDs in increasing order. */
    public LongStream ids() {
        return LongStream.iterate(first, id -> id <= last && id >= first, id -> id + stride);
    }

    /** The segment's IDs in increasing order. */
    @Override
    public PrimitiveIterator.OfLong iterator() {
        return ids().iterator();
    }
}
