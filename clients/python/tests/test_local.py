"""Tests of the Python client's local generator: against live `flakeid
serve` processes (built from this repository, or $FLAKEID_TEST_BIN) — with
generators in child processes that the test pauses (SIGSTOP) past their
lease and kills (SIGKILL) — and, for the fence's arithmetic, against a
lease server of the test's own whose answers it writes.

Run from the repository: python3 -m unittest discover -s clients/python/tests
"""

from __future__ import annotations

import http.server
import json
import os
import signal
import subprocess
import sys
import threading
import time
import shutil
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "src"))

import flakeid  # noqa: E402
from test_client import Fake, Server, flakeid_binary  # noqa: E402

SRC = os.path.join(os.path.dirname(__file__), "..", "src")

# A child process: a local generator that prints its IDs, a line of
# space-separated decimals per 200 IDs, until it is killed.
CHILD = r"""
import sys
sys.path.insert(0, sys.argv[1])
import flakeid
c = flakeid.Client(flakeid.Config(endpoints=[sys.argv[2]], timeout=2))
g = c.local_generator(sys.argv[3], timeout=30)
print("ready", *g.worker, flush=True)
while True:
    try:
        ids = [g.next_id(timeout=0.2) for _ in range(200)]
    except flakeid.Unavailable:
        continue
    print(" ".join(map(str, ids)), flush=True)
"""


def setUpModule():  # noqa: N802
    global BINARY, BUILD_DIR
    BINARY, BUILD_DIR = flakeid_binary()


def tearDownModule():  # noqa: N802
    if BUILD_DIR:
        shutil.rmtree(BUILD_DIR, ignore_errors=True)


def decode(id_: int, tb: int = 41, db: int = 5, wb: int = 5, sb: int = 12) -> tuple[int, int, int, int]:
    """(tick, datacenter, worker, sequence) of an ID."""
    return id_ >> (db + wb + sb), id_ >> (wb + sb) & ((1 << db) - 1), id_ >> sb & ((1 << wb) - 1), id_ & ((1 << sb) - 1)


class Child:
    """A child process running a local generator, its IDs collected."""

    def __init__(self, url: str, owner: str):
        self.proc = subprocess.Popen([sys.executable, "-c", CHILD, SRC, url, owner], stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True)
        first = self.proc.stdout.readline().split()
        if not first or first[0] != "ready":
            self.proc.kill()
            raise RuntimeError(f"the child did not start: {first}")
        self.worker = (int(first[1]), int(first[2]))
        self.ids: list[int] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.ids.extend(int(x) for x in line.split())

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait()
        self._reader.join(5)
        self.proc.stdout.close()


