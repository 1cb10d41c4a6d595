"""The flakeid client: a Config, and a Client that asks one of several
servers for IDs over the HTTP/JSON API and fails over between them."""

from __future__ import annotations

import http.client
import json
import random
import ssl
import threading
import time
import urllib.parse
from dataclasses import dataclass, field, replace
from datetime import datetime
from collections.abc import Callable
from typing import Any

from .buffer import IDBuffer
from .segment import Segment
from .errors import APIError, Closed, FlakeidError, InvalidArgument, InvalidConfig, Overlap, Unavailable, api_error
from .local import LocalGenerator, default_owner

#: The most IDs the client asks for in one request (the server's own limit,
#: 100,000 by default, may be lower).
MAX_COUNT = 10_000_000
#: The default per-attempt timeout, in seconds.
DEFAULT_TIMEOUT = 2.0
#: The default BufferConfig.low_water.
DEFAULT_LOW_WATER = 0.5
#: The default bounds of an endpoint's backoff after a failure, in seconds.
DEFAULT_BACKOFF_MIN = 0.1
DEFAULT_BACKOFF_MAX = 5.0
#: The server's default address.
DEFAULT_ENDPOINT = "http://127.0.0.1:8080"

_UUID_FORMATS = ("uuid7", "typeid", "ulid")
_READINGS = ("", "masked", "plain")


@dataclass
class BufferConfig:
    """The local prefetch buffers: a buffer holds prefetched ranges of IDs
    and hands them out in-process; a background thread refills it before it
    runs dry.

    snowflake: how many Snowflake IDs one prefetch asks for, 0–MAX_COUNT (and
    at most the server's max count). Default 0: no buffer.
    segment: the same for each segment tag (a buffer per tag, on first use).
    Default 0: no buffers (segment IDs stay dense).
    low_water: the fraction of a batch below which a buffer is refilled,
    0–1; 0 means DEFAULT_LOW_WATER (0.5). A buffer rides out an outage of
    every server shorter than the low_water × batch IDs it holds when it asks,
    at the caller's rate.

    A buffered Snowflake ID keeps the time it was issued at (it may be
    seconds old when used, and is still unique); buffered segment IDs not
    used before the process exits are lost: gaps, never duplicates.
    """

    snowflake: int = 0
    segment: int = 0
    low_water: float = 0.0


@dataclass
class Config:
    """The settings of a Client. A zero field means its default; endpoints
    is required. Config.default() gives the recommended settings.

    endpoints: the servers' base URLs ("http://127.0.0.1:8080",
    "https://ids.example.com/prefix"), each once. No default.
    token: sent as "Authorization: Bearer <token>" when set. Default none.
    timeout: seconds per attempt (one request to one endpoint), 0–300; 0
    means DEFAULT_TIMEOUT (2s). A call's own timeout bounds the whole call.
    ssl_context: for https endpoints; None means the system's trust store.
    max_attempts: requests one call may make, over all endpoints, 0–1000; 0
    means 2 × len(endpoints), at least 3.
    backoff_min, backoff_max: seconds; an endpoint that failed (a network
    error, a timeout, 408, 429 or 5xx) is passed over for a jittered
    exponential backoff: after its n-th failure in a row (from 0) a delay
    drawn from [d/2, d], d = min(backoff_max, backoff_min × 2^n), or longer
    when its server sent Retry-After. 0 means 0.1 and 5 (each clamped to the
    other when only one is set).
    buffer: the prefetch buffers. Default: none.
    """

    endpoints: list[str] = field(default_factory=list)
    token: str = ""
    timeout: float = 0.0
    ssl_context: ssl.SSLContext | None = None
    max_attempts: int = 0
    backoff_min: float = 0.0
    backoff_max: float = 0.0
    buffer: BufferConfig = field(default_factory=BufferConfig)

    @classmethod
    def default(cls) -> Config:
        """The recommended settings: the server's default address, a 2s
        per-attempt timeout and a Snowflake buffer of 10,000 IDs refilled at
        half; no segment buffers."""
        return cls(endpoints=[DEFAULT_ENDPOINT], timeout=DEFAULT_TIMEOUT, buffer=BufferConfig(snowflake=10_000))

    def validate(self) -> None:
        """Checks every field; raises InvalidConfig naming the first bad one."""
        if not self.endpoints:
            raise InvalidConfig("endpoints: at least one is required")
        seen = set()
        for e in self.endpoints:
            u = urllib.parse.urlsplit(e)
            if u.scheme not in ("http", "https") or not u.hostname or u.query or u.fragment:
                raise InvalidConfig(f"endpoint {e!r}: want an http:// or https:// base URL without query or fragment")
            if e.rstrip("/") in seen:
                raise InvalidConfig(f"endpoint {e!r} is listed twice")
            seen.add(e.rstrip("/"))
        if any(ord(c) < 0x20 or ord(c) == 0x7F for c in self.token):
            raise InvalidConfig("token: contains a control character")
        checks = [("timeout", self.timeout, 0, 300), ("max_attempts", self.max_attempts, 0, 1000),
                  ("backoff_min", self.backoff_min, 0, None), ("backoff_max", self.backoff_max, 0, None),
                  ("buffer.snowflake", self.buffer.snowflake, 0, MAX_COUNT),
                  ("buffer.segment", self.buffer.segment, 0, MAX_COUNT), ("buffer.low_water", self.buffer.low_water, 0, 1)]
        for name, v, lo, hi in checks:
            if not isinstance(v, (int, float)) or isinstance(v, bool) or v < lo or (hi is not None and v > hi):
                raise InvalidConfig(f"{name} {v!r}: want {lo}–{hi if hi is not None else '∞'}")
        if self.backoff_min and self.backoff_max and self.backoff_min > self.backoff_max:
            raise InvalidConfig(f"backoff_min {self.backoff_min} is above backoff_max {self.backoff_max}")


