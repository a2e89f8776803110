"""Each engine target written from the plan made for its engine (kvplan/app/replan.py; issue 11, build 3).

The H100 `engine = any` W2 example: the plan picks int4 KV (only vLLM stores it); H100 has no FP4, so
no file may name nvfp4, and SGLang and TensorRT-LLM get plans of their own (or an error where none fits).
"""

from __future__ import annotations

import math

import pytest
import yaml

from kvplan.app.replan import emit, written_from
from kvplan.catalog import get_device, get_model
from kvplan.catalog.engines import ENGINES, block_sizes_for, kv_dtypes_for, kv_refusal
from kvplan.planner import for_engine, with_engines
from kvplan.planner.plan import Plan
from tests.unit.app.test_backends import files, flags, plans, shell
from tests.unit.app.test_memory import plan_of
from tests.unit.planner.test_suggestions import lint_text

ANY = "tests/data/emit/w2-h100-any.kvp"      # devices = auto
EIGHT = "tests/data/emit/w2-h100-8.kvp"      # devices = 8


def _kv_name(target: str, text: str) -> str:
    if target == "trtllm":
        return str(yaml.safe_load(text)["kv_cache_config"]["dtype"])
    return str(flags(shell(text)[1])[1]["--kv-cache-dtype"])


def _config(target: str, out_files: dict[str, str]) -> str:
    if target == "trtllm":
        return out_files["trtllm.yaml"]
    # a layout over nodes is one file a host, each naming the same dtype
    return out_files.get(f"{target}.sh") or out_files[f"{target}-host0.sh"]


# ------------------------------------------------------------------ the engines' records

def test_the_records_say_what_the_engines_refuse() -> None:
    h100, b200 = get_device("h100-sxm"), get_device("b200")
    llama, deepseek = get_model("llama-3-70b"), get_model("deepseek-v3")
    vllm, sglang, trtllm = ENGINES["vllm"], ENGINES["sglang"], ENGINES["trtllm"]
    # SGLang: no int4/int2 KV at all; nvfp4 only on SM100/SM120, never for an MLA model
    assert kv_dtypes_for(sglang, h100, llama) == ("bf16", "fp16", "fp8")
    assert "fp4" in kv_dtypes_for(sglang, b200, llama) and "fp4" not in kv_dtypes_for(sglang, b200, deepseek)
    refusal = kv_refusal(sglang, "fp4", h100, llama)
    assert refusal is not None and "requires Blackwell SM100 or SM120" in refusal
    # vLLM: nvfp4 is refused for MLA, on any device
    mla = kv_refusal(vllm, "fp4", b200, deepseek)
    assert mla is not None and "not supported with MLA" in mla and "vllm/config/vllm.py" in mla
    assert kv_refusal(vllm, "fp4", b200, llama) is None and kv_refusal(vllm, "int4", h100, llama) is None
    # vLLM's per-token-head int8/int4 run on TRITON_ATTN only: no MLA backend takes them
    assert kv_dtypes_for(vllm, get_device("mi300x"), deepseek) == ("bf16", "fp16", "fp8")
    # FP4 needs FP4 hardware on every engine; `any` too
    assert "fp4" not in kv_dtypes_for(trtllm, h100, llama) and "fp4" not in kv_dtypes_for(ENGINES["any"], h100, llama)


DEEPSEEK_B200 = """kvplan 1

deployment "ds" {{
    model   = deepseek-v3
    weights = fp8
    device  = b200
    devices = <= 8
    engine  = {engine}

    workload {{
        batch   = 32
        context = 64k
    }}

    quality {{
        budget = near-lossless
    }}
}}
"""


def test_the_planner_never_picks_what_the_engine_refuses() -> None:
    # SGLang has no int4: on Blackwell an MHA model gets nvfp4, an MLA model (trtllm_mla: no NVFP4 prefill) fp8
    sg = plan_of(DEEPSEEK_B200.format(engine="sglang"))
    assert sg.kv_dtype.id == "fp8"
    kv = next(d for d in sg.decisions if d.domain == "quantization")
    assert any("MLA" in str(getattr(o.reason, "reason", o.reason)) for o in kv.options if o.choice == "fp4")
    llama = plan_of(DEEPSEEK_B200.format(engine="sglang").replace("deepseek-v3", "llama-3-70b"))
    assert llama.kv_dtype.id == "fp4"
    assert for_engine(plan_of(DEEPSEEK_B200.format(engine="any")), "sglang").kv_dtype.id == "fp8"
    # vLLM's target of that SGLang plan is written from vLLM's own plan: never nvfp4 for DeepSeek
    out = emit(sg, "vllm")
    assert out.files and "nvfp4" not in files(out)["vllm.sh"]


