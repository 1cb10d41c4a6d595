#!/usr/bin/env bash
# Single IDs at saturation (closed loop): flakeid's HTTP path (Leaf's) beside
# a bare net/http handler with and without the per-request deadlines that
# flakeid's timeouts set, and its RESP INCR beside Redis's (issue 30;
# docs/BENCHMARKS.md, "Throughput at saturation"). flakeid runs as the
# deployment files run it (GODEBUG=$FLAKEID_GODEBUG, scripts/lib/bench.sh),
# and once more with Go's default monitor thread (flakeid-default-sysmon);
# the other Go servers run with the same GODEBUG as flakeid. Every server on one CPU, the load on the other, GOMAXPROCS=1
# for both; the cases interleaved per round. Beside requests per second, the
# IDs per CPU-second of each server's process (idload -server-pid): time that
# other work on the machine takes from the server's core does not count in
# it, so it compares the servers' costs when the machine is noisy.
#
# Then RESP INCR over the issue's grid, with redis-benchmark as the load
# (connections GRID_C × pipeline GRID_P): flakeid, Redis, and `idload
# resp-hello`, a Go RESP server that only counts (a goroutine per connection,
# as flakeid): the ceiling of a Go server here, so that the grid shows both
# flakeid / Redis and flakeid / that ceiling.
#
#   scripts/bench-saturation.sh                          # 6 rounds, ~11 min
#   ROUNDS=1 DUR=1s GRID_N=20000 OUT=/tmp/bs scripts/bench-saturation.sh   # smoke test
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-$ROOT/bench/results/saturation}
ROUNDS=${ROUNDS:-6}
DUR=${DUR:-5s}
CONNS=${CONNS:-8}
SERVER_CPU=${SERVER_CPU:-0}
LOAD_CPU=${LOAD_CPU:-1}
BASE_PORT=${BASE_PORT:-18501}
GRID_C=${GRID_C:-8 64}
GRID_P=${GRID_P:-1 16}
GRID_N=${GRID_N:-300000} # requests per run without pipelining; ×12 with it (~3 s each here)

command -v taskset >/dev/null || { echo "bench-saturation: no taskset (Debian: util-linux)" >&2; exit 1; }
for t in redis-server redis-benchmark; do
  command -v $t >/dev/null || { echo "bench-saturation: no $t (scripts/services.sh installs it)" >&2; exit 1; }
done
if [ "$(nproc)" -lt 2 ]; then echo "bench-saturation: needs two CPUs, one for the servers and one for the load" >&2; exit 1; fi

. "$ROOT/scripts/lib/bench.sh"
bench_begin bench-saturation

(cd "$ROOT" && go build -o "$WORK/flakeid" ./cmd/flakeid)
(cd "$ROOT/bench" && go build -o "$WORK/idload" ./cmd/idload)
mkdir -p "$OUT"
RES=$OUT/results.jsonl
: >"$RES"
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
  echo "go: $(go version)"
  echo "redis-server: $(redis-server --version | head -1)"
  echo "flakeid: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$ROOT" diff --quiet HEAD -- server cmd 2>/dev/null || echo ' (server/cmd modified)')"
  echo "servers on CPU $SERVER_CPU, load on CPU $LOAD_CPU, GOMAXPROCS=1, GODEBUG=$FLAKEID_GODEBUG (but flakeid-default-sysmon); rounds $ROUNDS, DUR $DUR, CONNS $CONNS, grid c $GRID_C × P $GRID_P, n $GRID_N"
} >"$OUT/machine.txt"

P=$BASE_PORT
declare -A PID # server name → process id (taskset and env exec the server)
srv() { # name port command…
  local name=$1 port=$2
  shift 2
  taskset -c "$SERVER_CPU" env GOMAXPROCS=1 "$@" >"$WORK/$name.log" 2>&1 &
  PIDS+=($!)
  PID[$name]=$!
}
# ports: P, P+1 the two flakeid (RESP on P+4, P+5), P+2 hello, P+3 hello -timeouts, P+6 Redis, P+7 resp-hello
G="env -u GOGC GODEBUG=$FLAKEID_GODEBUG"
srv flakeid $P $G "$WORK/flakeid" serve --listen "127.0.0.1:$P" --resp-listen "127.0.0.1:$((P + 4))" \
  --data-dir "$WORK/a" --log-level warn
