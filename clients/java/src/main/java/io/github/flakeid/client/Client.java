package io.github.flakeid.client;

import java.io.IOException;
import java.net.URI;
import java.net.URLEncoder;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ThreadLocalRandom;
import java.util.function.Supplier;

/**
 * Asks flakeid servers for IDs over the HTTP/JSON API. A call goes to the
 * endpoint that answered last; a network error, a timeout, or an answer of
 * 408, 429 or 5xx passes that endpoint over for a jittered backoff (or its
 * server's Retry-After) and moves the call on (endpoints passed over come
 * last, so a call still tries them when all are down); after a full round
 * the call pauses for a backoff, or until the soonest endpoint is back.
 * After maxAttempts requests it throws {@link FlakeidException.Unavailable}
 * with the last failure as its cause, and so it does at once when its
 * timeout would end before the next round. Any other 4xx is the caller's
 * fault and is thrown at once.
 *
 * <p>Every call has an overload with a timeout for the whole call (without
 * one it is bounded by maxAttempts alone). A Client is safe for use by
 * several threads; close it to stop the background refills.
 *
 * <p>Given several endpoints, the client checks them the first time each
 * hands it Snowflake IDs: it reads that endpoint's /v1/status and every
 * other's, and two that hold the same (datacenter, worker) pair at once, or
 * use different layouts, share no coordinator and can issue the same IDs —
 * the call then throws {@link FlakeidException.Overlap} naming both, and so
 * does every later Snowflake call. An endpoint that cannot be asked is
 * checked at its next answer; one endpoint alone is never checked.
 *
 * <pre>{@code
 * try (var client = new Client(Config.defaults())) {
 *     long id = client.nextId();
 * }
 * }</pre>
 */
public final class Client implements AutoCloseable {
    /** The most IDs the client asks for in one request. */
    public static final int MAX_COUNT = 10_000_000;

    private static final Duration DEFAULT_TIMEOUT = Duration.ofSeconds(2);
    private static final Duration DEFAULT_BACKOFF_MIN = Duration.ofMillis(100);
    private static final Duration DEFAULT_BACKOFF_MAX = Duration.ofSeconds(5);
    private static final double DEFAULT_LOW_WATER = 0.5;
    static final long NO_DEADLINE = Long.MAX_VALUE;

    /** One server, and how long it is passed over after failures. */
    private static final class Endpoint {
        final String base;
        int failures;
        long downUntil; // System.nanoTime()

        Endpoint(String base) {
            this.base = base;
            this.downUntil = System.nanoTime();
        }
    }

    private final HttpClient http;
    private final List<Endpoint> endpoints = new ArrayList<>();
    private final String token;
    private final long timeoutNanos;
    private final int maxAttempts;
    private final long backoffMinNanos;
    private final long backoffMaxNanos;
    private final BufferConfig buffer;
    private final IDBuffer ids;
    private final IDBuffer texts; // Snowflake IDs as texts (nextText); null when ids is
    private final Map<String, IDBuffer> segments = new ConcurrentHashMap<>(); // tag → its buffer of IDs
    private final Map<String, IDBuffer> segmentTexts = new ConcurrentHashMap<>(); // tag → its buffer of texts
    private final Set<LocalGenerator> generators = ConcurrentHashMap.newKeySet();
    private final Object vetLock = new Object(); // guards vetted and overlap
    private final Set<Endpoint> vetted = new HashSet<>();
    private FlakeidException.Overlap overlap;
    private int preferred;
    private volatile boolean closed;

    /** A client of the settings cfg (checked by {@link Config#validate()}); it makes no request. */
    public Client(Config cfg) {
        cfg.validate();
        for (String e : cfg.endpoints()) {
            endpoints.add(new Endpoint(e.replaceAll("/+$", "")));
        }
        token = cfg.token();
        timeoutNanos = (cfg.timeout().isZero() ? DEFAULT_TIMEOUT : cfg.timeout()).toNanos();
        maxAttempts = cfg.maxAttempts() != 0 ? cfg.maxAttempts() : Math.max(3, 2 * endpoints.size());
        long lo = cfg.backoffMin().toNanos(), hi = cfg.backoffMax().toNanos();
        backoffMinNanos = lo != 0 ? lo : (hi != 0 ? Math.min(DEFAULT_BACKOFF_MIN.toNanos(), hi) : DEFAULT_BACKOFF_MIN.toNanos());
        backoffMaxNanos = hi != 0 ? hi : Math.max(DEFAULT_BACKOFF_MAX.toNanos(), backoffMinNanos);
        buffer = cfg.buffer();
        var hb = HttpClient.newBuilder().connectTimeout(Duration.ofNanos(timeoutNanos));
        if (cfg.sslContext() != null) {
            hb.sslContext(cfg.sslContext());
        }
        http = hb.build();
        ids = buffer.snowflake() > 0 ? newBuffer("/v1/snowflake/next", "", buffer.snowflake(), false) : null;
        texts = buffer.snowflake() > 0 ? newBuffer("/v1/snowflake/next", "", buffer.snowflake(), true) : null;
    }

