#!/usr/bin/env bash
# Installs the Debian 12 packages abide needs, only those that are missing.
# Usage: scripts/deps.sh [build|test|all]   (default: all)
#   all = test + what only the benchmarks use (CI's test mode builds none):
#   nginx, the reverse proxy that the proxy benchmark measures abide proxy
#   beside.
# libnghttp2-dev and libssl-dev hold the own HTTP/2 client of abide::curl
# (libnghttp2.a also holds the Priority parser that bench/report.py uses as
# the structured-field anchor).
# libsqlite3-dev holds the file store (abide::sqlite); libssl-dev the HMAC that
# keeps credentials out of quota key names (OpenSSL's libcrypto, which libcurl
# links already).
# nodejs is a real client of `abide proxy` in the tests (its fetch), and the
# TLS server of fetch's TLS tests, whose throwaway certificates openssl makes.
# The SDK tests of the proxy (tests/proxy_sdk_test.cpp) call it with Debian's
# python3-stripe, python3-github, python3-requests and python3-httpx, and with
# Node SDKs that npm installs from its registry into the build tree on first
# use: npm is wanted unless one is on PATH already (Node.js packages from
# elsewhere bring their own, and conflict with Debian's).
set -euo pipefail

want=(g++ make cmake ninja-build pkg-config
      libgtest-dev libgmock-dev libbenchmark-dev
      libcurl4-openssl-dev libhiredis-dev nlohmann-json3-dev libcli11-dev libcpp-httplib-dev
      libsqlite3-dev libssl-dev libnghttp2-dev)
mode=${1:-all}
case "$mode" in
  build) want+=(python3) ;;
  test|all)
    want+=(redis-server clang libclang-rt-14-dev curl python3 nodejs openssl
           python3-stripe python3-github python3-requests python3-httpx)
    if ! command -v npm >/dev/null; then want+=(npm); fi
    if [ "$mode" = all ]; then want+=(nginx-light); fi ;;
  *) echo "usage: $0 [build|test|all]" >&2; exit 2 ;;
esac

missing=()
for p in "${want[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "abide: installing ${missing[*]}" >&2
sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
