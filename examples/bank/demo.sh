#!/usr/bin/env bash
# The bank invariant, end to end (run it with `make txdemo`; examples/bank/README.md):
#   per phase: a fresh source database (accounts_a, accounts_b, orders, order_lines), Debezium's
#   PostgreSQL connector with provide.transaction.metadata=true (JsonConverter; data topics of
#   3 partitions, the transaction topic of 1), `eosink run -config examples/bank/pipeline.yaml`,
#   and bin/bank run: concurrent transfers, orders written and deleted whole, transactions of
#   10,000+ rows, while a reader queries the replica 40 times a second for the invariants
#   (total balance constant, no line without its order, each order's line count).
#   1. control: sink.consistency partition, no faults: the reader must see violations.
#   2. transaction: sink.consistency transaction under faults (SIGKILLs of the sink, a second
#      member joining and leaving, a SIGKILL of the holder while it stands by, a broker
#      restart, a replay from the earliest offsets): the reader must see none, and the
#      replica must equal the source.
# Settings (environment):
#   TXDEMO_PHASE           control, transaction or both (default both)
#   TXDEMO_TX_CONSISTENCY  the transaction phase's sink.consistency (default transaction);
#                          partition runs the faults against partition mode, which must then
#                          show violations (a check of the harness under faults)
#   TXDEMO_ACCOUNTS (5000 per table), TXDEMO_WORKERS (8), TXDEMO_STEPS (600 transfers per
#   worker), TXDEMO_ORDER_STEPS (160), TXDEMO_PAUSE (30ms), TXDEMO_ORDER_PAUSE (120ms),
#   TXDEMO_SEED (default: the time), TXDEMO_WAIT (3m: how long the replica may take to equal
#   the source), TXDEMO_MAX_RECORDS (500) and TXDEMO_MAX_WAIT (50ms): the sink's batches,
#   TXDEMO_PROGRESS_TIMEOUT (60: seconds a fault may leave the replica unchanged).
# Needs KAFKA_BOOTSTRAP_SERVERS and DATABASE_URL (make txdemo sets them), bin/eosink, bin/cdc
# and bin/bank (make txdemo builds them; or EOSINK_BIN, CDC_BIN, BANK_BIN), and java 17+.
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${KAFKA_BOOTSTRAP_SERVERS:?set KAFKA_BOOTSTRAP_SERVERS (make txdemo does)}"
: "${DATABASE_URL:?set DATABASE_URL (make txdemo does)}"
eosink=${EOSINK_BIN:-bin/eosink}
cdc=${CDC_BIN:-bin/cdc}
bank=${BANK_BIN:-bin/bank}
PHASE=${TXDEMO_PHASE:-both}
TX_CONSISTENCY=${TXDEMO_TX_CONSISTENCY:-transaction}
ACCOUNTS=${TXDEMO_ACCOUNTS:-5000}
seed=${TXDEMO_SEED:-$(date +%s)}
RANDOM=$seed
run_id=${TXDEMO_RUN_ID:-$(date +%s)}
LOGDIR=${LOGDIR:-.services/logs}
work=$LOGDIR/txdemo-$run_id
mkdir -p "$work"
config=examples/bank/pipeline.yaml
case "$PHASE" in control | transaction | both) ;; *) echo "TXDEMO_PHASE must be control, transaction or both"; exit 2 ;; esac
case "$TX_CONSISTENCY" in partition | transaction) ;; *) echo "TXDEMO_TX_CONSISTENCY must be partition or transaction"; exit 2 ;; esac
say() { printf '\n== %s\n' "$*"; }
fault_t0=''
note() { if [ -n "$fault_t0" ]; then echo "[+$((SECONDS - fault_t0))s] $*"; else echo "$*"; fi; }