@dataclass(frozen=True)
class Parts:
    """The fields of a decoded Snowflake ID. id is the internal ID when the
    input was masked (masked is then the input and key_id its key's id);
    form is "uuid7", "typeid" or "ulid" when the input was a UUID-shaped text
    (uuid the UUID it is, prefix a TypeID's prefix)."""

    id: int
    time: datetime
    tick: int
    datacenter: int
    worker: int
    sequence: int
    masked: str = ""
    key_id: int = 0
    form: str = ""
    uuid: str = ""
    prefix: str = ""


@dataclass(frozen=True)
class Bounds:
    """The smallest and largest Snowflake IDs (both included) whose time lies
    in [start, end), the window they cover exactly; note is set by a server
    that masks Snowflake IDs (the bounds are internal IDs)."""

    min: int
    max: int
    start: datetime
    end: datetime
    layout: str
    note: str = ""


def _time(s: str) -> datetime:
    return datetime.fromisoformat(s.replace("Z", "+00:00"))


class _Endpoint:
    """One server: its address, its pool of idle connections, and how long
    it is passed over after failures."""

    def __init__(self, base: str, ssl_context: ssl.SSLContext | None):
        u = urllib.parse.urlsplit(base)
        self.base = base.rstrip("/")
        self.https = u.scheme == "https"
        self.host, self.port = u.hostname or "", u.port or (443 if self.https else 80)
        self.prefix = u.path.rstrip("/")
        self.ssl_context = ssl_context if ssl_context is not None else (ssl.create_default_context() if self.https else None)
        self.failures = 0
        self.down_until = 0.0
        self._lock = threading.Lock()
        self._idle: list[http.client.HTTPConnection] = []

    def request(self, target: str, headers: dict[str, str], timeout: float, method: str = "GET",
                body: bytes | None = None) -> tuple[int, http.client.HTTPMessage, bytes]:
        with self._lock:
            conn = self._idle.pop() if self._idle else None
        if conn is None:
            if self.https:
                conn = http.client.HTTPSConnection(self.host, self.port, timeout=timeout, context=self.ssl_context)
            else:
                conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        elif conn.sock is not None:
            conn.sock.settimeout(timeout)
        conn.timeout = timeout
        try:
            if body is not None:
                headers = {**headers, "Content-Type": "application/json"}
            conn.request(method, self.prefix + target, body=body, headers=headers)
            resp = conn.getresponse()
            body = resp.read()
        except BaseException:
            conn.close()
            raise
        if resp.will_close:
            conn.close()
        else:
            with self._lock:
                self._idle.append(conn)
        return resp.status, resp.headers, body

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for c in idle:
            c.close()


