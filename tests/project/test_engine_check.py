"""tools/engine_check.py: the checker's own logic (no engine needed), and, marked `engines`, its per-engine checks
run against vLLM 0.33.0, SGLang 0.5.23 and LMCache 0.5.6 where those packages import (skipped otherwise; with
KVPLAN_REQUIRE_ENGINES=1, as the CI engines job sets it, an engine that does not import fails instead).

    bash tools/engines-venv.sh /tmp/engines && . /tmp/engines/bin/activate   # docs/engine-memory.md
    KVPLAN_REQUIRE_ENGINES=1 python -m pytest -m engines
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from tests.paths import ROOT, load_tool, require_engine

ec = load_tool("engine_check")
W2 = str(ROOT / "examples" / "w2-batch32.kvp")
DS = str(ROOT / "examples" / "deepseek-v3-mi300x.kvp")
W3 = str(ROOT / "examples" / "w3-shared-prefix.kvp")
HOST = str(ROOT / "tests" / "data" / "emit" / "host-tier.kvp")
CHECKED = ROOT / "tests" / "data" / "engine-check"
GPT_OSS, GPT_OSS_NO_RADIX = str(CHECKED / "gpt-oss.kvp"), str(CHECKED / "gpt-oss-no-radix.kvp")
DP, HUB = str(CHECKED / "dp-attention.kvp"), str(CHECKED / "qwen3-32b.kvp")
TWO_NODES = str(CHECKED / "two-nodes.kvp")


def _emits(spec: str, device: str, tmp_path: Path, name: str, scenario: int = 0, sizing: str = "fill") -> Any:
    got, why = ec.plans(spec, device)
    assert why is None, why
    dirs = ec.ModelDirs(tmp_path / "models")
    return next(e for e in ec.emits(spec, device, got[scenario], dirs, sizing) if e.name == name)


def _checked(engine: str, spec: str, device: str, tmp_path: Path, sizing: str = "fill") -> tuple[Any, Any]:
    """The emitted file of `engine` for the spec's first scenario on `device`, and the checker's row for it."""
    require_engine(engine)
    e = _emits(spec, device, tmp_path, f"{engine}.sh", sizing=sizing)
    return e, ec.check(e, tmp_path, {})


# ------------------------------------------------------------------------------------------- no engine needed

def test_compare_states_the_difference_in_tokens_and_blocks() -> None:
    assert ec.compare(4_096_000, 4_096_000, per_block=16) == ("ok", "")
    status, text = ec.compare(4_096_000, 3_855_040, per_block=16)
    assert status == "MISMATCH"
    assert "-240,960 tokens" in text and "-15,060 blocks of 16" in text and "-5.88%" in text
    assert ec.compare(None, 5) == ("-", "")
    assert ec.compare(5, None) == ("-", "")


@pytest.mark.parametrize("sizing", ["exact", "fill"])
def test_parse_stated_reads_what_kvplan_writes(sizing: str, tmp_path: Path) -> None:
    """The comment parser against kvplan's own emitted vllm.sh: the tokens, blocks and block bytes it states are
    the capacity rows the emitter computed; the pool holds one block more, vLLM's null block."""
    e = _emits(W2, "b200", tmp_path, "vllm.sh", sizing=sizing)
    stated = ec.parse_stated(e.text)
    assert stated is not None
    assert stated.tokens == e.capacity["kv_tokens"] and stated.block == 16
    assert stated.blocks is not None and stated.blocks * 16 == stated.tokens
    # int4_per_token_head on TRITON_ATTN: 2 × (64 + 4) B per token-head, 2 KV heads per GPU, 80 layers, 16 tokens
    assert stated.block_bytes == 2 * (64 + 4) * 2 * 80 * 16 == 348_160
    assert (stated.blocks + 1) * stated.block_bytes == e.capacity["kv_pool_per_gpu"]
    if sizing == "exact":
        assert stated.tokens == 32 * 128_000                      # the plan's own pool: W2's batch × context
    else:
        assert stated.tokens > 32 * 128_000                       # the engine's usual fraction buys more
    assert ec.parse_stated("# nothing here\n") is None


