"""Exact weight bytes from a checkpoint's config.json and safetensors index (kvplan.catalog.weight_bytes,
docs/weights.md), against the published checkpoint sizes."""

from __future__ import annotations

import json
from typing import Any

import attrs
import pytest

from kvplan import catalog
from kvplan.base.errors import ConfigError
from kvplan.catalog import weight_bytes as wb
from kvplan.catalog.hf_config import model_from_config
from kvplan.model import roofline as rf
from tests.paths import DATA

HF = DATA / "hf"

# Published sizes, accessed 2026-12-01 (docs/weights.md gives the sources):
# deepseek-ai/DeepSeek-V3 @ afb92e1fa402c2be2a9eb085312bb02e0384d6c7: its safetensors files total
# 688,586,727,753 B (https://huggingface.co/deepseek-ai/DeepSeek-V3/tree/afb92e1fa402c2be2a9eb085312bb02e0384d6c7).
DEEPSEEK_V3_FILES = 688_586_727_753
# openai/gpt-oss-120b: 65,248,815,744 B of tensors in its 15 safetensors files
# (https://huggingface.co/openai/gpt-oss-120b).
GPT_OSS_120B_TENSORS = 65_248_815_744
# TheBloke/Mistral-7B-Instruct-v0.2-AWQ: "4.15 GB" in its model card's "Provided files, and AWQ parameters"
# table (branch main: 4 bits, group size 128, "128g GEMM models only"), read in the copy of that card at
# github.com/YinanWusoymilk/hf-readme @ 1ab39f24f8f9548593ac6304367f31ae3ff45178,
# training_and_application/readme_files/TheBloke_Mistral-7B-Instruct-v0.2-AWQ.md line 91. Hugging Face prints
# file sizes in decimal GB, rounded to 10 MB.
MISTRAL_7B_AWQ_PUBLISHED = 4.15e9


