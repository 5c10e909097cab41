#!/usr/bin/env bash
# Test bed services for eosink: a real Apache Kafka broker (KRaft, single node) run from the
# broker jars on Maven Central, and a throwaway PostgreSQL cluster from Debian's packages.
# Both listen on 127.0.0.1 only.
#
#   services.sh up      start both (idempotent), wait until ready, write $STATE/env
#   services.sh down    stop what `up` started (by the pids it recorded) and remove the data
#   services.sh status  print what is running
#   services.sh env     print the exports for the running services
#
# Settings (environment):
#   EOSINK_SERVICES_DIR   state folder: data, logs, pids, env.  Default: <repo>/.services
#   EOSINK_KAFKA_PORT     broker port.                          Default: 19092
#   EOSINK_PG_PORT        PostgreSQL port.                      Default: 15432
#   EOSINK_KAFKA_VERSION  Apache Kafka version from Maven.      Default: the one in kafka/pom.xml
#   EOSINK_CACHE_DIR      where the broker jars are kept.       Default: ~/.cache/eosink
#   EOSINK_SERVICES_ONLY  "pg" or "kafka": up/down only that one (private beds for chaos tests)
#   EOSINK_PG_DIR         PostgreSQL's data, socket and log.   Default: /tmp/eosink-pg-<hash of state folder>
#
# PostgreSQL runs with wal_level=logical, max_replication_slots=32 and max_wal_senders=32. A
# running cluster made by an older version of this script is reconfigured and restarted by `up`.
#
# Fault injection on a running bed (used by the chaos tests on a private bed):
#   services.sh kafka-kill              SIGKILL the broker
#   services.sh kafka-start             start the broker again (same data)
#   services.sh pg-restart fast|immediate
#
# Logs are kept in $STATE/logs: kafka.log, postgres.log (a link into EOSINK_PG_DIR), maven.log, apt.log.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
STATE=${EOSINK_SERVICES_DIR:-$repo/.services}
KAFKA_PORT=${EOSINK_KAFKA_PORT:-19092}
CONTROLLER_PORT=$((KAFKA_PORT + 1))
PG_PORT=${EOSINK_PG_PORT:-15432}
LOGS=$STATE/logs
# PostgreSQL's files live under /tmp, not in the checkout: the server runs as the postgres
# user when we are root, and it must be able to reach them wherever the repository is cloned.
PGDIR=${EOSINK_PG_DIR:-/tmp/eosink-pg-$(printf '%s' "$STATE" | cksum | cut -d' ' -f1)}

log() { printf 'services: %s\n' "$*" >&2; }
die() { printf 'services: FAILED: %s\n' "$*" >&2; exit 1; }

alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

# ---------------------------------------------------------------- PostgreSQL
pg_bindir() {
  local d
  for d in /usr/lib/postgresql/*/bin; do
    [ -x "$d/initdb" ] && { echo "$d"; return 0; }
  done
  return 1
}

pg_install() {
  pg_bindir >/dev/null && return 0
  log "PostgreSQL server not found; installing Debian's postgresql package (log: $LOGS/apt.log)"
  command -v apt-get >/dev/null || die "PostgreSQL: no server binaries under /usr/lib/postgresql and no apt-get to install them"
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  { $sudo apt-get update && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y postgresql; } >>"$LOGS/apt.log" 2>&1 ||
    die "PostgreSQL: apt-get install postgresql failed; see $LOGS/apt.log"
  pg_bindir >/dev/null || die "PostgreSQL: installed, but no initdb under /usr/lib/postgresql/*/bin"
}

