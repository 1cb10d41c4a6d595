package io.github.flakeid.client;

import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertNotNull;
import static org.junit.Assert.assertThrows;
import static org.junit.Assert.assertTrue;

import com.sun.net.httpserver.HttpServer;
import java.io.BufferedReader;
import java.io.File;
import java.io.IOException;
import java.io.InputStreamReader;
import java.net.InetSocketAddress;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.KeyStore;
import java.security.cert.Certificate;
import java.security.cert.CertificateFactory;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.IntFunction;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import javax.net.ssl.SSLContext;
import javax.net.ssl.TrustManagerFactory;
import org.junit.AfterClass;
import org.junit.BeforeClass;
import org.junit.Test;

/**
 * Tests of the Java client against a live `flakeid serve` (built from this
 * repository, or the binary $FLAKEID_TEST_BIN names), and of its failover
 * against small HTTP servers of the test's own that fail on purpose.
 */
public class ClientTest {
    private static final String TOKEN = "java-client-test-token-0123456789";
    private static Server server;
    private static Server authServer;
    static Path buildDir;

    /** A `flakeid serve` on a port the OS picks, with its own data directory. */
    static final class Server {
        final Process proc;
        final Path dir;
        final String url;

        Server(String binary, String... args) throws Exception {
            this(binary, null, args);
        }

        /** A server of HTTPS (args with --tls-cert) when tls, which trusts its certificate, is not null. */
        Server(String binary, SSLContext tls, String... args) throws Exception {
            dir = Files.createTempDirectory("flakeid-java-");
            var cmd = new ArrayList<>(List.of(binary, "serve", "--listen", "127.0.0.1:0", "--data-dir", dir.toString()));
            cmd.addAll(List.of(args));
            var pb = new ProcessBuilder(cmd).redirectOutput(ProcessBuilder.Redirect.DISCARD);
            pb.environment().keySet().removeIf(k -> k.startsWith("FLAKEID_"));
            proc = pb.start();
            var log = new BufferedReader(new InputStreamReader(proc.getErrorStream(), StandardCharsets.UTF_8));
            Pattern p = Pattern.compile("msg=\"flakeid: listening; not ready until a worker id is leased\" addr=(\\S+)");
            String found = null;
            for (String line; found == null && (line = log.readLine()) != null; ) {
                Matcher m = p.matcher(line);
                if (m.find()) {
                    found = (tls == null ? "http://" : "https://") + m.group(1);
                }
            }
            if (found == null) {
                proc.destroyForcibly();
                throw new IllegalStateException("flakeid serve did not say where it listens");
            }
            url = found;
            Thread drain = new Thread(() -> {
                try {
                    while (log.readLine() != null) {
                        // the rest of the log
                    }
                } catch (IOException ignored) {
                    // the process ended
                }
            });
            drain.setDaemon(true);
            drain.start();
            var http = tls == null ? HttpClient.newHttpClient() : HttpClient.newBuilder().sslContext(tls).build();
            for (long end = System.nanoTime() + 60_000_000_000L; System.nanoTime() < end; Thread.sleep(50)) {
                try {
                    var res = http.send(HttpRequest.newBuilder(URI.create(url + "/readyz")).build(), HttpResponse.BodyHandlers.ofString());
                    if (res.statusCode() == 200) {
                        return;
                    }
                } catch (IOException ignored) {
                    // not yet
                }
            }
            throw new IllegalStateException("flakeid serve at " + url + " did not become ready");
        }

        void stop() throws Exception {
            proc.destroy();
            proc.waitFor();
            deleteTree(dir);
        }
    }

    /** An HTTP server of the test's own: answer(n) gives the status, Retry-After ("" none) and body of its n-th request. */
    static final class Fake implements AutoCloseable {
        record Answer(int status, String retryAfter, String body, long delayMs, Map<String, String> headers) {
            Answer(int status, String retryAfter, String body, long delayMs) {
                this(status, retryAfter, body, delayMs, Map.of());
            }
        }

