#!/usr/bin/python3
"""`abide proxy` beside nginx, measured on loopback (a benchmark, not a test).

Three scenarios, each judged by issue 29's targets, measured in the same run:
latency and throughput beside nginx, callers held in one cooldown, and many
connections idle and then each reading a trickled event stream.

The latency scenario starts three servers, all on 127.0.0.1 with free ports:
  - the upstream: an nginx of its own answering 200 "ok\\n" at once
    (bench/proxy/upstream.conf.in);
  - nginx as a plain reverse proxy to it (bench/proxy/nginx_proxy.conf.in:
    upstream keepalive as many as the most callers, at least 64,
    proxy_http_version 1.1, Connection "");
  - `abide proxy --upstream` to the same upstream, --jobs at least the
    largest concurrency.
Each nginx runs one worker in the foreground, unprivileged (as nobody when
the bench runs as root), with its pid, logs and temp paths in a temp dir; its
config and error log are copied to the run folder (build/pbench/proxy-run/<time>/)
with abide's stderr and result.json.

For each concurrency C (1, 16, 64 and 256) the load generator
(bench/proxy_load.cpp, C keep-alive connections sending GETs back to back)
runs against the upstream directly, through nginx and through abide, REPEATS
times in a rotating order; the medians are kept. Added latency = through -
direct (p50, p99, from the medians); the verdicts at 16, 64 and 256: abide's
added p50 at most 1.25x nginx's, its added p99 at most 2x nginx's, its
throughput at least 90% of nginx's. The CPU each process spent per request
(/proc/PID/stat, and the load generator's rusage) says where the time goes.

Then the cooldown: abide proxy in front of `abide mock-server --style
retry-after-seconds --limit 1` with a long window, a cooldown started, and
CALLERS (10,000) connections each holding a GET with Abide-Max-Wait; once
/__abide/stats shows them held (or after a settle time) the proxy's VmRSS,
VmHWM and threads are read; then SIGTERM, and every caller should get 503
and the proxy exit 0. Verdict: the RSS grown over the proxy's RSS before the
callers connected, per held caller, at most 4 KB (and all CALLERS held).

Then the streams (--streams N, 10,000): bench/proxy/stream_upstream.js, an
HTTP/2 server over TLS with a certificate made for the run, answers GET
/stream with K events a second apart (text/event-stream) and GET /fresh at
once; abide proxy reaches it with --upstream https://... --cacert CERT
--jobs N+16 --max-upstream-connections 128 --upstream-buffer-size 1024 (as
its user would for many streams to one HTTP/2 upstream). bench/proxy_streams.cpp opens N connections to the proxy and
leaves them idle (the proxy's VmRSS and threads: "idle"), then every one
sends GET /stream and reads its whole answer, all at once (VmRSS sampled
throughout: its peak is "streaming"); a fresh caller times GET /fresh on a
new connection every half second meanwhile, and the bench asks the upstream
for /fresh itself every half second over a kept connection (what the upstream
alone takes at those moments: the anchor). Verdicts: every stream whole
(K events in order, a clean end), the fresh caller answered within 100 ms,
at most 8 KB per connection ((RSS - RSS before the callers) / N, idle and
streaming), threads at most the cores + 4.

Every abide process gets HOME and XDG_STATE_HOME in a temporary folder of
the run's: its quota file is the run's own. The bench raises its soft
RLIMIT_NOFILE to the hard one (its children inherit it) and says so when
that is below what CALLERS or N need.

Usage: bench/proxy/run.py [--markdown bench/results/proxy.md] [--label TEXT] [--json FILE]
       [--duration 5] [--repeats 3] [--concurrency 1 16 64 256] [--callers 10000]
       [--streams 10000] [--events 5] [--no-latency] [--no-memory] [--no-streams]
       [--no-abide] [--abide PATH] [--load PATH] [--no-build]
--markdown appends this run's tables to the file, below what it holds.
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
import threading
import http.client
import ssl
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
BUILD = os.path.join(ROOT, "build", "pbench")
CLK_TCK = os.sysconf("SC_CLK_TCK")
# Issue 29's targets.
TARGET_ADDED_P50_RATIO = 1.25  # abide's added p50 / nginx's, at most
TARGET_ADDED_P99_RATIO = 2.0   # abide's added p99 / nginx's, at most
TARGET_RPS_RATIO = 0.9         # abide's throughput / nginx's, at least
TARGET_CONCURRENCY = (16, 64, 256)  # where they are judged
TARGET_HELD_KB = 4.0           # RSS per caller held in a cooldown, at most
TARGET_STREAM_KB = 8.0         # RSS per connection, idle and streaming, at most
TARGET_FRESH_MS = 100.0        # a fresh caller's answer while the others stream, at most
TARGET_EXTRA_THREADS = 4       # threads at most the cores + this


def log(*a):
    print(*a, file=sys.stderr, flush=True)


# ---------------------------------------------------------------- set-up ----

def build(args):
    """Configures build/pbench (Release, benchmarks on) and builds the three targets."""
    if not os.path.exists(os.path.join(BUILD, "build.ninja")):
        subprocess.run(["cmake", "-S", ROOT, "-B", BUILD, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release",
                        "-DABIDE_BUILD_BENCH=ON"], check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["cmake", "--build", BUILD, "-j", str(args.build_jobs), "--target", "abide_cli", "proxy_load",
                    "proxy_streams"],
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


# The environment of every abide process: HOME and XDG_STATE_HOME in the
# run's temporary folder (main() sets it), so that no quota file or key
# secret lands in the real home, and each run starts with no quota state.
ABIDE_ENV = None


def abide_env(state_dir):
    home = os.path.join(state_dir, "home")
    os.makedirs(home, exist_ok=True)
    env = dict(os.environ, HOME=home, XDG_STATE_HOME=os.path.join(state_dir, "state"))
    env.pop("ABIDE_STORE", None)  # the proxy's default store, as users run it
    return env


def start_abide_proxy(args, upstream_url, extra, stderr_path):
    cmd = [args.abide, "proxy", "--upstream", upstream_url, "--port", "0", *extra]
    err = open(stderr_path, "w")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True, env=ABIDE_ENV)
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
    """(callers, target, measured, verdict): verdict True/False where issue 29
    judges (16, 64 and 256 callers), None elsewhere (shown for reference only)."""
    rows = []
    for conns, s in latency.items():
        if "abide" not in s:
            continue
        judged = int(conns) in TARGET_CONCURRENCY
        for q, target in (("p50", TARGET_ADDED_P50_RATIO), ("p99", TARGET_ADDED_P99_RATIO)):
            n_added, a_added = s["nginx"][f"added_{q}_us"], s["abide"][f"added_{q}_us"]
            # A ratio over an nginx figure at or below zero (noise) says nothing: a miss.
            ratio = a_added / n_added if n_added > 0 else float("inf")
            rows.append((conns, f"added {q} abide / nginx <= {target:g}x",
                         f"{a_added:.1f} / {n_added:.1f} us = {ratio:.2f}x",
                         ratio <= target if judged else None))
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


def raise_fd_limit(want=0):
    """The soft RLIMIT_NOFILE up to the hard one (the children inherit it): the
    cooldown's callers are sockets of this process. With privilege (root), the
    hard limit is raised first to `want` when it is lower: the streams
    scenario's proxy holds N callers and up to N upstream sockets. Returns
    (soft, hard)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if want and hard != resource.RLIM_INFINITY and hard < want:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, want))
            soft, hard = want, want
        except (ValueError, OSError):
            pass  # unprivileged: the hard limit stays (check_fd_limit says what it costs)
    if soft != resource.RLIM_INFINITY and (hard == resource.RLIM_INFINITY or soft < hard):
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (ValueError, OSError) as e:
            log(f"proxy bench: cannot raise the descriptor limit from {soft} to {hard}: {e}")
    return resource.getrlimit(resource.RLIMIT_NOFILE)


