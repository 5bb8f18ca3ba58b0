#!/bin/bash
# curl's command-line tool as people use it in a batch: N worker loops, each one
# `curl --retry R` over its share of the URLs (one process per worker, so the
# connection is reused), every request of worker i sending X-Client-Id: ID-wi.
# --fail keeps error bodies out of the output (curl 7.88 cannot truncate
# /dev/null before a retry and gives up with error 23 otherwise).
# curl retries 408/429/500/502/503/504, sleeps Retry-After when the answer has
# one (seconds or HTTP-date) and otherwise 1 s, doubling.
#
#   curl.sh --urls FILE --jobs N --client-id ID --retries R --summary OUT.json
set -euo pipefail
urls= jobs=8 id=curl retries=10 summary=/dev/stdout
while [ $# -gt 0 ]; do
  case $1 in
    --urls) urls=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --client-id) id=$2; shift 2 ;;
    --retries) retries=$2; shift 2 ;;
    --summary) summary=$2; shift 2 ;;
    *) echo "curl.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[ -n "$urls" ] || { echo "curl.sh: --urls is required" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
start=$(date +%s.%N)
pids=()
for ((w = 0; w < jobs; w++)); do
  # Worker w takes lines w+1, w+1+jobs, ... as a curl config file.
  awk -v n="$jobs" -v k="$w" 'NF && (NR - 1) % n == k { printf "url = \"%s\"\noutput = \"/dev/null\"\n", $0 }' \
    "$urls" > "$tmp/w$w.cfg"
  [ -s "$tmp/w$w.cfg" ] || continue
  curl -sS --fail --retry "$retries" -H "X-Client-Id: $id-w$w" -w '%{http_code}\n' -K "$tmp/w$w.cfg" \
    > "$tmp/w$w.codes" 2> "$tmp/w$w.err" &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || true; done
end=$(date +%s.%N)
cat "$tmp"/w*.codes 2>/dev/null | awk -v s="$start" -v e="$end" -v total="$(grep -c . "$urls")" '
  NF { n[$1]++; if ($1 == "200") done++; else failed++ }
  END {
    printf "{\"client\":\"curl\",\"requests\":%d,\"done\":%d,\"failed\":%d,\"final_status\":{", total, done, failed
    sep = ""; for (c in n) { printf "%s\"%s\":%d", sep, (c == "000" ? "error" : c), n[c]; sep = "," }
    printf "},\"elapsed_s\":%.3f}\n", e - s
  }' > "$summary"