def test_command_words_joins_the_exec_line() -> None:
    text = ('#!/bin/sh\n# c\nexport LMCACHE_CONFIG_FILE="$(dirname "$0")/lmcache.yaml"\n'
            "exec vllm serve org/m \\\n    --block-size 16 \\\n    --kv-transfer-config '{\"a\":1}'\n")
    words, env = ec.command_words(text)
    assert words == ["vllm", "serve", "org/m", "--block-size", "16", "--kv-transfer-config", '{"a":1}']
    assert env == {"LMCACHE_CONFIG_FILE": '"$(dirname "$0")/lmcache.yaml"'}


def test_each_hosts_launcher_is_read_as_its_host_runs_it(tmp_path: Path) -> None:
    """A layout over two nodes: every host's file goes to its engine, its address check left out and host 0's
    address set as the user exports it (on main the checker knew only vllm.sh and sglang.sh)."""
    assert [ec.engine_of(n) for n in ("vllm-host1.sh", "lmcache-sglang-host0.sh", "vllm.sh", "lmcache.yaml")] == \
        ["vllm", "sglang", "vllm", "lmcache"]
    e = _emits(TWO_NODES, "h100-sxm", tmp_path, "vllm-host1.sh")
    words, _ = ec.command_words(e.text)
    assert words[:2] == ["vllm", "serve"] and words[-3:] == ["--master-addr", ec.HOST_VARS["KVPLAN_HOST0_ADDR"],
                                                             "--headless"]


def test_device_rewrite_touches_only_deployment_device_lines() -> None:
    text = 'device "my-gpu" {\n}\ndeployment "d" {\n    device  = h100-sxm  # c\n    devices = 2\n}\n'
    out = ec.on_device(text, "b200")
    assert "device  = b200  # c" in out and "devices = 2" in out and 'device "my-gpu" {' in out
    assert ec.spec_devices(text, ["b200", "h100-sxm"], None) == ["b200", "h100-sxm"]
    assert ec.spec_devices(text.replace("h100-sxm", "my-gpu"), ["b200"], None) == [None, "b200"]


def test_run_with_fake_engines_reports_and_exits(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
                                                 ) -> None:
    """The checker's comparison end to end with a fake vLLM: a recomputed capacity equal to the stated one is ok
    (exit 0); one block short is a MISMATCH (exit 1); a rejection is a finding; no engine at all is exit 2."""
    monkeypatch.setitem(ec.CHECKERS, "vllm", lambda: None)
    monkeypatch.setitem(ec.CHECKERS, "sglang", lambda: "fake: absent")
    monkeypatch.setitem(ec.CHECKERS, "lmcache", lambda: "fake: absent")
    shift = {"tokens": 0}

    def fake_vllm(e: Any, row: Any) -> None:
        row.verdict = "accepted"
        row.recomputed = ec.parse_stated(e.text).tokens + shift["tokens"]

    monkeypatch.setattr(ec, "vllm_check", fake_vllm)
    assert ec.run([W2], ["b200"], ["vllm"], None, print) == 0
    out = capsys.readouterr().out
    assert "w2-batch32@b200/vllm/vllm.sh" in out and " ok" in out
    assert "1 files: 1 accepted, 0 rejected, 0 not checked; capacity 1 ok, 0 MISMATCH" in out

    shift["tokens"] = -16
    assert ec.run([W2], ["b200"], ["vllm"], None, print) == 1
    out = capsys.readouterr().out
    assert "MISMATCH" in out and "engine -16 tokens" in out and "-1 blocks of 16" in out

    def rejecting(e: Any, row: Any) -> None:
        row.verdict, row.message = "rejected", "ValueError: fake refusal"

    monkeypatch.setattr(ec, "vllm_check", rejecting)
    assert ec.run([W2], ["b200"], ["vllm"], None, print) == 1
    assert "ValueError: fake refusal" in capsys.readouterr().out

    monkeypatch.setitem(ec.CHECKERS, "vllm", lambda: "fake: absent")
    assert ec.run([W2], ["b200"], ["vllm"], None, print) == 2
    assert "could not run" in capsys.readouterr().out


