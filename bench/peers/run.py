#!/usr/bin/python3
"""abide against the HTTP clients people use today, on one rate-limited workload.

Every client gets the same job: REQUESTS GET requests to `abide mock-server`
(quota LIMIT per WINDOW seconds, fixed windows), JOBS concurrent workers, up to
RETRIES retries per request with the client's own retry support. Each
(style, client) run has a mock server of its own, so runs never share a quota
and may run side by side (--parallel).

Clients: abide (abide fetch, --pacing smooth), abide-burst (--pacing burst),
curl (--retry), urllib3 (Retry(respect_retry_after_header=True) on a thread
pool), ky and got (npm, their own retry), naive (exponential backoff, reads no
header). Styles: retry-after-seconds, retry-after-date, draft11, github (with
429 as the limited status, since no peer retries GitHub's 403).

Then the fleet simulation: FLEET processes of abide fetch x JOBS workers on one
key against one mock server, sharing the quota through one redis-server
(started here on a free loopback port, no persistence, stopped after) and, for
contrast, each with its own in-memory store.

Writes bench/results/peers.md (the tables), peers.json (every figure) and
peers.png (requests per window over time per client, quota line, 429s in red),
and puts the tables into bench/README.md between its peers-table markers.
Raw files (mock-server records and stats, client summaries) stay in
build/peers/peers-run/. Everything binds and targets 127.0.0.1 only.

Usage: bench/peers/run.py [--quick] [--styles ...] [--clients ...] [--no-fleet]
(see --help). Not part of CI: a full run takes about 5 to 10 minutes.
"""
import argparse
import concurrent.futures
import datetime
import json
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
DEBIAN_PYTHON = "/usr/bin/python3"
STYLES = ["retry-after-seconds", "retry-after-date", "draft11", "github"]
CLIENTS = ["abide", "abide-burst", "curl", "urllib3", "ky", "got", "naive"]
PEERS = ["curl", "urllib3", "ky", "got", "naive"]
GRACE_S = 0.05  # the mock server's default --grace: answers in flight are not premature


def log(*a):
    print(*a, file=sys.stderr, flush=True)


# ---------------------------------------------------------------- set-up ----

def have_python_module(mod):
    return subprocess.run([DEBIAN_PYTHON, "-c", f"import {mod}"], capture_output=True).returncode == 0


def apt_install(packages):
    if not packages:
        return
    if os.geteuid() != 0:
        sys.exit(f"peers: missing {' '.join(packages)}: run  sudo apt-get install -y {' '.join(packages)}")
    log(f"peers: apt-get install {' '.join(packages)}")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    if subprocess.run(["apt-get", "install", "-y", "-qq", *packages], env=env,
                      stdout=subprocess.DEVNULL).returncode != 0:
        subprocess.run(["apt-get", "update", "-qq"], env=env, check=True)
        subprocess.run(["apt-get", "install", "-y", "-qq", *packages], env=env, check=True,
                       stdout=subprocess.DEVNULL)


def ensure_peers(clients, fleet):
    """Installs what the chosen clients need, on first use."""
    missing = []
    if "curl" in clients and not shutil.which("curl"):
        missing.append("curl")
    if not os.path.exists(DEBIAN_PYTHON):
        missing.append("python3")
    elif "urllib3" in clients and not have_python_module("urllib3"):
        missing.append("python3-urllib3")
    if os.path.exists(DEBIAN_PYTHON) and not have_python_module("matplotlib"):
        missing.append("python3-matplotlib")
    if {"ky", "got"} & set(clients) and not (shutil.which("node") and shutil.which("npm")):
        missing += ["nodejs", "npm"]
    if fleet and not shutil.which("redis-server"):
        missing.append("redis-server")
    apt_install(missing)
    if {"ky", "got"} & set(clients):
        node_dir = os.path.join(HERE, "node")
        major = int(subprocess.run(["node", "--version"], capture_output=True, text=True).stdout.strip()
                    .lstrip("v").split(".")[0])
        if major < 20:
            sys.exit(f"peers: ky and got need Node.js 20 or later, this is {major}")
        if not all(os.path.exists(os.path.join(node_dir, "node_modules", p, "package.json")) for p in ("ky", "got")):
            log("peers: npm install (bench/peers/node)")
            cmd = "ci" if os.path.exists(os.path.join(node_dir, "package-lock.json")) else "install"
            subprocess.run(["npm", cmd, "--no-audit", "--no-fund", "--loglevel=error"], cwd=node_dir, check=True)


