#!/usr/bin/env bash
# Installs what is missing, builds Release, and starts `taskengine serve` on
# an embedded SQLite database under ./data/ with the demo taskengine.toml.
# Extra arguments go to `serve`. Stop it with Ctrl-C (graceful shutdown).
set -euo pipefail
cd "$(dirname "$0")"

echo "==> checking Debian packages"
scripts/deps.sh build

echo "==> building Release (build/release)"
cmake --preset release >/dev/null
cmake --build build/release --target taskengine

mkdir -p data
bin=build/release/apps/taskengine/taskengine
echo "==> migrating data/taskengine.db"
"$bin" --config taskengine.toml migrate
echo "==> starting: $bin --config taskengine.toml serve $*"
echo "    try in another terminal:"
echo "      $bin --config taskengine.toml job:dispatch hello --payload '{\"name\":\"world\"}'"
echo "      $bin --config taskengine.toml execution:list"
echo "      $bin --config taskengine.toml execution:show <id>"
exec "$bin" --config taskengine.toml serve "$@"