def test_absent_engine_is_named_not_counted(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
                                            ) -> None:
    monkeypatch.setitem(ec.CHECKERS, "vllm", lambda: "vLLM not importable (fake)")
    monkeypatch.setitem(ec.CHECKERS, "sglang", lambda: None)
    monkeypatch.setattr(ec, "sglang_check", lambda e, row: setattr(row, "verdict", "accepted"))
    assert ec.run([W2], ["b200"], ["vllm", "sglang"], None, print) == 0
    out = capsys.readouterr().out
    assert "engine check: vllm absent: vLLM not importable (fake)" in out
    assert "not checked: vLLM not importable (fake)" in out


def test_required_engines_fail_instead_of_skipping(monkeypatch: pytest.MonkeyPatch) -> None:
    """KVPLAN_REQUIRE_ENGINES=1 (the CI engines job) turns an engine that does not import into a failure; without
    it the engines-marked tests skip."""
    monkeypatch.setenv("KVPLAN_REQUIRE_ENGINES", "1")
    with pytest.raises(ModuleNotFoundError):
        require_engine("kvplan_no_such_engine")
    monkeypatch.delenv("KVPLAN_REQUIRE_ENGINES")
    with pytest.raises(pytest.skip.Exception):
        require_engine("kvplan_no_such_engine")


def test_sglang_comment_states_one_gpu_and_the_swa_pool() -> None:
    """The SGLang comment lines the checker reads: one GPU's pool (in tokens, with its cell) and the SWA pool."""
    text = ("# KV capacity (derived): 1,600 tokens (1,600 blocks of 1 tokens); the plan stores 800 tokens\n"
            "# per GPU: KV pool 200 tokens × 36,864 B per token in the 18 full-attention layers + SWA pool 160 "
            "tokens × 36,864 B per token in the 18 sliding-window layers (...) = 13.3 MB (derived)\n")
    stated = ec.parse_stated(text)
    assert stated is not None
    assert (stated.tokens, stated.rank_tokens, stated.cell, stated.swa_tokens) == (1600, 200, 36_864, 160)


def test_bad_arguments_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert ec.main(["no-such.kvp"]) == 2
    assert "no-such.kvp: no such spec file" in capsys.readouterr().err
    assert ec.main([W2, "--engine", "tgi"]) == 2
    assert "unknown engine 'tgi'" in capsys.readouterr().err


# ------------------------------------------------------------------------------------------- the real engines

@pytest.mark.engines
def test_vllm_int4_page_holds_fp32_scales(tmp_path: Path) -> None:
    """vLLM's own sizing of W2 (Llama-3.1-70B, TP 4, int4_per_token_head, block 16) under --sizing exact: TRITON_ATTN
    packs one fp32 scale per token-head for K and for V, so a page per layer is 2 heads x 16 x (64 + 4 + 64 + 4) B;
    the pool is the file's --kv-cache-memory-bytes // (80 layers x page), less the null block: the plan's own
    32 x 128,000 tokens."""
    e, row = _checked("vllm", W2, "b200", tmp_path, sizing="exact")
    assert ec.vllm_absent() is None
    assert row.verdict == "accepted", row.message
    words, _ = ec.command_words(e.text)
    memory = int(words[words.index("--kv-cache-memory-bytes") + 1])
    page = 2 * 16 * (64 + 4 + 64 + 4)
    blocks = memory // (80 * page)
    assert row.recomputed == (blocks - 1) * 16 == 32 * 128_000
    assert row.recomputed == row.stated
    assert any("TRITON_ATTN" in n and f"{page:,} B page" in n for n in row.notes)


