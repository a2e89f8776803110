"""Each engine's memory pool, below the planner (issue 20, item 2): the planner fits every candidate against the
chosen engine's own pool, and that engine's writer (kvplan/engines/<id>.py) writes the setting the same formula
derives, so that advise, lint and the emitted file agree by construction.

    fit(engine, query) -> Fit | None     the candidate against the engine's pool; None: the engine's pool is
                                         kvplan.model.memory's share in whole blocks (the planner's own test)

One module per engine that sizes its pool its own way: vllm.py (vLLM 0.33.0's --gpu-memory-utilization, raised
where its default does not hold the plan, its KV cache groups) and sglang.py (SGLang 0.5.23's --mem-fraction-static,
its hybrid sliding-window pool for gpt-oss), which the planner fits against (`FORMULAS`, the literal table keyed by
the engine record's id); trtllm.py (TensorRT-LLM's free_gpu_memory_fraction and max_tokens, its own bytes per
token), which its writer computes with but the planner does not fit against yet: with tp above the KV heads
TensorRT-LLM's n_kv // tp counts fewer bytes than the memory model's replicated heads, and fitting against it
changes the plans of tests/data/emit/w2-h100-any.kvp.
"""

from __future__ import annotations

from typing import Callable, Mapping, Optional

from kvplan.model.pools import sglang, vllm
from kvplan.model.pools.query import Fit, PoolQuery, PoolSettings

__all__ = ["FORMULAS", "Fit", "PoolQuery", "PoolSettings", "fit"]

#: engine id -> its pool formula (the engines whose pool is not kvplan.model.memory's share in whole blocks)
FORMULAS: Mapping[str, Callable[[PoolQuery], Optional[Fit]]] = {
    "sglang": sglang.fit,
    "vllm": vllm.fit,
}


def fit(engine: str, query: PoolQuery) -> Optional[Fit]:
    """The candidate against `engine`'s own pool, or None where the memory model's test is the engine's (an engine
    without a formula of its own, or a KV dtype it does not store)."""
    formula = FORMULAS.get(engine)
    return None if formula is None else formula(query)
