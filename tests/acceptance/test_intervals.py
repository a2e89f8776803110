"""Error bars (kvplan.planner.intervals, docs/expected.md "Error bars"): the interval record, the table's
fallback and thin-cell widening by hand, a plan with an injected table in text and JSON, and the empty shipped
table leaving every plan as it was."""

from __future__ import annotations

import json
import math
from typing import Any

import attrs
import pytest
from click.testing import CliRunner

from kvplan.base.errors import CatalogError
from kvplan.base.evidence import Interval, derived
from kvplan.cli import main
from kvplan.planner import intervals as iv
from kvplan.planner.entry import plan
from tests.paths import ROOT

RATE = ROOT / "examples" / "service-rate.kvp"
BATCH = ROOT / "examples" / "w2-batch32.kvp"


def _cell(n: int, tpot: tuple[float, float], ttft: tuple[float, float], engine: str = "") -> dict[str, Any]:
    return {"engine": engine, "device": "", "regime": "", "level": 0.8, "n": n, "tpot_lo": tpot[0],
            "tpot_hi": tpot[1], "ttft_lo": ttft[0], "ttft_hi": ttft[1], "source": "res.csv sha256:0"}


def test_value_json_has_an_interval_key_only_when_it_has_one() -> None:
    v = derived(0.0161, "s", "eq")
    assert "interval" not in v.to_json()
    w = attrs.evolve(v, interval=Interval(0.0142, 0.0185, 0.8, 212, "vllm · h200 · kv-bound", "res.csv"))
    assert w.to_json()["interval"] == {"lo": 0.0142, "hi": 0.0185, "level": 0.8, "n": 212,
                                       "cell": "vllm · h200 · kv-bound", "source": "res.csv"}
    assert w.text() == "16.1 ms [14.2, 18.5] (80%, n = 212, vllm · h200 · kv-bound) (derived)"
    # bounds printed in another scale than the figure keep their own units
    x = attrs.evolve(v, interval=Interval(0.00098, 0.0185, 0.8, 40, "vllm", "res.csv"))
    assert x.human_with_interval == "16.1 ms [980 us, 18.5 ms] (80%, n = 40, vllm)"


def test_the_interval_is_the_value_times_the_cells_ratios() -> None:
    cells = iv.parse({"any": _cell(100, (0.9, 1.2), (0.8, 1.5))})
    got = iv.interval(derived(0.02, "s", "eq"), cells["any"].tpot, cells["any"]).interval
    assert got is not None and (got.lo, got.hi) == pytest.approx((0.018, 0.024))
    assert (got.level, got.n, got.cell) == (0.8, 100, "any")


def test_fallback_takes_the_finest_cell_that_is_not_thin() -> None:
    cells = iv.parse({"vllm/h200/kv-bound": _cell(5, (0.5, 2.0), (0.5, 2.0)),
                      "vllm/h200": _cell(40, (0.9, 1.1), (0.9, 1.1)),
                      "vllm": _cell(300, (0.8, 1.3), (0.8, 1.3)),
                      "any": _cell(900, (0.7, 1.4), (0.7, 1.4))})
    assert iv.lookup(cells, "vllm", "h200", "kv-bound").name == "vllm · h200"  # type: ignore[union-attr]
    assert iv.lookup(cells, "vllm", "h100", "kv-bound").name == "vllm"  # type: ignore[union-attr]
    assert iv.lookup(cells, "sglang", "h200", "kv-bound").name == "any"  # type: ignore[union-attr]
    assert iv.lookup({}, "vllm", "h200", "kv-bound") is None


def test_a_table_of_thin_cells_widens_the_finest_by_sqrt_min_rows_over_n() -> None:
    cells = iv.parse({"vllm/h200/kv-bound": _cell(5, (0.94, 1.26), (0.84, 1.16)), "any": _cell(7, (1, 1), (1, 1))})
    c = iv.lookup(cells, "vllm", "h200", "kv-bound")
    assert c is not None and c.n == 5
    w = math.sqrt(30 / 5)  # MIN_ROWS = 30; midpoint 1.10, half-width 0.16
    assert c.tpot == pytest.approx((1.10 - 0.16 * w, 1.10 + 0.16 * w))
    assert c.ttft == pytest.approx((1.00 - 0.16 * w, 1.00 + 0.16 * w))
    assert "thin: widened ×2.45" in c.name
    assert iv.widen(0.1, 1.9, 1) == (0.0, pytest.approx(1 + 0.9 * math.sqrt(30)))  # lo is kept >= 0


