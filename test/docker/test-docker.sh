#!/usr/bin/env bash
# `make test-docker`: eosink through a Docker engine, with no registry and host networking only.
#   1. the engine: test/docker/engine.sh up (installs Debian's docker.io and starts dockerd
#      without a bridge when none answers);
#   2. the images: eosink's (make image: test/docker/build-image.sh), and the test bed's Kafka
#      and PostgreSQL (test/docker/images.sh);
#   3. part of the suite on testcontainers: KAFKA_BOOTSTRAP_SERVERS and DATABASE_URL unset, so
#      the test bed starts Kafka and PostgreSQL as containers (internal/testbed/containers.go),
#      the reaper off and the containers removed by the tests (testbed.StopContainers);
#   4. the eosink image on a pipeline, SIGKILLed mid-stream by docker kill, restarted, verified
#      (test/docker/image-test.sh), against Kafka and PostgreSQL containers of the same images;
#   5. checks that no bridge network was created, and removes the containers it started.
# The engine is left running (the images stay in its data root for the next run);
# `bash test/docker/engine.sh down` stops a dockerd that engine.sh started.
#
# Settings (environment):
#   IMAGE                      the eosink image to build and test. Default: eosink:dev
#   EOSINK_DOCKER_TESTS        -run pattern of the tests in ./test run on testcontainers.
#                              Default: the crash, fencing, poison, dead-letter, position and rebalance tests
#   EOSINK_DOCKER_KAFKA_PORT   Kafka's port for step 4 (its controller: port+1). Default: 29092
#   EOSINK_DOCKER_PG_PORT      PostgreSQL's port for step 4. Default: 25432
#                              (both below Linux's ephemeral range, 32768-60999, where a client
#                              connection's own port can take them)
#   EOSINK_TEST_KAFKA_IMAGE, EOSINK_TEST_POSTGRES_IMAGE  as in test/docker/images.sh
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
cd "$repo"
export IMAGE=${IMAGE:-eosink:dev}
TESTS=${EOSINK_DOCKER_TESTS:-'TestExactlyOnceAcrossCrashes|TestZombieProcessIsFenced|TestStoreFencesOlderClaim|TestPoisonRecordsAreDeadLettered|TestDeadLetterReplay|TestPositionComesFromDatabase|TestRebalance$'}
# The packages those tests live in (the store's fencing test sits beside the store).
PKGS="./test/ ./internal/offsets/"
KPORT=${EOSINK_DOCKER_KAFKA_PORT:-29092}
PPORT=${EOSINK_DOCKER_PG_PORT:-25432}
LOGDIR=$repo/.services/logs
mkdir -p "$LOGDIR"
run=eosink-test-docker-$$
step() { printf '\n==== test-docker: %s (%s)\n' "$*" "$(date -u +%H:%M:%S)"; }
die() { printf 'test-docker: FAIL: %s\n' "$*" >&2; exit 1; }
t0=$(date +%s)

# port_taken P: something on this machine listens on, or is connected from, port P (a socket in
# TIME-WAIT does not stop a bind; without iproute2's ss nothing is checked).
port_taken() { command -v ss >/dev/null && ss -Htan "( sport = :$1 )" | grep -qv '^TIME-WAIT'; }
# not_ready: the containers' state and their last lines, then FAIL (the clean-up removes them).
not_ready() {
  local c
  for c in "$run-pg" "$run-kafka"; do
    printf -- '---- %s: %s\n' "$c" "$(docker inspect -f '{{.State.Status}} (exit code {{.State.ExitCode}}) {{.State.Error}}' "$c" 2>&1)" >&2
    docker logs --tail 40 "$c" 2>&1 | sed 's/^/    /' >&2 || true
  done
  die "$1"
}

cleanup() {
  local ids
  ids=$(docker ps -aq --filter "label=org.eosink.test-docker=$run" 2>/dev/null || true)
  [ -z "$ids" ] || docker rm -f $ids >/dev/null 2>&1 || true
  # Test processes killed before their TestMain's clean-up leave their containers labelled.
  ids=$(docker ps -aq --filter label=org.eosink.testbed 2>/dev/null || true)
  [ -z "$ids" ] || docker rm -f $ids >/dev/null 2>&1 || true
}
trap cleanup EXIT

no_bridges() {
  local nets
  nets=$(docker network ls --filter driver=bridge --format '{{.Name}}')
  [ -z "$nets" ] || die "bridge networks exist ($nets); only host networking is allowed here"
}

step "engine"
bash "$here/engine.sh" up
no_bridges

step "eosink image $IMAGE"
bash "$here/build-image.sh"
step "test bed images"
eval "$(bash "$here/images.sh")"
export EOSINK_TEST_KAFKA_IMAGE EOSINK_TEST_POSTGRES_IMAGE
t_images=$(date +%s)

