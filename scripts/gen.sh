#!/usr/bin/env bash
# Regenerates gen/ from proto/ with pinned tools:
#   protoc                 Debian's protobuf-compiler (libprotoc 3.21.12 on bookworm)
#   protoc-gen-go          google.golang.org/protobuf, the version in go.mod
#   protoc-gen-connect-go  connectrpc.com/connect, the version in go.mod
# The Go plugins are installed into ./bin (ignored by git) when missing or of
# another version. The generated code is committed; CI does not regenerate.
#
#   scripts/gen.sh           rewrite gen/
#   scripts/gen.sh --check   generate into a temporary directory and fail
#                            (exit 1, with a diff) if gen/ differs
set -euo pipefail
cd "$(dirname "$0")/.."

check=0
case "${1:-}" in
  "") ;;
  --check) check=1 ;;
  *) echo "usage: $0 [--check]" >&2; exit 2 ;;
esac

# The plugins' versions follow go.mod, so generated code and runtime agree.
PROTOBUF_VERSION=$(go list -m -f '{{.Version}}' google.golang.org/protobuf)
CONNECT_VERSION=$(go list -m -f '{{.Version}}' connectrpc.com/connect)

if ! command -v protoc >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "gen: installing protoc (apt-get install protobuf-compiler)" >&2
    apt-get install -y protobuf-compiler >/dev/null 2>&1 ||
      { apt-get update >/dev/null && apt-get install -y protobuf-compiler >/dev/null; }
  else
    echo "gen: protoc not found; install Debian's protobuf-compiler" >&2
    exit 1
  fi
fi

mkdir -p bin
install_tool() { # name module version want-version-output
  if [ ! -x "bin/$1" ] || [ "$("bin/$1" --version 2>/dev/null)" != "$4" ]; then
    echo "gen: installing $1@$3" >&2
    GOBIN="$PWD/bin" GOFLAGS=-mod=mod go install "$2@$3"
  fi
}
install_tool protoc-gen-go google.golang.org/protobuf/cmd/protoc-gen-go "$PROTOBUF_VERSION" "protoc-gen-go $PROTOBUF_VERSION"
install_tool protoc-gen-connect-go connectrpc.com/connect/cmd/protoc-gen-connect-go "$CONNECT_VERSION" "${CONNECT_VERSION#v}"

out=gen
if [ "$check" = 1 ]; then
  out=$(mktemp -d)
  trap 'rm -rf "$out"' EXIT
fi

protos=$(cd proto && find . -name '*.proto' | sed 's|^\./||' | LC_ALL=C sort)
if [ "$check" = 0 ]; then
  rm -rf gen/flakeid
  mkdir -p gen
fi
# paths=source_relative puts proto/flakeid/v1/x.proto at gen/flakeid/v1/.
# shellcheck disable=SC2086
protoc -I proto \
  --plugin=protoc-gen-go="$PWD/bin/protoc-gen-go" \
  --plugin=protoc-gen-connect-go="$PWD/bin/protoc-gen-connect-go" \
  --go_out="$out" --go_opt=paths=source_relative \
  --connect-go_out="$out" --connect-go_opt=paths=source_relative \
  $protos

if [ "$check" = 1 ]; then
  if ! diff -r -u gen/flakeid "$out/flakeid"; then
    echo "gen: gen/ is stale; run scripts/gen.sh" >&2
    exit 1
  fi
  echo "gen: gen/ is up to date" >&2
else
  echo "gen: wrote $(find gen -name '*.go' | wc -l) files under gen/" >&2
fi
