#!/usr/bin/env bash
# Installs the pinned developer tools into ./bin (ignored by git).
# Versions are pinned: the module proxy here refuses some @latest tools.
set -euo pipefail
cd "$(dirname "$0")/.."
STATICCHECK_VERSION=v0.8.2 # staticcheck 2026.2.2, supports go 1.26

mkdir -p bin
want="staticcheck 2026.2.2 (0.8.2)"
if [ ! -x bin/staticcheck ] || [ "$(bin/staticcheck -version 2>/dev/null)" != "$want" ]; then
  echo "tools: installing staticcheck@$STATICCHECK_VERSION" >&2
  GOBIN="$PWD/bin" GOFLAGS=-mod=mod go install "honnef.co/go/tools/cmd/staticcheck@$STATICCHECK_VERSION"
fi

# grpcurl drives the gRPC server reflection test (cmd/flakeid/grpcurl_test.go).
GRPCURL_VERSION=v1.9.3
if ! go version -m bin/grpcurl 2>/dev/null | grep -q "mod[[:space:]]*github.com/fullstorydev/grpcurl[[:space:]]*$GRPCURL_VERSION"; then
  echo "tools: installing grpcurl@$GRPCURL_VERSION" >&2
  GOBIN="$PWD/bin" GOFLAGS=-mod=mod go install "github.com/fullstorydev/grpcurl/cmd/grpcurl@$GRPCURL_VERSION"
fi

# testreport turns `go test -json` into the usual output plus the failures
# for the summary (scripts/lib/steps.sh).
go build -o bin/testreport ./scripts/testreport
