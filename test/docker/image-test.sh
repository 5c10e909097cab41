#!/usr/bin/env bash
# The eosink image on a pipeline, killed mid-stream: the points example
# (examples/points/pipeline.yaml) run by `eosink run` in a container with a read-only root
# filesystem and host networking.
#   1. points migrate; points produce EVENTS events;
#   2. the image's `eosink migrate up`, then `eosink run` in a container; `docker kill` (SIGKILL)
#      once a tenth of the events are applied;
#   3. a new container of the same image, until `points verify` agrees;
#   4. `points verify`: the log, read with read_committed, against the database; it must show
#      0 duplicates and 0 lost.
# Needs KAFKA_BOOTSTRAP_SERVERS, DATABASE_URL (loopback addresses), IMAGE, and bin/points;
# PSQL is the psql command (default psql; test-docker.sh runs it in the PostgreSQL container).
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${KAFKA_BOOTSTRAP_SERVERS:?}" "${DATABASE_URL:?}"
IMAGE=${IMAGE:-eosink:dev}
EVENTS=${EVENTS:-40000}
PARTITIONS=${PARTITIONS:-6}
LOGDIR=${LOGDIR:-.services/logs}
mkdir -p "$LOGDIR"
run_id=$(date +%s)-$$
export POINTS_TOPIC=points-image-$run_id POINTS_GROUP=points-image-$run_id POINTS_SCHEMA=points_image_${run_id//-/_}
common=(-topic "$POINTS_TOPIC" -group "$POINTS_GROUP" -schema "$POINTS_SCHEMA")
name=eosink-image-test-$$
say() { printf '\n== %s\n' "$*"; }
PSQL=${PSQL:-psql}
applied() { $PSQL "$DATABASE_URL" -tAc "SELECT count(*) FROM \"$POINTS_SCHEMA\".ledger" 2>/dev/null || echo 0; }
cleanup() { docker rm -f "$name-1" "$name-2" >/dev/null 2>&1 || true; }
trap cleanup EXIT

# The container sees the pipeline file read-only, and the environment the file names.
sink() { # container-name eosink-args...
  local c=$1
  shift
  docker run --name "$c" --network host --read-only \
    -v "$PWD/examples/points/pipeline.yaml:/etc/eosink/pipeline.yaml:ro" \
    -e KAFKA_BOOTSTRAP_SERVERS -e DATABASE_URL -e POINTS_TOPIC -e POINTS_GROUP -e POINTS_SCHEMA \
    "$@"
}

say "tables in schema $POINTS_SCHEMA, $EVENTS events to $POINTS_TOPIC ($PARTITIONS partitions)"
bin/points migrate "${common[@]}"
bin/points produce "${common[@]}" -events "$EVENTS" -partitions "$PARTITIONS" -accounts 100 2>&1 | tail -1
sink "$name-1" --rm "$IMAGE" migrate up -config /etc/eosink/pipeline.yaml

say "eosink run in $IMAGE (container $name-1, log $LOGDIR/image-sink-1.log)"
sink "$name-1" -d "$IMAGE" run -config /etc/eosink/pipeline.yaml >/dev/null
n=0
for _ in $(seq 1 1200); do
  n=$(applied)
  [ "$n" -ge $((EVENTS / 10)) ] && break
  [ "$(docker inspect -f '{{.State.Running}}' "$name-1")" = true ] ||
    { docker logs "$name-1" >"$LOGDIR/image-sink-1.log" 2>&1; echo "the sink exited early; see $LOGDIR/image-sink-1.log"; exit 1; }
  sleep 0.1
done
docker kill "$name-1" >/dev/null
n=$(applied)
docker logs "$name-1" >"$LOGDIR/image-sink-1.log" 2>&1
echo "docker kill (SIGKILL) $name-1: exit code $(docker inspect -f '{{.State.ExitCode}}' "$name-1"), $n of $EVENTS events applied at that moment"
[ "$n" -lt "$EVENTS" ] || { echo "the sink had finished before the kill: nothing was tested; raise EVENTS"; exit 1; }
docker rm "$name-1" >/dev/null

say "restart: a new container $name-2 (log $LOGDIR/image-sink-2.log)"
sink "$name-2" -d "$IMAGE" run -config /etc/eosink/pipeline.yaml >/dev/null
ok=0
for i in $(seq 1 360); do
  if bin/points verify "${common[@]}" >/dev/null 2>&1; then ok=1; break; fi
  [ "$(docker inspect -f '{{.State.Running}}' "$name-2")" = true ] ||
    { docker logs "$name-2" >"$LOGDIR/image-sink-2.log" 2>&1; echo "the sink exited early; see $LOGDIR/image-sink-2.log"; exit 1; }
  [ $((i % 10)) -eq 0 ] && echo "applied $(applied) of $EVENTS ..."
  sleep 0.5
done
docker stop -t 30 "$name-2" >/dev/null
code=$(docker inspect -f '{{.State.ExitCode}}' "$name-2")
docker logs "$name-2" >"$LOGDIR/image-sink-2.log" 2>&1
echo "docker stop (SIGTERM, drain): exit code $code"

say "verification (the log read with read_committed, and the database; not the sink's counters)"
bin/points verify "${common[@]}"
[ "$ok" -eq 1 ] || { echo "the sink did not catch up in time"; exit 1; }
[ "$code" -eq 0 ] || { echo "the restarted sink did not stop cleanly on SIGTERM; see $LOGDIR/image-sink-2.log"; exit 1; }
