#!/usr/bin/env bash
# A throwaway Redis server for tests (the Redis transport, RD12).
#
#   scripts/redis_server.sh start <dir>   start redis-server on 127.0.0.1 only,
#                                         on a free port (kept in <dir>/port,
#                                         so a restart reuses it), without
#                                         persistence (no RDB, no AOF: the
#                                         transport keeps nothing that must
#                                         survive); print its URL:
#                                         redis://127.0.0.1:<port>
#   scripts/redis_server.sh stop <dir>    stop it (SHUTDOWN NOSAVE, else
#                                         SIGTERM, else SIGKILL)
#   scripts/redis_server.sh url <dir>     print the URL of a started server
#
# Logs go to <dir>/server.log. Exit status non-zero on any failure, with the
# log's tail.
set -euo pipefail

REDIS_SERVER="${REDIS_SERVER:-/usr/bin/redis-server}"
REDIS_CLI="${REDIS_CLI:-/usr/bin/redis-cli}"

usage() {
  echo "usage: $0 start|stop|url <dir>" >&2
  exit 2
}

[ $# -eq 2 ] || usage
cmd="$1"
dir="$2"

fail() {
  echo "redis_server: $*" >&2
  [ -f "$dir/server.log" ] && tail -n 20 "$dir/server.log" >&2
  exit 1
}

# shellcheck source=lib/free_port.sh
source "$(dirname "$0")/lib/free_port.sh"

cli() { "$REDIS_CLI" -h 127.0.0.1 -p "$(cat "$dir/port")" "$@"; }

server_pid() {
  local pid
  [ -f "$dir/redis.pid" ] || return 1
  pid="$(cat "$dir/redis.pid" 2>/dev/null)" || return 1
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && echo "$pid"
}

case "$cmd" in
  start)
    [ -x "$REDIS_SERVER" ] || fail "$REDIS_SERVER missing (apt-get install redis-server)"
    mkdir -p "$dir"
    dir="$(cd "$dir" && pwd)"
    [ -f "$dir/port" ] || free_port >"$dir/port"
    if ! server_pid >/dev/null; then
      # Detached from our stdout: callers read it to its end (popen).
      setsid "$REDIS_SERVER" --bind 127.0.0.1 --port "$(cat "$dir/port")" \
        --save "" --appendonly no --dir "$dir" --pidfile "$dir/redis.pid" \
        --logfile "$dir/server.log" --daemonize no --protected-mode yes \
        </dev/null >>"$dir/server.log" 2>&1 &
      started=$!
      for _ in $(seq 1 300); do
        [ "$(cli ping 2>/dev/null)" = "PONG" ] && break
        kill -0 "$started" 2>/dev/null || fail "redis-server exited while starting"
        sleep 0.05
      done
      [ "$(cli ping 2>/dev/null)" = "PONG" ] || fail "redis-server did not answer within 15 s"
      # Its pid file may lag the first PONG.
      for _ in $(seq 1 100); do
        server_pid >/dev/null && break
        sleep 0.05
      done
    fi
    echo "redis://127.0.0.1:$(cat "$dir/port")"
    ;;
  stop)
    [ -f "$dir/port" ] || { echo "redis_server: no server in $dir" >&2; exit 1; }
    pid="$(server_pid)" || exit 0  # not running
    cli shutdown nosave >/dev/null 2>&1 || kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 200); do
      kill -0 "$pid" 2>/dev/null || exit 0
      sleep 0.05
    done
    kill -KILL "$pid" 2>/dev/null || true
    sleep 0.1
    ! kill -0 "$pid" 2>/dev/null || fail "redis-server (pid $pid) would not stop"
    ;;
  url)
    [ -f "$dir/port" ] || { echo "redis_server: no server in $dir" >&2; exit 1; }
    echo "redis://127.0.0.1:$(cat "$dir/port")"
    ;;
  *)
    usage
    ;;
esac
