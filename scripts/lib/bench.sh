# Shared by the benchmark scripts (bench-service.sh, bench-tail.sh,
# bench-saturation.sh): a work directory, and the background processes they
# start (each appends its PID to PIDS), killed and reaped — and the directory
# removed — when the script exits, also on Ctrl-C or TERM.

# FLAKEID_GODEBUG is the GODEBUG the deployment files (deploy/Dockerfile,
# deploy/flakeid.service) run the server with; the benchmarks run it, and
# the Go servers they compare it with, the same way.
FLAKEID_GODEBUG=schedtrace=2147483647

# bench_begin NAME sets WORK to a new directory /tmp/NAME.XXXXXX and PIDS to
# an empty list, and arranges the cleanup.
bench_begin() {
  WORK=$(mktemp -d "/tmp/$1.XXXXXX")
  PIDS=()
  trap bench_cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
}

# bench_cleanup stops every process in PIDS and removes WORK.
bench_cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$WORK"
}
