#!/usr/bin/env bash
# Measures single-ID latency as clients see it, as recorded in "Tail latency
# at a fixed rate" of docs/BENCHMARKS.md (issue 30): a fixed offered load
# well below saturation (RATES, over CONNS connections), timed from each
# request's scheduled send (bench/cmd/idload -rate: wrk2's correction for
# coordinated omission), against flakeid over HTTP (Leaf's plain-text path
# and /v1/snowflake/next), the Redis protocol (INCR snowflake) and Connect
# and gRPC (NextSnowflake count=1), and, the same way in the same round, the
# floor of this machine: Redis INCR and a bare net/http handler (idload
# hello). Then the same servers at saturation (closed loop, c = 8 and 64):
# flakeid's single-ID HTTP path against the bare handler, its INCR against
# Redis's.
#
# Every server runs on CPU SERVER_CPU (taskset) with GOMAXPROCS=1 — Redis is
# single-threaded — flakeid as the deployment files run it and the bare
# handler the same way (GODEBUG=$FLAKEID_GODEBUG, scripts/lib/bench.sh: Go's
# monitor thread kept from its deep sleep), and every load generator on CPU LOAD_CPU with
# GOMAXPROCS=1, so that the figures are not the two fighting for a core. The
# load generator's own lateness (how late its sleeps woke) is recorded beside
# every fixed-rate figure, which includes it.
#
# Usage: scripts/bench-tail.sh                 (3 rounds: ~12 min)
#        ROUNDS=1 DUR=2s RATES=1000 scripts/bench-tail.sh   (smoke test, ~1 min)
# Environment:
#   OUT         raw outputs (default bench/results/tail): results.jsonl (one
#               JSON line per run), summary.md, machine.txt, loadavg.txt
#   ROUNDS      rounds; every case runs once per round, interleaved (default 3)
#   DUR         measured window of each run (default 10s), after WARMUP (1s)
#   RATES       offered loads, requests/s over all connections (default "5000 20000")
#   CONNS       connections of the fixed-rate runs (default 8)
#   SERVER_CPU, LOAD_CPU  the two CPUs (default 0 and 1)
#   PORT, RESP_PORT, REDIS_PORT, HELLO_PORT  loopback ports of flakeid (HTTP,
#               RESP), the private redis-server and idload hello (default
#               18091, 16391, 16392, 18092)
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-$ROOT/bench/results/tail}
ROUNDS=${ROUNDS:-3}
DUR=${DUR:-10s}
WARMUP=${WARMUP:-1s}
RATES=${RATES:-5000 20000}
CONNS=${CONNS:-8}
SERVER_CPU=${SERVER_CPU:-0}
LOAD_CPU=${LOAD_CPU:-1}
PORT=${PORT:-18091}
RESP_PORT=${RESP_PORT:-16391}
REDIS_PORT=${REDIS_PORT:-16392}
HELLO_PORT=${HELLO_PORT:-18092}

log() { printf '%s bench-tail: %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
up() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

command -v taskset >/dev/null || { echo "bench-tail: no taskset (Debian: util-linux)" >&2; exit 1; }
command -v redis-server >/dev/null || { echo "bench-tail: no redis-server (scripts/services.sh installs it)" >&2; exit 1; }
if [ "$(nproc)" -lt 2 ]; then echo "bench-tail: needs two CPUs, one for the servers and one for the load" >&2; exit 1; fi
for p in "$PORT" "$RESP_PORT" "$REDIS_PORT" "$HELLO_PORT"; do
  if up "$p"; then echo "bench-tail: port $p is taken; set PORT, RESP_PORT, REDIS_PORT or HELLO_PORT" >&2; exit 1; fi
done

. "$ROOT/scripts/lib/bench.sh"
bench_begin bench-tail

log "building into $WORK"
(cd "$ROOT" && go build -o "$WORK/flakeid" ./cmd/flakeid)
(cd "$ROOT/bench" && go build -o "$WORK/idload" ./cmd/idload)
IDLOAD=$WORK/idload

mkdir -p "$OUT"
RES=$OUT/results.jsonl
: >"$RES"
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
  echo "nproc: $(nproc)"
  echo "kernel: $(uname -r)"
  echo "go: $(go version)"
  echo "flakeid: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$ROOT" diff --quiet HEAD -- server snowflake node cmd 2>/dev/null || echo ' (server/snowflake/node/cmd modified)')"
  echo "redis-server: $(redis-server --version | head -1)"
  echo "servers on CPU $SERVER_CPU, load on CPU $LOAD_CPU, GOMAXPROCS=1 for both; Go servers with GODEBUG=$FLAKEID_GODEBUG"
  echo "rounds: $ROUNDS, DUR $DUR, WARMUP $WARMUP, RATES $RATES, CONNS $CONNS"
} >"$OUT/machine.txt"
cat "$OUT/machine.txt" >&2
(while :; do echo "$(date -u +%H:%M:%S) $(cut -d' ' -f1-3 /proc/loadavg)"; sleep 5; done) >"$OUT/loadavg.txt" &
PIDS+=($!)

