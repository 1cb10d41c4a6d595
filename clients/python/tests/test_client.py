"""Tests of the Python client against a live `flakeid serve` (built from
this repository, or $FLAKEID_TEST_BIN), and of its failover against small HTTP
servers of the test's own that fail on purpose.

Run from the repository: python3 -m unittest discover -s clients/python/tests
"""

from __future__ import annotations

import http.server
import json
import os
import re
import shutil
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.request
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "src"))

import flakeid  # noqa: E402

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
TOKEN = "python-client-test-token-0123456789"


class Server:
    """A `flakeid serve` on a port the OS picks, with its own data
    directory, stopped by stop()."""

    def __init__(self, binary: str, *args: str, tls: ssl.SSLContext | None = None):
        """With tls, a context that trusts its certificate, the server
        serves HTTPS (args hold --tls-cert and --tls-key)."""
        self.dir = tempfile.mkdtemp(prefix="flakeid-python-")
        self.proc = subprocess.Popen([binary, "serve", "--listen", "127.0.0.1:0", "--data-dir", self.dir, *args],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.url = ""
        pattern = re.compile(r'msg="flakeid: listening; not ready until a worker id is leased" addr=(\S+)')
        deadline = time.monotonic() + 60
        for line in self.proc.stderr:
            m = pattern.search(line)
            if m:
                self.url = ("https://" if tls else "http://") + m.group(1)
                break
            if time.monotonic() > deadline:
                break
        if not self.url:
            self.proc.kill()
            self.proc.wait()
            self.proc.stderr.close()
            shutil.rmtree(self.dir, ignore_errors=True)
            raise RuntimeError("flakeid serve did not say where it listens")
        self.drain = threading.Thread(target=self.proc.stderr.read, daemon=True)  # drains the log
        self.drain.start()
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(self.url + "/readyz", timeout=2, context=tls) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"flakeid serve at {self.url} did not become ready")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.drain.join(5)
        self.proc.stderr.close()
        shutil.rmtree(self.dir, ignore_errors=True)


class Fake:
    """An HTTP server of the test's own on a port the OS picks: answer(n)
    gives the status, headers and body of its n-th request (from 0)."""

    def __init__(self, answer):
        self.requests: list[str] = []
        fake = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self):  # noqa: N802
                fake.requests.append(self.path)
                status, headers, body = answer(len(fake.requests) - 1)
                try:
                    self.send_response(status)
                    for k, v in headers.items():
                        self.send_header(k, v)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up on a slow answer, as it should

            def log_message(self, *args):
                pass

        self._serve(Handler)

    def _serve(self, handler) -> None:
        """Serves with handler on a port the OS picks."""
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def id_requests(fake: Fake) -> list[str]:
    """The requests a fake got for IDs: not the client's reads of
    /v1/status, which check its endpoints against each other."""
    return [p for p in fake.requests if not p.startswith("/v1/status")]


def unavailable(retry_after: str = ""):
    headers = {"Content-Type": "application/json"}
    if retry_after:
        headers["Retry-After"] = retry_after
    return 503, headers, b'{"error":{"code":"unavailable","message":"no worker-id lease yet"}}'


def dead_url() -> str:
    """The URL of a port nothing listens on."""
    f = Fake(lambda n: (200, {}, b""))
    url = f.url
    f.stop()
    return url


def flakeid_binary() -> tuple[str, str]:
    """($FLAKEID_TEST_BIN, ""), or (a flakeid built from this repository
    into a temporary directory, that directory)."""
    binary = os.environ.get("FLAKEID_TEST_BIN", "")
    if binary:
        return binary, ""
    build_dir = tempfile.mkdtemp(prefix="flakeid-python-bin-")
    binary = os.path.join(build_dir, "flakeid")
    subprocess.run(["go", "build", "-o", binary, "./cmd/flakeid"], cwd=REPO, check=True)
    return binary, build_dir


def setUpModule():  # noqa: N802
    global BINARY, BUILD_DIR, SERVER, AUTH_SERVER
    BINARY, BUILD_DIR = flakeid_binary()
    SERVER = Server(BINARY, "--auto-create-tags")
    tokens = os.path.join(SERVER.dir, "..", os.path.basename(SERVER.dir) + "-tokens.json")
    with open(tokens, "w") as f:
        json.dump([{"name": "test", "token": TOKEN, "tags": ["*"], "snowflake": True, "admin": True}], f)
    AUTH_SERVER = Server(BINARY, "--tokens-file", tokens, "--auto-create-tags")
    os.remove(tokens)


