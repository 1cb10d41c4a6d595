#!/usr/bin/env bash
# Measures the flakeid service on this machine, as recorded in the "Service"
# section of docs/BENCHMARKS.md: single-ID HTTP requests (wrk, and the Go load
# tool bench/cmd/idload) against Redis INCR and PostgreSQL nextval measured by
# the same tool in the same round, INCR over the Redis protocol (flakeid's
# RESP listener against Redis, both through redis-benchmark, with and without
# pipelining), Connect/gRPC unary and streaming batches, segment batches, and
# the Go client's local buffer (bench/cmd/idclient).
#
# Everything runs on loopback: two flakeid servers it starts itself (the
# default 41/5/5/12 layout, and a 41/0/0/22 layout whose sequence does not
# bind), Redis at 127.0.0.1:6379 and PostgreSQL at 127.0.0.1:5432 (trust auth,
# database "test"; scripts/services.sh starts them). The servers are stopped
# on exit. Server and load generator share the machine's cores.
#
# Usage: scripts/bench-service.sh            (3 rounds, 10 s windows: ~40 min, more while it waits for QUIET)
#        ROUNDS=1 DUR=1s BATCH_DUR=1s QUIET=99 scripts/bench-service.sh   (smoke test)
# Environment:
#   OUT        where the raw outputs go (default bench/results/service)
#   ROUNDS     rounds; every case runs once per round, interleaved (default 3)
#   DUR        window of the single-ID runs (default 10s)
#   BATCH_DUR  window of the batch, stream, segment and client runs (default 10s)
#   WARMUP     unmeasured warm-up before each idload window (default 1s)
#   RESP_DUR   about how long each redis-benchmark run of the RESP part lasts
#              (default 6s, or DUR when that is shorter); see below
#   QUIET      before each round wait (at most QUIET_WAIT s) for the 1-minute
#              load average to fall below this (default 1.5)
#   QUIET_WAIT default 300
#   PORT, PORT_WIDE  the two servers' ports (default 18081, 18082)
#   PORT_P1    the default server again with GOMAXPROCS=1 (default 18083)
#   PORT_HELLO, PORT_HELLO_P1  the bare net/http reference (idload hello)
#              with GOMAXPROCS=2 and 1 (default 18088, 18089)
#   RESP_PORT, RESP_PORT_WIDE, RESP_PORT_P1  the RESP listeners (--resp-listen)
#              of the three servers (default 16381, 16382, 16383)
#   RESP_HELLO_PORTS  the minimal Go RESP servers (idload resp-hello): a
#              goroutine per connection with GOMAXPROCS=1, the same with
#              GOMAXPROCS=2, an epoll event loop with GOMAXPROCS=1
#              (default "16384 16385 16386")
#   PARTS      which parts run, comma-separated (default single,resp,batch:
#              all); e.g. PARTS=resp for the RESP part alone
#
# The RESP part: redis-benchmark (Redis's own C client) runs INCR against
# Redis and against flakeid's RESP listener, back to back in each round, at
# -c 8 and 64, -P 1 and 16:
#   -t incr             INCR counter:__rand_int__ (one key: no -r); on flakeid
#                       a segment tag, auto-created (--auto-create-tags), on
#                       the default server and on the GOMAXPROCS=1 one
#   INCR snowflake      a Snowflake ID, on the wide server (its sequence does
#                       not bind) and on the GOMAXPROCS=1 one (default layout)
# redis-benchmark stops after -n requests, not after a time: -n is the rate
# measured in the previous round (in round 1, in a warm-up run of WARMUP cut
# off by timeout) times RESP_DUR. It runs without --csv, with --precision 3:
# its full output has the latency distribution, from which `idload
# redis-benchmark` takes p99.9 (--csv has p50, p95, p99 and max only).
# flakeid's RESP error counter and IDs issued are read from /metrics around
# every flakeid run; redis-benchmark itself stops at an error reply.
# The same runs go to idload resp-hello, the least a Go RESP server does (no
# limits, auth, metrics or IDs: a counter): its ratio to Redis is the
# ceiling this machine gives a Go server, with a goroutine per connection
# (the net package's model, flakeid's) and with an epoll event loop.
# wrk runs with scripts/lib/wrk-p999.lua, which prints its p99.9.
#
# Why GOMAXPROCS=1 too: on this 2-core machine the load generator needs a
# core of its own. Redis is single-threaded, so it leaves one to the load
# tool; a Go server with GOMAXPROCS=2 competes with the load tool for both
# cores, and the p99 shows the OS scheduler's time slices (milliseconds).
# Both settings are measured and reported.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-$ROOT/bench/results/service}
ROUNDS=${ROUNDS:-3}
DUR=${DUR:-10s}
BATCH_DUR=${BATCH_DUR:-10s}
WARMUP=${WARMUP:-1s}
QUIET=${QUIET:-1.5}
QUIET_WAIT=${QUIET_WAIT:-300}
PORT=${PORT:-18081}
PORT_WIDE=${PORT_WIDE:-18082}
PORT_P1=${PORT_P1:-18083}
PORT_HELLO=${PORT_HELLO:-18088}
PORT_HELLO_P1=${PORT_HELLO_P1:-18089}
RESP_PORT=${RESP_PORT:-16381}
RESP_PORT_WIDE=${RESP_PORT_WIDE:-16382}
RESP_PORT_P1=${RESP_PORT_P1:-16383}
RESP_HELLO_PORTS=${RESP_HELLO_PORTS:-16384 16385 16386}
read -r RH_G1 RH_G2 RH_E1 <<<"$RESP_HELLO_PORTS"
PARTS=${PARTS:-single,resp,batch}
part() { case ",$PARTS," in *",$1,"*) return 0 ;; esac; return 1; }
secs() { # 10s, 1.5s, 500ms, 2m → seconds
  awk -v d="$1" 'BEGIN { if (d ~ /ms$/) print d / 1000; else if (d ~ /m$/) print d * 60; else print d + 0 }'
}
RESP_DUR=${RESP_DUR:-$(awk -v a="$(secs "$DUR")" 'BEGIN { print (a < 6 ? a : 6) "s" }')}
REDIS=127.0.0.1:6379
PG="postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

