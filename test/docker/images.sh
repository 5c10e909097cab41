#!/usr/bin/env bash
# The images the test bed's container path (internal/testbed/containers.go) starts, built
# here with no registry: PostgreSQL from Debian's packages, and Apache Kafka from the Maven
# Central jars (test/services/services.sh kafka-fetch, cached in ~/.cache/eosink) on Debian's
# Java runtime. Both on debian:bookworm-slim (test/docker/base-images.sh). Docker's layer cache
# makes a second run quick. Prints the exports that point the test bed at them.
#
# Settings (environment), the same names the test bed reads:
#   EOSINK_TEST_KAFKA_IMAGE     Default: eosink-test/kafka:<the bed's Kafka version>
#   EOSINK_TEST_POSTGRES_IMAGE  Default: eosink-test/postgres:15
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
log() { printf 'images: %s\n' "$*" >&2; }
die() { printf 'images: ERROR: %s\n' "$*" >&2; exit 1; }

version=$(bash "$repo/test/services/services.sh" kafka-version)
KAFKA_IMAGE=${EOSINK_TEST_KAFKA_IMAGE:-eosink-test/kafka:$version}
POSTGRES_IMAGE=${EOSINK_TEST_POSTGRES_IMAGE:-eosink-test/postgres:15}

bash "$here/base-images.sh" debian:bookworm-slim

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

build() { # name context [args...]
  local name=$1 ctx=$2
  shift 2
  log "building $name"
  docker build --network host -t "$name" "$@" "$ctx" >"$work/build.log" 2>&1 ||
    die "building $name failed: $(tail -15 "$work/build.log")"
}

build "$POSTGRES_IMAGE" "$here/postgres"

libs=$(bash "$repo/test/services/services.sh" kafka-fetch) || die "could not fetch the Kafka $version jars"
mkdir -p "$work/kafka"
cp "$here/kafka/Dockerfile" "$here/kafka/entrypoint.sh" "$repo/test/services/kafka/log4j2.properties" "$work/kafka/"
cp -r "$libs" "$work/kafka/libs"
rm -f "$work/kafka/libs/.complete"
build "$KAFKA_IMAGE" "$work/kafka" --build-arg "KAFKA_VERSION=$version"

echo "export EOSINK_TEST_KAFKA_IMAGE=$KAFKA_IMAGE"
echo "export EOSINK_TEST_POSTGRES_IMAGE=$POSTGRES_IMAGE"
