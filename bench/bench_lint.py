"""Whole-process timings of `kvplan lint` on 1 file and on 200 files, and where the time goes.

Run from the repository root (kvplan installed, e.g. `pip install -e .`):

    python bench/bench_lint.py              # 10 runs of each command
    python bench/bench_lint.py --repeat 20

The files are copies of examples/ (with examples/models beside them) in a temporary
directory; each command runs as a fresh process, timed from spawn to exit, and
exits 0 or 1 (findings are expected: the examples carry infos). Targets (issue 3):
1 file < 0.3 s, 200 files < 2 s. A second part times the stages inside one process
(imports, parser construction, checking, planning) to show what start-up costs.

A third part (`--cap` runs only it) lints files at the scenario cap in which no scenario fits, so that
every scenario's suggestion search runs: one deployment of 1,000 scenarios (MAX_SCENARIOS) in three
shapes (a batch × context list; the same under an SLO, which searches twice; a request-rate list,
whose plans settle a batch), and a file of 2 such deployments (MAX_FILE_SCENARIOS, 2,000). It prints the
wall time and the child's CPU time (user + sys, os.wait4) of one run each. Target (issue 19): a file
at the scenario caps (1,000 a deployment, 2,000 a file), all unfit, < 10 s on one core, suggestions
included; the suggestion search of a file is bounded by kvplan.planner.REPLANS_PER_FILE verifying plans.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kvplan.base import limits

ROOT = Path(__file__).resolve().parent.parent
KVPLAN = [shutil.which("kvplan")] if shutil.which("kvplan") else [sys.executable, "-m", "kvplan"]

STAGES = r"""
import sys, time
t0 = time.perf_counter()
import kvplan.cli
t1 = time.perf_counter()
from kvplan.lang import lint
from kvplan.render import diagnostics
t2 = time.perf_counter()
from kvplan.lang.syntax import parser
parser()
t3 = time.perf_counter()
from kvplan.lang import check_file
results = [check_file(p) for p in sys.argv[1:]]
t4 = time.perf_counter()
from kvplan.planner.lint import check
t5 = time.perf_counter()
for r in results:
    check(r)
t6 = time.perf_counter()
print(f"{t1 - t0:.4f} {t2 - t1:.4f} {t3 - t2:.4f} {t4 - t3:.4f} {t5 - t4:.4f} {t6 - t5:.4f}")
"""


def timed(cmd: list[str]) -> tuple[float, str]:
    """Wall seconds and stdout of one fresh process that must exit 0 or 1."""
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode not in (0, 1):
        raise SystemExit(f"exit {proc.returncode}: {shlex.join(cmd)}\n{proc.stderr}")
    return wall, proc.stdout


def cpu_timed(cmd: list[str]) -> tuple[float, float]:
    """Wall seconds and the child's CPU seconds (user + sys) of one process that must exit 0 or 1."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) not in (0, 1):
        raise SystemExit(f"exit {os.waitstatus_to_exitcode(status)}: {shlex.join(cmd)}")
    return wall, usage.ru_utime + usage.ru_stime


def unfit(name: str, shape: str) -> str:
    """A deployment of 1,000 scenarios (40 × 25 list elements) on one H100, none of which fits."""
    firsts = ", ".join(f"{64 + i}" for i in range(40))
    seconds = ", ".join(f"{28 + 4 * i}k" for i in range(25))
    work = {"list": f"batch   = [{firsts}]\n        context = [{seconds}]",
            "slo": f"batch   = [{firsts}]\n        context = [{seconds}]",
            "rate": f"rate   = [{', '.join(f'{100 + i}/s' for i in range(40))}]\n        input  = [{seconds}]\n"
                    "        output = 512"}[shape]
    slo = "\n    slo {\n        step_time <= 1 ms\n    }\n" if shape == "slo" else ""
    return (f'deployment "{name}" {{\n    model   = llama-3-70b\n    device  = h100\n    devices = 1\n\n'
            f"    workload {{\n        {work}\n    }}\n{slo}}}\n")


