"""Whole-process timings of `kvplan map` and `kvplan sweep`, and of the vectorized core through its API.

Run from the repository root (kvplan installed, e.g. `pip install -e .`):

    python bench/bench_sweep.py            # everything (the 10^7-point sweep takes a while)
    python bench/bench_sweep.py --quick    # skip the 10^7-point sweeps
    python bench/bench_sweep.py --baseline ../main   # also main's 10^7-point CSV, interleaved with this one

Each measurement is a fresh process, timed from spawn to exit; peak memory is that
process's own maximum resident set (os.wait4's rusage), or, where larger, the sampled sum over
the process and its forked workers (a CSV sweep's --jobs), so runs do not blur together. CPU s is
user + system time, the workers' included: on a shared machine it is steadier than wall time.
Targets (issue 6): map cold start < 0.3 s on 2 cores, 10^6-point API evaluation < 0.5 s,
10^7-point sweep peak memory < 500 MB; (issue 13) 10^7-point sweep < 5 s to CSV and to Parquet
(`--format parquet`, the `parquet` extra; its rows are skipped without pyarrow), < 500 MB.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

KVPLAN = [shutil.which("kvplan")] if shutil.which("kvplan") else [sys.executable, "-m", "kvplan"]

API_SNIPPET = r"""
import time
t0 = time.perf_counter()
import numpy as np
from kvplan import catalog
from kvplan.model import roofline as rf
t1 = time.perf_counter()
cfg = rf.Config(catalog.get_model("llama-3-70b"), catalog.get_device("b200"), n_devices=2)
b = np.arange(1, 1001, dtype=np.float64)[:, None]          # 1000 batch sizes
s = np.linspace(1e3, 1e6, 1000)[None, :]                     # x 1000 contexts = 10^6 points
best = float("inf")
for _ in range(5):
    t2 = time.perf_counter()
    s_star, s_cap = rf.s_star(cfg, b), rf.s_cap(cfg, b)
    kv = rf.kv_bytes_stored(cfg, b, s)
    t = rf.step_time(cfg, b, s)
    reg = rf.regime(s, s_star, s_cap)
    thr = b / t.step
    best = min(best, time.perf_counter() - t2)
