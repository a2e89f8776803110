"""A config.json that declares `quantization_config` is planned at its checkpoint's bytes by every path that
reads it: `--model-config`, a spec's `model { config = ... }` block, a hub repo id, and the spec `kvplan import
--model-config` writes (issue 19 item 5)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from kvplan.cli import main
from kvplan.lang import check_source
from kvplan.planner import plan
from tests.acceptance.test_hub import cache, put  # noqa: F401 - `cache` is a fixture these tests use
from tests.paths import DATA

HF = DATA / "hf"


def _deepseek_v3() -> float:
    """By hand from its config.json: 671,026,419,200 main-model parameters (tests/unit/model/test_hub_weights.py),
    the embedding and untied LM head (2 × vocab × hidden) at bfloat16, every other weight E4M3 (1 B) plus a
    float32 scale per 128 × 128 block."""
    c = json.loads((HF / "deepseek-ai--DeepSeek-V3.json").read_text())
    assert c["quantization_config"]["weight_block_size"] == [128, 128] and c["torch_dtype"] == "bfloat16"
    embed: int = c["vocab_size"] * c["hidden_size"]
    return (671_026_419_200 - 2 * embed) * (1 + 4 / (128 * 128)) + 2 * embed * 2


# openai/gpt-oss-120b: 65,248,815,744 B of tensors in its 15 safetensors files (https://huggingface.co/openai/
# gpt-oss-120b); kvplan's MXFP4 split gives it to the byte (tests/unit/model/test_hub_weights.py).
CASES = [("deepseek-ai--DeepSeek-V3", _deepseek_v3(), "fp8"), ("openai--gpt-oss-120b", 65_248_815_744, "mxfp4")]


def _by_model_config(name: str) -> float:
    r = CliRunner().invoke(main, ["map", "--model-config", str(HF / f"{name}.json"), "--device", "b200",
                                  "--devices", "8", "--context", "4k", "--format", "json"])
    assert r.exit_code == 0, r.output
    value: float = json.loads(r.stdout)["results"]["weight_bytes"]["value"]
    return value


def _spec(model: str, block: str = "") -> str:
    return (f"kvplan 1\n{block}deployment \"d\" {{\n    model  = {model}\n    device = b200\n    devices = 8\n"
            "    workload {\n        batch   = 1\n        context = 4k\n    }\n}\n")


def _planned(text: str, where: Path) -> float:
    res = check_source(text, str(where))
    assert res.ok, res.diagnostics
    (sc,) = res.scenarios
    return plan(sc).metrics.weight_bytes.value


def _by_model_block(name: str, tmp: Path) -> float:
    (tmp / "models" / "m").mkdir(parents=True)
    shutil.copy(HF / f"{name}.json", tmp / "models" / "m" / "config.json")
    block = 'model "m" {\n    config = "models/m/config.json"\n}\n\n'
    return _planned(_spec("m", block), tmp / "s.kvp")


def _by_hub_id(name: str, tmp: Path, where: Path) -> float:
    repo = "someone-else/" + name.split("--")[1] + "-copy"  # a repo the catalog does not list
    put(where, repo, {"config.json": (HF / f"{name}.json").read_text()})
    return _planned(_spec(f'"{repo}"'), tmp / "s.kvp")


def _by_import(name: str, tmp: Path) -> float:
    """The spec `kvplan import` writes for a vLLM command serving the config, planned as lint plans it."""
    spec = tmp / "imported" / "s.kvp"
    spec.parent.mkdir()
    r = CliRunner().invoke(main, ["import", "--from", "vllm", "vllm serve m --tensor-parallel-size 8",
                                  "--device", "b200", "--model-config", str(HF / f"{name}.json"), "-o", str(spec)])
    assert r.exit_code == 0, r.output
    text = spec.read_text()
    assert not any(line.split("#")[0].split()[:1] == ["weights"] for line in text.splitlines()), text
    return _planned(text, spec)


@pytest.mark.parametrize(("name", "want", "fmt"), CASES, ids=[c[0] for c in CASES])
def test_every_path_plans_a_quantized_config_at_its_checkpoint_bytes(name: str, want: float, fmt: str,
                                                                     tmp_path: Path, cache: Path) -> None:  # noqa: F811
    got = {"--model-config": _by_model_config(name), "model block": _by_model_block(name, tmp_path),
           "hub id": _by_hub_id(name, tmp_path, cache), "import": _by_import(name, tmp_path)}
    for how, value in got.items():
        assert value == pytest.approx(want, rel=1e-12), how
    # and the plan names the checkpoint's format as its weights, not the bf16 default
    r = CliRunner().invoke(main, ["map", "--model-config", str(HF / f"{name}.json"), "--device", "b200",
                                  "--devices", "8", "--context", "4k", "--format", "json"])
    assert json.loads(r.stdout)["weights_dtype"] == fmt
