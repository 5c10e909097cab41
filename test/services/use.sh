# Sourced by the Makefile: makes KAFKA_BOOTSTRAP_SERVERS, DATABASE_URL and EOSINK_REGISTRY_URL
# name running services. When the first two are already set they are used as they are;
# otherwise the test bed is started (idempotent) and its env file is sourced. When only
# EOSINK_REGISTRY_URL is missing, the bed's registry alone is started and its URL taken.
_eosink_here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
_eosink_state=${EOSINK_SERVICES_DIR:-$_eosink_here/../../.services}
if [ -z "${KAFKA_BOOTSTRAP_SERVERS:-}" ] || [ -z "${DATABASE_URL:-}" ]; then
  bash "$_eosink_here/services.sh" up || return 1 2>/dev/null || exit 1
  # shellcheck disable=SC1091
  . "$_eosink_state/env"
elif [ -z "${EOSINK_REGISTRY_URL:-}" ]; then
  EOSINK_SERVICES_DIR=$_eosink_state EOSINK_SERVICES_ONLY=registry bash "$_eosink_here/services.sh" up || return 1 2>/dev/null || exit 1
  EOSINK_REGISTRY_URL=$(sed -n 's/^export EOSINK_REGISTRY_URL=//p' "$_eosink_state/env")
fi
export KAFKA_BOOTSTRAP_SERVERS DATABASE_URL
[ -z "${EOSINK_REGISTRY_URL:-}" ] || export EOSINK_REGISTRY_URL
