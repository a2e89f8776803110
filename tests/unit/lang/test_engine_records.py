"""The engines' facts are one catalog record each (kvplan.catalog.engines): the unit tests that need the lang layer.

Split by layer from the tests of the same subject in tests/acceptance/test_engine_records.py,
tests/unit/catalog/test_engine_records.py, tests/unit/app/test_engine_records.py;
tests/unit/app/test_engine_records.py says what they check.
"""

from __future__ import annotations

import pytest

from kvplan.lang import check_source


def spec(engine: str, kv: str, block: int, prefix: str, devices: int = 2) -> str:
    return f"""kvplan 1

deployment "rt" {{
    model = llama-3-8b
    device = h100-sxm
    devices = {devices}
    engine = {engine}

    workload {{
        batch = 16
        context = 8k
    }}

    quality {{
        budget = aggressive
    }}

    pin {{
        kv_dtype = {kv}
        block_size = {block}
        prefix_caching = {prefix}
    }}
}}
"""


@pytest.mark.parametrize("word,engine", [("trt-llm", "trtllm"), ("tensorrt", "trtllm"), ("sg-lang", "sglang")])
def test_an_alias_in_the_record_is_suggested(word: str, engine: str) -> None:
    result = check_source(spec(word, "fp8", 32, "on"), "rt.kvp")
    (d,) = result.diagnostics
    assert (d.code, d.help) == ("KV110", f"did you mean `{engine}`?")
    assert [e.text for f in d.fixes for e in f.edits] == [engine]


TOY_SPEC = spec("toy", "int8", 48, "on", devices=1).replace("        block_size = 48\n", "")


def test_a_toy_engine_is_refused_before_it_is_registered() -> None:
    result = check_source(TOY_SPEC, "toy.kvp")
    assert not result.ok and any("toy" in d.message for d in result.diagnostics)
