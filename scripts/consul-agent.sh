#!/usr/bin/env bash
# Builds the Consul agent the Consul coordinator's tests run against, once per machine, and prints
# the binary's path. Consul has no Debian package, and `go install github.com/hashicorp/consul@vX`
# refuses because the root module has `replace` directives pointing at its sibling modules (api, sdk,
# proto-public, envoyextensions, troubleshoot). So this downloads the root module and those siblings,
# at the versions the root's go.mod requires, with the ordinary Go tools, lays them out as the
# repository does, and builds the root package.
#
# Checksum exception: the checksum database has no entry for one sibling (envoyextensions), so the
# download runs with GONOSUMDB=github.com/hashicorp/consul (the modules still come from the module
# proxy, and the root module's own go.sum checks every other dependency).
#
# The binary (about 190 MB; a cold build takes about 5 minutes on 2 cores) is cached outside the
# repository, in $FLAKEID_TEST_CONSUL_CACHE (default ~/.cache/flakeid), keyed by version.
# The Consul server is BUSL-1.1 licensed: flakeid uses it only as a test service.
set -euo pipefail

VERSION="v1.22.5"
SIBLINGS="api@v1.33.2 envoyextensions@v0.9.2 proto-public@v0.7.1 sdk@v0.17.1 troubleshoot@v0.8.3"
CACHE="${FLAKEID_TEST_CONSUL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/flakeid}"
BIN="$CACHE/consul-$VERSION/consul"

have() { [ -x "$BIN" ] && "$BIN" version 2>/dev/null | grep -q "Consul ${VERSION}"; }
if have; then
  echo "$BIN"
  exit 0
fi
# One build at a time: scripts/test.sh starts one in the background early, and
# scripts/services.sh waits for it here.
mkdir -p "$CACHE"
exec 9>"$CACHE/consul-$VERSION.lock"
flock 9
if have; then
  echo "$BIN"
  exit 0
fi

echo "consul-agent: building Consul $VERSION into $BIN (once per machine; about 5 minutes)" >&2
work="$(mktemp -d)"
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
export GONOSUMDB=github.com/hashicorp/consul GOFLAGS=-mod=mod
dir() { go mod download -json "$1" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p'; }
root="$(dir "github.com/hashicorp/consul@$VERSION")"
[ -n "$root" ] || { echo "consul-agent: could not download github.com/hashicorp/consul@$VERSION" >&2; exit 1; }
cp -r "$root" "$work/consul"
chmod -R u+w "$work/consul"
for s in $SIBLINGS; do
  name="${s%@*}"
  src="$(dir "github.com/hashicorp/consul/$s")"
  [ -n "$src" ] || { echo "consul-agent: could not download github.com/hashicorp/consul/$s" >&2; exit 1; }
  rm -rf "$work/consul/$name"
  cp -r "$src" "$work/consul/$name"
  chmod -R u+w "$work/consul/$name"
done
mkdir -p "$(dirname "$BIN")"
(cd "$work/consul" && go build -trimpath -o "$BIN.tmp" .)
mv "$BIN.tmp" "$BIN"
"$BIN" version >&2
echo "$BIN"
