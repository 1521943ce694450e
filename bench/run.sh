#!/usr/bin/env bash
# The benchmark report: every P figure of quality.md §1 with fixed settings,
# three runs each (medians and min-max), the machine's floors measured in the
# same runs, the writer's instructions per job (callgrind), the CPU the
# throughput figures cost per unit and the most the cores allow at that cost,
# and the ratio of each figure to its target. Writes docs/benchmarks.md (or
# --out FILE).
#
#   bench/run.sh [--quick] [--out FILE] [--only LIST] [--build DIR]
#
#   --quick       small sizes and one run each: checks that every series runs
#                 and the report is written, in a few minutes; its figures are
#                 not comparable with the targets (the report says so)
#   --only LIST   comma-separated series to run (default all):
#                 p1 p1big p2 p6 p9 i7 callgrind callgrindbig callgrindlanes p3
#                 callgrindhttp p4 p8 p7 p5 callgrindpg p11 pickup p10 (p1big,
#                 callgrindbig: with 4 KiB payloads; callgrindlanes: each job in
#                 a lane; callgrindpg: PostgreSQL's instructions per execution)
#   --build DIR   the Release tree, built first (default build/release, then
#                 configured with the `release` preset when missing; another
#                 DIR must be configured already)
#
# Starts its own throwaway PostgreSQL, MariaDB and Redis servers
# (scripts/pg_cluster.sh, scripts/mariadb_cluster.sh, scripts/redis_server.sh)
# and stops them on exit. Needs `scripts/deps.sh bench` (the test packages
# and valgrind); P10 also needs tests/browser's npm packages.
#
# Each benchmark prints one `@figure|...` line per figure
# (bench/bench_support.h, PrintFigure); this script collects them. Run it on
# an otherwise idle machine: the load average before each series is in the
# report.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

quick=0
out=docs/benchmarks.md
only=""
build=build/release
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=1; shift ;;
    --out) out=$2; shift 2 ;;
    --only) only=",$2,"; shift 2 ;;
    --build) build=$2; shift 2 ;;
    -h|--help) sed -n '2,31p' "$0"; exit 0 ;;
    *) echo "bench/run.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
wanted() { [ -z "$only" ] || [[ "$only" == *",$1,"* ]]; }

scripts/deps.sh bench
# What the binaries are built from (before anything else can change the tree).
commit=$(git rev-parse --short HEAD)
dirty=""
git diff --quiet HEAD -- src apps bench include CMakeLists.txt 2>/dev/null ||
  dirty=" (with uncommitted changes to the sources)"
if [ ! -f "$build/build.ninja" ]; then
  # The preset configures build/release only; another tree must exist already.
  [ "$build" = build/release ] || { echo "bench/run.sh: $build is not a configured tree" >&2; exit 2; }
  cmake --preset release >/dev/null
fi
cmake --build "$build" --target taskengine taskengine-bench taskengine-http-bench \
  taskengine-scheduler-bench taskengine-pg-bench taskengine-pickup-bench
bin=$build/bench

work=$(mktemp -d /tmp/taskengine-bench-report.XXXXXX)
chmod 755 "$work"  # the servers' own users (postgres, mysql) keep their data under it
servers=()
cleanup() {
  for s in "${servers[@]}"; do
    "scripts/${s%%:*}" stop "${s#*:}" >/dev/null 2>&1 || true
  done
  rm -rf "$work"
}
trap cleanup EXIT
# start_server SCRIPT DIR VAR: starts a throwaway server and sets VAR to its
# URL. Not in a command substitution: the list the cleanup stops must be
# this shell's.
start_server() {
  servers+=("$1:$2")
  local url
  url=$("scripts/$1" start "$2")
  printf -v "$3" '%s' "$url"
}

if [ $quick -eq 1 ]; then
  runs=1; p1_jobs=20000; p6_jobs=20000; i7_jobs=20000; http_flags="--runs 1 --requests 5000 --jobs 10000 --executions 100000"
  p5_jobs=10000; pickup_samples=30; p10_size=100000; p10_runs=3; sched_runs=3
