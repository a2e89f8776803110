"""Disaggregated prefill/decode end to end (issue 23 item 3, SPEC §14): a plan for DeepSeek-R1 on H200 with its
x:y ratio and the TTFT with the KV transfer, recomputed by hand here; advise's JSON carries the pools; emit writes
each pool's launch files (SGLang, vLLM, Kubernetes), and kvplan's own readers read each back as its pool."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from kvplan.cli import main
from kvplan.engines import sglang, vllm
from tests.acceptance.test_cli_core import check_contract
from tests.paths import DATA

SPEC = DATA / "disagg" / "deepseek-r1-h200.kvp"
#: DeepSeek-R1's MLA latent per token: L · (d_c + d_r) · 2 B = 61 · (512 + 64) · 2 (models.toml deepseek-v3)
KAPPA = 61 * (512 + 64) * 2


@pytest.fixture(scope="module")
def plan_json() -> dict:
    r = CliRunner().invoke(main, ["advise", str(SPEC), "--format", "json"])
    assert r.exit_code == 0, r.output
    body = json.loads(r.stdout)
    check_contract(body)
    (p,) = body["plans"]
    return p


def test_the_plan_has_its_ratio_and_the_transfer_in_the_ttft(plan_json: dict) -> None:
    pools = plan_json["pools"]
    x, y = pools["prefill_workers"], pools["decode_workers"]
    assert pools["ratio"] == f"{x}:{y}" and x >= 1 and y >= 1
    fig = pools["figures"]
    per_p = pools["prefill"]["choices"]["devices"]
    per_d = pools["decode"]["choices"]["devices"]
    total = x * per_p + y * per_d
    assert fig["devices"]["value"] == total
    # the KV of one 4,000-token prompt at bf16 moves over NVLink 4 inside one HGX board, else IB NDR per GPU
    assert fig["transfer_bytes"]["value"] == pytest.approx(4000 * KAPPA)
    link, bw = ("nvlink4", 450e9) if total <= 8 else ("ib-ndr", 50e9)
    assert pools["link"] == link
    assert fig["transfer_time"]["value"] == pytest.approx(4000 * KAPPA / bw)
    ttft = fig["ttft_prefill"]["value"] + fig["transfer_time"]["value"] + fig["ttft_decode"]["value"]
    assert fig["ttft"]["value"] == pytest.approx(ttft)
    assert plan_json["load"]["ttft"]["value"] == pytest.approx(ttft)  # the SLOs are checked end to end
    # x:y from the two pools' rates: the least workers of each that carry the declared 2 req/s
    mu_p, mu_d = fig["prefill_worker_rate"]["value"], fig["decode_worker_rate"]["value"]
    assert (x - 1) * mu_p < 2.0 <= x * mu_p * (1 + 1e-9)
    assert (y - 1) * mu_d < 2.0 <= y * mu_d * (1 + 1e-9)
    assert fig["goodput"]["value"] == pytest.approx(min(x * mu_p, y * mu_d))
    # the decode pool holds the KV as the prefill pool hands it over
    assert pools["prefill"]["choices"]["kv_dtype"] == pools["decode"]["choices"]["kv_dtype"]
    assert any(d["domain"] == "pools" and d["choice"].startswith(pools["ratio"]) for d in plan_json["decisions"])


def test_advise_prints_the_pools() -> None:
    r = CliRunner().invoke(main, ["advise", str(SPEC)])
    assert r.exit_code == 0, r.output
    assert "disaggregated serving: " in r.stdout and "prefill pool: " in r.stdout and "decode pool: " in r.stdout
    assert "transfer time" in r.stdout


def test_emit_writes_both_pools_and_the_readers_read_them_back(tmp_path: Path, plan_json: dict) -> None:
    out = tmp_path / "out"
    r = CliRunner().invoke(main, ["emit", str(SPEC), "--target", "sglang,vllm,k8s", "-o", str(out)])
    assert r.exit_code == 0, r.output
    for pool, role in (("prefill", "kv_producer"), ("decode", "kv_consumer")):
        folder = out / "r1-disagg" / pool
        sg = sglang.read((folder / "sglang.sh").read_text("utf-8"))
        assert sg.pool is not None and sg.pool[0] == pool
        assert sg.tp[0] == plan_json["pools"][pool]["choices"]["tensor_parallel"]
        text = (folder / "sglang.sh").read_text("utf-8")
        assert f"--disaggregation-mode {pool}" in text and "--disaggregation-transfer-backend nixl" in text
        vl = vllm.read((folder / "vllm.sh").read_text("utf-8"))
        assert vl.pool is not None and vl.pool[0] == pool and role in vl.pool[1]
        assert [w for w in vl.warnings if "NixlConnector" in w] == [
            f"--kv-transfer-config kv_connector NixlConnector, kv_role {role}: the {pool} pool of a disaggregated "
            "deployment, imported as this pool alone (`serving = disaggregated` plans both pools)"]
        assert any(f"--disaggregation-mode {pool}" in w for w in sg.warnings)
        docs = [d for f in sorted(folder.glob("*.yaml")) for d in yaml.safe_load_all(f.read_text("utf-8")) if d]
        names = {d["metadata"]["name"] for d in docs}
        assert any(f"r1-disagg-{pool}-sglang" in n for n in names), names
