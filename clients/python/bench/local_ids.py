"""IDs per second from one thread: the local generator's next_id beside a
plain counter (itertools.count, bare and under a lock: the floor any Python
ID source pays), interleaved rounds in one run.

    python3 clients/python/bench/local_ids.py http://127.0.0.1:8080 [seconds per round] [rounds]
"""

import itertools
import os
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "src"))
import flakeid  # noqa: E402


def rate(f, seconds):
    n, end = 0, time.perf_counter() + seconds
    while time.perf_counter() < end:
        for _ in range(1000):
            f()
        n += 1000
    return n / seconds


def main():
    url = sys.argv[1]
    seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 3
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    count = itertools.count()
    lock = threading.Lock()

    def locked():
        with lock:
            return next(count)

    with flakeid.Client(flakeid.Config(endpoints=[url])) as c, c.local_generator("bench") as g:
        results = {"local_generator.next_id": [], "counter under a lock": [], "bare itertools.count": []}
        for _ in range(rounds):
            results["local_generator.next_id"].append(rate(g.next_id, seconds))
            results["counter under a lock"].append(rate(locked, seconds))
            results["bare itertools.count"].append(rate(count.__next__, seconds))
    for k, v in results.items():
        v.sort()
        print(f"{k:28s} median {v[len(v) // 2] / 1e6:.3f} M/s  (min {v[0] / 1e6:.3f}, max {v[-1] / 1e6:.3f})")
    med = {k: sorted(v)[len(v) // 2] for k, v in results.items()}
    print(f"ratio local / locked counter: {med['local_generator.next_id'] / med['counter under a lock']:.2f}")


if __name__ == "__main__":
    main()
