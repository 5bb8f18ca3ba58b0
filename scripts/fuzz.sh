#!/usr/bin/env bash
# Runs every built fuzz target for N seconds (default 30) on its seed corpus,
# ABIDE_JOBS targets at a time (default 2).
# Build them first: cmake --preset fuzz && cmake --build --preset fuzz
# New inputs go to a scratch folder, never into the committed corpus; a crash
# leaves its input in build/fuzz/findings/ and the log is printed.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-30}
jobs=${ABIDE_JOBS:-2}
findings=build/fuzz/findings
mkdir -p "$findings"

one() {
  local bin=$1 secs=$2 findings=$3
  local name scratch seeds
  name=$(basename "$bin" _fuzz)
  scratch=$(mktemp -d)
  seeds=fuzz/corpus/$name
  [ -d "$seeds" ] || seeds=""
  if "$bin" -max_total_time="$secs" -print_final_stats=1 -artifact_prefix="$findings/$name-" \
       "$scratch" $seeds >"$scratch.log" 2>&1; then
    execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$scratch.log" | grep -o '[0-9]*$' || echo "?")
    cov=$(grep -o 'cov: [0-9]*' "$scratch.log" | tail -1 | grep -o '[0-9]*' || echo "?")
    echo "fuzz $name: ok, $execs executions in ${secs}s, coverage $cov edges"
    rm -rf "$scratch" "$scratch.log"
  else
    echo "fuzz $name: FAILED"
    tail -40 "$scratch.log"
    rm -rf "$scratch" "$scratch.log"
    return 1
  fi
}
export -f one

targets=()
for bin in build/fuzz/fuzz/*_fuzz; do
  [ -x "$bin" ] && targets+=("$bin")
done
[ ${#targets[@]} -gt 0 ] || { echo "fuzz: no targets built" >&2; exit 1; }
printf '%s\n' "${targets[@]}" | xargs -P "$jobs" -I{} bash -c 'one "$@"' _ {} "$secs" "$findings"