@pytest.mark.engines
@pytest.mark.parametrize("scenario", [0, 1, 2, 3])
def test_every_hosts_file_of_a_two_node_layout_is_accepted(scenario: int, tmp_path: Path) -> None:
    """TP16 and 2 x TP8, for vLLM and SGLang, on 8-GPU H100 nodes: each host's launcher passes its engine's own
    parser and config builder, and states the capacity the engine computes."""
    got, why = ec.plans(TWO_NODES, "h100-sxm")
    assert why is None, why
    dirs = ec.ModelDirs(tmp_path / "models")
    rows = []
    for e in ec.emits(TWO_NODES, "h100-sxm", got[scenario], dirs):
        if "-host" in e.name:
            require_engine(ec.engine_of(e.name))
            rows.append(ec.check(e, tmp_path, {}))
    assert len(rows) == 4  # vllm-host0/1.sh, sglang-host0/1.sh
    for row in rows:
        assert row.verdict == "accepted" and row.status == "ok", (row.file, row.message, row.notes)


@pytest.mark.engines
def test_vllm_refuses_a_pool_without_room_for_the_null_block(tmp_path: Path) -> None:
    """DeepSeek-V3 batch 1 (exact): the file's pool holds the one max-model-len request and vLLM's null block, and
    vLLM accepts it; one block less and vLLM refuses at start-up in its own words."""
    e, row = _checked("vllm", DS, "h200", tmp_path, sizing="exact")
    assert row.verdict == "accepted", row.message
    assert row.recomputed == row.stated and row.recomputed is not None and row.recomputed >= 64_000
    cfg = e.shared["vllm_config"]
    stated = ec.parse_stated(e.text)
    cfg.cache_config.kv_cache_memory_bytes -= stated.block_bytes
    with pytest.raises(ValueError, match=r"To serve at least one request with the model's max seq len \(64000\)"):
        ec.vllm_capacity(cfg, "h200")


@pytest.mark.engines
def test_sglang_refuses_nvfp4_on_hopper(tmp_path: Path) -> None:
    """W2's plan stores int4 KV; on H200 kvplan writes the nearest dtype SGLang runs there (fp8), which SGLang
    accepts. The same command with nvfp4 is refused in SGLang's words."""
    e, row = _checked("sglang", W2, "h200", tmp_path)
    assert ec.sglang_absent() is None
    assert row.verdict == "accepted", row.message
    words, _ = ec.command_words(e.text)
    assert words[words.index("--kv-cache-dtype") + 1] == "fp8_e4m3"
    words[words.index("--kv-cache-dtype") + 1] = "nvfp4"
    with pytest.raises(Exception, match=r"--kv-cache-dtype=nvfp4 requires Blackwell SM100 or SM120"):
        ec.sglang_args(words, e.model_config, "h200", e.capacity["device_memory"])


@pytest.mark.engines
@pytest.mark.parametrize("spec, device, factor", [(DS, "h200", 1.0), (W3, "mi300x", 0.85)])
def test_sglang_pool_from_the_free_memory_after_start_up(spec: str, device: str, factor: float, tmp_path: Path
                                                         ) -> None:
    """The pool is (pre_model_load x mem_fraction_static - weights) // cell, whole pages, with pre_model_load =
    memory - runtime reserve; the cell is the one the file states (DeepSeek-V3: 61 x (512 + 64) x 2 B). On AMD
    (aiter, context > 8,192) SGLang scales the given fraction by 0.85."""
    e, row = _checked("sglang", spec, device, tmp_path)
    assert row.verdict == "accepted", row.message
    words, _ = ec.command_words(e.text)
    frac = float(words[words.index("--mem-fraction-static") + 1]) * factor
    stated = ec.parse_stated(e.text)
    c = e.capacity
    pre = (c["device_memory"] - c["runtime_reserve"]) / 2**30
    rest = pre - c["weights_per_gpu"] / 2**30 - pre * (1 - frac)
    assert row.recomputed == int(rest * 2**30) // stated.cell // stated.block * stated.block
    assert row.recomputed == row.stated
    assert any("DefaultPoolConfigurator" in n for n in row.notes)
    if spec == DS:
        assert stated.cell == 61 * 576 * 2


