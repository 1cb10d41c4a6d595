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

# helm lints and renders the chart in the tests (cmd/flakeid/helm_test.go):
# built once per machine into a cache outside the repository.
HELM_VERSION=v3.22.0
HELM_DIR="${FLAKEID_TEST_HELM_DIR:-$HOME/.cache/flakeid/helm-$HELM_VERSION}"
if ! go version -m "$HELM_DIR/helm" 2>/dev/null | grep -q "mod[[:space:]]*helm.sh/helm/v3[[:space:]]*$HELM_VERSION"; then
  echo "tools: installing helm@$HELM_VERSION into $HELM_DIR" >&2
  mkdir -p "$HELM_DIR"
  GOBIN="$HELM_DIR" GOFLAGS=-mod=mod go install "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
fi

# testreport turns `go test -json` into the usual output plus the failures
# for the summary (scripts/lib/steps.sh).
go build -o bin/testreport ./scripts/testreport