def check_fd_limit(need, what):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < need:
        log(f"proxy bench: the descriptor limit is {soft} (hard {hard}), below the {need} that {what} need: "
            f"some will not connect")


def memory_phase(args, run_dir):
    """CALLERS connections held in one cooldown: the proxy's memory and threads."""
    check_fd_limit(args.callers + 128, f"{args.callers} held callers")
    mock_port = free_port()
    mock = subprocess.Popen([args.abide, "mock-server", "--port", str(mock_port), "--style", "retry-after-seconds",
                             "--limit", "1", "--window", str(args.cooldown), "--threads", "64", "--quiet"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=ABIDE_ENV)
    mock.stdout.readline()
    wait_port(mock_port, mock, "mock-server")
    proxy = None
    socks = []
    try:
        # Held callers count against --jobs + --queue (beyond: 503 at once): room for all of them.
        extra = ["--jobs", str(args.memory_jobs), "--queue", str(max(1024, args.callers)), "--max-wait",
                 f"{args.caller_wait:g}", *args.memory_proxy_args]
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
        # Per caller actually held: callers the proxy refused or closed cost it
        # nothing, and dividing by them would flatter it (their absence is its own miss).
        held_count = held if held is not None else len(socks) - len(early)
        per_caller_kb = (mem["VmRSS"] - base["VmRSS"]) / max(1, held_count)
        return {
            "callers": args.callers, "connected": len(socks), "connect_errors": connect_errors,
            "cooldown_s": args.cooldown, "caller_max_wait_s": args.caller_wait, "prime": prime,
            "held_reported": held, "held_count": held_count, "answered_before_sigterm": len(early),
            "rss_before_kb": base["VmRSS"], "rss_held_kb": mem["VmRSS"], "hwm_kb": mem["VmHWM"],
            "vmsize_kb": mem["VmSize"], "threads_before": base["Threads"], "threads_held": mem["Threads"],
            "rss_growth_kb": mem["VmRSS"] - base["VmRSS"],
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


# ------------------------------------------------------------ streams ----

def make_certificate(folder):
    """A throwaway self-signed certificate for 127.0.0.1 (EC P-256: made at
    once), which is also the CA the proxy is given."""
    cert, key = os.path.join(folder, "cert.pem"), os.path.join(folder, "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                    "-keyout", key, "-out", cert, "-subj", "/CN=localhost", "-addext",
                    "subjectAltName=IP:127.0.0.1,DNS:localhost", "-days", "1", "-nodes"],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return cert, key


def proxy_supports(args, flag):
    """Whether this abide proxy takes `flag` (a build from before it does not)."""
    text = subprocess.run([args.abide, "proxy", "--help"], capture_output=True, text=True, env=ABIDE_ENV).stdout
    return flag in text


def tls_trust_flags(args, cert):
    """How this abide proxy trusts the run's certificate: --cacert, else -k (a
    build from before --cacert), else None (it cannot reach an https upstream
    it does not trust)."""
    text = subprocess.run([args.abide, "proxy", "--help"], capture_output=True, text=True, env=ABIDE_ENV).stdout
    if "--cacert" in text:
        return ["--cacert", cert]
    if "--insecure" in text:
        return ["-k"]
    return None


def try_status(pid):
    try:
        return proc_status(pid)
    except OSError:
        return None


class UpstreamProbe:
    """The fresh caller's anchor: GET /fresh straight to the upstream every
    `every` s, over one kept TLS connection (HTTP/1.1, which the upstream
    speaks too), at the moments the fresh caller asks through the proxy. What
    the upstream itself takes then is no delay of the proxy's."""

    def __init__(self, port, cafile, every=0.5):
        self.port, self.cafile, self.every = port, cafile, every
        self.probes = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self):
        context = ssl.create_default_context(cafile=self.cafile)
        conn = None
        while not self.stop.is_set():
            began = time.monotonic()
            try:
                if conn is None:
                    conn = http.client.HTTPSConnection("127.0.0.1", self.port, context=context, timeout=30)
                    conn.connect()  # the handshake is not the request's time
                    began = time.monotonic()
                conn.request("GET", "/fresh")
                r = conn.getresponse()
                r.read()
                self.probes.append({"ms": (time.monotonic() - began) * 1000, "status": r.status})
            except (OSError, http.client.HTTPException) as e:
                self.probes.append({"ms": (time.monotonic() - began) * 1000, "status": 0, "error": str(e)[:200]})
                conn = None
            self.stop.wait(self.every)
        if conn is not None:
            conn.close()


def streams_phase(args, run_dir):
    """N connections idle, then each reading a trickled event stream through
    the proxy from an HTTP/2 upstream: the proxy's memory and threads, whole
    streams, and a fresh caller's wait."""
    n = args.streams
    check_fd_limit(2 * n + 256, f"{n} stream callers and the proxy's upstream sockets")
    folder = tempfile.mkdtemp(prefix="abide-proxy-streams-")
    upstream = proxy = load = None
    result = {"streams": n, "events": args.events, "interval_ms": args.interval_ms}
    try:
        cert, key = make_certificate(folder)
        upstream = subprocess.Popen(["node", os.path.join(HERE, "stream_upstream.js"), "--cert", cert, "--key", key,
                                     "--events", str(args.events), "--interval-ms", str(args.interval_ms)],
                                    stdout=subprocess.PIPE, stderr=open(os.path.join(run_dir, "upstream.stderr"), "w"),
                                    text=True)
        words = upstream.stdout.readline().split()  # listening on 127.0.0.1:P control 127.0.0.1:C
        if len(words) != 5 or words[0] != "listening":
            sys.exit(f"proxy bench: stream_upstream.js printed {' '.join(words)!r}")
        up_port, control_port = int(words[2].rsplit(":", 1)[1]), int(words[4].rsplit(":", 1)[1])
        trust = tls_trust_flags(args, cert)
        if trust is None:
            log("  streams: this abide proxy has neither --cacert nor -k: skipped")
            result["skipped"] = "abide proxy has neither --cacert nor -k"
            return result
        # A transfer for every stream, and room for the fresh caller: at --jobs N
        # it would queue behind the streams for a free transfer.
        jobs = args.streams_jobs or n + 16
        extra = ["--jobs", str(jobs), *trust, *args.streams_proxy_args]
        if args.streams_upstream_connections > 0:
            # As a user of an HTTP/2 upstream configures it: the streams share
            # a few connections instead of one TLS handshake each.
            extra += ["--max-upstream-connections", str(args.streams_upstream_connections)]
        if args.streams_upstream_buffer > 0 and proxy_supports(args, "--upstream-buffer-size"):
            # Events are small: a small read buffer for each of thousands of streams.
            extra += ["--upstream-buffer-size", str(args.streams_upstream_buffer)]
        proxy, port, cmd = start_abide_proxy(args, f"https://127.0.0.1:{up_port}", extra,
                                             os.path.join(run_dir, "abide-streams.stderr"))
        result["command"] = cmd
        # One answer through it first: TLS, the pacer and the store set up once
        # are not per connection.
        status, _, body = http_get(port, "/fresh")
        result["warmup"] = {"status": status, "body": body[:80].decode("utf-8", "replace")}
        if status != 200:
            log(f"  streams: GET /fresh through the proxy answered {status} {body[:200]!r}")
        time.sleep(0.5)
        base = proc_status(proxy.pid)
        result["before"] = base
        log(f"  streams: proxy before callers: {base}")

        timeout = args.events * args.interval_ms / 1000 + args.interval_ms / 1000 + args.stream_timeout
        load = subprocess.Popen([args.streams_load, "--port", str(port), "--streams", str(n), "--events",
                                 str(args.events), "--timeout", f"{timeout:g}"],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=open(os.path.join(run_dir, "proxy_streams.stderr"), "w"), text=True)
        connected = json.loads(load.stdout.readline() or "{}")
        result["connect"] = connected
        log(f"  streams: {connected}")
        # Idle: sampled over a few seconds, the last sample kept (threads that
        # end after a burst of accepts are not counted against it).
        idle_samples = []
        end = time.monotonic() + args.idle
        while time.monotonic() < end:
            s = try_status(proxy.pid)
            if s:
                idle_samples.append(s)
            time.sleep(0.5)
        idle = idle_samples[-1] if idle_samples else None
        result["idle"] = idle
        result["idle_threads_max"] = max((s["Threads"] for s in idle_samples), default=None)
        log(f"  streams: idle {idle}")

        direct = UpstreamProbe(up_port, cert)
        direct.thread.start()
        load.stdin.write("stream\n")
        load.stdin.flush()
        sent = json.loads(load.stdout.readline() or "{}")
        result["sent"] = sent
        log(f"  streams: {sent}")
        peak, threads_max, samples = None, 0, 0
        # CPU while they stream: the proxy's and the upstream's, and the
        # proxy's busiest second (in cores), to tell a saturated proxy from
        # one that waits.
        started = time.monotonic()
        cpu_start = {"proxy": sum(cpu_seconds(proxy.pid)), "upstream": sum(cpu_seconds(upstream.pid))}
        cpu_samples = [(started, cpu_start["proxy"])]
        while load.poll() is None:
            s = try_status(proxy.pid)
            if s:
                samples += 1
                threads_max = max(threads_max, s["Threads"])
                if peak is None or s["VmRSS"] > peak["VmRSS"]:
                    peak = s
            elif proxy.poll() is not None:
                result["proxy_died"] = proxy.returncode
            time.sleep(0.25)
            cpu_samples.append((time.monotonic(), sum(cpu_seconds(proxy.pid))))
        busiest = 0.0
        for i, (t0, c0) in enumerate(cpu_samples):
            for t1, c1 in cpu_samples[i + 1:]:
                if t1 - t0 >= 1.0:
                    busiest = max(busiest, (c1 - c0) / (t1 - t0))
                    break
        result["cpu"] = {"wall_s": time.monotonic() - started,
                         "proxy_s": sum(cpu_seconds(proxy.pid)) - cpu_start["proxy"],
                         "upstream_s": sum(cpu_seconds(upstream.pid)) - cpu_start["upstream"],
                         "proxy_busiest_cores": busiest}
        direct.stop.set()
        direct.thread.join(timeout=35)
        result["upstream_probes"] = direct.probes
        done = {}
        for line in load.stdout.read().splitlines():
            if line.strip():
                done = json.loads(line)
        result["done"] = done
        result["streaming"] = peak
        result["streaming_threads_max"] = threads_max
        result["streaming_samples"] = samples
        result["after"] = try_status(proxy.pid)
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{control_port}/stats", timeout=5) as r:
                result["upstream"] = json.loads(r.read())
        except (OSError, ValueError):
            result["upstream"] = None
        log(f"  streams: whole {done.get('whole')} of {n}, statuses {done.get('statuses')}, "
            f"failures {done.get('failures')}, peak {peak}, upstream {result['upstream']}")
        if proxy.poll() is not None:
            result["exit_code"] = proxy.returncode
        else:
            result["exit_code"] = stop(proxy)
        proxy = None
        return result
    finally:
        if load is not None and load.poll() is None:
            load.kill()
            load.wait()
        stop(proxy, signal.SIGKILL)
        stop(upstream)
        shutil.rmtree(folder, ignore_errors=True)


def stream_figures(st, cpus):
    """The streams scenario's derived figures: per-connection memory, threads, probes."""
    n = st["streams"]
    base = st.get("before") or {}
    f = {}
    if st.get("idle") and base:
        f["idle_kb"] = (st["idle"]["VmRSS"] - base["VmRSS"]) / n
    if st.get("streaming") and base:
        f["streaming_kb"] = (st["streaming"]["VmRSS"] - base["VmRSS"]) / n
    f["threads_max"] = max(st.get("idle_threads_max") or 0, st.get("streaming_threads_max") or 0)
    f["threads_limit"] = cpus + TARGET_EXTRA_THREADS
    probes = st.get("done", {}).get("probes", [])
    for phase in ("idle", "streaming"):
        ms = [p["ms"] for p in probes if p["phase"] == phase]
        f[f"probe_{phase}"] = {"n": len(ms), "median": statistics.median(ms) if ms else None,
                               "max": max(ms) if ms else None,
                               "not_200": sum(1 for p in probes if p["phase"] == phase and p["status"] != 200)}
    ms = [p["ms"] for p in st.get("upstream_probes", [])]
    f["probe_upstream"] = {"n": len(ms), "median": statistics.median(ms) if ms else None, "max": max(ms) if ms else None,
                           "not_200": sum(1 for p in st.get("upstream_probes", []) if p["status"] != 200)}
    return f


def stream_verdicts(st, f):
    rows = []
    n = st["streams"]
    done = st.get("done", {})
    whole = done.get("whole", 0)
    rows.append((n, "streams delivered whole (every event, a clean end)", f"{whole} of {n}", whole == n))
    probes = [p for p in done.get("probes", [])]
    ok = bool(probes) and all(p["status"] == 200 for p in probes)
    worst = max((p["ms"] for p in probes), default=float("inf"))
    pi, ps = f["probe_idle"], f["probe_streaming"]
    fmt = lambda p: (f"median {p['median']:.1f}, max {p['max']:.1f} ms ({p['n']})" if p["n"] else "none")
    bad = sum(p["not_200"] for p in (pi, ps))
    pu = f.get("probe_upstream", {"n": 0})
    rows.append((n, f"a fresh caller answered within {TARGET_FRESH_MS:g} ms",
                 f"idle: {fmt(pi)}; streaming: {fmt(ps)}" + (f"; {bad} not 200" if bad else "") +
                 (f" (the upstream itself meanwhile: {fmt(pu)})" if pu["n"] else ""),
                 ok and ps["n"] > 0 and worst <= TARGET_FRESH_MS))
    # Memory per connection means something only while all N are open: a
    # proxy that closed idle connections (or never got them) saves what it
    # does not hold, and misses here for that.
    open_idle = st.get("connect", {}).get("connected", 0) - done.get("closed_while_idle", 0)
    open_streaming = done.get("sent", 0)
    for phase, held in (("idle", open_idle), ("streaming", open_streaming)):
        kb = f.get(f"{phase}_kb")
        measured = "-" if kb is None else f"{kb:.1f} KB"
        if held < n:
            measured += f" (only {held} of {n} connections open)"
        rows.append((n, f"RSS per connection, {phase}, <= {TARGET_STREAM_KB:g} KB", measured,
                     kb is not None and kb <= TARGET_STREAM_KB and held >= n))
    rows.append((n, f"threads <= cores + {TARGET_EXTRA_THREADS} = {f['threads_limit']}",
                 f"{f['threads_max']} (most seen idle and streaming)", f["threads_max"] <= f["threads_limit"]))
    return rows


def memory_verdicts(m):
    rows = [(m["callers"], "callers held in one cooldown: all of them",
             f"{m['held_count']} of {m['callers']}", m["held_count"] >= m["callers"]),
            (m["callers"], f"RSS per held caller <= {TARGET_HELD_KB:g} KB",
             f"{m['rss_growth_kb'] / 1024:.1f} MB / {m['held_count']} = {m['rss_per_caller_kb']:.1f} KB",
             m["held_count"] > 0 and m["rss_per_caller_kb"] <= TARGET_HELD_KB)]
    return rows


# ------------------------------------------------------------ report ----

def markdown(meta, latency, rows, memory, streams):
    """This run's section of the results file: a level-2 heading, its tables below."""
    title = f"## {meta['label']}: {meta['when']}" if meta.get("label") else f"## Run of {meta['when']}"
    out = [f"{title}\n",
           f"Measured on {meta['cpus']} CPUs (shared by the load generators and every server), "
           f"load average before/after {meta['load_before']} / {meta['load_after']}; abide {meta['abide_build']}, "
           f"{meta['nginx']}, 1 nginx worker each (upstream and proxy). Targets: issue 29's.\n",
           f"Command: `{meta['command']}`\n"]
    if latency:
        out.append(
           f"Latency: each figure is the median of {meta['repeats']} runs of {meta['duration']:g} s "
           f"(after {meta['warmup']:g} s warm-up) per target, the targets' runs interleaved; the upstream is nginx "
           f"answering 200 \"ok\\n\"; \"added\" = through the proxy - direct to the upstream. CPU is per request, in "
           f"µs, from /proc/PID/stat (utime+stime; 10 ms ticks) over the run.\n")
    if meta.get("abide_command"):
        out.append(f"abide: `abide {meta['abide_command']}`.\n")
    for conns, s in latency.items():
        out.append(f"\n### {conns} concurrent caller{'' if conns == '1' else 's'}\n")
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
    if memory:
        m = memory
        out.append("\n### Callers held in one cooldown\n")
        out.append(f"`abide mock-server --style retry-after-seconds --limit 1 --window {m['cooldown_s']:g}` upstream, "
                   f"a cooldown started (prime: {m['prime']}), then {m['callers']} connections each with a GET and "
                   f"`Abide-Max-Wait: {m['caller_max_wait_s']:g}`. Proxy: `{' '.join(m['command'][1:])}`. "
                   f"Per caller: the RSS grown since before the callers connected, over the callers held.\n")
        out.append("| callers connected | held (stats) | RSS before | RSS held | VmHWM | threads before / held | "
                   "RSS per 1000 held | per held caller | after SIGTERM | exit | stop took |")
        out.append("|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|")
        st = ", ".join(f"{k}: {v}" for k, v in m["statuses"].items()) or "none"
        if m["unanswered"]:
            st += f", unanswered: {m['unanswered']}"
        out.append(f"| {m['connected']} | {m['held_reported']} | {m['rss_before_kb'] / 1024:.1f} MB | "
                   f"{m['rss_held_kb'] / 1024:.1f} MB | {m['hwm_kb'] / 1024:.1f} MB | {m['threads_before']} / "
                   f"{m['threads_held']} | {m['rss_per_1000_mb']:.1f} MB | {m['rss_per_caller_kb']:.1f} KB | {st} | "
                   f"{m['exit_code']} | {m['stop_s']:.2f} s |")
    if streams:
        out += streams_markdown(streams)
    if rows:
        out.append("\n### Targets\n")
        out.append("| callers | target | measured | verdict |")
        out.append("|---:|---|---|---|")
        for conns, what, measured, ok in rows:
            verdict = "(reference)" if ok is None else "pass" if ok else "MISS"
            out.append(f"| {conns} | {what} | {measured} | {verdict} |")
    return "\n".join(out) + "\n"


def streams_markdown(st):
    out = [f"\n### {st['streams']} connections idle, then each reading a trickled stream\n"]
    if st.get("skipped"):
        return out + [f"Skipped: {st['skipped']}."]
    f = st["figures"]
    done, up = st.get("done", {}), st.get("upstream") or {}
    mb = lambda s, key="VmRSS": f"{s[key] / 1024:.1f} MB" if s else "-"
    out.append(f"Upstream: bench/proxy/stream_upstream.js, HTTP/2 over TLS (its own certificate, given with "
               f"`--cacert`): GET /stream answers {st['events']} events {st['interval_ms']} ms apart "
               f"(text/event-stream, the first after a random part of the interval). Proxy: "
               f"`{' '.join(st['command'][1:])}`. Callers: bench/proxy_streams, {st['streams']} connections opened and "
               f"left idle for {st['idle_s']:g} s, then all sending GET /stream at once; a fresh caller times GET "
               f"/fresh on a new connection every 0.5 s, and the bench asks the upstream for /fresh itself every 0.5 s over one "
               f"kept TLS connection (\"the upstream itself\"). \"Answer head\": from a caller's request to its answer's head (the proxy "
               f"passes it on with the first body bytes, the first event). Per connection: (RSS - RSS before the callers) / "
               f"{st['streams']}; \"streaming\" is the highest of the RSS samples taken every 0.25 s while they "
               f"stream.\n")
    conn = st.get("connect", {})
    statuses = ", ".join(f"{k}: {v}" for k, v in done.get("statuses", {}).items()) or "none"
    failures = ", ".join(f"{k}: {v}" for k, v in done.get("failures", {}).items()) or "none"
    out.append("| connected | closed while idle | requests sent | statuses | whole | failures | unfinished | "
               "streaming took | answer head p50 / p99 / max | event delay p50 / p99 / max | "
               "upstream connections (peak) | streams per connection (peak) |")
    out.append("|---:|---:|---:|---|---:|---|---:|---:|---:|---:|---:|---:|")
    d, h = done.get("event_delay_ms", {}), done.get("head_ms", {})
    spread = lambda x: f"{x.get('p50', 0):.1f} / {x.get('p99', 0):.1f} / {x.get('max', 0):.1f} ms"
    out.append(f"| {conn.get('connected', '-')} | {done.get('closed_while_idle', '-')} | {done.get('sent', '-')} | "
               f"{statuses} | {done.get('whole', 0)} | {failures} | {done.get('unfinished', '-')} | "
               f"{done.get('stream_s', 0):.1f} s | {spread(h)} | {spread(d)} | {up.get('sessions_peak', '-')} | "
               f"{up.get('streams_per_session_peak', '-')} |")
    if st.get("cpu"):
        c = st["cpu"]
        out.append(f"\nCPU while they streamed ({c['wall_s']:.1f} s): the proxy {c['proxy_s']:.1f} s (its busiest "
                   f"second {c['proxy_busiest_cores']:.2f} cores), the upstream {c['upstream_s']:.1f} s.")
    out.append("")
    out.append("| RSS before | idle | streaming (peak) | VmHWM at the end | per connection idle / streaming | "
               "threads before / idle / streaming (most) | fresh caller idle: median / max | streaming: median / max | "
               "the upstream itself meanwhile: median / max |")
    out.append("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    pi, ps = f["probe_idle"], f["probe_streaming"]
    pr = lambda p: f"{p['median']:.1f} / {p['max']:.1f} ms ({p['n']})" if p["n"] else "-"
    kb = lambda k: f"{f[k]:.1f} KB" if k in f else "-"
    before = st.get("before")
    last = st.get("after") or st.get("streaming")
    out.append(f"| {mb(before)} | {mb(st.get('idle'))} | {mb(st.get('streaming'))} | {mb(last, 'VmHWM')} | "
               f"{kb('idle_kb')} / {kb('streaming_kb')} | {before['Threads'] if before else '-'} / "
               f"{st.get('idle_threads_max', '-')} / {st.get('streaming_threads_max', '-')} | {pr(pi)} | {pr(ps)} | "
               f"{pr(f.get('probe_upstream', {'n': 0}))} |")
    if st.get("proxy_died") is not None:
        out.append(f"\nThe proxy exited during the streams ({st['proxy_died']}).")
    return out


def write_markdown(path, text):
    """Adds this run's section below what the file holds: earlier runs stay as they are."""
    old = ""
    if os.path.exists(path):
        with open(path) as f:
            old = f.read()
    with open(path, "w") as f:
        if old.strip():
            f.write(old.rstrip("\n") + "\n\n" + text)
        else:
            f.write("# abide proxy beside nginx\n\n" + text)


def shell_line(words):
    """The command line as one would type it: shlex's quoting, but a word with
    an apostrophe (a --label) in double quotes rather than '"'"'."""
    out = []
    for w in words:
        if "'" in w and not any(c in w for c in '"$`\\!'):
            out.append(f'"{w}"')
        else:
            out.append(shlex.quote(w))
    return " ".join(out)


def git_commit():
    r = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return r.stdout.strip() or "unknown"


def main():
    global ABIDE_ENV
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--abide", default=os.path.join(BUILD, "tools", "abide", "abide"))
    ap.add_argument("--load", default=os.path.join(BUILD, "bench", "proxy_load"))
    ap.add_argument("--streams-load", default=os.path.join(BUILD, "bench", "proxy_streams"))
    ap.add_argument("--nginx", default="/usr/sbin/nginx")
    ap.add_argument("--no-build", action="store_true", help="use the binaries as they are")
    ap.add_argument("--abide-commit", help="what --abide was built from, for the report (default: this tree's HEAD)")
    ap.add_argument("--label", help="the heading of this run's section in --markdown (default: its time)")
    ap.add_argument("--build-jobs", type=int, default=2)
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 16, 64, 256],
                    help="callers per run; the targets are judged at 16, 64 and 256 (1: an unloaded keep-alive client)")
    ap.add_argument("--duration", type=float, default=5.0, help="measured seconds per run")
    ap.add_argument("--warmup", type=float, default=1.0)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--abide-args", nargs=argparse.REMAINDER, default=[],
                    help="more options for the latency phase's abide proxy (last on the line)")
    ap.add_argument("--no-abide", action="store_true", help="nginx and the direct runs only")
    ap.add_argument("--no-latency", action="store_true")
    ap.add_argument("--no-memory", action="store_true", help="leave out the callers held in a cooldown")
    ap.add_argument("--callers", type=int, default=10000, help="callers held in the cooldown")
    ap.add_argument("--cooldown", type=float, default=45.0, help="the mock server's window: the cooldown's length")
    ap.add_argument("--caller-wait", type=float, default=60.0, help="each held caller's Abide-Max-Wait")
    ap.add_argument("--memory-jobs", type=int, default=64)
    ap.add_argument("--memory-proxy-args", nargs="*", default=[])
    ap.add_argument("--settle", type=float, default=15.0, help="longest wait for the callers to be held")
    ap.add_argument("--term-timeout", type=float, default=20.0)
    ap.add_argument("--streams", type=int, default=10000, help="connections of the streams scenario")
    ap.add_argument("--no-streams", action="store_true", help="leave out the streams scenario")
    ap.add_argument("--events", type=int, default=5, help="events per stream")
    ap.add_argument("--interval-ms", type=int, default=1000, help="between a stream's events")
    ap.add_argument("--idle", type=float, default=4.0, help="seconds the stream callers stay idle first")
    ap.add_argument("--stream-timeout", type=float, default=30.0,
                    help="seconds the streams may run past their last event before they count as unfinished")
    ap.add_argument("--streams-jobs", type=int, help="the streams proxy's --jobs (default: --streams + 16)")
    ap.add_argument("--streams-proxy-args", nargs="*", default=[])
    ap.add_argument("--streams-upstream-connections", type=int, default=128,
                    help="the streams proxy's --max-upstream-connections (0: not given)")
    ap.add_argument("--streams-upstream-buffer", type=int, default=1024,
                    help="the streams proxy's --upstream-buffer-size (0: not given)")
    ap.add_argument("--markdown", help="add this run's tables to this file (below what it holds)")
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
    soft, hard = raise_fd_limit(max(args.callers, args.streams) * 2 + 1024)
    state_dir = tempfile.mkdtemp(prefix="abide-proxy-bench-state-")
    ABIDE_ENV = abide_env(state_dir)
    meta = {"when": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "cpus": os.cpu_count(), "load_before": load_average(), "abide_build": abide_build,
            "nginx": subprocess.run([args.nginx, "-v"], capture_output=True, text=True).stderr.strip(),
            "command": shell_line(["bench/proxy/run.py", *sys.argv[1:]]), "repeats": args.repeats,
            "duration": args.duration, "warmup": args.warmup, "label": args.label, "nofile": [soft, hard]}
    log(f"proxy bench: run folder {run_dir}, load average {meta['load_before']}, descriptor limit {soft} "
        f"(hard {hard})")

    latency, rows, memory, streams = {}, [], None, None
    upstream = nginx = abide = None
    nginx_dir = tempfile.mkdtemp(prefix="abide-proxy-bench-")
    try:
        if not args.no_latency:
            upstream_port, nginx_port = free_port(), free_port()
            upstream = start_nginx(args, nginx_dir, "upstream.conf.in", "upstream.conf", "upstream-tmp",
                                   PORT=upstream_port)
            nginx = start_nginx(args, nginx_dir, "nginx_proxy.conf.in", "nginx-proxy.conf", "proxy-tmp",
                                PORT=nginx_port, UPSTREAM_PORT=upstream_port,
                                KEEPALIVE=max(64, max(args.concurrency)))
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
        stop(nginx, signal.SIGQUIT)
        stop(upstream, signal.SIGQUIT)
        nginx = upstream = None
        if not args.no_memory and not args.no_abide:
            memory = memory_phase(args, run_dir)
            rows += memory_verdicts(memory)
        if not args.no_streams and not args.no_abide:
            streams = streams_phase(args, run_dir)
            streams["idle_s"] = args.idle
            if not streams.get("skipped"):
                streams["figures"] = stream_figures(streams, os.cpu_count())
                rows += stream_verdicts(streams, streams["figures"])
    finally:
        stop(abide)
        stop(nginx, signal.SIGQUIT)
        stop(upstream, signal.SIGQUIT)
        # The configs and error logs stay with the run; the temp dirs go.
        for name in os.listdir(nginx_dir):
            if name.endswith((".conf", ".log")):
                shutil.copy(os.path.join(nginx_dir, name), run_dir)
        shutil.rmtree(nginx_dir, ignore_errors=True)
        shutil.rmtree(state_dir, ignore_errors=True)
    meta["load_after"] = load_average()

    text = markdown(meta, latency, rows, memory, streams)
    print(text)
    if args.markdown:
        write_markdown(args.markdown, text)
    everything = {"meta": meta, "latency": latency, "targets": rows, "memory": memory, "streams": streams}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(everything, f, indent=1, default=str)
    with open(os.path.join(run_dir, "result.json"), "w") as f:
        json.dump(everything, f, indent=1, default=str)
    return 1 if any(ok is False for *_, ok in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