    /** Stops the background refills; later calls throw Closed. Idempotent. */
    @Override
    public void close() {
        closed = true;
        if (ids != null) {
            ids.close();
            texts.close();
        }
        segments.values().forEach(IDBuffer::close);
        segmentTexts.values().forEach(IDBuffer::close);
        for (LocalGenerator g : List.copyOf(generators)) {
            g.close();
        }
    }

    /**
     * A generator of Snowflake IDs in this process under a worker-id lease
     * one of the endpoints holds for it (failing over as any call does): see
     * {@link LocalGenerator}. owner names this process in the coordinator,
     * 1–64 letters, digits and -_.:/@; "" or null means "java/&lt;pid&gt;". A
     * server that masks its Snowflake IDs, or runs on a static worker id,
     * refuses (an API error with code failed_precondition); one whose worker
     * ids are all held throws Unavailable.
     */
    public LocalGenerator localGenerator(String owner) {
        return localGenerator(owner, null);
    }

    /** {@link #localGenerator(String)} within timeout (null: bounded by maxAttempts alone). */
    public LocalGenerator localGenerator(String owner, Duration timeout) {
        checkOpen();
        if (owner == null || owner.isEmpty()) {
            owner = "java/" + ProcessHandle.current().pid();
        } else if (!owner.matches("[A-Za-z0-9\\-_.:/@]{1,64}")) {
            throw new FlakeidException.InvalidArgument("owner \"" + owner + "\": want 1–64 letters, digits and -_.:/@");
        }
        var g = new LocalGenerator(this, owner, deadline(timeout));
        generators.add(g);
        if (closed) {
            g.close();
            throw new FlakeidException.Closed();
        }
        return g;
    }

    void forget(LocalGenerator g) {
        generators.remove(g);
    }

    /** One Snowflake ID: from the buffer when there is one, else a request. */
    public long nextId() {
        return nextIds(1, null)[0];
    }

    /** One Snowflake ID, within timeout for the whole call. */
    public long nextId(Duration timeout) {
        return nextIds(1, timeout)[0];
    }

    /** n Snowflake IDs: from the buffer when n is at most half a batch, else one request. */
    public long[] nextIds(int n) {
        return nextIds(n, null);
    }

    /** n Snowflake IDs, within timeout (null: none) for the whole call. */
    public long[] nextIds(int n, Duration timeout) {
        checkCount(n);
        checkOpen();
        if (ids != null && n <= buffer.snowflake() / 2) {
            return ids.take(n, deadline(timeout));
        }
        return longs(strings(get("/v1/snowflake/next", Map.of("count", n), deadline(timeout)), "ids"));
    }

    /**
     * One Snowflake ID as the server writes it: a masked text from a server
     * that masks Snowflake IDs, else the decimal. Use it, not nextId, against
     * a masking server, which refuses the ranges nextId's buffer reads. With
     * buffer.snowflake set it comes from a buffer of texts (apart from
     * nextId's), refilled in the background; else it is one request.
     */
    public String nextText() {
        return nextTexts(1, null).get(0);
    }

    /** n Snowflake IDs as nextText writes them (see the overload with a timeout). */
    public List<String> nextTexts(int n) {
        return nextTexts(n, null);
    }

    /** n Snowflake IDs as nextText writes them: from the buffer of texts when n is at most half a batch, else one request. */
    public List<String> nextTexts(int n, Duration timeout) {
        checkCount(n);
        checkOpen();
        if (texts != null && n <= buffer.snowflake() / 2) {
            return texts.takeTexts(n, deadline(timeout));
        }
        return textBatch("/v1/snowflake/next", "", n, deadline(timeout));
    }

