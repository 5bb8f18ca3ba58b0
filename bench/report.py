#!/usr/bin/python3
"""One performance report: builds every bench/*_bench.cpp in Release, runs them,
and judges each target by its ratio to an anchor measured in the same process.

  bench/report.py [--build-dir build/release] [--repetitions 5] [--filter REGEX]
                  [--no-build] [--markdown FILE] [--json FILE]

Why ratios: this VM's nanoseconds move by 1.5x from one minute to the next, and
an absolute target read on a slow minute is a miss that says nothing about the
code. Every target is therefore measured beside an anchor in the same
executable, interleaved with it (--benchmark_enable_random_interleaving), and
judged by measured / anchor against a target ratio. The anchors:

  curl_getdate   libcurl's date parser on the same string (dates_bench);
  nghttp2        nghttp2's RFC 9218 Priority parser on `u=5, i`, an SF
                 Dictionary walk (structured_fields_bench, when libnghttp2.a
                 is there: libnghttp2-dev);
  calibration    the fixed loop of bench/calibration.h, built into every bench.

Target ratio = the issue's absolute target / the anchor's figure on a quiet
minute (the ANCHORS table below; see bench/README.md for where each quiet
figure comes from). So a target ratio says "the target in ns, on a minute where
the anchor runs as fast as it did when quiet". Ratios hold far better than ns on
a busy minute, not perfectly: at load 3-4 the SF walk's ratio rose by up to 30%
(its ns by 75%), observe()'s by 12%.
The absolute targets are those of issues 2-6 and 14:
  Retry-After delay-seconds <= 10 ns; each HTTP-date form <= 40 ns;
  SF streaming walk <= 30 / 70 / 50 ns (RateLimit item, two-policy list,
  partition key); observe() <= 300 ns (GitHub head, current-draft head);
  decide() <= 100 ns; memory-store acquire, uncontended <= 50 ns;
  the engine's cost per attempt <= 200 ns; and two set with the ratios
  (twice their quiet figures at 2eba0b0): permitted_wait() <= 20 ns,
  ServerClock's floor-and-learn step <= 50 ns.
Benchmarks without a target (the tree layer, multi-thread throughput, Redis
latency) are listed with "-".

"measured" is the median CPU time per iteration over --repetitions runs; the
ratio is the target's median over its anchor's median. Exit 1 when a target
misses its ratio, found no benchmark or no anchor; 0 otherwise.
"""
import argparse
import glob
import json
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# Anchors: name -> (regex on the benchmark name, quiet figure in ns, what it is).
# The quiet figures (Release build, load average 1.5-2 on 2 cores):
#   curl_getdate: bench/results/microbench.md at 2eba0b0 (the quiet run that met
#     every absolute target): 617.1 / 629.1 / 436.8 ns for IMF / rfc850 / asctime.
#   nghttp2: issue 14's figure for `u=5, i`, 20 ns; measured beside
#     curl_getdate this gives 19.7 ns (26.5 ns while curl_getdate read 830).
#   calibration: 234 ns = its ratio to curl_getdate/imf_fixdate measured in one
#     process (median 0.379, 0.374-0.405 over seven runs on 2026-12-01) x 617 ns.
#     Its loop must never change: every calibration ratio below depends on it.
ANCHORS = {
    "curl_getdate/imf": (r"curl_getdate_bench/imf_fixdate", 617, "libcurl curl_getdate, IMF-fixdate"),
    "curl_getdate/rfc850": (r"curl_getdate_bench/rfc850_date", 629, "libcurl curl_getdate, rfc850-date"),
    "curl_getdate/asctime": (r"curl_getdate_bench/asctime_date", 437, "libcurl curl_getdate, asctime-date"),
    "nghttp2": (r"BM_Nghttp2ParsePriority", 20, "nghttp2 Priority parser, `u=5, i`"),
    "calibration": (r"BM_Calibration", 234, "bench/calibration.h loop"),
    # One Redis EVALSHA over loopback TCP, the fleet store's acquire (real time:
    # it is mostly waiting). 48 us on a quiet minute here (issue 26).
    "redis_rtt": (r"BM_RedisRoundTripTcp/real_time", 48000, "one Redis round trip over loopback TCP"),
    # SQLite's own floor for one file-store operation: a changed row read and
    # written back in one BEGIN IMMEDIATE transaction, WAL, synchronous=NORMAL
    # (real time). 20.6 us beside Redis's 55 us on 2026-12-05 (load ~1.5).
    "sqlite_rmw": (r"BM_SqliteReadModifyWrite/real_time", 20600, "one SQLite read-modify-write in WAL mode"),
    # The same three counted windows counting requests only: what a send that
    # states token costs is judged against (the figure sets the ratio: 1.5).
    "requests_only": (r"BM_MemoryAcquireThreeRequestWindows", 1000, "acquire on three request windows"),
}

