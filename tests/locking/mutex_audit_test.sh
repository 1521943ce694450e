#!/usr/bin/env bash
# Every mutex of taskengine is a taskengine::Mutex (src/core/mutex.h),
# which clang's thread-safety analysis checks; a std::mutex, std::shared_mutex,
# std::recursive_mutex or std::timed_mutex elsewhere in src/ or include/ would
# escape it. This test:
#   1. fails naming file:line for each such type outside the wrapper header
#      (comments aside);
#   2. proves it would: on a scratch tree with one planted, the audit fails
#      and names it, and ignores the wrapper header itself.
# Usage: mutex_audit_test.sh SOURCE_DIR
set -euo pipefail
src=$1

# audit ROOT: prints "path:line: text" for each forbidden type under
# ROOT/src and ROOT/include outside src/core/mutex.h; exit 1 if any.
audit() {
  local root=$1
  local files
  files=$(cd "$root" && find src include -type f \
            \( -name '*.h' -o -name '*.cc' -o -name '*.hpp' -o -name '*.cpp' -o -name '*.inc' \) \
            ! -path src/core/mutex.h | LC_ALL=C sort)
  [ -n "$files" ] || return 0
  local found
  # shellcheck disable=SC2086
  found=$(cd "$root" && awk '{
      code = $0
      sub(/\/\/.*/, "", code)  # a comment may name the type
      if (code ~ /std::(recursive_|shared_|timed_|recursive_timed_|shared_timed_)?mutex([^_A-Za-z0-9]|$)/)
        printf "%s:%d: %s\n", FILENAME, FNR, $0
    }' $files)
  if [ -n "$found" ]; then
    printf '%s\n' "$found"
    echo "mutex audit: use taskengine::Mutex (src/core/mutex.h), which clang's" \
         "thread-safety analysis checks, instead of the std:: types above"
    return 1
  fi
}

echo "--- the tree"
audit "$src"

echo "--- a scratch tree with one std::mutex planted"
tmp=$(mktemp -d /tmp/taskengine-mutex-audit.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/src/engine" "$tmp/src/core" "$tmp/include/taskengine"
printf '// std::mutex in a comment is fine\nclass Planted {\n  std::shared_mutex mu_;\n};\n' \
  > "$tmp/src/engine/planted.h"
printf '#include <mutex>\nstd::mutex wrapped;\n' > "$tmp/src/core/mutex.h"
set +e
out=$(audit "$tmp")
rc=$?
set -e
printf '%s\n' "$out" | sed 's/^/    /'
if [ $rc -ne 1 ] || ! printf '%s\n' "$out" | grep -q '^src/engine/planted.h:3: '; then
  echo "FAIL: the audit did not name src/engine/planted.h:3 (exit $rc)"; exit 1
fi
if printf '%s\n' "$out" | grep -q '^src/core/mutex.h:\|^src/engine/planted.h:1:'; then
  echo "FAIL: the audit flagged the wrapper header or a comment"; exit 1
fi
echo "mutex_audit_test: ok"
