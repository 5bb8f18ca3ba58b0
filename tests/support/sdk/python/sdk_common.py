"""What the Python SDK clients of tests/proxy_sdk_test.cpp share.

Importing it first puts Debian's packages (python3-stripe, python3-github,
python3-requests, python3-httpx: what scripts/deps.sh installs and CI has)
ahead of any other copy of them on this machine. It records every request
made through requests (stripe and PyGithub use it too) and prints JSON lines:
  one per call: {"i", "call", "ok", "start_s", "elapsed_s", ..., "error": {
    "class", "status", "retry_after", "should_retry", "outcome", "not_before",
    "message"}}
  last: {"summary": true, "requests": [{"method", "url", "t_s", "status"}]}
Times in seconds since the program started.
"""
import sys

sys.path.insert(0, "/usr/lib/python3/dist-packages")

import json  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402

T0 = time.monotonic()
_lock = threading.Lock()
requests_made = []


def now():
    return round(time.monotonic() - T0, 4)


def emit(line):
    with _lock:
        sys.stdout.write(json.dumps(line) + "\n")
        sys.stdout.flush()


def record(method, url):
    entry = {"method": method, "url": url, "t_s": now()}
    with _lock:
        requests_made.append(entry)
    return entry


def record_requests():
    """Every request that requests sends, whoever sends it, lands in requests_made."""
    import requests.adapters

    send = requests.adapters.HTTPAdapter.send

    def recorded(self, request, *args, **kwargs):
        entry = record(request.method, request.url)
        response = send(self, request, *args, **kwargs)
        entry["status"] = response.status_code
        return response

    requests.adapters.HTTPAdapter.send = recorded


def header(headers, name):
    if not headers:
        return None
    for k, v in dict(headers).items():
        if k.lower() == name:
            return v
    return None


def describe_error(err, status=None, headers=None):
    return {"class": type(err).__name__, "status": status,
            "retry_after": header(headers, "retry-after"),
            "should_retry": header(headers, "stripe-should-retry") or header(headers, "x-should-retry"),
            "outcome": header(headers, "abide-outcome"), "not_before": header(headers, "abide-not-before"),
            "message": str(err)[:300]}


def run_calls(count, parallel, name, one, describe=describe_error):
    """Calls one(i) for i in 0..count-1 on `parallel` threads, one line each."""
    next_i = [0]

    def worker():
        while True:
            with _lock:
                i = next_i[0]
                next_i[0] += 1
            if i >= count:
                return
            line = {"i": i, "call": name(i), "start_s": now()}
            try:
                line.update(one(i) or {})
                line["ok"] = True
            except Exception as e:  # the SDK's error is the result
                line["ok"] = False
                line["error"] = describe(e)
            line["elapsed_s"] = round(now() - line["start_s"], 4)
            emit(line)

    threads = [threading.Thread(target=worker) for _ in range(max(1, parallel))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    emit({"summary": True, "requests": requests_made})