        final HttpServer srv;
        final AtomicInteger requests = new AtomicInteger();
        /** The requests for IDs: not the client's reads of /v1/status, which check its endpoints against each other. */
        final AtomicInteger idRequests = new AtomicInteger();
        final String url;

        Fake(IntFunction<Answer> answer) throws IOException {
            srv = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
            srv.setExecutor(java.util.concurrent.Executors.newCachedThreadPool());
            srv.createContext("/", ex -> {
                Answer a = answer.apply(requests.getAndIncrement());
                if (!ex.getRequestURI().getPath().equals("/v1/status")) {
                    idRequests.incrementAndGet();
                }
                try {
                    if (a.delayMs() > 0) {
                        Thread.sleep(a.delayMs());
                    }
                    byte[] b = a.body().getBytes(StandardCharsets.UTF_8);
                    ex.getResponseHeaders().add("Content-Type", "application/json");
                    if (!a.retryAfter().isEmpty()) {
                        ex.getResponseHeaders().add("Retry-After", a.retryAfter());
                    }
                    a.headers().forEach(ex.getResponseHeaders()::add);
                    ex.sendResponseHeaders(a.status(), b.length);
                    ex.getResponseBody().write(b);
                } catch (IOException | InterruptedException ignored) {
                    // the client gave up on a slow answer, as it should
                } finally {
                    ex.close();
                }
            });
            srv.start();
            url = "http://127.0.0.1:" + srv.getAddress().getPort();
        }

        @Override
        public void close() {
            srv.stop(0);
        }
    }

    static Fake.Answer unavailable(String retryAfter) {
        return new Fake.Answer(503, retryAfter, "{\"error\":{\"code\":\"unavailable\",\"message\":\"no worker-id lease yet\"}}", 0);
    }

    static void deleteTree(Path p) throws IOException {
        if (Files.exists(p)) {
            try (var s = Files.walk(p)) {
                s.sorted((a, b) -> b.compareTo(a)).map(Path::toFile).forEach(File::delete);
            }
        }
    }

    /** $FLAKEID_TEST_BIN, or a flakeid built from this repository into buildDir (which the caller deletes). */
    static String flakeidBinary() throws Exception {
        String binary = System.getenv().getOrDefault("FLAKEID_TEST_BIN", "");
        if (binary.isEmpty()) {
            buildDir = Files.createTempDirectory("flakeid-java-bin-");
            binary = buildDir.resolve("flakeid").toString();
            Path repo = Path.of("").toAbsolutePath().getParent().getParent();
            int rc = new ProcessBuilder("go", "build", "-o", binary, "./cmd/flakeid").directory(repo.toFile()).inheritIO().start().waitFor();
            assertEquals("go build", 0, rc);
        }
        return binary;
    }

    /** The flakeid the tests run. */
    static String binary;

    @BeforeClass
    public static void start() throws Exception {
        binary = flakeidBinary();
        server = new Server(binary, "--auto-create-tags");
        Path tokens = Files.createTempFile("flakeid-java-tokens-", ".json");
        Files.writeString(tokens, "[{\"name\":\"test\",\"token\":\"" + TOKEN + "\",\"tags\":[\"*\"],\"snowflake\":true,\"admin\":true}]");
        authServer = new Server(binary, "--tokens-file", tokens.toString(), "--auto-create-tags");
        Files.delete(tokens);
    }

    @AfterClass
    public static void stop() throws Exception {
        if (server != null) {
            server.stop();
        }
        if (authServer != null) {
            authServer.stop();
        }
        if (buildDir != null) {
            deleteTree(buildDir);
        }
    }

    static Client client(Config cfg) {
        return new Client(cfg);
    }

    static boolean increasing(long[] ids) {
        for (int i = 1; i < ids.length; i++) {
            if (ids[i - 1] >= ids[i]) {
                return false;
            }
        }
        return true;
    }

