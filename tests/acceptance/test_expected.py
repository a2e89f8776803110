"""The expected figures through the CLI (issue 12, builds 1, 2 and 5; docs/expected.md): map's JSON and text,
advise's plan and baseline, sweep's column, `--slo-on`, and calibration profiles given by `--calibration` and by
a deployment's `calibration = "FILE"`, good and bad."""

from __future__ import annotations

import csv
import io
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from kvplan import catalog
from kvplan.catalog import performance
from kvplan.cli import main
from kvplan.model import expected as ex
from kvplan.model import roofline as rf
from tests.paths import DATA, ROOT

GOOD = DATA / "profiles" / "h100-vllm.toml"
FACTORS = ("eta_w", "eta_kv", "eta_compute", "t_fixed", "collective_latency", "t_layer", "t_moe")


def run(*args: str) -> Any:
    return CliRunner().invoke(main, list(args))


def _map(*extra: str) -> dict[str, Any]:
    r = run("map", "--model", "llama-3-70b", "--device", "h100-sxm", "--devices", "2", "--batch", "8", "--context",
            "4500", "--format", "json", *extra)
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)["results"]  # type: ignore[no-any-return]


def test_map_json_carries_the_bound_and_the_expected_figures() -> None:
    res = _map()
    assert res["step_time"]["source"] == "T_step ≥ max(M/β_eff, F/π) (docs/model.md §4)"  # the bound, as before
    for key in ("step_time_expected", "ttft_expected", "step_time_expected_comm"):
        v = res[key]
        assert (v["unit"], v["evidence"]) == ("s", "derived"), key
    for name in FACTORS:
        assert name in res["step_time_expected"]["source"] and name in res["ttft_expected"]["source"]
        f = res["expected_factors"][name]
        assert f["evidence"] in ("assumed", "reported", "derived") and f["unit"] in ("x", "s")
    assert "the workload's context, 4,500 tokens" in res["ttft_expected"]["source"]
    assert "nvlink4" in res["step_time_expected"]["source"]
    assert res["step_time_expected"]["value"] >= res["step_time"]["value"]


def test_map_expected_step_is_the_formula_at_the_printed_factors() -> None:
    res = _map()
    f = {k: v["value"] for k, v in res["expected_factors"].items()}
    m, d = catalog.get_model("llama-3-70b"), catalog.get_device("h100-sxm")
    # independently: per-rank bytes over the achieved bandwidth, two ring all-reduces per layer over NVLink 4
    w = res["weight_bytes_read"]["value"] / 2
    k = res["kv_bytes_read"]["value"] / 2
    link = catalog.get_link("nvlink4").bandwidth
    comm = 2 * m.n_layers * (f["collective_latency"] + 2 * (2 - 1) / 2 * 8 * m.n_q * m.head_dim * 2 / link)
    fixed = f["t_fixed"] + m.n_layers * f["t_layer"]
    want = fixed + w / (f["eta_w"] * d.bandwidth) + k / (f["eta_kv"] * d.bandwidth) + comm
    assert res["step_time_expected"]["value"] == pytest.approx(want, rel=1e-9)
    assert res["step_time_expected_comm"]["value"] == pytest.approx(comm, rel=1e-9)


def test_map_text_prints_the_expected_figures_beside_the_lower_bound() -> None:
    r = run("map", "--model", "llama-3-70b", "--device", "h100-sxm", "--devices", "2", "--batch", "8")
    assert r.exit_code == 0
    lines = r.stdout.splitlines()
    bound = next(i for i, ln in enumerate(lines) if ln.strip().startswith("step time (lower bound)"))
    assert any(ln.strip().startswith("step time (expected)") for ln in lines[bound:bound + 6])
    assert any(ln.strip().startswith("TTFT, one prompt (expected)") for ln in lines)
    assert "factors of the expected figures" in r.stdout


def test_map_with_a_calibration_profile_uses_its_fit() -> None:
    res = _map()
    cal = _map("--calibration", str(GOOD), "--engine", "vllm")
    assert cal["expected_factors"]["t_fixed"]["value"] == pytest.approx(1.2e-3)
    # the profile fits h100-sxm/vllm: every factor is calibrated there, derived, naming the profile and the fit
    for name in FACTORS:
        v = cal["expected_factors"][name]
        if name == "t_moe":  # no profile fits the MoE routing time: kvplan's default (0, assumed) stays
            assert (v["value"], v["evidence"]) == (0, "assumed")
            continue
        assert v["evidence"] == "derived" and "[fit h100-sxm/vllm]" in v["source"], name
    assert cal["expected_factors"]["eta_w"]["value"] == 0.87
    assert cal["step_time"] == res["step_time"]  # the bound does not move
    assert cal["step_time_expected"]["value"] != res["step_time_expected"]["value"]


def test_map_says_when_the_profile_has_no_fit_for_the_device() -> None:
    r = run("map", "--model", "llama-3-8b", "--device", "b200", "--calibration", str(GOOD))
    assert r.exit_code == 0
    assert "note: the calibration profile" in r.stdout and "no [[fit]] for b200" in r.stdout


