#!/usr/bin/env bash
# Fresh-machine audit: every file a build used and every tool the tests start
# must come from a Debian package that scripts/deps.sh installs, directly or as
# a dependency of a listed package (or from the base system: Essential or
# Priority: required packages, present on every Debian machine).
#
#   scripts/dep_audit.sh [--deps-list FILE] [--tools] BUILD_DIR...
#
# For each BUILD_DIR (a configured and built Ninja tree) it collects
#   - every header the compiler read (ninja's dependency log, `ninja -t deps`),
#   - every library the link lines name (absolute paths and -lNAME, resolved
#     with the compiler's -print-file-name),
#   - every file and directory path in CMakeCache.txt (compilers, programs,
#     libraries, and each package's CMake config directory `<Pkg>_DIR`),
# and with --tools the programs test.sh and its helpers start (PostgreSQL,
# MariaDB, clang, clang-format, faketime and its preload library, node and
# chromium for the browser tests, the interpreters and runners of the client
# tests).
# Each path outside the source and build trees is mapped to its package with
# dpkg's file lists. A path no package owns, or owned by a package outside
# the closure of the list, fails the audit with the package named.
#
# --deps-list FILE reads the package list from FILE (one name per line)
# instead of `scripts/deps.sh test --list`; the audit's own test uses it to
# prove that dropping a package is caught.
# Exit status: 0 clean, 1 findings, 2 usage or environment error.
set -euo pipefail
export LC_ALL=C  # one collation for sort, join and comm
root=$(cd "$(dirname "$0")/.." && pwd)

deps_list=""
check_tools=0
dirs=()
while [ $# -gt 0 ]; do
  case "$1" in
    --deps-list) deps_list=$2; shift 2 ;;
    --tools) check_tools=1; shift ;;
    -h|--help) sed -n '2,26p' "$0"; exit 0 ;;
    -*) echo "dep_audit: unknown option $1" >&2; exit 2 ;;
    *) dirs+=("$1"); shift ;;
  esac