    /** n Snowflake IDs as "uuid7", "typeid" or "ulid" texts (a typeid with the server's default prefix). One request. */
    public List<String> nextUuids(int n, String format) {
        return nextUuids(n, format, "", null);
    }

    /** n Snowflake IDs as "uuid7", "typeid" (with prefix, or the server's default when empty) or "ulid" texts, in issue order. */
    public List<String> nextUuids(int n, String format, String prefix, Duration timeout) {
        checkCount(n);
        if (!List.of("uuid7", "typeid", "ulid").contains(format)) {
            throw new FlakeidException.InvalidArgument("format \"" + format + "\": want one of uuid7, typeid, ulid");
        }
        if (!prefix.isEmpty() && !format.equals("typeid")) {
            throw new FlakeidException.InvalidArgument("prefix \"" + prefix + "\": only a typeid has one");
        }
        var q = new LinkedHashMap<String, Object>(Map.of("count", n, "format", format));
        if (!prefix.isEmpty()) {
            q.put("prefix", prefix);
        }
        return strings(get("/v1/snowflake/next", q, deadline(timeout)), "ids");
    }

    /** The next ID of a segment tag: from its buffer when buffer.segment is set, else a request. */
    public long nextSegment(String tag) {
        return nextSegmentIds(tag, 1, null)[0];
    }

    /** n IDs of a segment tag (see the overload with a timeout). */
    public long[] nextSegmentIds(String tag, int n) {
        return nextSegmentIds(tag, n, null);
    }

    /** n IDs of a segment tag: from its buffer when n is at most half a batch, else one request. */
    public long[] nextSegmentIds(String tag, int n, Duration timeout) {
        checkCount(n);
        String path = tagPath(tag);
        checkOpen();
        if (buffer.segment() > 0 && n <= buffer.segment() / 2) {
            return segments.computeIfAbsent(tag, t -> newBuffer(path, tag, buffer.segment(), false)).take(n, deadline(timeout));
        }
        Map<String, Object> a = get(path, Map.of("count", n), deadline(timeout));
        if (Boolean.TRUE.equals(a.get("series"))) {
            throw new FlakeidException.InvalidArgument("tag \"" + tag + "\" is a series: it hands out numbers (nextNumbers), not IDs");
        }
        return longs(strings(a, "ids"));
    }

    /**
     * The next ID of a segment tag as the server writes it (a masked text
     * when it masks the tag): from the tag's buffer of texts when
     * buffer.segment is set (apart from nextSegment's buffer of IDs), else
     * one request.
     */
    public String nextSegmentText(String tag) {
        return nextSegmentTexts(tag, 1, null).get(0);
    }

    /** n IDs of a segment tag as nextSegmentText writes them: from its buffer of texts when n is at most half a batch and buffer.segment is set, else one request. */
    public List<String> nextSegmentTexts(String tag, int n, Duration timeout) {
        checkCount(n);
        String path = tagPath(tag);
        checkOpen();
        if (buffer.segment() > 0 && n <= buffer.segment() / 2) {
            return segmentTexts.computeIfAbsent(tag, t -> newBuffer(path, tag, buffer.segment(), true)).takeTexts(n, deadline(timeout));
        }
        return textBatch(path, tag, n, deadline(timeout));
    }

    /** takeSegment(tag, null). */
    public Segment takeSegment(String tag) {
        return takeSegment(tag, null);
    }

    /**
     * A whole segment of tag for this client alone, as Didi Tinyid's client
     * takes one (GET /tinyid/id/nextSegmentId): the caller then hands out its
     * IDs itself, with no request per ID. A segment is the tag's configured
     * step (its share of it, with several databases); the IDs the caller does
     * not use are lost (a gap, never a duplicate), and no other client or
     * server ever hands them out. The token, when the server needs one, is
     * the config's token (a flakeid token, or one of Tinyid's
     * tiny_id_token). An unknown tag throws NotFound; a store that is down
     * moves the call to the next endpoint. It works against a Tinyid server
     * too, whose codes 5 and 6 read as PermissionDenied and Unavailable.
     */
    public Segment takeSegment(String tag, Duration timeout) {
        tagPath(tag); // the same rule for a tag as everywhere
        Answer a = call("GET", "/tinyid/id/nextSegmentId", Map.of("bizType", tag), null, deadline(timeout), (e, res, ans) -> {
            FlakeidException failed = tinyidFailure(e, res, ans);
            if (failed == null) {
                try {
                    segmentOf(tag, ans.get("data"));
                } catch (FlakeidException.Unavailable err) { // a bad answer: the next endpoint may give a good one
                    failed = FlakeidException.of(502, "unavailable", err.getMessage(), e.base, Duration.ZERO);
                }
            }
            return failed;
        });
        return segmentOf(tag, a.answer().get("data"));
    }