assert kv.shape == reg.shape == thr.shape == (1000, 1000)
print(f"{t1 - t0:.4f} {best:.4f}")
"""


def _tree_rss_mb(pid: int) -> float:
    """Resident memory of a process and its children (Linux /proc; 0 where unreadable), in MB. Pages
    the forked workers share with their parent count once per process: an upper bound."""
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/status") as f:
                total += next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
            with open(f"/proc/{p}/task/{p}/children") as f:
                todo += [int(c) for c in f.read().split()]
        except (OSError, StopIteration, ValueError):
            continue
    return total / 1024


def run_once(cmd: list[str]) -> tuple[float, float, int, str]:
    """(wall seconds, CPU seconds, peak MB, stdout) of one fresh process. CPU is user + system time of
    the process and the workers it waited for (os.wait4's rusage); peak memory is the larger of the
    process's own maximum resident set and the sampled sum over it and its workers."""
    with tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err)
        peak = [0.0]
        stop = threading.Event()

        def sample() -> None:
            while not stop.wait(0.02):
                peak[0] = max(peak[0], _tree_rss_mb(proc.pid))

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        out = proc.stdout.read()  # type: ignore[union-attr]
        _, status, usage = os.wait4(proc.pid, 0)  # this child's own rusage, unlike RUSAGE_CHILDREN
        wall = time.perf_counter() - t0
        stop.set()
        sampler.join()
        proc.returncode = code = os.waitstatus_to_exitcode(status)
        if code != 0:
            err.seek(0)
            raise SystemExit(f"failed ({code}): {shlex.join(cmd)}\n{err.read().decode()}")
    cpu = usage.ru_utime + usage.ru_stime
    return wall, cpu, max(usage.ru_maxrss // 1024, int(peak[0])), out.decode()


def measure(label: str, cmd: list[str], repeat: int, target: str = "") -> dict[str, object]:
    runs = [run_once(cmd) for _ in range(repeat)]
    walls = [r[0] for r in runs]
    return {"label": label, "cmd": shlex.join(cmd), "n": repeat, "median": statistics.median(walls),
            "min": min(walls), "cpu": statistics.median(r[1] for r in runs), "rss": max(r[2] for r in runs),
            "target": target, "out": runs[-1][3]}


def interleaved(checkout: str, big: list[str], rounds: int) -> list[dict[str, object]]:
    """Rounds of (the baseline checkout's sweep, this one's with --jobs 1, with --jobs 2), 10^7 points
    to /dev/null each, so a change in the machine's load falls on the three alike. `-P`: the package
    comes from PYTHONPATH, not from the directory the bench runs in."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    args = [*big[big.index("sweep"):], "-o", os.devnull]
    cmds = {"baseline (" + os.path.basename(os.path.abspath(checkout)) + "), 10^7 CSV":
            ["env", f"PYTHONPATH={os.path.abspath(checkout)}", sys.executable, "-P", "-m", "kvplan", *args],
            "interleaved: 10^7 CSV --jobs 1": ["env", f"PYTHONPATH={here}", sys.executable, "-P", "-m", "kvplan",
                                               *args, "--jobs", "1"],
            "interleaved: 10^7 CSV --jobs 2": ["env", f"PYTHONPATH={here}", sys.executable, "-P", "-m", "kvplan",
                                               *args, "--jobs", "2"]}
    runs: dict[str, list[tuple[float, float, int, str]]] = {k: [] for k in cmds}
    for _ in range(rounds):
        for label, cmd in cmds.items():
            runs[label].append(run_once(cmd))
    return [{"label": label, "cmd": shlex.join(cmds[label]), "n": rounds,
             "median": statistics.median(r[0] for r in rs), "min": min(r[0] for r in rs),
             "cpu": statistics.median(r[1] for r in rs), "rss": max(r[2] for r in rs), "target": "", "out": ""}
            for label, rs in runs.items()]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="skip the 10^7-point sweeps")
    ap.add_argument("--repeat", type=int, default=10, help="runs of the short commands (default 10)")
    ap.add_argument("--big-repeat", type=int, default=3, help="runs of each 10^7-point CSV sweep (default 3)")
    ap.add_argument("--baseline", metavar="CHECKOUT",
                    help="also time the 10^7-point CSV sweep of another kvplan checkout (e.g. main), in rounds "
                         "interleaved with this one's --jobs 1 and --jobs 2, so machine load falls on all alike")
    args = ap.parse_args()

    rows, notes = [], []
    rows.append(measure("map cold start", [*KVPLAN, "map", "--model", "llama-3-70b", "--device", "b200"],
                        args.repeat, "< 0.3 s"))
    rows.append(measure("--version (click + kvplan.cli only)", [*KVPLAN, "--version"], args.repeat))
    rows.append(measure("python -c pass (interpreter floor)", [sys.executable, "-c", "pass"], args.repeat))
    sweep = [*KVPLAN, "sweep", "--model", "llama-3-70b", "--device", "b200", "--batch", "1..1000",
             "--context", "1k..1000k:+1k"]
    big = [*sweep, "--devices", "1..10"]
    rows.append(measure("sweep 10^6 points, CSV", [*sweep, "-o", os.devnull], 3))
    rows.append(measure("sweep 10^6 points, CSV --exact", [*sweep, "--exact", "-o", os.devnull], 3))
    if not args.quick:
        rows.append(measure("sweep 10^7 points, CSV", [*big, "-o", os.devnull], args.big_repeat,
                            "< 5 s, peak RSS < 500 MB"))
        rows.append(measure("sweep 10^7 points, CSV --jobs 1", [*big, "--jobs", "1", "-o", os.devnull],
                            args.big_repeat))
        rows.append(measure("sweep 10^7 points, CSV --exact", [*big, "--exact", "-o", os.devnull], 1,
                            "(the shortest-repr text: the baseline)"))
    if args.baseline and not args.quick:
        rows += interleaved(args.baseline, big, args.big_repeat)
    with tempfile.TemporaryDirectory() as tmp:  # a real file: Parquet's footer is written at the end
        out = os.path.join(tmp, "sweep.parquet")
        if importlib.util.find_spec("pyarrow") is None:
            notes.append("Parquet rows skipped: pyarrow is not installed (pip install pyarrow)")
        else:
            rows.append(measure("sweep 10^6 points, Parquet", [*sweep, "--format", "parquet", "-o", out], 3))
            notes.append(f"Parquet file of 10^6 points: {os.path.getsize(out) / 1e6:.0f} MB")
            if not args.quick:
                rows.append(measure("sweep 10^7 points, Parquet", [*big, "--format", "parquet", "-o", out],
                                    args.big_repeat, "< 5 s, peak RSS < 500 MB"))
                notes.append(f"Parquet file of 10^7 points: {os.path.getsize(out) / 1e6:.0f} MB")
    api = measure("API 1000×1000 grid (process)", [sys.executable, "-c", API_SNIPPET], 3)
    imp, best = (float(x) for x in api["out"].split())
    rows.append(api)

    print(f"{'measurement':<38} {'runs':>4} {'median s':>9} {'min s':>7} {'CPU s':>7} {'peak MB':>8}  target")
    for r in rows:
        print(f"{r['label']:<38} {r['n']:>4} {r['median']:>9.3f} {r['min']:>7.3f} {r['cpu']:>7.3f} {r['rss']:>8}"
              f"  {r['target']}")
    print(f"{'API 10^6-point evaluation (in process)':<38} {5:>4} {'':>9} {best:>7.3f} {'':>7} {'':>8}  < 0.5 s"
          f"   (imports {imp:.3f} s)")
    for note in notes:
        print(note)
    print()
    print(f"cores: {os.cpu_count()}  python: {sys.version.split()[0]}  load average: {os.getloadavg()[0]:.1f}"
          " (other work on the machine stretches wall times; CPU s is user + system, workers included)")
    print("commands:")
    for r in rows:
        cmd = str(r["cmd"])
        if str(r["label"]).startswith("API"):
            cmd = cmd[:80] + " ... (API_SNIPPET in this file)"
        print(f"  {r['label']}: {cmd}")


if __name__ == "__main__":
    main()