@pytest.mark.engines
def test_sglang_sizes_gpt_oss_with_its_hybrid_swa_pool(tmp_path: Path) -> None:
    """gpt-oss-120b (GptOssForCausalLM, in SGLang's SWA_SINK_ARCHS): SGLang's own HybridSWAPoolConfigurator gives
    the full-attention layers (full cell + 0.8 x SWA cell) per token and an SWA pool of 0.8 x that; the file states
    both, and kvplan's pre-hybrid figure (one pool over all 36 layers) is 1 / 1.111 of it."""
    e, row = _checked("sglang", GPT_OSS, "h200", tmp_path)
    assert row.verdict == "accepted", row.message
    assert row.status == "ok" and row.recomputed == row.stated
    assert any("HybridSWAPoolConfigurator" in n for n in row.notes)
    stated = ec.parse_stated(e.text)
    available = ec.sglang_available(ec.sglang_args(ec.command_words(e.text)[0], e.model_config, "h200"), e.capacity)
    per_layer = 8 * (64 + 64) * 2
    assert row.recomputed == int(available // (18 * per_layer + 0.8 * 18 * per_layer))
    assert stated.swa_tokens == int(row.recomputed * 0.8)
    assert row.recomputed / (available // (36 * per_layer)) == pytest.approx(36 / 32.4, rel=1e-4)


@pytest.mark.engines
def test_sglang_sizes_the_swa_pool_from_the_requests_without_the_radix_cache(tmp_path: Path) -> None:
    """--max-running-requests with --disable-radix-cache: SGLang's SWARequestCapPoolConfigurator sizes the SWA pool
    from the requests ((127-token window + 128 eviction interval + 2 pages) x 16 + 2 x 8,192 chunked prefill + a
    page, gpt-oss's class reporting window 128 - 1) and gives the full pool the rest; the file states both."""
    e, row = _checked("sglang", GPT_OSS_NO_RADIX, "h200", tmp_path)
    assert row.verdict == "accepted", row.message
    assert row.status == "ok" and row.recomputed == row.stated
    assert ec.parse_stated(e.text).swa_tokens == (127 + 128 + 1 + 1) * 16 + 2 * 8192 + 1


@pytest.mark.engines
def test_dp_attention_compares_one_rank_with_one_rank(tmp_path: Path) -> None:
    """SGLang with --enable-dp-attention --dp 8: the capacity the file states is 8 ranks' pools; the engine's
    figure is one rank's, so the check compares it with the per-GPU pool the file states."""
    e, row = _checked("sglang", DP, "h200", tmp_path)
    assert row.verdict == "accepted", row.message
    stated = ec.parse_stated(e.text)
    assert stated.tokens == 8 * stated.rank_tokens
    assert row.stated == stated.rank_tokens == row.recomputed and row.status == "ok"


@pytest.mark.engines
@pytest.mark.parametrize("scenario", [0, 1])
def test_hub_models_are_checked_offline(scenario: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Qwen3-32B and Llama-3.1-405B under HF_HUB_OFFLINE: vLLM builds its engine config from the config.json in
    tests/data/hf and sizes the pool; nothing is looked up on the hub."""
    require_engine("vllm")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    e = _emits(HUB, "h200", tmp_path, "vllm.sh", scenario)
    assert e.model_config is not None
    row = ec.check(e, tmp_path, {})
    assert row.verdict == "accepted", row.message
    assert row.status == "ok"


@pytest.mark.engines
def test_a_model_without_a_local_config_is_parsed_not_rejected(tmp_path: Path) -> None:
    """Without a config.json the vLLM command goes through vLLM's own parser only: EngineArgs would look the hub
    id up, which offline is a refusal of the machine, not of the file."""
    require_engine("vllm")
    e = _emits(HUB, "h200", tmp_path, "vllm.sh")
    e.model_config = None
    row = ec.check(e, tmp_path, {})
    assert row.verdict == "accepted", row.message
    assert "no local config.json" in row.message


@pytest.mark.engines
def test_lmcache_sizes_are_gib(tmp_path: Path) -> None:
    """LMCache reads max_local_cpu_size as GiB (x 1024^3): a file that states GB bytes gets 7.4% more."""
    require_engine("lmcache")
    require_engine("vllm")
    assert ec.lmcache_absent() is None
    got, why = ec.plans(HOST, None)
    assert why is None, why
    files = list(ec.emits(HOST, None, got[0], ec.ModelDirs(tmp_path / "models")))
    loader = next(e for e in files if e.name == "lmcache-vllm.sh")
    yml = next(e for e in files if e.name == "lmcache.yaml")
    ec.vllm_check(loader, ec.Row(loader.label, "vllm"))
    row = ec.Row(yml.label, "lmcache")
    ec.lmcache_check(yml, row, tmp_path)
    assert row.verdict == "accepted", row.message
    size = float(next(ln for ln in yml.text.splitlines() if ln.startswith("max_local_cpu_size:")).split()[1])
    assert any(f"= {int(size * 1024**3):,} B per worker" in n for n in row.notes)
    assert row.recomputed is not None and row.recomputed % 256 == 0
    assert math.isclose(int(size * 1024**3) / (size * 1e9), 1024**3 / 1e9)


def test_a_repo_id_finds_the_fixture_of_its_catalog_model() -> None:
    """The examples serve hub ids (meta-llama/Llama-3.1-70B-Instruct); the fixture is the base repo's config.json,
    the same architecture, so the engine is given it rather than trying the network."""
    got = ec.ModelDirs._fixture("meta-llama/Llama-3.1-70B-Instruct")
    assert got is not None and got.name == "meta-llama--Meta-Llama-3.1-70B.json"
    assert ec.ModelDirs._fixture("org/not-a-model") is None


SPECULATIVE = str(CHECKED / "speculative.kvp")


@pytest.mark.engines
def test_vllm_parses_the_emitted_speculative_config(tmp_path: Path) -> None:
    """vLLM 0.33.0's own parser reads kvplan's --speculative-config into its SpeculativeConfig fields."""
    require_engine("vllm")
    e = _emits(SPECULATIVE, "h100", tmp_path, "vllm.sh")
    words, _ = ec.command_words(e.text)
    assert "--speculative-config" in words
    args = ec._vllm_parser().parse_args(list(words[1:]))  # the parser alone: the hub id is not looked up
    cfg = args.speculative_config
    assert (cfg["method"], cfg["num_speculative_tokens"], cfg["model"]) == (
        "eagle3", 3, "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B")


@pytest.mark.engines
def test_sglang_parses_the_emitted_speculative_flags(tmp_path: Path) -> None:
    """SGLang 0.5.23's prepare_server_args reads kvplan's chain: EAGLE3, 3 steps, top-1, 4 draft tokens."""
    require_engine("sglang")
    e = _emits(SPECULATIVE, "h100", tmp_path, "sglang.sh")
    words, _ = ec.command_words(e.text)
    sa = ec.sglang_args(words, None, "h100-sxm")  # the checker keys devices by catalog id
    assert (sa.speculative_algorithm, sa.speculative_num_steps, sa.speculative_eagle_topk,
            sa.speculative_num_draft_tokens, sa.speculative_draft_model_path) == (
        "EAGLE3", 3, 1, 4, "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B")