def tearDownModule():  # noqa: N802
    SERVER.stop()
    AUTH_SERVER.stop()
    if BUILD_DIR:
        shutil.rmtree(BUILD_DIR, ignore_errors=True)


def client(*endpoints: str, **kw) -> flakeid.Client:
    return flakeid.Client(flakeid.Config(endpoints=list(endpoints or [SERVER.url]), **kw))


class Overlaps(unittest.TestCase):
    def test_endpoints_that_can_issue_the_same_ids_are_refused(self):
        # Two servers on their own file coordinators both hold worker 0 of
        # datacenter 0: a client given both must refuse their Snowflake IDs
        # (plain, buffered, texts, a local generator's lease), naming both;
        # one on another datacenter is fine.
        a, b, other = Server(BINARY), Server(BINARY), Server(BINARY, "--datacenter", "1")
        try:
            for snowflake in (0, 1000):
                cfg = flakeid.Config(endpoints=[a.url, b.url], buffer=flakeid.BufferConfig(snowflake=snowflake))
                with flakeid.Client(cfg) as c:
                    with self.assertRaises(flakeid.Overlap) as cm:
                        c.next_id(timeout=10)
                    self.assertIn(a.url, str(cm.exception))
                    self.assertIn(b.url, str(cm.exception))
                    self.assertIn("both hold the same worker id", str(cm.exception))
                    with self.assertRaises(flakeid.Overlap):
                        c.next_texts(2)  # and every later Snowflake call
            with flakeid.Client(flakeid.Config(endpoints=[b.url, a.url])) as c:
                with self.assertRaises(flakeid.Overlap):
                    c.local_generator("overlap")
            with flakeid.Client(flakeid.Config(endpoints=[a.url, other.url])) as c:
                ids = c.next_ids(10) + c.next_ids(10)
                self.assertEqual(len(set(ids)), 20)
                with c.local_generator("apart") as g:
                    self.assertGreater(g.next_id(timeout=10), 0)
        finally:
            for s in (a, b, other):
                s.stop()


class TLS(unittest.TestCase):
    def test_a_private_ca_is_trusted_through_the_ssl_context(self):
        # flakeid serve with a fresh self-signed certificate: a client whose
        # ssl_context trusts it gets IDs; one on the system's trust store is
        # refused, and the error names the certificate.
        d = tempfile.mkdtemp(prefix="flakeid-python-tls-")
        cert, key = os.path.join(d, "cert.pem"), os.path.join(d, "key.pem")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", key,
                        "-out", cert, "-days", "1", "-subj", "/CN=flakeid test", "-addext", "subjectAltName=IP:127.0.0.1"],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        trusting = ssl.create_default_context(cafile=cert)
        srv = Server(BINARY, "--tls-cert", cert, "--tls-key", key, tls=trusting)
        try:
            self.assertTrue(srv.url.startswith("https://"))
            with client(srv.url, ssl_context=trusting) as c:
                ids = c.next_ids(10)
                self.assertEqual(len(set(ids)), 10)
            with client(srv.url, max_attempts=3, backoff_min=0.01, backoff_max=0.02) as c:
                with self.assertRaises(flakeid.Unavailable) as cm:
                    c.next_id()
                self.assertIn("CERTIFICATE_VERIFY_FAILED", str(cm.exception))
        finally:
            srv.stop()
            shutil.rmtree(d, ignore_errors=True)