    static int distinct(long[]... arrays) {
        var s = new HashSet<Long>();
        for (long[] a : arrays) {
            Arrays.stream(a).forEach(s::add);
        }
        return s.size();
    }

    /**
     * Two servers on their own file coordinators both hold worker 0 of
     * datacenter 0: a client given both must refuse their Snowflake IDs
     * (plain, buffered, texts, a local generator's lease), naming both; one
     * on another datacenter is fine.
     */
    @Test
    public void endpointsThatCanIssueTheSameIdsAreRefused() throws Exception {
        var a = new Server(binary);
        var b = new Server(binary);
        var other = new Server(binary, "--datacenter", "1");
        try {
            for (int snowflake : new int[] {0, 1000}) {
                try (var c = client(Config.of(a.url, b.url).withBuffer(new BufferConfig(snowflake, 0, 0)))) {
                    var e = assertThrows(FlakeidException.Overlap.class, () -> c.nextId(Duration.ofSeconds(10)));
                    assertTrue(e.getMessage(), e.getMessage().contains(a.url) && e.getMessage().contains(b.url)
                            && e.getMessage().contains("both hold the same worker id"));
                    assertThrows(FlakeidException.Overlap.class, () -> c.nextTexts(2)); // and every later Snowflake call
                }
            }
            try (var c = client(Config.of(b.url, a.url))) {
                assertThrows(FlakeidException.Overlap.class, () -> c.localGenerator("overlap"));
            }
            try (var c = client(Config.of(a.url, other.url))) {
                var ids = new HashSet<Long>();
                for (long id : c.nextIds(10)) {
                    ids.add(id);
                }
                for (long id : c.nextIds(10)) {
                    ids.add(id);
                }
                assertEquals(20, ids.size());
                assertTrue(c.localGenerator("apart").nextId(Duration.ofSeconds(10)) > 0);
            }
        } finally {
            a.stop();
            b.stop();
            other.stop();
        }
    }

    /** An SSLContext that trusts the certificate in pem (a private CA's, or a self-signed one). */
    static SSLContext trusting(Path pem) throws Exception {
        Certificate cert;
        try (var in = Files.newInputStream(pem)) {
            cert = CertificateFactory.getInstance("X.509").generateCertificate(in);
        }
        var ks = KeyStore.getInstance(KeyStore.getDefaultType());
        ks.load(null, null);
        ks.setCertificateEntry("ca", cert);
        var tmf = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
        tmf.init(ks);
        var ctx = SSLContext.getInstance("TLS");
        ctx.init(null, tmf.getTrustManagers(), null);
        return ctx;
    }

    /**
     * HTTPS with a certificate of a private CA: trusted through
     * Config.withSslContext, refused without it (the JVM's trust store does
     * not know the CA).
     */
    @Test
    public void aPrivateCaIsTrustedThroughTheSslContext() throws Exception {
        Path dir = Files.createTempDirectory("flakeid-java-tls-");
        try {
            Path cert = dir.resolve("cert.pem");
            Path key = dir.resolve("key.pem");
            int rc = new ProcessBuilder("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                    "-keyout", key.toString(), "-out", cert.toString(), "-days", "1", "-subj", "/CN=flakeid test",
                    "-addext", "subjectAltName=IP:127.0.0.1").redirectErrorStream(true).redirectOutput(ProcessBuilder.Redirect.DISCARD).start().waitFor();
            assertEquals("openssl req", 0, rc);
            SSLContext tls = trusting(cert);
            var srv = new Server(binary, tls, "--tls-cert", cert.toString(), "--tls-key", key.toString());
            try {
                assertTrue(srv.url, srv.url.startsWith("https://"));
                try (var c = client(Config.of(srv.url).withSslContext(tls))) {
                    assertTrue(c.nextId() > 0);
                }
                try (var c = client(Config.of(srv.url).withMaxAttempts(1))) {
                    var e = assertThrows(FlakeidException.Unavailable.class, () -> c.nextId());
                    assertTrue(e.getMessage(), e.getMessage().contains("SSL") || e.getMessage().contains("certificat") || e.getMessage().contains("PKIX"));
                }
            } finally {
                srv.stop();
            }
        } finally {
            deleteTree(dir);
        }
    }

