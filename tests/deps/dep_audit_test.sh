#!/usr/bin/env bash
# The fresh-machine audit (scripts/dep_audit.sh) over this build tree:
#   1. passes with the real package list of scripts/deps.sh;
#   2. fails, naming the package, when one package the build needs is dropped
#      from the list (each of a few, one at a time).
# Usage: dep_audit_test.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src=$1
build=$2
audit="$src/scripts/dep_audit.sh"

echo "--- real list"
"$audit" --tools "$build"

tmp=$(mktemp -d /tmp/taskengine-dep-audit-test.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
"$src/scripts/deps.sh" test --list > "$tmp/full"
failures=0
# Packages the build uses for headers, CMake configs and test tools; none is a
# dependency of another listed package.
for pkg in nlohmann-json3-dev libsodium-dev faketime; do
  echo "--- without $pkg"
  grep -vx "$pkg" "$tmp/full" > "$tmp/list"
  set +e
  out=$("$audit" --tools --deps-list "$tmp/list" "$build" 2>&1)
  rc=$?
  set -e
  printf '%s\n' "$out" | sed 's/^/    /'
  if [ $rc -ne 1 ]; then
    echo "FAIL: audit without $pkg exited $rc, expected 1"; failures=$((failures + 1))
  elif ! printf '%s\n' "$out" | grep -q "^  $pkg "; then
    echo "FAIL: audit without $pkg did not name it"; failures=$((failures + 1))
  fi
done
[ $failures -eq 0 ] && echo "dep_audit_test: ok"
exit $failures
