#!/usr/bin/env bash
# Checks an installed abide as its users meet it: the headers that were
# installed, find_package(abide) with and without components, and pkg-config.
# Works for a full install and for a core-only one (-DABIDE_WITH_CURL=OFF
# -DABIDE_WITH_REDIS=OFF): a part that was not installed must then be refused.
# Usage: tests/consumer/run.sh PREFIX WORKDIR
#   PREFIX   where abide was installed (cmake --install BUILD --prefix PREFIX)
#   WORKDIR  scratch folder for the consumer builds (emptied first)
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: $0 PREFIX WORKDIR" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
source_headers="$here/../../include/abide"
prefix=$(cd "$1" && pwd)
rm -rf "$2"
mkdir -p "$2"
work=$(cd "$2" && pwd)
cxx=${CXX:-c++}
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
cmake_dir="$prefix/lib/cmake/abide"
[ -f "$cmake_dir/abideConfig.cmake" ] || cmake_dir=$(dirname "$(find "$prefix" -name abideConfig.cmake | head -n 1)")
pc_dir=$(dirname "$(find "$prefix" -name abide.pc | head -n 1)")

failures=0
fail() { echo "consumer: FAIL: $*" >&2; failures=$((failures + 1)); }
pass() { echo "consumer: ok: $*"; }

# Which optional parts this install has.
declare -A part_header=([curl]="client.h loop_client.h" [redis]=redis_store.h [sqlite]=sqlite_store.h)
declare -A installed=()
for part in curl redis sqlite; do
  export_name="$(tr '[:lower:]' '[:upper:]' <<<"${part:0:1}")${part:1}"
  if [ -f "$cmake_dir/abide${export_name}Targets.cmake" ]; then installed[$part]=1; fi
done
echo "consumer: $prefix has the core${installed[curl]:+, curl}${installed[redis]:+, redis}${installed[sqlite]:+, sqlite}"