def build_abide(build_dir):
    log(f"peers: building abide (Release) in {build_dir}")
    subprocess.run(["cmake", "-S", ROOT, "-B", build_dir, "-DCMAKE_BUILD_TYPE=Release", "-DABIDE_BUILD_BENCH=ON"],
                   check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["cmake", "--build", build_dir, "-j2", "--target", "abide_cli"], check=True,
                   stdout=subprocess.DEVNULL)
    return os.path.join(build_dir, "tools", "abide", "abide")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def client_env():
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
    env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost"
    return env


_opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def http_get_json(url):
    with _opener.open(url, timeout=10) as r:
        return json.load(r)


# ----------------------------------------------------------- mock server ----

class MockServer:
    """One `abide mock-server` on 127.0.0.1 with a port of its own."""

    def __init__(self, abide, style, limit, window, workdir, threads=64):
        self.record = os.path.join(workdir, "record.jsonl")
        self.stats_file = os.path.join(workdir, "server-stats.json")
        self.proc = subprocess.Popen(
            [abide, "mock-server", "--bind", "127.0.0.1", "--port", "0", "--style", style, "--limit", str(limit),
             "--window", str(window), "--limited-status", "429", "--threads", str(threads), "--record",
             self.record, "--stats-file", self.stats_file, "--quiet"],
            stdout=subprocess.PIPE, stderr=open(os.path.join(workdir, "server.err"), "w"), text=True)
        line = self.proc.stdout.readline().strip()  # "listening on 127.0.0.1:PORT"
        if not line.startswith("listening on 127.0.0.1:"):
            self.proc.kill()
            raise RuntimeError(f"mock-server did not start: {line!r}")
        self.port = int(line.rsplit(":", 1)[1])
        self.base = f"http://127.0.0.1:{self.port}"

    def stats(self):
        return http_get_json(self.base + "/__stats")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def read_record(path):
    out = []
    with open(path) as f:
        for line in f:
            if line.strip():
                r = json.loads(line)
                if "event" not in r:
                    out.append(r)
    return out


def key_wide_premature(records):
    """Requests sent while a cooldown the client had been told of was running.

    The mock server counts per X-Client-Id; peers send one id per worker (a
    worker's own early retries), abide one per process. This treats all of a
    run's requests as one client (one API key): a request at A is premature
    when some limited answer, to any worker, was sent at S <= A - grace and
    stated a permitted time P > A. (The server keeps only each id's latest
    answer, plus the one per connection; a later answer of the same window can
    state an earlier P, because every wait is rounded up to whole seconds, and
    this rule still holds the client to the earlier, longer one.)"""
    told = []  # (S, P) of limited answers, in time order
    n = 0
    best_p = None  # the latest P among answers sent at least `grace` ago
    i = 0
    for r in sorted(records, key=lambda r: r["t"]):
        a = r["t"]
        while i < len(told) and told[i][0] + GRACE_S <= a:
            best_p = told[i][1] if best_p is None else max(best_p, told[i][1])
            i += 1
        if best_p is not None and a < best_p:
            n += 1
        if r["outcome"] == "limited" and "permitted" in r:
            told.append((a, r["permitted"]))  # P as the mock server stated it
    return n


def window_series(stats):
    return [{"index": w["index"], "requests": w["requests"], "accepted": w["accepted"], "limited": w["limited"],
             "premature": w["premature"]} for w in stats.get("windows", [])]


# --------------------------------------------------------------- clients ----

def client_command(name, abide, style, urls, jobs, retries, workdir):
    summary = os.path.join(workdir, "client-summary.json")
    common = ["--urls", urls, "--jobs", str(jobs), "--client-id", name, "--retries", str(retries),
              "--summary", summary]
    if name.startswith("abide"):
        pacing = "burst" if name == "abide-burst" else "smooth"
        cmd = [abide, "fetch", "--urls", urls, "--jobs", str(jobs), "-o", "/dev/null", "--stats", summary,
               "-H", f"X-Client-Id: {name}", "--max-attempts", str(retries + 1), "--pacing", pacing,
               "--resume-file", os.path.join(workdir, "resume.json"), "--silent", *profile_args(style)]
    elif name == "curl":
        cmd = ["bash", os.path.join(HERE, "clients", "curl.sh"), *common]
    elif name == "urllib3":
        cmd = [DEBIAN_PYTHON, os.path.join(HERE, "clients", "urllib3_client.py"), *common]
    elif name == "naive":
        cmd = [DEBIAN_PYTHON, os.path.join(HERE, "clients", "naive_client.py"), *common]
    elif name in ("ky", "got"):
        cmd = ["node", os.path.join(HERE, "node", f"{name}_client.mjs"), *common]
    else:
        raise ValueError(name)
    return cmd, summary


