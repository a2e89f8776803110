"""Error bars (docs/expected.md, "Error bars"): the record, the fallback and widening of thin cells by hand, a plan
with an injected table in text and JSON, and the shipped (empty) table leaving output unchanged."""

from __future__ import annotations

import json
import math

import pytest

from kvplan.base.errors import CatalogError
from kvplan.base.evidence import Evidence, Interval, Value
from kvplan.lang import check_source
from kvplan.planner import intervals, plan
from kvplan.render.plan_view import json_text, text

SPEC = ('kvplan 1\ndeployment "d" {\n  model = llama-3.1-8b\n  device = h100-sxm\n  engine = vllm\n  devices = 1\n'
        '  workload {\n    rate = 2/s\n    input = 2k\n    output = 256\n  }\n}\n')


def _cell(n: int, tpot: tuple[float, float] = (0.9, 1.2), ttft: tuple[float, float] = (0.8, 1.5)) -> dict:
    return {"engine": "vllm", "device": "", "regime": "", "level": 0.8, "n": n, "tpot_lo": tpot[0],
            "tpot_hi": tpot[1], "ttft_lo": ttft[0], "ttft_hi": ttft[1], "source": "res.csv sha256 abc"}


def _plan():  # type: ignore[no-untyped-def]
    res = check_source(SPEC, "d.kvp")
    assert res.ok, [d.message for d in res.diagnostics]
    return plan(res.scenarios[0])


def test_value_json_has_interval_key_only_when_present() -> None:
    v = Value(0.0161, "s", Evidence.DERIVED, "expected step")
    assert set(v.to_json()) == {"value", "unit", "evidence", "source"}
    iv = Interval(0.0142, 0.0185, 0.8, 212, "vllm · h200 · kv-bound", "res.csv")
    w = Value(0.0161, "s", Evidence.DERIVED, "expected step", interval=iv)
    assert w.to_json()["interval"] == {"lo": 0.0142, "hi": 0.0185, "level": 0.8, "n": 212,
                                       "cell": "vllm · h200 · kv-bound", "source": "res.csv"}
    assert w.text() == "16.1 ms [14.2, 18.5] (80%, n = 212, vllm · h200 · kv-bound) (derived)"


def test_fallback_order_and_thin_cells_by_hand() -> None:
    cells = intervals.parse({"vllm/h100-sxm/kv-bound": _cell(5), "vllm/h100-sxm": _cell(40, (0.95, 1.1)),
                             "vllm": _cell(100), "any": _cell(500)})
    # the exact cell is thin (5 < 30): the engine/device cell answers
    assert intervals.lookup(cells, "vllm", "h100-sxm", "kv-bound").name == "vllm · h100-sxm"
    # another device: the engine's cell; another engine: any
    assert intervals.lookup(cells, "vllm", "b200", "kv-bound").name == "vllm"
    assert intervals.lookup(cells, "sglang", "b200", "kv-bound").name == "any"
    assert intervals.lookup({}, "vllm", "b200", "kv-bound") is None
    # every present cell thin: the finest, widened by sqrt(30/5) about its midpoint
    thin = intervals.parse({"vllm/h100-sxm/kv-bound": _cell(5), "vllm": _cell(12)})
    c = intervals.lookup(thin, "vllm", "h100-sxm", "kv-bound")
    w = math.sqrt(30 / 5)
    assert c.n == 5 and "thin" in c.name
    assert c.tpot == pytest.approx((1.05 - 0.15 * w, 1.05 + 0.15 * w))
    assert c.ttft == pytest.approx((max(0.0, 1.15 - 0.35 * w), 1.15 + 0.35 * w))


def test_bad_table_is_a_catalog_error() -> None:
    with pytest.raises(CatalogError, match="lacks n"):
        intervals.parse({"vllm": {k: v for k, v in _cell(40).items() if k != "n"}})
    with pytest.raises(CatalogError, match="lo <= hi"):
        intervals.parse({"vllm": _cell(40, (1.2, 0.9))})


def test_injected_table_prints_interval_in_text_and_json() -> None:
    p = _plan()
    got = intervals.attach(p, intervals.parse({"vllm": _cell(100)}))
    m, ld = got.metrics, got.load
    assert ld is not None and ld.ttft is not None and ld.itl is not None
    assert m.step_time_expected.interval.lo == pytest.approx(p.metrics.step_time_expected.value * 0.9)
    assert m.step_time_expected.interval.hi == pytest.approx(p.metrics.step_time_expected.value * 1.2)
    assert ld.ttft.interval.hi == pytest.approx(p.load.ttft.value * 1.5)
    assert ld.itl.interval.lo == pytest.approx(p.load.itl.value * 0.9)
    assert m.step_time.interval is None  # the bound is not a forecast of a measurement
    body = json.loads(json_text([got]))["plans"][0]
    assert body["metrics"]["step_time_expected"]["interval"]["n"] == 100
    assert "(80%, n = 100, vllm)" in text([got])


def test_shipped_table_is_empty_and_leaves_output_unchanged() -> None:
    assert intervals.table() == {}
    p = _plan()
    assert intervals.attach(p) is p
    assert '"interval": {' not in json_text([p]) and "%, n = " not in text([p])