# ---- headers ---------------------------------------------------------------
inc="$prefix/include/abide"
[ -f "$inc/version.h" ] && pass "abide/version.h is installed" || fail "abide/version.h is not installed"
for h in "$inc"/*.h; do
  name=$(basename "$h")
  # Only public headers: each one is in include/abide/ of the sources (src/ stays private).
  [ "$name" = version.h ] || [ -f "$source_headers/$name" ] || fail "abide/$name is installed but is not a public header"
done
for part in curl redis sqlite; do
  for h in ${part_header[$part]}; do
    if [ -n "${installed[$part]:-}" ]; then
      [ -f "$inc/$h" ] && pass "abide/$h is installed with $part" || fail "abide/$h is missing although $part is installed"
    else
      [ ! -e "$inc/$h" ] && pass "abide/$h is not installed without $part" || fail "abide/$h is installed without $part"
    fi
  done
  if [ -n "${installed[$part]:-}" ]; then
    [ -f "$pc_dir/abide-$part.pc" ] || fail "abide-$part.pc is missing although $part is installed"
  else
    [ ! -e "$pc_dir/abide-$part.pc" ] || fail "abide-$part.pc is installed without $part"
  fi
done
# Every installed header compiles on its own from the install alone (no src/
# header, nothing the install lacks), and the core ones include no libcurl, hiredis or SQLite.
for h in "$inc"/*.h; do
  name=$(basename "$h")
  if ! echo "#include <abide/$name>" | "$cxx" -std=c++20 -fsyntax-only -I"$prefix/include" -x c++ - 2>"$work/header.txt"; then
    fail "abide/$name does not compile on its own:"; head -n 5 "$work/header.txt" >&2
  fi
  case $name in client.h | loop_client.h | redis_store.h | sqlite_store.h) continue ;; esac
  if grep -Eq '^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"](curl/|hiredis|sqlite3)' "$h"; then
    fail "core header abide/$name includes a libcurl, hiredis or SQLite header"
  fi
done
pass "the installed headers compile on their own"
# abide::testing's manual clock comes with the core.
if echo "#include <abide/testing/manual_clock.h>" | "$cxx" -std=c++20 -fsyntax-only -I"$prefix/include" -x c++ - 2>"$work/header.txt"; then
  pass "abide/testing/manual_clock.h is installed and compiles on its own"
else
  fail "abide/testing/manual_clock.h is missing or does not compile:"; head -n 5 "$work/header.txt" >&2
fi

# ---- find_package ----------------------------------------------------------
# configure NAME [cmake args...]: configures tests/consumer into WORKDIR/NAME;
# its output is in WORKDIR/NAME.txt.
configure() {
  local name=$1
  shift
  cmake -S "$here" -B "$work/$name" "${generator[@]}" -DCMAKE_PREFIX_PATH="$prefix" "$@" >"$work/$name.txt" 2>&1
}
must_configure() {
  local name=$1 what=$2
  shift 2
  if configure "$name" "$@"; then pass "$what"; return 0; fi
  fail "$what: configure failed:"; tail -n 20 "$work/$name.txt" >&2
  return 1
}
# must_refuse NAME WHAT MESSAGE [cmake args...]: configure must fail, saying MESSAGE.
must_refuse() {
  local name=$1 what=$2 message=$3
  shift 3
  if configure "$name" "$@"; then
    fail "$what: configured, but should have failed"
  elif ! grep -q "$message" "$work/$name.txt"; then
    fail "$what: failed without saying \"$message\":"; tail -n 20 "$work/$name.txt" >&2
  else
    pass "$what: $message"
  fi
}
build_and_run() {
  local name=$1 program=$2
  if cmake --build "$work/$name" >"$work/$name-build.txt" 2>&1 && "$work/$name/$program"; then
    pass "$name: $program builds and runs"
  else
    fail "$name: $program did not build or run:"; tail -n 20 "$work/$name-build.txt" >&2
  fi
}

# A core-only consumer must not need libcurl, hiredis or even pkg-config.
if must_configure core "find_package(abide) without components, libcurl and pkg-config hidden" \
  -DABIDE_CONSUMER=core -DCMAKE_DISABLE_FIND_PACKAGE_CURL=ON -DCMAKE_DISABLE_FIND_PACKAGE_PkgConfig=ON; then
  build_and_run core consumer
  build_and_run core consumer_testing
fi
must_configure optional "OPTIONAL_COMPONENTS curl redis sqlite nosuch" -DABIDE_CONSUMER=optional || true
must_refuse unknown "COMPONENTS nosuch is refused" 'component "nosuch": unknown component' -DABIDE_CONSUMER=unknown
for part in curl redis sqlite; do
  if [ -n "${installed[$part]:-}" ]; then
    if must_configure "$part" "COMPONENTS $part" -DABIDE_CONSUMER=$part; then
      build_and_run "$part" "consumer_$part"
    fi
  else
    must_refuse "$part" "COMPONENTS $part is refused when not installed" "component \"$part\": not installed" \
      -DABIDE_CONSUMER=$part
  fi
done
if [ -n "${installed[curl]:-}" ]; then
  # A part whose own dependency is missing: refused when required, skipped when optional.
  must_refuse curl-nolib "COMPONENTS curl without libcurl is refused" 'component "curl": needs libcurl' \
    -DABIDE_CONSUMER=curl -DCMAKE_DISABLE_FIND_PACKAGE_CURL=ON
  if must_configure optional-nolib "OPTIONAL_COMPONENTS curl without libcurl configures" \
    -DABIDE_CONSUMER=optional -DCMAKE_DISABLE_FIND_PACKAGE_CURL=ON; then
    grep -q 'optional component "curl" not available' "$work/optional-nolib.txt" ||
      fail "OPTIONAL_COMPONENTS curl without libcurl: no message says why curl is missing"
  fi
fi
if [ -n "${installed[redis]:-}" ]; then
  must_refuse redis-nolib "COMPONENTS redis without pkg-config is refused" 'component "redis": needs hiredis' \
    -DABIDE_CONSUMER=redis -DCMAKE_DISABLE_FIND_PACKAGE_PkgConfig=ON
fi
if [ -n "${installed[sqlite]:-}" ]; then
  must_refuse sqlite-nolib "COMPONENTS sqlite without pkg-config is refused" 'component "sqlite": needs sqlite3' \
    -DABIDE_CONSUMER=sqlite -DCMAKE_DISABLE_FIND_PACKAGE_PkgConfig=ON
fi

# ---- pkg-config ------------------------------------------------------------
export PKG_CONFIG_PATH="$pc_dir${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
version=$(pkg-config --modversion abide)
# The .pc file and the generated abide/version.h must give one version.
# shellcheck disable=SC2046  # pkg-config's flags are words
if "$cxx" -o "$work/consumer_pc" "$here/main.cpp" -DABIDE_CONSUMER_EXPECT_VERSION="\"$version\"" \
  $(pkg-config --cflags --libs abide) && "$work/consumer_pc"; then
  pass "pkg-config abide ($version)"
else
  fail "pkg-config abide: the consumer did not build or run"
fi
if [ -n "${installed[curl]:-}" ]; then
  # shellcheck disable=SC2046
  if "$cxx" -o "$work/consumer_curl_pc" "$here/curl_main.cpp" $(pkg-config --cflags --libs abide-curl) &&
    "$work/consumer_curl_pc"; then
    pass "pkg-config abide-curl"
  else
    fail "pkg-config abide-curl: the consumer did not build or run"
  fi
fi
if [ -n "${installed[redis]:-}" ]; then
  [ "$(pkg-config --modversion abide-redis)" = "$version" ] && pkg-config --libs abide-redis >/dev/null &&
    pass "pkg-config abide-redis" || fail "pkg-config abide-redis"
fi
if [ -n "${installed[sqlite]:-}" ]; then
  [ "$(pkg-config --modversion abide-sqlite)" = "$version" ] && pkg-config --libs abide-sqlite >/dev/null &&
    pass "pkg-config abide-sqlite" || fail "pkg-config abide-sqlite"
fi

if [ "$failures" -ne 0 ]; then
  echo "consumer: $failures check(s) failed" >&2
  exit 1
fi
echo "consumer: all checks passed"