class LiveLocal(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = Server(BINARY)

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def test_unique_across_threads_generators_and_the_server(self):
        with flakeid.Client(flakeid.Config(endpoints=[self.server.url])) as c:
            gens = [c.local_generator(f"py-test-{i}", timeout=30) for i in range(2)]
            self.assertNotEqual(gens[0].worker, gens[1].worker)
            out: list[list[int]] = []
            lock = threading.Lock()

            def run(g):
                ids = [g.next_id(timeout=5) for _ in range(20000)]
                with lock:
                    out.append(ids)

            threads = [threading.Thread(target=run, args=(g,)) for g in gens for _ in range(2)]
            for t in threads:
                t.start()
            served = c.next_ids(5000)
            for t in threads:
                t.join()
            self.assertEqual(len(out), 4)
            for ids in out:
                self.assertEqual(ids, sorted(ids))  # each thread's increase
            every = [i for ids in out for i in ids] + served
            self.assertEqual(len(set(every)), len(every))
            own = decode(served[0])[1:3]
            for g in gens:
                self.assertNotEqual(g.worker, own)
            tick = decode(out[0][0])[0]
            epoch_ms = 1735689600000  # the default layout's epoch, 2025-01-01
            self.assertLess(abs(epoch_ms + tick - time.time() * 1000), 5000)
            g = gens[0]
            g.close()
            with self.assertRaises(flakeid.Closed):
                g.next_id()
        # Closing the client closed (and released) the other.
        with self.assertRaises(flakeid.Closed):
            gens[1].next_id()

    def test_bad_owner_and_masking_server(self):
        with flakeid.Client(flakeid.Config(endpoints=[self.server.url])) as c:
            with self.assertRaises(flakeid.InvalidArgument):
                c.local_generator("a b")
        masked = Server(BINARY, "--mask-key", "000102030405060708090a0b0c0d0e0f", "--mask-snowflake")
        try:
            with flakeid.Client(flakeid.Config(endpoints=[masked.url])) as c:
                with self.assertRaises(flakeid.APIError) as cm:
                    c.local_generator()
                self.assertEqual(cm.exception.code, "failed_precondition")
        finally:
            masked.stop()


class Processes(unittest.TestCase):
    """Generators in processes the test pauses past their lease and kills:
    every ID unique, with each other and with the server's own."""

    def test_sigstop_past_the_ttl_and_kill_9(self):
        # Two worker ids (the server's own and one more), a 2 s TTL: a
        # generator paused for 4 s loses its lease, and the next process
        # gets the same worker id.
        server = Server(BINARY, "--worker-bits", "1", "--time-bits", "45", "--lease-ttl", "2s")
        children: list[Child] = []
        try:
            with flakeid.Client(flakeid.Config(endpoints=[server.url])) as c:
                served = c.next_ids(1000)
                a = Child(server.url, "py-a")
                children.append(a)
                time.sleep(1)
                a.proc.send_signal(signal.SIGSTOP)
                stopped = len(a.ids)
                time.sleep(4)  # past the 2 s TTL: the server closes the lease
                b = Child(server.url, "py-b")
                children.append(b)
                self.assertEqual(b.worker, a.worker)  # the only free worker id
                a.proc.send_signal(signal.SIGCONT)
                time.sleep(1.5)
                a.kill()
                b.kill()
                c2 = Child(server.url, "py-c")  # after kill -9: the worker id again, within the TTL
                children.append(c2)
                time.sleep(3)  # it starts past b's reservation: up to 2 s ahead
                c2.kill()
                served += c.next_ids(1000)
            every = a.ids + b.ids + c2.ids + served
            self.assertGreater(stopped, 0)
            self.assertGreater(len(b.ids), 0)
            self.assertGreater(len(c2.ids), 0)
            self.assertEqual(len(set(every)), len(every), "a duplicate ID")
            # a, then b, then c on one worker id: their ticks never meet.
            layout = dict(tb=45, db=5, wb=1, sb=12)
            last_a = max(decode(i, **layout)[0] for i in a.ids)
            self.assertLess(last_a, min(decode(i, **layout)[0] for i in b.ids))
            self.assertLess(max(decode(i, **layout)[0] for i in b.ids), min(decode(i, **layout)[0] for i in c2.ids))
        finally:
            for ch in children:
                if ch.proc.poll() is None:
                    ch.proc.send_signal(signal.SIGCONT)
                    ch.kill()
            server.stop()


class LeaseServer(Fake):
    """An HTTP server of the test's own speaking the lease protocol:
    answer(method, path, n) gives the status and JSON body of the n-th
    request (from 0), and optionally how many seconds to wait before
    sending them."""

    def __init__(self, answer):
        self.requests: list[tuple[str, str]] = []
        fake = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def handle_one(self):
                n = int(self.headers.get("Content-Length") or 0)
                if n:
                    self.rfile.read(n)
                fake.requests.append((self.command, self.path))
                status, body, *delay = answer(self.command, self.path, len(fake.requests) - 1)
                if delay:
                    time.sleep(delay[0])
                raw = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            do_GET = do_POST = do_DELETE = handle_one  # noqa: N815

            def log_message(self, *args):
                pass

        self._serve(Handler)


def lease(name: str, worker: int, first: int, end: int, now_us: int) -> dict:
    return {"lease": name, "datacenter": 1, "worker": worker,
            "layout": {"time_bits": 41, "datacenter_bits": 5, "worker_bits": 5, "sequence_bits": 12, "time_unit_us": 1000, "name": "t"},
            "first_tick": first, "end_tick": end, "now_us": now_us, "renew_every_ms": 50, "ttl_ms": 1000}


class Fence(unittest.TestCase):
    def test_nothing_at_or_past_end_tick_then_a_new_lease(self):
        t0 = 1_000_000  # the server's tick at the first answer
        state = {"renew": "fail"}

        def answer(method, path, n):
            if method == "POST" and path == "/v1/leases":
                if n == 0:
                    return 200, lease("a" * 32, 3, t0, t0 + 200, t0 * 1000)
                if state["renew"] == "fail":
                    return 503, {"error": {"code": "unavailable", "message": "down"}}
                return 200, lease("b" * 32, 4, t0 + 200, t0 + 100000, (t0 + 300) * 1000)
            if method == "POST" and path.endswith("/renew"):
                if state["renew"] == "fail":
                    return 503, {"error": {"code": "unavailable", "message": "down"}}
                return 404, {"error": {"code": "not_found", "message": "lost"}}
            return 200, {"released": True}

        srv = LeaseServer(answer)
        try:
            with flakeid.Client(flakeid.Config(endpoints=[srv.url], backoff_min=0.01, backoff_max=0.05)) as c:
                g = c.local_generator("fence")
                ids = []
                while True:
                    try:
                        ids.append(g.next_id(timeout=0.3))
                    except flakeid.Unavailable as e:
                        self.assertIn("whole reservation", str(e))
                        break
                self.assertGreater(len(ids), 1000)
                ticks = {decode(i)[0] for i in ids}
                self.assertGreaterEqual(min(ticks), t0)
                self.assertLess(max(ticks), t0 + 200)
                self.assertEqual({decode(i)[1:3] for i in ids}, {(1, 3)})
                self.assertEqual(len(set(ids)), len(ids))
                # The server answers again, the lease is gone there: a new
                # one (worker 4), from its first tick on.
                state["renew"] = "lost"
                nxt = g.next_id(timeout=5)
                self.assertEqual(decode(nxt)[1:3], (1, 4))
                self.assertGreaterEqual(decode(nxt)[0], t0 + 200)
                g.close()
                self.assertIn(("DELETE", "/v1/leases/" + "b" * 32), srv.requests)
        finally:
            srv.stop()

    def test_an_answer_read_late_is_not_a_stale_clock(self):
        # The server reads its clock (now_us) when the request arrives; its
        # answer comes 1.5 s later, as to a process paused before it read
        # it. The lease's 1 s of ticks has run out by then: the generator
        # must issue nothing on it (its clock starts at the sending, not at
        # the answer's arrival), and takes a new lease.
        t0 = 1_000_000

        def answer(method, path, n):
            if method == "POST" and path == "/v1/leases":
                if n == 0:
                    return 200, lease("a" * 32, 3, t0, t0 + 1000, t0 * 1000), 1.5
                return 200, lease("b" * 32, 4, t0 + 3000, t0 + 100000, (t0 + 3000) * 1000)
            if method == "POST" and path.endswith("/renew"):
                return 404, {"error": {"code": "not_found", "message": "closed: not renewed within its TTL"}}
            return 200, {"released": True}

        srv = LeaseServer(answer)
        try:
            with flakeid.Client(flakeid.Config(endpoints=[srv.url], timeout=5, backoff_min=0.01, backoff_max=0.05)) as c:
                g = c.local_generator("late")
                first = g.next_id(timeout=5)
                self.assertEqual(decode(first)[1:3], (1, 4), "an ID on the lease whose reservation had run out")
                self.assertGreaterEqual(decode(first)[0], t0 + 3000)
        finally:
            srv.stop()

    def test_a_bad_lease_is_refused(self):
        bad = lease("a" * 32, 40, 1, 2, 1000)  # worker 40 in 5 worker bits

        srv = LeaseServer(lambda m, p, n: (200, bad if p == "/v1/leases" else {}))
        try:
            with flakeid.Client(flakeid.Config(endpoints=[srv.url])) as c:
                with self.assertRaises(flakeid.Unavailable) as cm:
                    c.local_generator()
                self.assertIn("outside the layout", str(cm.exception))
        finally:
            srv.stop()


if __name__ == "__main__":
    unittest.main()
