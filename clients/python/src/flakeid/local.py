"""Local generation: Snowflake IDs made in this process, under a worker-id
lease a server holds for it (POST /v1/leases; docs/API.md)."""

from __future__ import annotations

import json
import os
import random
import socket
import threading
import time
import urllib.parse
from typing import TYPE_CHECKING, Any

from .errors import Closed, FlakeidError, NotFound, Unavailable

if TYPE_CHECKING:
    from .client import Client, _Endpoint

_OWNER_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.:/@")


def default_owner() -> str:
    """"python/<hostname>/<pid>", with what a lease owner may not have
    dropped."""
    host = "".join(c for c in socket.gethostname() if c in _OWNER_CHARS and c != "/")[:40]
    return f"python/{host}/{os.getpid()}"


class _Lease:
    """One lease's answer, and the monotonic time its clock starts at."""

    __slots__ = ("name", "ep", "datacenter", "worker", "t_shift", "node", "max_seq", "unit_us", "first", "end",
                 "now_us", "base_ns", "renew_every", "ttl")

    def __init__(self, a: dict[str, Any], ep: _Endpoint, base_ns: int):
        lay = a["layout"]
        tb, db, wb, sb = (int(lay[k]) for k in ("time_bits", "datacenter_bits", "worker_bits", "sequence_bits"))
        self.name, self.ep = str(a["lease"]), ep
        self.datacenter, self.worker = int(a["datacenter"]), int(a["worker"])
        self.unit_us = int(lay["time_unit_us"])
        self.first, self.end, self.now_us = int(a["first_tick"]), int(a["end_tick"]), int(a["now_us"])
        self.renew_every, self.ttl = int(a["renew_every_ms"]) / 1000, int(a["ttl_ms"]) / 1000
        if not 0 < len(self.name) <= 64 or tb < 1 or min(db, wb, sb) < 0 or tb + db + wb + sb > 63:
            raise ValueError(f"lease {self.name!r} of a layout of {tb}+{db}+{wb}+{sb} bits")
        if not (0 <= self.datacenter < 1 << db and 0 <= self.worker < 1 << wb):
            raise ValueError(f"datacenter {self.datacenter}, worker {self.worker} outside the layout")
        if self.unit_us < 1 or not 0 <= self.first <= self.end <= 1 << tb or self.now_us < 0:
            raise ValueError(f"ticks [{self.first}, {self.end}) of {self.unit_us} µs at {self.now_us} µs")
        if self.renew_every <= 0 or self.ttl < self.renew_every:
            raise ValueError(f"renewals every {self.renew_every}s with a TTL of {self.ttl}s")
        self.t_shift = db + wb + sb
        self.node = self.datacenter << (wb + sb) | self.worker << sb
        self.max_seq = (1 << sb) - 1
        self.base_ns = base_ns

    def clock_us(self) -> int:
        """The server's clock now, as this lease reads it: µs since the
        layout's epoch."""
        return self.now_us + (time.monotonic_ns() - self.base_ns) // 1000


