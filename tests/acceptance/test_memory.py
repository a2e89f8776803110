"""One memory model (kvplan.model.memory) for the planner's fit filter, its numbers, lint's `fits` and every
backend's accounting. The per-device arithmetic is written out here, independently of kvplan."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from kvplan.app.replan import emit
from kvplan.cli import main
from kvplan.lang import check_source
from kvplan.planner import plans_for
from tests.paths import ROOT
from tests.unit.app.test_memory import (
    FIT35,
    HGX_MEM,
    QWEN_D,
    QWEN_KV,
    QWEN_L,
    QWEN_P,
    GiB,
    plan_of,
    qwen_device_bytes,
)

W2 = str(ROOT / "examples" / "w2-batch32.kvp")


def lint(tmp_path: Path, text: str, name: str = "t.kvp") -> Any:
    f = tmp_path / name
    f.write_text(text)
    return CliRunner().invoke(main, ["lint", str(f)])


def test_36_layers_over_35_stages_does_not_fit_and_lint_says_so(tmp_path: Path) -> None:
    # 35 devices: tp must divide 35 and the 32 query heads, so tp = 1 and 35 stages; one holds 2 layers.
    # int4 at 0.5 B a value and vLLM's fp32 scale per token-head and side (4 B per 128 values), as the one engine
    # that stores int4 does; batch 3,200 (FIT35's 3,615 no longer fits 35 devices in total once scales count)
    by_hand = qwen_device_bytes(35, 1, 0.5 + 4 / 128, batch=3200)
    assert by_hand > HGX_MEM                                    # ≈ 301 GB on a 180 GB device
    # ... while the totals fit: what the planner checked before
    kv_total = 3200 * math.ceil(40960 / 16) * 16 * 2 * QWEN_L * QWEN_KV * QWEN_D * (0.5 + 4 / 128)
    assert QWEN_P * 2.0 + kv_total <= 35 * HGX_MEM * 0.92

    pinned = plan_of(FIT35.format(devices="35").replace("batch   = 3615", "batch   = 3200"))
    assert (pinned.n_devices, pinned.tp, pinned.pp, pinned.kv_dtype.id) == (35, 1, 35, "int4")
    assert any(u.constraint == "fits" for u in pinned.unmet)
    assert pinned.metric("device_need").value == pytest.approx(by_hand, rel=1e-9)
    unmet = next(u for u in pinned.unmet if u.constraint == "fits")
    assert "2 of 36 layers" in unmet.message

    r = lint(tmp_path, FIT35.format(devices="<= 35"))
    assert r.exit_code == 1
    assert "KV304 expected fits is true, the plan gives false" in r.stdout


CONFIG = """{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 512,
"intermediate_size": 1408, "num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 2,
"vocab_size": 32000, "max_position_embeddings": 4096, "torch_dtype": "bfloat16"}"""

TINY = """kvplan 1

model "tiny" {{
    config = "tiny/config.json"
    params = 100M
}}

device "one-gb" {{
    memory     = {memory}
    bandwidth  = 1 TB/s
    compute    = 100 TFLOPS
    partitions = 1
    host_link  = pcie5-x16
}}

deployment "t" {{
    model   = tiny
    device  = one-gb
    devices = 1

    workload {{
        batch   = 1
        context = 1k
    }}

    expect {{
        fits
    }}
}}
"""


def test_a_1_gb_device_does_not_fit_under_the_1_gib_runtime_reserve(tmp_path: Path) -> None:
    (tmp_path / "tiny").mkdir()
    (tmp_path / "tiny" / "config.json").write_text(CONFIG)
    # by hand: 100M bf16 parameters = 200 MB of weights; KV: 1k = 1,000 tokens in whole 16-token pages
    # = 1,008 slots × 2·4 layers·2 heads·64 × 2 B ≈ 2 MB; reserves max(8% of 1 GB, 1 GiB) =
    # 1,073,741,824 B > 1e9 B: nothing fits, whatever the weights
    weights, kv = 100e6 * 2, 1008 * 2 * 4 * 2 * 64 * 2
    assert weights + kv <= 0.92 * 1e9                 # the planner's old 8% check said it fits
    assert weights + kv + GiB > 1e9                   # emit's accounting says it does not
    text = TINY.format(memory="1 GB")
    r = lint(tmp_path, text)
    assert r.exit_code == 1 and "KV304 expected fits is true, the plan gives false" in r.stdout
    p = plan_of(text, str(tmp_path / "t.kvp"))
    assert any(u.constraint == "fits" for u in p.unmet)
    assert "does not fit" in " ".join(emit(p, "vllm").findings)
    # a 2 GB device holds it in both: weights + KV + 1 GiB runtime (8% = 160 MB is less) ≤ 2 GB
    p2 = plan_of(TINY.format(memory="2 GB"), str(tmp_path / "t.kvp"))
    assert not p2.unmet
    assert p2.metric("device_need").value == pytest.approx(weights + kv + GiB, rel=1e-6)
    assert not [f for f in emit(p2, "vllm", sizing="exact").findings if "does not fit" in f]


def test_emit_reserves_are_the_plans_reserves() -> None:
    """`emit --runtime-reserve` plans with that reserve too: a reserve that leaves too little room
    changes the plan instead of emitting a config that will not start."""
    spec = W2
    text = Path(spec).read_text()
    base = plans_for(check_source(text, spec))[0]
    # 4 × b200: 35.28 GB weights + 83.89 GB KV per GPU; an 80 GB runtime reserve (activations then 0:
    # 8% of 192 GB is less) leaves 112 GB, so 4 no longer fit
    assert base.n_devices == 4
    assert 35.28e9 + 83.89e9 + 80e9 > 192e9
    big = plans_for(check_source(text, spec), runtime_reserve=80e9)[0]
    assert big.n_devices > 4 and not big.unmet
    r = CliRunner().invoke(main, ["emit", spec, "--runtime-reserve", "80GB", "--target", "vllm"])
    assert r.exit_code == 0, r.stderr
    assert "does not fit" not in r.stderr
    assert f"--tensor-parallel-size {big.tp}" in r.stdout
    assert big.digest != base.digest  # the reserves are an input of the plan


@pytest.mark.parametrize("args", [["--activation-reserve=-100GB"], ["--runtime-reserve", "1e300GB"]])
def test_a_reserve_out_of_range_is_refused_naming_the_option(args: list[str]) -> None:
    r = CliRunner().invoke(main, ["emit", W2, "--target", "vllm", *args])
    assert r.exit_code == 2
    (line,) = r.stderr.strip().splitlines()
    assert args[0].split("=")[0] in line and "bytes from 0 to 2^53 B" in line and "Traceback" not in r.output
