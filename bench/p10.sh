#!/usr/bin/env bash
# P10 (quality.md §1): the dashboard's overview and executions pages in
# Chromium with 5,000,000 executions stored; prints the time from navigation
# to the data shown (tests/browser/p10_bench.mjs) for each page.
#
# Usage: bench/p10.sh [BUILD_DIR]   (default build/release; needs its
#        taskengine and taskengine-bench, and tests/browser's npm packages)
# P10_EXECUTIONS (default 5000000) sets the size. The filled database is kept
# as $P10_DIR/p10-<size>.db (default /tmp/taskengine-p10) and reused by the
# next run; delete it to fill again.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/release}
size=${P10_EXECUTIONS:-5000000}
dir=${P10_DIR:-/tmp/taskengine-p10}
db=$dir/p10-$size.db
for f in "$build/apps/taskengine/taskengine" "$build/bench/taskengine-bench"; do
  [ -x "$f" ] || { echo "p10: $f is not built (cmake --preset release && cmake --build build/release)" >&2; exit 2; }
done
mkdir -p "$dir"
if [ ! -f "$db" ]; then
  "$build/bench/taskengine-bench" fill --jobs "$size" --db "$db"
fi
echo "p10: $(du -h "$db" | cut -f1) database, load average $(cut -d' ' -f1-3 /proc/loadavg)"
TASKENGINE_BIN=$PWD/$build/apps/taskengine/taskengine P10_DB=$db node tests/browser/p10_bench.mjs
