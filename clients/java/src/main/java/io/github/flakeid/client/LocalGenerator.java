package io.github.flakeid.client;

import java.net.URLEncoder;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.locks.LockSupport;

/**
 * Makes Snowflake IDs in this process under a worker-id lease a server holds
 * for it: no request per ID, and the guarantees of a server's own
 * generator. Create it with {@link Client#localGenerator(String)}.
 *
 * <p>The server leases the worker id from its coordinator on this process's
 * behalf, with the reservation, high-water mark and fencing of its own
 * lease, and renews it while this generator renews (every renew_every_ms,
 * on a daemon thread). IDs are issued only in the ticks [first_tick,
 * end_tick) of the last answer, the time read as the server's clock in that
 * answer (when the request arrived) plus the time since the request was sent,
 * by {@link System#nanoTime()}, before every ID:
 * a process paused (SIGSTOP, a long GC pause) or cut off past its
 * reservation issues nothing until a renewal comes, and a step of the wall
 * clock is not seen. Whoever holds the worker id next — after a kill -9, a
 * lost lease, a coordinator that lost its state — starts past every
 * end_tick a renewal reported, so none of these costs a duplicate. A lease
 * that ends (not renewed within its TTL, lost, its server gone) is replaced
 * by a new one from any endpoint while the old reservation lasts.
 *
 * <p>IDs increase within a lease; a new lease may bring another worker id.
 * Safe for use by several threads; close it to release the lease.
 */
public final class LocalGenerator implements AutoCloseable {
    /** One lease's answer, and the System.nanoTime() its clock starts at. */
    private static final class Lease {
        final String name;
        final Object endpoint;
        final long datacenter, worker, unitUs, first, nowUs, baseNanos, renewEveryNanos;
        final int tShift;
        final long node, maxSeq;
        long end;

        Lease(Map<String, Object> a, Object endpoint, long baseNanos) {
            Object l = a.get("layout");
            if (!(l instanceof Map<?, ?> lay) || !(a.get("lease") instanceof String n) || n.isEmpty() || n.length() > 64) {
                throw new IllegalArgumentException("a lease that is not one");
            }
            long tb = num(lay, "time_bits"), db = num(lay, "datacenter_bits"), wb = num(lay, "worker_bits"), sb = num(lay, "sequence_bits");
            name = n;
            this.endpoint = endpoint;
            datacenter = num(a, "datacenter");
            worker = num(a, "worker");
            unitUs = num(lay, "time_unit_us");
            first = num(a, "first_tick");
            end = num(a, "end_tick");
            nowUs = num(a, "now_us");
            long renewMs = num(a, "renew_every_ms"), ttlMs = num(a, "ttl_ms");
            if (tb < 1 || db < 0 || wb < 0 || sb < 0 || tb + db + wb + sb > 63) {
                throw new IllegalArgumentException("a layout of " + tb + "+" + db + "+" + wb + "+" + sb + " bits");
            }
            if (datacenter < 0 || datacenter >= 1L << db || worker < 0 || worker >= 1L << wb) {
                throw new IllegalArgumentException("datacenter " + datacenter + ", worker " + worker + " outside the layout");
            }
            if (unitUs < 1 || first < 0 || end < first || end > 1L << tb || nowUs < 0) {
                throw new IllegalArgumentException("ticks [" + first + ", " + end + ") of " + unitUs + " µs at " + nowUs + " µs");
            }
            if (renewMs < 1 || ttlMs < renewMs) {
                throw new IllegalArgumentException("renewals every " + renewMs + " ms with a TTL of " + ttlMs + " ms");
            }
            renewEveryNanos = renewMs * 1_000_000;
            tShift = (int) (db + wb + sb);
            node = datacenter << (wb + sb) | worker << sb;
            maxSeq = (1L << sb) - 1;
            this.baseNanos = baseNanos;
        }

        private static long num(Map<?, ?> m, String key) {
            if (!(m.get(key) instanceof Number v) || v.doubleValue() != v.longValue()) {
                throw new IllegalArgumentException(key + " is not a whole number: " + m.get(key));
            }
            return v.longValue();
        }

        /** The server's clock now, as this lease reads it: µs since the layout's epoch. */
        long clockUs() {
            return nowUs + (System.nanoTime() - baseNanos) / 1000;
        }
    }

