#!/usr/bin/env bash
# make vuln: govulncheck over the module, against the Go vulnerability database as of
# VULNDB_VERSION. The database is the golang.org/x/vulndb module (its data/osv reports),
# fetched through the Go module proxy like any module and indexed here with the module's own
# cmd/indexdb into the v1 layout govulncheck reads from a file:// URL; it is cached in
# $EOSINK_CACHE_DIR (default ~/.cache/eosink). Exits 3 when the code calls a known
# vulnerability, as govulncheck does. Extra arguments go to govulncheck (-show verbose).
#
#   VULN_VERSION     golang.org/x/vuln (govulncheck).  Default: v1.9.0
#   VULNDB_VERSION   golang.org/x/vulndb.              Default: v0.0.0-20261105234957-e22db6528018
set -euo pipefail
cd "$(dirname "$0")/.."
vuln=${VULN_VERSION:-v1.9.0}
db=${VULNDB_VERSION:-v0.0.0-20261105234957-e22db6528018}
cache=${EOSINK_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/eosink}/vulndb-$db
if [ ! -f "$cache/.complete" ]; then
  echo "vuln: fetching golang.org/x/vulndb@$db through the module proxy and indexing it (first run: a few minutes)" >&2
  src=$(cd "$(mktemp -d)" && go mod download -json "golang.org/x/vulndb@$db" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",*$/\1/p')
  [ -d "$src/data/osv" ] || { echo "vuln: golang.org/x/vulndb@$db has no data/osv" >&2; exit 1; }
  rm -rf "$cache.tmp"
  go run "golang.org/x/vulndb/cmd/indexdb@$db" -vulns "$src/data/osv" -out "$cache.tmp"
  rm -rf "$cache"; mv "$cache.tmp" "$cache"; touch "$cache/.complete"
fi
# Built with the Go that checks the module: govulncheck type-checks the standard library and
# the dependencies with its own go/types, which refuses files for a newer Go than its own.
bin=${cache%/*}/govulncheck-$vuln-$(go env GOVERSION)
[ -x "$bin/govulncheck" ] || GOBIN=$bin go install "golang.org/x/vuln/cmd/govulncheck@$vuln"
echo "vuln: govulncheck $vuln, database golang.org/x/vulndb@$db ($(ls "$cache/ID" | grep -c '\.json$') reports), $(go version)" >&2
exec "$bin/govulncheck" -db "file://$cache" "$@" ./...
