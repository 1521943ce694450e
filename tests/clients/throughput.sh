#!/bin/sh
# Throughput of each language's SDK worker (one process) on no-op jobs over
# HTTP, beside the C++ worker `taskengine worker:start` (whose no-op is a
# `command` job running /bin/true: one process per job). One serve for all
# (serve.sh); each language first dispatches its JOBS, then one worker with
# CONCURRENCY handlers runs them until done. Prints one line per worker.
#   TASKENGINE_BIN=... tests/clients/throughput.sh [JOBS [CONCURRENCY [LANGUAGE...]]]
set -eu
jobs=${1:-2000}
concurrency=${2:-4}
[ $# -gt 2 ] && shift 2 || set -- python node php ruby
. "$(cd "$(dirname "$0")" && pwd)/serve.sh"
start_serve throughput
export TASKENGINE_WORKER_TOKEN="$TASKENGINE_TEST_WORKER_TOKEN"
for language in "$@"; do
  case $language in
    python) (cd "$serve_root/clients/python" && /usr/bin/python3 bench/noop_worker.py "$jobs" "$concurrency") ;;
    node) (cd "$serve_root/clients/node" && /usr/bin/node bench/noop_worker.js "$jobs" "$concurrency") ;;
    php) (cd "$serve_root/clients/php" && /usr/bin/php bench/noop_worker.php "$jobs" "$concurrency") ;;
    ruby) (cd "$serve_root/clients/ruby" && /usr/bin/ruby bench/noop_worker.rb "$jobs" "$concurrency") ;;
    cpp)
      (cd "$serve_root/clients/python" && /usr/bin/python3 -c "
import taskengine
with taskengine.Client() as c:
    for start in range(0, $jobs, 1000):
        c.dispatch_bulk([{'job': 'sdk-noop'}] * min(1000, $jobs - start))")
      began=$(date +%s.%N)
      "$TASKENGINE_BIN" worker:start --server "$TASKENGINE_SERVER" --token "$TASKENGINE_WORKER_TOKEN" \
        --queues sdk-bench --concurrency "$concurrency" --max-jobs "$jobs" --poll-ms 1000 2>/dev/null
      ended=$(date +%s.%N)
      awk -v n="$jobs" -v c="$concurrency" -v a="$began" -v b="$ended" 'BEGIN {
        printf "cpp     %d no-op jobs (command /bin/true), concurrency %d: %.2f s, %.0f jobs/s\n", n, c, b - a, n / (b - a) }' ;;
    *) serve_fail "throughput.sh: unknown language $language" ;;
  esac
done