    /** The header in which flakeid gives, on a failed answer of Tinyid's paths, the code its own API would answer. */
    private static final String TINYID_CODE_HEADER = "X-Flakeid-Error-Code";

    /**
     * The error of a failed answer of Tinyid's paths (HTTP 200, code not
     * 200), or null: by flakeid's code when the server gave one, else by
     * Tinyid's (5: the token is refused; anything else: the server failed).
     */
    private static FlakeidException tinyidFailure(Endpoint e, HttpResponse<String> res, Map<String, Object> a) {
        Object code = a.get("code");
        if (code instanceof Number c && c.longValue() == 200 && a.get("data") != null) {
            return null;
        }
        String flakeidCode = res.headers().firstValue(TINYID_CODE_HEADER).orElse("");
        int status = switch (flakeidCode) {
            case "invalid_argument" -> 400;
            case "unauthenticated" -> 401;
            case "permission_denied" -> 403;
            case "not_found" -> 404;
            case "unavailable" -> 503;
            case "resource_exhausted" -> 507;
            case "internal" -> 500;
            default -> 0;
        };
        if (status == 0) {
            boolean refused = code instanceof Number c && c.longValue() == 5;
            status = refused ? 403 : 503;
            flakeidCode = refused ? "permission_denied" : "unavailable";
        }
        return FlakeidException.of(status, flakeidCode, a.getOrDefault("message", "") + " (Tinyid code " + code + ")", e.base, Duration.ZERO);
    }

    /** The Segment of a Tinyid segment answer's data, checked to make a run of IDs (else Unavailable). */
    @SuppressWarnings("unchecked")
    private static Segment segmentOf(String tag, Object data) {
        long cur, last, delta, rem;
        try {
            var d = (Map<String, Object>) data;
            cur = whole(d.get("currentId"));
            last = whole(d.get("maxId"));
            delta = whole(d.get("delta"));
            rem = whole(d.get("remainder"));
        } catch (RuntimeException err) {
            throw new FlakeidException.Unavailable("a segment of \"" + tag + "\" without currentId, maxId, delta and remainder: " + data, err);
        }
        long first = cur + delta;
        if (delta < 1 || rem < 0 || rem >= delta || first > last || (last - first) % delta != 0 || first % delta != rem) {
            throw new FlakeidException.Unavailable("a segment of \"" + tag + "\": currentId " + cur + ", maxId " + last + ", delta " + delta + ", remainder " + rem
                    + " do not make a run of IDs", null);
        }
        return new Segment(tag, first, last, delta);
    }

    /** A JSON number or decimal string that is a whole number. */
    private static long whole(Object v) {
        if (v instanceof String s) {
            return Long.parseLong(s);
        }
        Number n = (Number) v;
        if (n.doubleValue() != Math.rint(n.doubleValue())) {
            throw new NumberFormatException("not a whole number: " + n);
        }
        return n.longValue();
    }

    /** The next number of a series tag (ORD-20261128-000123): one request, never buffered. */
    public String nextNumber(String tag) {
        return nextNumbers(tag, 1, null).get(0);
    }

    /** n numbers of a series tag (see the overload with a timeout). */
    public List<String> nextNumbers(String tag, int n) {
        return nextNumbers(tag, n, null);
    }

    /** n numbers of a series tag, in the order the server issued them. */
    public List<String> nextNumbers(String tag, int n, Duration timeout) {
        checkCount(n);
        Map<String, Object> a = get(tagPath(tag), Map.of("count", n), deadline(timeout));
        if (!Boolean.TRUE.equals(a.get("series"))) {
            throw new FlakeidException.InvalidArgument("tag \"" + tag + "\" is not a series: it hands out IDs, not numbers");
        }
        return strings(a, "ids");
    }

    /** The fields of an ID (decimal, a text form, or a masked text). */
    public Parts decode(String id) {
        return decode(id, "", null);
    }

