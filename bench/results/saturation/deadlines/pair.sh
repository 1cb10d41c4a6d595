#!/usr/bin/env bash
# Paired A/B (the record of the 2026-11-28 deadlines run, docs/BENCHMARKS.md):
# the servers share CPU 0 at the same time, each driven by its own idload on
# CPU 1, so that the machine's noise falls on both alike. $AB holds
# flakeid-old (built at afc704c), flakeid-new (built with the deadline
# ticker) and idload (bench/cmd/idload).
#   AB=/tmp/ab ROUNDS=10 ./pair.sh; AB=/tmp/ab RESP=1 ROUNDS=10 ./pair.sh
set -u
AB=${AB:?the directory of the binaries}
W=$AB/wp; rm -rf $W; mkdir -p $W
RES=$AB/pair.jsonl; : > $RES
PIDS=()
trap 'kill ${PIDS[@]} 2>/dev/null' EXIT
taskset -c 0 env GOMAXPROCS=1 $AB/flakeid-old serve --listen 127.0.0.1:18701 --resp-listen 127.0.0.1:18711 --data-dir $W/a --log-level warn > $W/a.log 2>&1 & PIDS+=($!)
taskset -c 0 env GOMAXPROCS=1 $AB/flakeid-new serve --listen 127.0.0.1:18702 --resp-listen 127.0.0.1:18712 --data-dir $W/b --log-level warn > $W/b.log 2>&1 & PIDS+=($!)
taskset -c 0 env GOMAXPROCS=1 $AB/idload hello -listen 127.0.0.1:18703 > $W/h.log 2>&1 & PIDS+=($!)
taskset -c 0 redis-server --bind 127.0.0.1 --port 18704 --save '' --appendonly no --dir $W > $W/r.log 2>&1 & PIDS+=($!)
for p in 18701 18702; do for i in $(seq 100); do curl -fs http://127.0.0.1:$p/readyz >/dev/null && break; sleep 0.1; done; done
L() { taskset -c 1 env GOMAXPROCS=1 $AB/idload -label "$1" -round "$R" -json $RES -d ${DUR:-5s} -warmup 1s -c 8 "${@:2}" > /dev/null; }
for R in $(seq 1 ${ROUNDS:-6}); do
  LP=()
  if [ -z "${RESP:-}" ]; then
  L old -mode http -url http://127.0.0.1:18701/api/snowflake/get/x & LP+=($!)
  L new -mode http -url http://127.0.0.1:18702/api/snowflake/get/x & LP+=($!)
  L hello -mode http -url http://127.0.0.1:18703/ & LP+=($!)
  wait "${LP[@]}"
  else
  L old-resp -mode redis-incr -redis 127.0.0.1:18711 -key snowflake & LP+=($!)
  L new-resp -mode redis-incr -redis 127.0.0.1:18712 -key snowflake & LP+=($!)
  L redis -mode redis-incr -redis 127.0.0.1:18704 -key x & LP+=($!)
  wait "${LP[@]}"
  fi
done
$AB/idload summary -ratio new/old -ratio new/hello -ratio old/hello -ratio new-resp/old-resp -ratio new-resp/redis -ratio old-resp/redis $RES | grep -E "^\| (new|old|hello|redis)" 