log() { printf '%s bench-service: %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
up() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

# --- prerequisites -----------------------------------------------------------
command -v redis-benchmark >/dev/null 2>&1 || { echo "bench-service: no redis-benchmark (Debian: redis-tools)" >&2; exit 1; }
if ! command -v wrk >/dev/null 2>&1; then
  log "installing wrk"
  as_root apt-get update -qq >/dev/null
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >/dev/null
fi
up 6379 || { echo "bench-service: no Redis on $REDIS (run scripts/services.sh)" >&2; exit 1; }
up 5432 || { echo "bench-service: no PostgreSQL on 127.0.0.1:5432 (run scripts/services.sh)" >&2; exit 1; }
for p in "$PORT" "$PORT_WIDE" "$PORT_P1" "$PORT_HELLO" "$PORT_HELLO_P1" "$RESP_PORT" "$RESP_PORT_WIDE" "$RESP_PORT_P1" $RESP_HELLO_PORTS; do
  if up "$p"; then echo "bench-service: port $p is taken; set PORT, PORT_WIDE, PORT_P1, PORT_HELLO, PORT_HELLO_P1, RESP_PORT, RESP_PORT_WIDE, RESP_PORT_P1 or RESP_HELLO_PORTS" >&2; exit 1; fi
done

. "$ROOT/scripts/lib/bench.sh"
bench_begin bench-service

log "building into $WORK"
(cd "$ROOT" && go build -o "$WORK/flakeid" ./cmd/flakeid)
(cd "$ROOT/bench" && go build -o "$WORK/idload" ./cmd/idload && go build -o "$WORK/idclient" ./cmd/idclient)
IDLOAD=$WORK/idload
IDCLIENT=$WORK/idclient

mkdir -p "$OUT/wrk" "$OUT/redis-benchmark"
RES=$OUT/results.jsonl
: >"$RES"
rm -f "$OUT"/wrk/*.txt "$OUT"/redis-benchmark/*.txt

# --- machine -----------------------------------------------------------------
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
  echo "nproc: $(nproc)"
  echo "memory: $(free -g | awk '/^Mem:/ {print $2 " GiB"}')"
  echo "kernel: $(uname -r)"
  echo "go: $(go version)"
  echo "flakeid: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$ROOT" diff --quiet HEAD -- server snowflake node cmd 2>/dev/null || echo ' (server/snowflake/node/cmd modified)')"
  echo "wrk: $(wrk --version 2>&1 | head -1 || true)"
  echo "redis-benchmark: $(redis-benchmark --version 2>&1 | head -1)"
  echo "redis: $(redis-cli -h 127.0.0.1 -p 6379 INFO server 2>/dev/null | tr -d '\r' | awk -F: '/^redis_version/ {print $2}')"
  echo "postgres: $(psql "$PG" -Atc 'SHOW server_version' 2>/dev/null)"
  echo "rounds: $ROUNDS, DUR $DUR, BATCH_DUR $BATCH_DUR, RESP_DUR $RESP_DUR, WARMUP $WARMUP, QUIET $QUIET"
} >"$OUT/machine.txt"
cat "$OUT/machine.txt" >&2

# Load average every 5 s, for the record of how noisy the machine was.
(while :; do echo "$(date -u +%H:%M:%S) $(cut -d' ' -f1-3 /proc/loadavg)"; sleep 5; done) >"$OUT/loadavg.txt" &
PIDS+=($!)

# --- servers -----------------------------------------------------------------
start_server() { # port resp-port name flags…   (GOMAXPROCS from the environment; GODEBUG as deployed)
  local port=$1 rport=$2 name=$3
  shift 3
  GODEBUG="$FLAKEID_GODEBUG" "$WORK/flakeid" serve --listen "127.0.0.1:$port" --resp-listen "127.0.0.1:$rport" --auto-create-tags \
    --data-dir "$WORK/$name" --log-level warn "$@" >"$WORK/$name.log" 2>&1 &
  PIDS+=($!)
  for _ in $(seq 1 100); do
    if curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 &&
      [ "$(redis-cli -h 127.0.0.1 -p "$rport" PING 2>/dev/null)" = PONG ]; then return 0; fi
    sleep 0.1
  done
  echo "bench-service: server $name did not become ready (HTTP $port, RESP $rport)" >&2
  cat "$WORK/$name.log" >&2
  exit 1
}
start_server "$PORT" "$RESP_PORT" default
start_server "$PORT_WIDE" "$RESP_PORT_WIDE" wide --sequence-bits 22 --datacenter-bits 0 --worker-bits 0
GOMAXPROCS=1 start_server "$PORT_P1" "$RESP_PORT_P1" p1
GOMAXPROCS=2 "$IDLOAD" hello -listen "127.0.0.1:$PORT_HELLO" &
PIDS+=($!)
GOMAXPROCS=1 "$IDLOAD" hello -listen "127.0.0.1:$PORT_HELLO_P1" &
PIDS+=($!)
GOMAXPROCS=1 "$IDLOAD" resp-hello -listen "127.0.0.1:$RH_G1" -loop goroutines &
PIDS+=($!)
GOMAXPROCS=2 "$IDLOAD" resp-hello -listen "127.0.0.1:$RH_G2" -loop goroutines &
PIDS+=($!)
GOMAXPROCS=1 "$IDLOAD" resp-hello -listen "127.0.0.1:$RH_E1" -loop epoll &
PIDS+=($!)
sleep 0.5
B=http://127.0.0.1:$PORT
P1=http://127.0.0.1:$PORT_P1
W=http://127.0.0.1:$PORT_WIDE
curl -fsS "$B/v1/status" | head -c 300 >&2; echo >&2
curl -fsS "$W/v1/status" | head -c 300 >&2; echo >&2
curl -fsS -X POST "$B/v1/segment/tags" -H 'Content-Type: application/json' \
  -d '{"tag":"bench","step":1000000}' >/dev/null

# --- runners -----------------------------------------------------------------
ROUND=0
L() { # label dur mode args…  — one idload run
  local label=$1 dur=$2
  shift 2
  "$IDLOAD" -label "$label" -round "$ROUND" -json "$RES" -d "$dur" -warmup "$WARMUP" "$@"
  sleep 1
}
WRK() { # label threads conns url
  local label=$1 t=$2 c=$3 url=$4 f
  f=$OUT/wrk/$label-r$ROUND.txt
  wrk -t"$t" -c"$c" -d"$DUR" --latency -s "$ROOT/scripts/lib/wrk-p999.lua" "$url" >"$f"
  "$IDLOAD" wrk -label "$label" -round "$ROUND" -json "$RES" <"$f"
  sleep 1
}
RB() { # label conns  — redis-benchmark INCR, about DUR seconds at ~90 k/s
  local label=$1 c=$2 f
  f=$OUT/redis-benchmark/$label-r$ROUND.txt
  redis-benchmark -h 127.0.0.1 -p 6379 -c "$c" -n "$(awk -v s="$(secs "$DUR")" 'BEGIN { printf "%d", s * 90000 }')" \
    -t incr --precision 3 >"$f" 2>/dev/null
  "$IDLOAD" redis-benchmark -label "$label" -round "$ROUND" -json "$RES" -c "$c" <"$f"
  sleep 1
}
# The RESP part. Rates of the previous round, per label, size -n.
declare -A RATE=()
RESP_FAILED=0
metric_sum() { # http-port regexp  — the sum of the /metrics samples whose series matches
  curl -fsS "http://127.0.0.1:$1/metrics" 2>/dev/null |
    awk -v re="$2" '$1 ~ re { s += $NF } END { printf "%.0f", s }'
}
RESPB() { # label resp-port http-port(flakeid, or -) conns pipeline command…
  local label=$1 rport=$2 hport=$3 c=$4 pipe=$5 f n rate e0=0 e1=0 i0=0 i1=0 errs=0 issued=""
  shift 5
  f=$OUT/redis-benchmark/$label-r$ROUND.txt
  rate=${RATE[$label]:-}
  if [ -z "$rate" ]; then
    # No rate yet: a warm-up run, cut off after WARMUP; its rate sizes -n.
    rate=$(timeout -k 2 -s INT "$WARMUP" redis-benchmark -h 127.0.0.1 -p "$rport" -c "$c" -P "$pipe" -n 2000000000 "$@" 2>/dev/null |
      tr '\r' '\n' | sed -n 's/.*rps=[0-9.]* (overall: \([0-9.]*\)).*/\1/p' | tail -1 || true)
    rate=${rate:-0}
    sleep 0.5
  fi
  n=$(awk -v r="$rate" -v s="$(secs "$RESP_DUR")" -v m=$((c * pipe * 100)) 'BEGIN { n = int(r * s); printf "%d", (n > m ? n : m) }')
  if [ "$hport" != - ]; then
    e0=$(metric_sum "$hport" '^flakeid_resp_commands_total[{].*result="error"')
    i0=$(metric_sum "$hport" '^flakeid_ids_issued_total')
  fi
  # timeout: redis-benchmark waits forever on a server that stops answering.
  if ! timeout "$(awk -v s="$(secs "$RESP_DUR")" 'BEGIN { printf "%d", s * 6 + 30 }')" \
    redis-benchmark -h 127.0.0.1 -p "$rport" -c "$c" -P "$pipe" -n "$n" --precision 3 "$@" >"$f" 2>"$f.err"; then
    RESP_FAILED=$((RESP_FAILED + 1))
    log "FAILED: $label (redis-benchmark -p $rport -c $c -P $pipe -n $n $*): $(head -c 300 "$f.err" | tr '\n' ' ')"
    sleep 0.5
    return 0
  fi
  if [ "$hport" != - ]; then
    e1=$(metric_sum "$hport" '^flakeid_resp_commands_total[{].*result="error"')
    i1=$(metric_sum "$hport" '^flakeid_ids_issued_total')
    errs=$((e1 - e0))
    issued="; IDs issued $((i1 - i0)) for $n requests"
  fi
  if ! "$IDLOAD" redis-benchmark -label "$label" -round "$ROUND" -json "$RES" -c "$c" -errors "$errs" \
    -target "127.0.0.1:$rport $*" -note "-P $pipe -n $n$issued" <"$f"; then
    RESP_FAILED=$((RESP_FAILED + 1))
    log "FAILED: $label: cannot read $f"
  fi
  RATE[$label]=$(tr '\r' '\n' <"$f" | awk '/throughput summary:/ { print $3 }')
  rm -f "$f.err"
  sleep 0.5
}
CL() { # label endpoint
  "$IDCLIENT" -label "$1" -round "$ROUND" -json "$RES" -endpoint "$2" -buffer 100000 -g 1 -d "$BATCH_DUR" -warmup "$WARMUP"
  sleep 1
}
wait_quiet() {
  local waited=0 l
  while :; do
    l=$(cut -d' ' -f1 /proc/loadavg)
    if awk -v l="$l" -v q="$QUIET" 'BEGIN { exit !(l < q) }'; then break; fi
    if [ "$waited" -ge "$QUIET_WAIT" ]; then
      log "load average still $l after ${waited}s; going on"
      return
    fi
    sleep 5
    waited=$((waited + 5))
  done
  log "load average $l"
}

