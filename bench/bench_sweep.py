"""Whole-process timings of `kvplan map` and `kvplan sweep`, and of the vectorized core through its API.

Run from the repository root (kvplan installed, e.g. `pip install -e .`):

    python bench/bench_sweep.py            # everything (the 10^7-point sweep takes a while)
    python bench/bench_sweep.py --quick    # skip the 10^7-point sweeps

Each measurement is a fresh process, timed from spawn to exit; peak memory is that
process's own maximum resident set (os.wait4's rusage), so runs do not blur together.
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
    thr = b / t["step"]
    best = min(best, time.perf_counter() - t2)
assert kv.shape == reg.shape == thr.shape == (1000, 1000)
print(f"{t1 - t0:.4f} {best:.4f}")
"""


def run_once(cmd: list[str]) -> tuple[float, int, str]:
    """(wall seconds, peak RSS in MB, stdout) of one fresh process."""
    with tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err)
        out = proc.stdout.read()  # type: ignore[union-attr]
        _, status, usage = os.wait4(proc.pid, 0)  # this child's own rusage, unlike RUSAGE_CHILDREN
        wall = time.perf_counter() - t0
        proc.returncode = code = os.waitstatus_to_exitcode(status)
        if code != 0:
            err.seek(0)
            raise SystemExit(f"failed ({code}): {shlex.join(cmd)}\n{err.read().decode()}")
    return wall, usage.ru_maxrss // 1024, out.decode()


def measure(label: str, cmd: list[str], repeat: int, target: str = "") -> dict[str, object]:
    runs = [run_once(cmd) for _ in range(repeat)]
    walls = [r[0] for r in runs]
    return {"label": label, "cmd": shlex.join(cmd), "n": repeat, "median": statistics.median(walls),
            "min": min(walls), "rss": max(r[1] for r in runs), "target": target, "out": runs[-1][2]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="skip the 10^7-point sweeps")
    ap.add_argument("--repeat", type=int, default=10, help="runs of the short commands (default 10)")
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
    if not args.quick:
        rows.append(measure("sweep 10^7 points, CSV", [*big, "-o", os.devnull], 1, "< 5 s, peak RSS < 500 MB"))
    with tempfile.TemporaryDirectory() as tmp:  # a real file: Parquet's footer is written at the end
        out = os.path.join(tmp, "sweep.parquet")
        if importlib.util.find_spec("pyarrow") is None:
            notes.append("Parquet rows skipped: pyarrow is not installed (pip install pyarrow)")
        else:
            rows.append(measure("sweep 10^6 points, Parquet", [*sweep, "--format", "parquet", "-o", out], 3))
            notes.append(f"Parquet file of 10^6 points: {os.path.getsize(out) / 1e6:.0f} MB")
            if not args.quick:
                rows.append(measure("sweep 10^7 points, Parquet", [*big, "--format", "parquet", "-o", out], 1,
                                    "< 5 s, peak RSS < 500 MB"))
                notes.append(f"Parquet file of 10^7 points: {os.path.getsize(out) / 1e6:.0f} MB")
    api = measure("API 1000×1000 grid (process)", [sys.executable, "-c", API_SNIPPET], 3)
    imp, best = (float(x) for x in api["out"].split())
    rows.append(api)

    print(f"{'measurement':<38} {'runs':>4} {'median s':>9} {'min s':>7} {'peak MB':>8}  target")
    for r in rows:
        print(f"{r['label']:<38} {r['n']:>4} {r['median']:>9.3f} {r['min']:>7.3f} {r['rss']:>8}  {r['target']}")
    print(f"{'API 10^6-point evaluation (in process)':<38} {5:>4} {'':>9} {best:>7.3f} {'':>8}  < 0.5 s"
          f"   (imports {imp:.3f} s)")
    for note in notes:
        print(note)
    print()
    print(f"cores: {os.cpu_count()}  python: {sys.version.split()[0]}")
    print("commands:")
    for r in rows:
        cmd = str(r["cmd"])
        if str(r["label"]).startswith("API"):
            cmd = cmd[:80] + " ... (API_SNIPPET in this file)"
        print(f"  {r['label']}: {cmd}")


if __name__ == "__main__":
    main()
