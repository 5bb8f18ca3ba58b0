#!/usr/bin/python3
"""`abide fetch --urls` beside `curl --parallel` on one batch (a benchmark, not a test).

A loopback nginx (bench/proxy/upstream.conf.in: 200 "ok\\n" at once) serves
every request, so what is measured is the client. For each batch size N the
same N URLs (/items/1 ... /items/N) are fetched
  - by `abide fetch --urls FILE -j JOBS -o /dev/null -s`, and
  - by `curl --parallel --parallel-max JOBS -s -K FILE` (one `url` and one
    `output = /dev/null` per request in the config file),
each REPEATS times in alternating order. The CPU time (user + system) of the client
process comes from wait4's rusage, its peak resident memory from /proc
(VmHWM); the medians are kept. The verdict (issue 16): abide's CPU per request at most
1.25x curl's, and its memory flat in N (the peak at the largest N at most
1.5x the peak at the smallest).

Usage: bench/fetch_batch/run.py [--sizes 1000 10000 40000] [--jobs 32] [--repeats 3] [--store file|memory]
       [--markdown bench/results/fetch_batch.md] [--build-dir DIR] [--abide PATH] [--curl PATH]
       [--no-build]

--build-dir (default build/pbench) is configured as a Release build if it has
no build.ninja yet, and abide_cli is built there (unless --no-build); --abide
defaults to its tools/abide/abide.
"""
import argparse
import datetime
import importlib.util
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
BUILD = os.path.join(ROOT, "build", "pbench")
TARGET_CPU_RATIO = 1.25   # abide's CPU per request / curl's, at most
TARGET_FLAT_MEMORY = 1.5  # peak RSS at the largest batch / at the smallest, at most

# The nginx start-up and the templates are the proxy benchmark's.
_spec = importlib.util.spec_from_file_location("proxy_bench", os.path.join(ROOT, "bench", "proxy", "run.py"))
proxy_bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(proxy_bench)


