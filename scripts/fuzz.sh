#!/usr/bin/env bash
# Runs every built fuzz target for N seconds (default 30) on its seed corpus.
# Build them first: cmake --preset fuzz && cmake --build --preset fuzz
# New inputs go to a scratch folder, never into the committed corpus.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-30}
status=0
for bin in build/fuzz/fuzz/*_fuzz; do
  [ -x "$bin" ] || continue
  name=$(basename "$bin" _fuzz)
  scratch=$(mktemp -d)
  seeds=fuzz/corpus/$name
  [ -d "$seeds" ] || seeds=""
  if "$bin" -max_total_time="$secs" -print_final_stats=1 -artifact_prefix="$scratch/" \
       "$scratch" $seeds >"$scratch.log" 2>&1; then
    execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$scratch.log" | grep -o '[0-9]*$' || echo "?")
    echo "fuzz $name: ok, $execs executions in ${secs}s"
  else
    echo "fuzz $name: FAILED"; tail -40 "$scratch.log"; status=1
  fi
  rm -rf "$scratch" "$scratch.log"
done
exit $status
