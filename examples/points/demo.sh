#!/usr/bin/env bash
# End-to-end demo of the points example (run it with `make demo`):
#   1. produce events to a fresh topic,
#   2. run the sink, and kill it with SIGKILL in the middle of the stream,
#   3. restart it and let it finish,
#   4. verify from the log and the database: every event applied exactly once.
# Needs KAFKA_BOOTSTRAP_SERVERS and DATABASE_URL (make demo sets them) and bin/points.
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${KAFKA_BOOTSTRAP_SERVERS:?set KAFKA_BOOTSTRAP_SERVERS (make demo does)}"
: "${DATABASE_URL:?set DATABASE_URL (make demo does)}"
EVENTS=${EVENTS:-100000}
PARTITIONS=${PARTITIONS:-6}
run_id=$(date +%s)
TOPIC=points-demo-$run_id
GROUP=points-demo-$run_id
SCHEMA=points_demo_$run_id
LOGDIR=${LOGDIR:-.services/logs}
mkdir -p "$LOGDIR"
points=bin/points
common=(-topic "$TOPIC" -group "$GROUP" -schema "$SCHEMA")
say() { printf '\n== %s\n' "$*"; }

applied() {
  psql "$DATABASE_URL" -tAc "SELECT count(*) FROM \"$SCHEMA\".ledger" 2>/dev/null || echo 0
}

say "migrating (eosink offsets table and the example's tables in schema $SCHEMA)"
"$points" migrate "${common[@]}"

say "producing $EVENTS events to $TOPIC ($PARTITIONS partitions)"
"$points" produce "${common[@]}" -events "$EVENTS" -partitions "$PARTITIONS" -accounts 100 2>&1 | tail -1

say "starting the sink (log: $LOGDIR/demo-sink-1.log)"
"$points" run "${common[@]}" -kafka session.timeout.ms=6000 -kafka heartbeat.interval.ms=1000 >"$LOGDIR/demo-sink-1.log" 2>&1 &
pid=$!
n=0
for _ in $(seq 1 600); do
  n=$(applied)
  if [ "$n" -ge $((EVENTS / 5)) ]; then break; fi
  if ! kill -0 "$pid" 2>/dev/null; then echo "sink exited early; see $LOGDIR/demo-sink-1.log"; exit 1; fi
  sleep 0.1
done
kill -9 "$pid"
wait "$pid" 2>/dev/null || true
n=$(applied)
echo "killed the sink (pid $pid) with SIGKILL; $n of $EVENTS events applied at that moment"
if [ "$n" -ge "$EVENTS" ]; then echo "note: the sink had already finished before the kill"; fi

say "restarting the sink (log: $LOGDIR/demo-sink-2.log)"
"$points" run "${common[@]}" -kafka session.timeout.ms=6000 -kafka heartbeat.interval.ms=1000 >"$LOGDIR/demo-sink-2.log" 2>&1 &
pid=$!
ok=0
for i in $(seq 1 240); do
  if "$points" verify "${common[@]}" >/dev/null 2>&1; then ok=1; break; fi
  if ! kill -0 "$pid" 2>/dev/null; then echo "sink exited early; see $LOGDIR/demo-sink-2.log"; exit 1; fi
  [ $((i % 10)) -eq 0 ] && echo "applied $(applied) of $EVENTS ..."
  sleep 0.5
done
kill -TERM "$pid"
wait "$pid" || { echo "sink did not stop cleanly; see $LOGDIR/demo-sink-2.log"; exit 1; }

say "verification (from the log, read with read_committed, and the database; not from the sink's counters)"
"$points" verify "${common[@]}"
[ "$ok" -eq 1 ] || { echo "the sink did not catch up in time"; exit 1; }