    @Test
    public void idsAreUniqueIncreasingAndDecode() {
        try (var c = client(Config.of(server.url))) {
            long[] ids = new long[200];
            System.arraycopy(c.nextIds(100), 0, ids, 0, 100);
            for (int i = 100; i < 200; i++) {
                ids[i] = c.nextId();
            }
            assertEquals(200, distinct(ids));
            assertTrue(increasing(ids));
            Parts p = c.decode(Long.toString(ids[0]));
            assertEquals(ids[0], p.id());
            assertTrue(Duration.between(p.time(), Instant.now()).abs().toSeconds() < 60);
        }
    }

    @Test
    public void bufferHandsOutUniqueIdsAcrossRefills() {
        try (var c = client(Config.of(server.url).withBuffer(new BufferConfig(1000, 0, 0.5)))) {
            long[] ids = new long[5000];
            for (int i = 0; i < ids.length; i++) {
                ids[i] = c.nextId();
            }
            assertEquals(5000, distinct(ids));
            assertTrue(increasing(ids));
            long[] big = c.nextIds(3000); // a request of its own
            assertEquals(8000, distinct(ids, big));
        }
    }

    @Test
    public void segmentIdsAndSeriesNumbers() throws Exception {
        try (var c = client(Config.of(server.url).withBuffer(new BufferConfig(0, 100, 0))); var plain = client(Config.of(server.url))) {
            long[] a = new long[250];
            for (int i = 0; i < a.length; i++) {
                a[i] = c.nextSegment("java-orders");
            }
            long[] b = plain.nextSegmentIds("java-orders", 50);
            assertEquals(300, distinct(a, b));
            var body = "{\"tag\":\"java-ord\",\"step\":100,\"period\":\"day\",\"template\":\"ORD-{yyyyMMdd}-{seq:6}\"}";
            HttpClient.newHttpClient().send(HttpRequest.newBuilder(URI.create(server.url + "/v1/segment/tags"))
                    .header("Content-Type", "application/json").POST(HttpRequest.BodyPublishers.ofString(body)).build(), HttpResponse.BodyHandlers.ofString());
            var nums = new ArrayList<>(plain.nextNumbers("java-ord", 3));
            nums.add(plain.nextNumber("java-ord"));
            assertEquals(4, new HashSet<>(nums).size());
            nums.forEach(n -> assertTrue(n, n.matches("ORD-\\d{8}-\\d{6}")));
            assertThrows(FlakeidException.InvalidArgument.class, () -> plain.nextNumbers("java-not-a-series", 1));
            assertThrows(FlakeidException.InvalidArgument.class, () -> plain.nextSegmentIds("java-ord", 1));
        }
    }

    /** POSTs a tag's settings (JSON) to the server's /v1/segment/tags. */
    static void createTag(String json) throws Exception {
        var res = HttpClient.newHttpClient().send(HttpRequest.newBuilder(URI.create(server.url + "/v1/segment/tags"))
                .header("Content-Type", "application/json").POST(HttpRequest.BodyPublishers.ofString(json)).build(), HttpResponse.BodyHandlers.ofString());
        assertTrue(res.body(), res.statusCode() / 100 == 2);
    }

