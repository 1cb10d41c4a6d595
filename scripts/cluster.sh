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
# default 18080). FLAKEID_CLUSTER_ETCD / FLAKEID_CLUSTER_STORE override the
# coordinator and the segment store; FLAKEID_CLUSTER_PREFIX the etcd prefix.
set -euo pipefail
cmd="${1:-}"
dir="${2:-/tmp/flakeid-cluster}"
base="${BASE_PORT:-18080}"
root="$(cd "$(dirname "$0")/.." && pwd)"
etcd="${FLAKEID_CLUSTER_ETCD:-127.0.0.1:23790}"
prefix="${FLAKEID_CLUSTER_PREFIX:-/flakeid-cluster}"
store="${FLAKEID_CLUSTER_STORE:-postgres://postgres@127.0.0.1:5432/test?sslmode=disable&table=flakeid_cluster_segments}"

wait_ready() { # port
  for _ in $(seq 1 150); do
    curl -fsS "http://127.0.0.1:$1/readyz" >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  echo "cluster: node on :$1 did not become ready (see $dir/node-$(( $1 - base ))/log)" >&2
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
    nohup "$dir/flakeid" serve --listen "127.0.0.1:$port" --data-dir "$nd" \
      --coordinator "etcd://$etcd$prefix" --store "$store" --log-format json \
      >"$nd/log" 2>&1 &
    echo $! >"$nd/pid"
  done
  for i in 1 2 3; do wait_ready $((base + i)); done
  "$0" status "$dir"
  ;;
stop)
  for i in 1 2 3; do
    pidf="$dir/node-$i/pid"
    [ -f "$pidf" ] || continue
    pid=$(cat "$pidf")
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    rm -f "$pidf"
  done
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