    /** decode, with as "masked" or "plain" to settle a text that reads both ways ("" tells by the text). */
    public Parts decode(String id, String as, Duration timeout) {
        if (!List.of("", "masked", "plain").contains(as)) {
            throw new FlakeidException.InvalidArgument("as \"" + as + "\": want masked, plain or empty");
        }
        if (id.isEmpty()) {
            throw new FlakeidException.InvalidArgument("decode: an empty ID");
        }
        Map<String, Object> a = get("/v1/decode/" + URLEncoder.encode(id, StandardCharsets.UTF_8).replace("+", "%20"),
                as.isEmpty() ? Map.of() : Map.of("as", as), deadline(timeout));
        return new Parts(Long.parseLong((String) a.get("id")), Instant.parse((String) a.get("time")), num(a, "tick"), num(a, "datacenter"),
                num(a, "worker"), num(a, "sequence"), str(a, "masked"), (int) num(a, "key_id"), str(a, "form"), str(a, "uuid"), str(a, "prefix"));
    }

    /** bounds(start, end, null). */
    public Bounds bounds(String start, String end) {
        return bounds(start, end, null);
    }

    /** The smallest and largest Snowflake IDs whose time lies in [start, end): RFC 3339, a date, Unix ms, "now" or an offset ("-1h"); "" is the layout's epoch or end. */
    public Bounds bounds(String start, String end, Duration timeout) {
        var q = new LinkedHashMap<String, Object>();
        if (!start.isEmpty()) {
            q.put("from", start);
        }
        if (!end.isEmpty()) {
            q.put("to", end);
        }
        Map<String, Object> a = get("/v1/snowflake/bounds", q, deadline(timeout));
        return new Bounds(Long.parseLong((String) a.get("min")), Long.parseLong((String) a.get("max")), Instant.parse((String) a.get("from")),
                Instant.parse((String) a.get("to")), str(a, "layout"), str(a, "note"));
    }

    // The machinery.

    /** A buffer of IDs, or of texts, of tag ("" for Snowflake IDs) at path. */
    private IDBuffer newBuffer(String path, String tag, int batch, boolean asTexts) {
        double low = buffer.lowWater() > 0 ? buffer.lowWater() : DEFAULT_LOW_WATER;
        Supplier<IDBuffer.Run[]> fetch = asTexts ? () -> new IDBuffer.Run[] {new IDBuffer.Run(textBatch(path, tag, batch, NO_DEADLINE).toArray(String[]::new))}
                : () -> ranges(path, batch);
        return new IDBuffer(fetch, batch, low, () -> Duration.ofNanos(retryPause()));
    }

    /**
     * n IDs of tag ("" for Snowflake IDs) as the server wrote them, with one
     * request; a series' numbers, or an answer of another count, are refused.
     */
    private List<String> textBatch(String path, String tag, int n, long deadline) {
        Map<String, Object> a = get(path, Map.of("count", n), deadline);
        if (Boolean.TRUE.equals(a.get("series"))) {
            throw new FlakeidException.InvalidArgument("tag \"" + tag + "\" is a series: it hands out numbers (nextNumbers), not IDs");
        }
        var out = new ArrayList<String>(n);
        for (Object t : (List<?>) a.get("ids")) {
            out.add(String.valueOf(t));
        }
        if (out.size() != n || out.stream().anyMatch(String::isEmpty)) {
            throw new FlakeidException.Unavailable("an answer of " + out.size() + " IDs, some maybe empty, to a request for " + n, null);
        }
        return out;
    }

    @SuppressWarnings("unchecked")
    private IDBuffer.Run[] ranges(String path, int count) {
        Map<String, Object> a = get(path, Map.of("count", count, "format", "ranges"), NO_DEADLINE);
        List<Object> rs = (List<Object>) a.get("ranges");
        IDBuffer.Run[] out = new IDBuffer.Run[rs.size()];
        for (int i = 0; i < out.length; i++) {
            Map<String, Object> r = (Map<String, Object>) rs.get(i);
            out[i] = new IDBuffer.Run(Long.parseLong((String) r.get("first")), num(r, "count"), r.containsKey("stride") ? num(r, "stride") : 1);
        }
        return out;
    }

    private void checkOpen() {
        if (closed) {
            throw new FlakeidException.Closed();
        }
    }

    private static void checkCount(int n) {
        if (n < 1 || n > MAX_COUNT) {
            throw new FlakeidException.InvalidArgument("count " + n + " is out of range: want 1 to " + MAX_COUNT);
        }
    }

