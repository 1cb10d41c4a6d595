package io.github.flakeid.client;

import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.function.Supplier;

/**
 * Prefetched runs of IDs — ranges, or the texts a server wrote (the
 * buffers of nextText) — handed out in order. When fewer than
 * lowWater × batch remain, one background thread fetches the next batch; a
 * caller that finds the buffer empty waits for it, within its deadline. A
 * refill that fails with Unavailable is tried again after pause() for as
 * long as the buffer holds IDs; one that fails with the buffer empty, or
 * with another error, goes to the callers that waited for it — but a
 * caller with time left starts another after an outage's Unavailable.
 */
final class IDBuffer {
    /** A run of IDs: next, next + stride, … (left of them), or texts[at…]. */
    static final class Run {
        long next;
        long left;
        final long stride;
        final String[] texts; // null in a run of IDs
        int at;

        Run(long first, long count, long stride) {
            this.next = first;
            this.left = count;
            this.stride = stride;
            this.texts = null;
        }

        Run(String[] texts) {
            this.texts = texts;
            this.left = texts.length;
            this.stride = 0;
        }
    }

    private final Supplier<Run[]> fetch;
    private final Supplier<Duration> pause;
    private final long low;
    private final ArrayDeque<Run> runs = new ArrayDeque<>();
    private long left;
    private boolean refilling;
    private boolean closed;
    private RuntimeException failure; // why the last refill failed, until one succeeds
    private RuntimeException refused; // why the last refill gave up, for the callers that waited for it

    IDBuffer(Supplier<Run[]> fetch, int batch, double lowWater, Supplier<Duration> pause) {
        this.fetch = fetch;
        this.pause = pause;
        this.low = Math.max(1, (long) (batch * lowWater));
    }

    /** n IDs of a buffer of ranges, waiting for a refill until deadline (System.nanoTime(); Long.MAX_VALUE: no deadline). */
    synchronized long[] take(int n, long deadline) {
        await(n, deadline);
        long[] out = new long[n];
        int k = 0;
        while (k < n) {
            Run r = runs.peekFirst();
            while (k < n && r.left > 0) {
                out[k++] = r.next;
                r.next += r.stride;
                r.left--;
            }
            if (r.left == 0) {
                runs.pollFirst();
            }
        }
        took(n);
        return out;
    }

    /** n texts of a buffer of texts, as take waits. */
    synchronized List<String> takeTexts(int n, long deadline) {
        await(n, deadline);
        var out = new ArrayList<String>(n);
        while (out.size() < n) {
            Run r = runs.peekFirst();
            int k = (int) Math.min(n - out.size(), r.left);
            out.addAll(Arrays.asList(r.texts).subList(r.at, r.at + k));
            r.at += k;
            r.left -= k;
            if (r.left == 0) {
                runs.pollFirst();
            }
        }
        took(n);
        return out;
    }

    /** Waits, holding the lock, until n IDs are left (see take). */
    private void await(int n, long deadline) {
        while (left < n) {
            if (closed) {
                throw new FlakeidException.Closed();
            }
            startRefill();
            long wait = deadline == Long.MAX_VALUE ? 0 : deadline - System.nanoTime();
            if (deadline != Long.MAX_VALUE && wait <= 0) {
                throw new FlakeidException.Unavailable("the buffer is empty and its refill did not come within the call's timeout (last failure: "
                        + (failure == null ? "none" : failure.getMessage()) + ")", failure);
            }
            try {
                if (wait == 0) {
                    wait();
                } else {
                    wait(Math.max(1, wait / 1_000_000), (int) (wait % 1_000_000));
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new FlakeidException.Unavailable("interrupted while waiting for the buffer's refill", e);
            }
            if (left < n && refused != null && !refilling && (deadline == Long.MAX_VALUE || !(refused instanceof FlakeidException.Unavailable))) {
                throw refused; // the refill this caller waited for failed; with time left, it starts another
            }
        }
    }

    /** Counts n IDs taken, and starts a refill below the low-water mark. */
    private void took(int n) {
        left -= n;
        if (left < low) {
            startRefill();
        }
    }

    synchronized void close() {
        closed = true;
        runs.clear();
        left = 0;
        notifyAll();
    }

    private void startRefill() {
        if (refilling || closed) {
            return;
        }
        refilling = true;
        refused = null;
        Thread t = new Thread(this::refill, "flakeid-refill");
        t.setDaemon(true);
        t.start();
    }

    private void refill() {
        for (;;) {
            Run[] got;
            try {
                got = fetch.get();
            } catch (RuntimeException err) {
                boolean retry;
                synchronized (this) {
                    failure = err;
                    retry = err instanceof FlakeidException.Unavailable && left > 0 && !closed;
                    if (!retry) {
                        refilling = false;
                        refused = err;
                        notifyAll();
                    }
                }
                if (!retry) {
                    return;
                }
                try {
                    Thread.sleep(Math.max(1, pause.get().toMillis()));
                } catch (InterruptedException e) {
                    return;
                }
                continue;
            }
            synchronized (this) {
                refilling = false;
                if (!closed) {
                    for (Run r : got) {
                        if (r.left > 0) {
                            runs.addLast(r);
                            left += r.left;
                        }
                    }
                    failure = null;
                }
                notifyAll();
            }
            return;
        }
    }
}
