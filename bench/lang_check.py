"""Time the .kvp front end: grammar build (once per process) and check_source per example.

    python bench/lang_check.py
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    t0 = time.perf_counter()
    from kvplan.lang import check_source, syntax

    imported = time.perf_counter()
    syntax.parser()
    built = time.perf_counter()
    print(f"import kvplan.lang {1e3 * (imported - t0):7.1f} ms")
    print(f"build parser       {1e3 * (built - imported):7.1f} ms (once per process)")
    for path in sorted((ROOT / "examples").glob("*.kvp")):
        text = path.read_text(encoding="utf-8")
        rel = path.relative_to(ROOT).as_posix()
        check_source(text, rel)  # warm the catalog and config caches
        runs = []
        for _ in range(50):
            t = time.perf_counter()
            check_source(text, rel)
            runs.append(time.perf_counter() - t)
        print(f"check {path.name:32s} {1e3 * statistics.median(runs):6.2f} ms (median of 50)")


if __name__ == "__main__":
    main()