    /**
     * A server that masks its Snowflake IDs and a tag: nextId's buffer of
     * ranges is refused there, the buffers of texts are not; every text is
     * handed out once, across refills, and reads back as an ID.
     */
    @Test
    public void textsBufferedAndNot() throws Exception {
        var masked = new Server(binary, "--mask-key", "000102030405060708090a0b0c0d0e0f", "--mask-snowflake", "--mask-tags", "java-masked", "--auto-create-tags");
        try (var c = client(Config.of(masked.url).withBuffer(new BufferConfig(100, 50, 0))); var plain = client(Config.of(masked.url))) {
            var texts = new ArrayList<String>();
            for (int i = 0; i < 350; i++) {
                texts.add(c.nextText());
            }
            texts.addAll(c.nextTexts(50));
            texts.addAll(plain.nextTexts(20));
            assertEquals(420, new HashSet<>(texts).size());
            assertFalse(texts.get(0), texts.stream().anyMatch(t -> t.matches("\\d+")));
            long[] ids = new long[6];
            int k = 0;
            for (String t : List.of(texts.get(0), texts.get(1), texts.get(2), texts.get(340), texts.get(341), texts.get(342))) {
                ids[k++] = c.decode(t, "masked", null).id();
            }
            assertTrue(Arrays.toString(ids), increasing(ids));
            assertEquals(1000, c.nextTexts(1000).size()); // more than half a batch: a request of its own
            var refused = assertThrows(FlakeidException.class, c::nextId); // ranges of a masked space are refused
            assertTrue(refused.toString(), refused.isApiError());
            var seg = new ArrayList<String>();
            for (int i = 0; i < 120; i++) {
                seg.add(c.nextSegmentText("java-masked"));
            }
            seg.addAll(plain.nextSegmentTexts("java-masked", 30, null));
            assertEquals(150, new HashSet<>(seg).size());
            assertFalse(seg.get(0), seg.stream().anyMatch(t -> t.matches("\\d+")));
        } finally {
            masked.stop();
        }
        try (var c = client(Config.of(server.url).withBuffer(new BufferConfig(100, 40, 0)))) {
            long[] ids = new long[250];
            for (int i = 0; i < ids.length; i++) {
                ids[i] = Long.parseLong(c.nextText());
            }
            assertTrue(increasing(ids));
            long[] seg = new long[100];
            for (int i = 0; i < seg.length; i++) {
                seg[i] = Long.parseLong(c.nextSegmentText("java-texts"));
            }
            assertEquals(130, distinct(seg, c.nextSegmentIds("java-texts", 30)));
            createTag("{\"tag\":\"java-text-series\",\"step\":10,\"period\":\"day\",\"template\":\"T-{yyyyMMdd}-{seq:4}\"}");
            // A series' numbers are not IDs, buffered or not.
            assertThrows(FlakeidException.InvalidArgument.class, () -> c.nextSegmentText("java-text-series"));
            assertThrows(FlakeidException.InvalidArgument.class, () -> c.nextSegmentTexts("java-text-series", 1000, null));
        }
    }

    /** takeSegment: a whole segment for this client alone, apart from every other and from the IDs the server hands out. */
    @Test
    public void takeSegment() throws Exception {
        createTag("{\"tag\":\"java-take\",\"step\":50}");
        var seen = new HashSet<Long>();
        try (var c = client(Config.of(server.url).withBuffer(new BufferConfig(0, 20, 0)))) {
            for (int round = 0; round < 10; round++) {
                Segment seg = c.takeSegment("java-take");
                assertEquals("java-take", seg.tag());
                assertEquals(1, seg.stride());
                assertEquals(50, seg.count());
                long[] ids = seg.ids().toArray();
                assertEquals(50, ids.length);
                assertEquals(seg.first(), ids[0]);
                assertEquals(seg.last(), ids[49]);
                int n = 0;
                for (long id : seg) {
                    assertEquals(ids[n++], id);
                }
                var more = new ArrayList<Long>();
                for (int i = 0; i < 7; i++) {
                    more.add(c.nextSegment("java-take"));
                }
                Arrays.stream(c.nextSegmentIds("java-take", 30)).forEach(more::add);
                Arrays.stream(ids).forEach(more::add);
                for (long id : more) {
                    assertTrue("ID " + id + " handed out twice", seen.add(id));
                }
            }
            assertThrows(FlakeidException.InvalidArgument.class, () -> c.takeSegment("bad tag!"));
        }
        try (var c = client(Config.of(authServer.url))) {
            assertThrows(FlakeidException.PermissionDenied.class, () -> c.takeSegment("java-take"));
        }
        try (var c = client(Config.of(authServer.url).withToken(TOKEN))) {
            assertEquals("java-take-auth", c.takeSegment("java-take-auth").tag());
        }
    }

