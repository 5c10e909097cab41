#!/usr/bin/env bash
# A Docker engine for `make image` and `make test-docker`, on loopback only.
#
#   engine.sh up      use the engine that answers (DOCKER_HOST, or the default socket); when none
#                     does, install Debian's docker.io if dockerd is missing (apt-get) and start
#                     dockerd without a bridge network or firewall rules, recording its pid
#   engine.sh down    stop the dockerd that `up` started (by its recorded pid); an engine that
#                     was already running is left alone
#   engine.sh status  print whether an engine answers
#
# Containers then run with `--network host` only (no bridge exists), and builds use
# `docker build --network host`. The engine keeps its images in its data root across runs.
#
# Settings (environment):
#   EOSINK_DOCKER_STATE  where the pid and log of a started dockerd are kept. Default: <repo>/.services/docker
#   EOSINK_DOCKER_DATA   dockerd's --data-root.                             Default: dockerd's own (/var/lib/docker)
#   EOSINK_DOCKER_WAIT   seconds to wait for a started dockerd.             Default: 60
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
STATE=${EOSINK_DOCKER_STATE:-$repo/.services/docker}
WAIT=${EOSINK_DOCKER_WAIT:-60}

log() { printf 'engine: %s\n' "$*" >&2; }
die() { printf 'engine: ERROR: %s\n' "$*" >&2; exit 1; }

answers() { docker version --format '{{.Server.Version}}' >/dev/null 2>&1; }

sudo_() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo -n "$@"; fi; }

install() {
  if command -v dockerd >/dev/null && command -v docker >/dev/null; then return 0; fi
  command -v apt-get >/dev/null || die "no dockerd, and no apt-get to install Debian's docker.io; install a Docker engine"
  log "installing Debian's docker.io (apt-get; log: $STATE/apt.log)"
  mkdir -p "$STATE"
  { sudo_ apt-get update -q && sudo_ env DEBIAN_FRONTEND=noninteractive apt-get install -y -q docker.io; } \
    >"$STATE/apt.log" 2>&1 || die "apt-get install docker.io failed; see $STATE/apt.log"
}

up() {
  if answers; then
    log "Docker engine $(docker version --format '{{.Server.Version}}') answers; using it"
    return 0
  fi
  [ -z "${DOCKER_HOST:-}" ] || die "DOCKER_HOST=$DOCKER_HOST is set but no engine answers there"
  install
  mkdir -p "$STATE"
  # dockerd writes its own pid to --pidfile (removed when it exits).
  local args=(--bridge=none --iptables=false --ip6tables=false --ip-masq=false --pidfile "$STATE/dockerd.pid")
  [ -z "${EOSINK_DOCKER_DATA:-}" ] || args+=(--data-root "$EOSINK_DOCKER_DATA")
  log "starting dockerd ${args[*]} (log: $STATE/dockerd.log)"
  # setsid: the engine outlives this script and the make that ran it, until `down`.
  rm -f "$STATE/dockerd.pid"
  sudo_ setsid dockerd "${args[@]}" >"$STATE/dockerd.log" 2>&1 </dev/null &
  local i
  for i in $(seq 1 "$((WAIT * 2))"); do
    if answers && [ -s "$STATE/dockerd.pid" ]; then
      log "dockerd $(docker version --format '{{.Server.Version}}') ready (pid $(cat "$STATE/dockerd.pid"))"
      return 0
    fi
    jobs -r | grep -q . || die "dockerd exited during start-up; see $STATE/dockerd.log"
    sleep 0.5
  done
  die "dockerd did not answer after ${WAIT}s; see $STATE/dockerd.log"
}

down() {
  local pid i
  [ -f "$STATE/dockerd.pid" ] || { log "no dockerd started by this script"; return 0; }
  pid=$(cat "$STATE/dockerd.pid")
  if kill -0 "$pid" 2>/dev/null; then
    log "stopping dockerd (pid $pid)"
    sudo_ kill "$pid"
    for i in $(seq 1 60); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    kill -0 "$pid" 2>/dev/null && die "dockerd (pid $pid) did not stop in 30s"
  fi
  rm -f "$STATE/dockerd.pid"
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  status) if answers; then echo "Docker engine $(docker version --format '{{.Server.Version}}') answers"; else echo "no Docker engine answers"; exit 1; fi ;;
  *) echo "usage: $0 up|down|status" >&2; exit 2 ;;
esac
