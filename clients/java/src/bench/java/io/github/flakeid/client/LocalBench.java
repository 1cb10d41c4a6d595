package io.github.flakeid.client;

import java.util.Arrays;

/**
 * IDs per second from one thread and from two: the local generator's nextId
 * beside a classic synchronized Snowflake generator of the same layout (the
 * algorithm of Twitter's, Hutool's and Yitter's default method: the wall
 * clock, a sequence, wait for the next millisecond when it is used up), in
 * interleaved rounds of one run. CosId's and Yitter's jars cannot be fetched
 * on the machines this runs on (no Maven Central); this baseline is their
 * algorithm without their extras.
 *
 * <pre>
 * clients/java/build.sh bench http://127.0.0.1:8080 [seconds per round] [rounds]
 * </pre>
 */
public final class LocalBench {
    /** The baseline: synchronized, System.currentTimeMillis, 12 sequence bits. */
    static final class Classic {
        private long last = -1, seq;

        synchronized long next() {
            long now = System.currentTimeMillis() - 1735689600000L;
            if (now == last) {
                seq = (seq + 1) & 4095;
                if (seq == 0) {
                    while ((now = System.currentTimeMillis() - 1735689600000L) <= last) {
                        Thread.onSpinWait();
                    }
                }
            } else if (now > last) {
                seq = 0;
            } else {
                now = last; // clock back: Yitter's "turn back" would borrow; here stay
            }
            last = now;
            return now << 22 | 31L << 12 | seq;
        }
    }

    interface Source {
        long next();
    }

    static double rate(Source s, double seconds, int threads) throws InterruptedException {
        long[] counts = new long[threads];
        long end = System.nanoTime() + (long) (seconds * 1e9);
        Thread[] ts = new Thread[threads];
        for (int i = 0; i < threads; i++) {
            int k = i;
            ts[i] = new Thread(() -> {
                long n = 0, sink = 0;
                while (System.nanoTime() < end) {
                    for (int j = 0; j < 1000; j++) {
                        sink ^= s.next();
                    }
                    n += 1000;
                }
                counts[k] = n + (sink == 42 ? 1 : 0);
            });
            ts[i].start();
        }
        for (Thread t : ts) {
            t.join();
        }
        return Arrays.stream(counts).sum() / seconds;
    }

    public static void main(String[] args) throws Exception {
        double seconds = args.length > 1 ? Double.parseDouble(args[1]) : 3;
        int rounds = args.length > 2 ? Integer.parseInt(args[2]) : 3;
        try (var c = new Client(Config.of(args[0])); var g = c.localGenerator("bench")) {
            var classic = new Classic();
            String[] names = {"local, 1 thread", "classic, 1 thread", "local, 2 threads", "classic, 2 threads"};
            double[][] r = new double[4][rounds];
            for (int i = 0; i < rounds; i++) {
                r[0][i] = rate(g::nextId, seconds, 1);
                r[1][i] = rate(classic::next, seconds, 1);
                r[2][i] = rate(g::nextId, seconds, 2);
                r[3][i] = rate(classic::next, seconds, 2);
            }
            double[] med = new double[4];
            for (int k = 0; k < 4; k++) {
                Arrays.sort(r[k]);
                med[k] = r[k][rounds / 2];
                System.out.printf("%-20s median %.3f M/s  (min %.3f, max %.3f)%n", names[k], med[k] / 1e6, r[k][0] / 1e6, r[k][rounds - 1] / 1e6);
            }
            System.out.printf("ratio local / classic: 1 thread %.2f, 2 threads %.2f%n", med[0] / med[1], med[2] / med[3]);
        }
    }
}
