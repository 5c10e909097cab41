#!/usr/bin/env bash
# End-to-end demo of the cdc plugin (run it with `make cdc`):
#   1. fetch Kafka Connect and Debezium (once), create a source database with a few tables,
#   2. start Debezium's PostgreSQL connector, writing Avro through the Schema Registry,
#   3. run `eosink run -config examples/cdc/pipeline.yaml` while the source changes, SIGKILL it
#      mid-stream and restart it,
#   4. compare the rows' contents of source and replica, per table, then show the lag and the
#      dead-lettered events of the table without a primary key.
# Needs KAFKA_BOOTSTRAP_SERVERS, DATABASE_URL and EOSINK_REGISTRY_URL (make cdc sets them),
# bin/eosink and bin/cdc (make build; or EOSINK_BIN and CDC_BIN), and java 17+.
# STEPS (default 300) source transactions run while the sink is killed and restarted.
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${KAFKA_BOOTSTRAP_SERVERS:?set KAFKA_BOOTSTRAP_SERVERS (make cdc does)}"
: "${DATABASE_URL:?set DATABASE_URL (make cdc does)}"
: "${EOSINK_REGISTRY_URL:?set EOSINK_REGISTRY_URL (make cdc does)}"
eosink=${EOSINK_BIN:-bin/eosink}
cdc=${CDC_BIN:-bin/cdc}
STEPS=${STEPS:-300}
seed=$(date +%s)
run_id=${CDC_RUN_ID:-$seed}
LOGDIR=${LOGDIR:-.services/logs}
work=$LOGDIR/cdc-demo-$run_id
mkdir -p "$work"
SOURCE=cdc_demo_source_$run_id
SLOT=cdc_demo_$run_id
export CDC_TOPIC_PREFIX=cdcdemo$run_id CDC_PIPELINE=cdc-demo-$run_id CDC_GROUP=cdc-demo-$run_id
export CDC_REPLICA_SCHEMA=cdc_demo_$run_id CDC_OFFSETS_SCHEMA=cdc_demo_eosink_$run_id
config=examples/cdc/pipeline.yaml
say() { printf '\n== %s\n' "$*"; }

dbz_pid='' sink_pid='' work_pid=''
cleanup() {
  local rc=$?
  for p in $work_pid $sink_pid; do kill -9 "$p" 2>/dev/null || true; done
  if [ -n "$dbz_pid" ]; then
    kill -TERM "$dbz_pid" 2>/dev/null || true
    for _ in $(seq 1 60); do kill -0 "$dbz_pid" 2>/dev/null || break; sleep 0.5; done
    kill -9 "$dbz_pid" 2>/dev/null || true
  fi
  "$cdc" cleanup -source "$SOURCE" -slot "$SLOT" -publication "$SLOT" ||
    echo "cleanup: could not drop slot $SLOT or database $SOURCE"
  exit "$rc"
}
trap cleanup EXIT

positions() {
  psql "$DATABASE_URL" -tAc "SELECT count(*) FROM \"$CDC_OFFSETS_SCHEMA\".cdc_positions" 2>/dev/null || echo 0
}

say "fetching Kafka Connect, Debezium and the Apicurio converter (once; the first time from Maven Central takes minutes)"
eval "$(bash test/services/debezium.sh fetch)"

say "creating source database $SOURCE (accounts: numeric, timestamptz, jsonb, uuid, bytea; lines: composite primary key; nopk: no primary key) and replica schema $CDC_REPLICA_SCHEMA"
"$cdc" setup -source "$SOURCE" -replica "$CDC_REPLICA_SCHEMA" -steps 30 -seed "$seed"

