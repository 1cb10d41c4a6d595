#!/usr/bin/env bash
# A three-node flakeid cluster on loopback, coordinated by etcd, with segment
# tags in PostgreSQL — the layout docs/OPERATIONS.md describes, small enough
# for one machine. The tests use it too.
#
#   scripts/cluster.sh start [DIR]    build, start etcd/PostgreSQL if needed, start 3 nodes, wait until ready
#   scripts/cluster.sh stop [DIR]     SIGTERM the nodes (they drain and release their leases)
#   scripts/cluster.sh status [DIR]   each node's worker id and readiness
#
# DIR (default /tmp/flakeid-cluster) holds the binary, each node's data
# directory, log and pid. Nodes listen on 127.0.0.1:$BASE_PORT+1..3 (BASE_PORT
# default 18080). FLAKEID_TEST_CLUSTER_ETCD / FLAKEID_TEST_CLUSTER_STORE override the
# coordinator and the segment store; FLAKEID_TEST_CLUSTER_PREFIX the etcd prefix
# (the datacenter registry is the etcd cluster's one: a test gives an etcd of its own).
set -euo pipefail
cmd="${1:-}"
dir="${2:-/tmp/flakeid-cluster}"
base="${BASE_PORT:-18080}"
root="$(cd "$(dirname "$0")/.." && pwd)"
etcd="${FLAKEID_TEST_CLUSTER_ETCD:-127.0.0.1:23790}"
prefix="${FLAKEID_TEST_CLUSTER_PREFIX:-/flakeid-cluster}"
coordinator="etcd://$etcd$prefix"
store="${FLAKEID_TEST_CLUSTER_STORE:-postgres://postgres@127.0.0.1:5432/test?sslmode=disable&table=flakeid_cluster_segments}"

wait_ready() { # port
  local nd="$dir/node-$(( $1 - base ))"
  for _ in $(seq 1 150); do
    curl -fsS "http://127.0.0.1:$1/readyz" >/dev/null 2>&1 && return 0
    if ! kill -0 "$(cat "$nd/pid")" 2>/dev/null; then
      echo "cluster: node on :$1 exited; the end of $nd/log:" >&2
      tail -n 20 "$nd/log" >&2
      return 1
    fi
    sleep 0.2
  done
  echo "cluster: node on :$1 did not become ready in 30 s; the end of $nd/log:" >&2
  tail -n 20 "$nd/log" >&2
  return 1
}

case "$cmd" in
start)
  mkdir -p "$dir"
  "$root/scripts/services.sh" >/dev/null
  (cd "$root" && go build -o "$dir/flakeid" ./cmd/flakeid)
  for i in 1 2 3; do
    nd="$dir/node-$i"
    mkdir -p "$nd"
    if [ -f "$nd/pid" ] && kill -0 "$(cat "$nd/pid")" 2>/dev/null; then continue; fi
    port=$((base + i))
    # A port that answers already belongs to someone else (a leftover node of
    # another DIR, say): our readiness check would ask that process instead.
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      echo "cluster: 127.0.0.1:$port is in use by another process; stop it or choose another BASE_PORT" >&2
      exit 1
    fi
    nohup "$dir/flakeid" serve --listen "127.0.0.1:$port" --data-dir "$nd" \
      --coordinator "$coordinator" --store "$store" --log-format json \
      >"$nd/log" 2>&1 &
    echo $! >"$nd/pid"
  done
  for i in 1 2 3; do wait_ready $((base + i)); done
  "$0" status "$dir"
  ;;
stop)
  # SIGTERM drains (up to the 10 s shutdown timeout) and releases the lease;
  # a node still running after 15 s keeps its pid file and fails the stop,
  # so that a later start does not run beside it.
  failed=0
  for i in 1 2 3; do
    pidf="$dir/node-$i/pid"
    [ -f "$pidf" ] || continue
    pid=$(cat "$pidf")
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then
      echo "cluster: node-$i (pid $pid) still runs 15 s after SIGTERM; kept $pidf (kill -9 $pid to force)" >&2
      failed=1
      continue
    fi
    rm -f "$pidf"
  done
  exit "$failed"
  ;;
status)
  for i in 1 2 3; do
    port=$((base + i))
    s=$(curl -fsS "http://127.0.0.1:$port/v1/status" 2>/dev/null || echo '{"ready":false}')
    echo "node-$i 127.0.0.1:$port $(echo "$s" | grep -o '"ready":[a-z]*' | head -1) $(echo "$s" | grep -o '"worker_id":[0-9]*' | head -1)"
  done
  ;;
*)
  echo "usage: $0 start|stop|status [DIR]" >&2
  exit 2
  ;;
esac