def test_a_bad_profile_is_one_located_line_and_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('[[fit]]\ndevice = "h100-sxm"\nengine = "vllm"\neta_w = 1.5\n', encoding="utf-8")
    for cmd in (["map", "--model", "llama-3-8b", "--device", "h100-sxm"], ["sweep", "--model", "llama-3-8b",
                "--device", "h100-sxm"], ["advise", str(ROOT / "examples" / "w1-batch1.kvp")]):
        r = run(*cmd, "--calibration", str(bad))
        assert r.exit_code == 2, (cmd, r.output)
        err = r.stderr.strip()
        assert len(err.splitlines()) == 1 and f"{bad}:4:1:" in err and "(0, 1]" in err, err
        assert "Traceback" not in r.output


def test_sweep_has_the_expected_column_never_below_the_bound() -> None:
    r = run("sweep", "--model", "llama-3-70b", "--device", "h100-sxm", "--devices", "1,2,8", "--kv-dtype",
            "bf16,fp8,int4", "--batch", "1,8,64", "--context", "1k,32k,128k")
    assert r.exit_code == 0, r.output
    rows = list(csv.DictReader(io.StringIO(r.stdout)))
    assert len(rows) == 81
    assert list(rows[0]).index("step_time_expected_s") == list(rows[0]).index("step_time_s") + 1
    for row in rows:
        assert float(row["step_time_expected_s"]) >= float(row["step_time_s"])


def test_sweep_expected_column_is_the_model_at_the_default_factors() -> None:
    r = run("sweep", "--model", "llama-3-8b", "--device", "h100-sxm", "--kv-dtype", "fp8", "--batch", "4",
            "--context", "8k", "--exact")
    (row,) = list(csv.DictReader(io.StringIO(r.stdout)))
    m, d = catalog.get_model("llama-3-8b"), catalog.get_device("h100-sxm")
    cfg = rf.Config(m, d, w_kv=1.0)
    f = ex.default_factors(d, "fp8", "any", "nvlink4")
    t = rf.step_time(cfg, 4, 8000)
    want = max(f.t_fixed.value + float(t.weights) / f.eta_w.value + float(t.kv) / f.eta_kv.value,
               f.t_fixed.value + float(t.compute) / f.eta_compute.value)  # one rank: no all-reduce
    assert float(row["step_time_expected_s"]) == pytest.approx(want, rel=1e-12)


def test_advise_json_carries_both_figures_for_the_plan_and_the_baseline() -> None:
    r = run("advise", str(ROOT / "examples" / "w2-batch32.kvp"), "--format", "json")
    assert r.exit_code == 0, r.output
    (p,) = json.loads(r.stdout)["plans"]
    for side in ("metrics", "baseline"):
        m = p[side]
        for key in ("step_time", "step_time_expected", "ttft", "ttft_expected"):
            assert (m[key]["unit"], m[key]["evidence"]) == ("s", "derived"), (side, key)
        assert m["step_time_expected"]["value"] >= m["step_time"]["value"]
        assert m["ttft_expected"]["value"] >= m["ttft"]["value"]
    assert list(p["expected_factors"]) == list(FACTORS)


SPEC = """deployment "d" {{
    model   = llama-3-8b
    device  = h100
    devices = 1
{extra}
    workload {{
        batch   = 8
        context = 4k
    }}

    pin {{
        kv_dtype = bf16
    }}

    slo {{
        step_time <= {slo}
    }}
}}
"""


def _spec(tmp_path: Path, slo: str, extra: str = "") -> str:
    path = tmp_path / "d.kvp"
    path.write_text(SPEC.format(slo=slo, extra=extra), encoding="utf-8")
    return str(path)


def test_an_slo_the_bound_meets_and_the_expected_misses(tmp_path: Path) -> None:
    r = run("advise", _spec(tmp_path, "3600 s"), "--format", "json")
    m = json.loads(r.stdout)["plans"][0]["metrics"]
    bound, expected = m["step_time"]["value"], m["step_time_expected"]["value"]
    assert bound < expected
    slo = f"{(bound + expected) / 2 * 1e3:.6f} ms"  # between the two: computed, not a constant
    spec = _spec(tmp_path, slo)
    assert run("advise", spec, "--slo-on", "bound").exit_code == 0
    r = run("advise", spec)
    assert r.exit_code == 1
    assert "(expected; bound" in r.stdout
    for cmd in ("lint", "advise"):
        assert run(cmd, spec, "--slo-on", "bound").exit_code == 0, cmd
        assert run(cmd, spec).exit_code == 1, cmd


