"""`kvplan map`, `kvplan tables`: the JSON contract, the golden tables, and bad input → exit 2, one line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import pytest
from click.testing import CliRunner

from kvplan.cli import main
from tests.paths import DATA

GOLDEN = DATA / "golden"
HF = DATA / "hf"


def run(*args: str) -> Any:
    return CliRunner().invoke(main, list(args))


def walk_quantities(obj: Any) -> list[dict[str, Any]]:
    """Every dict with a 'value' and an 'evidence' key, anywhere in the document."""
    found = []
    if isinstance(obj, dict):
        if "evidence" in obj and "value" in obj:
            found.append(obj)
        for v in obj.values():
            found += walk_quantities(v)
    elif isinstance(obj, list):
        for v in obj:
            found += walk_quantities(v)
    return found


def check_contract(body: dict[str, Any]) -> None:
    assert body["format_version"] == "1"
    qs = walk_quantities(body)
    assert qs
    for q in qs:
        assert set(q) - {"interval"} == {"value", "unit", "evidence", "source"}, q
        assert q["evidence"] in ("derived", "reported", "assumed")
        assert isinstance(q["unit"], str) and isinstance(q["source"], str) and q["source"]


def test_map_json_contract_and_values() -> None:
    r = run("map", "--model", "llama-3-70b", "--device", "b200", "--batch", "1", "--context", "128k",
            "--format", "json")
    assert r.exit_code == 0, r.output
    body = json.loads(r.stdout)
    check_contract(body)
    res = body["results"]
    kappa = 2 * 80 * 8 * 128 * 2
    assert res["kappa"]["value"] == kappa and res["kappa"]["unit"] == "B"
    assert res["s_star"]["value"] == pytest.approx(70_553_706_496 * 2 / kappa)
    assert res["s_cap"]["value"] == pytest.approx((192e9 - 70_553_706_496 * 2) / kappa)
    assert body["regime"] == "weight-bound"
    assert body["beta_eff"]["pinned"]["value"] == 4e12
    int2 = next(row for row in body["by_kv_dtype"] if row["kv_dtype"] == "int2")
    w, k = 70_553_706_496 * 2, 128_000 * kappa
    assert int2["speedup"]["value"] == pytest.approx((w + k) / (w + k / 8))


def test_map_mi300x_striped_is_upper_bound() -> None:
    r = run("map", "--model", "llama-3-70b", "--device", "mi300x", "--format", "json")
    body = json.loads(r.stdout)
    assert "upper bound" in body["beta_eff"]["striped"]["source"]
    assert body["beta_eff"]["pinned"]["value"] == pytest.approx(5.3e12 / 8)


def test_map_from_config_json() -> None:
    r = run("map", "--model-config", str(HF / "deepseek-ai--DeepSeek-V2.json"), "--device", "h200",
            "--format", "json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["results"]["kappa"]["value"] == 60 * (512 + 64) * 2


def test_tables_golden_and_contract(golden: Callable[[Path, str], None]) -> None:
    for fmt, ext in (("text", "txt"), ("markdown", "md"), ("json", "json")):
        r = run("tables", "--format", fmt)
        assert r.exit_code == 0, r.output
        golden(GOLDEN / "tables" / f"tables.{ext}", r.stdout)
    body = json.loads(run("tables", "--format", "json").stdout)
    check_contract(body)
    t4 = next(t for t in body["tables"] if t["id"] == "4")
    first = t4["rows"][0]  # batch 1, bf16: the paper's P = 70e9
    assert first[2]["value"] == pytest.approx(140e9 / 327_680)
    t5 = next(t for t in body["tables"] if t["id"] == "5")
    t5_rows = {(r[0]["text"], r[1]["text"]): r for r in t5["rows"]}
    w, kappa = 140e9, 2 * 80 * 8 * 128 * 2
    int2 = t5_rows["128k", "int2"]  # the paper's 1.25x for 2-bit at batch 1
    assert round(int2[5]["value"], 2) == round((w + 128_000 * kappa) / (w + 128_000 * kappa / 8), 2) == 1.25
    bf16 = t5_rows["512k", "bf16"]  # 307.8 GB: two B200s of 192 GB
    assert bf16[3]["value"] == pytest.approx(w + 512_000 * kappa) and bf16[6]["value"] == 2
    assert {t["id"] for t in body["tables"]} >= {"§4.6", "§2.5"}


def test_tables_every_format_carries_the_new_parts() -> None:
    for fmt in ("text", "markdown", "json"):
        out = run("tables", "--format", fmt).stdout
        # W3 stored once (352k tokens × 327,680 B) beside unshared (1,024k tokens): JSON carries the raw bytes
        w3 = (f"{352_000 * 327_680}", f"{1_024_000 * 327_680}") if fmt == "json" else ("115.3 GB", "335.5 GB")
        for needle in ("512k", "B200s to hold it", "without the domain", *w3,
                       "The combination ceiling", "capacity factor with W3's σ", "H100 HBM / PCIe Gen5 x16",
                       "W4 recompute / fetch, highest", "inputs: the paper's, not the catalog's"):
            assert needle in out, (fmt, needle)


@pytest.mark.parametrize("args,needle", [
    (["map", "--model", "lama-3-70b", "--device", "b200"], "did you mean 'llama-3-70b'"),
    (["map", "--model", "llama-3-70b", "--device", "b2000"], "did you mean"),
    (["map", "--model", "llama-3-70b", "--device", "b200", "--batch", "-1"],
     "--batch must be a whole number from 1 to 2^20, got -1"),
    (["map", "--model", "llama-3-70b", "--device", "b200", "--context", "0"],
     "--context must be a whole number of tokens from 1"),
    (["map", "--model", "llama-3-70b", "--device", "b200", "--context", "40 GB"], "--context takes tokens, got bytes"),
    (["map", "--model", "llama-3-70b", "--device", "b200", "--kv-dtype", "int3"], "unknown dtype"),
    (["map", "--device", "b200"], "model"),
])
def test_bad_input_exits_2_one_line(args: list[str], needle: str) -> None:
    r = run(*args)
    assert r.exit_code == 2, r.output
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, r.stderr
    assert needle in lines[0]
    assert "Traceback" not in r.stderr + r.stdout


def test_config_missing_required_key(tmp_path: Path) -> None:
    cfg = json.loads((HF / "meta-llama--Meta-Llama-3.1-8B.json").read_text())
    del cfg["num_hidden_layers"]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg, indent=2))
    r = run("map", "--model-config", str(path), "--device", "h100-sxm")
    assert r.exit_code == 2
    assert "num_hidden_layers" in r.stderr and str(path) in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_models_and_devices_list() -> None:
    assert run("models").exit_code == 0 and "llama-3-70b" in run("models").stdout
    assert "b200" in run("devices").stdout