class LocalGenerator:
    """Makes Snowflake IDs in this process under a worker-id lease a server
    holds for it: no request per ID, and the guarantees of a server's own
    generator. Create it with Client.local_generator.

    The server leases the worker id from its coordinator on this process's
    behalf, with the reservation, high-water mark and fencing of its own
    lease, and renews it while this generator renews (every renew_every_ms,
    in a daemon thread). IDs are issued only in the ticks [first_tick,
    end_tick) of the last answer, the time read as the server's clock in
    that answer (when the request arrived) plus the time since the request
    was sent, by time.monotonic_ns(), before every ID:
    a process paused (SIGSTOP, a long GC) or cut off past its reservation
    issues nothing until a renewal comes, and a step of the wall clock is not
    seen. Whoever holds the worker id next — after a kill -9, a lost lease, a
    coordinator that lost its state — starts past every end_tick a renewal
    reported, so none of these costs a duplicate. A lease that ends (not
    renewed within its TTL, lost, its server gone) is replaced by a new one
    from any endpoint while the old reservation lasts.

    IDs increase within a lease; a new lease may bring another worker id.
    Safe for use by several threads; close it (or use it as a context
    manager) to release the lease.
    """

    def __init__(self, client: Client, owner: str, timeout: float | None):
        self._client = client
        self._owner = owner
        self._cond = threading.Condition()
        self._lease = self._acquire(timeout)
        self._last = -1  # the last tick issued under _lease
        self._seq = 0
        self._err: FlakeidError | None = None
        self._closed = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._renew, name="flakeid-lease", daemon=True)
        self._thread.start()

    def __enter__(self) -> LocalGenerator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def worker(self) -> tuple[int, int]:
        """The (datacenter, worker) pair of the lease IDs are issued under."""
        with self._cond:
            return self._lease.datacenter, self._lease.worker

    def next_id(self, timeout: float | None = None) -> int:
        """The next Snowflake ID. It waits while the lease may not issue yet
        (its first tick is ahead of the clock), while a tick's sequence is
        used up (for the next tick), and while the reservation is used up
        (for a renewal or a new lease) — as long as timeout (seconds; None:
        as long as it takes) allows, then raises Unavailable with the reason.
        After close it raises Closed."""
        deadline = None if timeout is None else time.monotonic() + timeout
        cond = self._cond
        while True:
            with cond:
                if self._closed:
                    raise Closed("the local generator is closed")
                lease = self._lease
                now_us = lease.now_us + (time.monotonic_ns() - lease.base_ns) // 1000
                now = now_us // lease.unit_us
                tick, seq = max(now, lease.first), 0
                if tick <= self._last:
                    if self._seq < lease.max_seq:
                        tick, seq = self._last, self._seq + 1
                    else:
                        tick = self._last + 1
                if tick < lease.end:
                    if tick <= now:
                        self._last, self._seq = tick, seq
                        return tick << lease.t_shift | lease.node | seq
                    wait = (tick * lease.unit_us - now_us) / 1e6  # for the clock: outside the lock
                else:
                    left = None if deadline is None else deadline - time.monotonic()
                    if left is not None and left <= 0:
                        why = str(self._err) if self._err else "no renewal came in time"
                        raise Unavailable(f"the lease of worker {lease.datacenter}/{lease.worker} has issued its whole "
                                          f"reservation (to tick {lease.end}), and {why}")
                    cond.wait(left)
                    continue
            if deadline is not None and time.monotonic() + wait > deadline:
                raise Unavailable(f"the next tick the lease may issue in starts in {wait:.3f}s, after the timeout")
            time.sleep(wait)

    def close(self) -> None:
        """Stops the renewals and releases the lease (its server stores the
        reservation). Later next_id calls raise Closed. Idempotent."""
        with self._cond:
            if self._closed:
                return
            self._closed = True
            lease = self._lease
            self._cond.notify_all()
        self._stop.set()
        if self._thread is not threading.current_thread():
            self._thread.join()
        self._release(lease)

    # The machinery.

    def _acquire(self, timeout: float | None) -> _Lease:
        body = json.dumps({"owner": self._owner}).encode()
        sent: list[int] = []
        ep, a = self._client._call("POST", "/v1/leases", {}, body, timeout, sent)
        # The server reads its clock (now_us) when the request arrives, no
        # sooner than it was sent: from the sending, the lease's clock is
        # never behind the server's, however long the answer took — a
        # process paused before it read the answer finds its reservation run
        # out, not a stale clock.
        try:
            lease = _Lease(a, ep, sent[0])
        except (ValueError, KeyError, TypeError) as err:
            self._release_name(ep, str(a.get("lease", "")) if isinstance(a, dict) else "")
            raise Unavailable(f"{ep.base}: a bad lease: {err}") from err
        try:
            self._client._vet(ep)  # its endpoint's ID space against the others' (Overlap)
        except FlakeidError:
            self._release_name(ep, lease.name)
            raise
        return lease

    def _swap(self, lease: _Lease) -> None:
        with self._cond:
            if lease.name == self._lease.name:
                lease.end = max(lease.end, self._lease.end)
            else:
                self._last, self._seq = -1, 0
            self._lease, self._err = lease, None
            self._cond.notify_all()

    def _renew(self) -> None:
        failures = 0
        while True:
            with self._cond:
                lease = self._lease
            d = lease.renew_every
            if failures:
                b = min(1.0, 0.05 * 2 ** min(failures - 1, 20))
                d = min(d, random.uniform(b / 2, b))
            if self._stop.wait(d):
                return
            sent = time.monotonic_ns()
            try:
                a = self._client._once(lease.ep, "POST", "/v1/leases/" + urllib.parse.quote(lease.name, safe="") + "/renew",
                                       self._client._timeout)
                try:
                    nxt = _Lease(a, lease.ep, sent)
                except (ValueError, KeyError, TypeError) as err:
                    raise Unavailable(f"{lease.ep.base}: a bad lease: {err}") from err
                if (nxt.name, nxt.datacenter, nxt.worker) != (lease.name, lease.datacenter, lease.worker):
                    raise Unavailable(f"{lease.ep.base}: a renewal of lease {lease.name} answered for {nxt.name}")
                self._swap(nxt)
                failures = 0
                continue
            except FlakeidError as err:
                if self._stop.is_set():
                    return
                failures += 1
                with self._cond:
                    self._err = err
                # The lease is gone from its server, or its reservation runs
                # out within a renewal period while its server does not
                # answer: take a new one from any endpoint.
                gone = isinstance(err, NotFound)
                left = (lease.end * lease.unit_us - lease.clock_us()) / 1e6
                if not gone and left > lease.renew_every:
                    continue
                try:
                    nxt = self._acquire(None)
                except FlakeidError as aerr:
                    with self._cond:
                        self._err = Unavailable(f"renewing: {err}; a new lease: {aerr}")
                    continue
                if self._stop.is_set():
                    self._release(nxt)
                    return
                self._swap(nxt)
                failures = 0
                if not gone and nxt.name != lease.name:
                    self._release(lease)

    def _release(self, lease: _Lease) -> None:
        self._release_name(lease.ep, lease.name)

    def _release_name(self, ep: _Endpoint, name: str) -> None:
        """Frees a lease on its server, best effort: one not released is
        closed there after its TTL."""
        if not name:
            return
        try:
            self._client._once(ep, "DELETE", "/v1/leases/" + urllib.parse.quote(name, safe=""), self._client._timeout)
        except (FlakeidError, Closed):
            pass