else
  runs=3; p1_jobs=100000; p6_jobs=100000; i7_jobs=100000; http_flags="--runs 3"
  p5_jobs=100000; pickup_samples=200; p10_size=5000000; p10_runs=9; sched_runs=5
fi
cg_jobs=5000
cg_requests=5000

figures=$work/figures
series_list=$work/series
: > "$figures"
: > "$series_list"
# series ID DESCRIPTION COMMAND...: runs COMMAND, keeps its output for the
# report and its @figure lines, and notes the load average before it.
series() {
  local id=$1 what=$2
  shift 2
  local load t0 t1 rc=0
  load=$(cut -d' ' -f1-3 /proc/loadavg)
  t0=$(date +%s)
  echo "==> $id: $what (load average $load)" >&2
  "$@" > "$work/$id.log" 2>&1 || rc=$?
  t1=$(date +%s)
  grep '^@figure|' "$work/$id.log" >> "$figures" || true
  printf '%s|%s|%s|%s|%s\n' "$id" "$what" "$load" "$((t1 - t0))" "$rc" >> "$series_list"
  if [ $rc -ne 0 ]; then
    echo "bench/run.sh: $id failed (exit $rc); its output:" >&2
    tail -20 "$work/$id.log" >&2
  fi
}

# The writer thread's instructions per job under callgrind: a P1 run of
# $cg_jobs jobs with one output file per thread; the writer's file is the one
# whose calls include SqliteStore::WriterLoop. Prints @figure lines.
# callgrind_writer [PAYLOAD_BYTES [LANES]]: with a string of that many bytes
# in each payload, or with the jobs in that many lanes (figures without a
# target).
callgrind_writer() {
  local bytes=${1:-0} lanes=${2:-0}
  local dir=$work/callgrind-$bytes-$lanes
  mkdir -p "$dir"
  valgrind --tool=callgrind --separate-threads=yes --callgrind-out-file="$dir/cg.out" \
    "$bin/taskengine-bench" p1 --jobs "$cg_jobs" --runs 1 --dir "$dir/db" \
    --payload-bytes "$bytes" --lanes "$lanes" > "$dir/run.log" 2>&1
  local writer=""
  for f in "$dir"/cg.out-*; do
    callgrind_annotate --inclusive=yes --threshold=100 "$f" > "$dir/writer.txt" 2>/dev/null
    if grep -q 'SqliteStore::WriterLoop()' "$dir/writer.txt"; then
      writer=$f
      break
    fi
  done
  [ -n "$writer" ] || { echo "callgrind: no writer thread found" >&2; return 1; }
  local total
  total=$(grep -m1 '^summary:' "$writer" | awk '{print $2}')
  # The inclusive cost of the first (largest) line naming each step.
  step() {
    grep -m1 -F "$1" "$dir/writer.txt" | awk '{gsub(",", "", $1); print $1}'
  }
  local admit claim started finish
  admit=$(step 'SqliteStore::AdmitAll(')
  claim=$(step 'SqliteStore::Claim(taskengine::ClaimRequest const&)::{lambda')
  started=$(step 'SqliteStore::MarkStarted(')
  finish=$(step 'SqliteStore::FinishBatch(')
  awk -v n="$cg_jobs" -v total="$total" -v admit="${admit:-0}" -v claim="${claim:-0}" \
      -v started="${started:-0}" -v finish="${finish:-0}" -v bytes="$bytes" \
      -v lanes="$lanes" 'BEGIN {
    id = bytes > 0 ? "callgrindbig" : lanes > 0 ? "callgrindlanes" : "callgrind"
    what = "writer instructions per job (callgrind, P1 with " n " jobs"
    what = what (bytes > 0 ? ", payloads of " bytes " bytes" : "")
    what = what (lanes > 0 ? ", in " lanes " lanes" : "") "): "
    cmp = bytes > 0 || lanes > 0 ? "-|0" : "<=|15000"
    printf "@figure|%s|%sclaim + finish|%.0f|%.0f|%.0f|1|instructions|%s\n", id, what, (claim + finish) / n, (claim + finish) / n, (claim + finish) / n, cmp
    printf "@figure|%s|%sall of the writer thread|%.0f|%.0f|%.0f|1|instructions|-|0\n", id, what, total / n, total / n, total / n
    printf "@figure|%s|%sadmission|%.0f|%.0f|%.0f|1|instructions|-|0\n", id, what, admit / n, admit / n, admit / n
    printf "@figure|%s|%sclaim|%.0f|%.0f|%.0f|1|instructions|-|0\n", id, what, claim / n, claim / n, claim / n
    printf "@figure|%s|%smark started|%.0f|%.0f|%.0f|1|instructions|-|0\n", id, what, started / n, started / n, started / n
    printf "@figure|%s|%sfinish|%.0f|%.0f|%.0f|1|instructions|-|0\n", id, what, finish / n, finish / n, finish / n
  }'
}

