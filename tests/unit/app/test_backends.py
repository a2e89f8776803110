"""`kvplan emit`: every artifact parsed with its format's own parser (shlex, yaml.safe_load, json), every
flag name and value checked against the backend's capability table and against a copy of
shared/reference/engines.md, and the KV capacity each engine would allocate from the emitted settings
recomputed here from engines.md's formulas and compared with the plan's footprint.

Regenerate the goldens with `python -m pytest tests/unit/app/test_backends.py --update-goldens` and review the diff.
"""

from __future__ import annotations

import json
import math
import re
import shlex
import shutil
from fractions import Fraction
from pathlib import Path
from typing import Any, Callable, Optional

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from kvplan import catalog
from kvplan.app.digest import check_digests
from kvplan.app.replan import emit, written_from
from kvplan.catalog.engines import ENGINES
from kvplan.engines import TARGETS, Reserves, capacity_line
from kvplan.engines import lmcache as lmc
from kvplan.engines import sglang as sgl
from kvplan.engines import trtllm as trt
from kvplan.engines import vllm as vll
from kvplan.engines.common import HEADER, GiB, nearest_dtype
from kvplan.lang import check_file, check_source
from kvplan.model.pools.trtllm import fraction_up
from kvplan.planner import plans_for
from kvplan.planner.plan import Plan
from tests.paths import DATA, ROOT

GOLDEN = DATA / "golden" / "emit"
ENGINES_MD = (DATA / "reference" / "engines.md").read_text(encoding="utf-8")
#: The user's page of engine facts: every flag a writer may write is documented there, with its source.
DOCS_ENGINES_MD = (ROOT / "docs" / "engines.md").read_text(encoding="utf-8")
EXAMPLES = ["w2-batch32", "deepseek-v3-mi300x", "llama-3.1-8b-h100-custom"]
MINE = ("vllm", "sglang", "trtllm", "lmcache")
ENGINE_TARGETS = ("vllm", "sglang", "trtllm")
SPECS = [f"examples/{n}.kvp" for n in EXAMPLES] + sorted(
    f"tests/data/emit/{p.name}" for p in (DATA / "emit").glob("*.kvp"))
BOOLEAN_FLAGS = {"--enable-prefix-caching", "--disable-prefix-caching", "--disable-radix-cache",
                 "--enable-hierarchical-cache", "--enable-lmcache"}
NEVER_VLLM = {"--cpu-offload-gb", "--swap-space", "--calculate-kv-scales"}


# ------------------------------------------------------------------ helpers

def plans(spec: str) -> list[Plan]:
    result = check_file(str(ROOT / spec))
    assert result.ok, result.diagnostics
    return plans_for(result)


def section(engine: str, text: str = ENGINES_MD) -> str:
    """The part of engines.md (the reference's, or `text`) about one engine: from its `## ` heading to the next."""
    heads = {"vllm": "## vLLM", "sglang": "## SGLang", "trtllm": "## TensorRT-LLM", "lmcache": "## LMCache"}
    start = text.index(heads[engine])
    end = text.find("\n## ", start + 1)
    return text[start:end if end > 0 else None]


def shell(text: str) -> tuple[dict[str, str], list[str]]:
    """The exports and the exec'd command of an emitted launcher, parsed by shlex."""
    body = "\n".join(line for line in text.splitlines() if not line.startswith("#"))
    env: dict[str, str] = {}
    argv: list[str] = []
    for line in body.replace("\\\n", " ").splitlines():
        words = shlex.split(line)
        if words[:1] == ["export"]:
            key, _, value = words[1].partition("=")
            env[key] = value
        elif words[:1] == ["exec"]:
            argv = words[1:]
    assert argv, text
    return env, argv


def flags(argv: list[str]) -> tuple[list[str], dict[str, Any]]:
    """(program words, {flag: value or True}); a flag may appear once."""
    i = 3 if argv[:2] == ["python", "-m"] else 0
    while i < len(argv) and not argv[i].startswith("--"):
        i += 1
    program, out = argv[:i], {}
    while i < len(argv):
        flag = argv[i]
        assert flag.startswith("--"), argv
        assert flag not in out, f"{flag} twice"
        if flag in BOOLEAN_FLAGS:
            out[flag] = True
            i += 1
        else:
            out[flag] = argv[i + 1]
            i += 2
    return program, out


