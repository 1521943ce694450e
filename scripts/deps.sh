#!/usr/bin/env bash
# Installs the Debian packages taskengine needs, only those that are missing.
# Called by run.sh, test.sh and bench/run.sh.
# Usage: scripts/deps.sh [build|test|bench] [--list]
#   bench   the test packages and what the benchmark report adds (valgrind)
#   --list  print the package names (one per line) instead of installing them;
#           scripts/dep_audit.sh reads the list this way.
# `test` also readies the browser tests (tests/browser): npm when node has none
# (Debian's nodejs ships without it), then `npm ci` there unless node_modules
# already matches package-lock.json.
set -euo pipefail

build_pkgs=(
  cmake ninja-build ccache g++ pkg-config
  libsqlite3-dev nlohmann-json3-dev libsodium-dev libcli11-dev libtomlplusplus-dev
  libspdlog-dev libfmt-dev libboost-dev libcurl4-openssl-dev libhowardhinnant-date-dev
  libgtest-dev libgmock-dev
  libpq-dev postgresql-15
  libmariadb-dev  # the MariaDB/MySQL backend's client (src/storage/mariadb)
  libhiredis-dev  # the Redis transport's client (src/transport)
)
test_pkgs=(clang libclang-rt-14-dev llvm lld clang-format faketime dpkg-dev chromium nodejs python3 node-typescript php-cli php-curl phpunit ruby ruby-activejob mariadb-server mariadb-client redis-server redis-tools)  # lld: every tree links with it when present (TASKENGINE_LINKER); clang-format: the format check; faketime: the clock drill (RD11); dpkg-dev: the .deb test; chromium, nodejs: the browser tests; nodejs, python3, node-typescript, php-cli, php-curl, phpunit, ruby, ruby-activejob: the client tests (tests/clients); mariadb-server, mariadb-client: the throwaway MariaDB of the tests (scripts/mariadb_cluster.sh); redis-server, redis-tools: the throwaway Redis of the transport tests (scripts/redis_server.sh)

bench_pkgs=(valgrind)  # bench/run.sh: callgrind's instructions per job

want=("${build_pkgs[@]}")
group=${1:-build}
case "$group" in
  build) ;;
  test) want+=("${test_pkgs[@]}") ;;
  bench) want+=("${test_pkgs[@]}" "${bench_pkgs[@]}") ;;
  *) echo "deps: unknown group $group (build, test or bench)" >&2; exit 2 ;;
esac
if [ "${2:-}" = "--list" ]; then
  printf '%s\n' "${want[@]}"
  exit 0
fi

root=$(cd "$(dirname "$0")/.." && pwd)
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
updated=0
apt_install() {
  if [ $updated -eq 0 ]; then $SUDO apt-get update -qq; updated=1; fi
  $SUDO apt-get install -y -qq --no-install-recommends "$@"
}

missing=()
for p in "${want[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "deps: all ${#want[@]} Debian packages present"
else
  echo "deps: installing ${missing[*]}"
  apt_install "${missing[@]}"
fi

if [ "$group" != "build" ]; then
  # The browser tests' npm packages (playwright-core, axe-core), pinned by the lock file.
  if ! command -v npm >/dev/null 2>&1; then
    echo "deps: installing npm (for the browser tests' packages)"
    apt_install npm
  fi
  browser=$root/tests/browser
  if [ ! -f "$browser/node_modules/.package-lock.json" ] ||
     [ "$browser/package-lock.json" -nt "$browser/node_modules/.package-lock.json" ]; then
    echo "deps: npm ci in tests/browser"
    (cd "$browser" && npm ci --no-audit --no-fund)
  else
    echo "deps: tests/browser/node_modules is up to date"
  fi
fi
