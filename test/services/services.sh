#!/usr/bin/env bash
# Test bed services for eosink: a real Apache Kafka broker (KRaft, single node) run from the
# broker jars on Maven Central, a throwaway PostgreSQL cluster from Debian's packages (with
# logical decoding on, so a database in it can be a Debezium source), and an Apicurio Schema
# Registry (Confluent-compatible API, in-memory storage) from Maven Central. All listen on
# 127.0.0.1 only.
#
#   services.sh up      start all three (idempotent), wait until ready, write $STATE/env
#   services.sh down    stop what `up` started (by the pids it recorded) and remove the data
#   services.sh status  print what is running
#   services.sh env     print the exports for the running services
#   services.sh kafka-fetch    fetch the broker jars into the cache (when missing); print their folder
#   services.sh kafka-version  print the Kafka version the bed runs
#
# The env file exports KAFKA_BOOTSTRAP_SERVERS, DATABASE_URL and, when the registry runs,
# EOSINK_REGISTRY_URL=http://127.0.0.1:<port>/apis/ccompat/v7 (the Confluent-compatible API;
# Apicurio's own v2 API, used by its Kafka Connect converter, is at /apis/registry/v2).
# Debezium on Kafka Connect is not started here: tests start it (internal/testbed/debezium.go),
# with the jars from test/services/debezium.sh fetch.
#
# Settings (environment):
#   EOSINK_SERVICES_DIR   state folder: data, logs, pids, env.  Default: <repo>/.services
#   EOSINK_KAFKA_PORT     broker port (controller: port+1).     Default: 19092
#   EOSINK_PG_PORT        PostgreSQL port.                      Default: 15432
#   EOSINK_REGISTRY_PORT  registry HTTP port.                   Default: 18080
#   EOSINK_REGISTRY_MANAGEMENT_PORT  registry management port (health, metrics). Default: registry port+10
#   EOSINK_REGISTRY_VERSION  Apicurio Registry version.  Default: 3.3.3 when a Java 21+ runtime is
#                         found (EOSINK_REGISTRY_JAVA_HOME when set; else
#                         /usr/lib/jvm/temurin-25-jdk-amd64, any /usr/lib/jvm/*, then `java`),
#                         else 2.6.13.Final on Java 17+ (3.x needs Java 21; 2.6 runs on 17)
#   EOSINK_REGISTRY_JAVA_HOME  JDK to run the registry with.    Default: found as above
#   EOSINK_REGISTRY_JAVA_OPTS  JVM flags for the registry.      Default: -Xmx512m -XX:TieredStopAtLevel=1 -XX:+UseSerialGC
#   EOSINK_REGISTRY_AOT   1: on Java 25+, the registry's first run records an AOT class cache
#                         (JEP 514), saved by `down` next to the registry in the cache folder;
#                         later starts use it (about 3 s instead of 6). 0: off. Default: 1
#   EOSINK_REGISTRY_TIMEOUT    seconds to wait for the registry. Default: 180
#   EOSINK_KAFKA_VERSION  Apache Kafka version from Maven.      Default: the one in kafka/pom.xml
#   EOSINK_CACHE_DIR      where the jars and the registry are kept.  Default: ~/.cache/eosink
#   EOSINK_SERVICES_ONLY  "pg", "kafka" or "registry", or a comma list: up/down only those
#                         (private beds for chaos tests)
#   EOSINK_PG_DIR         PostgreSQL's data, socket and log.   Default: /tmp/eosink-pg-<hash of state folder>
#   EOSINK_SECURE         1: also the secure parts (below). 0: plaintext only (private beds). Default: 1
#   EOSINK_KAFKA_SASL_PORT       SASL_SSL (SCRAM-SHA-512) listener.            Default: broker port+2
#   EOSINK_KAFKA_MTLS_PORT       SSL listener, ssl.client.auth=required.       Default: broker port+3
#   EOSINK_KAFKA_WRONGHOST_PORT  SASL_SSL listener whose certificate names another host. Default: broker port+4
#
# Secure parts (EOSINK_SECURE=1, the default), for the TLS, SASL and least-privilege tests:
#   - $STATE/tls: a throwaway CA (ca.pem), the broker and PostgreSQL certificate (server.pem,
#     for 127.0.0.1 and localhost), a certificate for the wrong host name (wronghost.pem, for
#     wrong-host.invalid), a client certificate for mTLS (client.pem, CN=eosink_run), and a
#     second CA that signed none of them (untrusted-ca.pem). Java keystores beside them.
#   - the broker gets three more listeners: SASL_SSL with SCRAM-SHA-512 (users created by
#     `kafka-storage format --add-scram`: eosink_run, eosink_admin), SSL with client
#     certificates required (the certificate's CN is the principal), and a SASL_SSL listener
#     serving the wrong-host certificate. The StandardAuthorizer is on: User:ANONYMOUS (the
#     PLAINTEXT listener the fast tests use) and User:eosink_admin are super users; eosink_run
#     holds only the ACLs a test grants it.
#   - PostgreSQL gets ssl=on with the same certificate, listens on 127.0.0.2 too (where the
#     certificate names the wrong host), and two login roles, eosink_migrate and eosink_run,
#     reachable only through `hostssl ... scram-sha-256` (docs/sql/roles.sql creates them).
#   - passwords in $STATE/secrets (one file each); the env file exports the endpoints and paths
#     (EOSINK_SECURE_*).
#
# PostgreSQL runs with wal_level=logical, max_replication_slots=32 and max_wal_senders=32. A
# running cluster made by an older version of this script is reconfigured and restarted by `up`.
#
# Fault injection on a running bed (used by the chaos tests on a private bed):
#   services.sh kafka-kill              SIGKILL the broker
#   services.sh kafka-start             start the broker again (same data)
#   services.sh pg-restart fast|immediate
#
# Logs are kept in $STATE/logs: kafka.log, postgres.log (a link into EOSINK_PG_DIR), registry.log,
# maven.log, registry-maven.log, apt.log.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
STATE=${EOSINK_SERVICES_DIR:-$repo/.services}
KAFKA_PORT=${EOSINK_KAFKA_PORT:-19092}
CONTROLLER_PORT=$((KAFKA_PORT + 1))
PG_PORT=${EOSINK_PG_PORT:-15432}
REGISTRY_PORT=${EOSINK_REGISTRY_PORT:-18080}
REGISTRY_MGMT_PORT=${EOSINK_REGISTRY_MANAGEMENT_PORT:-$((REGISTRY_PORT + 10))}
CACHE=${EOSINK_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/eosink}
ONLY=${EOSINK_SERVICES_ONLY:-}
LOGS=$STATE/logs
# PostgreSQL's files live under /tmp, not in the checkout: the server runs as the postgres
# user when we are root, and it must be able to reach them wherever the repository is cloned.
PGDIR=${EOSINK_PG_DIR:-/tmp/eosink-pg-$(printf '%s' "$STATE" | cksum | cut -d' ' -f1)}
SECURE=${EOSINK_SECURE:-1}
case "$SECURE" in 0|1) ;; *) printf 'services: FAILED: EOSINK_SECURE must be 0 or 1\n' >&2; exit 1 ;; esac
SASL_PORT=${EOSINK_KAFKA_SASL_PORT:-$((KAFKA_PORT + 2))}
MTLS_PORT=${EOSINK_KAFKA_MTLS_PORT:-$((KAFKA_PORT + 3))}
WRONGHOST_PORT=${EOSINK_KAFKA_WRONGHOST_PORT:-$((KAFKA_PORT + 4))}
TLS=$STATE/tls
SECRETS=$STATE/secrets

