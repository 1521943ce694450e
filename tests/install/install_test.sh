#!/usr/bin/env bash
# `cmake --install` of this build tree into a temporary prefix, then an
# outside project (examples/) built against it with find_package(taskengine)
# and the embedded example run; the same example compiled with pkg-config;
# the installed binary, unit and default configuration present.
# Usage: install_test.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src=$1
build=$2
tmp=$(mktemp -d /tmp/taskengine-install-test.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix

echo "--- cmake --install into $prefix"
cmake --install "$build" --prefix "$prefix" >/dev/null
for f in bin/taskengine include/taskengine/engine.h \
         include/taskengine_client/worker.h \
         lib/cmake/taskengine/taskengineConfig.cmake lib/pkgconfig/taskengine.pc \
         lib/pkgconfig/taskengine-client.pc lib/systemd/system/taskengine.service \
         etc/taskengine/taskengine.toml share/doc/taskengine/operations.md; do
  [ -e "$prefix/$f" ] || { echo "FAIL: $f was not installed"; exit 1; }
done
"$prefix/bin/taskengine" --help >/dev/null
# The installed headers stand alone: nothing of src/ is needed.
if grep -rn '#include "\(storage\|engine\|core\|api\|server\)/' "$prefix/include"; then
  echo "FAIL: installed headers include internal headers"; exit 1
fi
# ... nor name the internal storage contract: no type that src/storage/store.h
# declares (Store, Lease, FinishRequest, ...) and no path under storage/.
storage_names=$(sed -n -E 's/^(struct|class|enum class) ([A-Za-z_]+).*/\2/p' \
  "$src/src/storage/store.h" | sort -u | paste -sd'|')
[ -n "$storage_names" ] || { echo "FAIL: no type names read from src/storage/store.h"; exit 1; }
if grep -rnwE "$storage_names" "$prefix/include/taskengine" ||
   grep -rn 'storage/' "$prefix/include/taskengine"; then
  echo "FAIL: installed headers name the internal storage contract (src/storage)"; exit 1
fi

echo "--- examples/ as an outside project: find_package(taskengine)"
cmake -S "$src/examples" -B "$tmp/ex" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$tmp/ex" >/dev/null
"$tmp/ex/embedded-example" "$tmp/ex/example.db"
[ -x "$tmp/ex/worker-example" ] || { echo "FAIL: worker-example was not built"; exit 1; }

echo "--- pkg-config"
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
# shellcheck disable=SC2046
c++ -O1 -o "$tmp/embedded-pc" "$src/examples/embedded.cc" $(pkg-config --cflags --libs taskengine)
"$tmp/embedded-pc" "$tmp/pc.db"
pkg-config --exists taskengine-client
echo "install_test: ok"
