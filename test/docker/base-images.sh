#!/usr/bin/env bash
# Base images for the Dockerfile, by the standard names it uses: debian:bookworm-slim and
# golang:<GO_VERSION>-bookworm. An image already present is used; a missing one is pulled;
# only when the pull fails (no registry reachable) is it built here:
#   - debian:bookworm-slim: a Debian bookworm rootfs from debootstrap --variant=minbase (the
#     mirror apt already uses), imported with `docker import`;
#   - golang:<GO_VERSION>-bookworm: that image plus gcc, libc6-dev, git and pkg-config from
#     Debian, and the Go toolchain of this machine (`go env GOROOT`), which must be GO_VERSION.
# Where a registry is reachable nothing is built: the pulls give the public images.
#
#   base-images.sh [IMAGE...]   default: debian:bookworm-slim golang:<GO_VERSION>-bookworm
#
# Settings (environment):
#   GO_VERSION            Go minor version of the build stage. Default: the Dockerfile's ARG GO_VERSION
#   EOSINK_DEBIAN_MIRROR  Debian mirror for debootstrap. Default: the first URIs/deb line of apt's sources
#   EOSINK_PULL_TIMEOUT   seconds a pull may take before it counts as failed. Default: 120
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
GO_VERSION=${GO_VERSION:-$(sed -n 's/^ARG GO_VERSION=//p' "$repo/Dockerfile" | head -1)}
[ -n "$GO_VERSION" ] || { echo "base-images: no GO_VERSION (Dockerfile has no ARG GO_VERSION=)" >&2; exit 1; }

log() { printf 'base-images: %s\n' "$*" >&2; }
die() { printf 'base-images: ERROR: %s\n' "$*" >&2; exit 1; }
present() { docker image inspect "$1" >/dev/null 2>&1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

mirror() {
  if [ -n "${EOSINK_DEBIAN_MIRROR:-}" ]; then echo "$EOSINK_DEBIAN_MIRROR"; return; fi
  local m
  m=$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null | sed -n 's/^URIs: *\([^ ]*debian\)\/*$/\1/p' | head -1)
  [ -n "$m" ] || m=$(cat /etc/apt/sources.list 2>/dev/null | sed -n 's/^deb \(\[[^]]*\] \)\{0,1\}\([^ ]*debian\)\/* bookworm .*/\2/p' | head -1)
  echo "${m:-http://deb.debian.org/debian}"
}

build_debian() {
  local name=$1 rootfs=$work/rootfs m
  command -v debootstrap >/dev/null || {
    log "installing debootstrap (apt-get)"
    apt-get install -y -q debootstrap >"$work/apt.log" 2>&1 ||
      { apt-get update -q >>"$work/apt.log" 2>&1 && apt-get install -y -q debootstrap >>"$work/apt.log" 2>&1; } ||
      die "could not install debootstrap: $(tail -3 "$work/apt.log")"
  }
  m=$(mirror)
  log "building $name: debootstrap --variant=minbase bookworm from $m"
  debootstrap --variant=minbase bookworm "$rootfs" "$m" >"$work/debootstrap.log" 2>&1 ||
    die "debootstrap failed: $(tail -5 "$work/debootstrap.log")"
  # As in the public slim image: no package lists or downloaded packages left in the image.
  rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/log/*.log
  tar -C "$rootfs" -c . | docker import --change 'CMD ["bash"]' \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' - "$name" >/dev/null
  log "built $name ($(docker image inspect -f '{{.Size}}' "$name" | awk '{printf "%d MB", $1/1e6}'))"
}

build_golang() {
  local name=$1 goroot have
  goroot=$(go env GOROOT 2>/dev/null) || die "$name: no Go toolchain here (go env GOROOT) to build it from"
  have=$(go env GOVERSION)
  case "$have" in
    go"$GO_VERSION"|go"$GO_VERSION".*) ;;
    *) die "$name: this machine's Go is $have, not $GO_VERSION; install Go $GO_VERSION or set GO_VERSION" ;;
  esac
  ensure debian:bookworm-slim
  log "building $name: debian:bookworm-slim, gcc and libc6-dev from Debian, and $have from $goroot"
  mkdir -p "$work/golang"
  # The toolchain without its test data and caches.
  tar -C "$goroot" --exclude=./test --exclude='./pkg/obj' --exclude='./pkg/*_race' -c . | tar -C "$work/golang" --one-top-level=go -x
  cat >"$work/golang/Dockerfile" <<DOCKERFILE
FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates gcc g++ libc6-dev git make pkg-config \
 && rm -rf /var/lib/apt/lists/*
COPY go /usr/local/go
ENV GOLANG_VERSION=${have#go} GOTOOLCHAIN=local GOPATH=/go PATH=/go/bin:/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
RUN mkdir -p /go/src /go/bin && chmod -R 1777 /go && go version
WORKDIR /go
DOCKERFILE
  docker build --network host -q -t "$name" "$work/golang" >"$work/golang.log" 2>&1 ||
    die "building $name failed: $(tail -10 "$work/golang.log")"
  log "built $name"
}

ensure() {
  local name=$1
  present "$name" && return 0
  log "$name is not present; pulling it"
  if timeout "${EOSINK_PULL_TIMEOUT:-120}" docker pull -q "$name" >"$work/pull.log" 2>&1; then
    log "pulled $name"; return 0
  fi
  log "could not pull $name ($(tail -1 "$work/pull.log")); building it locally"
  case "$name" in
    debian:bookworm-slim) build_debian "$name" ;;
    golang:"$GO_VERSION"-bookworm) build_golang "$name" ;;
    *) die "no local recipe for $name" ;;
  esac
}

[ $# -gt 0 ] || set -- debian:bookworm-slim "golang:$GO_VERSION-bookworm"
for image in "$@"; do ensure "$image"; done
