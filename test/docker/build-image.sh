#!/usr/bin/env bash
# `make image`: builds the Dockerfile into IMAGE with the version labels.
#   1. a Docker engine (test/docker/engine.sh up),
#   2. the base images by their standard names (test/docker/base-images.sh: present, pulled,
#      or built here when no registry is reachable),
#   3. the modules: when Go is installed here, `go mod download` fills this machine's module
#      cache and test/docker/modproxy serves it on loopback as the build's GOPROXY (the build
#      runs with --network host); without Go here, the build uses the public proxy,
#   4. docker build --network host.
#
# Settings (environment): IMAGE (default eosink:dev), VERSION (default: git describe, or dev),
# EOSINK_IMAGE_GOPROXY (a GOPROXY for the build; set it to skip the local module proxy),
# EOSINK_MODPROXY_ADDR (the local module proxy's address; default 127.0.0.1:39480, a fixed
# port so that Docker's layer cache of the module download holds from one build to the next).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
cd "$repo"
IMAGE=${IMAGE:-eosink:dev}
VERSION=${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}
log() { printf 'image: %s\n' "$*" >&2; }

bash "$here/engine.sh" up
bash "$here/base-images.sh"

# CREATED is the commit's time, not the build's, so that building the same commit again is
# all cache hits (no new image, no dangling one).
args=(--build-arg "VERSION=$VERSION" --build-arg "REVISION=$(git rev-parse HEAD 2>/dev/null || echo unknown)"
  --build-arg "CREATED=$(TZ=UTC git log -1 --date=format-local:%Y-%m-%dT%H:%M:%SZ --format=%cd 2>/dev/null || date -u +%Y-%m-%dT%H:%M:%SZ)")
work=$(mktemp -d)
proxy_pid=
cleanup() {
  [ -z "$proxy_pid" ] || kill "$proxy_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
if [ -n "${EOSINK_IMAGE_GOPROXY:-}" ]; then
  args+=(--build-arg "GOPROXY=$EOSINK_IMAGE_GOPROXY")
elif command -v go >/dev/null; then
  log "go mod download (this machine's module cache, served to the build on loopback)"
  go mod download
  go build -o "$work/modproxy" ./test/docker/modproxy
  "$work/modproxy" -dir "$(go env GOMODCACHE)/cache/download" -addr "${EOSINK_MODPROXY_ADDR:-127.0.0.1:39480}" \
    -addr-file "$work/addr" &
  proxy_pid=$!
  for _ in $(seq 1 50); do [ -s "$work/addr" ] && break; sleep 0.1; done
  [ -s "$work/addr" ] || { log "ERROR: the module proxy did not start (port taken? set EOSINK_MODPROXY_ADDR=127.0.0.1:0)"; exit 1; }
  # The modules' hashes are checked against go.sum in the build, as always; the checksum
  # database is not asked (the build has no route to it), the cache's modules having been
  # checked against it when they were downloaded here.
  args+=(--build-arg "GOPROXY=http://$(cat "$work/addr")" --build-arg GOSUMDB=off)
fi
log "docker build -t $IMAGE (version $VERSION)"
docker build --network host -t "$IMAGE" "${args[@]}" .
log "built $IMAGE: $(docker image inspect -f '{{.Size}}' "$IMAGE" | awk '{printf "%d MB", $1/1e6}'), labels version=$(docker image inspect -f '{{index .Config.Labels "org.opencontainers.image.version"}}' "$IMAGE")"
