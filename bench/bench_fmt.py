"""Peak memory of `kvplan fmt --check` on the largest files a spec may be (issue 19: under 200 MB).

Run from the repository root (kvplan installed, e.g. `pip install -e .`):

    python bench/bench_fmt.py

Each file has the most characters a spec may hold (kvplan.lang.MAX_FILE_CHARS) and is shaped to make
the canonical layout as large as it can: blocks nested as deep as the language allows
(kvplan.base.limits.MAX_NESTING) with one-letter flags at the deepest level, each of which `fmt` indents
by four spaces per level; and blocks nested far past that limit (refused with a located KV003 before
anything is laid out). Each command runs as a fresh process; its peak resident set size is the child's
ru_maxrss from os.wait4, its time the wall time from spawn to exit.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kvplan.base.limits import MAX_NESTING
from kvplan.lang import MAX_FILE_CHARS

KVPLAN = [shutil.which("kvplan")] if shutil.which("kvplan") else [sys.executable, "-m", "kvplan"]
HEAD = 'kvplan 1\ndeployment "x" {\n'


def at_the_cap() -> str:
    """Blocks MAX_NESTING deep, then as many flags at the deepest level as the file's size allows."""
    opens, closes = "a {\n" * (MAX_NESTING - 1), "}\n" * MAX_NESTING
    room = MAX_FILE_CHARS - len(HEAD) - len(opens) - len(closes)
    return HEAD + opens + "f\n" * (room // 2) + closes


def past_the_cap() -> str:
    """As many nested blocks as the file's size allows (each `a {` and `}` costs six characters)."""
    n = (MAX_FILE_CHARS - len(HEAD) - 2) // 6
    return HEAD + "a {\n" * n + "}\n" * n + "}\n"


def peak(cmd: list[str]) -> tuple[float, float, int]:
    """Peak RSS (MB), wall seconds and exit status of one fresh process."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    return usage.ru_maxrss / 1024, wall, os.waitstatus_to_exitcode(status)


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        print(f"{'file':<44} {'chars':>8} {'exit':>4} {'peak MB':>8} {'wall s':>7}")
        for label, text in ((f"{MAX_NESTING} deep, flags at the deepest level", at_the_cap()),
                            ("nested past the cap (refused)", past_the_cap())):
            path = Path(tmp) / "spec.kvp"
            path.write_text(text, encoding="utf-8")
            cmd = [*KVPLAN, "fmt", "--check", str(path)]
            mb, wall, rc = peak(cmd)
            print(f"{label:<44} {len(text):>8,} {rc:>4} {mb:>8.1f} {wall:>7.2f}")
        print(f"\ncommand: {shlex.join(cmd).replace(tmp, 'TMP')}  (target: peak under 200 MB)")
        print(f"cores: {os.cpu_count()}  python: {sys.version.split()[0]}")


if __name__ == "__main__":
    main()
