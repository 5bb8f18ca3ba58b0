#!/usr/bin/env bash
# Builds abide with warnings as errors and runs every test: the plain build, a
# core-only build (no libcurl, no hiredis, no SQLite) and its tests, an install with a
# consumer project, the whole suite again under AddressSanitizer +
# UndefinedBehaviorSanitizer, the threaded tests under ThreadSanitizer, and a
# short run of every fuzz target. Installs missing Debian packages first.
# Usage: scripts/test.sh            (everything, as CI runs it)
#        ABIDE_QUICK=1 scripts/test.sh   (the plain build and its tests only)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
jobs=${ABIDE_JOBS:-2}
# Tests run three to a build job: most of their time is spent waiting on real
# servers, processes and clocks (the plain suite: 200 s at -j2, 103 s at -j4
# with 102 s of CPU in all).
test_jobs=${ABIDE_TEST_JOBS:-$((jobs * 3))}
log=$(mktemp -d)
trap 'rm -rf "$log"' EXIT

start=$(date +%s)
step() { printf '\n== [%4ds] %s\n' "$(( $(date +%s) - start ))" "$*"; }

step "dependencies"
bash scripts/deps.sh test

# The plain builds keep line tables only (-g1), as the sanitizer builds do:
# enough for a failure's stack trace, and a third less compile time than full
# debug information (the command-line tool's largest unit: 69 s at -g, 45 s at -g1).
line_tables=(-DCMAKE_C_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG")

step "build (RelWithDebInfo, warnings as errors)"
cmake --preset default -DABIDE_WERROR=ON "${line_tables[@]}" >/dev/null
cmake --build --preset default -j "$jobs"

step "tests"
ctest --preset default -j "$test_jobs" 2>&1 | tee "$log/ctest.txt"
# The structured-field conformance suite must really run: a skip means the
# suite folder was not found.
if grep -E 'SfConformance\.[A-Za-z]+ .*Skipped' "$log/ctest.txt"; then
  echo "abide: the structured-field conformance suite was skipped (suite not found)" >&2
  exit 1
fi

[ -n "${ABIDE_QUICK:-}" ] && exit 0

step "core-only build (no libcurl, no hiredis, no SQLite) and its tests"
# abide::core alone, with the CLI (without fetch), the tests and the examples
# that need no optional part: what a user without libcurl, hiredis or SQLite
# builds. Of the tests, only those that use the CLI or its library (which
# differ without the optional parts): the others are the same programs as in
# the build above, and passed there. Unoptimised (-O0, no debug information):
# it checks what builds and links without the parts, and the build above runs
# the optimiser's warnings on the same code (137 s here instead of 190 s).
cmake --preset core -DABIDE_WERROR=ON -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS_DEBUG=-O0 -DCMAKE_CXX_FLAGS_DEBUG=-O0 -DABIDE_BUILD_BENCH=OFF -DABIDE_BUILD_FUZZ=OFF \
  -DABIDE_TESTS_WITH_PARTS_ONLY=ON >/dev/null
cmake --build --preset core -j "$jobs"
ctest --preset core -j "$test_jobs"

step "install, and use the installed package as its users do (CMake components, pkg-config)"
# The full install and the core-only one: each part found when asked for and
# installed, refused otherwise (tests/consumer/run.sh).
rm -rf build/install build/install-core
cmake --install build/default --prefix "$root/build/install" >/dev/null
bash tests/consumer/run.sh "$root/build/install" "$root/build/consumer"
cmake --install build/core --prefix "$root/build/install-core" >/dev/null
bash tests/consumer/run.sh "$root/build/install-core" "$root/build/consumer-core"

step "tests under AddressSanitizer + UndefinedBehaviorSanitizer"
# The sanitizer presets build with clang (about half GCC's compile time for
# instrumented code) and line tables only (-g1), enough for their reports; the
# plain builds above stay with GCC, so both compilers check the code. Its test
# preset leaves out the SDK tests (label "sdk"): they exercise the callers, and
# the proxy's paths run here in the proxy_* tests.
cmake --preset asan -DABIDE_WERROR=ON >/dev/null
cmake --build --preset asan -j "$jobs"
ctest --preset asan -j "$test_jobs"

step "threaded tests under ThreadSanitizer"
cmake --preset tsan -DABIDE_WERROR=ON >/dev/null
# Only the threaded tests (label "threads", listed in tests/CMakeLists.txt) are built here.
threaded=$(sed -n 's/^set(ABIDE_THREADED_TESTS \(.*\))$/\1/p' tests/CMakeLists.txt)
targets=()
for m in $threaded; do
  [ -f "tests/${m}_test.cpp" ] && targets+=("${m}_test")
done
cmake --build --preset tsan -j "$jobs" --target "${targets[@]}"
ctest --preset tsan -j "$test_jobs"

if compgen -G "fuzz/*_fuzz.cpp" >/dev/null; then
  # A short run of each on its seed corpus: what a change broke at once (longer
  # runs: scripts/fuzz.sh SECONDS).
  step "fuzz targets, ${ABIDE_FUZZ_SECONDS:-5} s each"
  cmake --preset fuzz >/dev/null
  cmake --build --preset fuzz -j "$jobs"
  bash scripts/fuzz.sh "${ABIDE_FUZZ_SECONDS:-5}"
fi

step "all passed"
