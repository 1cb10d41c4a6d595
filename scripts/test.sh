#!/usr/bin/env bash
# The whole test suite: formatting, vet, staticcheck and the race-enabled
# tests of the main module (integration tests against the real etcd, Redis,
# PostgreSQL and MariaDB that scripts/services.sh starts) and of the bench
# module. CI runs exactly this
# (.ci/run). Extra arguments are passed to `go test` (for example -short or
# -run Pattern).
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/tools.sh
./scripts/services.sh   # etcd, PostgreSQL, MariaDB, Redis on loopback for the integration tests

fail=0
step() { echo "== $*" >&2; }

step "gofmt -l"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './bin/*') | grep -v '^gen/' || true)
if [ -n "$unformatted" ]; then
  echo "gofmt would change:" >&2
  echo "$unformatted" >&2
  fail=1
fi

for mod in . bench; do
  [ -f "$mod/go.mod" ] || continue
  step "go vet ($mod)"
  (cd "$mod" && go vet ./...) || fail=1
  step "staticcheck ($mod)"
  (cd "$mod" && "$OLDPWD/bin/staticcheck" ./...) || fail=1
done
step "generated code is fresh (scripts/gen.sh --check)"
./scripts/gen.sh --check || fail=1
[ "$fail" = 0 ] || { echo "FAIL: static checks" >&2; exit 1; }

step "go test -race (main module)"
go test -race -count=1 -timeout 15m "$@" ./...
if [ -f bench/go.mod ]; then
  step "go test (bench module)"
  (cd bench && go test -count=1 -timeout 5m "$@" ./...)
fi