# --- SQLite, in process ------------------------------------------------------
wanted p1 && series p1 "P1 SQLite dispatch + drain" \
  "$bin/taskengine-bench" p1 --jobs "$p1_jobs" --runs "$runs" --dir "$work/db"
wanted p1big && series p1big "P1 SQLite dispatch + drain with 4 KiB payloads" \
  "$bin/taskengine-bench" p1 --jobs "$((p1_jobs / 5))" --runs "$runs" --dir "$work/db" \
  --payload-bytes 4096
wanted p2 && series p2 "P2 SQLite pickup latency, per-stage breakdown, floors" \
  "$bin/taskengine-bench" p2 --runs "$runs" --dir "$work/db"
wanted p6 && series p6 "P6 depth independence" \
  "$bin/taskengine-bench" p6 --jobs "$p6_jobs" --runs "$((runs + 1))" --dir "$work/db"
wanted p9 && series p9 "P9 memory" "$bin/taskengine-bench" p9 --dir "$work/db"
wanted i7 && series i7 "I7 dispatch latency during a retention purge" \
  "$bin/taskengine-bench" purge --jobs "$i7_jobs" --runs "$runs" --dir "$work/db"
wanted callgrind && series callgrind "writer instructions per job (callgrind)" callgrind_writer
wanted callgrindbig && series callgrindbig \
  "writer instructions per job with 4 KiB payloads (callgrind)" callgrind_writer 4096
wanted callgrindlanes && series callgrindlanes \
  "writer instructions per job, each job in a lane of its own (callgrind)" \
  callgrind_writer 0 "$cg_jobs"
# --- HTTP ----------------------------------------------------------------------
# The instructions per HTTP dispatch under callgrind, with each kind of
# token: of every thread of the process but the store's writer (the server,
# the engine and the one load client thread), and of the writer. Two runs of
# P3, of $cg_requests and of twice as many requests: the difference is what
# the second half of the larger run cost (the set-up, the connections and
# the first requests cost both runs the same). The writer's share per
# request depends on how many requests each commit takes, which depends on
# timing; the rest hardly does.
callgrind_http() {
  local dir=$work/callgrind-http kind n
  mkdir -p "$dir"
  for kind in static store; do
    for n in "$cg_requests" "$((2 * cg_requests))"; do
      valgrind --tool=callgrind --callgrind-out-file="$dir/$kind-$n.out" \
        "$bin/taskengine-http-bench" p3 --runs 1 --requests "$n" --tokens "$kind" \
        --dir "$dir/db" > "$dir/$kind-$n.log" 2>&1
      grep -m1 '^summary:' "$dir/$kind-$n.out" | awk '{print $2}' > "$dir/$kind-$n.total"
      # The writer thread's start routine (SqliteStore::Init's first
      # thread), whose inclusive count is the thread's.
      callgrind_annotate --inclusive=yes --threshold=100 "$dir/$kind-$n.out" 2>/dev/null |
        grep -F 'SqliteStore::Init()::{lambda()#1}' |
        awk '{gsub(",", "", $1); if ($1 + 0 > max) max = $1 + 0} END {print max + 0}' \
          > "$dir/$kind-$n.writer"
    done
    awk -v n="$cg_requests" -v kind="$kind" \
      -v t1="$(cat "$dir/$kind-$cg_requests.total")" \
      -v t2="$(cat "$dir/$kind-$((2 * cg_requests)).total")" \
      -v w1="$(cat "$dir/$kind-$cg_requests.writer")" \
      -v w2="$(cat "$dir/$kind-$((2 * cg_requests)).writer")" 'BEGIN {
      if (t1 == "" || t2 == "" || t2 <= t1) { print "callgrind: no count for " kind > "/dev/stderr"; exit 1 }
      what = "instructions per HTTP dispatch (callgrind, P3 with " n " and " 2 * n " requests, "
      what = what (kind == "static" ? "static tokens" : "a token kept in the store") "): "
      writer = (w2 - w1) / n
      rest = (t2 - t1) / n - writer
      printf "@figure|callgrindhttp|%sall threads but the writer|%.0f|%.0f|%.0f|1|instructions|-|0\n", what, rest, rest, rest
      printf "@figure|callgrindhttp|%sthe writer|%.0f|%.0f|%.0f|1|instructions|-|0\n", what, writer, writer, writer
    }' || return 1
  done
}