    private static String tagPath(String tag) {
        if (tag == null || !tag.matches("[A-Za-z0-9\\-_.:]{1,128}") || tag.equals(".") || tag.equals("..")) {
            throw new FlakeidException.InvalidArgument("tag \"" + tag + "\": want 1–128 characters of A–Z a–z 0–9 - _ . :, and not . or ..");
        }
        return "/v1/segment/" + tag + "/next";
    }

    private static long deadline(Duration timeout) {
        if (timeout == null) {
            return NO_DEADLINE;
        }
        if (timeout.isNegative() || timeout.isZero()) {
            throw new FlakeidException.InvalidArgument("timeout " + timeout + ": want a positive duration, or null");
        }
        return System.nanoTime() + timeout.toNanos();
    }

    @SuppressWarnings("unchecked")
    private static List<String> strings(Map<String, Object> a, String key) {
        return (List<String>) (List<?>) a.get(key);
    }

    private static long[] longs(List<String> texts) {
        return texts.stream().mapToLong(Long::parseLong).toArray();
    }

    private static long num(Map<String, Object> a, String key) {
        Object v = a.get(key);
        return v instanceof Number n ? n.longValue() : 0;
    }

    private static String str(Map<String, Object> a, String key) {
        Object v = a.get(key);
        return v instanceof String s ? s : "";
    }

    private long jitter(long d) {
        return d / 2 + ThreadLocalRandom.current().nextLong(d / 2 + 1);
    }

    private synchronized long retryPause() {
        long soonest = Long.MAX_VALUE;
        for (Endpoint e : endpoints) {
            soonest = Math.min(soonest, e.downUntil - System.nanoTime());
        }
        return Math.min(backoffMaxNanos, Math.max(backoffMinNanos, soonest));
    }

    private synchronized List<Endpoint> order() {
        long now = System.nanoTime();
        var up = new ArrayList<Endpoint>();
        var down = new ArrayList<Endpoint>();
        for (int i = 0; i < endpoints.size(); i++) {
            Endpoint e = endpoints.get((preferred + i) % endpoints.size());
            (e.downUntil - now <= 0 ? up : down).add(e);
        }
        down.sort((a, b) -> Long.compare(a.downUntil - now, b.downUntil - now));
        up.addAll(down);
        return up;
    }

    private synchronized void failed(Endpoint e, long retryAfterNanos) {
        long d = Math.min(backoffMaxNanos, backoffMinNanos << Math.min(e.failures, 30));
        if (d < 0) {
            d = backoffMaxNanos;
        }
        e.failures++;
        e.downUntil = System.nanoTime() + Math.max(jitter(d), retryAfterNanos);
    }

    private synchronized void answered(Endpoint e) {
        e.failures = 0;
        e.downUntil = System.nanoTime();
        preferred = endpoints.indexOf(e);
    }

    private Map<String, Object> get(String path, Map<String, ?> query, long deadline) {
        Answer a = call("GET", path, query, null, deadline, null);
        if (path.equals("/v1/snowflake/next")) {
            vet(a.endpoint());
        }
        return a.answer();
    }

    /**
     * Checks endpoint e, which just handed out Snowflake IDs, against the
     * other endpoints, once; throws Overlap (and keeps throwing it) when two
     * can issue the same IDs.
     */
    void vet(Object endpoint) {
        Endpoint e = (Endpoint) endpoint;
        if (endpoints.size() < 2) {
            return;
        }
        synchronized (vetLock) {
            if (overlap != null) {
                throw overlap;
            }
            if (vetted.contains(e)) {
                return;
            }
            boolean[] fin = new boolean[1];
            Map<String, Object> mine = status(e, fin);
            if (mine == null) {
                if (fin[0]) { // a server that does not tell (no /v1/status, or not to this token)
                    vetted.add(e);
                }
                return; // cannot tell now: check again at its next answer
            }
            for (Endpoint o : endpoints) {
                if (o == e) {
                    continue;
                }
                Map<String, Object> theirs = status(o, fin);
                if (theirs == null || !overlaps(mine, theirs)) {
                    continue;
                }
                // A lease may have moved between the two reads: look again.
                Map<String, Object> again = status(e, fin);
                theirs = status(o, fin);
                if (again != null && theirs != null && overlaps(again, theirs)) {
                    String why = again.get("layout").equals(theirs.get("layout")) ? "both hold the same worker id" : "they use different layouts";
                    overlap = new FlakeidException.Overlap("endpoints can issue the same IDs: " + e.base + " issues from " + space(again) + ", and " + o.base
                            + " from " + space(theirs) + ": " + why + ", so they share no coordinator. Point both at one coordinator (--coordinator), "
                            + "or give each its own --datacenter");
                    throw overlap;
                }
            }
            vetted.add(e);
        }
    }

