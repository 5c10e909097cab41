#!/usr/bin/env bash
# Peer benchmark: runs the Debezium JDBC sink connector on Kafka Connect (standalone mode,
# everything on one flat classpath) from TOPIC into a PostgreSQL table, waits until the table
# holds EXPECTED rows, prints the throughput and stops Connect.
#
#   run-peer.sh TOPIC EXPECTED
#
# The topic must already hold EXPECTED records in the JsonConverter schema envelope
# ({"schema":...,"payload":...}); `make bench` preloads such a topic (bench-envelope) and runs
# this script on it (test/bench/main.go). It also runs it in upsert/delete mode on a topic of
# Debezium change events (bench-cdc, test/bench/cdc.go), with the table created by the bench
# (PEER_CREATE_TABLE=0) and PEER_DONE_SQL saying when the topic has been applied.
#
# Environment:
#   KAFKA_BOOTSTRAP_SERVERS, DATABASE_URL  required (read from <repo>/.services/env when unset)
#   PEER_TABLE        target table, in schema PEER_SCHEMA.   Default: dbz_<topic, non-alnum -> _>
#   PEER_SCHEMA       PostgreSQL schema for the table.      Default: peer
#   PEER_TASKS        connector tasks.max.                   Default: 2
#   PEER_BATCH_SIZE   connector batch.size.                  Default: 5000
#   PEER_MAX_POLL     consumer max.poll.records.             Default: PEER_BATCH_SIZE
#   PEER_INSERT_MODE  insert | upsert (upsert: primary key on id).               Default: insert
#   PEER_PK_MODE      primary.key.mode for upsert: record_value (field id) | record_key.  Default: record_value
#   PEER_DELETE_ENABLED delete.enabled (deletes and tombstones delete by key; needs record_key). Default: false
#   PEER_KEY_CONVERTER string | json (JsonConverter, schemas on: record_key needs a struct key). Default: string
#   PEER_REDUCTION    use.reduction.buffer (keeps the last change per key in a batch). Default: false
#   PEER_CREATE_TABLE 1 creates PEER_SCHEMA.PEER_TABLE (the insert benchmark's columns); 0: the
#                     caller created it (it must have loaded_at timestamptz DEFAULT clock_timestamp()). Default: 1
#   PEER_DONE_SQL     a query that returns true once the topic is applied.   Default: count(*) >= EXPECTED
#   PEER_UNNEST       dialect.postgres.unnest.insert.enabled (true|false).         Default: false
#   PEER_REWRITE      pgjdbc reWriteBatchedInserts (true|false).                   Default: true
#   PEER_VALUE_SCHEMAS JsonConverter schemas.enable (the Debezium sink fails without schemas). Default: true
#   PEER_HEAP         JVM heap (-Xms and -Xmx).              Default: 1g
#   PEER_JAVA_OPTS    extra JVM flags.
#   PEER_REST_PORT    Connect REST port on 127.0.0.1.        Default: 18383
#   PEER_TIMEOUT      seconds to wait for EXPECTED rows.     Default: 900
#   PEER_KEEP_TABLE   1 keeps the table after the run.       Default: 1 (it is dropped at the next run)
#   PEER_LIBS         jar folder.   Default: ~/.cache/eosink/peer-libs-<debezium version in pom.xml>
#
# Output: one summary line "peer: RESULT ..." with rows, seconds and rows/second, measured two ways:
#   wall   = from the java process start to the poll that first saw EXPECTED rows (includes JVM,
#            plugin scan, consumer-group join; polled every 0.5 s),
#   rows   = from the first row's to the last row's loaded_at (clock_timestamp() default column),
#   and the CPU seconds (user+system) of the Connect JVM, in all and after the first rows appeared,
#   and the 1-minute load average (other work on the machine skews every number).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
die() { printf 'peer: FAILED: %s\n' "$*" >&2; exit 1; }
log() { printf 'peer: %s\n' "$*" >&2; }