# (bench executable, regex on the benchmark name, absolute target in ns on a quiet
#  minute, anchor, what the issue calls it). Target ratio = target / the anchor's
# quiet figure. The regexes are case-insensitive, matched against the full name.
TARGETS = [
    ("dates_bench", r"(bm_)?retry_?after_?delay_?seconds", 10, "curl_getdate/imf",
     "issue 2: Retry-After delay-seconds"),
    ("dates_bench", r"http_date/imf_fixdate", 40, "curl_getdate/imf", "issue 2: IMF-fixdate"),
    ("dates_bench", r"http_date/rfc850_date", 40, "curl_getdate/rfc850", "issue 2: rfc850-date"),
    ("dates_bench", r"http_date/asctime_date", 40, "curl_getdate/asctime", "issue 2: asctime-date"),
    ("structured_fields_bench", r"(bm_)?stream_?rate_?limit", 30, "nghttp2",
     "issue 3: streaming `\"default\";r=50;t=30`"),
    ("structured_fields_bench", r"(bm_)?stream_?policy", 70, "nghttp2", "issue 3: streaming two-policy list"),
    ("structured_fields_bench", r"(bm_)?stream_?partition_?key", 50, "nghttp2", "issue 3: streaming pk=:...:"),
    ("signals_bench", r".*observe.*git_?hub.*", 300, "calibration", "issue 4: observe() GitHub head"),
    ("signals_bench", r".*observe.*draft.*", 300, "calibration", "issue 4: observe() current-draft head"),
    ("signals_bench", r"(bm_)?server_?clock.*", 50, "calibration", "ServerClock floor-and-learn step"),
    ("planner_bench", r"(bm_)?decide_?429_?retry_?after_?and_?rate_?limit", 100, "calibration",
     "issue 5: decide() 429 + RA + RateLimit"),
    ("planner_bench", r"(bm_)?permitted_?wait", 20, "calibration", "permitted_wait() on the 429"),
    ("pacer_bench", r"(bm_)?memory_?acquire_?uncontended|.*acquire.*uncontended.*", 50, "calibration",
     "issue 6: memory-store acquire, uncontended"),
    ("pacer_bench", r"bm_memory_?acquire_?three_?windows_?with_?token_?costs", 1500, "requests_only",
     "issue 28: acquire with costs on three quotas (vs requests only)"),
    # The first engine benchmark in source order (BM_EngineDrivenOneAttempt today).
    ("engine_bench", r"(bm_)?engine.*", 200, "calibration", "issue 14: engine cost per attempt"),
    # Issue 26 asks for half a Redis round trip. SQLite's floor makes that out
    # of reach here: an acquire and a record are two transactions, and two of
    # the anchor below already take 0.75 of a round trip. The second row
    # judges what the store adds to them: at most a quarter.
    ("store_bench", r"bm_file_?acquire_?record/real_time", 24000, "redis_rtt",
     "issue 26: file store acquire + record, uncontended (half a Redis round trip)"),
    ("store_bench", r"bm_file_?acquire_?record/real_time", 51500, "sqlite_rmw",
     "file store acquire + record: two SQLite read-modify-writes, plus a quarter"),
]
EXPECTED_BENCHES = ["dates_bench", "structured_fields_bench", "signals_bench", "planner_bench", "pacer_bench",
                    "engine_bench", "store_bench"]


