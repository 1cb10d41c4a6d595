#!/usr/bin/env bash
# The whole test suite: formatting, vet, staticcheck, fresh generated code,
# the race-enabled tests of the main module (integration tests against the
# real etcd, Redis, PostgreSQL and MariaDB that scripts/services.sh starts),
# the allocation tests (without the race detector, which makes sync.Pool drop
# items), the bench module's tests and the language clients' own tests
# (clients/python with unittest, clients/js with node --test, clients/java
# with JUnit 4). CI runs exactly this (.ci/run).
# Extra arguments are passed to `go test` (for example -short or
# -run Pattern).
#
# Every step runs even when an earlier one failed, and the run ends with a
# summary (scripts/lib/steps.sh): each step with pass/fail and seconds, the
# failed tests with their first error lines, and the test counts.
set -uo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/steps.sh
steps_begin

# The Consul test agent is built once per machine (about 4 minutes): on a
# fresh machine the build runs in the background while the checks below run,
# and the services step waits for it.
./scripts/consul-agent.sh >/dev/null 2>"${TMPDIR:-/tmp}/flakeid-consul-build.log" &
step "tools (scripts/tools.sh)" ./scripts/tools.sh

gofmt_check() {
  local unformatted
  unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './bin/*') | grep -v '^gen/' || true)
  if [ -n "$unformatted" ]; then
    echo "gofmt would change:"
    echo "$unformatted"
    step_detail "  gofmt would change: $(echo $unformatted)"
    return 1
  fi
}
step "gofmt -l" gofmt_check

for mod in . bench; do
  [ -f "$mod/go.mod" ] || continue
  step "go vet ($mod)" sh -c "cd '$mod' && go vet ./..."
  step "staticcheck ($mod)" sh -c "cd '$mod' && '$PWD/bin/staticcheck' ./..."
done
step "generated code is fresh (scripts/gen.sh --check)" ./scripts/gen.sh --check
step "services (scripts/services.sh)" ./scripts/services.sh # etcd, ZooKeeper, Consul, PostgreSQL, MariaDB, Redis on loopback

# -parallel 4: on two cores many integration tests mostly wait (a database
# stopped for a minute, a lease running out, a nemesis's fault windows), and
# at the default (GOMAXPROCS) two such tests held a package's every slot.
go_test "go test -race (main module)" . -race -count=1 -parallel 4 -timeout 15m "$@" ./...
go_test "go test, allocation tests without -race (main module)" . -count=1 "$@" -run 'Allocations$' ./server ./idmask
if [ -f bench/go.mod ]; then
  go_test "go test (bench module)" bench -count=1 -timeout 5m "$@" ./...
fi
# The language clients' own tests, with their own runners, against a live
# `flakeid serve` each starts from one binary built here.
client_bin=""
client_test() { # name out-file command…: runs the command with FLAKEID_TEST_BIN set
  local name="$1" out="$FLAKEID_TEST_STEPS_DIR/$2" rc
  shift 2
  if [ -z "$client_bin" ]; then
    client_bin="$(mktemp -d)/flakeid"
    go build -o "$client_bin" ./cmd/flakeid || return 1
  fi
  FLAKEID_TEST_BIN="$client_bin" "$@" >"$out" 2>&1
  rc=$?
  cat "$out"
  if [ "$rc" != 0 ]; then
    step_detail "  $name: the end of its output:"
    tail -n 15 "$out" | cut -c1-200 | sed 's/^/      /' >>"$FLAKEID_TEST_STEPS_DIR/details"
  fi
  return "$rc"
}
step "clients/python (python3 -m unittest)" client_test python python.out sh -c 'cd clients/python && exec python3 -m unittest discover -s tests -v'
step "clients/js (node --test)" client_test js js.out sh -c 'cd clients/js && exec node --test test/'
step "clients/java (JUnit 4)" client_test java java.out clients/java/build.sh test
[ -z "$client_bin" ] || rm -rf "$(dirname "$client_bin")"
steps_end