step "tests on testcontainers: go test -run '$TESTS' $PKGS"
(
  unset KAFKA_BOOTSTRAP_SERVERS DATABASE_URL EOSINK_REGISTRY_URL
  export TESTCONTAINERS_RYUK_DISABLED=true
  go test -tags failpoints -race -count=1 -parallel 4 -timeout 20m -run "$TESTS" -v $PKGS 2>&1 |
    tee "$LOGDIR/test-docker-go.log" | grep -E '^(=== RUN|--- |PASS|FAIL|ok|panic)|Creating container for image|Container is ready|crash_test.go' || true
  # Every package ok, none failed.
  ! grep -q '^FAIL' "$LOGDIR/test-docker-go.log" || exit 1
  [ "$(grep -c '^ok ' "$LOGDIR/test-docker-go.log")" -eq "$(echo $PKGS | wc -w)" ] || exit 1
) || die "tests on testcontainers failed; see $LOGDIR/test-docker-go.log"
passed=$(grep -c -- '--- PASS' "$LOGDIR/test-docker-go.log" || true)
grep -q "Creating container for image $EOSINK_TEST_KAFKA_IMAGE" "$LOGDIR/test-docker-go.log" ||
  die "the tests did not start Kafka through testcontainers"
[ -z "$(docker ps -aq --filter label=org.eosink.testbed)" ] || die "the tests left containers behind"
no_bridges
t_tests=$(date +%s)

step "Kafka and PostgreSQL containers for the image's run (127.0.0.1:$KPORT, 127.0.0.1:$PPORT)"
for p in "$PPORT" "$KPORT" $((KPORT + 1)); do
  if port_taken "$p"; then
    ss -Htanp "( sport = :$p )" >&2 || true
    die "loopback port $p is in use; set EOSINK_DOCKER_KAFKA_PORT / EOSINK_DOCKER_PG_PORT to free ones"
  fi
done
docker run -d --name "$run-pg" --label "org.eosink.test-docker=$run" --network host \
  -e POSTGRES_PASSWORD=eosink -e POSTGRES_DB=eosink "$EOSINK_TEST_POSTGRES_IMAGE" \
  postgres -c port="$PPORT" -c listen_addresses=127.0.0.1 -c max_connections=300 >/dev/null
docker run -d --name "$run-kafka" --label "org.eosink.test-docker=$run" --network host \
  -e KAFKA_NODE_ID=1 -e KAFKA_PROCESS_ROLES=broker,controller \
  -e KAFKA_LISTENERS="PLAINTEXT://127.0.0.1:$KPORT,CONTROLLER://127.0.0.1:$((KPORT + 1))" \
  -e KAFKA_ADVERTISED_LISTENERS="PLAINTEXT://127.0.0.1:$KPORT" -e KAFKA_CONTROLLER_LISTENER_NAMES=CONTROLLER \
  -e KAFKA_LISTENER_SECURITY_PROTOCOL_MAP=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT \
  -e KAFKA_CONTROLLER_QUORUM_VOTERS="1@127.0.0.1:$((KPORT + 1))" \
  -e KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR=1 -e KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR=1 \
  -e KAFKA_TRANSACTION_STATE_LOG_MIN_ISR=1 -e KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS=0 \
  -e KAFKA_GROUP_MIN_SESSION_TIMEOUT_MS=3000 -e KAFKA_AUTO_CREATE_TOPICS_ENABLE=false \
  "$EOSINK_TEST_KAFKA_IMAGE" >/dev/null
for i in $(seq 1 240); do
  for c in "$run-pg" "$run-kafka"; do
    [ "$(docker inspect -f '{{.State.Running}}' "$c" 2>/dev/null)" = true ] || not_ready "container $c stopped before it was ready"
  done
  if docker exec "$run-pg" pg_isready -q -h 127.0.0.1 -p "$PPORT" -d eosink -U postgres &&
    docker logs "$run-kafka" 2>&1 | grep -q 'Kafka Server started'; then break; fi
  [ "$i" -lt 240 ] || not_ready "Kafka or PostgreSQL container not ready after 120s"
  sleep 0.5
done
export KAFKA_BOOTSTRAP_SERVERS=127.0.0.1:$KPORT DATABASE_URL="postgres://postgres:eosink@127.0.0.1:$PPORT/eosink?sslmode=disable"

step "the eosink image on the points pipeline: docker kill mid-stream, restart, verify"
go build -o bin/points ./examples/points
if ! LOGDIR=$LOGDIR PSQL="docker exec $run-pg psql" bash "$here/image-test.sh" 2>&1 | tee "$LOGDIR/test-docker-image.log"; then
  die "the image's SIGKILL test failed; see $LOGDIR/test-docker-image.log"
fi
no_bridges
t_end=$(date +%s)

printf '\n==== test-docker: PASS in %ds (engine and images %ds, %d tests on testcontainers %ds, image SIGKILL test %ds)\n' \
  $((t_end - t0)) $((t_images - t0)) "$passed" $((t_tests - t_images)) $((t_end - t_tests))
sed -n '/^== verification/,$p' "$LOGDIR/test-docker-image.log" | grep -E '^(produced|applied|duplicates|lost):' |
  paste -sd' ' | sed 's/^/==== image verification: /'
