#!/usr/bin/env bash
# Builds the Debian package: configures build/package for /usr (configuration
# in /etc), builds Release without tests and benchmarks, and runs CPack.
# Prints the path of the .deb. Usage: scripts/package.sh
# TASKENGINE_PACKAGE_CXX_FLAGS and TASKENGINE_PACKAGE_CXX_FLAGS_RELEASE
# override the compile flags (default: the `release` preset's, what ships);
# test.sh passes the ci-release tree's so that its package test reuses that
# tree's objects from ccache.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
flags=${TASKENGINE_PACKAGE_CXX_FLAGS:-"-O2 -g1"}
release_flags=${TASKENGINE_PACKAGE_CXX_FLAGS_RELEASE:-"-O3 -DNDEBUG"}
cmake -S . -B build/package -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS="$flags" \
  -DCMAKE_CXX_FLAGS_RELEASE="$release_flags" \
  -DCMAKE_INSTALL_PREFIX=/usr -DCMAKE_INSTALL_SYSCONFDIR=/etc \
  -DTASKENGINE_BUILD_TESTS=OFF -DTASKENGINE_BUILD_BENCH=OFF >/dev/null
cmake --build build/package -j "$jobs" >/dev/null
(cd build/package && cpack -G DEB >/dev/null)
ls -1 build/package/taskengine_*.deb | tail -1
