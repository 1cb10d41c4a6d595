#!/usr/bin/env bash
# Makes sure the services the integration tests talk to are up on loopback:
#   etcd        127.0.0.1:23790  (Debian's etcd-server, started here with its data under $FLAKEID_TEST_ETCD_DIR)
#   PostgreSQL  127.0.0.1:5432   (trust auth, database "test")
#   MariaDB     127.0.0.1:3306   (root, no password, database "test")
#   Redis       127.0.0.1:6379
#   NATS        127.0.0.1:4222   (Debian's nats-server, with JetStream)
#   ZooKeeper   127.0.0.1:21810  (Debian's zookeeper, started here with its own zoo.cfg under $FLAKEID_TEST_ZK_DIR)
#   Consul      127.0.0.1:28500  (a `consul agent -dev` built by scripts/consul-agent.sh, under $FLAKEID_TEST_CONSUL_DIR)
# Installs etcd-server and zookeeper (and chromium, for the web console's browser test; redis-tools,
# python3-redis, php-cli, php-redis and the npm clients of scripts/clients.sh, for the RESP listener's
# client tests and the documentation's snippets) when missing, and starts whichever service is down.
# The tests read their addresses from FLAKEID_TEST_* (see internal/testenv); the defaults match this.
set -euo pipefail

ETCD_PORT="${FLAKEID_TEST_ETCD_PORT:-23790}"
ETCD_PEER_PORT="${FLAKEID_TEST_ETCD_PEER_PORT:-23800}"
ETCD_DIR="${FLAKEID_TEST_ETCD_DIR:-/tmp/flakeid-etcd}"
ZK_PORT="${FLAKEID_TEST_ZK_PORT:-21810}"
ZK_DIR="${FLAKEID_TEST_ZK_DIR:-/tmp/flakeid-zk}"
CONSUL_PORT="${FLAKEID_TEST_CONSUL_PORT:-28500}"
CONSUL_DIR="${FLAKEID_TEST_CONSUL_DIR:-/tmp/flakeid-consul}"

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

# ZooKeeper: our own instance, loopback only, with an explicit zoo.cfg (Debian's default config
# listens on every interface). zkEnv.sh overrides ZOOCFGDIR, so the file is given by its path.
[ -x /usr/share/zookeeper/bin/zkServer.sh ] || apt_install zookeeper
if up "$ZK_PORT" && [ "$( (exec 3<>"/dev/tcp/127.0.0.1/$ZK_PORT"; printf ruok >&3; timeout 5 cat <&3) 2>/dev/null)" != imok ]; then
  echo "services: 127.0.0.1:$ZK_PORT answers but is not ZooKeeper; free it, or set FLAKEID_TEST_ZK_PORT and FLAKEID_TEST_ZK to another port" >&2
  exit 1
fi
if ! up "$ZK_PORT"; then
  mkdir -p "$ZK_DIR/conf" "$ZK_DIR/data" "$ZK_DIR/log"
  cat >"$ZK_DIR/conf/zoo.cfg" <<CFG
tickTime=500
initLimit=10
syncLimit=5
dataDir=$ZK_DIR/data
clientPort=$ZK_PORT
clientPortAddress=127.0.0.1
admin.enableServer=false
4lw.commands.whitelist=ruok,srvr,stat
maxSessionTimeout=60000
maxClientCnxns=0
CFG
  cp /etc/zookeeper/conf/log4j.properties "$ZK_DIR/conf/" 2>/dev/null || true
  echo "services: starting ZooKeeper on 127.0.0.1:$ZK_PORT (data in $ZK_DIR)" >&2
  ZOO_LOG_DIR="$ZK_DIR/log" ZOOPIDFILE="$ZK_DIR/zookeeper.pid" \
    /usr/share/zookeeper/bin/zkServer.sh start "$ZK_DIR/conf/zoo.cfg" >"$ZK_DIR/start.log" 2>&1
  wait_up "$ZK_PORT" ZooKeeper
fi

