# Sourced by the Makefile: makes KAFKA_BOOTSTRAP_SERVERS and DATABASE_URL name running
# services. When both are already set they are used as they are; otherwise the test bed is
# started (idempotent) and its env file is sourced.
if [ -z "${KAFKA_BOOTSTRAP_SERVERS:-}" ] || [ -z "${DATABASE_URL:-}" ]; then
  _eosink_here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
  bash "$_eosink_here/services.sh" up || return 1 2>/dev/null || exit 1
  # shellcheck disable=SC1091
  . "${EOSINK_SERVICES_DIR:-$_eosink_here/../../.services}/env"
fi
export KAFKA_BOOTSTRAP_SERVERS DATABASE_URL
