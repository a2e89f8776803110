"""emit for a request workload (docs/service.md): --max-num-seqs (SGLang --max-running-requests) is the running
sequences the load model gives, rounded up, and --max-model-len the longest sequence, input + output; the load
model's prefill chunk is the --max-num-batched-tokens emit writes for vLLM by default."""

from __future__ import annotations

import math

import pytest

from kvplan.catalog import devices
from kvplan.engines import emit
from kvplan.model.pools import vllm as vpool
from kvplan.planner import service
from tests.unit.app.test_backends import files, flags, shell
from tests.unit.app.test_vllm_sizing import plan_on


def test_vllm_sizes_max_num_seqs_from_the_load_model() -> None:
    p = plan_on("examples/service-rate.kvp")
    assert p.load is not None and p.load.running is not None
    got = flags(shell(files(emit(p, "vllm"))["vllm.sh"])[1])[1]
    assert got["--max-num-seqs"] == str(math.ceil(p.load.running.value))
    assert got["--max-model-len"] == "4512"
    assert got["--max-num-batched-tokens"] == str(int(p.load.chunk.value))


def test_sglang_sizes_max_running_requests_from_the_load_model() -> None:
    p = plan_on("examples/service-rate.kvp", **{"engine  = vllm": "engine  = sglang"})
    assert p.load is not None and p.load.running is not None
    got = flags(shell(files(emit(p, "sglang"))["sglang.sh"])[1])[1]
    assert got["--max-running-requests"] == str(math.ceil(p.load.running.value))


@pytest.mark.parametrize("device", sorted(devices()))
def test_the_default_chunk_is_the_batched_tokens_emit_writes_for_vllm(device: str) -> None:
    d = devices()[device]
    assert service.default_chunk(d.memory, d.id)[0] == vpool.default_batched_tokens(d.memory, d.id)[0]