# --- rounds ------------------------------------------------------------------
for ROUND in $(seq 1 "$ROUNDS"); do
  if part single; then
  wait_quiet
  log "round $ROUND: single IDs"
  for c in 8 64; do
    # The same Go tool against flakeid, Redis and PostgreSQL, back to back.
    L "idload-leaf-c$c" "$DUR" -mode http -url "$B/api/snowflake/get/x" -c "$c"
    L "redis-incr-c$c" "$DUR" -mode redis-incr -redis "$REDIS" -c "$c"
    L "pg-nextval-c$c" "$DUR" -mode pg-nextval -pg "$PG" -c "$c"
    L "idload-v1-c$c" "$DUR" -mode http -url "$B/v1/snowflake/next" -c "$c"
  done
  L "idload-leaf-nethttp-c8" "$DUR" -mode http -client nethttp -url "$B/api/snowflake/get/x" -c 8
  for c in 8 64; do
    for t in 1 2; do
      WRK "wrk-leaf-t$t-c$c" "$t" "$c" "$B/api/snowflake/get/x"
      WRK "wrk-v1-t$t-c$c" "$t" "$c" "$B/v1/snowflake/next"
    done
    # One core for the server (GOMAXPROCS=1), one for wrk, as with Redis;
    # the bare net/http reference in both settings; Redis's own C client.
    WRK "wrk-leaf-p1-t1-c$c" 1 "$c" "$P1/api/snowflake/get/x"
    WRK "wrk-v1-p1-t1-c$c" 1 "$c" "$P1/v1/snowflake/next"
    WRK "wrk-hello-p1-t1-c$c" 1 "$c" "http://127.0.0.1:$PORT_HELLO_P1/"
    WRK "wrk-hello-t1-c$c" 1 "$c" "http://127.0.0.1:$PORT_HELLO/"
    RB "redis-benchmark-c$c" "$c"
    L "idload-leaf-p1-c$c" "$DUR" -mode http -url "$P1/api/snowflake/get/x" -c "$c"
  done
  L "connect-unary-1-c8" "$DUR" -mode connect-unary -base "$B" -protocol connect -count 1 -c 8
  L "grpc-unary-1-c8" "$DUR" -mode connect-unary -base "$B" -protocol grpc -count 1 -c 8
  fi

  if part resp; then
  wait_quiet
  log "round $ROUND: RESP (redis-benchmark)"
  for c in 8 64; do
    for pipe in 1 16; do
      s=c$c-pipe$pipe
      # Redis and flakeid back to back: INCR counter:__rand_int__ (a segment
      # tag on flakeid), then INCR snowflake.
      RESPB "redis-rb-incr-$s" 6379 - "$c" "$pipe" -t incr
      RESPB "resp-seg-$s" "$RESP_PORT" "$PORT" "$c" "$pipe" -t incr
      RESPB "resp-seg-p1-$s" "$RESP_PORT_P1" "$PORT_P1" "$c" "$pipe" -t incr
      RESPB "redis-rb-snowflake-$s" 6379 - "$c" "$pipe" INCR snowflake
      RESPB "resp-wide-$s" "$RESP_PORT_WIDE" "$PORT_WIDE" "$c" "$pipe" INCR snowflake
      RESPB "resp-sf-p1-$s" "$RESP_PORT_P1" "$PORT_P1" "$c" "$pipe" INCR snowflake
      # The ceiling of a Go RESP server here (idload resp-hello).
      RESPB "resp-hello-g1-$s" "$RH_G1" - "$c" "$pipe" -t incr
      RESPB "resp-hello-g2-$s" "$RH_G2" - "$c" "$pipe" -t incr
      RESPB "resp-hello-epoll1-$s" "$RH_E1" - "$c" "$pipe" -t incr
    done
  done
  fi

  if part batch; then
  wait_quiet
  log "round $ROUND: batches"
  for layout in default wide; do
    if [ "$layout" = default ]; then U=$B; else U=$W; fi
    L "$layout-connect-unary-100k" "$BATCH_DUR" -mode connect-unary -base "$U" -protocol connect -count 100000 -c 2
    L "$layout-grpc-unary-100k" "$BATCH_DUR" -mode connect-unary -base "$U" -protocol grpc -count 100000 -c 2
    L "$layout-grpc-stream-b4096" "$BATCH_DUR" -mode connect-stream -base "$U" -protocol grpc -count 0 -c 2
    L "$layout-grpc-stream-b100k" "$BATCH_DUR" -mode connect-stream -base "$U" -protocol grpc -count 0 -batch 100000 -c 2
    L "$layout-http-ranges-100k" "$BATCH_DUR" -mode http -url "$U/v1/snowflake/next?count=100000&format=ranges" -ids ranges -c 2
    L "$layout-http-text-100k" "$BATCH_DUR" -mode http -url "$U/v1/snowflake/next?count=100000" -accept text/plain -ids lines -c 2
  done
  L "segment-http-ranges-100k" "$BATCH_DUR" -mode http -url "$B/v1/segment/bench/next?count=100000&format=ranges" -ids ranges -c 2
  L "segment-grpc-unary-100k" "$BATCH_DUR" -mode connect-unary -base "$B" -protocol grpc -tag bench -count 100000 -c 2
  L "segment-http-text-100k" "$BATCH_DUR" -mode http -url "$B/v1/segment/bench/next?count=100000" -accept text/plain -ids lines -c 2

  log "round $ROUND: Go client buffer"
  CL "client-default" "$B"
  CL "client-wide" "$W"
  fi
