#!/usr/bin/env bash
# Clang's thread-safety analysis really checks the Mutex of
# src/core/mutex.h: thread_safety_cases.cc compiles as written
# (CASE=0) and each locking mistake in it (CASE=1..5) fails with
# -Werror=thread-safety, with the analysis' message.
# Usage: thread_safety_test.sh CLANGXX SOURCE_DIR
set -euo pipefail
cxx=$1
src=$2
cases="$src/tests/locking/thread_safety_cases.cc"
compile() {
  "$cxx" -std=c++20 -fsyntax-only -Wthread-safety -Werror=thread-safety -I "$src/include" -I "$src/src" \
    -DCASE="$1" "$cases" 2>&1
}

echo "--- CASE=0: correct locking compiles"
compile 0
failures=0
for c in 1 2 3 4 5; do
  echo "--- CASE=$c: rejected"
  set +e
  out=$(compile $c)
  rc=$?
  set -e
  printf '%s\n' "$out" | grep 'error:' | sed 's/^/    /'
  if [ $rc -eq 0 ]; then
    echo "FAIL: CASE=$c compiled"; failures=$((failures + 1))
  elif ! printf '%s\n' "$out" | grep -q 'Werror,-Wthread-safety'; then
    echo "FAIL: CASE=$c failed, but not by the thread-safety analysis"; failures=$((failures + 1))
  fi
done
[ $failures -eq 0 ] && echo "thread_safety_test: ok"
exit $failures