def profile_args(style):
    """abide reads vendor headers only through the profile of the API that sent
    them (DESIGN.md rule 8): on api.github.com the host selects it; the mock
    server is 127.0.0.1, so name it, as a user of a GitHub-like API would."""
    return ["--profile", "github"] if style == "github" else []


def read_summary(name, path, requests):
    """(done, failed) as the client reported them; None when it wrote nothing."""
    try:
        with open(path) as f:
            s = json.load(f)
    except (OSError, ValueError):
        return None
    if name.startswith("abide"):
        done = int(s.get("done", 0))
        failed = len(s.get("unfinished", [])) if "unfinished" in s else int(s.get("requests", requests)) - done
        return done, failed, s
    return int(s["done"]), int(s["failed"]), s


def run_process(cmd, workdir, timeout):
    """Runs cmd in its own process group; returns (wall seconds, exit code, timed out)."""
    with open(os.path.join(workdir, "client.out"), "w") as out, open(os.path.join(workdir, "client.err"), "w") as err:
        t0 = time.monotonic()
        p = subprocess.Popen(cmd, stdout=out, stderr=err, env=client_env(), start_new_session=True)
        timed_out = False
        try:
            rc = p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            os.killpg(p.pid, signal.SIGTERM)
            try:
                rc = p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                rc = p.wait()
        return time.monotonic() - t0, rc, timed_out


def one_run(args, abide, style, name, rundir):
    workdir = os.path.join(rundir, f"{style}__{name}")
    os.makedirs(workdir, exist_ok=True)
    server = MockServer(abide, style, args.limit, args.window, workdir)
    try:
        urls = os.path.join(workdir, "urls.txt")
        with open(urls, "w") as f:
            for i in range(args.requests):
                f.write(f"{server.base}/items/{i}\n")
        cmd, summary = client_command(name, abide, style, urls, args.jobs, args.retries, workdir)
        wall, rc, timed_out = run_process(cmd, workdir, args.timeout)
        time.sleep(0.1)
        stats = server.stats()
    finally:
        server.stop()
    records = read_record(server.record)
    quota_time = args.requests * args.window / args.limit
    got = read_summary(name, summary, args.requests)
    done, failed = (got[0], got[1]) if got else (0, 0)
    anchor = stats["server"].get("anchor_unix") or 0
    span = (max(r["t"] for r in records) - anchor) if records else 0.0
    res = {
        "style": style, "client": name, "requests": args.requests, "wall_s": round(wall, 3),
        "ratio": round(wall / quota_time, 3), "server_span_s": round(span, 3), "exit": rc, "timed_out": timed_out,
        "limited": stats["totals"]["limited"], "premature": stats["totals"]["premature"],
        "premature_key_wide": key_wide_premature(records),
        "accepted": stats["totals"]["accepted"], "sent": stats["totals"]["requests"],
        "done": done, "failed": failed, "lost": max(0, args.requests - done - failed),
        "max_per_window": max((w["requests"] for w in stats.get("windows", [])), default=0),
        "windows": window_series(stats), "workdir": os.path.relpath(workdir, ROOT),
    }
    if got and not name.startswith("abide"):
        res["final_status"] = got[2].get("final_status")
        res["version"] = got[2].get("version")
    log(f"peers: {style:20} {name:12} {res['ratio']:.3f}x  429s {res['limited']:4}  premature "
        f"{res['premature']}/{res['premature_key_wide']}  done {done} failed {failed} lost {res['lost']}")
    return res


# ----------------------------------------------------------------- fleet ----

