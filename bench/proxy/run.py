#!/usr/bin/python3
"""`abide proxy` beside nginx, measured on loopback (a benchmark, not a test).

One run starts three servers, all on 127.0.0.1 with free ports:
  - the upstream: an nginx of its own answering 200 "ok\\n" at once
    (bench/proxy/upstream.conf.in);
  - nginx as a plain reverse proxy to it (bench/proxy/nginx_proxy.conf.in:
    upstream keepalive 64, proxy_http_version 1.1, Connection "");
  - `abide proxy --upstream` to the same upstream, --jobs at least the
    largest concurrency.
Each nginx runs one worker in the foreground, unprivileged (as nobody when
the bench runs as root), with its pid, logs and temp paths in a temp dir; its
config and error log are copied to the run folder (build/pbench/proxy-run/<time>/)
with abide's stderr and result.json.

For each concurrency C (1, 16 and 64) the load generator (bench/proxy_load.cpp,
C keep-alive connections sending GETs back to back) runs against the upstream
directly, through nginx and through abide, REPEATS times in a rotating order;
the medians are kept. Added latency = through - direct (p50, p99, from the
medians); the verdicts: abide's added p50 at most 4x nginx's, its throughput
at least 50% of nginx's, at each C. The CPU each process spent per request
(/proc/PID/stat, and the load generator's rusage) says where the time goes.

Then memory: abide proxy in front of `abide mock-server --style
retry-after-seconds --limit 1` with a long window, a cooldown started, and
CALLERS connections each holding a GET with Abide-Max-Wait; once
/__abide/stats shows them held (or after a settle time) the proxy's VmRSS,
VmHWM and threads are read; then SIGTERM, and every caller should get 503
and the proxy exit 0.

Usage: bench/proxy/run.py [--markdown bench/results/proxy.md] [--json FILE]
       [--duration 5] [--repeats 3] [--concurrency 16 64] [--callers 1000]
       [--no-abide] [--no-memory] [--abide PATH] [--load PATH] [--no-build]
"""
import argparse
import datetime
import json
import os
import resource
import selectors
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
BUILD = os.path.join(ROOT, "build", "pbench")
CLK_TCK = os.sysconf("SC_CLK_TCK")
TARGET_ADDED_P50_RATIO = 4.0  # abide's added p50 / nginx's, at most
TARGET_RPS_RATIO = 0.5        # abide's throughput / nginx's, at least
TARGET_CONCURRENCY = (16, 64)  # where issue 15 judges them


def log(*a):
    print(*a, file=sys.stderr, flush=True)


# ---------------------------------------------------------------- set-up ----

def build(args):
    """Configures build/pbench (Release, benchmarks on) and builds the two targets."""
    if not os.path.exists(os.path.join(BUILD, "build.ninja")):
        subprocess.run(["cmake", "-S", ROOT, "-B", BUILD, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release",
                        "-DABIDE_BUILD_BENCH=ON"], check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["cmake", "--build", BUILD, "-j", str(args.build_jobs), "--target", "abide_cli", "proxy_load"],
                   check=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, proc, what, timeout=10.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            sys.exit(f"proxy bench: {what} exited ({proc.returncode}) before listening")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    sys.exit(f"proxy bench: {what} is not listening on {port}")


def fill_template(name, out_path, **values):
    with open(os.path.join(HERE, name)) as f:
        text = f.read()
    for k, v in values.items():
        text = text.replace(f"@{k}@", str(v))
    with open(out_path, "w") as f:
        f.write(text)


NOBODY = 65534  # nginx runs unprivileged: as this user when the bench runs as root


def start_nginx(args, nginx_dir, template, conf_name, tmp_name, **values):
    """An nginx in the foreground, everything it writes in nginx_dir (a temp dir)."""
    os.makedirs(os.path.join(nginx_dir, tmp_name), exist_ok=True)
    conf = os.path.join(nginx_dir, conf_name)
    fill_template(template, conf, DIR=nginx_dir, **values)
    as_user = {}
    if os.geteuid() == 0:
        for path in (nginx_dir, os.path.join(nginx_dir, tmp_name)):
            os.chown(path, NOBODY, NOBODY)
        as_user = {"user": NOBODY, "group": NOBODY, "extra_groups": []}
    # -e: the error log from the start, before the config is read (not /var/log).
    proc = subprocess.Popen([args.nginx, "-p", nginx_dir, "-c", conf, "-e", os.path.join(nginx_dir, conf_name + ".log"),
                             "-g", "daemon off;"], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, **as_user)
    wait_port(values["PORT"], proc, conf_name)
    return proc


def start_abide_proxy(args, upstream_url, extra, stderr_path):
    cmd = [args.abide, "proxy", "--upstream", upstream_url, "--port", "0", *extra]
    err = open(stderr_path, "w")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True)
    line = proc.stdout.readline().strip()
    if not line.startswith("listening on "):
        proc.kill()
        sys.exit(f"proxy bench: abide proxy printed {line!r} (stderr in {stderr_path})")
    port = int(line.rsplit(":", 1)[1])
    wait_port(port, proc, "abide proxy")
    return proc, port, cmd


