"""bench/intervals.py on tests/data/residuals/res.csv: the table's quantiles by hand, the cutoff and split, the
held-out coverage, and its refusals (FILE:LINE:COL, exit 2)."""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

import pytest

from kvplan.catalog import _HERE
from kvplan.planner import intervals as iv
from tests.paths import DATA, load_tool

bench = load_tool("intervals", "bench")
RES = str(DATA / "residuals" / "res.csv")

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib


def test_table_quantiles_by_hand_fit_rows_before_the_cutoff(tmp_path: Path) -> None:
    out = tmp_path / "intervals.toml"
    assert bench.main([RES, "--out", str(out)]) == 0
    cells = tomllib.loads(out.read_text())
    assert sorted(cells) == ["any", "sglang", "sglang/b200", "sglang/b200/weight-bound", "vllm", "vllm/h100-sxm",
                             "vllm/h100-sxm/kv-bound"]
    c = cells["vllm/h100-sxm/kv-bound"]
    # the five fit rows before 2026-03-01 (the 2026-03-02 one is past the cutoff): TPOT ratios 0.9 .. 1.3, so the
    # 10th percentile sits at position 0.4 (0.9 + 0.4·0.1) and the 90th at 3.6 (1.2 + 0.6·0.1)
    assert c["n"] == 5 and c["level"] == 0.8
    assert (c["tpot_lo"], c["tpot_hi"]) == pytest.approx((0.94, 1.26))
    assert (c["ttft_lo"], c["ttft_hi"]) == pytest.approx((0.88, 1.52))  # 0.8 + 0.4·0.2, 1.4 + 0.6·0.2
    assert cells["any"]["n"] == 6 and cells["any"]["regime"] == "" and "res.csv sha256" in c["source"]
    assert iv.parse(cells).keys() == cells.keys()  # the planner reads what it writes


def test_empty_table_is_the_shipped_file() -> None:
    assert bench.toml_text({}) == (Path(_HERE) / "intervals.toml").read_text()


def test_coverage_of_holdout_rows(capsys: Any) -> None:
    # vllm: every cell thin (n = 5 and 5; any has 6), so the finest is widened by sqrt(30/5) about 1.1:
    # [1.1 − 0.16·√6, 1.1 + 0.16·√6] = [0.708, 1.492]; held-out TPOT ratios 1.0 (inside) and 1.6 (outside)
    lo, hi = iv.widen(0.94, 1.26, 5)
    assert (lo, hi) == pytest.approx((1.1 - 0.16 * math.sqrt(6), 1.1 + 0.16 * math.sqrt(6)))
    got = bench.coverage(bench.read(RES), 0.8, "t")
    assert got["vllm"] == {"tpot": (1, 2), "ttft": (1, 1)}
    assert got["sglang"] == {"tpot": (0, 1), "ttft": (0, 1)}  # one fit row: [1, 1] holds no 1.1 ratio
    assert bench.main(["--coverage", RES]) == 1
    assert "vllm: tpot 1/2 = 50.0% OUTSIDE" in capsys.readouterr().out


@pytest.mark.parametrize("text, where", [
    ("engine,device\nvllm,h100\n", ":1:1: the header lacks regime"),
    (",".join(bench.COLUMNS) + "\nvllm,h100,kv-bound,ten,9,100,80,2026-01-05,fit\n", ":2:4: tpot_expected_ms"),
    (",".join(bench.COLUMNS) + "\nvllm,h100,kv-bound,10,9,100,80,2026-01-05,train\n", ":2:9: split = 'train'"),
    (",".join(bench.COLUMNS) + "\nvllm,h100,kv-bound,10,9,100,80,5 Jan,fit\n", ":2:8: measured_on"),
])
def test_bad_input_names_file_line_column(tmp_path: Path, capsys: Any, text: str, where: str) -> None:
    p = tmp_path / "bad.csv"
    p.write_text(text)
    assert bench.main([str(p), "--out", str(tmp_path / "o.toml")]) == 2
    err = capsys.readouterr().err
    assert f"bad.csv{where}" in err and "Traceback" not in err
    assert not (tmp_path / "o.toml").exists()