done
if [ ${#dirs[@]} -eq 0 ] && [ $check_tools -eq 0 ]; then
  echo "usage: $0 [--deps-list FILE] [--tools] BUILD_DIR..." >&2
  exit 2
fi
command -v dpkg-query >/dev/null || { echo "dep_audit: needs dpkg (Debian)" >&2; exit 2; }

work=$(mktemp -d /tmp/taskengine-dep-audit.XXXXXX)
trap 'rm -rf "$work"' EXIT

# 1. The listed packages.
if [ -n "$deps_list" ]; then
  grep -v '^[[:space:]]*$' "$deps_list" > "$work/listed"
else
  "$root/scripts/deps.sh" test --list > "$work/listed"
fi

# 2. The closure: listed + base packages and everything they depend on
#    (Depends and Pre-Depends, every installed alternative, virtual packages
#    through Provides). Recommends are not followed: deps.sh installs with
#    --no-install-recommends.
dpkg-query -W -f='${db:Status-Abbrev}\t${Package}\t${Essential}\t${Priority}\t${Provides}\t${Depends}, ${Pre-Depends}\n' \
  > "$work/status"
awk -F'\t' -v listed="$work/listed" '
  function strip(n) { sub(/:.*/, "", n); gsub(/[[:space:]]/, "", n); return n }
  BEGIN { while ((getline l < listed) > 0) { seeds[strip(l)] = 1 } }
  $1 ~ /^ii/ {
    p = $2; installed[p] = 1
    if ($3 == "yes" || $4 == "required") seeds[p] = 1
    n = split($5, pv, ",")
    for (i = 1; i <= n; i++) { v = pv[i]; sub(/\(.*/, "", v); v = strip(v); if (v != "") prov[v] = prov[v] " " p }
    deps[p] = $6
  }
  END {
    head = 0; tail = 0
    for (s in seeds) if (s in installed) { seen[s] = 1; q[tail++] = s }
    while (head < tail) {
      p = q[head++]
      n = split(deps[p], groups, ",")
      for (i = 1; i <= n; i++) {
        m = split(groups[i], alts, "|")
        for (j = 1; j <= m; j++) {
          a = alts[j]; sub(/\(.*/, "", a); a = strip(a)
          if (a == "") continue
          cand = ""
          if (a in installed) cand = a
          if (a in prov) cand = cand prov[a]
          k = split(cand, cs, " ")
          for (c = 1; c <= k; c++) if (cs[c] != "" && !(cs[c] in seen)) { seen[cs[c]] = 1; q[tail++] = cs[c] }
        }
      }
    }
    for (p in seen) print p
  }' "$work/status" | sort > "$work/closure"

# 3. The paths the builds used.
: > "$work/paths"
for dir in "${dirs[@]}"; do
  dir=$(cd "$dir" && pwd)
  [ -f "$dir/build.ninja" ] || { echo "dep_audit: $dir is not a Ninja build tree" >&2; exit 2; }
  [ -f "$dir/.ninja_deps" ] || { echo "dep_audit: $dir has not been built (no .ninja_deps)" >&2; exit 2; }
  # Headers from the dependency log.
  ninja -C "$dir" -t deps 2>/dev/null | awk '/^    \// { print $1 }' >> "$work/paths"
  # CMake cache: every absolute path value (FILEPATH, PATH, STRING, INTERNAL).
  sed -n 's/^[A-Za-z0-9_.+-]*:[A-Z]*=\(\/[^;]*\)$/\1/p' "$dir/CMakeCache.txt" >> "$work/paths"
  # <Pkg>_DIR directories: the config files inside them.
  sed -n 's/^[A-Za-z0-9_.+-]*_DIR:PATH=\(\/.*\)$/\1/p' "$dir/CMakeCache.txt" | while read -r d; do
    [ -d "$d" ] && find "$d" -maxdepth 1 -name '*.cmake' >> "$work/paths"
  done
  # Link lines: absolute libraries and -lNAME.
  cxx=$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "$dir/CMakeCache.txt")
  ninja -C "$dir" -t commands 2>/dev/null | tr ' ' '\n' | sed 's/^-Wl,//' | tr ',' '\n' \
    | awk '/^\/.*\.(so|a)(\.[0-9.]+)?$/ { print; next } /^-l[A-Za-z0-9_+.-]+$/ { print }' \
    | sort -u | while read -r t; do
      case "$t" in
        -l*) f=$("$cxx" -print-file-name="lib${t#-l}.so"); [ "$f" = "lib${t#-l}.so" ] && f=$("$cxx" -print-file-name="lib${t#-l}.a")
             case "$f" in /*) echo "$f" ;; esac ;;
        *) echo "$t" ;;
      esac
    done >> "$work/paths"
done

# 4. The tools test.sh and its helpers start.
if [ $check_tools -eq 1 ]; then
  pg_bin=/usr/lib/postgresql/15/bin
  for t in "$pg_bin/initdb" "$pg_bin/pg_ctl" "$pg_bin/postgres" "$pg_bin/psql" \
           /usr/sbin/mariadbd /usr/bin/mariadb-install-db /usr/bin/mariadb-admin /usr/bin/mariadb \
           /usr/bin/redis-server /usr/bin/redis-cli \
           clang clang++ clang-format faketime runuser dpkg-shlibdeps dpkg-deb node chromium \
           /usr/bin/python3 /usr/bin/tsc /usr/bin/php /usr/bin/phpunit /usr/bin/ruby; do
    case "$t" in
      /*) p=$t ;;
      *) p=$(command -v "$t" || true) ;;
    esac
    if [ -z "$p" ] || [ ! -e "$p" ]; then
      echo "tool-missing	$t" >> "$work/missing-tools"
    else
      echo "$p" >> "$work/paths"
    fi
  done
  # faketime preloads this library; without it the clock drill cannot run.
  echo /usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1 >> "$work/paths"
fi

# Keep system paths only: the trees themselves are ours.
src_re=$(printf '%s' "$root" | sed 's/[.[\*^$]/\\&/g')
grep -v -e "^$src_re/" -e '^/tmp/' -e '^/proc/' "$work/paths" | sort -u > "$work/sys-paths" || true

# 5. Map each path to its package via dpkg's file lists (a path, its resolved
#    target, and the /usr-merged variants of both).
ls /var/lib/dpkg/info/*.list > "$work/lists"
# Files only: a directory belongs to many packages.
while read -r p; do [ -f "$p" ] && printf '%s\n' "$p"; done < "$work/sys-paths" > "$work/files"
mv "$work/files" "$work/sys-paths"
xargs -a "$work/sys-paths" -d '\n' readlink -f > "$work/resolved"
paste "$work/sys-paths" "$work/resolved" | awk -F'\t' '
  function variants(o, q) {
    print o "\t" q
    if (q ~ /^\/usr\/(lib|bin|sbin)\//) print o "\t" substr(q, 5)
    else if (q ~ /^\/(lib|bin|sbin)\//) print o "\t/usr" q
  }
  { variants($1, $1); variants($1, $2) }' | sort -u > "$work/candidates"

xargs -a "$work/lists" awk '
  { pkg = FILENAME; sub(/.*\//, "", pkg); sub(/\.list$/, "", pkg); sub(/:.*/, "", pkg); print $0 "\t" pkg }