def build(args):
    """Configures the build folder (Release) if it is new, and builds abide_cli there: nothing else is run."""
    if not os.path.exists(os.path.join(args.build_dir, "build.ninja")):
        subprocess.run(["cmake", "-S", ROOT, "-B", args.build_dir, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release"],
                       check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["cmake", "--build", args.build_dir, "-j", str(args.build_jobs), "--target", "abide_cli"],
                   check=True)


def vm_hwm_mb(pid):
    """The process's peak resident memory so far (VmHWM), in MB, or None."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return None


# The most transfers curl's tool runs at once (it clamps --parallel-max).
CURL_PARALLEL_MAX = 300


def measure(cmd):
    """Runs cmd; returns (exit status, CPU seconds, peak RSS in MB, wall seconds).

    The peak is read from /proc (VmHWM, a high-water mark) while it runs:
    wait4's ru_maxrss would count the memory of this Python process, which
    the child had before it exec'd."""
    start = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    peak = 0.0
    while True:
        hwm = vm_hwm_mb(proc.pid)
        if hwm is None:
            break
        peak = max(peak, hwm)
        time.sleep(0.005)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.monotonic() - start
    err = proc.stderr.read().decode(errors="replace")
    proc.stderr.close()
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        proxy_bench.log(f"fetch batch bench: {cmd[0]} exited {code}: {err[-500:]}")
    return code, usage.ru_utime + usage.ru_stime, peak, wall


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 40000])
    ap.add_argument("--jobs", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--markdown")
    ap.add_argument("--build-dir", default=BUILD, help="the build folder (a Release build)")
    ap.add_argument("--abide", help="the abide binary (default: BUILD_DIR/tools/abide/abide)")
    ap.add_argument("--curl", default=shutil.which("curl") or "curl")
    ap.add_argument("--nginx", default=shutil.which("nginx") or "/usr/sbin/nginx")
    ap.add_argument("--store", default="file",
                    help="abide's --store: file (the default, in a temporary state folder) or memory")
    ap.add_argument("--no-build", action="store_true")
    ap.add_argument("--build-jobs", type=int, default=2)
    args = ap.parse_args()
    args.build_dir = os.path.abspath(args.build_dir)
    if args.abide is None:
        args.abide = os.path.join(args.build_dir, "tools", "abide", "abide")
    if not args.no_build:
        build(args)

    rows = []
    spreads = {}
    with tempfile.TemporaryDirectory(prefix="abide-fetch-batch-") as tmp:
        # The file store lives in a state folder of the run's own, never the user's.
        os.environ["XDG_STATE_HOME"] = os.path.join(tmp, "state")
        # Its own temp dir: nginx may run as nobody, who cannot enter `tmp`.
        nginx_dir = tempfile.mkdtemp(prefix="abide-fetch-batch-nginx-")
        port = proxy_bench.free_port()
        nginx = proxy_bench.start_nginx(args, nginx_dir, "upstream.conf.in", "upstream.conf", "upstream-tmp", PORT=port)
        try:
            for n in args.sizes:
                urls = os.path.join(tmp, f"urls-{n}.txt")
                config = os.path.join(tmp, f"curl-{n}.cfg")
                with open(urls, "w") as u, open(config, "w") as c:
                    for i in range(1, n + 1):
                        url = f"http://127.0.0.1:{port}/items/{i}"
                        u.write(url + "\n")
                        c.write(f'url = "{url}"\noutput = "/dev/null"\n')
                abide_cmd = [args.abide, "fetch", "--urls", urls, "-j", str(args.jobs), "-o", "/dev/null", "-s",
                             "--store", args.store, "--resume-file", os.path.join(tmp, "resume.json")]
                curl_cmd = [args.curl, "--noproxy", "*", "--parallel", "--parallel-max", str(args.jobs), "-s",
                            "-K", config]
                got = {"abide": [], "curl": []}
                for r in range(args.repeats):
                    order = [("abide", abide_cmd), ("curl", curl_cmd)]
                    if r % 2 == 1:
                        order.reverse()
                    for name, cmd in order:
                        code, cpu, rss, wall = measure(cmd)
                        if code != 0:
                            sys.exit(f"fetch batch bench: {name} failed on {n} URLs")
                        got[name].append((cpu, rss, wall))
                med = {k: tuple(statistics.median(x[i] for x in v) for i in range(3)) for k, v in got.items()}
                # The spread: each repeat's abide CPU over the curl CPU of the same repeat.
                pair = [a[0] / c[0] for a, c in zip(got["abide"], got["curl"]) if c[0] > 0]
                spreads[n] = (min(pair), max(pair)) if pair else (float("inf"), float("inf"))
                rows.append((n, med["abide"], med["curl"]))
                proxy_bench.log(f"{n} URLs: abide {med['abide'][0]:.2f} s CPU, {med['abide'][1]:.1f} MB; "
                    f"curl {med['curl'][0]:.2f} s CPU, {med['curl'][1]:.1f} MB")
        finally:
            proxy_bench.stop(nginx)
            shutil.rmtree(nginx_dir, ignore_errors=True)

    lines = [f"# `abide fetch --urls` beside `curl --parallel`", "",
             f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, {platform.node()}, "
             f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}; {args.jobs} workers, nginx on loopback "
             f"answering 200 at once; medians of {args.repeats}.", "",
             "`bench/fetch_batch/run.py --sizes " + " ".join(map(str, args.sizes)) +
             f" --jobs {args.jobs} --repeats {args.repeats} --store {args.store}`", "",
             "| URLs | abide CPU s | curl CPU s | CPU ratio | ratio per repeat | abide µs/request | abide peak MB |"
             " curl peak MB |"
             " abide wall s | curl wall s |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    ok = True
    for n, a, c in rows:
        ratio = a[0] / c[0] if c[0] > 0 else float("inf")
        ok = ok and ratio <= TARGET_CPU_RATIO
        lo, hi = spreads[n]
        lines.append(f"| {n} | {a[0]:.2f} | {c[0]:.2f} | {ratio:.2f} | {lo:.2f}–{hi:.2f} | {a[0] / n * 1e6:.0f} | {a[1]:.1f} | "
                     f"{c[1]:.1f} | {a[2]:.2f} | {c[2]:.2f} |")
    flat = rows[-1][1][1] / rows[0][1][1] if rows and rows[0][1][1] > 0 else float("inf")
    ok = ok and flat <= TARGET_FLAT_MEMORY
    lines += ["", f"CPU per request at most {TARGET_CPU_RATIO}x curl's at every size: "
              f"{'met' if all(a[0] / c[0] <= TARGET_CPU_RATIO for _, a, c in rows) else 'not met'}. "
              f"Peak memory at {rows[-1][0]} URLs / at {rows[0][0]}: {flat:.2f} "
              f"(at most {TARGET_FLAT_MEMORY}: {'met' if flat <= TARGET_FLAT_MEMORY else 'not met'})."]
    if args.jobs > CURL_PARALLEL_MAX:
        # curl's tool clamps --parallel-max (tool_getparam: at most 300): the
        # two ran different numbers of transfers at a time.
        lines += ["", f"curl runs at most {CURL_PARALLEL_MAX} transfers at a time whatever --parallel-max says: "
                  f"here {CURL_PARALLEL_MAX} for curl against {args.jobs} for abide."]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(text)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
