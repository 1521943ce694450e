#!/usr/bin/env bash
# The .deb that scripts/package.sh builds holds the binary, the systemd unit
# (own user, state directory, restart on failure, SIGTERM with room for the
# grace period), the default configuration as a conffile, the docs and the
# maintainer scripts that create the service user.
# Usage: tests/install/deb_test.sh   (from anywhere; builds build/package)
set -euo pipefail
cd "$(dirname "$0")/../.."
deb=$(scripts/package.sh)
echo "--- $deb"
contents=$(dpkg-deb -c "$deb")
printf '%s\n' "$contents" | awk '{print "    " $6}'
fail=0
for f in ./usr/bin/taskengine ./usr/lib/systemd/system/taskengine.service \
         ./etc/taskengine/taskengine.toml ./usr/share/doc/taskengine/operations.md \
         ./usr/include/taskengine/engine.h ./usr/lib/x86_64-linux-gnu/cmake/taskengine/taskengineConfig.cmake; do
  printf '%s\n' "$contents" | awk '{print $6}' | grep -qx "$f" || { echo "FAIL: $f not in the package"; fail=1; }
done
tmp=$(mktemp -d /tmp/taskengine-deb-test.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
dpkg-deb -e "$deb" "$tmp/control"
grep -qx '/etc/taskengine/taskengine.toml' "$tmp/control/conffiles" || { echo "FAIL: config is not a conffile"; fail=1; }
grep -q 'adduser --system' "$tmp/control/postinst" || { echo "FAIL: postinst creates no user"; fail=1; }
dpkg-deb -x "$deb" "$tmp/root"
unit=$tmp/root/usr/lib/systemd/system/taskengine.service
for line in 'User=taskengine' 'StateDirectory=taskengine' 'Restart=on-failure' 'KillSignal=SIGTERM' \
            'LimitNOFILE=65536'; do
  grep -qx "$line" "$unit" || { echo "FAIL: unit lacks $line"; fail=1; }
done
if command -v systemd-analyze >/dev/null; then
  systemd-analyze verify "$unit" 2>&1 | grep -v 'taskengine: No such file\|Command /usr/bin/taskengine is not executable' || true
fi
"$tmp/root/usr/bin/taskengine" --config "$tmp/root/etc/taskengine/taskengine.toml" config:show >/dev/null 2>&1 \
  || "$tmp/root/usr/bin/taskengine" --help >/dev/null
[ $fail -eq 0 ] && echo "deb_test: ok"
exit $fail