class Redis:
    def __init__(self, workdir):
        self.port = free_port()
        self.proc = subprocess.Popen(
            ["redis-server", "--bind", "127.0.0.1", "--port", str(self.port), "--save", "", "--appendonly", "no",
             "--dir", workdir, "--protected-mode", "yes"],
            stdout=open(os.path.join(workdir, "redis.log"), "w"), stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(16).startswith(b"+PONG"):
                        return
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError("redis-server did not start")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def fleet_run(args, abide, style, store, rundir, redis):
    workdir = os.path.join(rundir, f"fleet__{style}__{store}")
    os.makedirs(workdir, exist_ok=True)
    server = MockServer(abide, style, args.limit, args.window, workdir, threads=args.fleet * args.jobs + 32)
    procs = []
    try:
        per = args.fleet_requests // args.fleet
        store_arg = (f"redis://127.0.0.1:{redis.port}/peers-fleet-{os.getpid()}-{style}" if store == "redis"
                     else "memory")
        t0 = time.monotonic()
        for p in range(args.fleet):
            pdir = os.path.join(workdir, f"p{p}")
            os.makedirs(pdir, exist_ok=True)
            urls = os.path.join(pdir, "urls.txt")
            with open(urls, "w") as f:
                for i in range(per):
                    f.write(f"{server.base}/items/{p}-{i}\n")
            cmd = [abide, "fetch", "--urls", urls, "--jobs", str(args.jobs), "-o", "/dev/null", "--stats",
                   os.path.join(pdir, "stats.json"), "-H", f"X-Client-Id: fleet-p{p}", "--max-attempts",
                   str(args.retries + 1), "--store", store_arg, "--resume-file", os.path.join(pdir, "resume.json"),
                   "--silent", *profile_args(style)]
            procs.append(subprocess.Popen(cmd, stdout=open(os.path.join(pdir, "out"), "w"),
                                          stderr=open(os.path.join(pdir, "err"), "w"), env=client_env(),
                                          start_new_session=True))
        deadline = t0 + args.timeout
        timed_out = False
        for pr in procs:
            try:
                pr.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                timed_out = True
                os.killpg(pr.pid, signal.SIGTERM)
                pr.wait()
        wall = time.monotonic() - t0
        time.sleep(0.1)
        stats = server.stats()
    finally:
        for pr in procs:
            if pr.poll() is None:
                os.killpg(pr.pid, signal.SIGKILL)
                pr.wait()
        server.stop()
    done = failed = 0
    error = None
    for p in range(args.fleet):
        got = read_summary("abide", os.path.join(workdir, f"p{p}", "stats.json"), per)
        if got:
            done += got[0]
            failed += got[1]
        elif error is None:  # no summary: the process did not run; say why
            with open(os.path.join(workdir, f"p{p}", "err")) as f:
                error = (f.readline().strip() or f"exit {procs[p].returncode}")[:160]
    total = per * args.fleet
    records = read_record(server.record)
    anchor = stats["server"].get("anchor_unix") or 0
    windows = window_series(stats)
    res = {
        "style": style, "store": store, "processes": args.fleet, "jobs": args.jobs, "requests": total,
        "wall_s": round(wall, 3), "ratio": round(wall / (total * args.window / args.limit), 3),
        "timed_out": timed_out, "limited": stats["totals"]["limited"], "premature": stats["totals"]["premature"],
        "premature_key_wide": key_wide_premature(records),
        "done": done, "failed": failed, "lost": max(0, total - done - failed),
        "max_per_window": max((w["requests"] for w in windows), default=0),
        "windows_over_quota": sum(1 for w in windows if w["requests"] > args.limit),
        "max_per_window_after_first": max((w["requests"] for w in windows if w["index"] > 0), default=0),
        "windows": windows, "workdir": os.path.relpath(workdir, ROOT), "error": error,
    }
    if error:
        log(f"peers: fleet {style} {store}: did not run: {error}")
    log(f"peers: fleet {style} {store:6} {res['ratio']:.3f}x  max/window {res['max_per_window']} "
        f"(quota {args.limit})  over-quota windows {res['windows_over_quota']}/{len(windows)}  429s {res['limited']}"
        f"  premature {res['premature']}  done {done} failed {failed} lost {res['lost']}")
    return res


# --------------------------------------------------------------- results ----

def verdicts(runs, styles):
    """The issue's targets for abide, per style."""
    out = []
    by = {(r["style"], r["client"]): r for r in runs}
    for style in styles:
        peers = [by[(style, c)] for c in PEERS if (style, c) in by]
        fewest = min((p["limited"] for p in peers), default=None)
        for name, bound, op in (("abide", 1.05, "<="), ("abide-burst", 1.0, "<")):
            r = by.get((style, name))
            if not r:
                continue
            checks = [
                (f"time {op} {bound} x quota", f"{r['ratio']:.3f}",
                 r["ratio"] <= bound if op == "<=" else r["ratio"] < bound),
                ("0 premature", f"{r['premature']} (key-wide {r['premature_key_wide']})",
                 r["premature"] == 0 and r["premature_key_wide"] == 0),
                ("fewest 429s", f"{r['limited']} (fewest peer {fewest})", fewest is None or r["limited"] <= fewest),
                ("none failed or lost", f"{r['failed']}+{r['lost']}", r["failed"] + r["lost"] == 0),
            ]
            for what, measured, ok in checks:
                out.append({"style": style, "client": name, "target": what, "measured": measured,
                            "verdict": "pass" if ok else "MISS"})
    return out


def markdown(meta, runs, fleet, checks, styles, clients):
    by = {(r["style"], r["client"]): r for r in runs}
    L = []
    if not runs:
        L.append(f"Measured {meta['date']}, load average before/after {meta['load_before']} / {meta['load_after']}.")
    else:
        L.append(f"Workload: {meta['requests']} GET requests, quota {meta['limit']} per {meta['window']} s window "
                 f"(long-run time {meta['quota_time_s']:.1f} s), {meta['jobs']} workers, up to {meta['retries']} "
                 f"retries per request; one `abide mock-server` per run, 429 when limited. Measured "
                 f"{meta['date']}, load average before/after {meta['load_before']} / {meta['load_after']}.")
    if meta.get("kept_from"):
        k = meta["kept_from"]
        L.append(f"(Rows of {', '.join(k['clients'])} from an earlier run with the same workload, {k['date']}, "
                 f"load average {k['load']}.)")
    L.append("")
    if runs:
        L.append("| style | client | time ÷ quota time | first→last request ÷ quota time | 429s | premature (per id) "
                 "| premature (key-wide) | done | failed | lost | max req/window |")
        L.append("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for style in styles:
        for c in clients:
            r = by.get((style, c))
            if not r:
                continue
            flag = " (timed out)" if r["timed_out"] else ""
            L.append(f"| {style} | {c} | {r['ratio']:.3f}{flag} | {r['server_span_s'] / meta['quota_time_s']:.3f} | "
                     f"{r['limited']} | {r['premature']} | "
                     f"{r['premature_key_wide']} | {r['done']} | {r['failed']} | {r['lost']} | {r['max_per_window']} |")
    if fleet:
        L.append("")
        L.append(f"Fleet: {meta['fleet']} `abide fetch` processes x {meta['jobs']} workers, one key, one mock "
                 f"server (quota {meta['limit']} per {meta['window']} s), {meta['fleet_requests']} requests in all.")
        L.append("")
        L.append("| style | store | time ÷ quota time | max req/window: first, later (quota) | windows over quota | 429s "
                 "| premature (per process) | premature (key-wide) | done | failed | lost |")
        L.append("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for r in fleet:
            if r.get("error") and r["done"] == 0:
                L.append(f"| {r['style']} | {r['store']} | not run: {r['error']} | | | | | | | | |")
                continue
            first = next((w["requests"] for w in r["windows"] if w["index"] == 0), 0)
            L.append(f"| {r['style']} | {r['store']} | {r['ratio']:.3f} | {first}, "
                     f"{r['max_per_window_after_first']} ({meta['limit']}) | "
                     f"{r['windows_over_quota']} of {len(r['windows'])} | {r['limited']} | {r['premature']} | "
                     f"{r['premature_key_wide']} | {r['done']} | {r['failed']} | {r['lost']} |")
    if checks:
        L.append("")
        L.append("| style | client | target | measured | verdict |")
        L.append("|---|---|---|---|---|")
        for c in checks:
            L.append(f"| {c['style']} | {c['client']} | {c['target']} | {c['measured']} | {c['verdict']} |")
    return "\n".join(L) + "\n"


def plot(path, meta, runs, fleet, styles, clients):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [c for c in clients if any(r["client"] == c for r in runs)]
    ncols = len(styles) + (1 if fleet else 0)
    nrows = max(len(rows), 2 if fleet else 1)
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.4 * ncols, 1.55 * nrows + 0.8), sharey=True, squeeze=False)
    by = {(r["style"], r["client"]): r for r in runs}
    w = meta["window"]
    ymax = meta["limit"] * 3

    def bars(ax, windows, title):
        xs = [x["index"] * w for x in windows]
        acc = [x["accepted"] for x in windows]
        lim = [x["limited"] for x in windows]
        ax.bar(xs, acc, width=w * 0.9, align="edge", color="#4c72b0", label="accepted")
        ax.bar(xs, [min(l, ymax - a) for a, l in zip(acc, lim)], width=w * 0.9, align="edge", bottom=acc,
               color="#d62728", label="429")
        for x, a, l in zip(xs, acc, lim):
            if a + l > ymax:
                ax.text(x + w * 0.45, ymax * 0.97, str(a + l), ha="center", va="top", fontsize=6, color="#d62728")
        ax.axhline(meta["limit"], color="black", linestyle="--", linewidth=0.8)
        ax.set_ylim(0, ymax)
        ax.set_xlim(0, max(meta["quota_time_s"] * 1.6, (max(xs) + w) if xs else 0))
        ax.set_title(title, fontsize=8)
        ax.tick_params(labelsize=7)

    for i, c in enumerate(rows):
        for j, s in enumerate(styles):
            ax = axes[i][j]
            r = by.get((s, c))
            if r:
                bars(ax, r["windows"], f"{c} · {s}\n{r['ratio']:.2f}x, {r['limited']} × 429")
            else:
                ax.set_axis_off()
            if j == 0:
                ax.set_ylabel("requests / window", fontsize=7)
    if fleet:
        j = len(styles)
        for i in range(nrows):
            ax = axes[i][j]
            if i < len(fleet):
                r = fleet[i]
                bars(ax, r["windows"], f"fleet {meta['fleet']}x{meta['jobs']} · {r['store']}\n"
                     f"{r['ratio']:.2f}x, {r['limited']} × 429")
                ax.set_xlim(0, max(meta["fleet_requests"] * w / meta["limit"] * 1.6,
                                   (r["windows"][-1]["index"] + 1) * w if r["windows"] else 0))
            else:
                ax.set_axis_off()
    for ax in axes[-1]:
        ax.set_xlabel("time since first request (s)", fontsize=7)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles + [plt.Line2D([], [], color="black", linestyle="--")], labels + [f"quota ({meta['limit']})"],
               loc="upper center", bbox_to_anchor=(0.5, 1 - 0.32 / fig.get_figheight()), ncol=3, fontsize=8,
               frameon=False)
    fig.suptitle(f"Requests per {w:g} s window as the mock server saw them ({meta['requests']} requests, "
                 f"{meta['jobs']} workers, quota {meta['limit']} per {w:g} s)", fontsize=9,
                 y=1 - 0.08 / fig.get_figheight())
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.6 / fig.get_figheight()))
    fig.savefig(path, dpi=110)