def cfg(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((HF / f"{name}.json").read_text())
    return data


def test_deepseek_v3_fp8_within_2_percent_of_the_published_checkpoint() -> None:
    c = cfg("deepseek-ai--DeepSeek-V3")
    got = wb.from_config(c, "c", "c")
    assert got is not None and got.method == "fp8" and got.evidence == "derived"
    assert got.checkpoint == pytest.approx(DEEPSEEK_V3_FILES, rel=0.02)
    # by hand: 671,026,419,200 main-model parameters; the bf16 embedding and untied head are 2 × 129,280 × 7,168;
    # every other weight 1 B plus a 4 B scale per 128 × 128 block
    embed = 129_280 * 7_168
    main = 671_026_419_200
    assert got.held == pytest.approx((main - 2 * embed) * (1 + 4 / 16_384) + 2 * embed * 2, rel=1e-12)
    # about half of what the catalog's bf16 default gives (1.342 TB): the "twice the GPUs"
    assert got.held / (main * 2) == pytest.approx(0.5015, abs=1e-3)


def test_gpt_oss_120b_mxfp4_equals_the_published_tensor_bytes() -> None:
    c = cfg("openai--gpt-oss-120b")
    got = wb.from_config(c, "c", "c")
    assert got is not None and got.method == "mxfp4"
    assert got.checkpoint == pytest.approx(GPT_OSS_120B_TENSORS, rel=0.02)
    assert got.checkpoint == GPT_OSS_120B_TENSORS  # to the byte: MXFP4 blocks + E8M0 scales + bf16 rest
    # the routed experts are MXFP4 (0.53125 B per weight), their biases bf16
    m = catalog.get_model("gpt-oss-120b")
    bias = 36 * 128 * (2 * 2880 + 2880)
    assert got.routed == pytest.approx((m.params_routed - bias) * 0.53125 + bias * 2, rel=1e-12)
    assert got.held - got.routed == pytest.approx((m.params - m.params_routed) * 2, rel=1e-12)


def test_awq_int4_group_128() -> None:
    # the real Llama-3.1-70B config.json with the quantization_config AutoAWQ writes (not a hub file)
    c = dict(cfg("meta-llama--Meta-Llama-3.1-70B"), torch_dtype="float16",
             quantization_config={"bits": 4, "group_size": 128, "modules_to_not_convert": None,
                                  "quant_method": "awq", "version": "gemm", "zero_point": True})
    got = wb.from_config(c, "c", "c")
    assert got is not None and got.method == "awq"
    embed = 128_256 * 8_192
    linear = 70_553_706_496 - 2 * embed
    assert got.held == pytest.approx(linear * (0.5 + 2 / 128 + 0.5 / 128) + 2 * embed * 2, rel=1e-12)
    assert got.held == pytest.approx(39.77e9, rel=1e-3)


def test_an_awq_checkpoint_is_within_2_percent_of_its_published_size() -> None:
    # Mistral-7B-Instruct-v0.2 has the shapes of Mistral-7B-v0.1 (the config.json shipped here); AutoAWQ's
    # GEMM format stores 4-bit weights, an fp16 scale and a 4-bit zero point per group of 128 in each linear
    # layer (zero_point is AutoAWQ's default; the card states bits, group size and GEMM), and the embeddings,
    # lm_head and norms at fp16.
    c = dict(cfg("mistralai--Mistral-7B-v0.1"), torch_dtype="float16",
             quantization_config={"bits": 4, "group_size": 128, "quant_method": "awq", "version": "gemm",
                                  "zero_point": True})
    got = wb.from_config(c, "c", "c")
    assert got is not None and got.method == "awq"
    embed = 32_000 * 4_096
    norms = (2 * 32 + 1) * 4_096
    linear = 7_241_732_096 - 2 * embed - norms
    exact = linear * (0.5 + 2 / 128 + 0.5 / 128) + (2 * embed + norms) * 2
    # kvplan counts the norms' 0.27 M parameters at the linear layers' rate: 0.01% under the exact sum
    assert got.held < exact and got.held == pytest.approx(exact, rel=1e-4)
    assert got.held == pytest.approx(MISTRAL_7B_AWQ_PUBLISHED, rel=0.02)


def test_gptq_and_compressed_tensors() -> None:
    base = cfg("meta-llama--Meta-Llama-3.1-8B")
    embed = 128_256 * 4_096
    linear = 8_030_261_248 - 2 * embed
    gptq = wb.from_config(dict(base, quantization_config={"quant_method": "gptq", "bits": 4, "group_size": 128}),
                          "c", "c")
    assert gptq is not None and gptq.held == pytest.approx(linear * (0.5 + 2.5 / 128) + 4 * embed, rel=1e-12)
    ct = {"quant_method": "compressed-tensors", "config_groups": {"group_0": {"weights": {
        "num_bits": 4, "type": "int", "strategy": "group", "group_size": 128, "symmetric": True}}}}
    got = wb.from_config(dict(base, quantization_config=ct), "c", "c")
    assert got is not None and got.held == pytest.approx(linear * (0.5 + 2 / 128) + 4 * embed, rel=1e-12)


def test_the_index_total_size_is_reported_and_keeps_the_routed_share() -> None:
    c = cfg("openai--gpt-oss-120b")
    derived = wb.from_config(c, "c", "c")
    m = catalog.get_model("gpt-oss-120b")
    got = wb.from_index({"metadata": {"total_size": 65_000_000_000}}, c, derived, "idx", m.params, m.params_routed, 2)
    assert got is not None and got.evidence == "reported" and got.held == 65e9
    assert derived is not None
    assert got.routed / got.held == pytest.approx(derived.routed / derived.held, rel=1e-12)
    assert wb.from_index({"metadata": {}}, c, derived, "idx", m.params, m.params_routed, 2) is None


def test_moe_reads_the_touched_experts_at_their_own_width() -> None:
    c = cfg("openai--gpt-oss-120b")
    m = model_from_config(c, id="oss")
    exact = wb.from_config(c, "c", "c")
    assert exact is not None
    q = attrs.evolve(m, weight_bytes=exact)
    frac = float(rf.experts_touched_fraction(q, 1))
    assert rf.weight_bytes_held(q, 2.0) == exact.held
    assert float(rf.weight_bytes_read(q, 1, 2.0)) == pytest.approx(exact.held - exact.routed + exact.routed * frac)
    # the old estimate, params × 2 B, would read the experts at 16 bits: nearly 4× the expert bytes
    assert float(rf.weight_bytes_read(m, 1, 2.0)) > 1.5 * float(rf.weight_bytes_read(q, 1, 2.0))


@pytest.mark.parametrize("q,words", [
    ({"quant_method": "bitsandbytes", "load_in_4bit": True}, "quantization method 'bitsandbytes' is not one"),
    ({"bits": 4}, "has no quant_method"),
    ({"quant_method": "fp8", "weight_block_size": [128]}, "weight_block_size"),
    ({"quant_method": "awq", "bits": "4", "group_size": 128}, "'bits' must be an integer"),
])
def test_bad_quantization_configs_name_what_is_wrong(q: dict[str, Any], words: str) -> None:
    with pytest.raises(ConfigError, match=words.replace("(", r"\(")):
        wb.from_config(dict(cfg("meta-llama--Meta-Llama-3.1-8B"), quantization_config=q), "c", "c")


@pytest.mark.parametrize("change,words", [
    ({"quantization_config": {"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": "no"}},
     "'zero_point' must be true or false"),
    ({"quantization_config": {"quant_method": "fp8", "weight_block_size": [128, True]}}, "'weight_block_size'"),
    ({"quantization_config": {"quant_method": "compressed-tensors", "config_groups": {"g": {"weights": {
        "num_bits": 4, "strategy": "group", "group_size": 128, "symmetric": "yes"}}}}}, "'symmetric'"),
    ({"quantization_config": {"quant_method": "fp8"}, "vocab_size": "128256"}, "'vocab_size' must be an integer"),
    ({"quantization_config": "fp8"}, "'quantization_config' must be an object"),
])
def test_a_value_of_the_wrong_type_is_one_error_naming_the_file_and_key(change: dict[str, Any], words: str) -> None:
    # a string where a flag belongs was read as true; a string where a count belongs was a TypeError
    with pytest.raises(ConfigError, match=words) as e:
        wb.from_config(dict(cfg("meta-llama--Meta-Llama-3.1-8B"), **change), "ckpt/config.json", "c")
    assert e.value.span is not None and e.value.span.file == "ckpt/config.json"
    assert "\n" not in e.value.message


def test_the_catalog_plans_deepseek_v3_and_gpt_oss_at_their_published_checkpoints() -> None:
    # the catalog entries, not a checkpoint named in a spec: within 2% of the published sizes, and equal to the
    # figures computed by hand from each config.json's quantization_config
    ds = catalog.get_model("deepseek-v3")
    assert ds.weight_bytes is not None and ds.weight_bytes.method == "fp8"
    assert ds.weight_bytes.checkpoint == pytest.approx(DEEPSEEK_V3_FILES, rel=0.02)
    embed, per = 129_280 * 7_168, 1 + 4 / 16_384  # fp8 with a float32 scale per 128 × 128 block
    assert ds.weight_bytes.held == pytest.approx((ds.params - 2 * embed) * per + 2 * embed * 2, abs=1)
    assert ds.weight_bytes.routed == pytest.approx(ds.params_routed * per, abs=1)
    oss = catalog.get_model("gpt-oss-120b")
    assert oss.weight_bytes is not None and oss.weight_bytes.method == "mxfp4"
    assert oss.weight_bytes.checkpoint == pytest.approx(GPT_OSS_120B_TENSORS, rel=0.02)
    bias = 36 * 128 * (2 * 2880 + 2880)  # the expert biases stay bf16; the expert weights 4 bits + E8M0 per 32
    experts = (oss.params_routed - bias) * (0.5 + 1 / 32) + bias * 2
    assert oss.weight_bytes.held == pytest.approx(experts + (oss.params - oss.params_routed) * 2, abs=1)
    # what the issue measured: about half of P × 2 B for DeepSeek-V3, a quarter for gpt-oss
    assert 0.67e12 < ds.weight_bytes.held < 0.69e12 and ds.params * 2 > 1.34e12
    assert 64e9 < oss.weight_bytes.held < 66e9 and oss.params * 2 > 233e9
