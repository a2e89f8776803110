"""bench/speculative.py: each published row becomes a spec kvplan plans, and the script prints the prediction
beside the published speedup (docs/speculative.md, "Against published speedups")."""

from __future__ import annotations

import sys

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

import pytest

from kvplan.lang import check_source
from kvplan.planner import plan
from tests.paths import ROOT, load_tool

bench = load_tool("speculative", "bench")
ROWS = tomllib.loads((ROOT / "bench" / "speculative_rows.toml").read_text(encoding="utf-8"))


@pytest.mark.parametrize("rid", sorted(ROWS))
def test_each_row_is_planned_as_its_setup_says(rid: str) -> None:
    row = ROWS[rid]
    (sc,) = check_source(bench.spec_of(row), "row.kvp").scenarios
    assert (sc.model.id, sc.device.id, sc.engine, sc.batch) == ("llama-3-8b", "h100-sxm", row["engine"], row["batch"])
    choice, got = bench.predicted(row)
    s = plan(sc).speculative
    assert s is not None and got == s.speedup.value and choice.startswith(s.method)


def test_the_script_prints_every_row_beside_its_published_figure(capsys: pytest.CaptureFixture[str]) -> None:
    assert bench.main([]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 1 + len(ROWS)
    for line, (rid, row) in zip(out[1:], ROWS.items()):
        assert line.startswith(rid) and f"{row['published']:.2f}x" in line
