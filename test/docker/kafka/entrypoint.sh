#!/bin/bash
# Writes server.properties from the KAFKA_* environment (as the apache/kafka image does:
# KAFKA_FOO_BAR=x is foo.bar=x, `__` stands for `_` and `___` for `-`), formats the KRaft log
# directory on first start (CLUSTER_ID, or a random one), and runs the broker in the foreground.
set -euo pipefail
cfg=/var/lib/kafka/server.properties
: >"$cfg"
while IFS='=' read -r name value; do
  case "$name" in
    KAFKA_HEAP_OPTS|KAFKA_JVM_PERFORMANCE_OPTS|KAFKA_OPTS|KAFKA_VERSION) continue ;;
    KAFKA_*) ;;
    *) continue ;;
  esac
  key=${name#KAFKA_}
  key=$(printf '%s' "$key" | sed -e 's/___/-/g' -e 's/__/@/g' -e 's/_/./g' -e 's/@/_/g' | tr '[:upper:]' '[:lower:]')
  printf '%s=%s\n' "$key" "$value" >>"$cfg"
done < <(env)
grep -q '^log.dirs=' "$cfg" || echo "log.dirs=/var/lib/kafka/data" >>"$cfg"
libs='/opt/kafka/libs/*'
log4j=-Dlog4j2.configurationFile=/opt/kafka/log4j2.properties
dir=$(sed -n 's/^log.dirs=//p' "$cfg" | cut -d, -f1)
if [ ! -f "$dir/meta.properties" ]; then
  id=${CLUSTER_ID:-$(java -cp "$libs" "$log4j" kafka.tools.StorageTool random-uuid | tail -1)}
  java -cp "$libs" "$log4j" kafka.tools.StorageTool format -t "$id" -c "$cfg" >/dev/null
fi
# shellcheck disable=SC2086
exec java ${KAFKA_HEAP_OPTS:--Xms256m -Xmx1g} ${KAFKA_OPTS:-} -Djava.awt.headless=true "$log4j" -cp "$libs" kafka.Kafka "$cfg"