# shellcheck disable=SC2086  # http_flags is a list of flags
wanted p3 && series p3 "P3 HTTP dispatch" "$bin/taskengine-http-bench" p3 $http_flags --dir "$work/db"
wanted callgrindhttp && series callgrindhttp "instructions per HTTP dispatch (callgrind)" \
  callgrind_http
# shellcheck disable=SC2086
wanted p4 && series p4 "P4 remote workers" "$bin/taskengine-http-bench" p4 $http_flags --dir "$work/db"
# shellcheck disable=SC2086
wanted p8 && series p8 "P8 stats with many executions" \
  "$bin/taskengine-http-bench" p8 $http_flags --dir "$work/db"
# --- scheduler -------------------------------------------------------------------
wanted p7 && series p7 "P7 scheduler" \
  "$bin/taskengine-scheduler-bench" --runs "$sched_runs" --dir "$work/db"
# --- servers -----------------------------------------------------------------------
if wanted p5; then
  start_server pg_cluster.sh "$work/pg" pg_url
  series p5 "P5 PostgreSQL 15, 2 nodes" \
    "$bin/taskengine-pg-bench" "--database-url=$pg_url" "--jobs=$p5_jobs" "--runs=$runs" \
    "--dir=$work/db"
fi
wanted callgrindpg && series callgrindpg \
  "PostgreSQL server instructions per execution (callgrind)" \
  bench/pg_write_cost.sh --taskengine "$build/apps/taskengine/taskengine" --jobs "$cg_jobs"
if wanted p11 || wanted pickup; then
  start_server mariadb_cluster.sh "$work/maria" maria_url
  wanted p11 && series p11 "P11 MariaDB, 2 nodes" \
    "$bin/taskengine-pg-bench" "--database-url=$maria_url" "--jobs=$p5_jobs" "--runs=$runs" \
    "--dir=$work/db"
  if wanted pickup; then
    start_server redis_server.sh "$work/redis" redis_url
    series pickup "P11 cross-node pickup on MariaDB, with and without Redis" \
      "$bin/taskengine-pickup-bench" "--database-url=$maria_url" "--redis-url=$redis_url" \
      "--samples=$pickup_samples" --poll-ms=1000
  fi
fi
# --- browser ---------------------------------------------------------------------
wanted p10 && series p10 "P10 dashboard pages in Chromium" \
  env P10_EXECUTIONS="$p10_size" P10_RUNS="$p10_runs" bench/p10.sh "$build"

