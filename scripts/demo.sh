#!/usr/bin/env bash
# The main job: builds abide, starts the built-in mock API on loopback, runs a
# batch through `abide fetch` with several workers against its quota, and
# reports how long it took against the time the quota allows, how many 429s it
# earned, and how many premature retries the server counted (must be 0). Then
# runs a Python program with no retry logic of its own against the same mock API
# through `abide proxy`. Then shows what `abide explain` decides for a few
# typical responses.
# Installs missing Debian packages first.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh build
cmake --preset default >/dev/null
cmake --build --preset default -j "${ABIDE_JOBS:-2}" --target abide_cli >/dev/null
abide=$(pwd)/build/default/tools/abide/abide

work=$(mktemp -d)
server_pid=""
proxy_pid=""
cleanup() {
  if [ -n "$proxy_pid" ]; then kill "$proxy_pid" 2>/dev/null || true; wait "$proxy_pid" 2>/dev/null || true; fi
  if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
# The demo's mock servers take a fresh port each run: their quota state goes
# to a file of this run, not to the machine's own (a port used again later
# must not inherit a cooldown from an earlier demo).
export ABIDE_STORE="file:$work/quota.db"

# run STYLE REQUESTS LIMIT WINDOW JOBS [fetch options...]
run() {
  local style=$1 n=$2 limit=$3 window=$4 jobs=$5
  shift 5
  mkfifo "$work/port.$style"
  "$abide" mock-server --port 0 --style "$style" --limit "$limit" --window "$window" --quiet \
    >"$work/port.$style" &
  server_pid=$!
  local first port
  read -r first <"$work/port.$style"
  port=${first##*:}
  for i in $(seq 1 "$n"); do echo "http://127.0.0.1:$port/items/$i"; done >"$work/urls"
  local rc=0
  "$abide" fetch --urls "$work/urls" --jobs "$jobs" -o /dev/null --silent \
    --stats "$work/stats.json" --resume-file "$work/resume.json" "$@" || rc=$?
  python3 - "$port" "$work/stats.json" "$style" "$n" "$limit" "$window" "$jobs" "$rc" <<'PY'
import json, sys, urllib.request
port, stats_file, style, n, limit, window, jobs, rc = sys.argv[1:]
n, limit, window = int(n), int(limit), float(window)
stats = json.load(open(stats_file))
server = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/__stats"))
totals = server["totals"]
quota_time = n * window / limit
limited = sum(v for k, v in stats["status_counts"].items() if k in ("429", "503", "403"))
print(f"style {style}: {n} requests, {jobs} workers, quota {limit} per {window:g} s")
print(f"  done {stats['done']}/{stats['requests']}, attempts {stats['attempts']}, exit status {rc}")
print(f"  took {stats['elapsed_s']:.2f} s; the quota allows {quota_time:.2f} s at its long-run rate "
      f"(ratio {stats['elapsed_s'] / quota_time:.3f})")
print(f"  limited answers received: {limited}")
print(f"  premature retries counted by the server: {totals['premature']}")
sys.exit(0 if totals["premature"] == 0 and stats["done"] == n else 1)
PY
  kill "$server_pid" 2>/dev/null || true
  wait "$server_pid" 2>/dev/null || true
  server_pid=""
}

echo "== abide fetch against abide mock-server (127.0.0.1)"
run draft11 100 20 2 8
run retry-after-seconds 60 20 2 8
run github 60 20 2 8 --profile github

# proxy_run STYLE REQUESTS LIMIT WINDOW: a Python program with no retry logic of
# its own (examples/proxy/sdk_client.py, 8 threads) calls the mock API through
# `abide proxy`; every call must end 200 with no premature request at the server.
proxy_run() {
  local style=$1 n=$2 limit=$3 window=$4
  mkfifo "$work/port.proxy-$style" "$work/port.proxied-$style"
  "$abide" mock-server --port 0 --style "$style" --limit "$limit" --window "$window" --quiet \
    >"$work/port.proxied-$style" &
  server_pid=$!
  local first port pport
  read -r first <"$work/port.proxied-$style"
  port=${first##*:}
  "$abide" proxy --upstream "http://127.0.0.1:$port" --port 0 --max-wait 60 >"$work/port.proxy-$style" &
  proxy_pid=$!
  read -r first <"$work/port.proxy-$style"
  pport=${first##*:}
  local paths=()
  for i in $(seq 1 "$n"); do paths+=("/items/$i"); done
  local start end rc=0
  start=$(date +%s.%N)
  API_BASE_URL="http://127.0.0.1:$pport" python3 examples/proxy/sdk_client.py "${paths[@]}" >"$work/answers" || rc=$?
  end=$(date +%s.%N)
  python3 - "$port" "$pport" "$work/answers" "$style" "$n" "$limit" "$window" "$start" "$end" "$rc" <<'PY'
import json, sys, urllib.request
port, pport, answers, style, n, limit, window, start, end, rc = sys.argv[1:]
n, limit, window = int(n), int(limit), float(window)
lines = [json.loads(l) for l in open(answers)]
server = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/__stats"))["totals"]
proxy = json.load(urllib.request.urlopen(f"http://127.0.0.1:{pport}/__abide/stats"))
ok = sum(1 for l in lines if l["status"] == 200)
attempts = sum(int(l["attempts"] or 0) for l in lines)
took = float(end) - float(start)
quota_time = n * window / limit
print(f"style {style}: {n} calls from 8 threads through abide proxy, quota {limit} per {window:g} s")
print(f"  200: {ok}/{n}, attempts upstream {attempts}, the client's exit status {rc}")
print(f"  took {took:.2f} s; the quota allows {quota_time:.2f} s at its long-run rate")
print(f"  limited answers the proxy received (and kept from the program): {server['limited']}")
print(f"  premature requests counted by the server: {server['premature']}")
print(f"  the proxy's /__abide/stats: outcomes {proxy.get('outcomes')}, attempts {proxy.get('attempts')}")
sys.exit(0 if server["premature"] == 0 and ok == n else 1)
PY
  kill "$proxy_pid" 2>/dev/null || true
  wait "$proxy_pid" 2>/dev/null || true
  proxy_pid=""
  kill "$server_pid" 2>/dev/null || true
  wait "$server_pid" 2>/dev/null || true
  server_pid=""
}

echo
echo "== a Python program with no retries of its own, through abide proxy (127.0.0.1)"
proxy_run retry-after-seconds 40 10 2

echo
echo "== abide explain on example responses (examples/heads/, received at 2026-01-01T00:00:00Z)"
now=2026-01-01T00:00:00Z
explain() {
  printf '\n$ abide explain %s\n' "$*"
  "$abide" explain --now "$now" --seed 1 "$@" || true
}
explain examples/heads/429-retry-after-seconds.http
explain examples/heads/429-retry-after-malformed.http
explain examples/heads/503-retry-after-date-skew.http
explain --attempt 4 --deadline 12 examples/heads/429-retry-after-seconds.http
explain --method POST examples/heads/429-retry-after-seconds.http
explain --host api.github.com examples/heads/403-github-remaining-0.http
