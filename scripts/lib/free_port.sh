# Sourced by the throwaway-server scripts (pg_cluster.sh, mariadb_cluster.sh,
# redis_server.sh). free_port prints a TCP port free on 127.0.0.1 now.
free_port() {
  python3 - <<'PY' 2>/dev/null && return 0
import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])
s.close()
PY
  # Fallback without python: probe a random range with bash's /dev/tcp.
  local p
  for _ in $(seq 1 200); do
    p=$((20000 + RANDOM % 40000))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
      echo "$p"
      return 0
    fi
  done
  echo "$(basename "$0"): no free port found" >&2
  return 1
}