# Consul: a dev agent (in memory) on loopback with its own ports; the binary is built once per
# machine by scripts/consul-agent.sh (Consul has no Debian package). session_ttl_min is lowered
# from Consul's 10s so that the coordinator's tests can use short leases.
if up "$CONSUL_PORT" && ! curl -fsS --max-time 5 "http://127.0.0.1:$CONSUL_PORT/v1/status/leader" >/dev/null 2>&1; then
  echo "services: 127.0.0.1:$CONSUL_PORT answers but is not Consul; free it, or set FLAKEID_TEST_CONSUL_PORT and FLAKEID_TEST_CONSUL to another port" >&2
  exit 1
fi
if ! up "$CONSUL_PORT"; then
  consul_bin="$(bash "$(dirname "$0")/consul-agent.sh")"
  mkdir -p "$CONSUL_DIR"
  echo "services: starting Consul on 127.0.0.1:$CONSUL_PORT" >&2
  nohup "$consul_bin" agent -dev -node flakeid-test -bind 127.0.0.1 -client 127.0.0.1 \
    -hcl 'session_ttl_min = "1s"' -http-port "$CONSUL_PORT" -dns-port -1 -grpc-port -1 -grpc-tls-port -1 \
    -serf-lan-port "$((CONSUL_PORT + 1))" -serf-wan-port "$((CONSUL_PORT + 2))" -server-port "$((CONSUL_PORT + 3))" \
    >"$CONSUL_DIR/consul.log" 2>&1 &
  echo $! >"$CONSUL_DIR/consul.pid"
  wait_up "$CONSUL_PORT" Consul
  for _ in $(seq 1 100); do
    [ -n "$(curl -fsS --max-time 2 "http://127.0.0.1:$CONSUL_PORT/v1/status/leader" 2>/dev/null | tr -d '"')" ] && break
    sleep 0.2
  done
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
if ! up 4222; then
  echo "services: starting NATS" >&2
  need_pkg nats-server nats-server
  as_root mkdir -p /var/lib/nats-server
  as_root start-stop-daemon --start --oknodo --background --exec "$(command -v nats-server)" -- \
    -a 127.0.0.1 -p 4222 -js -sd /var/lib/nats-server -l /var/log/nats-server.log
  wait_up 4222 NATS
fi
# The Redis-protocol tests and the verifier start private redis-server processes.
command -v redis-server >/dev/null || { echo "services: redis-server is not installed (apt-get install redis-server)" >&2; exit 1; }
# Clients for some tests, installed after every service is up, each on its own: a failed install
# (no network, no npm registry) fails only the tests that need it, which name what is missing.
client_failed=0
try() { # what command…
  local what="$1"
  shift
  "$@" || { echo "services: $what could not be installed; the tests that need it will fail, naming it" >&2; client_failed=$((client_failed + 1)); }
}
# Debian's headless Chromium drives the web console's browser test.
try chromium need_pkg chromium chromium
# The RESP listener's client tests drive it with redis-cli and with Debian's Python redis
# package, run by /usr/bin/python3 (a pyenv python3 first on PATH lacks the module).
try redis-cli need_pkg redis-cli redis-tools
/usr/bin/python3 -c 'import redis' >/dev/null 2>&1 || try python3-redis apt_install python3-redis
# The documentation's snippets run with PHP's phpredis and with Node.js clients from npm (scripts/clients.sh).
try php need_pkg php php-cli
php -m 2>/dev/null | grep -qx redis || try php-redis apt_install php-redis
try node need_pkg node nodejs
try npm need_pkg npm npm
try "the npm clients" "$(dirname "$0")/clients.sh"
# The Java client (clients/java) is built with the JDK and tested with Debian's JUnit 4; the Python
# and JavaScript clients need only python3 and node.
try javac need_pkg javac default-jdk-headless
[ -f /usr/share/java/junit4.jar ] && [ -f /usr/share/java/hamcrest-core.jar ] || try junit4 apt_install junit4

echo "services: etcd 127.0.0.1:$ETCD_PORT, ZooKeeper :$ZK_PORT, Consul :$CONSUL_PORT, PostgreSQL :5432, MariaDB :3306, Redis :6379, NATS :4222 are up" >&2
if [ "$client_failed" != 0 ]; then
  echo "services: $client_failed client install(s) failed (above)" >&2
fi