done

curl -fsS "$B/v1/status" >"$OUT/status-default.json" || true
curl -fsS "$W/v1/status" >"$OUT/status-wide.json" || true

# --- summary -----------------------------------------------------------------
ratios=()
for c in 8 64; do
  ratios+=(-ratio "idload-leaf-c$c/redis-incr-c$c" -ratio "idload-leaf-c$c/pg-nextval-c$c"
    -ratio "idload-v1-c$c/redis-incr-c$c" -ratio "idload-v1-c$c/pg-nextval-c$c"
    -ratio "redis-incr-c$c/pg-nextval-c$c"
    -ratio "wrk-leaf-t1-c$c/redis-incr-c$c" -ratio "wrk-leaf-t2-c$c/redis-incr-c$c"
    -ratio "wrk-leaf-p1-t1-c$c/redis-benchmark-c$c" -ratio "wrk-v1-p1-t1-c$c/redis-benchmark-c$c"
    -ratio "wrk-leaf-t1-c$c/redis-benchmark-c$c" -ratio "wrk-hello-p1-t1-c$c/redis-benchmark-c$c"
    -ratio "wrk-leaf-p1-t1-c$c/wrk-hello-p1-t1-c$c" -ratio "wrk-leaf-t1-c$c/wrk-hello-t1-c$c"
    -ratio "idload-leaf-p1-c$c/redis-incr-c$c")