log() { printf 'services: %s\n' "$*" >&2; }
die() { printf 'services: FAILED: %s\n' "$*" >&2; exit 1; }

alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

# want NAME: whether EOSINK_SERVICES_ONLY (empty: all) includes the service NAME.
want() {
  [ -z "$ONLY" ] && return 0
  case ",$ONLY," in *",$1,"*) return 0 ;; esac
  return 1
}
for _s in ${ONLY//,/ }; do
  case "$_s" in pg|kafka|registry) ;; *) die "EOSINK_SERVICES_ONLY: unknown service '$_s' (pg, kafka, registry, or a comma list)" ;; esac
done

# ---------------------------------------------------------------- Certificates and secrets (EOSINK_SECURE=1)
# secret NAME: prints the password kept in $SECRETS/NAME, making a random one the first time.
secret() {
  local f=$SECRETS/$1
  if [ ! -s "$f" ]; then
    mkdir -p "$SECRETS"; chmod 700 "$SECRETS"
    (umask 077; head -c 64 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' | head -c 24 >"$f")
  fi
  cat "$f"
}

# tls_leaf NAME CN SAN EKU: a key and a certificate signed by the bed's CA, and a PKCS12
# keystore holding both (password: $SECRETS/keystore).
tls_leaf() {
  openssl req -newkey rsa:2048 -nodes -sha256 -subj "/CN=$2" -keyout "$TLS/$1.key" -out "$TLS/$1.csr" &&
  printf 'subjectAltName=%s\nextendedKeyUsage=%s\nbasicConstraints=CA:FALSE\n' "$3" "$4" >"$TLS/$1.ext" &&
  openssl x509 -req -sha256 -days 30 -in "$TLS/$1.csr" -CA "$TLS/ca.pem" -CAkey "$TLS/ca.key" \
    -CAcreateserial -extfile "$TLS/$1.ext" -out "$TLS/$1.pem" &&
  openssl pkcs12 -export -in "$TLS/$1.pem" -inkey "$TLS/$1.key" -certfile "$TLS/ca.pem" -name "$1" \
    -passout "pass:$(secret keystore)" -out "$TLS/$1.p12" &&
  rm -f "$TLS/$1.csr" "$TLS/$1.ext"
}

# tls_make: a throwaway CA and the certificates of the secure listeners, made once per state
# folder (`down` removes them): PEM files for clients, PKCS12 keystores for the broker.
tls_make() {
  [ -f "$TLS/.complete" ] && return 0
  command -v openssl >/dev/null || die "TLS: openssl not found (it makes the test bed's throwaway CA)"
  command -v keytool >/dev/null || die "TLS: keytool not found (Java's; it makes the broker's truststore)"
  local l
  rm -rf "$TLS"; mkdir -p "$TLS"
  {
    openssl req -x509 -newkey rsa:2048 -nodes -sha256 -days 30 -subj "/CN=eosink test bed CA" \
      -keyout "$TLS/ca.key" -out "$TLS/ca.pem" &&
    openssl req -x509 -newkey rsa:2048 -nodes -sha256 -days 30 -subj "/CN=eosink untrusted CA" \
      -keyout "$TLS/untrusted-ca.key" -out "$TLS/untrusted-ca.pem"
  } >"$LOGS/tls.log" 2>&1 || die "TLS: openssl could not make the CA; see $LOGS/tls.log"
  for l in "server localhost DNS:localhost,DNS:127.0.0.1,IP:127.0.0.1 serverAuth" \
      "wronghost wrong-host.invalid DNS:wrong-host.invalid serverAuth" \
      "client eosink_run DNS:eosink_run clientAuth"; do
    # shellcheck disable=SC2086
    tls_leaf $l >>"$LOGS/tls.log" 2>&1 || die "TLS: openssl could not make the ${l%% *} certificate; see $LOGS/tls.log"
  done
  keytool -importcert -noprompt -alias ca -file "$TLS/ca.pem" -keystore "$TLS/truststore.p12" \
    -storetype PKCS12 -storepass "$(secret keystore)" >>"$LOGS/tls.log" 2>&1 ||
    die "TLS: keytool could not make the truststore; see $LOGS/tls.log"
  chmod 600 "$TLS"/*.key
  touch "$TLS/.complete"
  log "TLS: throwaway CA and certificates in $TLS"
}

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

# pg_secure DATA: turns on TLS with the bed's server certificate, listens on 127.0.0.2 as
# well (where that certificate names the wrong host), and lets the least-privilege roles in
# only through hostssl with scram-sha-256. Returns 0 when it changed the files (restart).
pg_secure() {
  local data=$1 hba=$1/pg_hba.conf
  [ "$SECURE" = 1 ] || return 1
  grep -q '^# eosink test bed: TLS' "$data/postgresql.conf" && return 1
  tls_make
  install -m 600 "$TLS/server.pem" "$data/server.crt"
  install -m 600 "$TLS/server.key" "$data/server.key"
  cat >>"$data/postgresql.conf" <<EOF
# eosink test bed: TLS, and the least-privilege roles over hostssl + scram-sha-256 (pg_hba.conf)
listen_addresses = '127.0.0.1,127.0.0.2'
ssl = on
ssl_cert_file = 'server.crt'
ssl_key_file = 'server.key'
password_encryption = 'scram-sha-256'
EOF
  { printf '%s\n' "# eosink test bed: the least-privilege roles only over TLS, with a password" \
      "hostssl all eosink_run,eosink_migrate 127.0.0.0/8 scram-sha-256" \
      "host    all eosink_run,eosink_migrate all reject"
    cat "$hba"; } >"$hba.new" && mv "$hba.new" "$hba"
  if [ "$(id -u)" -eq 0 ]; then chown postgres:postgres "$data/server.crt" "$data/server.key" "$hba"; fi
  return 0
}

# pg_roles: creates the least-privilege roles (docs/sql/roles.sql) and sets their passwords.
pg_roles() {
  [ "$SECURE" = 1 ] || return 0
  psql -h 127.0.0.1 -p "$PG_PORT" -U postgres -d eosink -X -q -v ON_ERROR_STOP=1 \
    -v migrate_role=eosink_migrate -v run_role=eosink_run -v database=eosink \
    -f "$repo/docs/sql/roles.sql" >>"$LOGS/pg-roles.log" 2>&1 ||
    die "PostgreSQL: docs/sql/roles.sql failed; see $LOGS/pg-roles.log"
  # The server turns the passwords into SCRAM verifiers (password_encryption).
  psql -h 127.0.0.1 -p "$PG_PORT" -U postgres -d eosink -X -q -v ON_ERROR_STOP=1 \
    -v run_pw="$(secret pg-eosink_run)" -v migrate_pw="$(secret pg-eosink_migrate)" \
    >>"$LOGS/pg-roles.log" 2>&1 <<'EOF' || die "PostgreSQL: setting the roles' passwords failed; see $LOGS/pg-roles.log"
ALTER ROLE eosink_run PASSWORD :'run_pw';
ALTER ROLE eosink_migrate PASSWORD :'migrate_pw';
EOF
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
    if pg_secure "$data"; then
      log "PostgreSQL on 127.0.0.1:$PG_PORT runs without TLS (made by an older services.sh or with EOSINK_SECURE=0); restarting it"
      pg_as_owner "$bin/pg_ctl" -D "$data" -l "$pglog" -m fast -w -t 60 restart >/dev/null ||
        die "PostgreSQL: restart for TLS failed; see $LOGS/postgres.log"
      pg_ready || die "PostgreSQL: not accepting connections on 127.0.0.1:$PG_PORT after the restart; see $LOGS/postgres.log"
    fi
    pg_roles
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
  pg_secure "$data" || true
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
  pg_roles
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
  local libs dir=$STATE/kafka cfg java_opts secure_listeners="" secure_map="" scram=()
  if [ "$SECURE" = 1 ]; then
    secure_listeners=",SASL_SSL://127.0.0.1:$SASL_PORT,MTLS://127.0.0.1:$MTLS_PORT,WRONGHOST://127.0.0.1:$WRONGHOST_PORT"
    secure_map=",SASL_SSL:SASL_SSL,MTLS:SSL,WRONGHOST:SASL_SSL"
  fi
  if alive "$dir/kafka.pid" && kafka_ready; then
    if [ "$SECURE" = 1 ] && ! grep -q '^listener.name.sasl_ssl' "$dir/server.properties" 2>/dev/null; then
      log "Kafka on 127.0.0.1:$KAFKA_PORT runs without the secure listeners (made by an older services.sh or with EOSINK_SECURE=0); restarting it"
      kafka_stop
    else
      log "Kafka already running on 127.0.0.1:$KAFKA_PORT"; return 0
    fi
  fi
  libs=$(kafka_fetch)
  [ "$SECURE" = 1 ] && tls_make
  mkdir -p "$dir"
  cfg=$dir/server.properties
  cat >"$cfg" <<EOF
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$CONTROLLER_PORT
listeners=PLAINTEXT://127.0.0.1:$KAFKA_PORT,CONTROLLER://127.0.0.1:$CONTROLLER_PORT$secure_listeners
advertised.listeners=PLAINTEXT://127.0.0.1:$KAFKA_PORT$secure_listeners
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT$secure_map
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
  [ "$SECURE" = 1 ] && kafka_secure_config >>"$cfg"
  if [ ! -f "$dir/data/meta.properties" ]; then
    rm -rf "$dir/data"
    # The SCRAM users go into the cluster's first metadata (kafka-storage format --add-scram).
    if [ "$SECURE" = 1 ]; then
      scram=(--add-scram "SCRAM-SHA-512=[name=eosink_run,password=$(secret kafka-eosink_run)]"
        --add-scram "SCRAM-SHA-512=[name=eosink_admin,password=$(secret kafka-eosink_admin)]")
    fi
    java -cp "$libs/*" -Dlog4j2.configurationFile="$here/kafka/log4j2.properties" kafka.tools.StorageTool \
      format -t "$(java -cp "$libs/*" kafka.tools.StorageTool random-uuid 2>/dev/null | tail -1)" -c "$cfg" "${scram[@]}" \
      >"$LOGS/kafka-format.log" 2>&1 || die "Kafka: formatting the KRaft log directory failed; see $LOGS/kafka-format.log"
    [ "$SECURE" = 1 ] && touch "$dir/data/.scram-users"
  fi
  : >"$LOGS/kafka.log"
  java_opts=${EOSINK_KAFKA_JAVA_OPTS:--Xms256m -Xmx1g}
  # shellcheck disable=SC2086
  nohup java $java_opts -Djava.awt.headless=true -Dlog4j2.configurationFile="$here/kafka/log4j2.properties" \
    -cp "$libs/*" kafka.Kafka "$cfg" >>"$LOGS/kafka.log" 2>&1 &
  echo $! >"$dir/kafka.pid"
  local i
  for i in $(seq 1 120); do
    if kafka_ready; then
      log "Kafka $(kafka_version) ready on 127.0.0.1:$KAFKA_PORT (pid $(cat "$dir/kafka.pid"))"
      [ "$SECURE" = 1 ] || return 0
      if [ ! -f "$dir/data/.scram-users" ]; then
        # A log directory formatted without the users (older services.sh): add them with
        # kafka-configs over the PLAINTEXT listener.
        local u
        for u in eosink_run eosink_admin; do
          java -cp "$libs/*" -Dlog4j2.configurationFile="$here/kafka/log4j2.properties" kafka.admin.ConfigCommand \
            --bootstrap-server "127.0.0.1:$KAFKA_PORT" --alter --entity-type users --entity-name "$u" \
            --add-config "SCRAM-SHA-512=[password=$(secret "kafka-$u")]" >>"$LOGS/kafka-scram.log" 2>&1 ||
            die "Kafka: kafka-configs could not create the SCRAM user $u; see $LOGS/kafka-scram.log"
        done
        touch "$dir/data/.scram-users"
      fi
      log "Kafka secure listeners: SASL_SSL 127.0.0.1:$SASL_PORT, mTLS 127.0.0.1:$MTLS_PORT, wrong-host certificate 127.0.0.1:$WRONGHOST_PORT"
      return 0
    fi
    alive "$dir/kafka.pid" || die "Kafka: broker process exited during start-up; see $LOGS/kafka.log"
    sleep 0.5
  done
  die "Kafka: broker not ready on 127.0.0.1:$KAFKA_PORT after 60s; see $LOGS/kafka.log"
}

# kafka_stop: stops the broker this bed started (by its recorded pid), keeping its data.
kafka_stop() {
  local dir=$STATE/kafka i
  if alive "$dir/kafka.pid"; then
    kill "$(cat "$dir/kafka.pid")"
    for i in $(seq 1 60); do alive "$dir/kafka.pid" || break; sleep 0.5; done
    alive "$dir/kafka.pid" && kill -9 "$(cat "$dir/kafka.pid")"
  fi
  rm -f "$dir/kafka.pid"
}

kafka_down() {
  local dir=$STATE/kafka
  kafka_stop
  rm -rf "$dir/data" "$dir/server.properties"
}

# kafka_secure_config: the broker settings of the secure listeners. SASL_SSL: SCRAM-SHA-512
# over TLS. MTLS: TLS with a client certificate required; its CN is the principal. WRONGHOST:
# SASL_SSL serving a certificate for wrong-host.invalid. ACLs are enforced; the PLAINTEXT and
# CONTROLLER listeners' User:ANONYMOUS is a super user, so the fast tests are unaffected.
kafka_secure_config() {
  local ksp
  ksp=$(secret keystore)
  cat <<EOF
# eosink test bed: secure listeners
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
super.users=User:ANONYMOUS;User:eosink_admin
allow.everyone.if.no.acl.found=false
sasl.enabled.mechanisms=SCRAM-SHA-512
ssl.keystore.type=PKCS12
ssl.keystore.location=$TLS/server.p12
ssl.keystore.password=$ksp
ssl.key.password=$ksp
ssl.truststore.type=PKCS12
ssl.truststore.location=$TLS/truststore.p12
ssl.truststore.password=$ksp
ssl.principal.mapping.rules=RULE:^CN=([^,]+)$/\$1/,DEFAULT
listener.name.sasl_ssl.sasl.enabled.mechanisms=SCRAM-SHA-512
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.mtls.ssl.client.auth=required
listener.name.wronghost.sasl.enabled.mechanisms=SCRAM-SHA-512
listener.name.wronghost.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.wronghost.ssl.keystore.type=PKCS12
listener.name.wronghost.ssl.keystore.location=$TLS/wronghost.p12
listener.name.wronghost.ssl.keystore.password=$ksp
listener.name.wronghost.ssl.key.password=$ksp
EOF
}

# ---------------------------------------------------------------- Schema Registry (Apicurio)
REGISTRY_V3=3.3.3          # needs Java 21+
REGISTRY_V2=2.6.13.Final   # runs on Java 17

# java_major BIN: the feature version (17, 21, 25) of a java binary, from its JDK's release
# file when there is one (no JVM start), else from the JVM itself.
java_major() {
  local bin home v=""
  bin=$(readlink -f "$1") || return 1
  home=$(dirname "$(dirname "$bin")")
  if [ -f "$home/release" ]; then
    v=$(sed -n 's/^JAVA_VERSION="\([^"]*\)".*/\1/p' "$home/release")
  fi
  [ -n "$v" ] || v=$("$bin" -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java.specification.version = //p')
  v=${v#1.}
  echo "${v%%.*}"
}

# registry_java21: prints a java binary of version 21 or newer, if there is one: only
# EOSINK_REGISTRY_JAVA_HOME's when it is set, else the first found.
registry_java21() {
  local j m candidates
  if [ -n "${EOSINK_REGISTRY_JAVA_HOME:-}" ]; then
    candidates=("$EOSINK_REGISTRY_JAVA_HOME/bin/java")
  else
    candidates=(/usr/lib/jvm/temurin-25-jdk-amd64/bin/java /usr/lib/jvm/*/bin/java "$(command -v java || true)")
  fi
  for j in "${candidates[@]}"; do
    [ -x "$j" ] || continue
    m=$(java_major "$j")
    if [ -n "$m" ] && [ "$m" -ge 21 ] 2>/dev/null; then echo "$j"; return 0; fi
  done
  return 1
}

# registry_select: sets REG_VERSION and REG_JAVA. Apicurio Registry 3.x needs Java 21+; without
# one (or with EOSINK_REGISTRY_VERSION=2.x) the 2.6 line runs on Java 17.
registry_select() {
  local j21=""
  j21=$(registry_java21) || true
  REG_VERSION=${EOSINK_REGISTRY_VERSION:-}
  if [ -z "$REG_VERSION" ]; then
    if [ -n "$j21" ]; then REG_VERSION=$REGISTRY_V3; else
      REG_VERSION=$REGISTRY_V2
      log "no Java 21+ runtime (EOSINK_REGISTRY_JAVA_HOME, else /usr/lib/jvm/*, java): using Apicurio Registry $REGISTRY_V2 on Java 17+"
    fi
  fi
  case "$REG_VERSION" in
    2.*)
      if [ -n "${EOSINK_REGISTRY_JAVA_HOME:-}" ]; then REG_JAVA=$EOSINK_REGISTRY_JAVA_HOME/bin/java; else REG_JAVA=$(command -v java || true); fi
      [ -x "$REG_JAVA" ] || die "Registry: java not found (Apicurio Registry $REG_VERSION needs Java 17 or newer)"
      ;;
    *)
      [ -n "$j21" ] || die "Registry: Apicurio Registry $REG_VERSION needs Java 21 or newer and none was found (set EOSINK_REGISTRY_JAVA_HOME, or EOSINK_REGISTRY_VERSION=$REGISTRY_V2 for Java 17)"
      REG_JAVA=$j21
      ;;
  esac
}

# registry_fetch VERSION: prints the folder holding the unpacked registry app, fetching
# io.apicurio:apicurio-registry-app:VERSION:tar.gz:all from Maven Central the first time.
registry_fetch() {
  local v=$1 dir stage tgz
  dir=$CACHE/apicurio-registry-$v
  if [ -f "$dir/.complete" ]; then echo "$dir"; return 0; fi
  mkdir -p "$CACHE"
  exec 8>"$CACHE/.apicurio-registry-$v.lock"
  flock 8   # another bed fetching the same version at the same time
  if [ -f "$dir/.complete" ]; then echo "$dir"; return 0; fi
  command -v mvn >/dev/null || die "Registry: mvn not found; Maven fetches Apicurio Registry from Maven Central"
  log "fetching Apicurio Registry $v (io.apicurio:apicurio-registry-app:$v:tar.gz:all, about 150 MB) with Maven (log: $LOGS/registry-maven.log)"
  # Maven does not retry a failed download for a day while these markers exist.
  rm -f "$HOME/.m2/repository/io/apicurio/apicurio-registry-app/$v/"*.lastUpdated 2>/dev/null || true
  stage=$CACHE/.apicurio-registry-$v.download
  rm -rf "$stage" "$dir"; mkdir -p "$stage" "$dir"
  # settings.xml: one mirror to Maven Central for every repository (Apicurio's POMs name others).
  mvn -B -q -s "$here/registry/settings.xml" dependency:copy \
    -Dartifact="io.apicurio:apicurio-registry-app:$v:tar.gz:all" -DoutputDirectory="$stage" \
    >"$LOGS/registry-maven.log" 2>&1 ||
    die "Registry: Maven could not fetch io.apicurio:apicurio-registry-app:$v:tar.gz:all; see $LOGS/registry-maven.log"
  tgz=$(ls "$stage"/*.tar.gz 2>/dev/null | head -1)
  [ -n "$tgz" ] || die "Registry: Maven ran but no archive in $stage; see $LOGS/registry-maven.log"
  tar -xzf "$tgz" -C "$dir" || die "Registry: unpacking $tgz failed"
  rm -rf "$stage"
  [ -f "$dir/quarkus-run.jar" ] || [ -f "$dir/apicurio-registry-app-$v-runner.jar" ] ||
    die "Registry: no quarkus-run.jar or runner jar in $dir"
  touch "$dir/.complete"
  echo "$dir"
}

# registry_http PATH: prints the HTTP status code of GET PATH on the registry (bash only, no curl).
registry_http() {
  local line
  line=$(timeout 5 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$0" || exit 1
    printf "GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n" "$1" >&3
    head -1 <&3' "$REGISTRY_PORT" "$1" 2>/dev/null) || return 1
  set -- $line
  echo "${2:-}"
}

registry_ready() { [ "$(registry_http /apis/ccompat/v7/subjects)" = 200 ]; }

# registry_start: launches the registry in the background (registry_wait waits for it), so
# that it starts while Kafka does.
REG_STARTED=""

registry_start() {
  local dir=$STATE/registry home jar opts="" aot
  mkdir -p "$dir"
  if alive "$dir/registry.pid"; then return 0; fi
  REG_STARTED=1
  if (exec 3<>"/dev/tcp/127.0.0.1/$REGISTRY_PORT") 2>/dev/null; then
    die "Registry: port 127.0.0.1:$REGISTRY_PORT is already in use by another process (set EOSINK_REGISTRY_PORT)"
  fi
  registry_select
  home=$(registry_fetch "$REG_VERSION")
  rm -f "$dir/registry.aot" "$dir/aot-target"
  case "$REG_VERSION" in
    2.*) jar=$home/apicurio-registry-app-$REG_VERSION-runner.jar ;;
    *)
      jar=$home/quarkus-run.jar
      # 3.x keeps its data in an in-memory H2 database; a small JDBC pool starts faster.
      opts="-Dapicurio.datasource.jdbc.initial-size=2 -Dapicurio.datasource.jdbc.min-size=2"
      # Java 25+ (JEP 514): the first run records an ahead-of-time class cache, written when
      # the registry stops (`down`); later runs load it and start about twice as fast.
      if [ "${EOSINK_REGISTRY_AOT:-1}" = 1 ] && [ "$(java_major "$REG_JAVA")" -ge 25 ] 2>/dev/null; then
        aot=$home/aot-$(registry_java_runtime).aot
        if [ -s "$aot" ]; then
          opts="$opts -XX:AOTCache=$aot"
        else
          opts="$opts -XX:AOTCacheOutput=$dir/registry.aot"
          echo "$aot" >"$dir/aot-target"
        fi
      fi
      ;;
  esac
  : >"$LOGS/registry.log"
  echo "$REG_VERSION" >"$dir/version"
  date +%s%N >"$dir/started"
  # shellcheck disable=SC2086
  (cd "$dir" && exec nohup "$REG_JAVA" ${EOSINK_REGISTRY_JAVA_OPTS:--Xmx512m -XX:TieredStopAtLevel=1 -XX:+UseSerialGC} \
    -Djava.awt.headless=true \
    -Dquarkus.http.host=127.0.0.1 -Dquarkus.http.port="$REGISTRY_PORT" \
    -Dquarkus.management.host=127.0.0.1 -Dquarkus.management.port="$REGISTRY_MGMT_PORT" \
    $opts -jar "$jar" >>"$LOGS/registry.log" 2>&1) &
  echo $! >"$dir/registry.pid"
  log "Apicurio Registry $REG_VERSION starting on 127.0.0.1:$REGISTRY_PORT (pid $(cat "$dir/registry.pid"), $REG_JAVA$([ -f "$dir/aot-target" ] && echo ", recording an AOT cache"))"
}

# registry_java_runtime: the full runtime version of REG_JAVA (names its AOT cache file).
registry_java_runtime() {
  local home
  home=$(dirname "$(dirname "$(readlink -f "$REG_JAVA")")")
  sed -n 's/^JAVA_RUNTIME_VERSION="\([^"]*\)".*/\1/p' "$home/release" 2>/dev/null | tr -c 'A-Za-z0-9.\n' '_' | grep . ||
    "$REG_JAVA" -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java.runtime.version = //p' | tr -c 'A-Za-z0-9.\n' '_'
}

registry_wait() {
  local dir=$STATE/registry i n t0
  n=$(( ${EOSINK_REGISTRY_TIMEOUT:-180} * 4 ))
  for i in $(seq 1 "$n"); do
    if registry_ready; then
      alive "$dir/registry.pid" || die "Registry: something answers on 127.0.0.1:$REGISTRY_PORT, but not the registry this bed started; see $LOGS/registry.log"
      if [ -n "$REG_STARTED" ]; then
        t0=$(cat "$dir/started")
        log "Apicurio Registry $(cat "$dir/version") ready at http://127.0.0.1:$REGISTRY_PORT/apis/ccompat/v7 (pid $(cat "$dir/registry.pid"), started in $(awk -v a="$t0" -v b="$(date +%s%N)" 'BEGIN{printf "%.1f", (b-a)/1e9}')s)"
      else
        log "Apicurio Registry already running at http://127.0.0.1:$REGISTRY_PORT/apis/ccompat/v7"
      fi
      return 0
    fi
    alive "$dir/registry.pid" || die "Registry: Apicurio Registry exited during start-up; see $LOGS/registry.log"
    sleep 0.25
  done
  die "Registry: Apicurio Registry not ready (GET http://127.0.0.1:$REGISTRY_PORT/apis/ccompat/v7/subjects != 200) after ${EOSINK_REGISTRY_TIMEOUT:-180}s; see $LOGS/registry.log"
}

registry_down() {
  local dir=$STATE/registry aot
  if alive "$dir/registry.pid"; then
    kill "$(cat "$dir/registry.pid")"
    # A run that records the AOT cache writes it on the way out (10 to 30 s).
    for _ in $(seq 1 120); do alive "$dir/registry.pid" || break; sleep 0.5; done
    alive "$dir/registry.pid" && kill -9 "$(cat "$dir/registry.pid")"
  fi
  if [ -f "$dir/aot-target" ] && [ -s "$dir/registry.aot" ] && grep -q 'AOTCache creation is complete' "$LOGS/registry.log"; then
    aot=$(cat "$dir/aot-target")
    cp "$dir/registry.aot" "$aot.$$" && mv -f "$aot.$$" "$aot" && log "Apicurio Registry: AOT cache saved to $aot (faster starts)"
  fi
  rm -rf "$dir"
}

write_env() {
  cat >"$STATE/env" <<EOF
export KAFKA_BOOTSTRAP_SERVERS=127.0.0.1:$KAFKA_PORT
export DATABASE_URL=postgres://postgres@127.0.0.1:$PG_PORT/eosink?sslmode=disable
export EOSINK_SERVICES_DIR=$STATE
export EOSINK_PG_BINDIR=$(pg_bindir 2>/dev/null || true)
export EOSINK_PG_DATA=$PGDIR/data
EOF
  if alive "$STATE/registry/registry.pid"; then
    echo "export EOSINK_REGISTRY_URL=http://127.0.0.1:$REGISTRY_PORT/apis/ccompat/v7" >>"$STATE/env"
  fi
  if [ "$SECURE" = 1 ] && [ -f "$TLS/.complete" ]; then
    cat >>"$STATE/env" <<EOF
export EOSINK_SECURE_KAFKA_SASL=127.0.0.1:$SASL_PORT
export EOSINK_SECURE_KAFKA_MTLS=127.0.0.1:$MTLS_PORT
export EOSINK_SECURE_KAFKA_WRONGHOST=127.0.0.1:$WRONGHOST_PORT
export EOSINK_SECURE_KAFKA_USER=eosink_run
export EOSINK_SECURE_KAFKA_PASSWORD_FILE=$SECRETS/kafka-eosink_run
export EOSINK_SECURE_PG_HOST=127.0.0.1
export EOSINK_SECURE_PG_WRONGHOST=127.0.0.2
export EOSINK_SECURE_PG_PORT=$PG_PORT
export EOSINK_SECURE_PG_RUN_USER=eosink_run
export EOSINK_SECURE_PG_RUN_PASSWORD_FILE=$SECRETS/pg-eosink_run
export EOSINK_SECURE_PG_MIGRATE_USER=eosink_migrate
export EOSINK_SECURE_PG_MIGRATE_PASSWORD_FILE=$SECRETS/pg-eosink_migrate
export EOSINK_SECURE_CA=$TLS/ca.pem
export EOSINK_SECURE_UNTRUSTED_CA=$TLS/untrusted-ca.pem
export EOSINK_SECURE_CLIENT_CERT=$TLS/client.pem
export EOSINK_SECURE_CLIENT_KEY=$TLS/client.key
EOF
  fi
}

cmd=${1:-up}
mkdir -p "$LOGS"
case "$cmd" in
  up)
    # The registry's JVM starts in the background while PostgreSQL and Kafka come up.
    if want registry; then registry_start; fi
    if want pg; then pg_up; fi
    if want kafka; then kafka_up; fi
    if want registry; then registry_wait; fi
    write_env
    log "env written to $STATE/env"
    ;;
  down)
    if want kafka; then kafka_down; fi
    if want registry; then registry_down; fi
    if want pg; then pg_down; fi
    # The env file goes with PostgreSQL or Kafka; when only the registry stopped, it loses that line.
    if want pg && want kafka; then rm -rf "$TLS" "$SECRETS"; fi
    if want pg || want kafka; then rm -f "$STATE/env"; elif [ -f "$STATE/env" ]; then write_env; fi
    log "stopped"
    ;;
  status)
    if alive "$STATE/kafka/kafka.pid"; then echo "kafka: running pid $(cat "$STATE/kafka/kafka.pid") on 127.0.0.1:$KAFKA_PORT"; else echo "kafka: stopped"; fi
    if pg_ready 2>/dev/null; then echo "postgres: running on 127.0.0.1:$PG_PORT (wal_level=$(pg_sql 'SHOW wal_level' 2>/dev/null), ssl=$(pg_sql 'SHOW ssl' 2>/dev/null))"; else echo "postgres: stopped"; fi
    if [ "$SECURE" = 1 ] && grep -q '^listener.name.sasl_ssl' "$STATE/kafka/server.properties" 2>/dev/null; then
      echo "kafka secure listeners: SASL_SSL 127.0.0.1:$SASL_PORT, mTLS 127.0.0.1:$MTLS_PORT, wrong-host certificate 127.0.0.1:$WRONGHOST_PORT (CA $TLS/ca.pem)"
    fi
    if alive "$STATE/registry/registry.pid"; then
      if registry_ready; then r=ready; else r="not answering"; fi
      echo "registry: running pid $(cat "$STATE/registry/registry.pid") Apicurio Registry $(cat "$STATE/registry/version" 2>/dev/null) on http://127.0.0.1:$REGISTRY_PORT/apis/ccompat/v7 ($r)"
    else echo "registry: stopped"; fi
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
  kafka-fetch)
    # The broker jars' folder in the cache (fetched when missing), for test/docker/images.sh.
    kafka_fetch
    ;;
  kafka-version)
    kafka_version
    ;;
  *) die "unknown command '$cmd' (up|down|status|env|kafka-kill|kafka-start|pg-restart|kafka-fetch|kafka-version)" ;;
esac