    private final Client client;
    private final String owner;
    private Lease lease; // guarded by this
    private long last = -1; // the last tick issued under lease
    private long seq;
    private RuntimeException err; // why the last renewal or acquisition failed
    private boolean closed;
    private final Thread renewer;

    LocalGenerator(Client client, String owner, long deadline) {
        this.client = client;
        this.owner = owner;
        this.lease = acquire(deadline);
        renewer = new Thread(this::renew, "flakeid-lease");
        renewer.setDaemon(true);
        renewer.start();
    }

    /** The datacenter of the lease IDs are issued under. */
    public synchronized long datacenter() {
        return lease.datacenter;
    }

    /** The worker id of the lease IDs are issued under. */
    public synchronized long worker() {
        return lease.worker;
    }

    /** The next Snowflake ID, waiting as long as it takes: see {@link #nextId(java.time.Duration)}. */
    public long nextId() {
        return nextId(null);
    }

    /**
     * The next Snowflake ID. It waits while the lease may not issue yet (its
     * first tick is ahead of the clock), while a tick's sequence is used up
     * (for the next tick), and while the reservation is used up (for a
     * renewal or a new lease) — as long as timeout (null: as long as it
     * takes) allows, then throws {@link FlakeidException.Unavailable} with the
     * reason. After close it throws {@link FlakeidException.Closed}.
     */
    public long nextId(java.time.Duration timeout) {
        long deadline = timeout == null ? 0 : System.nanoTime() + Math.max(1, timeout.toNanos());
        for (;;) {
            long waitNanos;
            synchronized (this) {
                if (closed) {
                    throw new FlakeidException.Closed("the local generator is closed");
                }
                Lease l = lease;
                long nowUs = l.nowUs + (System.nanoTime() - l.baseNanos) / 1000;
                long now = nowUs / l.unitUs;
                long tick = Math.max(now, l.first), s = 0;
                if (tick <= last) {
                    if (seq < l.maxSeq) {
                        tick = last;
                        s = seq + 1;
                    } else {
                        tick = last + 1;
                    }
                }
                if (tick < l.end) {
                    if (tick <= now) {
                        last = tick;
                        seq = s;
                        return tick << l.tShift | l.node | s;
                    }
                    waitNanos = (tick * l.unitUs - nowUs) * 1000; // for the clock: outside the lock
                } else {
                    long left = timeout == null ? Long.MAX_VALUE : deadline - System.nanoTime();
                    if (left <= 0) {
                        String why = err != null ? err.getMessage() : "no renewal came in time";
                        throw new FlakeidException.Unavailable("the lease of worker " + l.datacenter + "/" + l.worker
                                + " has issued its whole reservation (to tick " + l.end + "), and " + why, err);
                    }
                    try {
                        wait(Math.max(1, Math.min(left / 1_000_000, Long.MAX_VALUE / 2)));
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                        throw new FlakeidException.Unavailable("interrupted", e);
                    }
                    continue;
                }
            }
            if (timeout != null && System.nanoTime() + waitNanos - deadline > 0) {
                throw new FlakeidException.Unavailable("the next tick the lease may issue in starts in " + waitNanos / 1000 + " µs, after the timeout", null);
            }
            // A wait for the next tick, of a millisecond or so, spins with
            // onSpinWait rather than park, whose wake-up comes late by about
            // as much.
            long until = System.nanoTime() + waitNanos;
            if (waitNanos > 1_500_000) {
                LockSupport.parkNanos(waitNanos - 1_000_000);
            }
            while (System.nanoTime() - until < 0) {
                Thread.onSpinWait();
            }
        }
    }

