#!/usr/bin/python3
"""One performance report: builds every bench/*_bench.cpp in Release, runs them,
and prints one table: benchmark, target, measured, verdict.

  bench/report.py [--build-dir build/peers] [--repetitions 3] [--filter REGEX]
                  [--no-build] [--markdown FILE] [--json FILE]

Targets are those of issues 2-6 (on this machine, Release build):
  Retry-After delay-seconds <= 10 ns; each HTTP-date form <= 40 ns;
  SF streaming walk <= 30 / 70 / 50 ns (RateLimit item, two-policy list,
  partition key); observe() <= 300 ns (GitHub head, current-draft head);
  decide() <= 100 ns; memory-store acquire, uncontended <= 50 ns.
Benchmarks without a target (baselines such as curl_getdate, the tree layer,
multi-thread throughput, Redis latency) are listed with "-".

"measured" is the median CPU time per iteration over --repetitions runs. The
load average is printed with the table: figures taken while the machine is
busy (other builds) are noisy; rerun when it is quiet. Exit 1 when a
benchmark misses its target or a target found no benchmark, 0 otherwise.
"""
import argparse
import glob
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# (bench executable, regex on the benchmark name, target in ns, what the issue calls it)
# The regexes are case-insensitive and matched against the full run name.
TARGETS = [
    ("dates_bench", r"(bm_)?retry_?after_?delay_?seconds", 10, "issue 2: Retry-After delay-seconds"),
    ("dates_bench", r"http_date/imf_fixdate", 40, "issue 2: IMF-fixdate"),
    ("dates_bench", r"http_date/rfc850_date", 40, "issue 2: rfc850-date"),
    ("dates_bench", r"http_date/asctime_date", 40, "issue 2: asctime-date"),
    ("structured_fields_bench", r"(bm_)?stream_?rate_?limit", 30, "issue 3: streaming `\"default\";r=50;t=30`"),
    ("structured_fields_bench", r"(bm_)?stream_?policy", 70, "issue 3: streaming two-policy list"),
    ("structured_fields_bench", r"(bm_)?stream_?partition_?key", 50, "issue 3: streaming pk=:...:"),
    ("signals_bench", r".*observe.*git_?hub.*", 300, "issue 4: observe() GitHub head"),
    ("signals_bench", r".*observe.*draft.*", 300, "issue 4: observe() current-draft head"),
    ("planner_bench", r"(bm_)?decide_?429_?retry_?after_?and_?rate_?limit", 100, "issue 5: decide() 429 + RA + RateLimit"),
    ("pacer_bench", r"(bm_)?memory_?acquire_?uncontended|.*acquire.*uncontended.*", 50,
     "issue 6: memory-store acquire, uncontended"),
]
EXPECTED_BENCHES = ["dates_bench", "structured_fields_bench", "signals_bench", "planner_bench", "pacer_bench"]


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def load():
    try:
        return " ".join(open("/proc/loadavg").read().split()[:3])
    except OSError:
        return "?"


def bench_names():
    return sorted(os.path.basename(p)[:-4] for p in glob.glob(os.path.join(HERE, "*_bench.cpp")))