def stop(proc, sig=signal.SIGTERM, timeout=10.0):
    if proc is None or proc.poll() is not None:
        return proc.returncode if proc else None
    proc.send_signal(sig)
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        return "killed"


# ------------------------------------------------------------ /proc ----

def process_tree(pid):
    """pid and its children (an nginx master's workers)."""
    pids = [pid]
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                pids += [int(c) for c in f.read().split()]
    except OSError:
        pass
    return pids


def cpu_seconds(pid):
    """(utime, stime) of pid and its children, in seconds: a process's own
    figures include its threads that have ended."""
    user = system = 0
    for p in process_tree(pid):
        try:
            with open(f"/proc/{p}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            user += int(fields[11])  # utime (field 14)
            system += int(fields[12])  # stime (field 15)
        except (OSError, IndexError, ValueError):
            pass
    return user / CLK_TCK, system / CLK_TCK


def ctx_switches(pid):
    """Voluntary + involuntary context switches of the live threads of pid and its
    children (an ended thread's are gone: sample while the connections are open)."""
    total = 0
    for p in process_tree(pid):
        try:
            tids = os.listdir(f"/proc/{p}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{p}/task/{tid}/status") as f:
                    for line in f:
                        if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                            total += int(line.split()[1])
            except (OSError, ValueError):
                pass
    return total


def proc_status(pid):
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "VmHWM", "VmSize", "Threads"):
                out[k] = int(v.split()[0])  # kB, or a count for Threads
    return out


def load_average():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


# ------------------------------------------------------------ latency ----