' | sort -t$'\t' -k1,1 -u > "$work/owners" 2>/dev/null || true

# candidates: <original>\t<variant>; join on the variant.
sort -t$'\t' -k2,2 "$work/candidates" > "$work/candidates.by-variant"
join -t$'\t' -1 2 -2 1 -o 1.1,2.2 "$work/candidates.by-variant" "$work/owners" | sort -u > "$work/path-pkg"

status=0
# Paths no package owns.
cut -f1 "$work/path-pkg" | sort -u > "$work/owned"
comm -23 "$work/sys-paths" "$work/owned" | while read -r p; do
  [ -f "$p" ] || continue
  echo "unowned	$p"
done > "$work/unowned"
if [ -s "$work/unowned" ]; then
  echo "dep_audit: files the build used that no Debian package owns (installed by hand?):"
  sed 's/^unowned\t/  /' "$work/unowned" | head -40
  status=1
fi
if [ -s "$work/missing-tools" ] 2>/dev/null; then
  echo "dep_audit: tools the tests start that are not on this machine:"
  cut -f2 "$work/missing-tools" | sed 's/^/  /'
  status=1
fi

# Packages outside the closure, with one example path each.
awk -F'\t' -v closure="$work/closure" '
  BEGIN { while ((getline l < closure) > 0) ok[l] = 1 }
  !($2 in ok) { if (!($2 in ex)) { ex[$2] = $1; n[$2] = 0 } n[$2]++ }
  END { for (p in ex) printf "%s\t%d\t%s\n", p, n[p], ex[p] }
' "$work/path-pkg" | sort > "$work/outside"
if [ -s "$work/outside" ]; then
  echo "dep_audit: packages the build used that scripts/deps.sh does not install:"
  while IFS=$'\t' read -r pkg count example; do
    echo "  $pkg ($count files, e.g. $example)"
  done < "$work/outside"
  echo "dep_audit: add them (or a package that depends on them) to scripts/deps.sh"
  status=1
fi

if [ $status -eq 0 ]; then
  echo "dep_audit: $(wc -l < "$work/sys-paths") system files from $(cut -f2 "$work/path-pkg" | sort -u | wc -l) packages, all installed by scripts/deps.sh ($(wc -l < "$work/listed") listed, $(wc -l < "$work/closure") with dependencies and base)"
fi
exit $status