def test_a_deployment_names_its_calibration_profile(tmp_path: Path) -> None:
    shutil.copy(GOOD, tmp_path / "h100.toml")
    spec = _spec(tmp_path, "3600 s", '    engine  = vllm\n    calibration = "h100.toml"\n')
    r = run("advise", spec, "--format", "json")
    assert r.exit_code == 0, r.output
    p = json.loads(r.stdout)["plans"][0]
    assert p["expected_factors"]["t_fixed"]["value"] == pytest.approx(1.2e-3)
    assert "[fit h100-sxm/vllm]" in p["expected_factors"]["eta_w"]["source"]
    # --calibration replaces the deployment's own
    other = tmp_path / "other.toml"
    other.write_text('[[fit]]\ndevice = "h100-sxm"\nengine = "vllm"\nt_fixed = "5 ms"\n', encoding="utf-8")
    q = json.loads(run("advise", spec, "--format", "json", "--calibration", str(other)).stdout)["plans"][0]
    assert q["expected_factors"]["t_fixed"]["value"] == pytest.approx(5e-3)


@pytest.mark.parametrize("value, code, words", [
    ('"../h100.toml"', "KV119", "is outside the folder of the spec"),
    ('"missing.toml"', "KV119", "cannot read the calibration profile"),
    ('"bad.toml"', "KV119", "(line 4, column 1)"),
    ("h100.toml", "KV113", "calibration takes a quoted path"),  # as a model block's unquoted config
])
def test_a_bad_calibration_key_is_located_and_exit_2(tmp_path: Path, value: str, code: str, words: str) -> None:
    (tmp_path / "spec").mkdir()
    shutil.copy(GOOD, tmp_path / "h100.toml")
    (tmp_path / "spec" / "bad.toml").write_text('[[fit]]\ndevice = "h100-sxm"\nengine = "vllm"\nt_fixed = -1\n',
                                                encoding="utf-8")
    path = tmp_path / "spec" / "d.kvp"
    path.write_text(SPEC.format(slo="1 s", extra=f"    calibration = {value}\n"), encoding="utf-8")
    r = run("lint", str(path), "--output-format", "concise")
    assert r.exit_code == 1 and code in r.stdout and words in r.stdout, r.output
    assert f"{path}:5:" in r.stdout  # at the calibration line of the spec
    r = run("advise", str(path))
    assert r.exit_code == 2 and code in r.stderr, r.output


@pytest.mark.parametrize("name", sorted(p.name for p in (ROOT / "examples").glob("*.kvp")))
def test_every_example_expects_no_less_than_its_bound(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    r = run("advise", f"examples/{name}", "--format", "json")
    assert r.exit_code in (0, 1), r.output
    plans = json.loads(r.stdout)["plans"]
    assert plans
    for p in plans:
        for side in ("metrics", "baseline"):
            m = p[side]
            assert m["step_time_expected"]["value"] >= m["step_time"]["value"] * (1 - 1e-12), (name, side)
            assert m["ttft_expected"]["value"] >= m["ttft"]["value"] * (1 - 1e-12), (name, side)


def test_map_rows_by_kv_dtype_carry_their_own_expected_step() -> None:
    r = run("map", "--model", "llama-3-70b", "--device", "b200", "--devices", "2", "--batch", "8", "--kv-dtype", "fp8",
            "--format", "json")
    body = json.loads(r.stdout)
    rows = {x["kv_dtype"]: x for x in body["by_kv_dtype"]}
    for name, x in rows.items():
        assert x["step_time_expected"]["value"] >= x["step_time"]["value"], name
        assert x["step_time_expected"]["evidence"] == "derived"
    # the row of the map's own KV dtype is the map's expected step (same factors, same width)
    assert rows["fp8"]["step_time_expected"]["value"] == pytest.approx(body["results"]["step_time_expected"]["value"])


def test_map_json_carries_the_ttft_all_reduces_at_the_residual_width() -> None:
    # Issue 23 item 1: DeepSeek-V3 on 8 × H200, a 4,500-token prompt. By hand: 2 all-reduces × 61 layers, each the
    # link's collective latency + a ring all-reduce of 2·7/8 · 4,500 · 7,168 (hidden_size) · 2 B over NVLink.
    r = run("map", "--model", "deepseek-v3", "--device", "h200", "--devices", "8", "--batch", "1", "--context", "4500",
            "--format", "json")
    assert r.exit_code == 0, r.output
    res = json.loads(r.stdout)["results"]
    d = catalog.get_device("h200")
    link = catalog.get_link(d.scaleup_link or "")
    latency = performance.factor("collective_latency", link=link.id).value
    want = 2 * 61 * (latency + 2 * 7 / 8 * 4500 * 7168 * 2 / link.bandwidth)
    comm = res["ttft_expected_comm"]
    assert (comm["unit"], comm["evidence"]) == ("s", "derived")
    assert comm["value"] == pytest.approx(want, rel=0.10)
    assert "4,500 tokens" in comm["source"] and link.id in comm["source"]
    assert comm["value"] < res["ttft_expected"]["value"]
    text = run("map", "--model", "deepseek-v3", "--device", "h200", "--devices", "8", "--batch", "1", "--context",
               "4500").stdout.splitlines()
    ttft = next(i for i, ln in enumerate(text) if ln.strip().startswith("TTFT, one prompt (expected)"))
    assert text[ttft + 1].strip().startswith("all-reduces (expected)")
