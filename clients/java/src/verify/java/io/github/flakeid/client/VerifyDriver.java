package io.github.flakeid.client;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.Instant;
import java.util.Arrays;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;

/**
 * The driver {@code flakeid verify --languages java} runs (see
 * cmd/flakeid/internal/verify/langs.go); not part of the jar.
 *
 * <pre>
 *   VerifyDriver caller ATTEMPT_MS CALL_MS BUFFER ENDPOINT...
 *       the client with a Snowflake buffer of BUFFER IDs; each line "SEQ" on
 *       stdin is one nextId call with a CALL_MS timeout ("SEQ MS": with an MS
 *       one), answered on stdout
 *       as "SEQ ID" or "SEQ ! CLASS MESSAGE" (CLASS: timeout, unavailable,
 *       other), four calls at most in flight.
 *   VerifyDriver local OWNER RATE ENDPOINT...
 *       a local generator leased as OWNER making RATE IDs a second, a batch
 *       every 10 ms printed as "UNIX_NS ID ID ..." (the wall clock before the
 *       batch), or "! UNIX_NS MESSAGE" for a batch that failed.
 * </pre>
 */
public final class VerifyDriver {
    private VerifyDriver() {}

    public static void main(String[] args) throws Exception {
        var out = new PrintStream(System.out, false, StandardCharsets.UTF_8);
        var rest = Arrays.copyOfRange(args, 1, args.length);
        switch (args[0]) {
            case "caller" -> caller(out, rest);
            case "local" -> local(out, rest);
            default -> throw new IllegalArgumentException("mode " + args[0] + ": want caller or local");
        }
    }

    private static String oneLine(Throwable e) {
        return String.valueOf(e.getMessage()).replace('\n', ' ');
    }

    private static void caller(PrintStream out, String[] args) throws Exception {
        var endpoints = Arrays.copyOfRange(args, 3, args.length);
        var cfg = Config.of(endpoints).withTimeout(Duration.ofMillis(Long.parseLong(args[0])))
                .withBuffer(new BufferConfig(Integer.parseInt(args[2]), 0, 0));
        var timeout = Duration.ofMillis(Long.parseLong(args[1]));
        ExecutorService pool = Executors.newFixedThreadPool(4);
        try (var client = new Client(cfg)) {
            var in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
            for (String line; (line = in.readLine()) != null; ) {
                String[] f = line.trim().split(" ");
                if (f[0].isEmpty()) {
                    continue;
                }
                String seq = f[0];
                Duration t = f.length > 1 ? Duration.ofMillis(Long.parseLong(f[1])) : timeout;
                pool.execute(() -> {
                    String ans;
                    try {
                        ans = seq + " " + client.nextId(t);
                    } catch (FlakeidException.Unavailable e) {
                        String msg = oneLine(e);
                        ans = seq + " ! " + (msg.contains("timeout") || msg.contains("timed out") ? "timeout " : "unavailable ") + msg;
                    } catch (RuntimeException e) {
                        ans = seq + " ! other " + e.getClass().getSimpleName() + ": " + oneLine(e);
                    }
                    synchronized (out) {
                        out.println(ans);
                        out.flush();
                    }
                });
            }
            pool.shutdown();
            pool.awaitTermination(10, TimeUnit.SECONDS);
        }
    }

    private static void local(PrintStream out, String[] args) {
        var endpoints = Arrays.copyOfRange(args, 2, args.length);
        var client = new Client(Config.of(endpoints).withTimeout(Duration.ofSeconds(5)));
        LocalGenerator gen = null;
        while (gen == null) {
            // Every worker id may be held for a while: the driver waits, as a service would.
            try {
                gen = client.localGenerator(args[0], Duration.ofSeconds(60));
            } catch (FlakeidException.Unavailable e) {
                Instant now = Instant.now();
                out.append("! ").append(Long.toString(now.getEpochSecond() * 1_000_000_000L + now.getNano())).append(' ').append(oneLine(e)).append('\n');
                out.flush();
                LockSupport.parkNanos(500_000_000L);
            }
        }
        int perBatch = Math.max(1, Integer.parseInt(args[1]) / 100);
        var line = new StringBuilder();
        long next = System.nanoTime();
        for (;;) {
            Instant now = Instant.now();
            long ts = now.getEpochSecond() * 1_000_000_000L + now.getNano();
            line.setLength(0);
            String failed = null;
            try {
                for (int i = 0; i < perBatch; i++) {
                    line.append(' ').append(gen.nextId(Duration.ofSeconds(1)));
                }
            } catch (FlakeidException e) {
                failed = oneLine(e);
            }
            if (line.length() > 0) {
                out.append(Long.toString(ts)).append(line).append('\n');
            }
            if (failed != null) {
                out.append("! ").append(Long.toString(ts)).append(' ').append(failed).append('\n');
            }
            out.flush();
            next += 10_000_000L;
            long wait = next - System.nanoTime();
            if (wait > 0) {
                LockSupport.parkNanos(wait);
            }
            next = Math.max(next, System.nanoTime() - 10_000_000L);
        }
    }
}
