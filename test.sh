#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test. Each test source is
# compiled once, in the tree where it proves the most (docs/testing.md):
#   0. clang-format --dry-run -Werror over every C++ source of the tree.
#   1. Release (gcc -O3, the shipped build; preset ci-release): the drills
#      (label drill), the sized load drills (label load) at the CI sizes
#      below, the dashboard in chromium (label browser); then the .deb is
#      built from the same objects (ccache) and checked
#      (tests/install/deb_test.sh).
#   2. ASan+UBSan (clang; preset asan): the product instrumented (and, as in
#      every clang tree, its locking checked: -Werror=thread-safety); the unit,
#      conformance and integration suites (the drills run in Release only).
#      The same tree is compiled for libFuzzer coverage (-fsanitize=fuzzer-no-
#      link), so the fuzz targets link its libraries: each gets a short run.
#   3. TSan (clang): the concurrency suites (engine, both backends'
#      conformance, the PostgreSQL store).
#   The ASan+UBSan tree compiles in unity batches (CMAKE_UNITY_BUILD: it
#   built cold in 433 s instead of 645 s); the Release tree compiles each
#   source alone, as users build it, so a source that lacks an include of
#   its own still fails here.
#   At the end every build tree is audited against scripts/deps.sh
#   (scripts/dep_audit.sh), and the time of each step is printed.
# Steps 1-3 run against a throwaway PostgreSQL 15 cluster (scripts/pg_cluster.sh)
# and a throwaway MariaDB 10.11 server (scripts/mariadb_cluster.sh) that are
# started here and stopped on exit.
# Usage: ./test.sh [--quick | --full]
#   --quick  step 1 only, with every test in Release (preset release)
#   --full   the load drills at the sizes of quality.md (RD9: 10,000 jobs) and
#            the library defaults, instead of the CI sizes
set -euo pipefail
cd "$(dirname "$0")"
mode=${1:-}
jobs=$(nproc)

# Steps and their wall times, printed at the end (and on failure).
declare -a step_names=() step_secs=()
step_start=$SECONDS
step_name=""
step() {
  if [ -n "$step_name" ]; then
    step_names+=("$step_name")
    step_secs+=($((SECONDS - step_start)))
  fi
  step_name=$1
  step_start=$SECONDS
  [ -n "$1" ] && echo "==> $1"
  return 0
}
print_times() {
  step ""
  echo "==> time per step (s)"
  local i
  for i in "${!step_names[@]}"; do
    printf '    %5d  %s\n' "${step_secs[$i]}" "${step_names[$i]}"
  done
  printf '    %5d  total\n' "$SECONDS"
}

# One compiler cache for every tree: the package build below reuses the
# Release objects (same flags; the build directory is not part of the key).
export CCACHE_BASEDIR=$PWD CCACHE_NOHASHDIR=true

# Sizes of the load drills in CI (each takes 1-4 minutes here on 2 cores);
# --full leaves the library defaults (the multi-node drill: 20,000 jobs) and
# runs RD9 at quality.md's 10,000.
if [ "$mode" = "--full" ]; then
  export TE_RD9_JOBS=10000 TASKENGINE_BLACKBOX_SECONDS=${TASKENGINE_BLACKBOX_SECONDS:-600}
else
  export TE_RD9_JOBS=${TE_RD9_JOBS:-1000} \
    TASKENGINE_RD10_JOBS=${TASKENGINE_RD10_JOBS:-500} \
    TASKENGINE_RD11_JOBS=${TASKENGINE_RD11_JOBS:-200} \
    TASKENGINE_MULTINODE_JOBS=${TASKENGINE_MULTINODE_JOBS:-6000} \
    TASKENGINE_MULTINODE_COMMAND_JOBS=${TASKENGINE_MULTINODE_COMMAND_JOBS:-300} \
    TASKENGINE_BLACKBOX_SECONDS=${TASKENGINE_BLACKBOX_SECONDS:-45}
fi

step "checking Debian packages"
scripts/deps.sh test

step "clang-format --dry-run -Werror"
git ls-files -z '*.cc' '*.h' | xargs -0 clang-format --dry-run -Werror

build_preset() {
  local preset=$1; shift
  cmake --preset "$preset" >/dev/null
  cmake --build "build/$preset" -j "$jobs" "$@"
}

pg_dir=$(mktemp -d /tmp/taskengine-test-pg.XXXXXX)
maria_dir=$(mktemp -d /tmp/taskengine-test-mariadb.XXXXXX)
stop_servers() {
  scripts/pg_cluster.sh stop "$pg_dir" >/dev/null 2>&1 || true
  scripts/mariadb_cluster.sh stop "$maria_dir" >/dev/null 2>&1 || true
  rm -rf "$pg_dir" "$maria_dir"
  print_times
}
trap stop_servers EXIT
step "starting a throwaway PostgreSQL cluster"
TASKENGINE_TEST_PG_URL=$(scripts/pg_cluster.sh start "$pg_dir")
export TASKENGINE_TEST_PG_URL
echo "    $TASKENGINE_TEST_PG_URL"
step "starting a throwaway MariaDB server"
TASKENGINE_TEST_MYSQL_URL=$(scripts/mariadb_cluster.sh start "$maria_dir")
export TASKENGINE_TEST_MYSQL_URL
echo "    $TASKENGINE_TEST_MYSQL_URL"

release=ci-release
[ "$mode" = "--quick" ] && release=release
step "[$release] configure + build"
build_preset "$release"
step "[$release] ctest"
ctest --test-dir "build/$release" --output-on-failure -j "$jobs"
step "[package] the .deb (scripts/package.sh) holds the binary, unit and config"
# The package from the ci-release tree's flags (-O1): its objects come from ccache.
TASKENGINE_PACKAGE_CXX_FLAGS="-O1 -g1" TASKENGINE_PACKAGE_CXX_FLAGS_RELEASE="-DNDEBUG" \
  tests/install/deb_test.sh | tail -1

if [ "$mode" = "--quick" ]; then exit 0; fi

step "[asan] configure + build"
build_preset asan
step "[asan] ctest (unit, conformance, integration)"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build/asan --output-on-failure -j "$jobs"

tsan_tests=(engine_test sqlite_conformance_test postgres_conformance_test pg_store_test mariadb_conformance_test redis_transport_test redis_wakeup_test)
step "[tsan] configure + build"
build_preset tsan --target "${tsan_tests[@]}"
step "[tsan] ctest"
TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" \
  ctest --test-dir build/tsan --output-on-failure -j "$jobs" \
  -R "^($(IFS='|'; echo "${tsan_tests[*]}"))\$"

step "[asan] fuzz targets, short runs"
cmake --build build/asan -j "$jobs" --target fuzz_targets
for f in build/asan/tests/fuzz/*_fuzz; do
  name=$(basename "$f" _fuzz)
  corpus=tests/fuzz/corpus/$name
  work=$(mktemp -d)
  [ -d "$corpus" ] && cp -r "$corpus"/. "$work"/
  dict=()
  [ -f "tests/fuzz/$name.dict" ] && dict=(-dict="tests/fuzz/$name.dict")
  echo "  $name: 20 s"
  "$f" "${dict[@]}" -max_total_time=20 -timeout=5 -rss_limit_mb=2048 "$work" > "$work.log" 2>&1 \
    || { tail -40 "$work.log"; echo "fuzzer $name failed"; exit 1; }
  tail -1 "$work.log"
  rm -rf "$work" "$work.log"
done

step "[deps] every file the builds used and every test tool comes from scripts/deps.sh"
scripts/dep_audit.sh --tools build/ci-release build/asan build/tsan
step ""
echo "==> all tests passed"