    /** The buffer of texts asks for a batch per refill, not a text per call, and hands them out in the order the server wrote them. */
    @Test
    public void textsComeABatchAtATime() throws Exception {
        try (var f = new Fake(n -> {
            var ids = new ArrayList<String>();
            for (int i = 0; i < 100; i++) {
                ids.add("\"t" + n + "-" + i + "\"");
            }
            return new Fake.Answer(200, "", "{\"ids\":[" + String.join(",", ids) + "]}", 0);
        }); var c = client(Config.of(f.url).withBuffer(new BufferConfig(100, 0, 0)))) {
            for (int k = 0; k < 250; k++) {
                assertEquals("t" + k / 100 + "-" + k % 100, c.nextText());
            }
            assertTrue(String.valueOf(f.idRequests.get()), f.idRequests.get() <= 4);
        }
    }

    /**
     * Tinyid's answers (HTTP 200 and codes of its own), and flakeid's header
     * on them: code 6 moves to the next endpoint, code 5 is PermissionDenied
     * at once, not_found NotFound at once, and a segment that is not a run of
     * IDs is not taken.
     */
    @Test
    public void takeSegmentReadsTinyidAnswers() throws Exception {
        IntFunction<Fake.Answer> good = n -> new Fake.Answer(200, "",
                "{\"data\":{\"currentId\":100,\"loadingId\":120,\"maxId\":200,\"delta\":2,\"remainder\":0,\"bizType\":\"test\"},\"code\":200,\"message\":\"\"}", 0);
        try (var ok = new Fake(good);
                var down = new Fake(n -> new Fake.Answer(200, "", "{\"data\":null,\"code\":6,\"message\":\"sys error\"}", 0));
                var refused = new Fake(n -> new Fake.Answer(200, "", "{\"data\":null,\"code\":5,\"message\":\"token is error\"}", 0));
                var missing = new Fake(n -> new Fake.Answer(200, "", "{\"data\":null,\"code\":6,\"message\":\"no such tag\"}", 0,
                        Map.of("X-Flakeid-Error-Code", "not_found")));
                var broken = new Fake(n -> new Fake.Answer(200, "",
                        "{\"data\":{\"currentId\":100,\"loadingId\":120,\"maxId\":201,\"delta\":2,\"remainder\":0},\"code\":200,\"message\":\"\"}", 0))) {
            try (var c = client(Config.of(down.url, ok.url))) {
                Segment seg = c.takeSegment("test");
                assertEquals(List.of(102L, 200L, 2L, 50L), List.of(seg.first(), seg.last(), seg.stride(), seg.count()));
                assertArrayEquals(new long[] {102, 104, 106}, seg.ids().limit(3).toArray());
                assertEquals(1, down.idRequests.get());
            }
            try (var c = client(Config.of(refused.url, ok.url))) {
                var e = assertThrows(FlakeidException.PermissionDenied.class, () -> c.takeSegment("test"));
                assertEquals(refused.url, e.endpoint());
                assertEquals(1, refused.idRequests.get());
            }
            try (var c = client(Config.of(missing.url, ok.url))) {
                var e = assertThrows(FlakeidException.NotFound.class, () -> c.takeSegment("test"));
                assertEquals(missing.url, e.endpoint());
                assertEquals(1, missing.idRequests.get());
            }
            try (var c = client(Config.of(broken.url).withMaxAttempts(3).withBackoff(Duration.ofMillis(10), Duration.ofMillis(20)))) {
                var e = assertThrows(FlakeidException.Unavailable.class, () -> c.takeSegment("test"));
                assertTrue(e.getMessage(), e.getMessage().contains("do not make a run of IDs"));
            }
        }
    }

