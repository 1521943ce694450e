#!/bin/sh
# Runs the browser tests (ctest's dashboard_browser_test). TASKENGINE_BIN names
# the binary under test.
set -eu
cd "$(dirname "$0")"
if ! command -v node >/dev/null 2>&1; then
  echo "browser tests: node is not installed; run scripts/deps.sh test" >&2
  exit 1
fi
# One file; its tests run one after another (node 18, Debian 12's, has no
# --test-concurrency).
exec node --test --test-reporter=spec dashboard.test.mjs
