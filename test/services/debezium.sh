#!/usr/bin/env bash
# Jars for the Debezium PostgreSQL source on Kafka Connect standalone. Not a service of the test
# bed: tests and demos start Connect themselves (internal/testbed/debezium.go), with
#   java -Xmx512m -cp "$EOSINK_DEBEZIUM_LIBS/*" org.apache.kafka.connect.cli.ConnectStandalone \
#     worker.properties connector.properties
#
#   debezium.sh fetch   fetch the jars from Maven Central once (idempotent; fast when cached)
#                       and print where they are, as shell assignments:
#                         EOSINK_DEBEZIUM_LIBS=<dir>     Connect 4.1.1 worker, JSON converter,
#                                                        Debezium PostgreSQL connector, PostgreSQL
#                                                        JDBC driver, Log4j 2: one flat classpath
#                         EOSINK_DEBEZIUM_PLUGINS=<dir>  a Connect plugin.path holding the Apicurio
#                                                        Avro converter (apicurio-converter/), with a
#                                                        ServiceLoader manifest jar when one could be
#                                                        made (plugin.discovery=service_load)
#                         EOSINK_DEBEZIUM_LOG4J=<file>   Log4j 2 configuration for Connect
#   debezium.sh paths   print the same without fetching; fails when the jars are not there
#
# Versions are in debezium/pom.xml (Kafka Connect, Debezium) and debezium/converter/pom.xml
# (io.apicurio:apicurio-registry-utils-converter). Settings: EOSINK_CACHE_DIR (default
# ~/.cache/eosink). Maven's output goes to <cache>/debezium-maven.log.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
CACHE=${EOSINK_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/eosink}
die() { printf 'debezium: FAILED: %s\n' "$*" >&2; exit 1; }
log() { printf 'debezium: %s\n' "$*" >&2; }

prop() { sed -n "s:.*<$1>\(.*\)</$1>.*:\1:p" "$2"; }
DBZ_VERSION=$(prop debezium.version "$here/debezium/pom.xml")
KAFKA_VERSION=$(prop kafka.version "$here/debezium/pom.xml")
CONV_VERSION=$(prop apicurio.converter.version "$here/debezium/converter/pom.xml")
LIBS=$CACHE/debezium-libs-$DBZ_VERSION-kafka-$KAFKA_VERSION
PLUGINS=$CACHE/debezium-plugins-apicurio-$CONV_VERSION
MLOG=$CACHE/debezium-maven.log
MANIFEST_JAR=eosink-converter-service-manifest.jar

# resolve POM DIR WHAT [mvn flags...]: copies POM's runtime dependencies into DIR, once.
resolve() {
  local pom=$1 dir=$2 what=$3
  shift 3
  [ -f "$dir/.complete" ] && return 0
  command -v mvn >/dev/null || die "mvn not found; Maven fetches $what from Maven Central"
  log "fetching $what with Maven into $dir (log: $MLOG)"
  rm -rf "$dir"; mkdir -p "$dir"
  mvn -B -q "$@" -f "$pom" dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$dir" >>"$MLOG" 2>&1 ||
    die "Maven could not fetch $what; see $MLOG"
  [ "$dir" != "$PLUGINS/apicurio-converter" ] || converter_manifest "$dir"
  touch "$dir/.complete"
}

# converter_manifest DIR: adds a small jar with a ServiceLoader manifest naming the Apicurio
# converters, so that Connect finds them with plugin.discovery=service_load. Without it Connect
# needs hybrid_warn, whose reflective scan of every jar takes 5 to 20 s more at each start.
# Made with the JDK's jar, else zip, else Python; with none of them the manifest is left out
# (internal/testbed/debezium.go then uses hybrid_warn).
converter_manifest() {
  local dir=$1 tmp out=$1/$MANIFEST_JAR
  tmp=$(mktemp -d)
  mkdir -p "$tmp/META-INF/services"
  printf '%s\n' io.apicurio.registry.utils.converter.AvroConverter io.apicurio.registry.utils.converter.ExtJsonConverter \
    >"$tmp/META-INF/services/org.apache.kafka.connect.storage.Converter"
  if command -v jar >/dev/null; then
    jar --create --file "$out" -C "$tmp" META-INF
  elif command -v zip >/dev/null; then
    (cd "$tmp" && zip -q -r "$out" META-INF)
  elif command -v python3 >/dev/null; then
    (cd "$tmp" && python3 -m zipfile -c "$out" META-INF)
  else
    log "no jar, zip or python3: the converter has no ServiceLoader manifest (Connect scans for it, slower)"
  fi
  rm -rf "$tmp"
}

paths() {
  echo "EOSINK_DEBEZIUM_LIBS=$LIBS"
  echo "EOSINK_DEBEZIUM_PLUGINS=$PLUGINS"
  echo "EOSINK_DEBEZIUM_LOG4J=$here/debezium/log4j2.properties"
}

case "${1:-}" in
  fetch)
    if [ ! -f "$LIBS/.complete" ] || [ ! -f "$PLUGINS/apicurio-converter/.complete" ]; then
      mkdir -p "$CACHE"
      exec 9>"$CACHE/.debezium.lock"
      flock 9   # tests in parallel packages fetch at the same time
      : >"$MLOG"
      resolve "$here/debezium/pom.xml" "$LIBS" "Kafka Connect $KAFKA_VERSION and Debezium PostgreSQL $DBZ_VERSION"
      # Apicurio's parent POM names repositories that cannot be reached: mirror all to Central.
      rm -f "$HOME/.m2/repository/io/apicurio/apicurio-registry-utils-converter/$CONV_VERSION/"*.lastUpdated 2>/dev/null || true
      resolve "$here/debezium/converter/pom.xml" "$PLUGINS/apicurio-converter" "the Apicurio converter $CONV_VERSION" \
        -s "$here/registry/settings.xml"
    fi
    ls "$LIBS"/debezium-connector-postgres-*.jar >/dev/null 2>&1 || die "no debezium-connector-postgres jar in $LIBS"
    ls "$PLUGINS"/apicurio-converter/apicurio-registry-utils-converter-*.jar >/dev/null 2>&1 ||
      die "no apicurio-registry-utils-converter jar in $PLUGINS/apicurio-converter"
    paths
    ;;
  paths)
    [ -f "$LIBS/.complete" ] && [ -f "$PLUGINS/apicurio-converter/.complete" ] || die "jars not fetched: run $0 fetch"
    paths
    ;;
  *) die "usage: debezium.sh fetch|paths" ;;
esac
