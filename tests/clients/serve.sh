# Sourced by run.sh and throughput.sh: a throwaway `taskengine serve` on an
# ephemeral port over a SQLite database in a temporary directory, configured
# by taskengine.toml here, with tenants a and b and three tokens.
#
#   start_serve NAME     exports TASKENGINE_SERVER, TASKENGINE_TOKEN (admin),
#                        TASKENGINE_TEST_WORKER_TOKEN (scope worker),
#                        TASKENGINE_TEST_TENANT_TOKEN (read,dispatch,operate for
#                        tenant a), TASKENGINE_TEST_WORK (the directory) and
#                        TASKENGINE_TEST_SCENARIOS; stops serve and removes the
#                        directory at exit.
# Needs TASKENGINE_BIN, the built binary.

serve_here=$(cd "$(dirname "$0")" && pwd)
serve_root=$(cd "$serve_here/../.." && pwd)
serve_pid=""
serve_work=""

serve_fail() {
  echo "$*" >&2
  exit 1
}

serve_stop() {
  if [ -n "$serve_pid" ]; then
    kill -TERM "$serve_pid" 2>/dev/null || true
    wait "$serve_pid" 2>/dev/null || true
    serve_pid=""
  fi
  if [ -n "$serve_work" ]; then rm -rf "$serve_work"; fi
}

serve_te() {
  "$TASKENGINE_BIN" --config "$serve_work/taskengine.toml" --db "$serve_work/te.db" "$@"
}

# token NAME SCOPES [TENANT]: creates a token, prints its secret.
serve_token() {
  serve_te token:create --name "$1" --scopes "$2" ${3:+--tenant "$3"} --json |
    sed -n 's/.*"secret" *: *"\([^"]*\)".*/\1/p'
}

start_serve() {
  if [ -z "${TASKENGINE_BIN:-}" ] || [ ! -x "$TASKENGINE_BIN" ]; then
    serve_fail "$1: TASKENGINE_BIN does not name the built taskengine binary"
  fi
  serve_work=$(mktemp -d "${TMPDIR:-/tmp}/te-clients-$1.XXXXXX")
  trap serve_stop EXIT
  trap 'exit 130' INT TERM
  cp "$serve_here/taskengine.toml" "$serve_work/taskengine.toml"
  serve_te migrate >/dev/null
  serve_te tenant:add a >/dev/null
  serve_te tenant:add b >/dev/null
  TASKENGINE_TOKEN=$(serve_token admin admin)
  TASKENGINE_TEST_WORKER_TOKEN=$(serve_token worker worker)
  TASKENGINE_TEST_TENANT_TOKEN=$(serve_token tenant-a read,dispatch,operate a)
  [ -n "$TASKENGINE_TOKEN" ] && [ -n "$TASKENGINE_TEST_WORKER_TOKEN" ] &&
    [ -n "$TASKENGINE_TEST_TENANT_TOKEN" ] || serve_fail "$1: token:create printed no secret"
  (cd "$serve_work" && TASKENGINE_HTTP_PORT=0 exec "$TASKENGINE_BIN" \
     --config taskengine.toml --db te.db serve) > "$serve_work/serve.log" 2>&1 &
  serve_pid=$!
  i=0
  TASKENGINE_SERVER=""
  while [ -z "$TASKENGINE_SERVER" ]; do
    TASKENGINE_SERVER=$(sed -n 's/.*listening on \(http:\/\/127\.0\.0\.1:[0-9]*\).*/\1/p' \
                        "$serve_work/serve.log" | head -n 1)
    [ -n "$TASKENGINE_SERVER" ] && break
    kill -0 "$serve_pid" 2>/dev/null || serve_fail "$1: serve exited: $(cat "$serve_work/serve.log")"
    i=$((i + 1))
    [ $i -lt 200 ] || serve_fail "$1: serve did not start in 20 s: $(cat "$serve_work/serve.log")"
    sleep 0.1
  done
  export TASKENGINE_SERVER TASKENGINE_TOKEN TASKENGINE_TEST_WORKER_TOKEN TASKENGINE_TEST_TENANT_TOKEN
  export TASKENGINE_TEST_WORK="$serve_work"
  export TASKENGINE_TEST_SCENARIOS="$serve_root/clients/scenarios.json"
}