def token_bytes(p: Plan, width: float, layers: Optional[int] = None) -> float:
    """engines.md: page bytes per layer = KV heads per TP shard × block × (head_size + head_size_v) ×
    dtype bytes (MLA: one latent per token per layer), per token, over the layers one GPU holds."""
    m = p.scenario.model
    n_layers = layers if layers is not None else -(-m.n_layers // p.pp)
    if m.kv_kind == "mla":
        return n_layers * (m.mla_kv_rank + m.mla_rope_dim) * width
    heads = max(1, m.n_kv // p.tp)
    return n_layers * heads * (m.head_dim + (m.v_head_dim or m.head_dim)) * width


def vllm_token_bytes(p: Plan, kv_dtype: str) -> float:
    """vLLM 0.33.0's page bytes per token on one GPU: TRITON_ATTN's per-token-head modes add one fp32 scale per
    K/V side and token-head (int4 packs 2 values a byte: 2 × (d/2 + 4) B), nvfp4 an FP8 scale per 16 values."""
    m = p.scenario.model
    width = {"bfloat16": 2.0, "float16": 2.0, "fp8": 1.0, "int8_per_token_head": 1.0, "int4_per_token_head": 0.5,
             "nvfp4": 0.5}[kv_dtype]
    if m.kv_kind == "mla":
        return token_bytes(p, width)
    d, dv = m.head_dim, m.v_head_dim or m.head_dim
    scale = {"int8_per_token_head": 8.0, "int4_per_token_head": 8.0, "nvfp4": (d + dv) / 16}.get(kv_dtype, 0.0)
    return -(-m.n_layers // p.pp) * max(1, m.n_kv // p.tp) * ((d + dv) * width + scale)


def plan_tokens(p: Plan) -> float:
    """The token slots the plan's KV bytes hold: KV bytes per GPU / bytes per token per GPU."""
    m = p.scenario.model
    return p.metric("kv_bytes").value / p.n_devices / token_bytes(p, p.kv_width, m.n_layers / p.pp)


def weights_per_gpu(p: Plan) -> float:
    """The most loaded GPU's weights: its stage holds ⌈L/pp⌉ of L layers, 1/tp of each."""
    m = p.scenario.model
    return m.params * p.scenario.weights.width * math.ceil(m.n_layers / p.pp) / (m.n_layers * p.tp)


def files(out: Any) -> dict[str, str]:
    return {f.name: f.text for f in out.files}


def all_emits() -> list[tuple[str, Plan, str]]:
    return [(spec, p, t) for spec in SPECS for p in plans(spec) for t in MINE]


CASES = all_emits()
IDS = [f"{Path(s).stem}:{p.scenario.name}:{t}" for s, p, t in CASES]


# ------------------------------------------------------------------ capability tables vs engines.md

@pytest.mark.parametrize("target", ENGINE_TARGETS)
def test_capability_table_agrees_with_the_planner(target: str) -> None:
    b, e = TARGETS[target], ENGINES[target]
    assert set(b.kv_dtypes) == set(e.kv_dtypes)
    assert b.block_sizes == e.block_sizes
    assert b.default_block == e.default_block
    assert b.eviction == e.eviction is False
    assert b.prefix_caching == e.prefix_caching
    assert e.version.startswith(b.version)
    assert ("host" in b.tiers) == e.host_tier


def _listed(sec: str, after: str, stop: str) -> set[str]:
    start = sec.index(after) + len(after)
    return {w.strip(" `.;\n") for w in re.split(r"[,|\n]", sec[start:sec.index(stop, start)]) if w.strip(" `.;\n")}


def test_engine_dtype_names_are_the_ones_engines_md_lists() -> None:
    vllm_ok = _listed(section("vllm"), "accepted:", "Plain")
    assert set(vll.KV_DTYPES.values()) <= vllm_ok
    assert "int8" not in vll.KV_DTYPES.values() and "int4" not in vll.KV_DTYPES.values()  # rejected plainly
    sglang_ok = _listed(section("sglang"), "`--kv-cache-dtype` ", "(no int8")
    assert set(sgl.KV_DTYPES.values()) <= sglang_ok
    trt_ok = _listed(section("trtllm"), "`dtype` (", ")")
    assert set(trt.KV_DTYPES.values()) <= trt_ok == {"auto", "fp8", "nvfp4"}
    # INT8 is one of TensorRT-LLM's KV quantization algorithms, the reason int8 is in its table at all
    assert "algorithms: FP8, INT8, NVFP4" in " ".join(section("trtllm").split())


@pytest.mark.parametrize("target", MINE)
def test_every_flag_name_appears_in_engines_md(target: str) -> None:
    # the flag set is the settings table's (kvplan.engines.common.flag_set); each is documented in docs/engines.md
    sec = section(target, DOCS_ENGINES_MD)
    for name in TARGETS[target].flags:
        assert name in sec, f"{target}: {name} is not in docs/engines.md's {target} section"
    for gone in NEVER_VLLM:
        assert gone not in TARGETS[target].flags


def test_nearest_dtype_is_never_lossier() -> None:
    assert nearest_dtype("int2", list(vll.KV_DTYPES)) == "int4"   # same width, same family
    assert nearest_dtype("int2", list(sgl.KV_DTYPES)) == "fp4"
    assert nearest_dtype("int4", list(trt.KV_DTYPES)) == "fp4"
    assert nearest_dtype("int8", list(sgl.KV_DTYPES)) == "fp8"
    assert nearest_dtype("bf16", list(sgl.KV_DTYPES)) == "bf16"


# ------------------------------------------------------------------ every artifact, parsed

def _written_from(p: Plan, target: str, name: str) -> Plan:
    """The plan a file is written from: the one made for its engine (an engine target, a loader
    lmcache-<engine>.sh, lmcache.yaml from the first loader's), else the spec's (kvplan/app/replan.py)."""
    loader = name.removeprefix("lmcache-").removesuffix(".sh") if name.startswith("lmcache-") else None
    engine = loader or (target if target in ("vllm", "sglang", "trtllm") else None)
    if name == "lmcache.yaml" and p.scenario.engine not in ("vllm", "sglang"):
        engine = "vllm"
    return p if engine is None else written_from(p, engine)


def _check_header(text: str, spec: str, p: Plan) -> None:
    head = text.splitlines()[1 if text.startswith("#!") else 0]
    m = HEADER.match(head)
    assert m, head
    assert m["spec"] == spec and m["scenario"] == p.scenario.name and m["digest"] == p.digest
    assert ("# planned for " in text) == bool(p.spec_engine)


@pytest.mark.parametrize("spec,p,target", CASES, ids=IDS)
def test_artifacts_parse_and_use_only_known_names(spec: str, p: Plan, target: str) -> None:
    out = emit(p, target, spec=spec)
    assert set(out.findings) <= set(out.warnings)
    sc, spec_plan = p.scenario, p
    for name, text in files(out).items():
        p = _written_from(spec_plan, target, name)  # its choices are the plan it is written from
        _check_header(text, spec, p)
        if name.endswith(".sh"):
            env, argv = shell(text)
            program, fl = flags(argv)
            engine = "vllm" if program[:2] == ["vllm", "serve"] else "sglang" if "sglang.launch_server" in program \
                else "trtllm"
            backend = TARGETS[engine]
            assert set(fl) <= set(backend.flags), set(fl) - set(backend.flags)
            for f in fl:
                assert f in section(engine)
            for k in env:
                assert k in backend.flags + lmc.FLAGS and k in ENGINES_MD
            if engine == "vllm":
                assert not any(gone in text for gone in NEVER_VLLM)
                assert program[2] == (sc.model.hf_id or sc.model.id)
                assert not NEVER_VLLM & set(fl)
                assert fl["--kv-cache-dtype"] in vll.KV_DTYPES.values()
                assert int(fl["--block-size"]) in backend.block_sizes
                assert int(fl["--tensor-parallel-size"]) == p.tp
                assert int(fl.get("--pipeline-parallel-size", 1)) == p.pp
                assert int(fl["--max-model-len"]) == sc.context and int(fl["--max-num-seqs"]) == sc.batch
                assert ("--enable-prefix-caching" in fl) == p.prefix_caching != ("--disable-prefix-caching" in fl)
                # one memory setting: the fraction (fill sizing, the default) or the byte count (exact), not both
                assert ("--gpu-memory-utilization" in fl) != ("--kv-cache-memory-bytes" in fl)
                if "--kv-transfer-config" in fl:
                    cfg = json.loads(fl["--kv-transfer-config"])
                    assert cfg == {"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both"}
                    assert env["LMCACHE_CONFIG_FILE"].endswith("/lmcache.yaml")
                if "--kv-offloading-backend" in fl:
                    assert fl["--kv-offloading-backend"] in ("native", "lmcache")
            elif engine == "sglang":
                assert fl["--model-path"] == (sc.model.hf_id or sc.model.id)
                assert fl["--kv-cache-dtype"] in sgl.KV_DTYPES.values()
                assert int(fl["--page-size"]) in backend.block_sizes
                assert int(fl["--tp-size"]) == p.tp
                assert 0 < float(fl["--mem-fraction-static"]) <= 1 or out.findings
                assert ("--disable-radix-cache" in fl) == (not p.prefix_caching)
                if "--enable-lmcache" in fl:
                    assert fl["--lmcache-config-file"].endswith("/lmcache.yaml")
            else:
                assert program == ["trtllm-serve", sc.model.hf_id or sc.model.id]
                assert fl["--config"].endswith("/trtllm.yaml")
        elif name == "trtllm.yaml":
            body = yaml.safe_load(text)
            assert set(body) == {"tensor_parallel_size", "pipeline_parallel_size", "max_batch_size", "max_seq_len",
                                 "kv_cache_config"}
            assert (body["tensor_parallel_size"], body["pipeline_parallel_size"]) == (p.tp, p.pp)
            assert (body["max_batch_size"], body["max_seq_len"]) == (sc.batch, sc.context)
            kv = body["kv_cache_config"]
            assert set(kv) <= set(trt.FLAGS)
            assert kv["dtype"] in trt.KV_DTYPES.values()
            assert kv["tokens_per_block"] in trt.BACKEND.block_sizes
            assert "max_tokens" not in kv or kv["max_tokens"] % kv["tokens_per_block"] == 0
            assert kv["enable_block_reuse"] is p.prefix_caching
            assert 0 < kv["free_gpu_memory_fraction"] < 1  # calculate_max_num_blocks asserts < 1.0
        elif name == "lmcache.yaml":
            body = yaml.safe_load(text)
            assert set(body) <= set(lmc.FLAGS)
            assert body["remote_serde"] == "naive"  # lossless; never the `kivi` stub
            assert body["chunk_size"] == 256 and body["local_cpu"] is True
        else:
            pytest.fail(f"unexpected file {name}")


# ------------------------------------------------------------------ memory arithmetic


def emit_exact(p: Plan, target: str, spec: str = "") -> Any:
    """The target's files sized to exactly the plan's pool (emit --sizing exact)."""
    return emit(p, target, spec=spec, sizing="exact")


def trtllm_token_bytes(p: Plan, dtype: str) -> int:
    """TensorRT-LLM's get_cache_bytes_per_token (resource_manager.py): x = 2 · layers · d · ceil(n_kv / tp)
    elements, the heads each rank allocates (MLA: layers · latent); 2 B, 1 B, or ceil(x/2) + ceil(x/16) B for
    NVFP4."""
    m = p.scenario.model
    layers = -(-m.n_layers // p.pp)
    heads = -(-m.n_kv // p.tp)
    x = layers * (m.mla_kv_rank + m.mla_rope_dim) if m.kv_kind == "mla" else 2 * layers * m.head_dim * heads
    if dtype == "nvfp4":
        return -(-x // 2) + -(-x // 16)
    # `auto` for an int8 or int4 plan is TensorRT-LLM's INT8 KV (the nearest it has to int4), 1 B per element
    return x if dtype == "fp8" or (dtype == "auto" and p.kv_dtype.id.startswith("int")) else 2 * x


def sglang_cell(p: Plan, dtype: str) -> float:
    """SGLang's cell (pool_configurator.py): heads · (d + d_v) · layers · bytes; nvfp4 on SM100 heads · (d/2 + d/16)
    · 2 · layers (FP4 data and one FP8 scale layout)."""
    m = p.scenario.model
    if dtype == "nvfp4":
        layers = -(-m.n_layers // p.pp)
        return max(1, m.n_kv // p.tp) * (m.head_dim // 2 + m.head_dim // 16) * 2 * layers
    width = {"bf16": 2.0, "auto": 2.0, "fp8_e4m3": 1.0}[dtype]
    return token_bytes(p, width)


def launcher(fs: dict[str, str], target: str) -> tuple[str, str]:
    """The file an engine target sizes its pool in, and its text: a layout over nodes is one file a host, each
    stating the same per-GPU pool (host 0's is taken)."""
    name = "trtllm.yaml" if target == "trtllm" else f"{target}.sh" if f"{target}.sh" in fs else f"{target}-host0.sh"
    return name, fs[name]


def engine_tokens(p: Plan, name: str, text: str, reserves: float = 0.0) -> int:
    """The tokens the engine would allocate per GPU from the emitted settings (the engines' formulas,
    docs/engine-memory.md); `reserves` is the activation + runtime reserve per GPU (TensorRT-LLM's profiled peak)."""
    sc = p.scenario
    if name.endswith("trtllm.yaml"):
        kv = yaml.safe_load(text)["kv_cache_config"]
        per_token = trtllm_token_bytes(p, kv["dtype"])
        free = sc.device.memory - weights_per_gpu(p) - reserves
        by_fraction = int(kv["free_gpu_memory_fraction"] * free / per_token)
        tokens = min(kv["max_tokens"], by_fraction) if "max_tokens" in kv else by_fraction
        return tokens // kv["tokens_per_block"] * kv["tokens_per_block"]
    _, argv = shell(text)
    program, fl = flags(argv)
    if program[0] == "vllm":
        block = int(fl["--block-size"])
        per_block = vllm_token_bytes(p, fl["--kv-cache-dtype"]) * block
        if "--kv-cache-memory-bytes" in fl:
            pool = int(fl["--kv-cache-memory-bytes"])
        else:  # fill: vLLM's requested memory less weights, non-torch, activation peak, CUDA graphs (assumed)
            mem = p.scenario.device.memory
            pool = math.floor(math.ceil(mem * float(fl["--gpu-memory-utilization"])) - weights_per_gpu(p) - GiB
                              - int(fl["--max-num-batched-tokens"]) * 128 * 1024 - GiB)
        return (pool // int(per_block) - 1) * block  # vLLM's BlockPool keeps one null block (block_pool.py:191)
    page = int(fl["--page-size"])
    cell = sglang_cell(p, fl["--kv-cache-dtype"])
    m = sc.model
    aiter = "AMD" in sc.device.name and sc.context > 8192 and (m.kv_kind != "mla" or m.n_q // p.tp in (16, 128))
    fraction = float(fl["--mem-fraction-static"]) * (0.85 if aiter else 1.0)   # attention_hook.py:243-268
    pre = (sc.device.memory - GiB) / GiB                                       # the assumed 1 GiB runtime reserve
    rest = (pre - weights_per_gpu(p) / GiB) - pre * (1 - fraction)
    return max(0, int(rest * GiB) // int(cell) // page * page)


@pytest.mark.parametrize("spec,p,target", [c for c in CASES if c[2] in ENGINE_TARGETS],
                         ids=[i for i, c in zip(IDS, CASES) if c[2] in ENGINE_TARGETS])
def test_engine_capacity_is_the_plans_footprint_within_one_block(spec: str, p: Plan, target: str) -> None:
    if target == "vllm" and not p.scenario.model.all_full:
        pytest.skip("vLLM's hybrid KV cache groups: test_vllm_windowed_capacity_is_vllms_own_figure")
    out = emit_exact(p, target, spec=spec)
    p = written_from(p, target)  # the plan the target is written from (kvplan/app/replan.py)
    if out.errors:  # its own plan does not fit: nothing written
        assert not out.files and any(u.constraint in ("fits", "layout", "engine") for u in p.unmet)
        return
    fs = files(out)
    name, script = launcher(fs, target)
    rows = dict(out.capacity)
    reserves = rows["activation_reserve"].value + rows["runtime_reserve"].value
    tokens = engine_tokens(p, name, script, reserves)
    assert rows["kv_tokens"].value == tokens
    if any("does not fit" in f or "refuse" in f for f in out.findings):  # the engine cannot hold the plan's pool
        return
    assert rows["kv_tokens"].evidence.value == "derived"
    changed = [f for f in out.findings if "→" in f]
    if changed:  # a changed dtype, block or retention: sized for the workload, not the plan's bytes
        assert tokens >= plan_tokens(p) - 1e-6 * plan_tokens(p)
        return
    fill = emit(p, target, spec=spec)  # the default sizing: at least the plan's pool, stated as the engine computes it
    fill_rows = dict(fill.capacity)
    assert fill_rows["kv_tokens"].value == engine_tokens(p, *launcher(files(fill), target), reserves)
    # SGLang and TensorRT-LLM fill at least the plan's pool (their fill falls back to it); vLLM's default
    # fraction can hold less, and then says so as a finding
    assert fill_rows["kv_tokens"].value >= tokens or (target == "vllm" and fill.findings), fill.findings
    block = {"vllm": "--block-size", "sglang": "--page-size"}
    if target == "trtllm":
        size = yaml.safe_load(script)["kv_cache_config"]["tokens_per_block"]
    else:
        size = int(flags(shell(script)[1])[1][block[target]])
    want = plan_tokens(p)
    assert want - 1e-6 * want <= tokens < want + size, (tokens, want, size)
    assert rows["kv_sequences"].value >= p.scenario.batch
    assert rows["plan_kv_tokens"].value == pytest.approx(want, rel=1e-9)
    if target == "vllm":  # the plan's blocks and vLLM's null block, at vLLM's page bytes (scales included)
        fl = flags(shell(script)[1])[1]
        per_block = vllm_token_bytes(p, fl["--kv-cache-dtype"]) * size
        assert rows["kv_pool_per_gpu"].value == int(fl["--kv-cache-memory-bytes"]) == (tokens // size + 1) * per_block
    elif p.scenario.model.n_layers % p.pp == 0:  # bytes per GPU: the plan's KV / devices, up to one block
        pool = rows["kv_pool_per_gpu"].value
        # the plan counts NVFP4's FP8 scale per 16 values as the engines do (p.kv_width: TensorRT-LLM
        # get_cache_size_per_token, SGLang's nvfp4 cell: docs/engine-memory.md), so the pool is the plan's bytes
        plan_gpu = p.metric("kv_bytes").value / p.n_devices
        assert plan_gpu * (1 - 1e-9) <= pool < plan_gpu + size * token_bytes(p, p.kv_width) + 1


_MODELS = ["llama-3-70b", "llama-3-8b", "qwen2.5-7b", "deepseek-v3", "mixtral-8x7b", "llama-2-13b"]
_DEVICES = ["h100-sxm", "h200", "b200", "mi300x", "a100-80g"]
_LIMIT = {m: catalog.get_model(m).max_context or 2**30 for m in _MODELS}  # beyond it: KV126


@settings(max_examples=40, deadline=None)
@given(model=st.sampled_from(_MODELS), device=st.sampled_from(_DEVICES), n=st.sampled_from([1, 2, 4, 8]),
       engine=st.sampled_from(ENGINE_TARGETS), batch=st.integers(1, 64), context=st.integers(1, 128),
       budget=st.sampled_from(["lossless", "near-lossless"]))
def test_capacity_law_on_random_deployments(model: str, device: str, n: int, engine: str, batch: int,
                                            context: int, budget: str) -> None:
    """For a plan made for the target's own engine nothing changes, and the engine's tokens from the
    emitted settings are the plan's within one block, whatever the model, device and sizes."""
    source = (f'deployment "r" {{\n model = {model}\n device = {device}\n devices = {n}\n engine = {engine}\n'
              f' workload {{\n batch = {batch}\n context = {min(context * 1000 + 7, _LIMIT[model])}\n }}\n'
              f' quality {{\n budget = {budget}\n }}\n}}\n')
    result = check_source(source, "r.kvp")
    assert result.ok, result.diagnostics
    (p,) = plans_for(result)
    out = emit_exact(p, engine, spec="r.kvp")
    # SGLang's Blackwell attention backends take pages of 16 to 128 tokens (sglang.page_sizes); the planner knows
    # them from the engine record (Engine.blackwell_pages), so its SGLang plan already pages in one: nothing moves
    moved = [f for f in out.findings if "→" in f]
    assert not moved, out.findings
    if any("does not fit" in f or "refuse" in f for f in out.findings):  # the engine's own start-up memory
        return
    fs = files(out)
    name = "trtllm.yaml" if engine == "trtllm" else f"{engine}.sh"
    rows = dict(out.capacity)
    tokens = engine_tokens(p, name, fs[name], rows["activation_reserve"].value + rows["runtime_reserve"].value)
    want = plan_tokens(p)
    page = int(flags(shell(fs[name])[1])[1]["--page-size"]) if engine == "sglang" else p.block_size
    if page != p.block_size:  # a moved page rounds each sequence up to its own pages
        want = p.scenario.batch * -(-p.scenario.context // page) * page
    assert want * (1 - 1e-9) <= tokens < want + page


def test_uneven_pipeline_stages_size_the_pool_for_the_largest() -> None:
    (p,) = plans("tests/data/emit/pipeline.kvp")
    assert (p.tp, p.pp) == (1, 3)
    out = emit(p, "vllm", spec="x", sizing="exact")
    _, argv = shell(files(out)["vllm.sh"])
    kv = int(flags(argv)[1]["--kv-cache-memory-bytes"])
    blocks = -(-p.scenario.batch * p.scenario.context // 32) + 1  # and vLLM's null block
    assert kv == blocks * 27 * 8 * 32 * 256 * 2  # 27 of 80 layers, 8 KV heads, K and V of 128, bf16


def test_eviction_and_int2_are_named_and_the_pool_holds_every_token() -> None:
    (p,) = plans("tests/data/emit/evict.kvp")
    assert (p.kv_dtype.id, p.retention) == ("int2", 0.5)
    for target in ENGINE_TARGETS:
        out = emit_exact(p, target, spec="x")
        assert any("int2 →" in f for f in out.findings) and any("retention 0.5 → 1" in f for f in out.findings)
        tokens = dict(out.capacity)["kv_tokens"].value
        assert tokens == p.scenario.batch * p.scenario.context  # 128k is a whole number of 16-token pages


# ------------------------------------------------------------------ tiers

def test_host_tier_sizes_per_engine() -> None:
    (p,) = plans("tests/data/emit/host-tier.kvp")
    assert p.tier.tier == "host" and p.tier.bytes is not None
    per_gpu = p.tier.bytes.value / p.n_devices  # tp 1 ≤ n_kv: no replication
    _, argv = shell(files(emit(p, "vllm"))["vllm.sh"])
    fl = flags(argv)[1]
    assert fl["--kv-offloading-backend"] == "native"
    assert per_gpu * p.tp <= int(fl["--kv-offloading-size"]) * GiB < per_gpu * p.tp + GiB
    sg = emit(p, "sglang")
    _, argv = shell(files(sg)["sglang.sh"])
    fl = flags(argv)[1]
    assert fl["--enable-hierarchical-cache"] is True
    # HiCache's host pool mirrors device pages (pool_host/base.py): it holds the device pool plus the plan's tier
    device = dict(sg.capacity)["kv_pool_per_gpu"].value
    assert device + per_gpu <= int(fl["--hicache-size"]) * 1e9 < device + per_gpu + 1e9
    kv = yaml.safe_load(files(emit(p, "trtllm"))["trtllm.yaml"])["kv_cache_config"]
    assert per_gpu <= kv["host_cache_size"] < per_gpu + 16 * token_bytes(p, 2.0)
    out = emit(p, "lmcache")
    body = yaml.safe_load(files(out)["lmcache.yaml"])
    # GiB, as LMCache reads it: int(size × 1024³) B (cache_engine.py:2087-2110), the fewest hundredths that hold it
    assert per_gpu <= int(body["max_local_cpu_size"] * 1024**3) < per_gpu + 0.01 * 1024**3
    assert "local_disk" not in body and not out.findings
    assert set(files(out)) == {"lmcache.yaml", "lmcache-vllm.sh"}  # the spec's engine is vllm


@pytest.mark.parametrize("tier", ["ssd", "remote", "peer"])
def test_tiers_beyond_host(tier: str) -> None:
    (p,) = plans(f"tests/data/emit/tier-{tier}.kvp")
    assert p.tier.tier == tier
    trt_out = emit(p, "trtllm")
    assert any(f"tier {tier} → host" in f for f in trt_out.findings)  # TensorRT-LLM holds a host tier only
    out = emit(p, "lmcache")
    body = yaml.safe_load(files(out)["lmcache.yaml"])
    assert set(files(out)) == {"lmcache.yaml", "lmcache-vllm.sh", "lmcache-sglang.sh"}  # engine any: both
    per_gpu = p.tier.bytes.value / p.n_devices
    if tier == "ssd":
        assert body["local_disk"].startswith("file://")
        assert per_gpu <= int(body["max_local_disk_size"] * 1024**3) < per_gpu + 0.01 * 1024**3
        assert body["max_local_cpu_size"] == lmc.DEFAULT_CPU_GB
        assert not out.findings
    elif tier == "remote":
        assert "remote_url" not in body and "# remote_url:" in files(out)["lmcache.yaml"]
        assert any("remote_url" in f for f in out.findings)
    else:
        assert any("tier peer → host" in f for f in out.findings)
        assert per_gpu <= int(body["max_local_cpu_size"] * 1024**3)
    if tier != "peer":  # vLLM and SGLang reach SSD and remote tiers through LMCache
        env, argv = shell(files(emit(p, "vllm"))["vllm.sh"])
        assert json.loads(flags(argv)[1]["--kv-transfer-config"])["kv_connector"] == "LMCacheConnectorV1"
        assert "LMCACHE_CONFIG_FILE" in env
        _, argv = shell(files(emit(p, "sglang"))["sglang.sh"])
        assert flags(argv)[1]["--enable-lmcache"] is True


def test_lmcache_without_a_tier_writes_nothing_and_says_why() -> None:
    (p,) = plans("examples/w2-batch32.kvp")
    out = emit(p, "lmcache")
    assert out.files == () and out.findings == ()
    assert "nothing to tier" in out.warnings[0]


def test_pipeline_and_prefix_caching_off() -> None:
    (p,) = plans("tests/data/emit/pipeline.kvp")
    assert not p.prefix_caching
    _, argv = shell(files(emit(p, "vllm"))["vllm.sh"])
    fl = flags(argv)[1]
    assert fl["--pipeline-parallel-size"] == "3" and fl["--disable-prefix-caching"] is True
    out = emit(p, "sglang")
    sfl = flags(shell(files(out)["sglang.sh"])[1])[1]
    assert sfl["--pp-size"] == "3" and sfl["--disable-radix-cache"] is True  # SGLang's --pp-size (parallel.py:59)


def test_windowed_and_unnamed_models_are_noted() -> None:
    (p,) = plans("tests/data/emit/windowed.kvp")
    out = emit(p, "sglang")
    assert any("sliding-window" in w for w in out.warnings) and not out.findings
    tiny = plans("examples/local-config.kvp")[0]
    out = emit(tiny, "vllm")
    assert any("no Hugging Face id" in w for w in out.warnings)
    assert shell(files(out)["vllm.sh"])[1][2] == tiny.scenario.model.id


# ------------------------------------------------------------------ reserves

def test_reserves_decide_fit_not_the_pool() -> None:
    (p,) = plans("examples/w2-batch32.kvp")
    base = emit(p, "vllm", sizing="exact")
    big = emit(p, "vllm", reserves=Reserves(activation=100e9, runtime=2 * GiB), sizing="exact")
    assert flags(shell(files(base)["vllm.sh"])[1])[1]["--kv-cache-memory-bytes"] == \
        flags(shell(files(big)["vllm.sh"])[1])[1]["--kv-cache-memory-bytes"]
    assert not base.findings and any("does not fit" in f for f in big.findings)
    rows = dict(big.capacity)
    assert rows["activation_reserve"].value == 100e9 and rows["activation_reserve"].evidence.value == "assumed"
    assert rows["memory_needed_per_gpu"].value == pytest.approx(
        weights_per_gpu(p) + rows["kv_pool_per_gpu"].value + 100e9 + 2 * GiB)
    default = dict(base.capacity)
    # default reserves: the planner's 8% of the device in all
    assert default["activation_reserve"].value + default["runtime_reserve"].value == pytest.approx(
        0.08 * p.scenario.device.memory)


@settings(max_examples=200, deadline=None)
@given(num=st.floats(1e6, 1e12), den=st.floats(1e9, 1e12), step=st.floats(1e3, 1e9))
def test_fraction_rounds_up_by_less_than_one_step(num: float, den: float, step: float) -> None:
    text, value = fraction_up(num, den, step)
    assert value == Fraction(text)
    assert value >= Fraction(num) / Fraction(den)
    assert (value - Fraction(num) / Fraction(den)) * Fraction(den) < Fraction(step)


def test_digest_check_reads_json_headers_and_missing_scenarios(tmp_path: Path) -> None:
    spec = tmp_path / "w2.kvp"
    shutil.copy(ROOT / "examples" / "w2-batch32.kvp", spec)
    d = tmp_path / "w2.kvplan" / "x"
    d.mkdir(parents=True)
    (d / "k.json").write_text(json.dumps({"_kvplan": {"scenario": "w2-batch32", "plan": "sha256:00"}}))
    (d / "gone.sh").write_text("#!/bin/sh\n"
                               "# kvplan 0.1.0 · spec w2.kvp · scenario old · plan sha256:ab · vLLM 0.33.0\n")
    found = check_digests(check_file(str(spec)))
    assert [f.code for f in found] == ["KV401", "KV401"]
    assert "no longer has" in found[0].message and "sha256:00" in found[1].message


# ------------------------------------------------------------------ goldens

#: The three examples, plus two with a second tier (host, ssd) so that LMCache writes something,
GOLDEN_SPECS = [f"examples/{n}.kvp" for n in (*EXAMPLES, "w4-reuse")] + ["tests/data/emit/tier-ssd.kvp"]
#: ... and W2 on H100 with engine = any: each engine target written from its own plan (kvplan/app/replan.py).
GOLDEN_SPECS += ["tests/data/emit/w2-h100-any.kvp"]


@pytest.mark.parametrize("spec", GOLDEN_SPECS)
@pytest.mark.parametrize("target", MINE)
def test_emit_golden(spec: str, target: str, golden: Callable[[Path, str], None]) -> None:
    chunks = []
    for p in plans(spec):
        out = emit(p, target, spec=spec)
        chunks.append(f"### {p.scenario.name}")
        chunks += [f"==> {f.name} <==\n{f.text}" for f in out.files]
        chunks += [f"planned: {line}" for line in out.planned]
        chunks += [f"{'error' if w in out.errors else 'finding' if w in out.findings else 'warning'}: {w}"
                   for w in out.warnings]
        chunks += [f"capacity: {k} = {v.text()} — {v.source}" for k, v in out.capacity]
        chunks.append(f"summary: {capacity_line(out)}")
    golden(GOLDEN / f"{Path(spec).stem}.{target}.txt", "\n".join(chunks) + "\n")
