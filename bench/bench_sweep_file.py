"""`kvplan sweep -o FILE` to a file on disk, this checkout against another (e.g. main), interleaved.

Run from the repository root (kvplan's dependencies installed):

    python bench/bench_sweep_file.py --baseline ../main            # 3 rounds, CSV and Parquet
    python bench/bench_sweep_file.py --baseline ../main --rounds 1

bench_sweep.py times the sweep to /dev/null; this one writes the 10^7-point sweep to a real file (1.5 GB of CSV,
0.4 GB of Parquet) in a temporary folder, the path every `-o FILE` takes through kvplan.base.outputs (a new
temporary file beside FILE, renamed onto it at the end). Each round runs the baseline then this checkout, so a
change in the machine's load falls on both alike; CPU s (user + system) is steadier than wall time on a shared
machine. Each process is timed as bench_sweep.py times its own (`run_once`).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile

from bench_sweep import run_once

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ARGS = ["sweep", "--model", "llama-3-70b", "--device", "b200", "--batch", "1..1000", "--context", "1k..1000k:+1k",
        "--devices", "1..10"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", metavar="CHECKOUT", required=True, help="the other kvplan checkout (e.g. main)")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds per format (default 3)")
    args = ap.parse_args()
    trees = {"baseline": os.path.abspath(args.baseline), "this": HERE}
    rows = []
    with tempfile.TemporaryDirectory(dir=HERE) as tmp:  # on the checkout's disk, not a RAM-backed /tmp
        for fmt in ("csv", "parquet"):
            out = os.path.join(tmp, f"sweep.{fmt}")
            runs: dict[str, list[tuple[float, float, int]]] = {k: [] for k in trees}
            size = 0
            for _ in range(args.rounds):
                for name, tree in trees.items():
                    cmd = ["env", f"PYTHONPATH={tree}", sys.executable, "-P", "-m", "kvplan", *ARGS, "--format", fmt,
                           "-o", out]
                    wall, cpu, rss, _ = run_once(cmd)
                    runs[name].append((wall, cpu, rss))
                    size = os.path.getsize(out)
                    os.unlink(out)
            for name, rs in runs.items():
                rows.append((f"{fmt} {name}", statistics.median(r[0] for r in rs), min(r[0] for r in rs),
                             statistics.median(r[1] for r in rs), max(r[2] for r in rs), size))
    print(f"{'10^7 points to a file':<24} {'median s':>9} {'min s':>7} {'CPU s':>7} {'peak MB':>8} {'file GB':>8}")
    for label, med, low, cpu, rss, size in rows:
        print(f"{label:<24} {med:>9.2f} {low:>7.2f} {cpu:>7.2f} {rss:>8} {size / 1e9:>8.2f}")
    print(f"\nrounds: {args.rounds}  cores: {os.cpu_count()}  load average: {os.getloadavg()[0]:.1f}")
    print("command: kvplan " + " ".join(ARGS) + " --format csv|parquet -o FILE")


if __name__ == "__main__":
    main()