    /** Stops the renewals and releases the lease (its server stores the reservation). Later nextId calls throw Closed. Idempotent. */
    @Override
    public void close() {
        Lease l;
        synchronized (this) {
            if (closed) {
                return;
            }
            closed = true;
            l = lease;
            notifyAll();
        }
        renewer.interrupt();
        if (Thread.currentThread() != renewer) {
            try {
                renewer.join();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
        release(l);
        client.forget(this);
    }

    /** Takes a new lease from any endpoint; owner is checked (no character JSON escapes). */
    private Lease acquire(long deadline) {
        String body = "{\"owner\":\"" + owner + "\"}";
        Client.Answer a = client.call("POST", "/v1/leases", Map.of(), body, deadline, null);
        // The server reads its clock (now_us) when the request arrives, no
        // sooner than it was sent: from the sending, the lease's clock is
        // never behind the server's, however long the answer took — a
        // process paused before it read the answer finds its reservation
        // run out, not a stale clock.
        Lease l;
        try {
            l = new Lease(a.answer(), a.endpoint(), a.sentNanos());
        } catch (IllegalArgumentException | ClassCastException e) {
            if (a.answer().get("lease") instanceof String name) {
                releaseName(a.endpoint(), name);
            }
            throw new FlakeidException.Unavailable(Client.base(a.endpoint()) + ": a bad lease: " + e.getMessage(), e);
        }
        try {
            client.vet(a.endpoint()); // its endpoint's ID space against the others' (Overlap)
        } catch (FlakeidException e) {
            releaseName(a.endpoint(), l.name);
            throw e;
        }
        return l;
    }

    private synchronized void swap(Lease next) {
        if (next.name.equals(lease.name)) {
            next.end = Math.max(next.end, lease.end);
        } else {
            last = -1;
            seq = 0;
        }
        lease = next;
        err = null;
        notifyAll();
    }

    private synchronized Lease current() {
        return lease;
    }

    private synchronized boolean isClosed() {
        return closed;
    }

    private synchronized void failed(RuntimeException e) {
        err = e;
    }

    private void renew() {
        int failures = 0;
        while (!isClosed()) {
            Lease l = current();
            long d = l.renewEveryNanos;
            if (failures > 0) {
                long b = Math.min(1_000_000_000L, 50_000_000L << Math.min(failures - 1, 20));
                d = Math.min(d, b / 2 + ThreadLocalRandom.current().nextLong(b / 2 + 1));
            }
            LockSupport.parkNanos(d);
            if (isClosed()) {
                return;
            }
            long sent = System.nanoTime();
            RuntimeException e;
            try {
                Map<String, Object> a = client.once(l.endpoint, "POST", "/v1/leases/" + URLEncoder.encode(l.name, StandardCharsets.UTF_8) + "/renew");
                Lease next;
                try {
                    next = new Lease(a, l.endpoint, sent);
                } catch (IllegalArgumentException | ClassCastException bad) {
                    throw new FlakeidException.Unavailable(Client.base(l.endpoint) + ": a bad lease: " + bad.getMessage(), bad);
                }
                if (!next.name.equals(l.name) || next.worker != l.worker || next.datacenter != l.datacenter) {
                    throw new FlakeidException.Unavailable(Client.base(l.endpoint) + ": a renewal of lease " + l.name + " answered for " + next.name, null);
                }
                swap(next);
                failures = 0;
                continue;
            } catch (FlakeidException ex) {
                e = ex;
            }
            if (isClosed()) {
                return;
            }
            failures++;
            failed(e);
            // The lease is gone from its server, or its reservation runs out
            // within a renewal period while its server does not answer: take
            // a new one from any endpoint.
            boolean gone = e instanceof FlakeidException.NotFound;
            long leftNanos = (l.end * l.unitUs - l.clockUs()) * 1000;
            if (!gone && leftNanos > l.renewEveryNanos) {
                continue;
            }
            Lease next;
            try {
                next = acquire(Client.NO_DEADLINE);
            } catch (FlakeidException ex) {
                failed(new FlakeidException.Unavailable("renewing: " + e.getMessage() + "; a new lease: " + ex.getMessage(), ex));
                continue;
            }
            if (isClosed()) {
                release(next);
                return;
            }
            swap(next);
            failures = 0;
            if (!gone && !next.name.equals(l.name)) {
                release(l);
            }
        }
    }

    private void release(Lease l) {
        releaseName(l.endpoint, l.name);
    }

    /** Frees a lease on its server, best effort: one not released is closed there after its TTL. */
    private void releaseName(Object endpoint, String name) {
        try {
            client.once(endpoint, "DELETE", "/v1/leases/" + URLEncoder.encode(name, StandardCharsets.UTF_8));
        } catch (FlakeidException ignored) {
            // closed there after its TTL
        }
    }
}