say "starting Debezium (Kafka Connect standalone; Avro through the registry; log: $work/connect.log)"
port=$("$cdc" free-port)
registry_v2=${EOSINK_REGISTRY_URL%%/apis/*}/apis/registry/v2
discovery=service_load
[ -f "$EOSINK_DEBEZIUM_PLUGINS/apicurio-converter/eosink-converter-service-manifest.jar" ] || discovery=hybrid_warn
{
  echo "bootstrap.servers=$KAFKA_BOOTSTRAP_SERVERS"
  echo "offset.storage.file.filename=$work/connect.offsets"
  echo "offset.flush.interval.ms=1000"
  echo "listeners=http://127.0.0.1:$port"
  echo "plugin.path=$EOSINK_DEBEZIUM_PLUGINS"
  echo "plugin.discovery=$discovery"
  for side in key value; do
    echo "$side.converter=io.apicurio.registry.utils.converter.AvroConverter"
    echo "$side.converter.apicurio.registry.url=$registry_v2"
    echo "$side.converter.apicurio.registry.auto-register=true"
    echo "$side.converter.apicurio.registry.find-latest=true"
    echo "$side.converter.apicurio.registry.as-confluent=true"   # Confluent wire format: magic byte, 4-byte id
    echo "$side.converter.apicurio.registry.use-id=contentId"
    echo "$side.converter.apicurio.registry.headers.enabled=false"
  done
} >"$work/worker.properties"
pg_host=$(sed -E 's|^[a-z]+://([^@/]*@)?([^:/?]+).*|\2|' <<<"$DATABASE_URL")
pg_port=$(sed -E 's|^[a-z]+://([^@/]*@)?[^:/?]+:([0-9]+).*|\2|' <<<"$DATABASE_URL")
pg_user=$(sed -E 's|^[a-z]+://([^:@/]*)[:@].*|\1|' <<<"$DATABASE_URL")
cat >"$work/connector.properties" <<PROPS
name=$CDC_TOPIC_PREFIX
connector.class=io.debezium.connector.postgresql.PostgresConnector
tasks.max=1
plugin.name=pgoutput
database.hostname=$pg_host
database.port=$pg_port
database.user=$pg_user
database.dbname=$SOURCE
topic.prefix=$CDC_TOPIC_PREFIX
table.include.list=public.accounts,public.lines,public.nopk
slot.name=$SLOT
publication.name=$SLOT
publication.autocreate.mode=filtered
snapshot.mode=initial
topic.creation.default.replication.factor=1
topic.creation.default.partitions=3
PROPS
${EOSINK_DEBEZIUM_JAVA:-java} -Xmx512m -Djava.awt.headless=true -Dlog4j2.configurationFile="$EOSINK_DEBEZIUM_LOG4J" \
  -cp "$EOSINK_DEBEZIUM_LIBS/*" org.apache.kafka.connect.cli.ConnectStandalone \
  "$work/worker.properties" "$work/connector.properties" >"$work/connect.log" 2>&1 &
dbz_pid=$!
topics=$CDC_TOPIC_PREFIX.public.accounts,$CDC_TOPIC_PREFIX.public.lines,$CDC_TOPIC_PREFIX.public.nopk
"$cdc" wait -source "$SOURCE" -slot "$SLOT" -rest "http://127.0.0.1:$port" -connector "$CDC_TOPIC_PREFIX" -topics "$topics" ||
  { tail -20 "$work/connect.log"; exit 1; }
echo "Debezium runs (pid $dbz_pid); its snapshot is in topics $topics"

say "eosink migrate up -config $config"
"$eosink" migrate up -config "$config"

say "running $STEPS source transactions (inserts, updates, primary key changes, deletes) while the sink runs (log: $work/sink-1.log)"
"$cdc" workload -source "$SOURCE" -steps "$STEPS" -seed "$((seed + 1))" -pause 20ms &
work_pid=$!
"$eosink" run -config "$config" >"$work/sink-1.log" 2>&1 &
sink_pid=$!
n=0
for _ in $(seq 1 600); do
  n=$(positions)
  [ "$n" -ge 60 ] && break
  kill -0 "$sink_pid" 2>/dev/null || { echo "sink exited early; see $work/sink-1.log"; tail -5 "$work/sink-1.log"; exit 1; }
  sleep 0.1
done
kill -9 "$sink_pid"
wait "$sink_pid" 2>/dev/null || true
sink_pid=''
mid="the workload had already finished"
kill -0 "$work_pid" 2>/dev/null && mid="mid-stream: the source keeps changing"
echo "killed the sink with SIGKILL; $(positions) row positions written at that moment; $mid"
sleep 2

say "restarting the sink (log: $work/sink-2.log)"
"$eosink" run -config "$config" >"$work/sink-2.log" 2>&1 &
sink_pid=$!
wait "$work_pid"
work_pid=''
echo "workload done"

say "comparing row contents, source vs replica (waiting for the sink to catch up)"
status=0
"$cdc" verify -source "$SOURCE" -replica "$CDC_REPLICA_SCHEMA" -wait 3m || status=1
kill -0 "$sink_pid" 2>/dev/null || { echo "the sink exited; see $work/sink-2.log"; status=1; }

say "eosink lag -schema $CDC_OFFSETS_SCHEMA -pipeline $CDC_PIPELINE"
lag_out=''
for _ in $(seq 1 60); do
  lag_out=$("$eosink" lag -schema "$CDC_OFFSETS_SCHEMA" -pipeline "$CDC_PIPELINE")
  grep -q '^total lag: 0\($\|,\)' <<<"$lag_out" && break
  sleep 0.5
done
echo "$lag_out"
grep -q '^total lag: 0\($\|,\)' <<<"$lag_out" || status=1
echo "lag: $(sed -n 's/^total lag: \([0-9]*\).*/\1/p' <<<"$lag_out")"

say "refused: the table without a primary key (eosink dlq list -schema $CDC_OFFSETS_SCHEMA -pipeline $CDC_PIPELINE)"
dlq_out=$("$eosink" dlq list -schema "$CDC_OFFSETS_SCHEMA" -pipeline "$CDC_PIPELINE")
head -3 <<<"$dlq_out"
refused=$(psql "$DATABASE_URL" -tAc "SELECT count(*) || ' events dead-lettered; reason: ' || coalesce(max(error), '')
  FROM \"$CDC_OFFSETS_SCHEMA\".dead_letters WHERE topic = '$CDC_TOPIC_PREFIX.public.nopk'")
echo "nopk: $refused"
grep -q 'has no primary key' <<<"$refused" || { echo "nopk's events were not refused"; status=1; }
others=$(psql "$DATABASE_URL" -tAc "SELECT count(*) FROM \"$CDC_OFFSETS_SCHEMA\".dead_letters WHERE topic <> '$CDC_TOPIC_PREFIX.public.nopk'")
[ "$others" = 0 ] || { echo "$others dead letters of other tables"; status=1; }
kill -TERM "$sink_pid"
wait "$sink_pid" || { echo "the sink did not stop cleanly; see $work/sink-2.log"; status=1; }
sink_pid=''
[ "$status" -eq 0 ] && echo "OK: replica equals source after SIGKILL and restart; replica kept in schema $CDC_REPLICA_SCHEMA"
exit "$status"
