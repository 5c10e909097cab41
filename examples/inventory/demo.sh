#!/usr/bin/env bash
# The inventory example end to end on the test bed (make services, or test/services/services.sh
# up, then its env file sourced): tables, moves, migrate, run, kill -9 mid-stream, run again,
# verify. Stock per (sku, warehouse) must equal the sum of its history; moves to the closed
# warehouse are dead letters (eosink dlq list).
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${KAFKA_BOOTSTRAP_SERVERS:?source the test bed env}" "${DATABASE_URL:?source the test bed env}"
export INVENTORY_TOPIC=${INVENTORY_TOPIC:-stock-moves-$RANDOM} INVENTORY_GROUP=${INVENTORY_GROUP:-inventory-$RANDOM}
config=examples/inventory/pipeline.yaml
bin=$(mktemp -d)
go build -o "$bin/eosink" ./cmd/eosink
go build -o "$bin/inventory" ./examples/inventory
"$bin/inventory" setup
"$bin/inventory" produce -moves "${MOVES:-20000}" -seed "$RANDOM"
"$bin/eosink" migrate up -config "$config"
"$bin/eosink" run -config "$config" & pid=$!
sleep 3
kill -9 "$pid" || true
wait "$pid" 2>/dev/null || true
echo "killed the sink with SIGKILL; running it again"
"$bin/eosink" run -config "$config" & pid=$!
until "$bin/eosink" status -config "$config" -json | grep -Eq '"lag": *0([^0-9]|$)'; do sleep 1; done
kill -TERM "$pid"; wait "$pid" || true
"$bin/inventory" verify
"$bin/eosink" dlq list -config "$config" | head -5 || true
rm -rf "$bin"
