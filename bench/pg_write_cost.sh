#!/usr/bin/env bash
# What PostgreSQL spends per execution on its row and index writes, counted
# with callgrind (deterministic, unlike a timed run on a shared machine).
#
#   bench/pg_write_cost.sh [--taskengine PATH] [--jobs N]
#
# A throwaway cluster (scripts/pg_cluster.sh) gets the engine's schema from
# `taskengine migrate`; the server is stopped and a single-user backend
# (postgres --single) runs, under valgrind, N admissions (INSERT ... SELECT of
# 1,000 rows a statement), then claims (SELECT ... LIMIT 100 FOR UPDATE SKIP
# LOCKED, then the UPDATE to running), then finishes (the rows locked by id,
# then the UPDATE to succeeded), each statement its own transaction, as the
# store's batches write them. The row-locking SELECTs answer a count (a
# single-user backend prints every row it returns, which a server's clients
# do not pay for). Three runs on copies of the same cluster:
# admissions only, admissions and claims, all three; each figure is the
# difference of two runs divided by N, so the backend's start is not counted.
# The statements are the store's writes written as plain SQL (the store binds
# arrays; the row and index work per execution is the same).
set -euo pipefail

cd "$(dirname "$0")/.."
taskengine=build/release/apps/taskengine/taskengine
jobs=10000
while [ $# -gt 0 ]; do
  case "$1" in
    --taskengine) taskengine="$2"; shift 2 ;;
    --jobs) jobs="$2"; shift 2 ;;
    *) echo "usage: $0 [--taskengine PATH] [--jobs N]" >&2; exit 2 ;;
  esac
done
[ "$jobs" -ge 1000 ] && [ $((jobs % 1000)) -eq 0 ] ||
  { echo "--jobs must be a multiple of 1000" >&2; exit 2; }
command -v valgrind >/dev/null || { echo "valgrind missing (scripts/deps.sh bench)" >&2; exit 1; }
PG_BIN="${PG_BIN:-/usr/lib/postgresql/15/bin}"

as_owner() {
  if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

work="$(mktemp -d /tmp/te-pg-write-cost.XXXXXX)"
if [ "$(id -u)" -eq 0 ]; then chown postgres "$work"; fi
trap 'scripts/pg_cluster.sh stop "$work/cluster" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
mkdir "$work/cluster"
url="$(scripts/pg_cluster.sh start "$work/cluster")"
TASKENGINE_DATABASE_URL="$url" "$taskengine" migrate >/dev/null
version="$(as_owner "$PG_BIN/psql" -h 127.0.0.1 -p "$(cat "$work/cluster/port")" -U postgres \
  -d taskengine_test -tAc "SELECT MAX(version) FROM taskengine.schema_version")"
scripts/pg_cluster.sh stop "$work/cluster"

# The workload of one run: admissions, then claims and finishes of 100 (the
# phases it names: a, c, f). Statements end with a blank line (postgres -j).
workload() {
  local phases="$1"
  local cols="job, tenant, queue, status, trigger, requester, payload, fingerprint, scheduled_at,"
  cols+=" run_at, queued_at, lane_key, parent_id, max_attempts, backoff_base_ms, backoff_cap_ms,"
  cols+=" max_permanent_attempts, max_ambiguous_attempts, max_consecutive_lease_expiries,"
  cols+=" lease_ms, max_unsupported_schema_attempts, lane_parked"
  printf 'SET search_path = taskengine;\n\n'
  for ((b = 0; b < jobs / 1000; ++b)); do
    printf "INSERT INTO executions (%s) SELECT 'noop', '', 'default', 0, 0, 'bench',"`
      `" '{\"i\":' || g || '}', 'c0ffee', 1000, 1000, 1000, '', 0, 3, 1000, 60000, 3, 3, 3,"`
      `" 30000, 3, 0 FROM generate_series(%d, %d) g;\n\n" "$cols" $((b * 1000 + 1)) $((b * 1000 + 1000))
  done
  for ((b = 0; b < jobs / 100; ++b)); do
    if [[ "$phases" == *c* ]]; then
      printf "SELECT COUNT(*) FROM (SELECT id FROM executions WHERE queue = 'default'"`
        `" AND status = 0 AND lane_parked = 0 AND run_at <= 5000 ORDER BY run_at, id LIMIT 100"`
        `" FOR UPDATE SKIP LOCKED) AS claimed;\n\n"
      printf "UPDATE executions SET status = 1, attempt = 1, claim_version = claim_version + 1,"`
        `" worker = 'node-0', started_at = 5000, lease_expires_at = 35000, finished_at = 0,"`
        `" handler_started = 1 WHERE id BETWEEN %d AND %d;\n\n" $((b * 100 + 1)) $((b * 100 + 100))
    fi
    if [[ "$phases" == *f* ]]; then
      printf "SELECT COUNT(*) FROM (SELECT id FROM executions WHERE id BETWEEN %d AND %d"`
        `" ORDER BY id FOR UPDATE) AS locked;\n\n" $((b * 100 + 1)) $((b * 100 + 100))
      printf "UPDATE executions SET status = 2, finished_at = 6000, lease_expires_at = 0,"`
        `" worker = '', result = NULL, error = '', progress = 100 WHERE id BETWEEN %d AND %d;\n\n" \
        $((b * 100 + 1)) $((b * 100 + 100))
    fi
  done
}

# Instructions of one single-user run of `phases` on a copy of the cluster.
run() {
  local phases="$1" data="$work/data-$1"
  cp -a "$work/cluster/data" "$data"
  workload "$phases" >"$work/$phases.sql"
  as_owner valgrind --tool=callgrind --callgrind-out-file="$work/cg.$phases" \
    "$PG_BIN/postgres" --single -j -D "$data" taskengine_test <"$work/$phases.sql" \
    >"$work/$phases.out" 2>"$work/$phases.err"
  if grep -q ERROR "$work/$phases.out"; then
    grep -m3 ERROR "$work/$phases.out" >&2
    exit 1
  fi
  sed -n 's/^summary: //p' "$work/cg.$phases"
  rm -rf "$data"
}

echo "PostgreSQL $("$PG_BIN/postgres" --version | awk '{print $3}'), schema version $version," \
  "$jobs executions, single-user backend under callgrind:"
empty="$(jobs=0 run x)"
admit="$(run a)"
claim="$(run ac)"
finish="$(run acf)"
awk -v n="$jobs" -v e="$empty" -v a="$admit" -v c="$claim" -v f="$finish" 'BEGIN {
  printf "  admission %.0f, claim %.0f, finish %.0f instructions per execution\n",
    (a - e) / n, (c - a) / n, (f - c) / n
  what = "PostgreSQL server instructions per execution (callgrind, single-user backend, " n " executions): "
  split("claim + finish|admission|claim|finish", names, "|")
  v[1] = (f - a) / n; v[2] = (a - e) / n; v[3] = (c - a) / n; v[4] = (f - c) / n
  for (i = 1; i <= 4; ++i)
    printf "@figure|callgrindpg|%s%s|%.0f|%.0f|%.0f|1|instructions|-|0\n", what, names[i], v[i], v[i], v[i]
}'