def run_load(args, port, conns, servers):
    """One load-generator run; returns its JSON plus what each server spent per request."""
    before = {name: cpu_seconds(pid) for name, pid in servers.items()}
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.Popen([args.load, "--port", str(port), "--connections", str(conns), "--duration",
                             str(args.duration), "--warmup", str(args.warmup)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    # Context switches inside the measured span, while every connection (and
    # so every abide connection thread) is alive.
    time.sleep(args.warmup + 0.1 + 0.2 * args.duration)
    ctx0 = {name: ctx_switches(pid) for name, pid in servers.items()}
    t0 = time.monotonic()
    time.sleep(0.5 * args.duration)
    ctx1 = {name: ctx_switches(pid) for name, pid in servers.items()}
    ctx_span = time.monotonic() - t0
    stdout, stderr = proc.communicate()
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        sys.exit(f"proxy bench: proxy_load failed: {stderr.strip()}")
    out = json.loads(stdout)
    # CPU over the whole run (warm-up included) per request at the measured rate:
    # comparable between the processes and targets of one run.
    requests = max(1.0, out["rps"] * (args.duration + args.warmup))
    cpu = {}
    for name, pid in servers.items():
        user, system = cpu_seconds(pid)
        cpu[name + "_sys"] = (system - before[name][1]) * 1e6 / requests
        cpu[name] = (user - before[name][0]) * 1e6 / requests + cpu[name + "_sys"]
    cpu["load"] = (ru1.ru_utime + ru1.ru_stime - ru0.ru_utime - ru0.ru_stime) * 1e6 / requests
    out["cpu_us_per_req"] = cpu
    out["ctx_per_req"] = {name: (ctx1[name] - ctx0[name]) / max(1.0, out["rps"] * ctx_span) for name in servers}
    return out


def median_of(runs, key):
    return statistics.median(r[key] for r in runs)


def latency_phase(args, upstream_port, nginx_port, abide_port, servers):
    targets = [("direct", upstream_port), ("nginx", nginx_port)]
    if abide_port:
        targets.append(("abide", abide_port))
    results = {}
    for conns in args.concurrency:
        runs = {name: [] for name, _ in targets}
        for rep in range(args.repeats):
            # A rotating order: no target always runs first (or right after another).
            order = targets[rep % len(targets):] + targets[:rep % len(targets)]
            for name, port in order:
                r = run_load(args, port, conns, servers)
                runs[name].append(r)
                log(f"  C={conns} rep {rep + 1} {name:6}: {r['rps']:9.0f} req/s  p50 {r['p50_us']:7.1f}  "
                    f"p99 {r['p99_us']:8.1f} us  errors {r['errors']}")
        summary = {}
        for name, rs in runs.items():
            summary[name] = {
                "rps": median_of(rs, "rps"),
                "p50_us": median_of(rs, "p50_us"),
                "p90_us": median_of(rs, "p90_us"),
                "p99_us": median_of(rs, "p99_us"),
                "errors": sum(r["errors"] for r in rs),
                "count": sum(r["count"] for r in rs),
                "cpu_us_per_req": {k: statistics.median(r["cpu_us_per_req"][k] for r in rs)
                                   for k in rs[0]["cpu_us_per_req"]},
                "ctx_per_req": {k: statistics.median(r["ctx_per_req"][k] for r in rs) for k in rs[0]["ctx_per_req"]},
                "runs": rs,
            }
        for name in summary:
            if name != "direct":
                summary[name]["added_p50_us"] = summary[name]["p50_us"] - summary["direct"]["p50_us"]
                summary[name]["added_p99_us"] = summary[name]["p99_us"] - summary["direct"]["p99_us"]
        results[str(conns)] = summary
    return results


def verdicts(latency):
    """(callers, target, measured, verdict): verdict True/False where issue 15
    judges (16 and 64 callers), None elsewhere (shown for reference only)."""
    rows = []
    for conns, s in latency.items():
        if "abide" not in s:
            continue
        judged = int(conns) in TARGET_CONCURRENCY
        n_added, a_added = s["nginx"]["added_p50_us"], s["abide"]["added_p50_us"]
        # A ratio over an nginx figure at or below zero (noise) says nothing: a miss.
        ratio = a_added / n_added if n_added > 0 else float("inf")
        rows.append((conns, f"added p50 abide / nginx <= {TARGET_ADDED_P50_RATIO:g}x",
                     f"{a_added:.1f} / {n_added:.1f} us = {ratio:.2f}x",
                     ratio <= TARGET_ADDED_P50_RATIO if judged else None))
        rr = s["abide"]["rps"] / s["nginx"]["rps"]
        rows.append((conns, f"throughput abide / nginx >= {TARGET_RPS_RATIO:.0%}",
                     f"{s['abide']['rps']:.0f} / {s['nginx']['rps']:.0f} = {rr:.1%}",
                     rr >= TARGET_RPS_RATIO if judged else None))
    return rows


# ------------------------------------------------------------- memory ----

def http_get(port, path, headers=None, timeout=10):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def raise_fd_limit(need):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < need:
        new = hard if hard == resource.RLIM_INFINITY else min(hard, max(need, soft))
        resource.setrlimit(resource.RLIMIT_NOFILE, (new, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def memory_phase(args, run_dir):
    """CALLERS connections held in one cooldown: the proxy's memory and threads."""
    limit = raise_fd_limit(2 * args.callers + 256)
    if limit < args.callers + 128:
        log(f"proxy bench: fd limit {limit} is too low for {args.callers} callers")
    mock_port = free_port()
    mock = subprocess.Popen([args.abide, "mock-server", "--port", str(mock_port), "--style", "retry-after-seconds",
                             "--limit", "1", "--window", str(args.cooldown), "--threads", "64", "--quiet"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    mock.stdout.readline()
    wait_port(mock_port, mock, "mock-server")
    proxy = None
    socks = []
    try:
        extra = ["--jobs", str(args.memory_jobs), "--max-wait", f"{args.caller_wait:g}", *args.memory_proxy_args]
        proxy, port, cmd = start_abide_proxy(args, f"http://127.0.0.1:{mock_port}", extra,
                                             os.path.join(run_dir, "abide-memory.stderr"))
        # The window's one request goes straight to the server; the next one,
        # through the proxy with no budget to wait, gets the 429 whose Retry-After
        # starts the cooldown every later caller is held in.
        http_get(mock_port, "/prime")
        status, headers, _ = http_get(port, "/prime", {"Abide-Max-Wait": "0"})
        prime = {"status": status, "outcome": headers.get("Abide-Outcome"), "retry_after": headers.get("Retry-After")}
        time.sleep(0.5)
        base = proc_status(proxy.pid)
        log(f"  memory: primed ({prime}); proxy before callers: {base}")

        sel = selectors.DefaultSelector()
        request = (f"GET /held HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAbide-Max-Wait: {args.caller_wait:g}\r\n"
                   "Connection: close\r\n\r\n").encode()
        connect_errors = 0
        for _ in range(args.callers):
            try:
                s = socket.create_connection(("127.0.0.1", port), timeout=5)
                s.sendall(request)
                s.setblocking(False)
                socks.append(s)
                sel.register(s, selectors.EVENT_READ, bytearray())
            except OSError:
                connect_errors += 1
        # Held = the proxy's own count, when its stats page answers; else the settle time decides.
        held = None
        end = time.monotonic() + args.settle
        while time.monotonic() < end:
            try:
                _, _, body = http_get(port, "/__abide/stats", timeout=2)
                held = json.loads(body).get("held")
                if held is not None and held >= len(socks):
                    break
            except (OSError, ValueError):
                pass
            time.sleep(0.5)
        # Answers that came before SIGTERM (a full queue's 503, a deferral) are not held.
        early = collect(sel, 0.2)
        time.sleep(1.0)
        mem = proc_status(proxy.pid)
        log(f"  memory: {len(socks)} callers, held {held}, answered early {len(early)}: {mem}")

        t_term = time.monotonic()
        proxy.send_signal(signal.SIGTERM)
        answers = collect(sel, args.term_timeout, want=len(socks) - len(early))
        try:
            rc = proxy.wait(args.term_timeout)
        except subprocess.TimeoutExpired:
            rc = "did not exit"
        stop_s = time.monotonic() - t_term
        statuses = {}
        for st in list(early.values()) + list(answers.values()):
            statuses[st] = statuses.get(st, 0) + 1
        unanswered = len(socks) - len(early) - len(answers)
        per_caller_kb = (mem["VmRSS"] - base["VmRSS"]) / max(1, len(socks))
        return {
            "callers": args.callers, "connected": len(socks), "connect_errors": connect_errors,
            "cooldown_s": args.cooldown, "caller_max_wait_s": args.caller_wait, "prime": prime,
            "held_reported": held, "answered_before_sigterm": len(early),
            "rss_before_kb": base["VmRSS"], "rss_held_kb": mem["VmRSS"], "hwm_kb": mem["VmHWM"],
            "vmsize_kb": mem["VmSize"], "threads_before": base["Threads"], "threads_held": mem["Threads"],
            "rss_per_1000_mb": per_caller_kb * 1000 / 1024, "rss_per_caller_kb": per_caller_kb,
            "exit_code": rc, "stop_s": stop_s, "statuses": {str(k): v for k, v in sorted(statuses.items(), key=str)},
            "unanswered": unanswered, "command": cmd,
        }
    finally:
        for s in socks:
            s.close()
        stop(proxy, signal.SIGKILL)
        stop(mock)


def collect(sel, timeout, want=None):
    """Reads answers from the callers' sockets: {socket: status} for those that got one."""
    got = {}
    end = time.monotonic() + timeout
    while time.monotonic() < end and (want is None or len(got) < want):
        for key, _ in sel.select(max(0.0, min(0.5, end - time.monotonic()))):
            s, buf = key.fileobj, key.data
            try:
                chunk = s.recv(65536)
            except BlockingIOError:
                continue
            except OSError:
                chunk = b""
            buf += chunk
            if b"\r\n" in buf or not chunk:
                line = bytes(buf).split(b"\r\n", 1)[0].split()
                got[s] = int(line[1]) if len(line) >= 2 and line[1].isdigit() else "no answer"
                sel.unregister(s)
        if want is None and not sel.select(0):
            break
    return got


# ------------------------------------------------------------ report ----

def markdown(meta, latency, rows, memory):
    out = [f"# abide proxy beside nginx\n",
           f"Measured {meta['when']} on {meta['cpus']} CPUs (shared by the load generator and every server), "
           f"load average before/after {meta['load_before']} / {meta['load_after']}; abide {meta['abide_build']}, "
           f"{meta['nginx']}, 1 nginx worker each (upstream and proxy).\n",
           f"Command: `{meta['command']}`\n"]
    if latency:
        out.append(
           f"Each figure is the median of {meta['repeats']} runs of {meta['duration']:g} s "
           f"(after {meta['warmup']:g} s warm-up) per target, the targets' runs interleaved; the upstream is nginx "
           f"answering 200 \"ok\\n\"; \"added\" = through the proxy - direct to the upstream. CPU is per request, in "
           f"µs, from /proc/PID/stat (utime+stime; 10 ms ticks) over the run.\n")
    if meta.get("abide_command"):
        out.append(f"abide: `abide {meta['abide_command']}`.\n")
    for conns, s in latency.items():
        out.append(f"\n## {conns} concurrent caller{'' if conns == '1' else 's'}\n")
        out.append("| target | req/s | p50 µs | p90 µs | p99 µs | added p50 µs | added p99 µs | errors | CPU µs/req: "
                   "upstream | nginx proxy | abide | load gen |")
        out.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for name, v in s.items():
            c = v["cpu_us_per_req"]
            added50 = f"{v['added_p50_us']:.1f}" if "added_p50_us" in v else "-"
            added99 = f"{v['added_p99_us']:.1f}" if "added_p99_us" in v else "-"
            out.append(f"| {name} | {v['rps']:.0f} | {v['p50_us']:.1f} | {v['p90_us']:.1f} | {v['p99_us']:.1f} | "
                       f"{added50} | {added99} | {v['errors']} | {c.get('upstream', 0):.1f} | "
                       f"{c.get('nginx', 0):.1f} | {c.get('abide', 0):.1f} | {c.get('load', 0):.1f} |")
        notes = []
        for proxy in ("nginx", "abide"):
            if proxy in s:
                c, x = s[proxy]["cpu_us_per_req"], s[proxy]["ctx_per_req"]
                notes.append(f"{proxy}: {c[proxy] - c[proxy + '_sys']:.1f} µs user + "
                             f"{c[proxy + '_sys']:.1f} µs system CPU, {x[proxy]:.2f} context switches per request")
        if notes:
            out.append("\nThe proxies' own cost, through each: " + "; ".join(notes) + ".")
    if rows:
        out.append("\n## Targets\n")
        out.append("| callers | target | measured | verdict |")
        out.append("|---:|---|---|---|")
        for conns, what, measured, ok in rows:
            verdict = "(reference)" if ok is None else "pass" if ok else "MISS"
            out.append(f"| {conns} | {what} | {measured} | {verdict} |")
    if memory:
        m = memory
        out.append("\n## Memory: callers held in one cooldown\n")
        out.append(f"`abide mock-server --style retry-after-seconds --limit 1 --window {m['cooldown_s']:g}` upstream, "
                   f"a cooldown started (prime: {m['prime']}), then {m['callers']} connections each with a GET and "
                   f"`Abide-Max-Wait: {m['caller_max_wait_s']:g}`. Proxy: `{' '.join(m['command'][1:])}`.\n")
        out.append("| callers connected | held (stats) | RSS before | RSS held | VmHWM | threads before / held | "
                   "RSS per 1000 callers | per caller | after SIGTERM | exit | stop took |")
        out.append("|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|")
        st = ", ".join(f"{k}: {v}" for k, v in m["statuses"].items()) or "none"
        if m["unanswered"]:
            st += f", unanswered: {m['unanswered']}"
        out.append(f"| {m['connected']} | {m['held_reported']} | {m['rss_before_kb'] / 1024:.1f} MB | "
                   f"{m['rss_held_kb'] / 1024:.1f} MB | {m['hwm_kb'] / 1024:.1f} MB | {m['threads_before']} / "
                   f"{m['threads_held']} | {m['rss_per_1000_mb']:.1f} MB | {m['rss_per_caller_kb']:.1f} KB | {st} | "
                   f"{m['exit_code']} | {m['stop_s']:.2f} s |")
    return "\n".join(out) + "\n"


def git_commit():
    r = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return r.stdout.strip() or "unknown"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--abide", default=os.path.join(BUILD, "tools", "abide", "abide"))
    ap.add_argument("--load", default=os.path.join(BUILD, "bench", "proxy_load"))
    ap.add_argument("--nginx", default="/usr/sbin/nginx")
    ap.add_argument("--no-build", action="store_true", help="use the binaries as they are")
    ap.add_argument("--abide-commit", help="what --abide was built from, for the report (default: this tree's HEAD)")
    ap.add_argument("--build-jobs", type=int, default=2)
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 16, 64],
                    help="callers per run; the targets are judged at 16 and 64 (1: an unloaded keep-alive client)")
    ap.add_argument("--duration", type=float, default=5.0, help="measured seconds per run")
    ap.add_argument("--warmup", type=float, default=1.0)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--abide-args", nargs=argparse.REMAINDER, default=[],
                    help="more options for the latency phase's abide proxy (last on the line)")
    ap.add_argument("--no-abide", action="store_true", help="nginx and the direct runs only")
    ap.add_argument("--no-latency", action="store_true")
    ap.add_argument("--no-memory", action="store_true")
    ap.add_argument("--callers", type=int, default=1000)
    ap.add_argument("--cooldown", type=float, default=45.0, help="the mock server's window: the cooldown's length")
    ap.add_argument("--caller-wait", type=float, default=60.0, help="each held caller's Abide-Max-Wait")
    ap.add_argument("--memory-jobs", type=int, default=64)
    ap.add_argument("--memory-proxy-args", nargs="*", default=[])
    ap.add_argument("--settle", type=float, default=15.0, help="longest wait for the callers to be held")
    ap.add_argument("--term-timeout", type=float, default=20.0)
    ap.add_argument("--markdown", help="write the tables to this file")
    ap.add_argument("--json", help="write every figure to this file")
    args = ap.parse_args()
    if args.caller_wait <= args.cooldown:
        # A hint longer than the caller's budget is a deferral, answered at once: nothing would be held.
        sys.exit("proxy bench: --caller-wait must be longer than --cooldown")
    if not args.no_build:
        build(args)
    args.abide = os.path.abspath(args.abide)
    built = datetime.datetime.fromtimestamp(os.path.getmtime(args.abide), datetime.timezone.utc)
    abide_build = args.abide_commit or f"built {built:%H:%M} UTC in a tree at {git_commit()}"

    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%d-%H%M%S")
    run_dir = os.path.join(BUILD, "proxy-run", stamp)
    os.makedirs(run_dir, exist_ok=True)
    raise_fd_limit(4096)
    meta = {"when": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "cpus": os.cpu_count(), "load_before": load_average(), "abide_build": abide_build,
            "nginx": subprocess.run([args.nginx, "-v"], capture_output=True, text=True).stderr.strip(),
            "command": shlex.join(["bench/proxy/run.py", *sys.argv[1:]]), "repeats": args.repeats,
            "duration": args.duration, "warmup": args.warmup}
    log(f"proxy bench: run folder {run_dir}, load average {meta['load_before']}")

    latency, rows, memory = {}, [], None
    upstream = nginx = abide = None
    nginx_dir = tempfile.mkdtemp(prefix="abide-proxy-bench-")
    try:
        if not args.no_latency:
            upstream_port, nginx_port = free_port(), free_port()
            upstream = start_nginx(args, nginx_dir, "upstream.conf.in", "upstream.conf", "upstream-tmp",
                                   PORT=upstream_port)
            nginx = start_nginx(args, nginx_dir, "nginx_proxy.conf.in", "nginx-proxy.conf", "proxy-tmp",
                                PORT=nginx_port, UPSTREAM_PORT=upstream_port)
            servers = {"upstream": upstream.pid, "nginx": nginx.pid}
            abide_port = None
            if not args.no_abide:
                jobs = max(args.concurrency)
                abide, abide_port, cmd = start_abide_proxy(
                    args, f"http://127.0.0.1:{upstream_port}", ["--jobs", str(jobs), *args.abide_args],
                    os.path.join(run_dir, "abide-latency.stderr"))
                meta["abide_command"] = " ".join(cmd[1:])
                servers["abide"] = abide.pid
            for name, port in [("direct", upstream_port), ("nginx", nginx_port), ("abide", abide_port)]:
                if port:
                    status, _, body = http_get(port, "/check")
                    if status != 200 or body != b"ok\n":
                        sys.exit(f"proxy bench: {name} answered {status} {body[:80]!r}")
            latency = latency_phase(args, upstream_port, nginx_port, abide_port, servers)
            rows = verdicts(latency)
            if abide:
                meta["abide_exit"] = stop(abide)
                abide = None
    finally:
        stop(abide)
        stop(nginx, signal.SIGQUIT)
        stop(upstream, signal.SIGQUIT)
        # The configs and error logs stay with the run; the temp dir goes.
        for name in os.listdir(nginx_dir):
            if name.endswith((".conf", ".log")):
                shutil.copy(os.path.join(nginx_dir, name), run_dir)
        shutil.rmtree(nginx_dir, ignore_errors=True)
    if not args.no_memory and not args.no_abide:
        memory = memory_phase(args, run_dir)
    meta["load_after"] = load_average()

    text = markdown(meta, latency, rows, memory)
    print(text)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(text)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"meta": meta, "latency": latency, "targets": rows, "memory": memory}, f, indent=1,
                      default=str)
    with open(os.path.join(run_dir, "result.json"), "w") as f:
        json.dump({"meta": meta, "latency": latency, "targets": rows, "memory": memory}, f, indent=1, default=str)
    return 1 if any(ok is False for *_, ok in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