dbz_pid='' bank_pid='' broker_down=0
declare -A member log_n
sources=()
stop_debezium() {
  [ -n "$dbz_pid" ] || return 0
  kill -TERM "$dbz_pid" 2>/dev/null || true
  for _ in $(seq 1 60); do kill -0 "$dbz_pid" 2>/dev/null || break; sleep 0.5; done
  kill -9 "$dbz_pid" 2>/dev/null || true
  wait "$dbz_pid" 2>/dev/null || true
  dbz_pid=''
}
drop_source() { # drop_source DB SLOT
  "$cdc" cleanup -source "$1" -slot "$2" -publication "$2" || echo "cleanup: could not drop slot $2 or database $1"
}
cleanup() {
  local rc=$?
  [ "$broker_down" = 1 ] && bash test/services/services.sh kafka-start || true
  for p in $bank_pid "${member[@]}"; do [ -n "$p" ] && kill -9 "$p" 2>/dev/null || true; done
  stop_debezium
  for s in "${sources[@]}"; do drop_source "${s%% *}" "${s##* }"; done
  exit "$rc"
}
trap cleanup EXIT

# start_member NAME: eosink run with instance_id txdemo-NAME-<run id>, log $work/<phase>-NAME-N.log
start_member() {
  local name=$1
  log_n[$name]=$((${log_n[$name]:-0} + 1))
  local log="$work/$phase-$name-${log_n[$name]}.log"
  TXDEMO_INSTANCE_ID=txdemo-$name-$run_id "$eosink" run -config "$cfg" -progress 5s >"$log" 2>&1 &
  member[$name]=$!
  note "started member $name (pid ${member[$name]}, instance_id txdemo-$name-$run_id, log $log)"
}
kill9() {
  kill -9 "${member[$1]}" 2>/dev/null || true
  wait "${member[$1]}" 2>/dev/null || true
  member[$1]=''
  note "SIGKILLed member $1 ($(workload_state))"
}
term() {
  kill -TERM "${member[$1]}"
  if ! wait "${member[$1]}"; then echo "member $1 did not stop cleanly; see $work/$phase-$1-${log_n[$1]}.log"; exit 1; fi
  member[$1]=''
  note "member $1 stopped with SIGTERM (drained)"
}
workload_state() {
  if grep -q '^workload done' "$work/$phase-bank.log"; then echo "the workload had finished"; else echo "mid-workload: the source keeps changing"; fi
}
alive_or_die() {
  kill -0 "$bank_pid" 2>/dev/null || { wait "$bank_pid" || true; echo "bin/bank exited early; see $work/$phase-bank.log"; tail -5 "$work/$phase-bank.log"; exit 1; }
  local name
  for name in "${!member[@]}"; do
    [ -n "${member[$name]}" ] || continue
    kill -0 "${member[$name]}" 2>/dev/null && continue
    echo "member $name exited on its own; see $work/$phase-$name-${log_n[$name]}.log"
    tail -5 "$work/$phase-$name-${log_n[$name]}.log"
    exit 1
  done
}
pause() { # pause SECONDS: sleep, checking that everything still runs
  local t=$(($1 * 10))
  for _ in $(seq 1 "$t"); do alive_or_die; sleep 0.1; done
}
fingerprint() {
  psql "$DATABASE_URL" -tAc "SELECT (SELECT md5(coalesce(string_agg(balance::text, ',' ORDER BY id), '')) FROM \"$TXDEMO_REPLICA_SCHEMA\".accounts_a)
    || (SELECT count(*) || '/' || coalesce(max(id), 0) FROM \"$TXDEMO_REPLICA_SCHEMA\".orders)" 2>/dev/null || echo none
}
# progress WHAT: wait until the replica changes (some member applies), up to
# TXDEMO_PROGRESS_TIMEOUT seconds; once the workload is done the replica may have nothing left
# to change.
progress_timeout=${TXDEMO_PROGRESS_TIMEOUT:-60}
progress() {
  local before
  before=$(fingerprint)
  for _ in $(seq 1 $((progress_timeout * 10))); do
    alive_or_die
    [ "$(fingerprint)" != "$before" ] && { note "the replica moves on ($1)"; return 0; }
    sleep 0.1
  done
  grep -q '^workload done' "$work/$phase-bank.log" && { echo "the replica did not change within $progress_timeout s ($1): the workload has finished"; return 0; }
  echo "the replica did not change within $progress_timeout s ($1)"
  exit 1
}

say "fetching Kafka Connect and Debezium (once; the first time from Maven Central takes minutes)"
eval "$(bash test/services/debezium.sh fetch)"

# start_debezium: Kafka Connect standalone with the PostgreSQL connector, JsonConverter with
# schemas, transaction metadata on; the transaction topic gets one partition, the data topics 3.
start_debezium() {
  local port pg_host pg_port pg_user
  port=$("$cdc" free-port)
  cat >"$work/$phase-worker.properties" <<PROPS
bootstrap.servers=$KAFKA_BOOTSTRAP_SERVERS
offset.storage.file.filename=$work/$phase-connect.offsets
offset.flush.interval.ms=1000
listeners=http://127.0.0.1:$port
plugin.discovery=service_load
key.converter=org.apache.kafka.connect.json.JsonConverter
key.converter.schemas.enable=true
value.converter=org.apache.kafka.connect.json.JsonConverter
value.converter.schemas.enable=true
PROPS
  pg_host=$(sed -E 's|^[a-z]+://([^@/]*@)?([^:/?]+).*|\2|' <<<"$DATABASE_URL")
  pg_port=$(sed -E 's|^[a-z]+://([^@/]*@)?[^:/?]+:([0-9]+).*|\2|' <<<"$DATABASE_URL")
  pg_user=$(sed -E 's|^[a-z]+://([^:@/]*)[:@].*|\1|' <<<"$DATABASE_URL")
  cat >"$work/$phase-connector.properties" <<PROPS
name=$TXDEMO_TOPIC_PREFIX
connector.class=io.debezium.connector.postgresql.PostgresConnector
tasks.max=1
plugin.name=pgoutput
database.hostname=$pg_host
database.port=$pg_port
database.user=$pg_user
database.dbname=$SOURCE
topic.prefix=$TXDEMO_TOPIC_PREFIX
table.include.list=public.accounts_a,public.accounts_b,public.orders,public.order_lines
slot.name=$SLOT
publication.name=$SLOT
publication.autocreate.mode=filtered
snapshot.mode=initial
provide.transaction.metadata=true
topic.creation.default.replication.factor=1
topic.creation.default.partitions=3
topic.creation.groups=txn
topic.creation.txn.include=${TXDEMO_TOPIC_PREFIX//./\\\\.}\\\\.transaction
topic.creation.txn.partitions=1
topic.creation.txn.replication.factor=1
PROPS
  ${EOSINK_DEBEZIUM_JAVA:-java} -Xmx512m -Djava.awt.headless=true -Dlog4j2.configurationFile="$EOSINK_DEBEZIUM_LOG4J" \
    -cp "$EOSINK_DEBEZIUM_LIBS/*" org.apache.kafka.connect.cli.ConnectStandalone \
    "$work/$phase-worker.properties" "$work/$phase-connector.properties" >"$work/$phase-connect.log" 2>&1 &
  dbz_pid=$!
  "$cdc" wait -source "$SOURCE" -slot "$SLOT" -rest "http://127.0.0.1:$port" -connector "$TXDEMO_TOPIC_PREFIX" -topics "$data_topics" ||
    { tail -20 "$work/$phase-connect.log"; exit 1; }
  "$bank" warmup -source "$SOURCE"   # the first streamed transaction: Debezium creates the transaction topic
  "$cdc" wait -source "$SOURCE" -slot "$SLOT" -rest "http://127.0.0.1:$port" -connector "$TXDEMO_TOPIC_PREFIX" -topics "$data_topics,$tx_topic" ||
    { tail -20 "$work/$phase-connect.log"; exit 1; }
  "$bank" partitions -topics "$data_topics,$tx_topic" -one "$tx_topic"
  echo "Debezium runs (pid $dbz_pid, log $work/$phase-connect.log)"
}

# pipeline_config MODE: check the config as the mode's settings make it.
pipeline_config() {
  local out
  cfg=$config
  out=$("$eosink" run -config "$cfg" -validate 2>&1) && return 0
  echo "$out"
  echo "eosink refuses $config with sink.consistency: $1"
  exit 1
}

sigkills=0 rebalances=0 takeovers=0 broker_restarts=0 replays=0
services_here=0
bed_env=$(bash test/services/services.sh env 2>/dev/null || true)
status=$(bash test/services/services.sh status 2>/dev/null || true)
if grep -q '^kafka: running' <<<"$status" && grep -qF "KAFKA_BOOTSTRAP_SERVERS=$KAFKA_BOOTSTRAP_SERVERS" <<<"$bed_env"; then
  services_here=1
fi

faults() {
  say "faults (the workload runs; log $work/$phase-bank.log)"
  for _ in $(seq 1 1800); do grep -q '^workload:' "$work/$phase-bank.log" && break; alive_or_die; sleep 0.1; done
  fault_t0=$SECONDS
  note "the workload started"
  pause $((2 + RANDOM % 5))
  kill9 a
  sigkills=$((sigkills + 1))
  start_member a
  progress "member a again, after its SIGKILL"
  start_member b
  note "member b joins with the same config (in transaction mode it stands by on the lease; in partition mode the group rebalances)"
  pause $((3 + RANDOM % 4))
  note "SIGKILL of the holder (member a, the one that applied before b joined) while b runs"
  kill9 a
  sigkills=$((sigkills + 1))
  progress "member b took over"
  takeovers=$((takeovers + 1))
  start_member a
  pause 3
  note "replay ($(workload_state)): $eosink offsets set -config $cfg -to earliest"
  "$eosink" offsets set -config "$cfg" -to earliest -reason "txdemo: replay from the earliest offsets under a running workload" -operator txdemo
  replays=$((replays + 1))
  progress "after the replay"
  pause 2
  if [ "$services_here" = 1 ]; then
    note "broker restart ($(workload_state))"
    broker_down=1
    bash test/services/services.sh kafka-kill
    sleep 3
    bash test/services/services.sh kafka-start
    broker_down=0
    broker_restarts=$((broker_restarts + 1))
    progress "after the broker restart"
  else
    note "broker restart skipped: the services are not the test bed's (test/services/services.sh status shows no broker at KAFKA_BOOTSTRAP_SERVERS)"
  fi
  pause $((2 + RANDOM % 3))
  term b
  rebalances=$((rebalances + 1))
  progress "member a alone again"
  note "faults done: sigkills $sigkills, rebalances $rebalances (b joined and left), takeovers $takeovers, broker restarts $broker_restarts, replays $replays"
}

# phase NAME CONSISTENCY: one run on a fresh source; sets ph_* from bin/bank's summary.
phase() {
  phase=$1
  local mode=$2
  SOURCE=txdemo_${phase}_$run_id SLOT=txdemo_${phase}_$run_id
  export TXDEMO_TOPIC_PREFIX=txdemo_${phase}_$run_id TXDEMO_PIPELINE=txdemo-$phase-$run_id TXDEMO_GROUP=txdemo-$phase-$run_id
  export TXDEMO_REPLICA_SCHEMA=txdemo_${phase}_$run_id TXDEMO_OFFSETS_SCHEMA=txdemo_eosink_${phase}_$run_id
  tx_topic=$TXDEMO_TOPIC_PREFIX.transaction
  export TXDEMO_CONSISTENCY=$mode TXDEMO_TRANSACTION_TOPIC=''
  [ "$mode" = transaction ] && TXDEMO_TRANSACTION_TOPIC=$tx_topic
  data_topics=$TXDEMO_TOPIC_PREFIX.public.accounts_a,$TXDEMO_TOPIC_PREFIX.public.accounts_b,$TXDEMO_TOPIC_PREFIX.public.orders,$TXDEMO_TOPIC_PREFIX.public.order_lines
  local fk=''
  [ "$mode" = transaction ] && fk=-fk
  say "$phase phase: sink.consistency $mode; source database $SOURCE, replica schema $TXDEMO_REPLICA_SCHEMA"
  pipeline_config "$mode"
  sources+=("$SOURCE $SLOT")
  "$bank" setup -source "$SOURCE" -replica "$TXDEMO_REPLICA_SCHEMA" -accounts "$ACCOUNTS" $fk
  start_debezium
  "$eosink" migrate up -config "$cfg" >"$work/$phase-migrate.log" 2>&1 || { cat "$work/$phase-migrate.log"; exit 1; }
  start_member a
  local verify=$work/$phase.verify summary=$work/$phase.summary
  rm -f "$verify" "$summary"
  "$bank" run -source "$SOURCE" -replica "$TXDEMO_REPLICA_SCHEMA" -accounts "$ACCOUNTS" -seed "$seed" \
    -workers "${TXDEMO_WORKERS:-8}" -steps "${TXDEMO_STEPS:-600}" -order-steps "${TXDEMO_ORDER_STEPS:-160}" \
    -pause "${TXDEMO_PAUSE:-30ms}" -order-pause "${TXDEMO_ORDER_PAUSE:-120ms}" -wait "${TXDEMO_WAIT:-3m}" \
    -verify-when "$verify" -summary "$summary" >"$work/$phase-bank.log" 2>&1 &
  bank_pid=$!
  echo "bin/bank run: the reader and the workload (pid $bank_pid, log $work/$phase-bank.log)"
  [ "$phase" = transaction ] && faults
  touch "$verify"
  say "waiting for the workload to end and the replica to equal the source"
  while kill -0 "$bank_pid" 2>/dev/null; do alive_or_die; sleep 0.2; done
  wait "$bank_pid" || { bank_pid=''; tail -20 "$work/$phase-bank.log"; echo "bin/bank run failed; see $work/$phase-bank.log"; exit 1; }
  bank_pid=''
  grep -E '^(reader:|workload done|the replica|accounts_|orders|order_lines|some differing|  )' "$work/$phase-bank.log" | grep -v '^reader: violation' | head -20
  grep '^reader: violation' "$work/$phase-bank.log" | head -3 || true
  local name
  for name in "${!member[@]}"; do [ -n "${member[$name]}" ] && term "$name"; done
  stop_debezium
  drop_source "$SOURCE" "$SLOT"
  unset 'sources[-1]'
  ph_transactions=$(sed -n 's/^transactions=//p' "$summary")
  ph_violations=$(sed -n 's/^violations=//p' "$summary")
  ph_mismatches=$(sed -n 's/^mismatches=//p' "$summary")
  ph_qps=$(sed -n 's/^queries_per_second=//p' "$summary")
  ph_kinds=$(sed -n 's/^kinds=//p' "$summary")
}

fail=0
check() { # check CONDITION MESSAGE
  if ! eval "$1"; then echo "FAIL: $2"; fail=1; fi
}
if [ "$PHASE" != transaction ]; then
  phase control partition
  say "control result"
  echo "reader: ${ph_qps} queries per second; violations by invariant: $ph_kinds"
  echo "control (partition mode): violations seen by the reader: $ph_violations"
  echo "control mismatches: $ph_mismatches"
  check '[ "$ph_violations" -gt 0 ]' "the control saw no violation: the reader could not see what it looks for (more workers, smaller batches: TXDEMO_WORKERS, TXDEMO_MAX_RECORDS)"
  check '[ "$ph_mismatches" -eq 0 ]' "the control's replica differs from its source"
  check 'awk "BEGIN { exit !($ph_qps >= 20) }"' "the reader queried the replica less than 20 times a second"
fi
if [ "$PHASE" != control ]; then
  phase transaction "$TX_CONSISTENCY"
  say "transaction phase result (sink.consistency $TX_CONSISTENCY)"
  echo "reader: ${ph_qps} queries per second; violations by invariant: $ph_kinds"
  echo "takeovers: $takeovers"
  echo "sigkills: $sigkills"
  echo "rebalances: $rebalances"
  echo "broker restarts: $broker_restarts"
  echo "replays: $replays"
  echo "transactions: $ph_transactions"
  ph_streamed=$(cat "$work"/transaction-*.log 2>/dev/null | grep -c 'the unit streamed is committed' || true)
  echo "streamed (larger than max_held_events, committed whole): $ph_streamed"
  echo "violations seen by the reader: $ph_violations"
  echo "mismatches: $ph_mismatches"
  if [ "$TX_CONSISTENCY" = transaction ]; then
    check '[ "$ph_violations" -eq 0 ]' "the reader saw violations in transaction mode"
  else
    echo "(TXDEMO_TX_CONSISTENCY=partition: the faults ran against partition mode, which must show violations)"
    check '[ "$ph_violations" -gt 0 ]' "partition mode under faults showed no violation: the reader could not see what it looks for"
  fi
  check '[ "$ph_mismatches" -eq 0 ]' "the replica differs from the source"
  check '[ "$sigkills" -ge 1 ] && [ "$rebalances" -ge 1 ] && [ "$broker_restarts" -ge 1 ] && [ "$replays" -ge 1 ]' "a fault was not injected"
  check 'awk "BEGIN { exit !($ph_qps >= 20) }"' "the reader queried the replica less than 20 times a second"
fi
[ "$fail" -eq 0 ] && echo "OK: txdemo ($PHASE) passed; logs in $work"
exit "$fail"
