"""bench/bench_closed_loop.py's inputs (tests/data/measured/closed_loop.csv): every row parses, was measured
before the holdout date, names its source, and maps to a spec that checks and plans with closed-loop figures.
How close the figures come is the bench's to print, not a test's to hold."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import pytest

from tests.paths import DATA, load_tool

SET = DATA / "measured" / "closed_loop.csv"


bench = load_tool("bench_closed_loop", "bench")
ROWS = bench.read(SET)


def test_the_set_is_the_stated_selection_before_the_holdout() -> None:
    assert len(ROWS) >= 100
    with SET.open(newline="", encoding="utf-8") as f:
        raw = list(csv.DictReader(f))
    repo, commit, path = bench.UPSTREAM
    for r in raw:
        assert r["measured"] < bench.HOLDOUT and r["source"] == f"{repo}@{commit}:{path}"
        assert r["engine"] == "vllm" and r["model"] in bench.MODELS.values() and r["device"] in bench.SYSTEMS.values()
    assert {(r.device, r.model) for r in ROWS} >= {("h100-sxm", "llama-3-70b"), ("h200", "llama-3-70b"),
                                                    ("h100-sxm", "qwen3-32b")}


def test_every_row_maps_to_a_plannable_spec() -> None:
    for row in ROWS:
        got = bench.predict(row, f"closed_loop.csv:{row.line}")
        assert math.isfinite(got.ttft) and got.ttft > 0 and math.isfinite(got.tpot) and got.tpot > 0, row.id


def test_a_malformed_row_names_its_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    lines = SET.read_text(encoding="utf-8").splitlines()
    head, first = lines[0], lines[1].split(",")
    first[bench.COLUMNS.index("concurrency")] = "many"
    bad.write_text(head + "\n" + ",".join(first) + "\n", encoding="utf-8")
    with pytest.raises(bench.DataError, match=r"bad\.csv:2: .*whole number"):
        bench.read(bad)
    assert bench.main([str(bad)]) == 2
