#!/usr/bin/env bash
# Installs the Node.js Redis clients that the documentation's snippets are
# run with (cmd/flakeid/snippets_test.go) into a cache outside the repository,
# one directory per pinned package version:
#   $FLAKEID_TEST_NPM_DIR/<package>@<version>/node_modules
# (default ~/.cache/flakeid/npm). Python's and PHP's clients are Debian's
# packages (scripts/services.sh installs them); Go's is a module of go.mod.
set -euo pipefail
# npm trusts only Node's own CA list unless told: give it the machine's bundle (a CI run's
# reduced environment drops NODE_EXTRA_CA_CERTS, and a proxy's CA may be only there).
if [ -z "${NODE_EXTRA_CA_CERTS:-}" ] && [ -r /etc/ssl/certs/ca-certificates.crt ]; then
  export NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt
fi
dir="${FLAKEID_TEST_NPM_DIR:-$HOME/.cache/flakeid/npm}"
# Keep in step with npmClients in cmd/flakeid/snippets_test.go.
for pkg in ioredis@5.8.2 redis@5.10.0 redis@6.3.1; do
  d="$dir/$pkg"
  [ -f "$d/node_modules/${pkg%@*}/package.json" ] && continue
  command -v npm >/dev/null || { echo "clients: npm is not installed (apt-get install npm)" >&2; exit 1; }
  echo "clients: installing $pkg into $d" >&2
  mkdir -p "$d"
  echo '{"private": true}' >"$d/package.json"
  npm install --prefix "$d" --no-audit --no-fund --no-package-lock --silent "$pkg" >&2
done
