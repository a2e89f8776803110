"""Speculative decoding as the engines write it (kvplan.engines.speculative) and as kvplan reads it back: vLLM's
--speculative-config JSON (method, num_speculative_tokens, model), SGLang's chain flags (k steps of top-1 drafts,
k + 1 tokens verified), TensorRT-LLM's speculative_config; a plan that rejects speculation writes none."""

from __future__ import annotations

import json

import pytest

from kvplan.engines import sglang, speculative, trtllm, vllm
from kvplan.engines.flagparse import DeploymentReadError
from kvplan.lang import check_source
from kvplan.planner import plan
from kvplan.planner.plan import Plan
from tests.paths import ROOT

SPEC = (ROOT / "tests" / "data" / "engine-check" / "speculative.kvp").read_text()
DRAFT = "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"


def _plan(engine: str, batch: int = 1, context: str = "4k") -> Plan:
    text = SPEC.replace("engine  = any", f"engine  = {engine}").replace("batch   = 1", f"batch   = {batch}")
    r = check_source(text.replace("context = 4k", f"context = {context}"), "s.kvp")
    assert r.ok
    return plan(r.scenarios[0])


def test_vllm_writes_the_speculative_config_and_reads_it_back() -> None:
    ((flag, value),) = speculative.vllm_flags(_plan("vllm"))
    assert flag == "--speculative-config" and value is not None
    assert json.loads(value) == {"method": "eagle3", "num_speculative_tokens": 3, "model": DRAFT}
    r = vllm.read(f"vllm serve meta-llama/Llama-3.1-8B-Instruct --speculative-config '{value}'")
    assert r.speculative is not None and r.speculative[:3] == ("eagle3", 3, DRAFT)


def test_sglang_writes_a_chain_and_reads_it_back() -> None:
    flags = speculative.sglang_flags(_plan("sglang"))
    assert flags == [("--speculative-algorithm", "EAGLE3"), ("--speculative-num-steps", "3"),
                     ("--speculative-eagle-topk", "1"), ("--speculative-num-draft-tokens", "4"),
                     ("--speculative-draft-model-path", DRAFT)]
    line = "python -m sglang.launch_server --model-path m " + " ".join(f"{f} {v}" for f, v in flags)
    r = sglang.read(line)
    assert r.speculative is not None and r.speculative[:3] == ("eagle3", 3, DRAFT)


def test_trtllm_writes_its_speculative_config_and_reads_it_back() -> None:
    cfg = speculative.trtllm_config(_plan("trtllm"))
    assert cfg == {"decoding_type": "Eagle3", "max_draft_len": 3, "speculative_model": DRAFT}
    r = trtllm.read("model: m\nspeculative_config:\n  decoding_type: Eagle3\n  max_draft_len: 3\n"
                    f"  speculative_model: {DRAFT}\n")
    assert r.speculative is not None and r.speculative[:3] == ("eagle3", 3, DRAFT)


def test_a_rejected_draft_writes_nothing() -> None:
    p = _plan("vllm", batch=512, context="256")
    assert p.speculative is not None and not p.speculative.adopted
    assert speculative.vllm_flags(p) == [] and speculative.sglang_flags(p) == []
    assert speculative.trtllm_config(p) is None


@pytest.mark.parametrize("line", [
    "vllm serve m --speculative-config '{\"method\":\"medusa\"}'",
    "vllm serve m --speculative-config '{\"method\":\"eagle3\",\"num_speculative_tokens\":99}'",
    "vllm serve m --speculative-config 'not json'"])
def test_a_config_kvplan_cannot_plan_is_a_located_error(line: str) -> None:
    with pytest.raises(DeploymentReadError) as e:
        vllm.read(line)
    assert "--speculative-config" in str(e.value)
