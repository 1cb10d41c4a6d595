package io.github.flakeid.client;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertNotEquals;
import static org.junit.Assert.assertThrows;
import static org.junit.Assert.assertTrue;

import com.sun.net.httpserver.HttpServer;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.AfterClass;
import org.junit.BeforeClass;
import org.junit.Test;

/**
 * Tests of the local generator: against live `flakeid serve` processes —
 * with generators in child JVMs the test pauses (SIGSTOP) past their lease
 * and kills (SIGKILL) — and, for the fence's arithmetic, against a lease
 * server of the test's own.
 */
public class LocalGeneratorTest {
    private static String binary;
    private static ClientTest.Server server;

    @BeforeClass
    public static void start() throws Exception {
        binary = ClientTest.flakeidBinary();
        server = new ClientTest.Server(binary);
    }

    @AfterClass
    public static void stop() throws Exception {
        if (server != null) {
            server.stop();
        }
        if (ClientTest.buildDir != null) {
            ClientTest.deleteTree(ClientTest.buildDir);
        }
    }

    /** [tick, datacenter, worker, sequence] of an ID. */
    static long[] decode(long id, int db, int wb, int sb) {
        return new long[] {id >>> (db + wb + sb), id >>> (wb + sb) & ((1L << db) - 1), id >>> sb & ((1L << wb) - 1), id & ((1L << sb) - 1)};
    }

    static long[] decode(long id) {
        return decode(id, 5, 5, 12);
    }

    @Test
    public void uniqueAcrossThreadsGeneratorsAndTheServer() throws Exception {
        var all = Collections.synchronizedList(new ArrayList<Long>());
        try (var c = new Client(Config.of(server.url))) {
            var gens = List.of(c.localGenerator("java-a"), c.localGenerator("java-b"));
            assertNotEquals(gens.get(0).worker(), gens.get(1).worker());
            var threads = new ArrayList<Thread>();
            var failed = new AtomicReference<Throwable>();
            for (var g : gens) {
                for (int t = 0; t < 2; t++) {
                    threads.add(new Thread(() -> {
                        try {
                            long prev = -1;
                            var mine = new ArrayList<Long>();
                            for (int i = 0; i < 20000; i++) {
                                long id = g.nextId(Duration.ofSeconds(5));
                                if (id <= prev) {
                                    throw new AssertionError(id + " after " + prev);
                                }
                                prev = id;
                                mine.add(id);
                            }
                            all.addAll(mine);
                        } catch (Throwable e) {
                            failed.set(e);
                        }
                    }));
                }
            }
            threads.forEach(Thread::start);
            long[] served = c.nextIds(5000);
            for (var t : threads) {
                t.join();
            }
            if (failed.get() != null) {
                throw new AssertionError(failed.get());
            }
            for (long id : served) {
                all.add(id);
            }
            assertEquals(all.size(), new HashSet<>(all).size());
            long own = decode(served[0])[2];
            for (var g : gens) {
                assertNotEquals(own, g.worker());
            }
            long epochMs = 1735689600000L; // 2025-01-01, the default layout's epoch
            assertTrue(Math.abs(epochMs + decode(all.get(0))[0] - System.currentTimeMillis()) < 5000);
            gens.get(0).close();
            assertThrows(FlakeidException.Closed.class, () -> gens.get(0).nextId());
            c.close(); // closes the other
            assertThrows(FlakeidException.Closed.class, () -> gens.get(1).nextId());
        }
    }

    @Test
    public void refusals() throws Exception {
        try (var c = new Client(Config.of(server.url))) {
            assertThrows(FlakeidException.InvalidArgument.class, () -> c.localGenerator("a b"));
        }
        var masked = new ClientTest.Server(binary, "--mask-key", "000102030405060708090a0b0c0d0e0f", "--mask-snowflake");
        try (var c = new Client(Config.of(masked.url))) {
            var e = assertThrows(FlakeidException.class, () -> c.localGenerator(""));
            assertEquals("failed_precondition", e.code());
        } finally {
            masked.stop();
        }
    }

    /** A child JVM running Child: a local generator printing its IDs. */
    static final class ChildProcess {
        final Process proc;
        final long worker;
        final List<Long> ids = Collections.synchronizedList(new ArrayList<>());
        final Thread reader;

        ChildProcess(String url, String owner) throws IOException {
            String java = ProcessHandle.current().info().command().orElse("java");
            proc = new ProcessBuilder(java, "-cp", System.getProperty("java.class.path"), Child.class.getName(), url, owner)
                    .redirectError(ProcessBuilder.Redirect.INHERIT).start();
            var r = new BufferedReader(new InputStreamReader(proc.getInputStream(), StandardCharsets.UTF_8));
            String first = r.readLine();
            if (first == null || !first.startsWith("ready ")) {
                proc.destroyForcibly();
                throw new IllegalStateException("the child did not start: " + first);
            }
            worker = Long.parseLong(first.split(" ")[2]);
            reader = new Thread(() -> {
                try {
                    for (String line; (line = r.readLine()) != null; ) {
                        for (String f : line.split(" ")) {
                            ids.add(Long.parseLong(f));
                        }
                    }
                } catch (IOException | NumberFormatException ignored) {
                    // killed mid-line
                }
            });
            reader.start();
        }

