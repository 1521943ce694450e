#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test:
#   1. Release build: all CTest labels (unit, conformance, integration, drill).
#   2. ASan+UBSan build: all labels again.
#   3. TSan build (clang): the concurrency suites (engine, both backends'
#      conformance, the PostgreSQL store).
#   4. libFuzzer targets (clang), each for a short run.
#   After step 1 the .deb is built and checked (tests/install/deb_test.sh); at
#   the end every build tree is audited against scripts/deps.sh
#   (scripts/dep_audit.sh).
# Steps 1-3 run against a throwaway PostgreSQL 15 cluster (scripts/pg_cluster.sh)
# that is started here and stopped on exit.
# Usage: ./test.sh [--quick]   (--quick: step 1 only)
set -euo pipefail
cd "$(dirname "$0")"
quick=0
[ "${1:-}" = "--quick" ] && quick=1
jobs=$(nproc)

echo "==> checking Debian packages"
scripts/deps.sh test

run_preset() {
  local preset=$1; shift
  echo "==> [$preset] configure + build"
  cmake --preset "$preset" >/dev/null
  cmake --build "build/$preset" -j "$jobs" "$@"
  echo "==> [$preset] ctest"
}

echo "==> starting a throwaway PostgreSQL cluster"
pg_dir=$(mktemp -d /tmp/taskengine-test-pg.XXXXXX)
stop_pg() {
  scripts/pg_cluster.sh stop "$pg_dir" >/dev/null 2>&1 || true
  rm -rf "$pg_dir"
}
trap stop_pg EXIT
TASKENGINE_TEST_PG_URL=$(scripts/pg_cluster.sh start "$pg_dir")
export TASKENGINE_TEST_PG_URL
echo "    $TASKENGINE_TEST_PG_URL"

run_preset release
ctest --test-dir build/release --output-on-failure -j "$jobs"
echo "==> [package] the .deb (scripts/package.sh) holds the binary, unit and config"
tests/install/deb_test.sh | tail -1

if [ $quick -eq 1 ]; then exit 0; fi

run_preset asan
# The process-heavy drills run at full size in Release above; under the
# sanitizers they run smaller (every job there starts several processes).
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  TE_RD9_JOBS=400 TASKENGINE_RD10_JOBS=400 TASKENGINE_RD11_JOBS=150 TASKENGINE_MULTINODE_JOBS=200 \
  ctest --test-dir build/asan --output-on-failure -j "$jobs"

run_preset tsan --target engine_test sqlite_conformance_test postgres_conformance_test pg_store_test
TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" \
  ctest --test-dir build/tsan --output-on-failure \
  -R '^(engine_test|sqlite_conformance_test|postgres_conformance_test|pg_store_test)$'

echo "==> [fuzz] build + short runs"
cmake -S . -B build/fuzz -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_COMPILER=clang \
  -DCMAKE_CXX_COMPILER=clang++ -DTASKENGINE_BUILD_FUZZ=ON -DTASKENGINE_BUILD_TESTS=OFF \
  -DTASKENGINE_BUILD_BENCH=OFF >/dev/null
cmake --build build/fuzz -j "$jobs" --target fuzz_targets
for f in build/fuzz/tests/fuzz/*_fuzz; do
  name=$(basename "$f" _fuzz)
  corpus=tests/fuzz/corpus/$name
  work=$(mktemp -d)
  [ -d "$corpus" ] && cp -r "$corpus"/. "$work"/
  dict=()
  [ -f "tests/fuzz/$name.dict" ] && dict=(-dict="tests/fuzz/$name.dict")
  echo "  $name: 30 s"
  "$f" "${dict[@]}" -max_total_time=30 -timeout=5 -rss_limit_mb=2048 "$work" > "$work.log" 2>&1 \
    || { tail -40 "$work.log"; echo "fuzzer $name failed"; exit 1; }
  tail -1 "$work.log"
  rm -rf "$work" "$work.log"
done
echo "==> [deps] every file the builds used and every test tool comes from scripts/deps.sh"
scripts/dep_audit.sh --tools build/release build/asan build/tsan build/fuzz
echo "==> all tests passed"
