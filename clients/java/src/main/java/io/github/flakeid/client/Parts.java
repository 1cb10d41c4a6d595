package io.github.flakeid.client;

import java.time.Instant;

/**
 * The fields of a decoded Snowflake ID. id is the internal ID when the
 * input was masked (masked is then the input, keyId its key's id); form is
 * "uuid7", "typeid" or "ulid" when the input was a UUID-shaped text (uuid
 * the UUID it is, prefix a TypeID's prefix), else "".
 */
public record Parts(long id, Instant time, long tick, long datacenter, long worker, long sequence, String masked, int keyId, String form,
        String uuid, String prefix) {
}
