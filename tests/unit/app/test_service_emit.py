"""emit for a request workload (docs/service.md): --max-num-seqs (SGLang --max-running-requests, TensorRT-LLM
max_batch_size) is the mean running count the load model gives plus 3·√mean headroom, or what the pool holds where
that is fewer, and --max-model-len the longest sequence, input + output (warned of when it is exactly that); the
load model's prefill chunk is the --max-num-batched-tokens emit writes for vLLM by default."""

from __future__ import annotations

import math
import re

import pytest

from kvplan.app.replan import emit
from kvplan.catalog import devices
from kvplan.model.pools import vllm as vpool
from kvplan.planner import service
from tests.unit.app.test_backends import files, flags, shell
from tests.unit.app.test_vllm_sizing import plan_on


def _cap_of(mean: float, held: float) -> int:
    """The cap the rule gives: the mean running count + 3·√mean, or what the pool holds where that is fewer."""
    return min(math.ceil(mean + 3 * math.sqrt(mean)), int(held))


def test_vllm_caps_max_num_seqs_above_the_mean_within_the_pool() -> None:
    """On main --max-num-seqs was the mean running count rounded up (37 for 36.x): about half the time a request
    queued behind the cap."""
    p = plan_on("examples/service-rate.kvp")
    assert p.load is not None and p.load.running is not None
    out = emit(p, "vllm")
    text = files(out)["vllm.sh"]
    got = flags(shell(text)[1])[1]
    held = dict(out.capacity)["kv_sequences"].value
    mean = p.load.running.value
    assert int(got["--max-num-seqs"]) == _cap_of(mean, held)
    assert int(got["--max-num-seqs"]) > math.ceil(mean) + 1  # well above the mean: 3σ of a Poisson count
    assert f"# --max-num-seqs {got['--max-num-seqs']}: the mean running count" in text  # the rule is stated
    assert got["--max-model-len"] == "4512"
    assert got["--max-num-batched-tokens"] == str(int(p.load.chunk.value))


def test_the_cap_is_what_the_pool_holds_where_that_is_fewer() -> None:
    p = plan_on("examples/service-rate.kvp")
    assert p.load is not None and p.load.running is not None
    out = emit(p, "vllm", sizing="exact")  # the plan's own pool: no room for the headroom
    text = files(out)["vllm.sh"]
    held = dict(out.capacity)["kv_sequences"].value
    got = int(flags(shell(text)[1])[1]["--max-num-seqs"])
    assert got == _cap_of(p.load.running.value, held) == int(held)
    assert "the KV pool holds" in text and "fewer than the mean running count" in text


def test_sglang_and_trtllm_cap_the_same_way() -> None:
    import yaml

    p = plan_on("examples/service-rate.kvp", **{"engine  = vllm": "engine  = sglang"})
    assert p.load is not None and p.load.running is not None
    out = emit(p, "sglang")
    got = flags(shell(files(out)["sglang.sh"])[1])[1]
    assert int(got["--max-running-requests"]) == _cap_of(p.load.running.value, dict(out.capacity)["kv_sequences"].value)
    t = emit(p, "trtllm")
    body = yaml.safe_load(files(t)["trtllm.yaml"])
    assert body["max_batch_size"] == _cap_of(p.load.running.value, dict(t.capacity)["kv_sequences"].value)


def test_a_batch_workload_caps_at_its_batch() -> None:
    p = plan_on("examples/w2-batch32.kvp")
    got = flags(shell(files(emit(p, "vllm"))["vllm.sh"])[1])[1]
    assert got["--max-num-seqs"] == "32"


def test_a_fixed_length_workload_warns_that_it_pins_max_model_len_and_the_fix_works() -> None:
    p = plan_on("examples/service-rate.kvp")
    out = emit(p, "vllm")
    (note,) = [w for w in out.warnings if "is input + output exactly" in w]
    fix = re.search(r"`(max_context = (\d+))`", note)
    assert fix is not None
    fixed = plan_on("examples/service-rate.kvp", **{"output = 512": f"output = 512\n        {fix[1]}"})
    again = emit(fixed, "vllm")
    assert flags(shell(files(again)["vllm.sh"])[1])[1]["--max-model-len"] == fix[2]
    assert not [w for w in again.warnings if "exactly" in w]
    uniform = emit(plan_on("examples/service-uniform.kvp"), "vllm")  # uniform lengths: the upper bounds, no note
    assert flags(shell(files(uniform)["vllm.sh"])[1])[1]["--max-model-len"] == str(6000 + 768)
    assert not [w for w in uniform.warnings if "exactly" in w]


@pytest.mark.parametrize("device", sorted(devices()))
def test_the_default_chunk_is_the_batched_tokens_emit_writes_for_vllm(device: str) -> None:
    d = devices()[device]
    assert service.default_chunk(d.memory, d.id)[0] == vpool.default_batched_tokens(d.memory, d.id)[0]
