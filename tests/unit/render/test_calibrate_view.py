"""kvplan.render.calibrate_view: the calibration profile's format (docs/calibrate.md, "The profile")."""

from __future__ import annotations

import sys

import attrs
import pytest

from kvplan.base.units import Dim, parse_quantity
from kvplan.model import calibrate as cal
from kvplan.render import calibrate_view as view
from tests.unit.model.test_calibrate import TRUTH, grid

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

FIT_KEYS = {"device", "engine", "eta_w", "t_fixed", "collective_latency", "t_layer", "eta_compute", "points",
            "rms_error", "kv_efficiency"}


def _seconds(raw: object) -> float:
    return float(raw) if isinstance(raw, (int, float)) else parse_quantity(str(raw), Dim.TIME, what="t")


def check_format(text: str) -> dict[str, object]:
    """The profile format's rules, checked on the parsed TOML."""
    doc = tomllib.loads(text)
    assert set(doc) <= {"profile", "fit"} and set(doc["profile"]) <= {"name", "inputs"}
    seen = set()
    for f in doc["fit"]:
        assert set(f) <= FIT_KEYS and {"device", "engine"} <= set(f), f
        assert f["engine"] in ("vllm", "sglang", "trtllm", "any")
        assert (f["device"], f["engine"]) not in seen
        seen.add((f["device"], f["engine"]))
        for key in ("eta_w", "eta_compute", *(f"kv_efficiency.{k}" for k in f.get("kv_efficiency", {}))):
            value = f["kv_efficiency"][key.split(".")[1]] if "." in key else f.get(key)
            assert value is None or 0 < value <= 1, (key, value)
        for key in ("t_fixed", "collective_latency", "t_layer", "rms_error"):
            assert key not in f or _seconds(f[key]) >= 0
    return doc


def test_the_profile_holds_each_fitted_factor_to_12_digits() -> None:
    (fit,) = cal.fit(grid(), "h100.toml")
    text = view.profile([fit], ["runs.csv"], "out/h100.toml")
    doc = check_format(text)
    assert text.startswith("# written by kvplan calibrate from 1 file: runs.csv\n")
    assert doc["profile"] == {"name": "h100", "inputs": ["runs.csv"]}
    (f,) = doc["fit"]
    assert (f["device"], f["engine"], f["points"]) == ("h100-sxm", "vllm", fit.points)
    assert f["eta_w"] == pytest.approx(TRUTH["eta_w"], rel=1e-9)
    assert f["eta_compute"] == pytest.approx(TRUTH["eta_compute"], rel=1e-9)
    assert _seconds(f["t_fixed"]) == pytest.approx(TRUTH["t_fixed"], rel=1e-9)
    assert f["t_fixed"].endswith(" ms") and f["collective_latency"].endswith(" us")
    assert _seconds(f["collective_latency"]) == pytest.approx(TRUTH["collective_latency"], rel=1e-9)
    assert f["t_layer"].endswith(" us") and _seconds(f["t_layer"]) == pytest.approx(TRUTH["t_layer"], rel=1e-9)
    assert f["kv_efficiency"] == pytest.approx({"bf16": 0.7 / 0.8, "fp8": 0.6 / 0.8}, rel=1e-9)
    assert view.profile([fit], ["runs.csv"], "out/h100.toml") == text  # deterministic


def test_a_held_parameter_is_absent_and_named_in_a_comment() -> None:
    """One model on one rank: η_w is held (it moves with t_fixed), t_fixed fitted; the profile says so."""
    ms = [attrs.evolve(m, ttft_s=None) for m in grid(layouts=(("llama-3-8b", 1),), kvs=("bf16",)) if m.batch < 256]
    (fit,) = cal.fit(ms, "p.toml")
    text = view.profile([fit], ["a.json", "b.csv"], "p.toml")
    (f,) = check_format(text)["fit"]
    assert set(f) == {"device", "engine", "t_fixed", "points", "rms_error", "kv_efficiency"}
    assert "# eta_w: not determined by the data" in text and "held at its default so that t_fixed" in text
    assert "# t_fixed" not in text
    assert text.startswith("# written by kvplan calibrate from 2 files: a.json, b.csv\n")


def test_a_fit_that_determined_nothing_is_not_written() -> None:
    empty = cal.fit([cal.Measurement("llama-3-8b", "h100-sxm", 1, 1, "", "bf16", "vllm", 8, 4_000, 0.012)], "p.toml")
    (full,) = cal.fit([attrs.evolve(m, engine="sglang") for m in grid()], "p.toml")
    doc = check_format(view.profile([*empty, full], ["x.csv"], "p.toml"))
    assert [(f["device"], f["engine"]) for f in doc["fit"]] == [("h100-sxm", "sglang")]


def test_the_report_prints_each_residual_with_its_evidence() -> None:
    (fit,) = cal.fit(grid(layouts=(("llama-3-8b", 1),)), "p.toml")
    out = view.text([fit], ["x.csv: KV dtype bf16 (assumed)"])
    assert out.startswith(f"fit h100-sxm/vllm: {fit.points} measured times\n")
    assert out.count("(measured)") == fit.points and "error (derived)" in out
    assert "rms error " in out and out.rstrip().endswith("note: x.csv: KV dtype bf16 (assumed)")
