#!/usr/bin/env bash
# The record of the 2026-11-28 run in docs/BENCHMARKS.md ("RESP with pipelining, pinned"):
#   FLAKEID=/path/to/flakeid N=200000 ROUNDS=3 ./run.sh > results.txt
# Pinned RESP INCR: flakeid (GOMAXPROCS=1) vs Redis, both alone on CPU 0 in turn,
# redis-benchmark on CPU 1; c 8/64 x P 1/16; server CPU time per run from /proc.
set -u
FLAKEID=${FLAKEID:?the flakeid binary}
W=${TMPDIR:-/tmp}/resp-grid; rm -rf $W; mkdir -p $W
PIDS=()
trap 'kill ${PIDS[@]} 2>/dev/null' EXIT
taskset -c 0 env GOMAXPROCS=1 $FLAKEID serve --listen 127.0.0.1:18802 --resp-listen 127.0.0.1:18812 --data-dir $W/b --log-level warn > $W/b.log 2>&1 & PF=$!; PIDS+=($PF)
taskset -c 0 redis-server --bind 127.0.0.1 --port 18804 --save '' --appendonly no --dir $W > $W/r.log 2>&1 & PR=$!; PIDS+=($PR)
for i in $(seq 100); do curl -fs http://127.0.0.1:18802/readyz >/dev/null && break; sleep 0.1; done
cpu() { awk '{ s=$0; sub(/.*\) /, "", s); split(s, f, " "); print f[12]+f[13] }' /proc/$1/stat; }
N=${N:-300000}
for R in $(seq 1 ${ROUNDS:-3}); do
 for c in 8 64; do for P in 1 16; do
  n=$N; [ $P = 16 ] && n=$((N*4))
  for who in flakeid redis; do
   if [ $who = flakeid ]; then port=18812; pid=$PF; key=snowflake; else port=18804; pid=$PR; key=k; fi
   c0=$(cpu $pid); t0=$(date +%s.%N)
   rps=$(taskset -c 1 redis-benchmark -h 127.0.0.1 -p $port -c $c -P $P -n $n -q INCR $key 2>/dev/null | tr '\r' '\n' | grep -o '[0-9.]* requests per second' | tail -1 | cut -d' ' -f1)
   t1=$(date +%s.%N); c1=$(cpu $pid)
   echo "$R $c $P $who $rps $(awk -v a=$c0 -v b=$c1 -v n=$n 'BEGIN{ printf "%.0f", (b>a)? n/((b-a)/100) : 0 }') $(awk -v a=$t0 -v b=$t1 'BEGIN{printf "%.1f", b-a}')"
  done
 done; done
done
