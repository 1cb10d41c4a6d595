"""The driver `flakeid verify --languages python` runs (see
cmd/flakeid/internal/verify/langs.go); not part of the package.

  driver.py caller ATTEMPT_MS CALL_MS BUFFER ENDPOINT...
      the client with a Snowflake buffer of BUFFER IDs; each line "SEQ" on
      stdin is one next_id call with a CALL_MS timeout ("SEQ MS": with an MS
      one), answered on stdout
      as "SEQ ID" or "SEQ ! CLASS MESSAGE" (CLASS: timeout, unavailable,
      other), four calls at most in flight.
  driver.py local OWNER RATE ENDPOINT...
      a local generator leased as OWNER making RATE IDs a second, a batch
      every 10 ms printed as "UNIX_NS ID ID ..." (the wall clock before the
      batch), or "! UNIX_NS MESSAGE" for a batch that failed.
"""

import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import flakeid


def caller(attempt_ms: str, call_ms: str, buffer: str, *endpoints: str) -> None:
    cfg = flakeid.Config(endpoints=list(endpoints), timeout=int(attempt_ms) / 1000,
                         buffer=flakeid.BufferConfig(snowflake=int(buffer)))
    client = flakeid.Client(cfg)
    timeout = int(call_ms) / 1000
    out = threading.Lock()

    def call(seq: str, ms: str) -> None:
        try:
            line = f"{seq} {client.next_id(timeout=int(ms) / 1000 if ms else timeout)}"
        except flakeid.Unavailable as e:
            cls = "timeout" if "timeout" in str(e) or "timed out" in str(e) else "unavailable"
            line = f"{seq} ! {cls} {e}".replace("\n", " ")
        except Exception as e:  # noqa: BLE001 - every failure is reported, none ends the driver
            line = f"{seq} ! other {type(e).__name__}: {e}".replace("\n", " ")
        with out:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()

    with ThreadPoolExecutor(4) as pool:
        for line in sys.stdin:
            if line.strip():
                seq, _, ms = line.strip().partition(" ")
                pool.submit(call, seq, ms)
    client.close()


def local(owner: str, rate: str, *endpoints: str) -> None:
    client = flakeid.Client(flakeid.Config(endpoints=list(endpoints), timeout=5))
    while True:  # every worker id may be held for a while: the driver waits, as a service would
        try:
            gen = client.local_generator(owner, timeout=60)
            break
        except flakeid.Unavailable as e:
            msg = str(e).replace("\n", " ")
            sys.stdout.write(f"! {time.time_ns()} {msg}\n")
            sys.stdout.flush()
            time.sleep(0.5)
    per_batch = max(1, int(rate) // 100)
    next_at = time.monotonic()
    while True:
        ts = time.time_ns()
        ids: list[str] = []
        failed = ""
        try:
            for _ in range(per_batch):
                ids.append(str(gen.next_id(timeout=1)))
        except flakeid.FlakeidError as e:
            failed = str(e).replace("\n", " ")
        if ids:
            sys.stdout.write(f"{ts} {' '.join(ids)}\n")
        if failed:
            sys.stdout.write(f"! {ts} {failed}\n")
        sys.stdout.flush()
        next_at += 0.01
        time.sleep(max(0.0, next_at - time.monotonic()))
        next_at = max(next_at, time.monotonic() - 0.01)


if __name__ == "__main__":
    {"caller": caller, "local": local}[sys.argv[1]](*sys.argv[2:])
