#!/bin/sh
# Runs one language's client conformance test (ctest's clients_<lang>_test):
# starts serve (serve.sh), runs the language's own test runner in
# clients/<lang> over every scenario of clients/scenarios.json, stops serve.
#   tests/clients/run.sh python|node|php|ruby     (TASKENGINE_BIN: the binary)
set -eu
lang=${1:?usage: run.sh python|node|php|ruby}
. "$(cd "$(dirname "$0")" && pwd)/serve.sh"

need() {
  [ -x "$1" ] || serve_fail "clients/$lang: $1 is missing (Debian package $2); run scripts/deps.sh test"
}

case $lang in
  python)
    need /usr/bin/python3 python3
    export PYTHONDONTWRITEBYTECODE=1
    set -- /usr/bin/python3 -m unittest -v tests.test_scenarios ;;
  node)
    need /usr/bin/node nodejs
    need /usr/bin/tsc node-typescript
    # index.d.ts must type-check the example's code before the scenarios run.
    (cd "$serve_root/clients/node" &&
      /usr/bin/tsc --noEmit --strict --target es2022 --module nodenext \
        --moduleResolution nodenext test/types.ts) ||
      serve_fail "clients/node: index.d.ts does not type-check test/types.ts"
    set -- /usr/bin/node --test test/scenarios.test.js ;;
  php)
    need /usr/bin/php php-cli
    /usr/bin/php -r 'exit(extension_loaded("curl") && extension_loaded("pcntl") ? 0 : 1);' ||
      serve_fail "clients/php: the curl or pcntl extension is missing (Debian packages php-curl, php-cli); run scripts/deps.sh test"
    need /usr/bin/phpunit phpunit
    set -- /usr/bin/phpunit --testdox ;;
  ruby)
    need /usr/bin/ruby ruby
    /usr/bin/ruby -e 'require "active_job"' 2>/dev/null ||
      serve_fail "clients/ruby: ActiveJob is missing (Debian package ruby-activejob); run scripts/deps.sh test"
    set -- /usr/bin/ruby -w -Itest -e 'require "scenarios_test"; require "active_job_test"' -- --verbose ;;
  *) serve_fail "run.sh: unknown language $lang" ;;
esac

start_serve "$lang"
cd "$serve_root/clients/$lang"
status=0
"$@" || status=$?
if [ $status -ne 0 ]; then
  echo "---- serve log (last 40 lines)" >&2
  tail -n 40 "$serve_work/serve.log" >&2
fi
exit $status