def at_the_cap(into: Path) -> list[tuple[str, Path]]:
    """The spec files of the third part."""
    into.mkdir()
    files = []
    for shape, label in (("list", "1,000 unfit (batch x context)"), ("slo", "1,000 unfit, with an SLO"),
                         ("rate", "1,000 unfit (request rates)")):
        path = into / f"{shape}.kvp"
        path.write_text("kvplan 1\n\n" + unfit(shape, shape), encoding="utf-8")
        files.append((label, path))
    path = into / "file-cap.kvp"
    deployments = limits.MAX_FILE_SCENARIOS // limits.MAX_SCENARIOS
    path.write_text("kvplan 1\n\n" + "\n".join(unfit(f"d{i}", "list") for i in range(deployments)), encoding="utf-8")
    files.append((f"{limits.MAX_FILE_SCENARIOS:,} unfit (file cap)", path))
    return files


def cap_part(tmp: str) -> None:
    print(f"{'lint, no scenario fits':<36} {'wall s':>7} {'cpu s':>7}  target")
    files = at_the_cap(Path(tmp) / "cap")
    for label, path in files:
        wall, cpu = cpu_timed([*KVPLAN, "lint", str(path)])
        print(f"{label:<36} {wall:>7.2f} {cpu:>7.2f}  < 10 s")
    print(f"command: {shlex.join([*KVPLAN, 'lint', 'TMP/cap/list.kvp'])} (and rate.kvp, slo.kvp, file-cap.kvp)")


def spread(examples: list[Path], models: Path, into: Path, n: int) -> list[Path]:
    """n copies of the examples, round robin, with the models folder they refer to."""
    into.mkdir()
    shutil.copytree(models, into / "models")
    out = []
    for i in range(n):
        src = examples[i % len(examples)]
        dst = into / f"{src.stem}-{i:03d}.kvp"
        shutil.copyfile(src, dst)
        out.append(dst)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=10, help="runs of each command (default 10)")
    ap.add_argument("--cap", action="store_true", help="only the third part: files at the scenario cap")
    args = ap.parse_args()
    if args.cap:
        with tempfile.TemporaryDirectory() as tmp:
            cap_part(tmp)
            print(f"cores: {os.cpu_count()}  python: {sys.version.split()[0]}")
        return
    examples = sorted((ROOT / "examples").glob("*.kvp"))
    if not examples:
        raise SystemExit("no examples/*.kvp to copy")

    with tempfile.TemporaryDirectory() as tmp:
        one = spread(examples[:1], ROOT / "examples" / "models", Path(tmp) / "one", 1)
        many = spread(examples, ROOT / "examples" / "models", Path(tmp) / "many", 200)
        cases = [
            ("lint 1 file", [*KVPLAN, "lint", str(one[0])], "< 0.3 s"),
            ("lint 200 files", [*KVPLAN, "lint", str(Path(tmp) / "many")], "< 2 s"),
            ("kvplan --version (start-up floor)", [*KVPLAN, "--version"], ""),
            ("python -c pass (interpreter floor)", [sys.executable, "-c", "pass"], ""),
        ]
        print(f"{'measurement':<36} {'runs':>4} {'median s':>9} {'min s':>7}  target")
        for label, cmd, target in cases:
            walls = [timed(cmd)[0] for _ in range(args.repeat)]
            print(f"{label:<36} {args.repeat:>4} {statistics.median(walls):>9.3f} {min(walls):>7.3f}  {target}")

        print("\nstages in one process (seconds; min of 3 runs):")
        names = ["import kvplan.cli", "import lint + renderers", "build the LALR parser", "check_file",
                 "import the planner", "plan (planner checks)"]
        for label, files in (("1 file", one), ("200 files", many)):
            runs = [[float(x) for x in timed([sys.executable, "-c", STAGES, *map(str, files)])[1].split()]
                    for _ in range(3)]
            best = [min(r[i] for r in runs) for i in range(len(names))]
            print(f"  {label}: " + ", ".join(f"{n} {b:.3f}" for n, b in zip(names, best)))

        print()
        cap_part(tmp)
        print(f"\ncores: {os.cpu_count()}  python: {sys.version.split()[0]}")
        print("commands (TMP is a temporary directory of copies of examples/):")
        for label, cmd, _ in cases[:2]:
            print(f"  {label}: {shlex.join(cmd).replace(tmp, 'TMP')}")


if __name__ == "__main__":
    main()
