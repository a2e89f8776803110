"""Benchmark: planning time (search included) beyond start-up, and `kvplan advise` cold start.

Run:  python bench/bench_plan.py
Prints figures; asserts nothing (targets: planning < 50 ms beyond start-up on the
DeepSeek-V3 example; advise cold start is reported beside `kvplan --version`).
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SPEC = ROOT / "examples" / "deepseek-v3-mi300x.kvp"
REPS = 20


def in_process() -> tuple[float, float, int, int]:
    from kvplan.lang import check_file
    from kvplan.planner import plans_for

    check_file(str(SPEC))  # build the parser once: that is start-up, not planning
    checks, plans = [], []
    for _ in range(REPS):
        t0 = time.perf_counter()
        result = check_file(str(SPEC))
        t1 = time.perf_counter()
        ps = plans_for(result)
        t2 = time.perf_counter()
        checks.append(t1 - t0)
        plans.append(t2 - t1)
    return statistics.median(checks), statistics.median(plans), len(ps), sum(p.candidates_evaluated for p in ps)


def whole_process(args: list[str]) -> tuple[float, float]:
    times = []
    for _ in range(7):
        t0 = time.perf_counter()
        subprocess.run(args, check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        times.append(time.perf_counter() - t0)
    return statistics.median(times), min(times)


def main() -> None:
    check, plan, n, cands = in_process()
    print(f"planning {SPEC.relative_to(ROOT)}: {n} scenarios, {cands} candidates")
    print(f"  check (parse + meaning), median of {REPS}: {check * 1e3:7.2f} ms")
    print(f"  plan (search + decisions), median of {REPS}: {plan * 1e3:7.2f} ms   target < 50 ms")
    exe = [sys.executable, "-m", "kvplan"]
    for label, args in (("kvplan --version", exe + ["--version"]),
                        ("kvplan advise examples/deepseek-v3-mi300x.kvp", exe + ["advise", str(SPEC)]),
                        ("kvplan advise examples/w2-batch32.kvp",
                         exe + ["advise", str(ROOT / "examples" / "w2-batch32.kvp")])):
        med, best = whole_process(args)
        print(f"  {label:<50} median {med * 1e3:6.0f} ms  min {best * 1e3:6.0f} ms (whole process)")


if __name__ == "__main__":
    main()