    @Test
    public void uuidFormsAndBounds() {
        try (var c = client(Config.of(server.url))) {
            for (String u : c.nextUuids(3, "uuid7")) {
                assertEquals(7, UUID.fromString(u).version());
            }
            for (String t : c.nextUuids(2, "typeid", "order", null)) {
                assertTrue(t, t.matches("order_[0-9a-hjkmnp-tv-z]{26}"));
            }
            String ulid = c.nextUuids(1, "ulid").get(0);
            assertEquals("ulid", c.decode(ulid).form());
            assertThrows(FlakeidException.InvalidArgument.class, () -> c.nextUuids(1, "uuid4"));
            long id = c.nextId();
            Bounds b = c.bounds("-1h", "+1h");
            assertTrue(b.min() <= id && id <= b.max());
            var e = assertThrows(FlakeidException.InvalidArgument.class, () -> c.bounds("2026-03-02", "2026-03-01"));
            assertTrue(e.isApiError());
            assertEquals(400, e.status());
        }
    }

    @Test
    public void errorsTellApartAndTokens() {
        try (var c = client(Config.of(server.url))) {
            assertThrows(FlakeidException.InvalidArgument.class, () -> c.nextIds(0));
            assertThrows(FlakeidException.InvalidArgument.class, () -> c.nextSegment("bad tag!"));
            var e = assertThrows(FlakeidException.InvalidArgument.class, () -> c.decode("not-an-id"));
            assertEquals(server.url, e.endpoint());
        }
        try (var c = client(Config.of(authServer.url))) {
            var e = assertThrows(FlakeidException.Unauthenticated.class, c::nextId);
            assertEquals(401, e.status());
        }
        try (var c = client(Config.of(authServer.url).withToken("wrong-token-0123456789"))) {
            assertThrows(FlakeidException.Unauthenticated.class, c::nextId);
        }
        try (var c = client(Config.of(authServer.url).withToken(TOKEN))) {
            assertTrue(c.nextId() > 0);
        }
    }

    @Test
    public void closed() {
        var c = client(Config.of(server.url).withBuffer(new BufferConfig(100, 0, 0)));
        c.nextId();
        c.close();
        c.close();
        assertThrows(FlakeidException.Closed.class, c::nextId);
        assertThrows(FlakeidException.Closed.class, () -> c.nextIds(1000));
    }

    @Test
    public void hangingEndpointIsPassedOver() throws Exception {
        try (var f = new Fake(n -> new Fake.Answer(200, "", "{\"ids\":[\"1\"]}", 2000));
                var c = client(Config.of(f.url, server.url).withTimeout(Duration.ofMillis(500)).withBackoff(Duration.ofSeconds(5), Duration.ofSeconds(10)))) {
            long start = System.nanoTime();
            assertTrue(c.nextId() > 1);
            assertTrue(System.nanoTime() - start >= 450_000_000L);
            for (int i = 0; i < 20; i++) {
                c.nextId();
            }
            assertEquals("the hanging endpoint was asked again within its backoff", 1, f.idRequests.get());
        }
    }

    @Test
    public void retryAfterIsHonoured() throws Exception {
        try (var f = new Fake(n -> unavailable("1"));
                var c = client(Config.of(f.url, server.url).withBackoff(Duration.ofMillis(10), Duration.ofMillis(50)))) {
            c.nextId();
            c.nextId();
            assertEquals(1, f.idRequests.get());
        }
        try (var g = new Fake(n -> n == 0 ? unavailable("1") : new Fake.Answer(200, "", "{\"ids\":[\"42\"]}", 0));
                var c = client(Config.of(g.url).withBackoff(Duration.ofMillis(10), Duration.ofSeconds(2)))) {
            long start = System.nanoTime();
            assertEquals(42, c.nextId());
            assertTrue(System.nanoTime() - start >= 900_000_000L);
        }
    }