# --- servers, all on SERVER_CPU ---------------------------------------------------
taskset -c "$SERVER_CPU" env GOMAXPROCS=1 GODEBUG="$FLAKEID_GODEBUG" "$WORK/flakeid" serve --listen "127.0.0.1:$PORT" \
  --resp-listen "127.0.0.1:$RESP_PORT" --data-dir "$WORK/data" --log-level warn >"$WORK/flakeid.log" 2>&1 &
PIDS+=($!)
taskset -c "$SERVER_CPU" redis-server --bind 127.0.0.1 --port "$REDIS_PORT" --save '' --appendonly no \
  --dir "$WORK" --logfile "$WORK/redis.log" &
PIDS+=($!)
taskset -c "$SERVER_CPU" env GOMAXPROCS=1 GODEBUG="$FLAKEID_GODEBUG" "$IDLOAD" hello -listen "127.0.0.1:$HELLO_PORT" &
PIDS+=($!)
for _ in $(seq 1 100); do
  if curl -fsS "http://127.0.0.1:$PORT/readyz" >/dev/null 2>&1 && up "$RESP_PORT" && up "$REDIS_PORT" && up "$HELLO_PORT"; then break; fi
  sleep 0.1
done
curl -fsS "http://127.0.0.1:$PORT/readyz" >/dev/null || { cat "$WORK/flakeid.log" >&2; exit 1; }
B=http://127.0.0.1:$PORT
H=http://127.0.0.1:$HELLO_PORT/

# --- runs, all on LOAD_CPU ----------------------------------------------------------
ROUND=0
L() { # label args…  — one idload run on the load CPU
  local label=$1
  shift
  taskset -c "$LOAD_CPU" env GOMAXPROCS=1 "$IDLOAD" -label "$label" -round "$ROUND" -json "$RES" -d "$DUR" -warmup "$WARMUP" "$@"
}
cases() { # suffix args… — every target once, with the same load arguments
  local s=$1
  shift
  L "flakeid-http-leaf$s" -mode http -url "$B/api/snowflake/get/x" "$@"
  L "hello-http$s" -mode http -url "$H" "$@"
  L "flakeid-http-v1$s" -mode http -url "$B/v1/snowflake/next" "$@"
  L "flakeid-resp$s" -mode redis-incr -redis "127.0.0.1:$RESP_PORT" -key snowflake "$@"
  L "redis-incr$s" -mode redis-incr -redis "127.0.0.1:$REDIS_PORT" -key idload:incr "$@"
  L "flakeid-connect$s" -mode connect-unary -base "$B" -protocol connect -count 1 "$@"
  L "flakeid-grpc$s" -mode connect-unary -base "$B" -protocol grpc -count 1 "$@"
}
for ROUND in $(seq 1 "$ROUNDS"); do
  log "round $ROUND of $ROUNDS"
  for r in $RATES; do
    cases "-$r" -c "$CONNS" -rate "$r"
  done
  for c in 8 64; do
    cases "-max-c$c" -c "$c"
  done
done

ratios=() tails=()
for r in $RATES; do
  tails+=(-p999-ratio "flakeid-http-leaf-$r/hello-http-$r" -p999-ratio "flakeid-http-v1-$r/hello-http-$r"
    -p999-ratio "flakeid-resp-$r/redis-incr-$r" -p999-ratio "flakeid-connect-$r/hello-http-$r"
    -p999-ratio "flakeid-http-leaf-$r/redis-incr-$r" -p999-ratio "flakeid-connect-$r/redis-incr-$r")
done
for c in 8 64; do
  ratios+=(-ratio "flakeid-http-leaf-max-c$c/hello-http-max-c$c" -ratio "flakeid-http-v1-max-c$c/hello-http-max-c$c"
    -ratio "flakeid-resp-max-c$c/redis-incr-max-c$c")
done
"$IDLOAD" summary "${ratios[@]}" "${tails[@]}" "$RES" >"$OUT/summary.md"
cat "$OUT/summary.md"