        void signal(String sig) throws Exception {
            new ProcessBuilder("kill", "-" + sig, Long.toString(proc.pid())).start().waitFor();
        }

        void kill() throws Exception {
            proc.destroyForcibly().waitFor();
            reader.join(5000);
        }
    }

    /** The child's main: prints "ready <datacenter> <worker>", then its IDs, 200 a line. */
    public static final class Child {
        public static void main(String[] args) {
            var c = new Client(Config.of(args[0]).withTimeout(Duration.ofSeconds(2)));
            var g = c.localGenerator(args[1], Duration.ofSeconds(30));
            System.out.println("ready " + g.datacenter() + " " + g.worker());
            System.out.flush();
            var line = new StringBuilder();
            for (;;) {
                line.setLength(0);
                try {
                    for (int i = 0; i < 200; i++) {
                        line.append(i == 0 ? "" : " ").append(g.nextId(Duration.ofMillis(200)));
                    }
                } catch (FlakeidException.Unavailable e) {
                    continue;
                }
                System.out.println(line);
                System.out.flush();
            }
        }
    }

    @Test
    public void sigstopPastTheTtlAndKill9CostNoDuplicate() throws Exception {
        // Two worker ids (the server's own and one more), a 2 s TTL: a
        // generator paused for 4 s loses its lease, and the next process
        // gets the same worker id.
        var srv = new ClientTest.Server(binary, "--worker-bits", "1", "--time-bits", "45", "--lease-ttl", "2s");
        var kids = new ArrayList<ChildProcess>();
        try (var c = new Client(Config.of(srv.url))) {
            var served = new ArrayList<Long>();
            for (long id : c.nextIds(1000)) {
                served.add(id);
            }
            var a = new ChildProcess(srv.url, "java-a");
            kids.add(a);
            Thread.sleep(1000);
            a.signal("STOP");
            int stopped = a.ids.size();
            Thread.sleep(4000);
            var b = new ChildProcess(srv.url, "java-b");
            kids.add(b);
            assertEquals(a.worker, b.worker);
            a.signal("CONT");
            Thread.sleep(1500);
            a.kill();
            b.kill();
            var d = new ChildProcess(srv.url, "java-c");
            kids.add(d);
            Thread.sleep(3000); // it starts past b's reservation: up to 2 s ahead
            d.kill();
            for (long id : c.nextIds(1000)) {
                served.add(id);
            }
            assertTrue(stopped + " " + b.ids.size() + " " + d.ids.size(), stopped > 0 && !b.ids.isEmpty() && !d.ids.isEmpty());
            var every = new ArrayList<Long>(a.ids);
            every.addAll(b.ids);
            every.addAll(d.ids);
            every.addAll(served);
            assertEquals("a duplicate ID", every.size(), new HashSet<>(every).size());
            assertTrue("a and b share ticks", span(a.ids)[1] < span(b.ids)[0]);
            assertTrue("b and c share ticks", span(b.ids)[1] < span(d.ids)[0]);
        } finally {
            for (var k : kids) {
                k.signal("CONT");
                k.kill();
            }
            srv.stop();
        }
    }

    /** The least and greatest tick of ids in the test's small layout. */
    static long[] span(List<Long> ids) {
        long lo = Long.MAX_VALUE, hi = Long.MIN_VALUE;
        for (long id : ids) {
            long t = decode(id, 5, 1, 12)[0];
            lo = Math.min(lo, t);
            hi = Math.max(hi, t);
        }
        return new long[] {lo, hi};
    }

    static String lease(String name, int worker, long first, long end, long nowUs) {
        return "{\"lease\":\"" + name + "\",\"datacenter\":1,\"worker\":" + worker + ",\"layout\":{\"time_bits\":41,\"datacenter_bits\":5,"
                + "\"worker_bits\":5,\"sequence_bits\":12,\"time_unit_us\":1000,\"name\":\"t\"},\"first_tick\":" + first + ",\"end_tick\":" + end
                + ",\"now_us\":" + nowUs + ",\"renew_every_ms\":50,\"ttl_ms\":1000}";
    }

    /**
     * A lease server of the test's own: answer(method, path, n) gives the
     * status and body of its n-th request, and optionally how many ms to
     * wait before sending them.
     */
    interface LeaseAnswer {
        String[] answer(String method, String path, int n);
    }