# Runs a PostgreSQL binary as the cluster's owner: the postgres user when we are root
# (PostgreSQL refuses to run as root), else ourselves.
pg_as_owner() {
  if [ "$(id -u)" -eq 0 ]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

pg_ready() { "$(pg_bindir)/pg_isready" -q -h 127.0.0.1 -p "$PG_PORT" -d postgres -U postgres; }

pg_sql() { psql -h 127.0.0.1 -p "$PG_PORT" -U postgres -d postgres -X -tAc "$1"; }

# pg_logical DATA: makes sure the cluster's postgresql.conf turns on logical decoding, for
# change data capture sources (Debezium, pgoutput) in this cluster. Clusters made by older
# versions of this script lack it. Returns 0 when it changed the file (a restart is needed).
pg_logical() {
  local conf=$1/postgresql.conf
  grep -q '^wal_level = logical' "$conf" && return 1
  cat >>"$conf" <<EOF
# eosink test bed: logical decoding for CDC sources (Debezium) in this cluster
wal_level = logical
max_replication_slots = 32
max_wal_senders = 32
EOF
  return 0
}

pg_up() {
  pg_install
  local bin data=$PGDIR/data sock=$PGDIR/sock pglog=$PGDIR/postgres.log
  bin=$(pg_bindir)
  if [ -f "$data/postmaster.pid" ] && kill -0 "$(head -1 "$data/postmaster.pid")" 2>/dev/null && pg_ready; then
    if [ "$(pg_sql 'SHOW wal_level')" != logical ]; then
      pg_logical "$data" || true
      log "PostgreSQL on 127.0.0.1:$PG_PORT runs without wal_level=logical (made by an older services.sh); restarting it"
      pg_as_owner "$bin/pg_ctl" -D "$data" -l "$pglog" -m fast -w -t 60 restart >/dev/null ||
        die "PostgreSQL: restart for wal_level=logical failed; see $LOGS/postgres.log"
      pg_ready || die "PostgreSQL: not accepting connections on 127.0.0.1:$PG_PORT after the restart; see $LOGS/postgres.log"
      [ "$(pg_sql 'SHOW wal_level')" = logical ] || die "PostgreSQL: wal_level is still not logical after the restart; see $data/postgresql.conf"
    fi
    log "PostgreSQL already running on 127.0.0.1:$PG_PORT"; return 0
  fi
  mkdir -p "$PGDIR" "$sock"
  ln -sfn "$pglog" "$LOGS/postgres.log"
  if [ ! -f "$data/PG_VERSION" ]; then
    rm -rf "$data"; mkdir -p "$data"
    [ "$(id -u)" -eq 0 ] && chown -R postgres:postgres "$PGDIR" && chmod 711 "$PGDIR"
    pg_as_owner "$bin/initdb" -D "$data" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 >"$LOGS/initdb.log" 2>&1 ||
      die "PostgreSQL: initdb failed; see $LOGS/initdb.log"
    cat >>"$data/postgresql.conf" <<EOF
# eosink test bed
listen_addresses = '127.0.0.1'
port = $PG_PORT
unix_socket_directories = '$sock'
max_connections = 300
shared_buffers = 256MB
log_min_messages = warning
log_line_prefix = '%m [%p] %a '
EOF
  fi
  pg_logical "$data" || true
  touch "$pglog"
  [ "$(id -u)" -eq 0 ] && chown -R postgres:postgres "$PGDIR"
  pg_as_owner "$bin/pg_ctl" -D "$data" -l "$pglog" -w -t 60 start >/dev/null ||
    die "PostgreSQL: did not start on 127.0.0.1:$PG_PORT; see $LOGS/postgres.log"
  pg_ready || die "PostgreSQL: started but not accepting connections on 127.0.0.1:$PG_PORT; see $LOGS/postgres.log"
  [ "$(pg_sql 'SHOW wal_level')" = logical ] || die "PostgreSQL: wal_level is not logical; see $data/postgresql.conf"
  if ! psql -h 127.0.0.1 -p "$PG_PORT" -U postgres -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname='eosink'" | grep -q 1; then
    psql -h 127.0.0.1 -p "$PG_PORT" -U postgres -d postgres -qc "CREATE DATABASE eosink" ||
      die "PostgreSQL: could not create database eosink"
  fi
  log "PostgreSQL ready on 127.0.0.1:$PG_PORT (data $data)"
}

pg_down() {
  local data=$PGDIR/data bin
  if [ -f "$data/postmaster.pid" ] && bin=$(pg_bindir); then
    pg_as_owner "$bin/pg_ctl" -D "$data" -m fast -w stop >/dev/null 2>&1 || true
  fi
  rm -rf "$PGDIR"
}

# ---------------------------------------------------------------- Kafka
kafka_version() {
  if [ -n "${EOSINK_KAFKA_VERSION:-}" ]; then echo "$EOSINK_KAFKA_VERSION"; return; fi
  sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$here/kafka/pom.xml"
}

kafka_fetch() {
  local v libs
  v=$(kafka_version)
  libs=${EOSINK_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/eosink}/kafka-libs-$v
  if [ -f "$libs/.complete" ]; then echo "$libs"; return 0; fi
  command -v java >/dev/null || die "Kafka: java not found (Kafka $v needs Java 17 or newer)"
  command -v mvn >/dev/null || die "Kafka: mvn not found; Maven fetches the broker jars from Maven Central"
  log "fetching Apache Kafka $v broker jars with Maven (log: $LOGS/maven.log)"
  rm -rf "$libs"; mkdir -p "$libs"
  mvn -B -q -f "$here/kafka/pom.xml" -Dkafka.version="$v" dependency:copy-dependencies \
    -DincludeScope=runtime -DoutputDirectory="$libs" >"$LOGS/maven.log" 2>&1 ||
    die "Kafka: Maven could not fetch org.apache.kafka:kafka_2.13:$v and its dependencies; see $LOGS/maven.log"
  ls "$libs"/kafka_2.13-*.jar >/dev/null 2>&1 || die "Kafka: Maven ran but kafka_2.13 jar is missing in $libs"
  touch "$libs/.complete"
  echo "$libs"
}

kafka_ready() {
  # A TCP connect to the broker port, then the broker's own log line that it started.
  (exec 3<>"/dev/tcp/127.0.0.1/$KAFKA_PORT") 2>/dev/null &&
    grep -q 'Kafka Server started\|\[KafkaRaftServer nodeId=1\] Kafka Server started' "$LOGS/kafka.log" 2>/dev/null
}

kafka_up() {
  local libs dir=$STATE/kafka cfg java_opts
  if alive "$dir/kafka.pid" && kafka_ready; then log "Kafka already running on 127.0.0.1:$KAFKA_PORT"; return 0; fi
  libs=$(kafka_fetch)
  mkdir -p "$dir"
  cfg=$dir/server.properties
  cat >"$cfg" <<EOF
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$CONTROLLER_PORT
listeners=PLAINTEXT://127.0.0.1:$KAFKA_PORT,CONTROLLER://127.0.0.1:$CONTROLLER_PORT
advertised.listeners=PLAINTEXT://127.0.0.1:$KAFKA_PORT
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=$dir/data
num.partitions=1
auto.create.topics.enable=false
offsets.topic.replication.factor=1
offsets.topic.num.partitions=8
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=4
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
group.consumer.min.session.timeout.ms=3000
group.consumer.session.timeout.ms=10000
group.consumer.min.heartbeat.interval.ms=500
group.consumer.heartbeat.interval.ms=1000
group.min.session.timeout.ms=3000
delete.topic.enable=true
log.retention.check.interval.ms=5000
EOF
  if [ ! -f "$dir/data/meta.properties" ]; then
    rm -rf "$dir/data"
    java -cp "$libs/*" -Dlog4j2.configurationFile="$here/kafka/log4j2.properties" kafka.tools.StorageTool \
      format -t "$(java -cp "$libs/*" kafka.tools.StorageTool random-uuid 2>/dev/null | tail -1)" -c "$cfg" \
      >"$LOGS/kafka-format.log" 2>&1 || die "Kafka: formatting the KRaft log directory failed; see $LOGS/kafka-format.log"
  fi
  : >"$LOGS/kafka.log"
  java_opts=${EOSINK_KAFKA_JAVA_OPTS:--Xms256m -Xmx1g}
  # shellcheck disable=SC2086
  nohup java $java_opts -Djava.awt.headless=true -Dlog4j2.configurationFile="$here/kafka/log4j2.properties" \
    -cp "$libs/*" kafka.Kafka "$cfg" >>"$LOGS/kafka.log" 2>&1 &
  echo $! >"$dir/kafka.pid"
  local i
  for i in $(seq 1 120); do
    if kafka_ready; then log "Kafka $(kafka_version) ready on 127.0.0.1:$KAFKA_PORT (pid $(cat "$dir/kafka.pid"))"; return 0; fi
    alive "$dir/kafka.pid" || die "Kafka: broker process exited during start-up; see $LOGS/kafka.log"
    sleep 0.5
  done
  die "Kafka: broker not ready on 127.0.0.1:$KAFKA_PORT after 60s; see $LOGS/kafka.log"
}

kafka_down() {
  local dir=$STATE/kafka i
  if alive "$dir/kafka.pid"; then
    kill "$(cat "$dir/kafka.pid")"
    for i in $(seq 1 60); do alive "$dir/kafka.pid" || break; sleep 0.5; done
    alive "$dir/kafka.pid" && kill -9 "$(cat "$dir/kafka.pid")"
  fi
  rm -f "$dir/kafka.pid"; rm -rf "$dir/data" "$dir/server.properties"
}

write_env() {
  cat >"$STATE/env" <<EOF
export KAFKA_BOOTSTRAP_SERVERS=127.0.0.1:$KAFKA_PORT
export DATABASE_URL=postgres://postgres@127.0.0.1:$PG_PORT/eosink?sslmode=disable
export EOSINK_SERVICES_DIR=$STATE
export EOSINK_PG_BINDIR=$(pg_bindir 2>/dev/null || true)
export EOSINK_PG_DATA=$PGDIR/data
EOF
}

cmd=${1:-up}
mkdir -p "$LOGS"
case "$cmd" in
  up)
    [ "${EOSINK_SERVICES_ONLY:-}" = kafka ] || pg_up
    [ "${EOSINK_SERVICES_ONLY:-}" = pg ] || kafka_up
    write_env
    log "env written to $STATE/env"
    ;;
  down)
    [ "${EOSINK_SERVICES_ONLY:-}" = pg ] || kafka_down
    [ "${EOSINK_SERVICES_ONLY:-}" = kafka ] || pg_down
    rm -f "$STATE/env"
    log "stopped"
    ;;
  status)
    if alive "$STATE/kafka/kafka.pid"; then echo "kafka: running pid $(cat "$STATE/kafka/kafka.pid") on 127.0.0.1:$KAFKA_PORT"; else echo "kafka: stopped"; fi
    if pg_ready 2>/dev/null; then echo "postgres: running on 127.0.0.1:$PG_PORT (wal_level=$(pg_sql 'SHOW wal_level' 2>/dev/null))"; else echo "postgres: stopped"; fi
    ;;
  kafka-kill)
    alive "$STATE/kafka/kafka.pid" || die "Kafka: not running"
    kill -9 "$(cat "$STATE/kafka/kafka.pid")"
    for _ in $(seq 1 40); do alive "$STATE/kafka/kafka.pid" || break; sleep 0.25; done
    log "Kafka broker killed with SIGKILL"
    ;;
  kafka-start)
    kafka_up
    ;;
  pg-restart)
    mode=${2:-fast}
    case "$mode" in fast|immediate) ;; *) die "pg-restart: mode must be fast or immediate" ;; esac
    pg_as_owner "$(pg_bindir)/pg_ctl" -D "$PGDIR/data" -l "$PGDIR/postgres.log" -m "$mode" -w -t 60 restart >/dev/null ||
      die "PostgreSQL: restart -m $mode failed; see $LOGS/postgres.log"
    pg_ready || die "PostgreSQL: not ready after restart"
    log "PostgreSQL restarted (-m $mode)"
    ;;
  env)
    [ -f "$STATE/env" ] || die "no $STATE/env: run '$0 up' first"
    cat "$STATE/env"
    ;;
  *) die "unknown command '$cmd' (up|down|status|env|kafka-kill|kafka-start|pg-restart)" ;;
esac