@pytest.mark.parametrize(("model", "pages"), [("deepseek-v3", (32, 64)), ("llama-3-70b", (16, 32, 64, 128))])
def test_sglangs_own_plan_on_blackwell_pages_as_sglang_runs_it(model: str, pages: tuple[int, ...]) -> None:
    # SGLang 0.5.23 on Blackwell (arg_groups/overrides.py:1146-1199): trtllm_mha takes 16-128-token pages, the MLA
    # backends 32 or 64, and any other --page-size (its default 1 too) becomes 64. Its own plan pages in 64, what
    # SGLang runs when no page is given, and emit writes that page as planned: no finding moves it
    text = DEEPSEEK_B200.replace("deepseek-v3", model)
    b200, h100 = get_device("b200"), get_device("h100-sxm")
    assert block_sizes_for(ENGINES["sglang"], b200, get_model(model)) == pages
    assert block_sizes_for(ENGINES["sglang"], h100, get_model(model)) == (1, 16, 32, 64, 128)
    for p in (plan_of(text.format(engine="sglang")), for_engine(plan_of(text.format(engine="any")), "sglang")):
        assert p.block_size == 64
        out = emit(p, "sglang")
        assert out.files and not [f for f in out.findings if "→" in f], out.findings
        assert flags(shell(files(out)["sglang.sh"])[1])[1]["--page-size"] == "64"
    on_hopper = plan_of(text.format(engine="sglang").replace("b200", "h100-sxm"))
    assert on_hopper.block_size == 1        # SGLang's default page elsewhere (--page-size default 1 on CUDA)


def test_a_pinned_page_sglang_changes_on_blackwell_is_a_lint_error() -> None:
    text = DEEPSEEK_B200.format(engine="sglang").replace(
        "    quality {", "    pin {\n        block_size = 1\n    }\n\n    quality {")
    codes = [(d.code, d.message) for d in lint_text(text, "t.kvp")]
    assert ("KV305", "engine sglang does not accept 1-token pages on b200") in codes, codes
    assert not [d for d in lint_text(text.replace("b200", "h100-sxm"), "t.kvp") if "pages" in d.message]


# ------------------------------------------------------------------ the H100 example, end to end

def test_the_h100_any_plan_is_int4_and_each_engine_plans_for_itself() -> None:
    (p,) = plans(ANY)
    assert p.kv_dtype.id == "int4" and p.scenario.engine == "any"
    q = with_engines(p)
    assert [e.scenario.engine for e in q.engines] == ["vllm", "sglang", "trtllm"]
    for own in q.engines:
        sc = own.scenario
        # every engine's own plan stores KV in a dtype that engine runs on h100-sxm
        assert own.kv_dtype.id in kv_dtypes_for(ENGINES[sc.engine], sc.device, sc.model)
        assert own.spec_engine == "any"
    vllm, sglang, trtllm = q.engines
    # vLLM runs the spec's choices as they are; its plan is its own only in its expected factors (vLLM's
    # reported t_layer, kvplan/catalog/performance.toml [engine.vllm], where engine any has none)
    assert (vllm.kv_dtype.id, vllm.n_devices, vllm.tp, vllm.pp) == (p.kv_dtype.id, p.n_devices, p.tp, p.pp)
    assert vllm.digest != p.digest
    assert sglang.kv_dtype.id == trtllm.kv_dtype.id == "fp8"


@pytest.mark.parametrize("target", ["vllm", "sglang", "trtllm"])
def test_no_file_names_a_dtype_its_engine_refuses_on_h100(target: str) -> None:
    for spec in (ANY, EIGHT):
        (p,) = plans(spec)
        out = emit(p, target, spec=spec)
        for name, text in files(out).items():
            assert "nvfp4" not in text, (spec, name)
        if not out.files:
            continue
        name = _kv_name(target, _config(target, files(out)))
        stored = {v: k for k, v in ENGINES[target].kv_names.items()}
        kv = stored.get(name, "bf16" if name == "auto" else name)
        assert kv_refusal(ENGINES[target], kv, p.scenario.device, p.scenario.model) is None, (spec, name)


