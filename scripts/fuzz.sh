#!/usr/bin/env bash
# Runs every built fuzz target for N seconds (default 30) on its seed corpus,
# ABIDE_JOBS targets at a time (default 2).
# Build them first: cmake --preset fuzz && cmake --build --preset fuzz
# New inputs go to a scratch folder, never into the committed corpus; a crash
# leaves its input in build/fuzz/findings/ and the log is printed.
# A target fails when its run fails or when its log holds any sanitizer or
# libFuzzer report, whatever the exit status: a report that a run went on
# past is still a finding.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-30}
jobs=${ABIDE_JOBS:-2}
findings=build/fuzz/findings
mkdir -p "$findings"
# The targets are built to halt on the first report; say so at run time too.
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
export ASAN_OPTIONS=${ASAN_OPTIONS:-halt_on_error=1}

# What a sanitizer or libFuzzer writes when it reports something.
report='runtime error:|(ERROR|SUMMARY|WARNING): *[A-Za-z]*Sanitizer|(ERROR|SUMMARY): libFuzzer'
export report

one() {
  local bin=$1 secs=$2 findings=$3
  local name scratch seeds status=0
  name=$(basename "$bin" _fuzz)
  scratch=$(mktemp -d)
  seeds=fuzz/corpus/$name
  [ -d "$seeds" ] || seeds=""
  "$bin" -max_total_time="$secs" -print_final_stats=1 -artifact_prefix="$findings/$name-" \
    "$scratch" $seeds >"$scratch.log" 2>&1 || status=$?
  if [ "$status" -eq 0 ] && ! grep -Eq "$report" "$scratch.log"; then
    execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$scratch.log" | grep -o '[0-9]*$' || echo "?")
    cov=$(grep -o 'cov: [0-9]*' "$scratch.log" | tail -1 | grep -o '[0-9]*' || echo "?")
    ft=$(grep -o 'ft: [0-9]*' "$scratch.log" | tail -1 | grep -o '[0-9]*' || echo "?")
    echo "fuzz $name: ok, $execs executions in ${secs}s, coverage $cov edges, $ft features"
    rm -rf "$scratch" "$scratch.log"
    return 0
  fi
  echo "fuzz $name: FAILED (exit status $status)"
  echo "first reports:"
  grep -E -m 5 "$report" "$scratch.log" || echo "(none: the run itself failed)"
  echo "log tail:"
  tail -40 "$scratch.log"
  rm -rf "$scratch" "$scratch.log"
  return 1
}
export -f one

targets=()
for bin in build/fuzz/fuzz/*_fuzz; do
  [ -x "$bin" ] && targets+=("$bin")
done
[ ${#targets[@]} -gt 0 ] || { echo "fuzz: no targets built" >&2; exit 1; }
printf '%s\n' "${targets[@]}" | xargs -P "$jobs" -I{} bash -c 'one "$@"' _ {} "$secs" "$findings"
