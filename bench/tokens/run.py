#!/usr/bin/env python3
"""Token-limited upstream, 8 callers, prompts and max_tokens varying tenfold:
abide proxy beside the same workload sent straight by a vendor SDK.

The upstream is `abide mock-server` in a token style: a tokens bucket of
--token-limit per --window that binds (requests have room). Through the proxy
the callers are plain HTTP clients that never retry: abide paces and retries.
Straight, the vendor's Node SDK calls the mock itself with its own retries.
Reported per run: the upstream's limited answers, premature requests, calls
done, the time taken, and that time as a multiple of the token quota's
long-run time (the tokens the upstream charged, at --token-limit per window).

  bench/tokens/run.py [--build-dir build/default] [--vendor openai|anthropic]
                      [--calls 100] [--callers 8] [--direct]
"""
import argparse
import json
import os
import queue
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def start(cmd):
    """Starts a server that prints `listening on 127.0.0.1:PORT` (or the proxy's
    own first line with the port) and returns (process, port)."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = p.stdout.readline()
    port = int(line.strip().rsplit(":", 1)[1].split()[0].rstrip("/"))
    threading.Thread(target=lambda: [None for _ in p.stdout], daemon=True).start()
    return p, port


def workload(n):
    """n calls, prompts of 400 to 4,000 characters and max_tokens of 100 to
    1,000, in an order that mixes them (the same every run)."""
    calls = []
    for i in range(n):
        chars = 400 + (i * 37 % 10) * 400
        max_tokens = 100 + (i * 53 % 10) * 100
        words = ("lorem ipsum dolor sit amet " * (chars // 27 + 1))[:chars]
        calls.append((words, max_tokens))
    return calls


def body(vendor, prompt, max_tokens):
    if vendor == "anthropic":
        return {"model": "claude-test", "max_tokens": max_tokens, "messages": [{"role": "user", "content": prompt}]}
    return {"model": "gpt-test", "max_tokens": max_tokens, "messages": [{"role": "user", "content": prompt}]}


def path(vendor):
    return "/v1/messages" if vendor == "anthropic" else "/v1/chat/completions"


def mock_cmd(abide, a):
    style = "anthropic-tokens" if a.vendor == "anthropic" else "openai-tokens"
    cmd = [abide, "mock-server", "--port", "0", "--style", style, "--limit", "100000", "--window", str(a.window),
           "--token-limit", str(a.token_limit), "--limited-status", "429", "--seed", "1", "--quiet"]
    if a.vendor == "anthropic":
        cmd += ["--output-token-limit", str(a.output_token_limit)]
    return cmd


def stats(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/__stats", timeout=10) as r:
        return json.load(r)


def through_proxy(abide, a, calls):
    mock, mport = start(mock_cmd(abide, a))
    proxy, pport = start([abide, "proxy", "--port", "0", "--store", "memory", "--max-wait", "600",
                          "--upstream", f"http://127.0.0.1:{mport},profile={a.vendor}"])
    try:
        jobs = queue.Queue()
        for c in calls:
            jobs.put(c)
        results = []
        lock = threading.Lock()

        def caller():
            while True:
                try:
                    prompt, max_tokens = jobs.get_nowait()
                except queue.Empty:
                    return
                req = urllib.request.Request(f"http://127.0.0.1:{pport}{path(a.vendor)}",
                                             data=json.dumps(body(a.vendor, prompt, max_tokens)).encode(),
                                             headers={"Content-Type": "application/json", "Authorization": "Bearer x",
                                                      "x-api-key": "x"})
                try:
                    with urllib.request.urlopen(req, timeout=900) as r:
                        r.read()
                        status = r.status
                except urllib.error.HTTPError as e:
                    status = e.code
                with lock:
                    results.append(status)

        t0 = time.monotonic()
        threads = [threading.Thread(target=caller) for _ in range(a.callers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.monotonic() - t0
        return report("abide proxy", a, stats(mport), elapsed, sum(1 for s in results if s == 200), len(calls))
    finally:
        for p in (proxy, mock):
            p.terminate()
            p.wait()


def direct(abide, a, calls, build_dir):
    """The same calls sent straight to the mock by the vendor's Node SDK."""
    modules = os.path.join(build_dir, "tests", "sdk-node", "node_modules")
    if not os.path.isdir(modules):
        return {"who": "SDK straight", "skipped": f"no {modules} (the SDK tests install it)"}
    mock, mport = start(mock_cmd(abide, a))
    try:
        spec = json.dumps([body(a.vendor, p, m) for p, m in calls])
        env = dict(os.environ, SDK_DIR=os.path.dirname(modules))
        t0 = time.monotonic()
        out = subprocess.run(["node", os.path.join(HERE, "direct.mjs"), a.vendor, f"http://127.0.0.1:{mport}",
                              str(a.callers)], input=spec, capture_output=True, text=True, env=env,
                             cwd=os.path.join(build_dir, "tests", "sdk-node"))
        elapsed = time.monotonic() - t0
        if out.returncode != 0:
            return {"who": "SDK straight", "error": out.stderr[-500:]}
        done = json.loads(out.stdout)["done"]
        return report(f"{a.vendor} Node SDK straight", a, stats(mport), elapsed, done, len(calls))
    finally:
        mock.terminate()
        mock.wait()


def report(who, a, s, elapsed, done, calls):
    totals = s["totals"]
    tokens = totals.get("tokens", {})
    # The long-run time of the quota that binds: Anthropic's input and output
    # tokens refill separately, so the slower of the two sets the pace.
    if "input_charged" in tokens:
        charged = {"input": tokens["input_charged"], "output": tokens["output_charged"]}
        long_run = max(charged["input"] / (a.token_limit / a.window),
                       charged["output"] / (a.output_token_limit / a.window))
    else:
        charged = tokens.get("charged", 0)
        long_run = charged / (a.token_limit / a.window)
    return {"who": who, "calls": calls, "done": done, "limited": totals["limited"], "premature": totals["premature"],
            "seconds": round(elapsed, 2), "tokens_charged": charged, "long_run_seconds": round(long_run, 2),
            "time_ratio": round(elapsed / long_run, 3) if long_run else None}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build", "default"))
    ap.add_argument("--vendor", choices=["openai", "anthropic"], default="openai")
    ap.add_argument("--calls", type=int, default=100)
    ap.add_argument("--callers", type=int, default=8)
    ap.add_argument("--window", type=float, default=10)
    ap.add_argument("--token-limit", type=int, default=20000)
    ap.add_argument("--output-token-limit", type=int, default=8000)
    ap.add_argument("--direct", action="store_true", help="also send the workload straight with the vendor's Node SDK")
    a = ap.parse_args()
    abide = os.path.join(a.build_dir, "tools", "abide", "abide")
    calls = workload(a.calls)
    rows = [through_proxy(abide, a, calls)]
    if a.direct:
        rows.append(direct(abide, a, calls, a.build_dir))
    print(json.dumps(rows, indent=1))


if __name__ == "__main__":
    sys.exit(main())
