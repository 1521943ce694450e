#!/usr/bin/env bash
# A throwaway MariaDB 10.11 server for tests (conformance, reconnect drills).
#
#   scripts/mariadb_cluster.sh start <dir>   mariadb-install-db into <dir> (as
#                                            the mysql user when run as root),
#                                            listen on 127.0.0.1 only on a free
#                                            port and on <dir>/mysqld.sock, no
#                                            binlog, InnoDB flushed at each
#                                            commit; start it; create the
#                                            database taskengine_test and the
#                                            user taskengine (password
#                                            taskengine, every privilege, from
#                                            127.0.0.1); print its URL:
#                                            mysql://taskengine:taskengine@127.0.0.1:<port>/taskengine_test
#   scripts/mariadb_cluster.sh stop <dir>    stop it (mariadb-admin shutdown,
#                                            else SIGTERM, else SIGKILL)
#   scripts/mariadb_cluster.sh url <dir>     print the URL of a started server
#
# Starting an already initialized <dir> restarts the same server on its port
# (and only prints the URL when it is running). The server reads <dir>/my.cnf
# alone (--defaults-file: nothing from /etc/mysql). Logs go to
# <dir>/server.log. Exit status non-zero on any failure, with the log's tail.
set -euo pipefail

MARIADB_BIN="${MARIADB_BIN:-/usr/bin}"
MARIADBD="${MARIADBD:-/usr/sbin/mariadbd}"

usage() {
  echo "usage: $0 start|stop|url <dir>" >&2
  exit 2
}

[ $# -eq 2 ] || usage
cmd="$1"
dir="$2"

# Runs a command as the owner of the server: mariadbd refuses to run as root.
as_owner() {
  if [ "$(id -u)" -eq 0 ]; then
    runuser -u mysql -- "$@"
  else
    "$@"
  fi
}

fail() {
  echo "mariadb_cluster: $*" >&2
  [ -f "$dir/server.log" ] && tail -n 20 "$dir/server.log" >&2
  exit 1
}

# shellcheck source=lib/free_port.sh
source "$(dirname "$0")/lib/free_port.sh"

url_of() {
  local port
  port="$(cat "$dir/port")"
  echo "mysql://taskengine:taskengine@127.0.0.1:${port}/taskengine_test"
}

# The server's root, over the socket (root has no password: loopback only).
admin() { as_owner "$MARIADB_BIN/mariadb-admin" --no-defaults --socket="$dir/mysqld.sock" -uroot "$@"; }
client() { as_owner "$MARIADB_BIN/mariadb" --no-defaults --socket="$dir/mysqld.sock" -uroot "$@"; }

server_pid() {
  local pid
  [ -f "$dir/mariadbd.pid" ] || return 1
  pid="$(cat "$dir/mariadbd.pid" 2>/dev/null)" || return 1
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && echo "$pid"
}

case "$cmd" in
  start)
    [ -x "$MARIADBD" ] || fail "$MARIADBD missing (apt-get install mariadb-server)"
    mkdir -p "$dir"
    dir="$(cd "$dir" && pwd)"
    if [ "$(id -u)" -eq 0 ]; then chown mysql:mysql "$dir"; fi
    mkdir -p "$dir/tmp"
    if [ "$(id -u)" -eq 0 ]; then chown mysql:mysql "$dir/tmp"; fi
    if [ ! -d "$dir/data/mysql" ]; then
      port="$(free_port)"
      echo "$port" >"$dir/port"
      cat >"$dir/my.cnf" <<EOF
# mariadb_cluster.sh: a throwaway test server
[mariadbd]
datadir = $dir/data
# Its own temporary directory: a server deletes the temporary-table files
# (#sql*) it finds in its tmpdir when it starts, so a shared /tmp would let
# one test's server delete those of another server still running.
tmpdir = $dir/tmp
socket = $dir/mysqld.sock
pid-file = $dir/mariadbd.pid
log-error = $dir/server.log
port = $port
bind-address = 127.0.0.1
skip-name-resolve
skip-log-bin
local-infile = 0
character-set-server = utf8mb4
collation-server = utf8mb4_nopad_bin
max_connections = 250
# A payload may be as large as the engine's maximum payload limit (16 MiB):
# a statement carries it plus its other columns.
max_allowed_packet = 64M
innodb_buffer_pool_size = 64M
innodb_log_file_size = 48M
innodb_flush_log_at_trx_commit = 1
innodb_doublewrite = 1
EOF
      chmod 644 "$dir/my.cnf"
      as_owner "$MARIADB_BIN/mariadb-install-db" --defaults-file="$dir/my.cnf" \
        --auth-root-authentication-method=normal --skip-test-db >"$dir/install.log" 2>&1 ||
        { cat "$dir/install.log" >&2; fail "mariadb-install-db failed"; }
    fi
    if ! server_pid >/dev/null; then
      # Detached from our stdout: callers read it to its end (popen).
      as_owner setsid "$MARIADBD" --defaults-file="$dir/my.cnf" </dev/null >>"$dir/server.log" 2>&1 &
      started=$!
      for _ in $(seq 1 600); do
        admin --connect-timeout=2 ping >/dev/null 2>&1 && break
        kill -0 "$started" 2>/dev/null || fail "mariadbd exited while starting"
        sleep 0.1
      done
      admin --connect-timeout=2 ping >/dev/null 2>&1 || fail "mariadbd did not answer within 60 s"
    fi
    client -e "
      CREATE DATABASE IF NOT EXISTS taskengine_test CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
      CREATE USER IF NOT EXISTS 'taskengine'@'127.0.0.1' IDENTIFIED BY 'taskengine';
      CREATE USER IF NOT EXISTS 'taskengine'@'localhost' IDENTIFIED BY 'taskengine';
      GRANT ALL PRIVILEGES ON *.* TO 'taskengine'@'127.0.0.1' WITH GRANT OPTION;
      GRANT ALL PRIVILEGES ON *.* TO 'taskengine'@'localhost' WITH GRANT OPTION;" ||
      fail "creating taskengine_test failed"
    url_of
    ;;
  stop)
    [ -f "$dir/my.cnf" ] || { echo "mariadb_cluster: no server in $dir" >&2; exit 1; }
    pid="$(server_pid)" || exit 0  # not running
    admin --connect-timeout=5 --shutdown-timeout=60 shutdown >/dev/null 2>&1 || kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 600); do
      kill -0 "$pid" 2>/dev/null || exit 0
      sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
    sleep 0.2
    ! kill -0 "$pid" 2>/dev/null || fail "mariadbd (pid $pid) would not stop"
    ;;
  url)
    [ -f "$dir/port" ] || { echo "mariadb_cluster: no server in $dir" >&2; exit 1; }
    url_of
    ;;
  *)
    usage
    ;;
esac