srv flakeid-default-sysmon $((P + 1)) env -u GOGC -u GODEBUG "$WORK/flakeid" serve --listen "127.0.0.1:$((P + 1))" \
  --resp-listen "127.0.0.1:$((P + 5))" --data-dir "$WORK/b" --log-level warn
srv hello $((P + 2)) $G "$WORK/idload" hello -listen "127.0.0.1:$((P + 2))"
srv hello-timeouts $((P + 3)) $G "$WORK/idload" hello -timeouts -listen "127.0.0.1:$((P + 3))"
srv redis $((P + 6)) redis-server --bind 127.0.0.1 --port $((P + 6)) --save '' --appendonly no --dir "$WORK"
srv resp-hello $((P + 7)) $G "$WORK/idload" resp-hello -listen "127.0.0.1:$((P + 7))"
for port in $P $((P + 1)); do
  for _ in $(seq 1 150); do
    curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && break
    sleep 0.1
  done
  curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null || { cat "$WORK"/*.log >&2; exit 1; }
done

L() { # label server args…: also the server's CPU time in the window
  local label=$1 server=$2
  shift 2
  taskset -c "$LOAD_CPU" env GOMAXPROCS=1 "$WORK/idload" -label "$label" -round "$ROUND" -json "$RES" -d "$DUR" -warmup 1s \
    -c "$CONNS" -server-pid "${PID[$server]}" "$@"
}
for ROUND in $(seq 1 "$ROUNDS"); do
  L flakeid flakeid -mode http -url "http://127.0.0.1:$P/api/snowflake/get/x"
  L hello hello -mode http -url "http://127.0.0.1:$((P + 2))/"
  L hello-timeouts hello-timeouts -mode http -url "http://127.0.0.1:$((P + 3))/"
  L flakeid-default-sysmon flakeid-default-sysmon -mode http -url "http://127.0.0.1:$((P + 1))/api/snowflake/get/x"
  L flakeid-resp flakeid -mode redis-incr -redis "127.0.0.1:$((P + 4))" -key snowflake
  L redis-incr redis -mode redis-incr -redis "127.0.0.1:$((P + 6))" -key idload:incr
  L flakeid-resp-default-sysmon flakeid-default-sysmon -mode redis-incr -redis "127.0.0.1:$((P + 5))" -key snowflake
  for c in $GRID_C; do
    for p in $GRID_P; do
      n=$GRID_N
      [ "$p" = 1 ] || n=$((GRID_N * 12))
      for s in "flakeid $((P + 4)) snowflake" "redis $((P + 6)) idload:incr" "resp-hello $((P + 7)) k" \
        "flakeid-default-sysmon $((P + 5)) snowflake"; do
        set -- $s
        "$WORK/idload" redis-benchmark -label "grid-$1-c$c-P$p" -round "$ROUND" -json "$RES" -server-pid "${PID[$1]}" -- \
          taskset -c "$LOAD_CPU" redis-benchmark -h 127.0.0.1 -p "$2" -c "$c" -P "$p" -n "$n" --precision 3 INCR "$3"
      done
    done
  done
done
ratios=(flakeid/hello hello-timeouts/hello flakeid/hello-timeouts flakeid-default-sysmon/hello flakeid/flakeid-default-sysmon
  flakeid-resp/redis-incr flakeid-resp-default-sysmon/redis-incr flakeid-resp/flakeid-resp-default-sysmon)
for c in $GRID_C; do
  for p in $GRID_P; do
    ratios+=("grid-flakeid-c$c-P$p/grid-redis-c$c-P$p" "grid-resp-hello-c$c-P$p/grid-redis-c$c-P$p"
      "grid-flakeid-c$c-P$p/grid-resp-hello-c$c-P$p" "grid-flakeid-c$c-P$p/grid-flakeid-default-sysmon-c$c-P$p")
  done
done
"$WORK/idload" summary "${ratios[@]/#/-ratio=}" "${ratios[@]/#/-cpu-ratio=}" "$RES" >"$OUT/summary.md"
cat "$OUT/summary.md"