def measured(name, figures):
    """What a benchmark is judged by: real time for those that ask for it
    (threads, processes, round trips), CPU time for the others."""
    return figures["real_ns" if "/real_time" in name or "/manual_time" in name else "cpu_ns"]


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
    cmd = ["cmake", "-S", ROOT, "-B", build_dir, "-DCMAKE_BUILD_TYPE=Release", "-DABIDE_BUILD_BENCH=ON"]
    if not os.path.exists(os.path.join(build_dir, "CMakeCache.txt")):
        cmd += ["-G", "Ninja"]  # as the release preset does
    r = subprocess.run(cmd, capture_output=True, text=True)
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
    # Random interleaving runs the repetitions of all benchmarks in a shuffled
    # order, so a target and its anchor share the same minutes of the machine.
    cmd = [exe, f"--benchmark_out={out}", "--benchmark_out_format=json", f"--benchmark_repetitions={repetitions}",
           "--benchmark_report_aggregates_only=true", "--benchmark_enable_random_interleaving=true"]
    if bench_filter:
        # The anchors always run: a ratio needs both sides. (Google Benchmark's
        # filter is a POSIX extended regex: plain groups only.)
        anchors = "|".join(rx for rx, _, _ in ANCHORS.values())
        cmd.append(f"--benchmark_filter=({bench_filter})|^({anchors})$")
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
    found = []  # (registration order, name, figures): interleaving shuffles the output
    for b in data.get("benchmarks", []):
        if b.get("run_type") == "aggregate" and b.get("aggregate_name") != "median":
            continue
        name = b.get("run_name", b["name"])
        order = (b.get("family_index", 0), b.get("per_family_instance_index", 0))
        if b.get("error_occurred"):
            found.append((order, name, {"error": b.get("error_message", "error")}))
            continue
        scale = {"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9}[b.get("time_unit", "ns")]
        found.append((order, name, {"cpu_ns": b["cpu_time"] * scale, "real_ns": b["real_time"] * scale,
                                    "counters": {k: v for k, v in b.items() if k not in (
                                        "name", "run_name", "run_type", "repetitions", "repetition_index",
                                        "threads", "iterations", "real_time", "cpu_time", "time_unit",
                                        "aggregate_name", "aggregate_unit", "family_index",
                                        "per_family_instance_index", "error_occurred", "error_message")}}))
    rows = {}
    for _, name, figures in sorted(found, key=lambda f: f[0]):
        rows.setdefault(name, figures)
    return rows


def fmt_ns(ns):
    if ns >= 1e6:
        return f"{ns / 1e6:.2f} ms"
    if ns >= 1e4:
        return f"{ns / 1e3:.1f} us"
    return f"{ns:.1f} ns"


def find(res, rx, used=()):
    """The first benchmark (in the order the executable registers them) of one
    executable's results whose name matches rx, or None."""
    for k in res or {}:
        if k not in used and re.fullmatch(rx, k, re.IGNORECASE):
            return k
    return None


def anchor_for(results, bench, anchor):
    """The anchor measured in the same executable; the calibration loop may come
    from another executable of the same run when this one lacks it (a bench built
    outside bench/CMakeLists.txt). Returns (where, ns) or (None, why)."""
    rx = ANCHORS[anchor][0]
    k = find(results.get(bench), rx)
    if k is not None and "error" not in results[bench][k]:
        return f"{bench}/{k}", measured(k, results[bench][k])
    if k is not None:
        return None, f"anchor {anchor}: {results[bench][k]['error']}"
    if anchor == "calibration":
        for other, res in sorted(results.items()):
            k = find(res, rx)
            if k is not None and "error" not in res[k]:
                return f"{other}/{k} (other process)", res[k]["cpu_ns"]
    why = {"nghttp2": "anchor nghttp2 not built (no static libnghttp2: scripts/deps.sh all installs libnghttp2-dev)",
           }.get(anchor, f"anchor {anchor} not measured")
    if anchor.startswith("curl_getdate"):
        why = f"anchor {anchor} not built (bench built without libcurl)"
    return None, why


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build", "release"))
    ap.add_argument("--repetitions", type=int, default=5)
    ap.add_argument("--filter", default="", help="passed to every bench as --benchmark_filter (anchors always run)")
    ap.add_argument("--no-build", action="store_true")
    ap.add_argument("--markdown", help="also write the table as Markdown to this file")
    ap.add_argument("--json", help="also write every figure as JSON to this file")
    args = ap.parse_args()

    names = bench_names()
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

    # rows: benchmark, measured, anchor, anchor ns, ratio, target ratio, verdict, note
    rows = []
    used = {n: set() for n in names}
    judged = {}
    for bench, rx, target, anchor, what in TARGETS:
        quiet = ANCHORS[anchor][1]
        want = f"<= {target / quiet:.3g}"
        res = results.get(bench)
        if res is None:
            why = "not built" if bench in names else f"no benchmark matched (no bench/{bench}.cpp yet)"
            rows.append((f"{bench}: {what}", "-", anchor, "-", "-", want, "MISSING", why))
            continue
        # A benchmark judged twice (against two anchors) is named by the same regex.
        k = judged.get((bench, rx)) or find(res, rx, used[bench])
        judged[(bench, rx)] = k
        if k is None:
            rows.append((f"{bench}: {what}", "-", anchor, "-", "-", want, "MISSING", "no benchmark matched"))
            continue
        used[bench].add(k)
        v = res[k]
        if "error" in v:
            rows.append((f"{bench}/{k}", "error", anchor, "-", "-", want, "FAIL", v["error"]))
            continue
        where, a = anchor_for(results, bench, anchor)
        if where is None:
            rows.append((f"{bench}/{k}", fmt_ns(measured(k, v)), anchor, "-", "-", want, "NO ANCHOR", a))
            continue
        ratio = measured(k, v) / a if a > 0 else float("inf")
        ok = ratio <= target / quiet
        note = f"{what}; {target} ns at the anchor's quiet {quiet} ns"
        shown = anchor
        if "other process" in where:
            note += f"; anchor from {where}"
            shown = f"{anchor} (from {where.split('/', 1)[0]})"
        rows.append((f"{bench}/{k}", fmt_ns(measured(k, v)), shown, fmt_ns(a), f"{ratio:.3g}", want,
                     "pass" if ok else "FAIL", note))
    for n in names:
        res = results.get(n)
        if res is None:
            if not any(b == n for b, *_ in TARGETS):
                rows.append((n, "-", "-", "-", "-", "-", "not built", ""))
            continue
        for k, v in res.items():
            if k in used[n]:
                continue
            if "error" in v:
                rows.append((f"{n}/{k}", "skipped", "-", "-", "-", "-", "-", v["error"]))
                continue
            anchor = next((a for a, (rx, _, _) in ANCHORS.items() if re.fullmatch(rx, k, re.IGNORECASE)), None)
            if anchor is not None:
                # An anchor's own speed against its quiet figure: how slow this minute was.
                quiet = ANCHORS[anchor][1]
                rows.append((f"{n}/{k}", fmt_ns(measured(k, v)), "(anchor)", f"quiet {quiet} ns",
                             f"{measured(k, v) / quiet:.3g}", "-", "-", ANCHORS[anchor][2]))
                continue
            # Benchmarks that ask for real time (threads, Redis round trips) are shown in real time.
            real = "/real_time" in k or "/manual_time" in k
            rows.append((f"{n}/{k}", fmt_ns(v["real_ns"] if real else v["cpu_ns"]) + (" real" if real else ""),
                         "-", "-", "-", "-", "-", ""))

    heads = ("benchmark", "measured", "anchor", "anchor ns", "ratio", "target ratio", "verdict")
    w = [max(len(r[i]) for r in rows + [heads]) for i in range(len(heads))]
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    lines = [f"abide microbenchmarks, Release, median CPU time of {args.repetitions} interleaved runs, {when}; "
             f"load average {load_start} at start, {load_end} at end (2 cores)"]
    lines.append("  ".join(f"{h:<{w[i]}}" if i in (0, 2, 6) else f"{h:>{w[i]}}" for i, h in enumerate(heads)))
    lines.append("-" * (sum(w) + 2 * (len(w) - 1)))
    for r in rows:
        lines.append("  ".join(f"{r[i]:<{w[i]}}" if i in (0, 2, 6) else f"{r[i]:>{w[i]}}" for i in range(len(heads))))
    notes = [f"  {r[0]}: {r[7]}" for r in rows if r[6] in ("MISSING", "NO ANCHOR", "FAIL")]
    if notes:
        lines.append("why:")
        lines += notes
    missing = [n for n in EXPECTED_BENCHES if n not in names]
    if missing:
        lines.append(f"(not yet in bench/: {', '.join(missing)})")
    print("\n".join(lines))

    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(lines[0] + "\n\n")
            f.write("Target ratio = the absolute target / the anchor's quiet figure (bench/report.py, ANCHORS); "
                    "for an anchor row, ratio = this run's figure / its quiet figure.\n\n")
            f.write("| " + " | ".join(heads) + " |\n|---|---:|---|---:|---:|---:|---|\n")
            for r in rows:
                f.write("| " + " | ".join(r[:7]) + " |\n")
            if notes:
                f.write("\n" + "\n".join(f"- {n.strip()}" for n in notes) + "\n")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"load_start": load_start, "load_end": load_end,
                       "anchors": {k: {"regex": v[0], "quiet_ns": v[1], "what": v[2]} for k, v in ANCHORS.items()},
                       "results": results,
                       "table": [dict(zip(heads + ("note",), r)) for r in rows]}, f, indent=1)
    return 1 if any(r[6] in ("FAIL", "MISSING", "NO ANCHOR") for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
