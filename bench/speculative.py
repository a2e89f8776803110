"""Predicted against published speculative-decoding speedups (docs/speculative.md, "Against published speedups").

Run:  python bench/speculative.py [bench/speculative_rows.toml]

Each row of the file (a published figure with its setup) is planned as a spec with a `speculative` block on its
model, device, engine, batch and context, at the catalog's acceptance (kvplan/catalog/speculative.toml); the
script prints kvplan's speculative_speedup beside the published one and their difference. It measures; it fits
nothing. A row kvplan cannot plan is printed with its reason. Exit 0.
"""

from __future__ import annotations

import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kvplan.base.errors import KvplanError  # noqa: E402
from kvplan.lang import check_source  # noqa: E402
from kvplan.planner import plan  # noqa: E402

ROWS = ROOT / "bench" / "speculative_rows.toml"


def spec_of(row: dict[str, object]) -> str:
    """The .kvp of one published row."""
    return (f'kvplan 1\ndeployment "row" {{\n  model = {row["model"]}\n  device = {row["device"]}\n  devices = 1\n'
            f'  engine = {row["engine"]}\n  workload {{\n    batch = {row["batch"]}\n    context = {row["context"]}\n'
            f'  }}\n  speculative {{\n    method = {row["method"]}\n    draft_tokens = {row["draft_tokens"]}\n'
            "  }\n}\n")


def predicted(row: dict[str, object]) -> tuple[str, float]:
    """kvplan's (method and k, speculative_speedup) for the row; raises KvplanError where it cannot plan it."""
    r = check_source(spec_of(row), "row.kvp")
    if not r.ok:
        raise KvplanError("; ".join(d.message for d in r.diagnostics if d.severity.value == "error"))
    s = plan(r.scenarios[0]).speculative
    if s is None:
        raise KvplanError("no method could be costed")
    return f"{s.method} k={int(s.draft_tokens.value)}{'' if s.adopted else ' (rejected)'}", s.speedup.value


def main(argv: list[str]) -> int:
    path = Path(argv[0]) if argv else ROWS
    rows = tomllib.loads(path.read_text(encoding="utf-8"))
    print(f"{'row':38} {'published':>9} {'kvplan':>7} {'diff':>6}  kvplan's choice; source")
    for rid, row in rows.items():
        try:
            choice, got = predicted(row)
        except KvplanError as exc:
            print(f"{rid:38} {row['published']:>8.2f}x {'-':>7} {'-':>6}  cannot plan: {exc}")
            continue
        pub = float(row["published"])
        print(f"{rid:38} {pub:>8.2f}x {got:>6.2f}x {got - pub:>+6.2f}  {choice}; {row['source']}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
