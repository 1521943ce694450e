#!/usr/bin/env bash
# A throwaway PostgreSQL 15 cluster for tests (conformance, reconnect drills).
#
#   scripts/pg_cluster.sh start <dir>   initdb into <dir> (as the postgres user
#                                       when run as root), listen on 127.0.0.1
#                                       only on a free port, fsync on, trust
#                                       auth on loopback; start it; create the
#                                       database taskengine_test; print its URL:
#                                       postgres://postgres@127.0.0.1:<port>/taskengine_test
#   scripts/pg_cluster.sh stop <dir>    stop it (fast shutdown)
#   scripts/pg_cluster.sh url <dir>     print the URL of a started cluster
#
# Starting an already initialized <dir> restarts the same cluster on its port.
# Logs go to <dir>/server.log. Exit status non-zero on any failure.
set -euo pipefail

PG_BIN="${PG_BIN:-/usr/lib/postgresql/15/bin}"

usage() {
  echo "usage: $0 start|stop|url <dir>" >&2
  exit 2
}

[ $# -eq 2 ] || usage
cmd="$1"
dir="$2"

# Runs a command as the owner of the cluster: postgres refuses to run as root.
as_owner() {
  if [ "$(id -u)" -eq 0 ]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

# shellcheck source=lib/free_port.sh
source "$(dirname "$0")/lib/free_port.sh"

url_of() {
  local port
  port="$(cat "$dir/port")"
  echo "postgres://postgres@127.0.0.1:${port}/taskengine_test"
}

case "$cmd" in
  start)
    [ -x "$PG_BIN/initdb" ] || { echo "pg_cluster: $PG_BIN/initdb missing (apt-get install postgresql-15)" >&2; exit 1; }
    mkdir -p "$dir"
    dir="$(cd "$dir" && pwd)"
    if [ "$(id -u)" -eq 0 ]; then chown postgres:postgres "$dir"; fi
    if [ ! -f "$dir/data/PG_VERSION" ]; then
      as_owner "$PG_BIN/initdb" -D "$dir/data" -U postgres --auth=trust --encoding=UTF8 \
        --locale=C.UTF-8 >"$dir/initdb.log" 2>&1 ||
        { cat "$dir/initdb.log" >&2; exit 1; }
      port="$(free_port)"
      echo "$port" >"$dir/port"
      cat >>"$dir/data/postgresql.conf" <<EOF
# pg_cluster.sh: a throwaway test cluster
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$dir'
fsync = on
synchronous_commit = on
max_connections = 200
shared_buffers = 64MB
EOF
      cat >"$dir/data/pg_hba.conf" <<EOF
local all all trust
host all all 127.0.0.1/32 trust
EOF
    fi
    as_owner "$PG_BIN/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 start >/dev/null ||
      { tail -n 20 "$dir/server.log" >&2; exit 1; }
    port="$(cat "$dir/port")"
    if ! as_owner "$PG_BIN/psql" -h 127.0.0.1 -p "$port" -U postgres -d postgres -tAc \
        "SELECT 1 FROM pg_database WHERE datname = 'taskengine_test'" | grep -q 1; then
      as_owner "$PG_BIN/createdb" -h 127.0.0.1 -p "$port" -U postgres taskengine_test
    fi
    url_of
    ;;
  stop)
    [ -d "$dir/data" ] || { echo "pg_cluster: no cluster in $dir" >&2; exit 1; }
    as_owner "$PG_BIN/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null
    ;;
  url)
    [ -f "$dir/port" ] || { echo "pg_cluster: no cluster in $dir" >&2; exit 1; }
    url_of
    ;;
  *)
    usage
    ;;
esac
