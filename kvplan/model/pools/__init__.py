"""Each engine's memory pool, below the planner (issue 20, item 2): the planner fits every candidate against the
chosen engine's own pool, and that engine's writer (kvplan/engines/<id>.py) writes the setting the same formula
derives, so that advise, lint and the emitted file agree by construction.

    fit(engine, query) -> Fit | None     the candidate against the engine's pool; None: the engine's pool is
                                         kvplan.model.memory's share in whole blocks (the planner's own test)

One module per engine that sizes its pool its own way, each in `FORMULAS` (the literal table keyed by the engine
record's id), which the planner fits every candidate against: vllm.py (vLLM 0.33.0's --gpu-memory-utilization,
raised where its default does not hold the plan, its KV cache groups), sglang.py (SGLang 0.5.23's
--mem-fraction-static, its hybrid sliding-window pool for gpt-oss) and trtllm.py (TensorRT-LLM's
free_gpu_memory_fraction and max_tokens, its own bytes per token: ceil(n_kv / tp) heads per rank).
"""

from __future__ import annotations

from typing import Callable, Mapping, Optional

from kvplan.model.pools import sglang, trtllm, vllm
from kvplan.model.pools.query import Fit, PoolQuery, PoolSettings

__all__ = ["FORMULAS", "Fit", "PoolQuery", "PoolSettings", "fit"]

#: engine id -> its pool formula (the engines whose pool is not kvplan.model.memory's share in whole blocks)
FORMULAS: Mapping[str, Callable[[PoolQuery], Optional[Fit]]] = {
    "sglang": sglang.fit,
    "trtllm": trtllm.fit,
    "vllm": vllm.fit,
}


def fit(engine: str, query: PoolQuery) -> Optional[Fit]:
    """The candidate against `engine`'s own pool, or None where the memory model's test is the engine's (an engine
    without a formula of its own, or a KV dtype it does not store)."""
    formula = FORMULAS.get(engine)
    return None if formula is None else formula(query)