    static HttpServer leaseServer(LeaseAnswer answer, List<String> requests) throws IOException {
        var srv = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
        srv.setExecutor(java.util.concurrent.Executors.newCachedThreadPool());
        srv.createContext("/", ex -> {
            ex.getRequestBody().readAllBytes();
            int n;
            synchronized (requests) {
                n = requests.size();
                requests.add(ex.getRequestMethod() + " " + ex.getRequestURI().getPath());
            }
            String[] a = answer.answer(ex.getRequestMethod(), ex.getRequestURI().getPath(), n);
            if (a.length > 2) {
                try {
                    Thread.sleep(Long.parseLong(a[2]));
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }
            byte[] b = a[1].getBytes(StandardCharsets.UTF_8);
            ex.getResponseHeaders().add("Content-Type", "application/json");
            ex.sendResponseHeaders(Integer.parseInt(a[0]), b.length);
            ex.getResponseBody().write(b);
            ex.close();
        });
        srv.start();
        return srv;
    }

    @Test
    public void nothingAtOrPastEndTickThenANewLease() throws Exception {
        long t0 = 1_000_000;
        var state = new AtomicReference<>("fail");
        String down = "{\"error\":{\"code\":\"unavailable\",\"message\":\"down\"}}";
        var requests = new ArrayList<String>();
        var srv = leaseServer((method, path, n) -> {
            if (method.equals("POST") && path.equals("/v1/leases")) {
                if (n == 0) {
                    return new String[] {"200", lease("a".repeat(32), 3, t0, t0 + 200, t0 * 1000)};
                }
                return state.get().equals("fail") ? new String[] {"503", down}
                        : new String[] {"200", lease("b".repeat(32), 4, t0 + 200, t0 + 100000, (t0 + 300) * 1000)};
            }
            if (method.equals("POST")) {
                return state.get().equals("fail") ? new String[] {"503", down}
                        : new String[] {"404", "{\"error\":{\"code\":\"not_found\",\"message\":\"lost\"}}"};
            }
            return new String[] {"200", "{\"released\":true}"};
        }, requests);
        String url = "http://127.0.0.1:" + srv.getAddress().getPort();
        try (var c = new Client(Config.of(url).withBackoff(Duration.ofMillis(10), Duration.ofMillis(50)))) {
            var g = c.localGenerator("fence");
            var ids = new ArrayList<Long>();
            for (;;) {
                try {
                    ids.add(g.nextId(Duration.ofMillis(300)));
                } catch (FlakeidException.Unavailable e) {
                    assertTrue(e.getMessage(), e.getMessage().contains("whole reservation"));
                    break;
                }
            }
            assertTrue(ids.size() + " IDs", ids.size() > 1000);
            for (long id : ids) {
                long[] p = decode(id);
                assertTrue("tick " + p[0], p[0] >= t0 && p[0] < t0 + 200);
                assertEquals(1, p[1]);
                assertEquals(3, p[2]);
            }
            assertEquals(ids.size(), new HashSet<>(ids).size());
            state.set("lost");
            long next = g.nextId(Duration.ofSeconds(5));
            assertEquals(4, decode(next)[2]);
            assertTrue(decode(next)[0] >= t0 + 200);
            g.close();
            synchronized (requests) {
                assertTrue(requests.toString(), requests.contains("DELETE /v1/leases/" + "b".repeat(32)));
            }
        } finally {
            srv.stop(0);
        }
    }

    /**
     * The server reads its clock (now_us) when the request arrives; its
     * answer comes 1.5 s later, as to a process paused before it read it.
     * The lease's 1 s of ticks has run out by then: the generator must issue
     * nothing on it (its clock starts at the sending, not at the answer's
     * arrival), and takes a new lease.
     */
    @Test
    public void anAnswerReadLateIsNotAStaleClock() throws Exception {
        long t0 = 1_000_000;
        var requests = new ArrayList<String>();
        var srv = leaseServer((method, path, n) -> {
            if (method.equals("POST") && path.equals("/v1/leases")) {
                return n == 0 ? new String[] {"200", lease("a".repeat(32), 3, t0, t0 + 1000, t0 * 1000), "1500"}
                        : new String[] {"200", lease("b".repeat(32), 4, t0 + 3000, t0 + 100000, (t0 + 3000) * 1000)};
            }
            if (method.equals("POST")) {
                return new String[] {"404", "{\"error\":{\"code\":\"not_found\",\"message\":\"closed: not renewed within its TTL\"}}"};
            }
            return new String[] {"200", "{\"released\":true}"};
        }, requests);
        String url = "http://127.0.0.1:" + srv.getAddress().getPort();
        try (var c = new Client(Config.of(url).withTimeout(Duration.ofSeconds(5)).withBackoff(Duration.ofMillis(10), Duration.ofMillis(50)))) {
            var g = c.localGenerator("late");
            long first = g.nextId(Duration.ofSeconds(5));
            assertEquals("an ID on the lease whose reservation had run out", 4, decode(first)[2]);
            assertTrue(decode(first)[0] >= t0 + 3000);
        } finally {
            srv.stop(0);
        }
    }

    @Test
    public void aBadLeaseIsRefused() throws Exception {
        var requests = new ArrayList<String>();
        var srv = leaseServer((m, p, n) -> new String[] {"200", p.equals("/v1/leases") ? lease("a".repeat(32), 40, 1, 2, 1000) : "{}"}, requests);
        try (var c = new Client(Config.of("http://127.0.0.1:" + srv.getAddress().getPort()))) {
            var e = assertThrows(FlakeidException.Unavailable.class, () -> c.localGenerator(""));
            assertTrue(e.getMessage(), e.getMessage().contains("outside the layout"));
        } finally {
            srv.stop(0);
        }
    }
}