class LiveServer(unittest.TestCase):
    def test_ids_are_unique_increasing_and_decode(self):
        with client() as c:
            ids = c.next_ids(100) + [c.next_id() for _ in range(100)]
            self.assertEqual(len(set(ids)), 200)
            self.assertEqual(ids, sorted(ids))
            p = c.decode(ids[0])
            self.assertEqual(p.id, ids[0])
            q = c.decode(str(ids[-1]))
            self.assertEqual((p.datacenter, p.worker), (q.datacenter, q.worker))
            self.assertLessEqual(p.time, q.time)
            self.assertLess(abs(time.time() - p.time.timestamp()), 60)

    def test_buffer_hands_out_unique_ids_across_refills(self):
        with client(buffer=flakeid.BufferConfig(snowflake=1000, low_water=0.5)) as c:
            ids = [c.next_id() for _ in range(5000)]
            self.assertEqual(len(set(ids)), 5000)
            self.assertEqual(ids, sorted(ids))  # each batch is later than the one before
            more = c.next_ids(400)  # at most half a batch: from the buffer
            self.assertTrue(set(more).isdisjoint(ids))
            big = c.next_ids(3000)  # a request of its own
            self.assertEqual(len(set(big) | set(more) | set(ids)), 8400)

    def test_segment_ids_buffered_and_not(self):
        with client(buffer=flakeid.BufferConfig(segment=100)) as c, client() as plain:
            a = [c.next_segment("py-orders") for _ in range(250)]
            b = plain.next_segment_ids("py-orders", 50)
            self.assertEqual(len(set(a) | set(b)), 300)
            self.assertEqual(a, sorted(a))
            texts = plain.next_segment_texts("py-orders", 2) + [plain.next_segment_text("py-orders")]
            self.assertTrue(all(t.isdigit() and int(t) not in a for t in texts), texts)

    def test_texts_buffered_and_not(self):
        # A server that masks its Snowflake IDs and a tag: next_id's buffer
        # of ranges is refused there, the buffers of texts are not; every
        # text is handed out once, across refills, and reads back as an ID.
        masked = Server(BINARY, "--mask-key", "000102030405060708090a0b0c0d0e0f", "--mask-snowflake",
                        "--mask-tags", "py-masked", "--auto-create-tags")
        try:
            with client(masked.url, buffer=flakeid.BufferConfig(snowflake=100, segment=50)) as c, client(masked.url) as plain:
                texts = [c.next_text() for _ in range(350)] + c.next_texts(50) + plain.next_texts(20)
                self.assertEqual(len(set(texts)), 420)
                self.assertFalse(any(t.isdigit() for t in texts), texts[:5])
                ids = [c.decode(t, as_="masked").id for t in texts[:3] + texts[340:343]]
                self.assertEqual(ids, sorted(ids))
                self.assertEqual(len(c.next_texts(1000)), 1000)  # more than half a batch: a request of its own
                with self.assertRaises(flakeid.APIError):
                    c.next_id()  # ranges of a masked space are refused
                seg = [c.next_segment_text("py-masked") for _ in range(120)] + plain.next_segment_texts("py-masked", 30)
                self.assertEqual(len(set(seg)), 150)
                self.assertFalse(any(t.isdigit() for t in seg), seg[:5])
        finally:
            masked.stop()
        with client(buffer=flakeid.BufferConfig(snowflake=100, segment=40)) as c:
            texts = [c.next_text() for _ in range(250)]
            ids = [int(t) for t in texts]
            self.assertEqual(ids, sorted(set(ids)))
            seg = [int(c.next_segment_text("py-texts")) for _ in range(100)] + c.next_segment_ids("py-texts", 30)
            self.assertEqual(len(set(seg)), 130)
            body = json.dumps({"tag": "py-text-series", "step": 10, "period": "day", "template": "T-{yyyyMMdd}-{seq:4}"}).encode()
            req = urllib.request.Request(SERVER.url + "/v1/segment/tags", data=body, method="POST", headers={"Content-Type": "application/json"})
            urllib.request.urlopen(req, timeout=5).close()
            with self.assertRaises(flakeid.InvalidArgument):
                c.next_segment_text("py-text-series")  # a series' numbers are not IDs, buffered or not
            with self.assertRaises(flakeid.InvalidArgument):
                c.next_segment_texts("py-text-series", 1000)

    def test_take_segment(self):
        body = json.dumps({"tag": "py-take", "step": 50}).encode()
        req = urllib.request.Request(SERVER.url + "/v1/segment/tags", data=body, method="POST", headers={"Content-Type": "application/json"})
        urllib.request.urlopen(req, timeout=5).close()
        seen: set[int] = set()
        with client(buffer=flakeid.BufferConfig(segment=20)) as c:
            for _ in range(10):
                seg = c.take_segment("py-take")
                self.assertEqual((seg.tag, seg.stride, seg.count, len(seg)), ("py-take", 1, 50, 50))
                ids = list(seg)
                self.assertEqual(len(ids), 50)
                self.assertEqual((ids[0], ids[-1]), (seg.first, seg.last))
                more = [c.next_segment("py-take") for _ in range(7)] + c.next_segment_ids("py-take", 30)
                for i in ids + more:
                    self.assertNotIn(i, seen)
                    seen.add(i)
            with self.assertRaises(flakeid.InvalidArgument):
                c.take_segment("bad tag!")
        with client(AUTH_SERVER.url) as c:
            with self.assertRaises(flakeid.PermissionDenied):
                c.take_segment("py-take")
        with client(AUTH_SERVER.url, token=TOKEN) as c:
            self.assertEqual(c.take_segment("py-take-auth").tag, "py-take-auth")

    def test_series_numbers(self):
        body = json.dumps({"tag": "py-ord", "step": 100, "period": "day", "template": "ORD-{yyyyMMdd}-{seq:6}"}).encode()
        req = urllib.request.Request(SERVER.url + "/v1/segment/tags", data=body, method="POST", headers={"Content-Type": "application/json"})
        urllib.request.urlopen(req, timeout=5).close()
        with client() as c:
            nums = c.next_numbers("py-ord", 3) + [c.next_number("py-ord")]
            self.assertEqual(len(set(nums)), 4)
            for n in nums:
                self.assertRegex(n, r"^ORD-\d{8}-\d{6}$")
            with self.assertRaises(flakeid.InvalidArgument):
                c.next_numbers("py-not-a-series", 1)  # a plain tag, created on first use
            with self.assertRaises(flakeid.InvalidArgument):
                c.next_segment_ids("py-ord", 1)

    def test_uuid_forms(self):
        with client() as c:
            for text in c.next_uuids(3, "uuid7"):
                self.assertEqual(uuid.UUID(text).version, 7)
            for text in c.next_uuids(2, "typeid", prefix="order"):
                self.assertRegex(text, r"^order_[0-9a-hjkmnp-tv-z]{26}$")
            ulids = c.next_uuids(2, "ulid")
            self.assertTrue(all(len(u) == 26 for u in ulids))
            self.assertEqual(c.decode(ulids[0]).form, "ulid")
            with self.assertRaises(flakeid.InvalidArgument):
                c.next_uuids(1, "uuid4")
            with self.assertRaises(flakeid.InvalidArgument):
                c.next_uuids(1, "typeid", prefix="Bad-Prefix")

    def test_bounds(self):
        with client() as c:
            i = c.next_id()
            b = c.bounds("-1h", "+1h")
            self.assertLessEqual(b.min, i)
            self.assertLessEqual(i, b.max)
            self.assertLess(b.start, b.end)
            with self.assertRaises(flakeid.InvalidArgument) as cm:
                c.bounds("2026-03-02", "2026-03-01")  # ends before it starts
            self.assertIsInstance(cm.exception, flakeid.APIError)
            self.assertEqual(cm.exception.status, 400)

    def test_errors_tell_apart(self):
        with client() as c:
            with self.assertRaises(flakeid.InvalidArgument):
                c.next_ids(0)
            with self.assertRaises(flakeid.InvalidArgument):
                c.next_segment("bad tag!")
            with self.assertRaises(flakeid.InvalidArgument) as cm:
                c.decode("not-an-id")
            self.assertEqual(cm.exception.endpoint, SERVER.url)
        with client(AUTH_SERVER.url) as c:
            with self.assertRaises(flakeid.Unauthenticated) as cm:
                c.next_id()
            self.assertEqual(cm.exception.status, 401)
        with client(AUTH_SERVER.url, token="wrong-token-0123456789") as c:
            with self.assertRaises(flakeid.Unauthenticated):
                c.next_id()
        with client(AUTH_SERVER.url, token=TOKEN) as c:
            self.assertGreater(c.next_id(), 0)

    def test_closed(self):
        c = client(buffer=flakeid.BufferConfig(snowflake=100))
        c.next_id()
        c.close()
        c.close()
        with self.assertRaises(flakeid.Closed):
            c.next_id()
        with self.assertRaises(flakeid.Closed):
            c.next_ids(1000)