class Client:
    """Asks flakeid servers for IDs. A call goes to the endpoint that
    answered last; a network error, a timeout, or an answer of 408, 429 or
    5xx passes that endpoint over for a backoff and moves the call to the
    next one (endpoints passed over come last, so a call still tries them
    when all are down); after a full round the call pauses for a backoff, or
    until the soonest endpoint is back by its server's Retry-After. After
    max_attempts requests it raises Unavailable with the last failure, and so
    it does at once when its timeout would end before the next round. Any
    other 4xx is the caller's fault and is raised at once (an APIError that
    is also NotFound, InvalidArgument, …).

    Every call takes an optional timeout in seconds for the whole call
    (None: bounded by max_attempts alone). A Client is safe for use by
    several threads; close it (or use it as a context manager) to stop the
    background refills and close its connections.

    Given several endpoints, the client checks them the first time each
    hands it Snowflake IDs: it reads that endpoint's /v1/status and every
    other's, and two that hold the same (datacenter, worker) pair at once,
    or use different layouts, share no coordinator and can issue the same
    IDs — the call then raises Overlap naming both, and so does every later
    Snowflake call. An endpoint that cannot be asked is checked at its next
    answer; one endpoint alone is never checked.
    """

    def __init__(self, config: Config | None = None):
        cfg = replace(config) if config is not None else Config.default()
        cfg.validate()
        self._timeout = cfg.timeout or DEFAULT_TIMEOUT
        self._max_attempts = cfg.max_attempts or max(3, 2 * len(cfg.endpoints))
        lo, hi = cfg.backoff_min, cfg.backoff_max
        self._backoff_min = lo or (min(DEFAULT_BACKOFF_MIN, hi) if hi else DEFAULT_BACKOFF_MIN)
        self._backoff_max = hi or max(DEFAULT_BACKOFF_MAX, self._backoff_min)
        self._headers = {"Accept": "application/json", "User-Agent": "flakeid-python/0.1"}
        if cfg.token:
            self._headers["Authorization"] = "Bearer " + cfg.token
        self._endpoints = [_Endpoint(e, cfg.ssl_context) for e in cfg.endpoints]
        self._lock = threading.Lock()
        self._preferred = 0
        self._closed = False
        self._buffer_cfg = cfg.buffer
        low = cfg.buffer.low_water or DEFAULT_LOW_WATER
        self._ids: IDBuffer | None = None
        self._texts: IDBuffer | None = None
        if cfg.buffer.snowflake:
            path, batch = "/v1/snowflake/next", cfg.buffer.snowflake
            self._ids = IDBuffer(lambda: self._ranges(path, batch), batch, low, self._retry_pause)
            self._texts = IDBuffer(lambda: [self._text_batch(path, "", batch, None)], batch, low, self._retry_pause)
        self._segments: dict[str, IDBuffer] = {}  # tag → its buffer of IDs
        self._segment_texts: dict[str, IDBuffer] = {}  # tag → its buffer of texts
        self._generators: list[LocalGenerator] = []
        self._vet_lock = threading.Lock()
        self._vetted: set[int] = set()  # ids of the endpoints checked
        self._overlap: Overlap | None = None

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stops the background refills and closes the idle connections.
        Later calls raise Closed; IDs left in the buffers are dropped; the
        local generators are closed (their leases released). Idempotent."""
        with self._lock:
            self._closed = True
            buffers = list(self._segments.values()) + list(self._segment_texts.values()) + [b for b in (self._ids, self._texts) if b]
            generators, self._generators = self._generators, []
        for g in generators:
            g.close()
        for b in buffers:
            b.close()
        for e in self._endpoints:
            e.close()

    # The calls.

    def next_id(self, timeout: float | None = None) -> int:
        """One Snowflake ID: from the buffer when there is one (waiting for
        its refill, within timeout, only when it is empty), else a request."""
        return self.next_ids(1, timeout)[0]

    def next_ids(self, n: int, timeout: float | None = None) -> list[int]:
        """n Snowflake IDs, 1 ≤ n ≤ MAX_COUNT: from the buffer when n is at
        most half a batch, else one request."""
        _count(n)
        if self._ids is not None and n <= self._buffer_cfg.snowflake // 2:
            self._check_open()
            return self._ids.take(n, _deadline(timeout))
        return [int(i) for i in self._get("/v1/snowflake/next", {"count": n}, timeout)["ids"]]

    def next_text(self, timeout: float | None = None) -> str:
        """One Snowflake ID as the server writes it: a masked text from a
        server that masks Snowflake IDs, else the decimal. Use it, not
        next_id, against a masking server, which refuses the ranges next_id's
        buffer reads. With buffer.snowflake set it comes from a buffer of
        texts (apart from next_id's buffer of IDs), refilled in the
        background; else it is one request."""
        return self.next_texts(1, timeout)[0]

    def next_texts(self, n: int, timeout: float | None = None) -> list[str]:
        """n Snowflake IDs as next_text writes them: from the buffer of
        texts when n is at most half a batch, else one request."""
        _count(n)
        if self._texts is not None and n <= self._buffer_cfg.snowflake // 2:
            self._check_open()
            return self._texts.take(n, _deadline(timeout))
        return self._text_batch("/v1/snowflake/next", "", n, timeout)

    def next_uuids(self, n: int, format: str, prefix: str = "", timeout: float | None = None) -> list[str]:
        """n Snowflake IDs as UUID-shaped texts in the order the server
        issued them: format "uuid7", "typeid" (with prefix, or the server's
        default when "") or "ulid". One request, never buffered."""
        _count(n)
        if format not in _UUID_FORMATS:
            raise InvalidArgument(f"format {format!r}: want one of {', '.join(_UUID_FORMATS)}")
        if prefix and format != "typeid":
            raise InvalidArgument(f"prefix {prefix!r}: only a typeid has one")
        q: dict[str, Any] = {"count": n, "format": format}
        if prefix:
            q["prefix"] = prefix
        return list(self._get("/v1/snowflake/next", q, timeout)["ids"])

    def next_segment(self, tag: str, timeout: float | None = None) -> int:
        """The next ID of a segment tag: from the tag's buffer when
        buffer.segment is set, else one request. An unknown tag raises
        NotFound."""
        return self.next_segment_ids(tag, 1, timeout)[0]

    def next_segment_ids(self, tag: str, n: int, timeout: float | None = None) -> list[int]:
        """n IDs of a segment tag: from its buffer when n is at most half a
        batch and buffer.segment is set, else one request."""
        _count(n)
        path = _tag_path(tag)
        if self._buffer_cfg.segment and n <= self._buffer_cfg.segment // 2:
            return self._segment_buffer(tag, path).take(n, _deadline(timeout))
        ans = self._get(path, {"count": n}, timeout)
        if ans.get("series"):
            raise InvalidArgument(f"tag {tag!r} is a series: it hands out numbers (next_numbers), not IDs")
        return [int(i) for i in ans["ids"]]

    def next_segment_text(self, tag: str, timeout: float | None = None) -> str:
        """The next ID of a segment tag as the server writes it (a masked
        text when it masks the tag): from the tag's buffer of texts when
        buffer.segment is set (apart from next_segment's buffer of IDs),
        else one request."""
        return self.next_segment_texts(tag, 1, timeout)[0]

    def next_segment_texts(self, tag: str, n: int, timeout: float | None = None) -> list[str]:
        """n IDs of a segment tag as next_segment_text writes them: from the
        tag's buffer of texts when n is at most half a batch and
        buffer.segment is set, else one request."""
        _count(n)
        path = _tag_path(tag)
        if self._buffer_cfg.segment and n <= self._buffer_cfg.segment // 2:
            return self._segment_buffer(tag, path, texts=True).take(n, _deadline(timeout))
        return self._text_batch(path, tag, n, timeout)

    def take_segment(self, tag: str, timeout: float | None = None) -> Segment:
        """A whole segment of tag for this client alone, as Didi Tinyid's
        client takes one (GET /tinyid/id/nextSegmentId): the caller then
        hands out its IDs itself, with no request per ID. A segment is the
        tag's configured step (its share of it, with several databases); the
        IDs the caller does not use are lost (a gap, never a duplicate), and
        no other client or server ever hands them out.

        The token, when the server needs one, is Config.token (a flakeid
        token, or one of Tinyid's tiny_id_token). An unknown tag raises
        NotFound; a store that is down moves the call to the next endpoint.
        It works against a Tinyid server too, whose codes 5 and 6 read as
        PermissionDenied and Unavailable."""
        _tag_path(tag)  # the same rule for a tag as everywhere
        def check(base: str, headers: http.client.HTTPMessage, a: Any) -> APIError | None:
            failed = _tinyid_failure(base, headers, a)
            if failed is None:
                try:
                    _segment(tag, a["data"])
                except Unavailable as err:  # a bad answer: the next endpoint may give a good one
                    failed = api_error(502, "unavailable", str(err), base)
            return failed

        _, a = self._call("GET", "/tinyid/id/nextSegmentId", {"bizType": tag}, None, timeout, check=check)
        return _segment(tag, a["data"])

    def next_number(self, tag: str, timeout: float | None = None) -> str:
        """The next number of a series tag (ORD-20261128-000123): one
        request, never buffered (a number carries the period it was issued
        in)."""
        return self.next_numbers(tag, 1, timeout)[0]

    def next_numbers(self, tag: str, n: int, timeout: float | None = None) -> list[str]:
        """n numbers of a series tag, in the order the server issued them."""
        _count(n)
        ans = self._get(_tag_path(tag), {"count": n}, timeout)
        if not ans.get("series"):
            raise InvalidArgument(f"tag {tag!r} is not a series: it hands out IDs, not numbers")
        return list(ans["ids"])

    def decode(self, id: int | str, as_: str = "", timeout: float | None = None) -> Parts:
        """Asks a server to split id (decimal, any text form it accepts, or
        a masked text) into its fields. as_ is "masked" or "plain" to settle
        a text that reads both ways; "" tells by the text."""
        if as_ not in _READINGS:
            raise InvalidArgument(f"as_ {as_!r}: want 'masked', 'plain' or ''")
        text = str(id)
        if not text:
            raise InvalidArgument("decode: an empty ID")
        a = self._get("/v1/decode/" + urllib.parse.quote(text, safe=""), {"as": as_} if as_ else {}, timeout)
        return Parts(id=int(a["id"]), time=_time(a["time"]), tick=int(a["tick"]), datacenter=int(a["datacenter"]),
                     worker=int(a["worker"]), sequence=int(a["sequence"]), masked=a.get("masked", ""),
                     key_id=int(a.get("key_id", 0)), form=a.get("form", ""), uuid=a.get("uuid", ""), prefix=a.get("prefix", ""))

    def bounds(self, start: str = "", end: str = "", timeout: float | None = None) -> Bounds:
        """The smallest and largest Snowflake IDs whose time lies in [start,
        end): each RFC 3339, a date, Unix milliseconds, "now" or an offset
        from now ("-1h", "-7d"); "" means the layout's epoch (start) or end
        (end). A window with no ID in it raises InvalidArgument."""
        q = {k: v for k, v in (("from", start), ("to", end)) if v}
        a = self._get("/v1/snowflake/bounds", q, timeout)
        return Bounds(min=int(a["min"]), max=int(a["max"]), start=_time(a["from"]), end=_time(a["to"]),
                      layout=a.get("layout", ""), note=a.get("note", ""))

    def local_generator(self, owner: str = "", timeout: float | None = None) -> LocalGenerator:
        """A generator of Snowflake IDs in this process, under a worker-id
        lease one of the endpoints holds for it (failing over as any call
        does, within timeout): see LocalGenerator. owner names this process
        in the coordinator, 1–64 letters, digits and -_.:/@; "" means
        "python/<hostname>/<pid>". A server that masks its Snowflake IDs, or
        runs on a static worker id, refuses (an APIError with code
        failed_precondition); one whose worker ids are all held raises
        Unavailable."""
        self._check_open()
        if owner and (len(owner) > 64 or any(not (c.isascii() and (c.isalnum() or c in "-_.:/@")) for c in owner)):
            raise InvalidArgument(f"owner {owner!r}: want 1–64 letters, digits and -_.:/@")
        g = LocalGenerator(self, owner or default_owner(), timeout)
        with self._lock:
            if self._closed:
                closed = True
            else:
                closed = False
                self._generators.append(g)
        if closed:
            g.close()
            raise Closed("the client is closed")
        return g

    # The machinery.

    def _check_open(self) -> None:
        if self._closed:
            raise Closed("the client is closed")

    def _segment_buffer(self, tag: str, path: str, texts: bool = False) -> IDBuffer:
        """The tag's buffer of IDs, or of texts, created on first use."""
        with self._lock:
            self._check_open()
            home = self._segment_texts if texts else self._segments
            b = home.get(tag)
            if b is None:
                batch = self._buffer_cfg.segment
                fetch = (lambda: [self._text_batch(path, tag, batch, None)]) if texts else (lambda: self._ranges(path, batch))
                b = IDBuffer(fetch, batch, self._buffer_cfg.low_water or DEFAULT_LOW_WATER, self._retry_pause)
                home[tag] = b
            return b

    def _text_batch(self, path: str, tag: str, n: int, timeout: float | None) -> list[str]:
        """n IDs of tag (Snowflake IDs when tag is "") as the server wrote
        them, with one request: a series' numbers are refused
        (InvalidArgument), as is an answer of another count."""
        a = self._get(path, {"count": n}, timeout)
        if a.get("series"):
            raise InvalidArgument(f"tag {tag!r} is a series: it hands out numbers (next_numbers), not IDs")
        ids = [str(i) for i in a["ids"]]
        if len(ids) != n or not all(ids):
            raise Unavailable(f"an answer of {len(ids)} IDs, some maybe empty, to a request for {n}")
        return ids

    def _ranges(self, path: str, count: int) -> list[range]:
        """A prefetch: count IDs as ranges (the refill of a buffer)."""
        a = self._get(path, {"count": count, "format": "ranges"}, None)
        out = []
        for r in a["ranges"]:
            first, n, stride = int(r["first"]), int(r["count"]), int(r.get("stride", 1))
            out.append(range(first, first + n * stride, stride))
        return out

    def _retry_pause(self) -> float:
        """How long a failed refill waits before it tries again: until the
        soonest endpoint is back, at least the backoff's minimum, at most its
        maximum."""
        soonest = min(e.down_until for e in self._endpoints) - time.monotonic()
        return min(self._backoff_max, max(self._backoff_min, soonest))

    def _order(self) -> list[_Endpoint]:
        now = time.monotonic()
        with self._lock:
            p = self._preferred
        n = len(self._endpoints)
        ring = [self._endpoints[(p + i) % n] for i in range(n)]
        up = [e for e in ring if e.down_until <= now]
        down = sorted((e for e in ring if e.down_until > now), key=lambda e: e.down_until)
        return up + down

    def _failed(self, e: _Endpoint, retry_after: float) -> None:
        with self._lock:
            d = min(self._backoff_max, self._backoff_min * 2 ** min(e.failures, 30))
            e.failures += 1
            e.down_until = time.monotonic() + max(random.uniform(d / 2, d), retry_after)

    def _answered(self, e: _Endpoint) -> None:
        with self._lock:
            e.failures, e.down_until = 0, 0.0
            self._preferred = self._endpoints.index(e)

    def _get(self, path: str, query: dict[str, Any], timeout: float | None) -> dict[str, Any]:
        """GETs path with query from one endpoint after another (see
        Client), and returns the answer's JSON; the endpoint of Snowflake
        IDs is checked against the others (_vet)."""
        e, a = self._call("GET", path, query, None, timeout)
        if path == "/v1/snowflake/next":
            self._vet(e)
        return a

    def _vet(self, e: _Endpoint) -> None:
        """Checks endpoint e, which just handed out Snowflake IDs, against
        the other endpoints, once; raises Overlap (and keeps raising it)
        when two can issue the same IDs."""
        if len(self._endpoints) < 2:
            return
        with self._vet_lock:
            if self._overlap is not None:
                raise self._overlap
            if id(e) in self._vetted:
                return
            mine, final = self._status(e)
            if mine is None:
                if final:  # a server that does not tell (no /v1/status, or not to this token)
                    self._vetted.add(id(e))
                return  # cannot tell now: check again at its next answer
            for o in self._endpoints:
                if o is e:
                    continue
                theirs, _ = self._status(o)
                if theirs is None or not _overlaps(mine, theirs):
                    continue
                # A lease may have moved between the two reads: look again.
                again, _ = self._status(e)
                theirs, _ = self._status(o)
                if again is not None and theirs is not None and _overlaps(again, theirs):
                    why = "they use different layouts" if again["layout"] != theirs["layout"] else "both hold the same worker id"
                    self._overlap = Overlap(
                        f"endpoints can issue the same IDs: {e.base} issues from {_space(again)}, and {o.base} from "
                        f"{_space(theirs)}: {why}, so they share no coordinator. Point both at one coordinator "
                        "(--coordinator), or give each its own --datacenter")
                    raise self._overlap
            self._vetted.add(id(e))

    def _status(self, e: _Endpoint) -> tuple[dict[str, Any] | None, bool]:
        """Endpoint e's /v1/status, read once within the per-attempt
        timeout, or None; the flag then says that asking again will not help
        (a 4xx other than 408 and 429)."""
        try:
            a = self._once(e, "GET", "/v1/status", self._timeout)
        except APIError as err:
            return None, 400 <= err.status < 500 and err.status not in (408, 429)
        except FlakeidError:
            return None, False
        return (a, False) if isinstance(a, dict) and a.get("layout") else (None, False)

    def _once(self, e: _Endpoint, method: str, path: str, timeout: float) -> dict[str, Any]:
        """One request to endpoint e, no failover: the answer's JSON, or the
        error (Unavailable for a network error)."""
        try:
            status, headers, body = e.request(path, self._headers, timeout, method)
        except (OSError, http.client.HTTPException) as err:
            raise Unavailable(f"{e.base}: {type(err).__name__}: {err}") from err
        if not 200 <= status < 300:
            raise _api_error(e.base, status, headers, body)
        try:
            return json.loads(body)
        except ValueError as err:
            raise Unavailable(f"{e.base}: an answer that is not JSON: {body[:200]!r}") from err

    def _call(self, method: str, path: str, query: dict[str, Any], data: bytes | None,
              timeout: float | None, sent: list[int] | None = None,
              check: Callable[[str, http.client.HTTPMessage, Any], APIError | None] | None = None) -> tuple[_Endpoint, dict[str, Any]]:
        """Sends method path with query (and data, JSON) to one endpoint
        after another (see Client); returns the endpoint that answered and
        its answer's JSON. sent, when given, gets the time.monotonic_ns() at
        which each attempt was sent: the answered one's, in the end. check,
        when given, reads a 2xx answer's headers and JSON for a failure told
        in them (Tinyid's paths answer 200 with a code of their own): its
        APIError is then taken as that status's answer."""
        self._check_open()
        deadline = _deadline(timeout)
        target = path + ("?" + urllib.parse.urlencode(query) if query else "")
        attempts, rounds = 0, 0
        last: FlakeidError | None = None
        while True:
            for e in self._order():
                now = time.monotonic()
                if attempts >= self._max_attempts or (deadline is not None and now >= deadline):
                    why = f"{attempts} attempts" if attempts >= self._max_attempts else "the call's timeout"
                    raise Unavailable(f"no endpoint answered {path} within {why}: {last}") from last
                attempts += 1
                per = self._timeout if deadline is None else max(0.001, min(self._timeout, deadline - now))
                if sent is not None:
                    sent[:] = [time.monotonic_ns()]
                try:
                    status, headers, body = e.request(target, self._headers, per, method, data)
                except (OSError, http.client.HTTPException) as err:
                    self._failed(e, 0)
                    last = Unavailable(f"{e.base}: {type(err).__name__}: {err}")
                    continue
                if 200 <= status < 300:
                    try:
                        answer = json.loads(body)
                    except ValueError as err:
                        self._answered(e)
                        raise Unavailable(f"{e.base}: an answer that is not JSON: {body[:200]!r}") from err
                    api = check(e.base, headers, answer) if check is not None else None
                    if api is None:
                        self._answered(e)
                        return e, answer
                    status = api.status
                else:
                    api = _api_error(e.base, status, headers, body)
                if status in (408, 429) or status >= 500:
                    self._failed(e, api.retry_after)
                    last = api
                    continue
                raise api
            # A full round failed: pause, unless the pause would outlast the
            # call's timeout.
            d = min(self._backoff_max, self._backoff_min * 2 ** min(rounds, 30))
            rounds += 1
            pause = min(self._backoff_max, max(random.uniform(d / 2, d), self._retry_pause()))
            if attempts >= self._max_attempts or (deadline is not None and time.monotonic() + pause >= deadline):
                raise Unavailable(f"no endpoint answered {path} ({attempts} attempts): {last}") from last
            time.sleep(pause)


def _api_error(base: str, status: int, headers: http.client.HTTPMessage, body: bytes) -> APIError:
    code, message = "", body[:500].decode("utf-8", "replace").strip()
    try:
        e = json.loads(body)["error"]
        code, message = str(e.get("code", "")), str(e.get("message", ""))
    except (ValueError, KeyError, TypeError, AttributeError):
        pass
    retry_after = 0.0
    ra = headers.get("Retry-After")
    if ra:
        try:
            retry_after = max(0.0, float(ra))
        except ValueError:
            pass
    return api_error(status, code, message, base, retry_after)


#: The header in which flakeid gives, on a failed answer of Tinyid's
#: paths, the code its own API would answer.
_TINYID_CODE_HEADER = "X-Flakeid-Error-Code"
_CODE_STATUS = {"invalid_argument": 400, "unauthenticated": 401, "permission_denied": 403, "not_found": 404,
                "unavailable": 503, "resource_exhausted": 507, "internal": 500}


def _tinyid_failure(base: str, headers: http.client.HTTPMessage, a: Any) -> APIError | None:
    """The APIError of a failed answer of Tinyid's paths (HTTP 200, code
    not 200): by flakeid's code when the server gave one, else by Tinyid's
    (5: the token is refused; anything else: the server failed)."""
    if isinstance(a, dict) and a.get("code") == 200 and a.get("data") is not None:
        return None
    tinyid_code = a.get("code") if isinstance(a, dict) else None
    message = str(a.get("message", "")) if isinstance(a, dict) else ""
    code = headers.get(_TINYID_CODE_HEADER, "")
    status = _CODE_STATUS.get(code, 0)
    if not status:
        status, code = (403, "permission_denied") if tinyid_code == 5 else (503, "unavailable")
    return api_error(status, code, f"{message} (Tinyid code {tinyid_code})", base)


def _segment(tag: str, d: Any) -> Segment:
    """The Segment of a Tinyid segment answer's data, checked to make a run
    of IDs (an answer that does not raises Unavailable)."""
    try:
        cur, last, delta, rem = (int(d[k]) for k in ("currentId", "maxId", "delta", "remainder"))
    except (KeyError, TypeError, ValueError) as err:
        raise Unavailable(f"a segment of {tag!r} without currentId, maxId, delta and remainder: {d!r}") from err
    first = cur + delta
    if delta < 1 or not 0 <= rem < delta or first > last or (last - first) % delta or first % delta != rem:
        raise Unavailable(f"a segment of {tag!r}: currentId {cur}, maxId {last}, delta {delta}, remainder {rem} do not make a run of IDs")
    return Segment(tag=tag, first=first, last=last, stride=delta)


def _overlaps(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether two servers issuing from the spaces a and b (their
    /v1/status) at the same time can issue the same IDs."""
    if not a.get("lease_held") or not b.get("lease_held"):
        return False  # one issues nothing now
    return a["layout"] != b["layout"] or (a.get("datacenter_id"), a.get("worker_id")) == (b.get("datacenter_id"), b.get("worker_id"))


def _space(s: dict[str, Any]) -> str:
    return f"datacenter {s.get('datacenter_id')}, worker {s.get('worker_id')} of the layout {s.get('layout')}"


def _count(n: int) -> None:
    if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= MAX_COUNT:
        raise InvalidArgument(f"count {n!r} is out of range: want 1 to {MAX_COUNT}")


def _tag_path(tag: str) -> str:
    if not tag or len(tag) > 128 or tag in (".", "..") or any(not (c.isascii() and (c.isalnum() or c in "-_.:")) for c in tag):
        raise InvalidArgument(f"tag {tag!r}: want 1–128 characters of A–Z a–z 0–9 - _ . :, and not . or ..")
    return "/v1/segment/" + tag + "/next"


def _deadline(timeout: float | None) -> float | None:
    if timeout is None:
        return None
    if timeout <= 0:
        raise InvalidArgument(f"timeout {timeout!r}: want a positive number of seconds, or None")
    return time.monotonic() + timeout