    @Test
    public void givesUpAndClientErrorsAreNotRetried() throws Exception {
        try (var f = new Fake(n -> unavailable(""))) {
            try (var c = client(Config.of(f.url).withMaxAttempts(3).withBackoff(Duration.ofMillis(10), Duration.ofMillis(20)))) {
                var e = assertThrows(FlakeidException.Unavailable.class, c::nextId);
                assertTrue(e.getCause() instanceof FlakeidException fe && fe.isApiError());
                assertEquals(3, f.requests.get());
            }
            try (var c = client(Config.of(f.url).withMaxAttempts(1000).withBackoff(Duration.ofMillis(10), Duration.ofMillis(50)))) {
                long start = System.nanoTime();
                assertThrows(FlakeidException.Unavailable.class, () -> c.nextId(Duration.ofMillis(300)));
                assertTrue(System.nanoTime() - start < 3_000_000_000L); // 300 ms, and a pause of at most 50 ms
            }
        }
        try (var g = new Fake(n -> new Fake.Answer(404, "", "{\"error\":{\"code\":\"not_found\",\"message\":\"no tag x\"}}", 0));
                var c = client(Config.of(g.url, server.url))) {
            var e = assertThrows(FlakeidException.NotFound.class, () -> c.nextSegment("x"));
            assertEquals("not_found", e.code());
            assertEquals(1, g.requests.get());
            try (var b = client(Config.of(g.url).withBuffer(new BufferConfig(0, 10, 0)))) {
                // Through a buffer too, at once despite its timeout.
                assertThrows(FlakeidException.NotFound.class, () -> b.nextSegmentIds("x", 1, Duration.ofSeconds(30)));
            }
        }
    }

    @Test
    public void bufferRidesOutAnOutage() throws Exception {
        var up = new AtomicBoolean(true);
        try (var f = new Fake(n -> up.get()
                ? new Fake.Answer(200, "", "{\"count\":100,\"ranges\":[{\"first\":\"" + (1000L * n + 1) + "\",\"count\":100,\"stride\":1}]}", 0)
                : unavailable(""));
                var c = client(Config.of(f.url).withBuffer(new BufferConfig(100, 0, 0.5)).withBackoff(Duration.ofMillis(10), Duration.ofMillis(50)))) {
            assertEquals(1, c.nextId());
            up.set(false);
            long[] got = new long[99];
            for (int i = 0; i < got.length; i++) {
                got[i] = c.nextId();
            }
            long[] want = new long[99];
            Arrays.setAll(want, i -> i + 2);
            assertArrayEquals(want, got);
            assertThrows(FlakeidException.Unavailable.class, () -> c.nextId(Duration.ofMillis(200)));
            up.set(true);
            assertTrue(c.nextId(Duration.ofSeconds(5)) > 100);
        }
    }

    @Test
    public void configIsValidated() {
        for (Config bad : List.of(Config.of(), Config.of("ftp://x"), Config.of("http://a", "http://a/"), Config.of("http://a").withTimeout(Duration.ofSeconds(-1)),
                Config.of("http://a").withMaxAttempts(1001), Config.of("http://a").withBackoff(Duration.ofSeconds(2), Duration.ofSeconds(1)),
                Config.of("http://a").withToken("a\nb"), Config.of("http://a").withBuffer(new BufferConfig(0, 0, 2)))) {
            assertThrows(bad.toString(), FlakeidException.InvalidConfig.class, () -> new Client(bad));
        }
        Config d = Config.defaults();
        d.validate();
        assertEquals(List.of(Config.DEFAULT_ENDPOINT), d.endpoints());
        assertEquals(10_000, d.buffer().snowflake());
        assertFalse(d.buffer().segment() > 0);
        assertNotNull(d.timeout());
    }
}