@pytest.mark.parametrize("entry, word", [({"n": 3}, "lacks"), ({**_cell(3, (1.2, 1.0), (1, 1))}, "lo <= hi"),
                                         ({**_cell(0, (1, 1), (1, 1))}, "n >= 1"),
                                         ({**_cell(3, (1, 1), (1, 1)), "level": "x"}, "could not convert")])
def test_a_bad_cell_is_a_catalog_error_naming_it(entry: dict[str, Any], word: str) -> None:
    with pytest.raises(CatalogError, match=rf"intervals.toml: cell `vllm`.*{word}"):
        iv.parse({"vllm": entry})


def test_the_shipped_table_is_empty_and_leaves_every_plan_as_it_was() -> None:
    assert iv.table() == {}
    from kvplan.lang import check_file
    for path in (RATE, BATCH):
        for sc in check_file(path).scenarios:
            p = plan(sc)
            assert iv.attach(p) is p
            assert "interval" not in json.dumps([v.to_json() for _, v in p.metrics.items()])


@pytest.fixture
def table(monkeypatch: pytest.MonkeyPatch) -> dict[str, iv.Cell]:
    cells = iv.parse({"any": _cell(120, (0.9, 1.25), (0.8, 1.5))})
    monkeypatch.setattr(iv, "_TABLE", cells)
    return cells


def test_a_plan_with_a_table_prints_the_interval_in_json(table: dict[str, iv.Cell]) -> None:
    r = CliRunner().invoke(main, ["advise", str(RATE), "--format", "json"])
    assert r.exit_code in (0, 1), r.output
    p = json.loads(r.output)["plans"][0]
    for key, (lo, hi) in (("step_time_expected", (0.9, 1.25)), ("ttft_expected", (0.8, 1.5))):
        q = p["metrics"][key]
        assert q["interval"]["lo"] == pytest.approx(q["value"] * lo)
        assert q["interval"]["hi"] == pytest.approx(q["value"] * hi)
        assert (q["interval"]["level"], q["interval"]["n"], q["interval"]["cell"]) == (0.8, 120, "any")
    load = p["load"]
    for key, lo in (("itl", 0.9), ("ttft", 0.8)):
        if load.get(key) and load[key]["value"] is not None:
            assert load[key]["interval"]["lo"] == pytest.approx(load[key]["value"] * lo)
    assert "interval" not in p["metrics"]["step_time"] and "interval" not in p["baseline"]["step_time_expected"]


def test_a_plan_with_a_table_prints_the_interval_in_text(table: dict[str, iv.Cell]) -> None:
    from kvplan.lang import check_file
    p = plan(check_file(BATCH).scenarios[0])
    v = p.metrics.step_time_expected
    assert v.interval is not None
    r = CliRunner().invoke(main, ["advise", str(BATCH)])
    assert r.exit_code in (0, 1), r.output
    assert "(80%, n = 120, any)" in r.output
    assert v.interval.text(v.unit, v.human) in r.output



def test_a_calibrated_plan_takes_no_interval_from_the_uncalibrated_table(table: dict[str, iv.Cell]) -> None:
    # the table's ratios are of the uncalibrated model's residuals; a calibrated figure is not described by them
    from kvplan.lang import check_file
    p = plan(check_file(BATCH).scenarios[0])
    assert p.metrics.step_time_expected.interval is not None  # uncalibrated: the table's cell
    bare = attrs.evolve(p, metrics=attrs.evolve(p.metrics, step_time_expected=attrs.evolve(
        p.metrics.step_time_expected, interval=None)))
    cal = attrs.evolve(bare, scenario=attrs.evolve(bare.scenario, calibration=object()))
    assert iv.attach(cal) is cal