    /**
     * Endpoint e's /v1/status, read once, or null; fin[0] then says whether
     * asking again will not help (a 4xx other than 408 and 429).
     */
    private Map<String, Object> status(Endpoint e, boolean[] fin) {
        fin[0] = false;
        try {
            Map<String, Object> a = once(e, "GET", "/v1/status");
            return a != null && a.get("layout") instanceof String s && !s.isEmpty() ? a : null;
        } catch (FlakeidException err) {
            int st = err.status();
            fin[0] = st >= 400 && st < 500 && st != 408 && st != 429;
            return null;
        } catch (ClassCastException err) {
            return null;
        }
    }

    /** Whether two servers issuing from the spaces a and b (their /v1/status) at the same time can issue the same IDs. */
    private static boolean overlaps(Map<String, Object> a, Map<String, Object> b) {
        if (!Boolean.TRUE.equals(a.get("lease_held")) || !Boolean.TRUE.equals(b.get("lease_held"))) {
            return false; // one issues nothing now
        }
        return !a.get("layout").equals(b.get("layout"))
                || Objects.equals(a.get("datacenter_id"), b.get("datacenter_id")) && Objects.equals(a.get("worker_id"), b.get("worker_id"));
    }

    private static String space(Map<String, Object> s) {
        return "datacenter " + s.get("datacenter_id") + ", worker " + s.get("worker_id") + " of the layout " + s.get("layout");
    }

    /**
     * An endpoint's answer: the endpoint, the JSON object it sent, and the
     * System.nanoTime() at which the request it answered was sent.
     */
    record Answer(Endpoint endpoint, Map<String, Object> answer, long sentNanos) {
    }

    /** The base URL of an endpoint. */
    static String base(Object endpoint) {
        return ((Endpoint) endpoint).base;
    }

    private HttpRequest.Builder request(Endpoint e, String method, String target, String body, long timeoutNanos) {
        var req = HttpRequest.newBuilder(URI.create(e.base + target)).timeout(Duration.ofNanos(timeoutNanos)).header("Accept", "application/json");
        if (body != null) {
            req.header("Content-Type", "application/json").method(method, HttpRequest.BodyPublishers.ofString(body));
        } else {
            req.method(method, HttpRequest.BodyPublishers.noBody());
        }
        if (!token.isEmpty()) {
            req.header("Authorization", "Bearer " + token);
        }
        return req;
    }

    /** One request to endpoint e, no failover: the answer's JSON object, or the error (Unavailable for a network error). */
    @SuppressWarnings("unchecked")
    Map<String, Object> once(Object endpoint, String method, String path) {
        Endpoint e = (Endpoint) endpoint;
        HttpResponse<String> res;
        try {
            res = http.send(request(e, method, path, null, timeoutNanos).build(), HttpResponse.BodyHandlers.ofString());
        } catch (IOException | IllegalArgumentException err) {
            throw new FlakeidException.Unavailable(e.base + ": " + err, err);
        } catch (InterruptedException err) {
            Thread.currentThread().interrupt();
            throw new FlakeidException.Unavailable("interrupted", err);
        }
        if (res.statusCode() < 200 || res.statusCode() > 299) {
            throw errorAnswer(e, res);
        }
        try {
            return (Map<String, Object>) Json.parse(res.body());
        } catch (RuntimeException err) {
            throw new FlakeidException.Unavailable(e.base + ": an answer that is not a JSON object: " + err.getMessage(), err);
        }
    }

