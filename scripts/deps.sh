#!/usr/bin/env bash
# Installs the Debian packages taskengine needs, only those that are missing.
# Called by run.sh and test.sh. Usage: scripts/deps.sh [build|test] [--list]
#   --list  print the package names (one per line) instead of installing them;
#           scripts/dep_audit.sh reads the list this way.
set -euo pipefail

build_pkgs=(
  cmake ninja-build ccache g++ pkg-config
  libsqlite3-dev nlohmann-json3-dev libsodium-dev libcli11-dev libtomlplusplus-dev
  libspdlog-dev libfmt-dev libboost-dev libcurl4-openssl-dev libhowardhinnant-date-dev
  libgtest-dev libgmock-dev
  libpq-dev postgresql-15
)
test_pkgs=(clang libclang-rt-14-dev llvm lld clang-format faketime dpkg-dev)  # lld: every tree links with it when present (TASKENGINE_LINKER); clang-format: the format check; faketime: the clock drill (RD11); dpkg-dev: the .deb test

want=("${build_pkgs[@]}")
if [ "${1:-build}" = "test" ]; then want+=("${test_pkgs[@]}"); fi
if [ "${2:-}" = "--list" ]; then
  printf '%s\n' "${want[@]}"
  exit 0
fi

missing=()
for p in "${want[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "deps: all ${#want[@]} Debian packages present"
  exit 0
fi
echo "deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