done
for c in 8 64; do
  for pipe in 1 16; do
    s=c$c-pipe$pipe
    ratios+=(-ratio "resp-seg-$s/redis-rb-incr-$s" -ratio "resp-seg-p1-$s/redis-rb-incr-$s"
      -ratio "resp-wide-$s/redis-rb-snowflake-$s" -ratio "resp-sf-p1-$s/redis-rb-snowflake-$s"
      -ratio "resp-hello-g1-$s/redis-rb-incr-$s" -ratio "resp-hello-g2-$s/redis-rb-incr-$s"
      -ratio "resp-hello-epoll1-$s/redis-rb-incr-$s"
      -ratio "resp-seg-p1-$s/resp-hello-g1-$s" -ratio "resp-seg-$s/resp-hello-g2-$s")
  done
done
ratios+=(-ratio "idload-leaf-c8/idload-leaf-nethttp-c8" -ratio "wrk-leaf-t1-c8/idload-leaf-c8"
  -ratio "wide-grpc-stream-b4096/default-grpc-stream-b4096" -ratio "client-wide/client-default")
"$IDLOAD" summary "${ratios[@]}" "$RES" | tee "$OUT/summary.md"
if [ "$RESP_FAILED" -gt 0 ]; then
  printf '\n%d RESP runs failed; see the log and %s\n' "$RESP_FAILED" "$OUT/redis-benchmark/" | tee -a "$OUT/summary.md"
fi
log "done: $OUT"