[ $# -eq 2 ] || die "usage: run-peer.sh TOPIC EXPECTED"
TOPIC=$1 EXPECTED=$2
[[ $EXPECTED =~ ^[0-9]+$ ]] || die "EXPECTED must be a number"

if [ -z "${KAFKA_BOOTSTRAP_SERVERS:-}" ] || [ -z "${DATABASE_URL:-}" ]; then
  [ -f "$repo/.services/env" ] || die "KAFKA_BOOTSTRAP_SERVERS/DATABASE_URL unset and no $repo/.services/env (run test/services/services.sh up)"
  # shellcheck disable=SC1091
  . "$repo/.services/env"
fi

SCHEMA=${PEER_SCHEMA:-peer}
TABLE=${PEER_TABLE:-dbz_$(printf '%s' "$TOPIC" | tr -c 'A-Za-z0-9_' '_')}
TASKS=${PEER_TASKS:-2}
BATCH=${PEER_BATCH_SIZE:-5000}
MAXPOLL=${PEER_MAX_POLL:-$BATCH}
MODE=${PEER_INSERT_MODE:-insert}
UNNEST=${PEER_UNNEST:-false}
REWRITE=${PEER_REWRITE:-true}
HEAP=${PEER_HEAP:-1g}
REST_PORT=${PEER_REST_PORT:-18383}
TIMEOUT=${PEER_TIMEOUT:-900}
DBZ_VERSION=$(sed -n 's:.*<debezium.version>\(.*\)</debezium.version>.*:\1:p' "$here/pom.xml")
KAFKA_VERSION=$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$here/pom.xml")
CACHE=${EOSINK_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/eosink}
LIBS=${PEER_LIBS:-$CACHE/peer-libs-$DBZ_VERSION}

# ------------------------------------------------------------------ jars
if [ ! -f "$LIBS/.complete" ]; then
  log "resolving Kafka Connect $KAFKA_VERSION + Debezium JDBC sink $DBZ_VERSION into $LIBS (Maven)"
  rm -rf "$LIBS"; mkdir -p "$LIBS"
  mvn -B -q -f "$here/pom.xml" dependency:copy-dependencies -DoutputDirectory="$LIBS" >"$LIBS/../peer-maven.log" 2>&1 ||
    die "Maven could not resolve the jars; see $LIBS/../peer-maven.log"
  touch "$LIBS/.complete"
fi

# ------------------------------------------------------------------ database
PSQL=$(command -v psql || true)
[ -n "$PSQL" ] || PSQL=$(ls ${EOSINK_PG_BINDIR:-/usr/lib/postgresql/*/bin}/psql 2>/dev/null | head -1)
[ -x "$PSQL" ] || die "psql not found"
sql() { "$PSQL" "$DATABASE_URL" -X -v ON_ERROR_STOP=1 -qAt -c "$1"; }

# postgres://user[:password]@host[:port]/db[?params]  ->  JDBC URL, user, password
re='^postgres(ql)?://(([^:@/]*)(:([^@/]*))?@)?([^:/?]+)(:([0-9]+))?/([^?]+)(\?(.*))?$'
[[ $DATABASE_URL =~ $re ]] || die "cannot parse DATABASE_URL=$DATABASE_URL"
PGUSER_=${BASH_REMATCH[3]:-postgres} PGPASS_=${BASH_REMATCH[5]:-} PGHOST_=${BASH_REMATCH[6]}
PGPORT_=${BASH_REMATCH[8]:-5432} PGDB_=${BASH_REMATCH[9]} PGPARAMS_=${BASH_REMATCH[11]:-}
JDBC_URL="jdbc:postgresql://$PGHOST_:$PGPORT_/$PGDB_?reWriteBatchedInserts=$REWRITE${PGPARAMS_:+&$PGPARAMS_}"

PK_MODE=${PEER_PK_MODE:-record_value}
DELETE_ENABLED=${PEER_DELETE_ENABLED:-false}
KEY_CONVERTER=${PEER_KEY_CONVERTER:-string}
REDUCTION=${PEER_REDUCTION:-false}
DONE_SQL=${PEER_DONE_SQL:-SELECT count(*) >= $EXPECTED FROM $SCHEMA.$TABLE}
case $KEY_CONVERTER in
  string) KEY_CONV="key.converter=org.apache.kafka.connect.storage.StringConverter" ;;
  json) KEY_CONV=$'key.converter=org.apache.kafka.connect.json.JsonConverter\nkey.converter.schemas.enable=true' ;;
  *) die "PEER_KEY_CONVERTER must be string or json" ;;
esac
pk=""
[ "$MODE" = upsert ] && pk=" PRIMARY KEY"
[ "${PEER_CREATE_TABLE:-1}" = 1 ] && sql "CREATE SCHEMA IF NOT EXISTS $SCHEMA;
     DROP TABLE IF EXISTS $SCHEMA.$TABLE;
     CREATE TABLE $SCHEMA.$TABLE (
       id        bigint NOT NULL$pk,
       account   text   NOT NULL,
       currency  text,
       amount    bigint NOT NULL,
       ts        timestamptz NOT NULL,
       note      text,
       loaded_at timestamptz NOT NULL DEFAULT clock_timestamp())"

# ------------------------------------------------------------------ Connect configuration
RUN=$(mktemp -d /tmp/peer-run.XXXXXX)
NAME="peer-dbz-$TABLE-$(date +%s)"     # a fresh consumer group (connect-$NAME) for every run
cat >"$RUN/worker.properties" <<EOF
bootstrap.servers=$KAFKA_BOOTSTRAP_SERVERS
$KEY_CONV
value.converter=org.apache.kafka.connect.json.JsonConverter
value.converter.schemas.enable=${PEER_VALUE_SCHEMAS:-true}
offset.storage.file.filename=$RUN/connect.offsets
offset.flush.interval.ms=10000
listeners=http://127.0.0.1:$REST_PORT
# Everything is on the classpath; the connector ships a ServiceLoader manifest, so no reflective scan.
plugin.discovery=service_load
connector.client.config.override.policy=All
# Sink consumers start at the earliest offset; fetch in large chunks.
consumer.auto.offset.reset=earliest
consumer.max.poll.records=$MAXPOLL
consumer.fetch.min.bytes=1
consumer.max.partition.fetch.bytes=4194304
EOF
cat >"$RUN/connector.properties" <<EOF
name=$NAME
connector.class=io.debezium.connector.jdbc.JdbcSinkConnector
tasks.max=$TASKS
topics=$TOPIC
connection.url=$JDBC_URL
connection.username=$PGUSER_
connection.password=$PGPASS_
connection.pool.min_size=1
connection.pool.max_size=4
insert.mode=$MODE
primary.key.mode=$([ "$MODE" = upsert ] && echo "$PK_MODE" || echo none)
$([ "$MODE" = upsert ] && echo primary.key.fields=id)
delete.enabled=$DELETE_ENABLED
schema.evolution=none
collection.name.format=$SCHEMA.$TABLE
batch.size=$BATCH
use.reduction.buffer=$REDUCTION
dialect.postgres.unnest.insert.enabled=$UNNEST
EOF

# ------------------------------------------------------------------ run
JAVA_OPTS="-Xms$HEAP -Xmx$HEAP -XX:+UseG1GC -XX:MaxGCPauseMillis=50 -Djava.awt.headless=true ${PEER_JAVA_OPTS:-}"
log "connector $NAME: topic $TOPIC -> $SCHEMA.$TABLE, tasks=$TASKS batch.size=$BATCH max.poll.records=$MAXPOLL insert.mode=$MODE unnest=$UNNEST reWriteBatchedInserts=$REWRITE delete.enabled=$DELETE_ENABLED primary.key.mode=$PK_MODE use.reduction.buffer=$REDUCTION"
log "java $JAVA_OPTS; log and configs in $RUN"
pid=""
cleanup() {
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 60); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    kill -0 "$pid" 2>/dev/null && kill -9 "$pid" 2>/dev/null
  fi
  # Remove the run's consumer group, with the broker's own tool when its jars are at hand.
  local klibs="$CACHE/kafka-libs-$KAFKA_VERSION"
  if ls "$klibs"/kafka-tools-*.jar >/dev/null 2>&1; then
    java -cp "$klibs/*" -Dlog4j2.configurationFile="$here/log4j2.properties" \
      org.apache.kafka.tools.consumer.group.ConsumerGroupCommand --bootstrap-server "$KAFKA_BOOTSTRAP_SERVERS" \
      --delete --group "connect-$NAME" >"$RUN/group-delete.log" 2>&1 || true
  fi
  [ "${PEER_KEEP_TABLE:-1}" = 1 ] || sql "DROP TABLE IF EXISTS $SCHEMA.$TABLE" || true
}
trap cleanup EXIT

t0=$(date +%s.%N)
# shellcheck disable=SC2086
java $JAVA_OPTS -Dlog4j2.configurationFile="$here/log4j2.properties" -cp "$LIBS/*" \
  org.apache.kafka.connect.cli.ConnectStandalone "$RUN/worker.properties" "$RUN/connector.properties" \
  >"$RUN/connect.log" 2>&1 &
pid=$!

cpu_of() { awk -v hz="$(getconf CLK_TCK)" '{printf "%.1f", ($14+$15)/hz}' "/proc/$1/stat" 2>/dev/null || echo 0; }
count=0 cpu_first=""
deadline=$(( $(date +%s) + TIMEOUT ))
while :; do
  count=$(sql "SELECT count(*) FROM $SCHEMA.$TABLE")
  [ -z "$cpu_first" ] && [ "$count" -gt 0 ] && cpu_first=$(cpu_of "$pid")
  [ "$(sql "$DONE_SQL")" = t ] && break
  kill -0 "$pid" 2>/dev/null || { tail -40 "$RUN/connect.log" >&2; die "Connect exited; log: $RUN/connect.log"; }
  if grep -q "Task threw an uncaught and unrecoverable exception\|is being killed and will not recover" "$RUN/connect.log"; then
    grep -m1 -A30 "Task threw an uncaught" "$RUN/connect.log" >&2 || true
    die "connector task failed at $count rows; log: $RUN/connect.log"
  fi
  [ "$(date +%s)" -lt "$deadline" ] || die "timed out after ${TIMEOUT}s with $count of $EXPECTED rows; log: $RUN/connect.log"
  sleep 0.5
done
t1=$(date +%s.%N)
# CPU seconds (user+system) of the Connect JVM: in all, and since the poll that saw the first rows.
cpu=$(cpu_of "$pid")
cpu_load=$(awk -v a="${cpu_first:-0}" -v b="$cpu" 'BEGIN{printf "%.1f", b-a}')
loadavg=$(cut -d' ' -f1 /proc/loadavg)

read -r rows span first_ms <<<"$(sql "SELECT count(*), extract(epoch FROM max(loaded_at) - min(loaded_at)),
  round(extract(epoch FROM min(loaded_at)) * 1000) FROM $SCHEMA.$TABLE" | tr '|' ' ')"
wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.2f", b-a}')
startup=$(awk -v a="$t0" -v f="$first_ms" 'BEGIN{printf "%.2f", f/1000-a}')
rps_wall=$(awk -v n="$rows" -v s="$wall" 'BEGIN{printf "%.0f", n/s}')
rps_rows=$(awk -v n="$rows" -v s="$span" 'BEGIN{ if (s>0) printf "%.0f", n/s; else print "inf" }')
dups=$(sql "SELECT count(*) - count(DISTINCT id) FROM $SCHEMA.$TABLE")
log "Connect log: $RUN/connect.log"
extra=""
[ "$MODE" = upsert ] && extra=" primary.key.mode=$PK_MODE delete.enabled=$DELETE_ENABLED use.reduction.buffer=$REDUCTION"
printf 'peer: RESULT debezium-jdbc %s topic=%s rows=%s duplicates=%s tasks=%s batch.size=%s insert.mode=%s unnest=%s%s | wall %ss -> %s rows/s (first row after %ss) | first-to-last row %.2fs -> %s rows/s | connect cpu %ss (%ss after first row) | loadavg %s\n' \
  "$DBZ_VERSION" "$TOPIC" "$rows" "$dups" "$TASKS" "$BATCH" "$MODE" "$UNNEST" "$extra" "$wall" "$rps_wall" "$startup" "$span" "$rps_rows" "$cpu" "$cpu_load" "$loadavg"
