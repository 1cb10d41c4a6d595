"""The prefetch buffers the client keeps: of IDs, for next_id and
next_segment, and of the texts servers write, for next_text and
next_segment_text."""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from .errors import Closed, FlakeidError, Unavailable


class IDBuffer:
    """Prefetched runs of IDs (ranges of ints, or lists of the texts a
    server wrote), handed out in order under a lock. When
    fewer than low_water × batch remain, one background thread fetches the
    next batch; a caller that finds the buffer empty waits for it, within
    its deadline. A refill that fails with Unavailable (the client's failover
    gave up) is tried again after pause() for as long as the buffer holds
    IDs; one that fails with the buffer empty, or with another error (a tag
    that does not exist, a server that refuses ranges), raises that error to
    the callers that waited for it — but a caller with time left starts
    another after an outage's Unavailable."""

    def __init__(self, fetch: Callable[[], list[Sequence[Any]]], batch: int, low_water: float, pause: Callable[[], float]):
        self._fetch, self._pause = fetch, pause
        self._low = max(1, int(batch * low_water))
        self._cond = threading.Condition()
        self._ranges: deque[Sequence[Any]] = deque()
        self._left = 0  # IDs in _ranges
        self._refilling = False
        self._closed = False
        self._failure: FlakeidError | None = None  # why the last refill failed, until one succeeds
        self._refused: FlakeidError | None = None  # why the last refill gave up, for the callers that waited for it

    def take(self, n: int, deadline: float | None) -> list[Any]:
        """n IDs, waiting for a refill until deadline (a time.monotonic()
        reading; None: as long as refills are tried) when fewer are left."""
        with self._cond:
            while self._left < n:
                if self._closed:
                    raise Closed("the client is closed")
                self._refill_locked()
                wait = None if deadline is None else deadline - time.monotonic()
                if wait is not None and wait <= 0:
                    raise Unavailable(f"the buffer is empty and its refill did not come within the call's timeout (last failure: {self._failure})")
                self._cond.wait(wait)
                refused = self._refused
                if self._left < n and refused is not None and not self._refilling and (deadline is None or not isinstance(refused, Unavailable)):
                    raise refused  # the refill this caller waited for failed; with time left and an outage, it starts another
            out: list[Any] = []
            while len(out) < n:
                r = self._ranges[0]
                k = min(n - len(out), len(r))
                out.extend(r[:k])
                if k == len(r):
                    self._ranges.popleft()
                else:
                    self._ranges[0] = r[k:]
            self._left -= n
            if self._left < self._low:
                self._refill_locked()
            return out

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._ranges.clear()
            self._left = 0
            self._cond.notify_all()

    def _refill_locked(self) -> None:
        if not self._refilling and not self._closed:
            self._refilling, self._refused = True, None
            threading.Thread(target=self._refill, name="flakeid-refill", daemon=True).start()

    def _refill(self) -> None:
        while True:
            try:
                got = self._fetch()
            except FlakeidError as err:
                with self._cond:
                    self._failure = err
                    if isinstance(err, Unavailable) and self._left > 0 and not self._closed:
                        retry = True  # the buffer rides the outage out: try again
                    else:
                        retry, self._refilling, self._refused = False, False, err
                        self._cond.notify_all()
                if not retry:
                    return
                time.sleep(self._pause())
                continue
            except BaseException as err:  # a bug or an answer of the wrong shape: never a silent hang
                with self._cond:
                    self._refilling = False
                    self._refused = Unavailable(f"refilling the buffer: {type(err).__name__}: {err}")
                    self._cond.notify_all()
                return
            with self._cond:
                self._refilling = False
                if not self._closed:
                    self._ranges.extend(r for r in got if len(r))
                    self._left += sum(len(r) for r in got)
                    self._failure = None
                self._cond.notify_all()
            return