class Failover(unittest.TestCase):
    def test_failed_endpoint_is_passed_over(self):
        def hang(n):
            time.sleep(2)
            return 200, {}, b'{"ids":["1"]}'

        fake = Fake(hang)
        try:
            with client(fake.url, SERVER.url, timeout=0.5, backoff_min=5, backoff_max=10) as c:
                start = time.monotonic()
                self.assertGreater(c.next_id(), 1)
                self.assertGreaterEqual(time.monotonic() - start, 0.5)  # the first call waited out one attempt
                for _ in range(20):
                    c.next_id()
                # The hanging endpoint is passed over for its backoff
                # (2.5–5 s): no call asks it for IDs again (the client's
                # check of the endpoints reads its /v1/status, no more).
                self.assertEqual(len(id_requests(fake)), 1)
        finally:
            fake.stop()

    def test_dead_endpoint_fails_over(self):
        with client(dead_url(), SERVER.url) as c:
            self.assertEqual(len(set(c.next_ids(10))), 10)

    def test_texts_come_a_batch_at_a_time(self):
        # The buffer of texts asks for a batch per refill, not a text per
        # call, and hands them out in the order the server wrote them.
        def texts(n):
            return 200, {"Content-Type": "application/json"}, json.dumps({"ids": [f"t{n}-{i}" for i in range(100)]}).encode()

        fake = Fake(texts)
        try:
            with client(fake.url, buffer=flakeid.BufferConfig(snowflake=100)) as c:
                got = [c.next_text() for _ in range(250)]
                self.assertEqual(got, [f"t{n}-{i}" for n in range(3) for i in range(100)][:250])
                self.assertLessEqual(len(id_requests(fake)), 4)
                self.assertTrue(all("count=100" in p for p in id_requests(fake)), id_requests(fake))
        finally:
            fake.stop()

    def test_take_segment_reads_tinyid_answers(self):
        # A Tinyid server's answers (HTTP 200 and codes of its own), and
        # flakeid's header on them: code 6 moves to the next endpoint, code
        # 5 is PermissionDenied at once, not_found NotFound at once, and a
        # segment that is not a run of IDs is not taken.
        def tinyid(body: str, headers: dict[str, str] | None = None):
            return Fake(lambda n: (200, {"Content-Type": "application/json", **(headers or {})}, body.encode()))

        good = tinyid('{"data":{"currentId":100,"loadingId":120,"maxId":200,"delta":2,"remainder":0,"bizType":"test"},"code":200,"message":""}')
        down = tinyid('{"data":null,"code":6,"message":"sys error"}')
        refused = tinyid('{"data":null,"code":5,"message":"token is error"}')
        missing = tinyid('{"data":null,"code":6,"message":"no such tag"}', {"X-Flakeid-Error-Code": "not_found"})
        broken = tinyid('{"data":{"currentId":100,"loadingId":120,"maxId":201,"delta":2,"remainder":0},"code":200,"message":""}')
        fakes = (good, down, refused, missing, broken)
        try:
            with client(down.url, good.url) as c:
                seg = c.take_segment("test")
                self.assertEqual((seg.first, seg.last, seg.stride, seg.count), (102, 200, 2, 50))
                self.assertEqual(list(seg)[:3], [102, 104, 106])
                self.assertEqual(id_requests(down), ["/tinyid/id/nextSegmentId?bizType=test"])
            for fake, kind in ((refused, flakeid.PermissionDenied), (missing, flakeid.NotFound)):
                with client(fake.url, good.url) as c:
                    with self.assertRaises(kind) as cm:
                        c.take_segment("test")
                    self.assertEqual(cm.exception.endpoint, fake.url)
                    self.assertEqual(len(id_requests(fake)), 1)
            with client(broken.url, max_attempts=3, backoff_min=0.01, backoff_max=0.02) as c:
                with self.assertRaises(flakeid.Unavailable) as cm:
                    c.take_segment("test")
                self.assertIn("do not make a run of IDs", str(cm.exception))
        finally:
            for f in fakes:
                f.stop()

    def test_503_moves_on_and_retry_after_is_honoured(self):
        fake = Fake(lambda n: unavailable("1"))
        try:
            with client(fake.url, SERVER.url, backoff_min=0.01, backoff_max=0.05) as c:
                c.next_id()
                c.next_id()
                # The fake said Retry-After: 1 — it is asked once, not on
                # the second call.
                self.assertEqual(len(id_requests(fake)), 1)
        finally:
            fake.stop()

    def test_retry_after_waits_for_the_one_server(self):
        fake = Fake(lambda n: unavailable("1") if n == 0 else (200, {"Content-Type": "application/json"}, b'{"ids":["42"]}'))
        try:
            with client(fake.url, backoff_min=0.01, backoff_max=2) as c:
                start = time.monotonic()
                self.assertEqual(c.next_id(), 42)
                self.assertGreaterEqual(time.monotonic() - start, 0.9)  # waited for the server's Retry-After
        finally:
            fake.stop()

    def test_gives_up_after_max_attempts_and_at_its_timeout(self):
        fake = Fake(lambda n: unavailable())
        try:
            with client(fake.url, max_attempts=3, backoff_min=0.01, backoff_max=0.02) as c:
                with self.assertRaises(flakeid.Unavailable) as cm:
                    c.next_id()
                self.assertIsInstance(cm.exception.__cause__, flakeid.APIError)
                self.assertEqual(len(fake.requests), 3)
            with client(fake.url, max_attempts=1000, backoff_min=0.01, backoff_max=0.05) as c:
                start = time.monotonic()
                with self.assertRaises(flakeid.Unavailable):
                    c.next_id(timeout=0.3)
                self.assertLess(time.monotonic() - start, 3)  # 0.3 s, and a pause of at most 0.05 s
        finally:
            fake.stop()

    def test_client_errors_are_not_retried(self):
        fake = Fake(lambda n: (404, {"Content-Type": "application/json"}, b'{"error":{"code":"not_found","message":"no tag x"}}'))
        try:
            with client(fake.url, SERVER.url) as c:
                with self.assertRaises(flakeid.NotFound) as cm:
                    c.next_segment("x")
                self.assertEqual((cm.exception.code, cm.exception.message), ("not_found", "no tag x"))
                self.assertEqual(len(fake.requests), 1)
            with client(fake.url, buffer=flakeid.BufferConfig(segment=10)) as c:
                with self.assertRaises(flakeid.NotFound):  # through a buffer too, at once despite its timeout
                    c.next_segment("x", timeout=30)
        finally:
            fake.stop()

    def test_slow_server_times_out_per_attempt(self):
        def slow(n):
            time.sleep(3)
            return 200, {}, b'{"ids":["1"]}'

        fake = Fake(slow)
        try:
            with client(fake.url, SERVER.url, timeout=0.5) as c:
                self.assertGreater(c.next_id(), 1)  # from the live server, after the slow one timed out
        finally:
            fake.stop()

    def test_buffer_rides_out_an_outage(self):
        up = threading.Event()
        up.set()

        def answer(n):
            if not up.is_set():
                return unavailable()
            start = 1000 * n + 1
            return 200, {"Content-Type": "application/json"}, json.dumps(
                {"count": 100, "ranges": [{"first": str(start), "count": 100, "stride": 1}]}).encode()

        fake = Fake(answer)
        try:
            with client(fake.url, buffer=flakeid.BufferConfig(snowflake=100, low_water=0.5), backoff_min=0.01, backoff_max=0.05) as c:
                self.assertEqual(c.next_id(), 1)
                up.clear()
                got = [c.next_id() for _ in range(99)]  # the buffer's IDs, while the server is down
                self.assertEqual(got, list(range(2, 101)))
                with self.assertRaises(flakeid.Unavailable):
                    c.next_id(timeout=0.2)
                up.set()
                self.assertGreater(c.next_id(timeout=5), 100)
        finally:
            fake.stop()


class Configs(unittest.TestCase):
    def test_validate(self):
        for bad in [flakeid.Config(), flakeid.Config(endpoints=["ftp://x"]), flakeid.Config(endpoints=["http://a", "http://a/"]),
                    flakeid.Config(endpoints=["http://a"], timeout=-1), flakeid.Config(endpoints=["http://a"], max_attempts=1001),
                    flakeid.Config(endpoints=["http://a"], backoff_min=2, backoff_max=1),
                    flakeid.Config(endpoints=["http://a"], token="a\nb"),
                    flakeid.Config(endpoints=["http://a"], buffer=flakeid.BufferConfig(low_water=2))]:
            with self.assertRaises(flakeid.InvalidConfig, msg=repr(bad)):
                flakeid.Client(bad)
        d = flakeid.Config.default()
        d.validate()
        self.assertEqual((d.endpoints, d.buffer.snowflake), ([flakeid.DEFAULT_ENDPOINT], 10_000))


if __name__ == "__main__":
    unittest.main()