# --- the report ------------------------------------------------------------------
mkdir -p "$(dirname "$out")"
{
  echo "# Benchmarks"
  echo
  echo "Written by \`bench/run.sh$([ $quick -eq 1 ] && echo " --quick")\` on $(date -u '+%Y-%m-%d %H:%M UTC') at commit"
  echo "\`$commit\`$dirty. Do not edit by hand: run the script again."
  if [ $quick -eq 1 ]; then
    echo
    echo "**Quick mode:** small sizes and one run each. These figures only show that"
    echo "every series runs; they are not comparable with the targets."
  fi
  echo
  echo "Targets are quality.md §1's. *Median / target* is the median divided by"
  echo "the target for a floor (≥) and the target divided by the median for a"
  echo "ceiling (≤): 1 or more meets the target. Benchmarks and engine share"
  echo "the machine's cores."
  echo
  echo "P1cpu, P3cpu, P4cpu, P5cpu and P11cpu are what the runs of P1, P3, P4"
  echo "(one complete per execution), P5 and P11 cost: CPU time per job or"
  echo "request (user + system; the benchmark process holds the engine and its"
  echo "client; P5 and P11 add the database server's processes), and the most"
  echo "the machine's cores allow at that cost (cores / CPU per unit). The"
  echo "SQLite figures add the store's writer thread, which makes every write"
  echo "in turn: 1 / its CPU per unit bounds the figure as well. A target above"
  echo "such a bound needs less work per job, not better scheduling."
  echo
  echo "## Machine"
  echo
  echo "- CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(nproc) hardware threads"
  echo "- Memory: $(awk '/MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo)"
  echo "- Kernel: $(uname -sr); $(. /etc/os-release && echo "$PRETTY_NAME")"
  echo "- Filesystem of the databases (/tmp): $(df -T /tmp | awk 'NR == 2 {print $2}')"
  echo "- SQLite $(dpkg-query -W -f='${Version}' libsqlite3-0 2>/dev/null), PostgreSQL $(dpkg-query -W -f='${Version}' postgresql-15 2>/dev/null), MariaDB $(dpkg-query -W -f='${Version}' mariadb-server 2>/dev/null), Redis $(dpkg-query -W -f='${Version}' redis-server 2>/dev/null)"
  echo "- Compiler: $(c++ --version | head -1); the \`release\` preset (-O2)"
  echo
  echo "## Figures"
  echo
  echo "| Figure | What | Median | Min–max | Runs | Unit | Target | Median / target |"
  echo "|---|---|---:|---:|---:|---|---|---:|"
  awk -F'|' '
    function commas(s) {
      while (s ~ /[0-9][0-9][0-9][0-9]/) sub(/[0-9][0-9][0-9]($|,)/, ",&", s)
      return s
    }
    function fmt(v) {
      if (v >= 1000) return commas(sprintf("%.0f", v))
      if (v >= 100) return sprintf("%.0f", v)
      if (v >= 1) return sprintf("%.2f", v)
      return sprintf("%.3f", v)
    }
    {
      target = "–"; ratio = "–"
      if ($9 == ">=" || $9 == "<=") {
        target = ($9 == ">=" ? "≥ " : "≤ ") fmt($10)
        if ($9 == ">=") r = $10 > 0 ? $4 / $10 : 0
        else r = $4 > 0 ? $10 / $4 : 999
        ratio = sprintf("%.2f%s", r, r >= 1 ? "" : " (not met)")
      }
      range = ($7 > 1) ? fmt($5) "–" fmt($6) : "–"
      printf "| %s | %s | %s | %s | %s | %s | %s | %s |\n", $2, $3, fmt($4), range, $7, $8, target, ratio
    }' "$figures"
  echo
  echo "## Series"
  echo
  echo "| Series | Load average before (1, 5, 15 min) | Seconds | Exit |"
  echo "|---|---|---:|---:|"
  awk -F'|' '{printf "| %s | %s | %s | %s |\n", $2, $3, $4, $5}' "$series_list"
  echo
  echo "## Output of each series"
  echo
  echo "As printed (the figures above are their \`@figure\` lines); P2's per-stage"
  echo "breakdown of the pickup path is in its output."
  while IFS='|' read -r id what _; do
    echo
    echo "### $what"
    echo
    echo '```'
    { grep -v -e '^@figure|' -e '^==[0-9]*==' "$work/$id.log" || echo "(only the figures above)"; } |
      sed -e 's/[[:space:]]*$//' | tail -80
    echo '```'
  done < "$series_list"
} > "$out"
echo "bench/run.sh: wrote $out" >&2
if awk -F'|' '$5 != 0 {bad = 1} END {exit !bad}' "$series_list"; then
  echo "bench/run.sh: some series failed (see the report)" >&2
  exit 1
fi
