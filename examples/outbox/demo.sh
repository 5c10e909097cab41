#!/usr/bin/env bash
# The transactional outbox end to end (run it with `make outbox`):
#   stage 1  eosink run -config stage1.yaml   orders → orders table + outbox, one transaction
#   relay    eosink relay -config relay.yaml  outbox → order-events, exactly once
#   stage 2  eosink run -config stage2.yaml   order-events → ledger, once per event id (inbox)
# While the orders are being produced: SIGKILL of the stage-1 sink, of the relay (twice) and
# of the stage-2 sink, then a broker kill and restart and a PostgreSQL restart (when the test
# bed's services run here; OUTBOX_SERVICE_FAULTS=0 skips those two). Then it verifies from
# the topics (read_committed) and the tables, not from any counter of the processes.
# Needs KAFKA_BOOTSTRAP_SERVERS, DATABASE_URL, bin/eosink and bin/outbox (make outbox).
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${KAFKA_BOOTSTRAP_SERVERS:?set KAFKA_BOOTSTRAP_SERVERS (make outbox does)}"
: "${DATABASE_URL:?set DATABASE_URL (make outbox does)}"
ORDERS=${ORDERS:-20000}
DURATION=${DURATION:-40s}
run_id=$(date +%s)
export ORDERS_TOPIC=outbox-orders-$run_id EVENTS_TOPIC=outbox-order-events-$run_id
export SHOP_SCHEMA=outbox_shop_$run_id EOSINK_SCHEMA=outbox_eosink_$run_id
export STAGE1_PIPELINE=outbox-orders-$run_id STAGE2_PIPELINE=outbox-ledger-$run_id
export RELAY_NAME=outbox-demo-$run_id POSITION_TOPIC=outbox-positions-$run_id
LOGDIR=${LOGDIR:-.services/logs}
mkdir -p "$LOGDIR"
eosink=bin/eosink
ob=bin/outbox
dir=examples/outbox
say() { printf '\n== %s\n' "$*"; }
count() { psql "$DATABASE_URL" -tAc "SELECT count(*) FROM \"$SHOP_SCHEMA\".$1" 2>/dev/null || echo 0; }

declare -A pid log_n
start() { # start NAME ARGS...: run eosink in the background, log to $LOGDIR/outbox-NAME-N.log
  local name=$1
  shift
  log_n[$name]=$((${log_n[$name]:-0} + 1))
  local log="$LOGDIR/outbox-$name-${log_n[$name]}.log"
  "$eosink" "$@" >"$log" 2>&1 &
  pid[$name]=$!
  echo "started $name (pid ${pid[$name]}, log $log)"
}
start_stage1() { start stage1 run -config $dir/stage1.yaml -progress 0; }
start_relay() { start relay relay -config $dir/relay.yaml; }
start_stage2() { start stage2 run -config $dir/stage2.yaml -progress 0; }
kill9() {
  kill -9 "${pid[$1]}" 2>/dev/null || true
  wait "${pid[$1]}" 2>/dev/null || true
  echo "killed $1 (pid ${pid[$1]}) with SIGKILL: orders $(count orders), ledger $(count ledger)"
}
alive_or_die() {
  for name in stage1 relay stage2; do
    if ! kill -0 "${pid[$name]}" 2>/dev/null; then
      echo "$name exited on its own; see $LOGDIR/outbox-$name-${log_n[$name]}.log"
      tail -5 "$LOGDIR/outbox-$name-${log_n[$name]}.log"
      exit 1
    fi
  done
}
wait_for() { # wait_for TABLE N: until TABLE has N rows
  for _ in $(seq 1 1200); do
    [ "$(count "$1")" -ge "$2" ] && return 0
    alive_or_die
    sleep 0.1
  done
  echo "timed out waiting for $2 rows in $1"
  exit 1
}
cleanup() {
  for name in stage1 relay stage2; do
    [ -n "${pid[$name]:-}" ] && kill -9 "${pid[$name]}" 2>/dev/null || true
  done
  [ -n "${producer:-}" ] && kill "$producer" 2>/dev/null || true
}
trap cleanup EXIT

services_here=0
status=$(bash test/services/services.sh status 2>/dev/null || true)
if [ "${OUTBOX_SERVICE_FAULTS:-1}" = 1 ] && grep -q '^kafka: running' <<<"$status" && grep -q '^postgres: running' <<<"$status"; then
  services_here=1
fi

say "setup: topics $ORDERS_TOPIC and $EVENTS_TOPIC, schemas $SHOP_SCHEMA and $EOSINK_SCHEMA"
"$ob" setup
"$eosink" migrate up -config $dir/stage1.yaml
"$eosink" migrate up -config $dir/stage2.yaml

say "producing $ORDERS orders over $DURATION; starting stage 1, the relay and stage 2"
"$ob" produce -orders "$ORDERS" -duration "$DURATION" >"$LOGDIR/outbox-producer.log" 2>&1 &
producer=$!
start_stage1
start_relay
start_stage2

say "faults while producing"
wait_for orders $((ORDERS * 15 / 100))
kill9 stage1
start_stage1
wait_for ledger $((ORDERS * 20 / 100))
kill9 relay
start_relay
wait_for ledger $((ORDERS * 35 / 100))
kill9 stage2
start_stage2
wait_for ledger $((ORDERS * 45 / 100))
kill9 relay
start_relay
if [ "$services_here" = 1 ]; then
  wait_for ledger $((ORDERS * 55 / 100))
  bash test/services/services.sh kafka-kill
  sleep 3
  bash test/services/services.sh kafka-start
  wait_for ledger $((ORDERS * 70 / 100))
  bash test/services/services.sh pg-restart fast
else
  echo "broker and PostgreSQL restarts skipped (OUTBOX_SERVICE_FAULTS=0, or the services are not the test bed's)"
fi

if ! wait "$producer"; then echo "the producer failed; see $LOGDIR/outbox-producer.log"; exit 1; fi
producer=
cat "$LOGDIR/outbox-producer.log"

say "waiting for the chain to settle"
ok=0
for i in $(seq 1 300); do
  if [ "$(count ledger)" -ge "$ORDERS" ] && "$ob" verify -quiet; then ok=1; break; fi
  alive_or_die
  [ $((i % 10)) -eq 0 ] && echo "orders $(count orders), ledger $(count ledger) ..."
  sleep 1
done

say "stopping with SIGTERM (each drains)"
for name in stage1 relay stage2; do
  kill -TERM "${pid[$name]}"
  if ! wait "${pid[$name]}"; then echo "$name did not stop cleanly; see $LOGDIR/outbox-$name-${log_n[$name]}.log"; exit 1; fi
  pid[$name]=
done
"$eosink" status -database-url "$DATABASE_URL" -brokers "$KAFKA_BOOTSTRAP_SERVERS" -schema "$EOSINK_SCHEMA"

say "verification (the topics read with read_committed and the tables; not the processes' counters)"
"$ob" verify
[ "$ok" -eq 1 ] || { echo "the chain did not settle in time"; exit 1; }
