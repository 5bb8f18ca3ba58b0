#!/usr/bin/env bash
# The main job: builds abide, then shows what it makes of real-world "wait"
# signals. Installs missing Debian packages first.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh build
cmake --preset default >/dev/null
cmake --build --preset default -j "${ABIDE_JOBS:-2}" --target abide_cli >/dev/null
abide=build/default/tools/abide/abide
now=2026-11-29T12:00:00Z

show() { printf '\n$ abide %s\n' "$*"; "$abide" "$@" || printf '(exit %d)\n' $?; }

echo "abide demo (receive time $now)"
show parse retry-after --now "$now" 120
show parse retry-after --now "$now" "Sun, 29 Nov 2026 12:02:30 GMT"
show parse retry-after --now "$now" "Sunday, 29-Nov-26 12:02:30 GMT"
show parse retry-after --now "$now" "Sun Nov 29 12:02:30 2026"
show parse retry-after --now "$now" 2.5
show parse retry-after --lenient --now "$now" 2.5
show parse retry-after --now "$now" -- -43
show parse http-date --lenient "Sun, 29 Nov 2026 12:02:30 UTC"