    @SuppressWarnings("unchecked")
    private static FlakeidException errorAnswer(Endpoint e, HttpResponse<String> res) {
        int status = res.statusCode();
        String body = res.body();
        String code = "", message = body.length() > 500 ? body.substring(0, 500) : body.strip();
        try {
            Map<String, Object> err = (Map<String, Object>) ((Map<String, Object>) Json.parse(body)).get("error");
            if (err != null) {
                code = String.valueOf(err.getOrDefault("code", ""));
                message = String.valueOf(err.getOrDefault("message", ""));
            }
        } catch (RuntimeException ignored) {
            // not JSON: the status says it
        }
        Duration retryAfter = Duration.ZERO;
        try {
            retryAfter = Duration.ofMillis((long) (1000 * Double.parseDouble(res.headers().firstValue("Retry-After").orElse("0"))));
        } catch (NumberFormatException ignored) {
            // an HTTP date: not sent by flakeid
        }
        return FlakeidException.of(status, code, message, e.base, retryAfter);
    }

    /** Reads a 2xx answer for a failure told in it (Tinyid's paths answer 200 with a code of their own); null: none. */
    @FunctionalInterface
    interface Check {
        FlakeidException failure(Endpoint e, HttpResponse<String> res, Map<String, Object> answer);
    }

    /**
     * Sends method path?query (with body, JSON, when not null) to one
     * endpoint after another (see Client). check, when not null, reads each
     * 2xx answer: the error it returns is taken as that status's answer.
     */
    @SuppressWarnings("unchecked")
    Answer call(String method, String path, Map<String, ?> query, String data, long deadline, Check check) {
        checkOpen();
        var qs = new StringBuilder();
        for (var kv : query.entrySet()) {
            qs.append(qs.length() == 0 ? "?" : "&").append(kv.getKey()).append('=')
                    .append(URLEncoder.encode(String.valueOf(kv.getValue()), StandardCharsets.UTF_8));
        }
        String target = path + qs;
        int attempts = 0, rounds = 0;
        RuntimeException last = null;
        for (;;) {
            for (Endpoint e : order()) {
                long now = System.nanoTime();
                if (attempts >= maxAttempts || (deadline != NO_DEADLINE && now - deadline >= 0)) {
                    String why = attempts >= maxAttempts ? attempts + " attempts" : "the call's timeout";
                    throw new FlakeidException.Unavailable("no endpoint answered " + path + " within " + why + ": " + (last == null ? "" : last.getMessage()), last);
                }
                attempts++;
                long per = deadline == NO_DEADLINE ? timeoutNanos : Math.max(1_000_000, Math.min(timeoutNanos, deadline - now));
                var req = request(e, method, target, data, per);
                HttpResponse<String> res;
                long sent = System.nanoTime();
                try {
                    res = http.send(req.build(), HttpResponse.BodyHandlers.ofString());
                } catch (IOException | IllegalArgumentException err) {
                    failed(e, 0);
                    last = new FlakeidException.Unavailable(e.base + ": " + err, err);
                    continue;
                } catch (InterruptedException err) {
                    Thread.currentThread().interrupt();
                    throw new FlakeidException.Unavailable("interrupted", err);
                }
                int status = res.statusCode();
                String body = res.body();
                FlakeidException err;
                if (status >= 200 && status < 300) {
                    Map<String, Object> answer;
                    try {
                        answer = (Map<String, Object>) Json.parse(body);
                    } catch (RuntimeException bad) {
                        answered(e);
                        throw new FlakeidException.Unavailable(e.base + ": an answer that is not a JSON object: " + bad.getMessage(), bad);
                    }
                    err = check == null ? null : check.failure(e, res, answer);
                    if (err == null) {
                        answered(e);
                        return new Answer(e, answer, sent);
                    }
                    status = err.status();
                } else {
                    err = errorAnswer(e, res);
                }
                if (status == 408 || status == 429 || status >= 500) {
                    failed(e, err.retryAfter().toNanos());
                    last = err;
                    continue;
                }
                throw err;
            }
            long d = Math.min(backoffMaxNanos, backoffMinNanos << Math.min(rounds, 30));
            if (d < 0) {
                d = backoffMaxNanos;
            }
            rounds++;
            long pause = Math.min(backoffMaxNanos, Math.max(jitter(d), retryPause()));
            if (attempts >= maxAttempts || (deadline != NO_DEADLINE && System.nanoTime() + pause - deadline >= 0)) {
                throw new FlakeidException.Unavailable("no endpoint answered " + path + " (" + attempts + " attempts): " + (last == null ? "" : last.getMessage()), last);
            }
            try {
                Thread.sleep(Math.max(1, pause / 1_000_000));
            } catch (InterruptedException err) {
                Thread.currentThread().interrupt();
                throw new FlakeidException.Unavailable("interrupted", err);
            }
        }
    }
}