def test_a_replanned_targets_numbers_are_its_own_plans() -> None:
    (p,) = plans(ANY)
    out = emit(p, "trtllm", spec=ANY)
    own = written_from(p, "trtllm")
    assert own is not p and own.kv_dtype.id == "fp8" and out.planned and not out.errors
    assert "planned for trtllm" in out.planned[0] and "kv_dtype int4 → fp8" in out.planned[0]
    cfg = yaml.safe_load(files(out)["trtllm.yaml"])
    assert cfg["kv_cache_config"]["dtype"] == "fp8"
    assert (cfg["tensor_parallel_size"], cfg["pipeline_parallel_size"]) == (own.tp, own.pp)
    assert own.n_devices != p.n_devices   # fp8 on 8 H100s does not fit: its plan takes more of them
    rows = dict(out.capacity)
    # the pool holds its own plan's tokens: KV bytes at fp8 / bytes per token (80 layers × 8 KV heads × 128 × 2 × 1 B)
    per_token = 80 * 8 * 128 * 2 * 1.0
    assert rows["plan_kv_tokens"].value == pytest.approx(own.metric("kv_bytes").value / per_token, rel=1e-12)
    assert rows["plan_kv_tokens"].value == pytest.approx(32 * math.ceil(128_000 / 32) * 32, rel=1e-12)
    assert rows["kv_tokens"].value >= rows["plan_kv_tokens"].value
    # the file says whose plan it is
    text = files(out)["trtllm.yaml"]
    assert f"plan {own.digest}" in text and "# planned for trtllm" in text and p.digest not in text


def test_a_target_whose_own_plan_does_not_fit_is_an_error_with_nothing_written() -> None:
    (p,) = plans(EIGHT)
    assert p.kv_dtype.id == "int4" and p.n_devices == 8 and not p.unmet
    for target in ("sglang", "trtllm"):
        out = emit(p, target, spec=EIGHT)
        assert not out.files and out.errors and set(out.errors) <= set(out.findings)
        assert "no plan fits" in out.errors[0] and "does not fit" in out.errors[0]
        assert f"nothing written for {target}" in out.errors[0]
    ok = emit(p, "vllm", spec=EIGHT)
    assert ok.files and not ok.errors   # vLLM runs the spec's choices as they are, at its own factors
    assert len(ok.planned) == 1 and ok.planned[0].endswith("the same choices as the spec's plan (engine any)")


@pytest.mark.parametrize(("engine", "nearest"), [("sglang", "fp8"), ("trtllm", "int8")])
def test_a_pinned_dtype_moved_to_one_that_no_longer_fits_is_an_error(engine: str, nearest: str) -> None:
    text = open(EIGHT, encoding="utf-8").read().replace(
        "    quality {", "    pin {\n        kv_dtype = int4\n    }\n\n    quality {")
    p: Plan = plan_of(text.replace("engine  = any", f"engine  = {engine}"))
    # the pin holds; neither engine stores int4: the nearest each runs is 8-bit, 2 B per value, and W2's batch of
    # 32 × 128,000 tokens × 80 layers × 8 KV heads × 128 × 2 (K, V) × 1 B / tp 8 = 83.9 GB per GPU of 80 GB, with
    # 17.6 GB of weights beside it: past any fraction of the device (SGLang and TensorRT-LLM size their own pools)
    assert p.kv_dtype.id == "int4" and p.n_devices == 8
    assert 32 * 128_000 * 80 * 8 * 128 * 2 / 8 + 17.6e9 > 80e9
    for sizing in ("fill", "exact"):
        out = emit(p, engine, sizing=sizing)
        assert not out.files and out.errors and "does not fit" in out.errors[0]
        assert f"int4 → {nearest}" in out.errors[0] and "nothing written" in out.errors[0]
        assert "nvfp4" not in out.errors[0]   # never FP4 on a device without it


def test_flashinfers_fallback_that_no_longer_fits_is_an_error() -> None:
    (p,) = plans(EIGHT)
    out = emit(p, "flashinfer")
    assert not out.files and out.errors and "int4 → fp8" in out.errors[0] and "does not fit" in out.errors[0]
    (small,) = plans("tests/data/emit/int2-any.kvp")   # 2-bit on 4 × B200: fp8 is 4x the bytes, past 192 GB
    assert emit(small, "flashinfer").errors
    fits = plans("examples/llama-3.1-8b-h100-custom.kvp")[0]
    assert emit(fits, "flashinfer").files
