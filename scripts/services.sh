#!/usr/bin/env bash
# Makes sure the services the integration tests talk to are up on loopback:
#   etcd        127.0.0.1:23790  (Debian's etcd-server, started here with its data under $FLAKEID_TEST_ETCD_DIR)
#   PostgreSQL  127.0.0.1:5432   (trust auth, database "test")
#   MariaDB     127.0.0.1:3306   (root, no password, database "test")
#   Redis       127.0.0.1:6379
# Installs etcd-server (and chromium, for the web console's browser test; redis-tools and
# python3-redis, for the RESP listener's client tests) when missing, and starts whichever service
# is down.
# The tests read their addresses from FLAKEID_TEST_* (see internal/testenv); the defaults match this.
set -euo pipefail

ETCD_PORT="${FLAKEID_TEST_ETCD_PORT:-23790}"
ETCD_PEER_PORT="${FLAKEID_TEST_ETCD_PEER_PORT:-23800}"
ETCD_DIR="${FLAKEID_TEST_ETCD_DIR:-/tmp/flakeid-etcd}"

up() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
wait_up() { # port name
  for _ in $(seq 1 100); do up "$1" && return 0; sleep 0.2; done
  echo "services: $2 did not come up on 127.0.0.1:$1" >&2
  return 1
}
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

apt_updated=""
apt_install() { # package
  if [ -z "$apt_updated" ]; then as_root apt-get update -qq >/dev/null; apt_updated=1; fi
  echo "services: installing $1" >&2
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$1" >/dev/null
}
need_pkg() { # command package
  command -v "$1" >/dev/null 2>&1 && return 0
  apt_install "$2"
}

# Debian's headless Chromium drives the web console's browser test.
need_pkg chromium chromium

# The RESP listener's client tests drive it with redis-cli and with Debian's Python redis
# package, run by /usr/bin/python3 (a pyenv python3 first on PATH lacks the module).
need_pkg redis-cli redis-tools
/usr/bin/python3 -c 'import redis' >/dev/null 2>&1 || apt_install python3-redis

# etcd: our own instance on a loopback port, so it never clashes with a system one.
need_pkg etcd etcd-server
if up "$ETCD_PORT" && ! curl -fsS --max-time 5 "http://127.0.0.1:$ETCD_PORT/version" 2>/dev/null | grep -q etcdserver; then
  echo "services: 127.0.0.1:$ETCD_PORT answers but is not etcd; free it, or set FLAKEID_TEST_ETCD_PORT and FLAKEID_TEST_ETCD to another port" >&2
  exit 1
fi
if ! up "$ETCD_PORT"; then
  mkdir -p "$ETCD_DIR"
  echo "services: starting etcd on 127.0.0.1:$ETCD_PORT (data in $ETCD_DIR)" >&2
  nohup etcd --name flakeid-test --data-dir "$ETCD_DIR/data" \
    --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-cluster "flakeid-test=http://127.0.0.1:$ETCD_PEER_PORT" \
    >"$ETCD_DIR/etcd.log" 2>&1 &
  echo $! >"$ETCD_DIR/etcd.pid"
  wait_up "$ETCD_PORT" etcd
fi

if ! up 5432; then
  echo "services: starting PostgreSQL" >&2
  as_root pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -1)" main start
  wait_up 5432 PostgreSQL
fi
if ! up 3306; then
  echo "services: starting MariaDB" >&2
  as_root start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd
  wait_up 3306 MariaDB
fi
if ! up 6379; then
  echo "services: starting Redis" >&2
  as_root redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no \
    --dir /var/lib/redis --logfile /var/log/redis/ci.log
  wait_up 6379 Redis
fi
# The Redis-protocol tests and the verifier start private redis-server processes.
command -v redis-server >/dev/null || { echo "services: redis-server is not installed (apt-get install redis-server)" >&2; exit 1; }
echo "services: etcd 127.0.0.1:$ETCD_PORT, PostgreSQL :5432, MariaDB :3306, Redis :6379 are up" >&2