def build(build_dir, names):
    """Configures once, builds each bench on its own (one broken bench must not hide the others)."""
    r = subprocess.run(["cmake", "-S", ROOT, "-B", build_dir, "-DCMAKE_BUILD_TYPE=Release", "-DABIDE_BUILD_BENCH=ON"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("report: cmake configure failed:\n" + r.stdout[-2000:] + r.stderr[-2000:])
    built = {}
    for n in names:
        log(f"report: building {n}")
        r = subprocess.run(["cmake", "--build", build_dir, "-j2", "--target", n], capture_output=True, text=True)
        built[n] = r.returncode == 0
        if not built[n]:
            tail = [l for l in (r.stdout + r.stderr).splitlines() if "error" in l.lower()][:5]
            log(f"report: {n} did not build:\n  " + "\n  ".join(tail))
    return built


def run_bench(exe, repetitions, bench_filter):
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        out = f.name
    cmd = [exe, f"--benchmark_out={out}", "--benchmark_out_format=json", f"--benchmark_repetitions={repetitions}",
           "--benchmark_report_aggregates_only=true"]
    if bench_filter:
        cmd.append(f"--benchmark_filter={bench_filter}")
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    try:
        with open(out) as f:
            data = json.load(f)
    except (OSError, ValueError):
        data = {"benchmarks": []}
    finally:
        os.unlink(out)
    if r.returncode != 0:
        log(f"report: {os.path.basename(exe)} exited {r.returncode}: {r.stderr.strip()[-500:]}")
    rows = {}
    for b in data.get("benchmarks", []):
        if b.get("run_type") == "aggregate" and b.get("aggregate_name") != "median":
            continue
        if b.get("error_occurred"):
            rows[b.get("run_name", b["name"])] = {"error": b.get("error_message", "error")}
            continue
        scale = {"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9}[b.get("time_unit", "ns")]
        name = b.get("run_name", b["name"])
        rows[name] = {"cpu_ns": b["cpu_time"] * scale, "real_ns": b["real_time"] * scale,
                      "counters": {k: v for k, v in b.items() if k not in (
                          "name", "run_name", "run_type", "repetitions", "repetition_index", "threads",
                          "iterations", "real_time", "cpu_time", "time_unit", "aggregate_name",
                          "aggregate_unit", "family_index", "per_family_instance_index")}}
    return rows


def fmt_ns(ns):
    if ns >= 1e6:
        return f"{ns / 1e6:.2f} ms"
    if ns >= 1e4:
        return f"{ns / 1e3:.1f} us"
    return f"{ns:.1f} ns"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build", "peers"))
    ap.add_argument("--repetitions", type=int, default=3)
    ap.add_argument("--filter", default="", help="passed to every bench as --benchmark_filter")
    ap.add_argument("--no-build", action="store_true")
    ap.add_argument("--markdown", help="also write the table as Markdown to this file")
    ap.add_argument("--json", help="also write every figure as JSON to this file")
    args = ap.parse_args()

    names = bench_names()
    load_before = load()
    built = {n: True for n in names} if args.no_build else build(args.build_dir, names)
    load_start = load()
    results = {}
    for n in names:
        exe = os.path.join(args.build_dir, "bench", n)
        if not built.get(n) or not os.path.exists(exe):
            results[n] = None
            continue
        log(f"report: running {n}")
        results[n] = run_bench(exe, args.repetitions, args.filter)
    load_end = load()

    rows = []  # (benchmark, target, measured, verdict, note)
    used = set()
    for bench, rx, target, what in TARGETS:
        res = results.get(bench)
        if res is None:
            why = "not built" if bench in names else "no bench/" + bench + ".cpp yet"
            rows.append((f"{bench}: {what}", f"<= {target} ns", "-", "MISSING", why))
            continue
        hits = [k for k in res if re.fullmatch(rx, k, re.IGNORECASE) and k not in used]
        if not hits:
            rows.append((f"{bench}: {what}", f"<= {target} ns", "-", "MISSING", "no benchmark matched"))
            continue
        k = hits[0]
        used.add(k)
        v = res[k]
        if "error" in v:
            rows.append((f"{bench}/{k}", f"<= {target} ns", "error", "FAIL", v["error"]))
            continue
        ok = v["cpu_ns"] <= target
        rows.append((f"{bench}/{k}", f"<= {target} ns", fmt_ns(v["cpu_ns"]), "pass" if ok else "FAIL", what))
    for n in names:
        res = results.get(n)
        if res is None:
            if not any(b == n for b, *_ in TARGETS):
                rows.append((n, "-", "-", "not built", ""))
            continue
        for k, v in res.items():
            if k in used:
                continue
            if "error" in v:
                rows.append((f"{n}/{k}", "-", "skipped", "-", v["error"]))
                continue
            # Benchmarks that ask for real time (threads, Redis round trips) are shown in real time.
            real = "/real_time" in k
            rows.append((f"{n}/{k}", "-", fmt_ns(v["real_ns"] if real else v["cpu_ns"]) + (" real" if real else ""),
                         "-", ""))

    w = [max(len(r[i]) for r in rows + [("benchmark", "target", "measured", "verdict", "")]) for i in range(4)]
    lines = [f"abide microbenchmarks, Release, median CPU time of {args.repetitions} runs; "
             f"load average {load_start} at start, {load_end} at end (2 cores)"]
    lines.append(f"{'benchmark':<{w[0]}}  {'target':>{w[1]}}  {'measured':>{w[2]}}  {'verdict':<{w[3]}}")
    lines.append("-" * (sum(w) + 6))
    for b, t, m, v, _ in rows:
        lines.append(f"{b:<{w[0]}}  {t:>{w[1]}}  {m:>{w[2]}}  {v:<{w[3]}}")
    missing = [n for n in EXPECTED_BENCHES if n not in names]
    if missing:
        lines.append(f"(not yet in bench/: {', '.join(missing)})")
    print("\n".join(lines))

    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(lines[0] + "\n\n| benchmark | target | measured | verdict |\n|---|---:|---:|---|\n")
            for b, t, m, v, _ in rows:
                f.write(f"| {b} | {t} | {m} | {v} |\n")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"load_start": load_start, "load_end": load_end, "results": results,
                       "table": [dict(zip(("benchmark", "target", "measured", "verdict", "note"), r)) for r in rows]},
                      f, indent=1)
    return 1 if any(r[3] in ("FAIL", "MISSING") for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