def update_readme(table):
    path = os.path.join(ROOT, "bench", "README.md")
    begin, end = "<!-- peers-table:begin -->", "<!-- peers-table:end -->"
    try:
        with open(path) as f:
            text = f.read()
    except OSError:
        return
    if begin in text and end in text:
        head, rest = text.split(begin, 1)
        _, tail = rest.split(end, 1)
        with open(path, "w") as f:
            f.write(head + begin + "\n" + table + end + tail)


def load_avg():
    try:
        return " ".join(open("/proc/loadavg").read().split()[:3])
    except OSError:
        return "?"


# ------------------------------------------------------------------ main ----

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build", "peers"))
    ap.add_argument("--abide", help="an abide binary to use instead of building one")
    ap.add_argument("--styles", nargs="+", default=STYLES, choices=STYLES + ["none", "draft-legacy", "openai", "malformed"])
    ap.add_argument("--clients", nargs="+", default=CLIENTS, choices=CLIENTS)
    ap.add_argument("--requests", type=int, default=300)
    ap.add_argument("--limit", type=int, default=50)
    ap.add_argument("--window", type=float, default=2.0)
    ap.add_argument("--jobs", type=int, default=8)
    ap.add_argument("--retries", type=int, default=10, help="retries per request, for every client")
    ap.add_argument("--timeout", type=float, default=90, help="seconds before a client run is stopped (rest: lost)")
    ap.add_argument("--parallel", type=int, default=3, help="runs at once (each has its own mock server)")
    ap.add_argument("--fleet", type=int, default=8, help="abide fetch processes in the fleet simulation")
    ap.add_argument("--fleet-requests", type=int, default=400)
    ap.add_argument("--fleet-styles", nargs="+", default=["draft11"])
    ap.add_argument("--no-fleet", action="store_true")
    ap.add_argument("--fleet-only", action="store_true")
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results"))
    ap.add_argument("--keep-from", metavar="PEERS_JSON",
                    help="take the runs of clients not run now from an earlier peers.json (same workload)")
    ap.add_argument("--quick", action="store_true", help="a smoke run: 100 requests, two styles, no fleet")
    args = ap.parse_args()
    if args.quick:
        args.requests, args.styles, args.no_fleet = 100, ["retry-after-seconds", "draft11"], True
    fleet_on = not args.no_fleet
    clients = [] if args.fleet_only else args.clients

    ensure_peers(clients, fleet_on)
    abide = args.abide or build_abide(args.build_dir)
    rundir = os.path.join(args.build_dir, "peers-run", datetime.datetime.now().strftime("%Y%m%d-%H%M%S"))
    os.makedirs(rundir, exist_ok=True)
    log(f"peers: raw files in {os.path.relpath(rundir, ROOT)}")
    load_before = load_avg()
    t_start = time.monotonic()

    runs = []
    jobs = [(s, c) for s in args.styles for c in clients]
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.parallel)) as pool:
        futs = [pool.submit(one_run, args, abide, s, c, rundir) for s, c in jobs]
        for f in futs:
            runs.append(f.result())

    kept_clients = []
    if args.keep_from:
        with open(args.keep_from) as f:
            earlier = json.load(f)
        for r in earlier["runs"]:
            if r["client"] not in clients and r["style"] in args.styles and r["requests"] == args.requests:
                runs.append(r)
                kept_clients.append(r["client"])
        log(f"peers: kept {len(kept_clients)} runs from {args.keep_from} (measured {earlier['meta']['date']})")

    fleet = []
    if fleet_on:
        redis = Redis(rundir)
        try:
            for style in args.fleet_styles:
                for store in ("redis", "memory"):
                    fleet.append(fleet_run(args, abide, style, store, rundir, redis))
        finally:
            redis.stop()

    meta = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "requests": args.requests, "limit": args.limit, "window": args.window, "jobs": args.jobs,
        "retries": args.retries, "quota_time_s": args.requests * args.window / args.limit,
        "fleet": args.fleet, "fleet_requests": args.fleet_requests // args.fleet * args.fleet,
        "load_before": load_before, "load_after": load_avg(), "duration_s": round(time.monotonic() - t_start, 1),
        "versions": versions(),
    }
    if kept_clients:
        meta["kept_from"] = {"clients": sorted(set(kept_clients)), "date": earlier["meta"]["date"],
                             "load": earlier["meta"]["load_before"] + " / " + earlier["meta"]["load_after"]}
    clients = [c for c in CLIENTS if c in clients or c in kept_clients]
    styles = [s for s in args.styles if any(r["style"] == s for r in runs)]
    checks = verdicts(runs, styles)
    table = markdown(meta, runs, fleet, checks, styles, clients)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "peers.md"), "w") as f:
        f.write(table)
    with open(os.path.join(args.out, "peers.json"), "w") as f:
        json.dump({"meta": meta, "runs": runs, "fleet": fleet, "targets": checks}, f, indent=1)
        f.write("\n")
    if runs or fleet:
        plot(os.path.join(args.out, "peers.png"), meta, runs, fleet, styles, clients)
    if os.path.abspath(args.out) == os.path.join(ROOT, "bench", "results"):
        update_readme(table)
    print(table)
    log(f"peers: {meta['duration_s']} s; wrote {os.path.relpath(args.out, ROOT)}/peers.md, peers.json, peers.png")
    return 1 if any(c["verdict"] != "pass" for c in checks) else 0


def versions():
    v = {}
    def out(cmd):
        try:
            return subprocess.run(cmd, capture_output=True, text=True, timeout=10).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return None
    c = out(["curl", "--version"])
    v["curl"] = c.split()[1] if c else None
    v["urllib3"] = out([DEBIAN_PYTHON, "-c", "import urllib3; print(urllib3.__version__)"])
    v["node"] = out(["node", "--version"])
    for pkg in ("ky", "got"):
        try:
            with open(os.path.join(HERE, "node", "node_modules", pkg, "package.json")) as f:
                v[pkg] = json.load(f)["version"]
        except (OSError, ValueError):
            v[pkg] = None
    return v


if __name__ == "__main__":
    sys.exit(main())
