"""Units never surprise: the unit tests that need the engines layer.

Split by layer from the tests of the same subject in tests/acceptance/test_units.py,
tests/unit/base/test_units.py, tests/unit/lang/test_units.py; tests/acceptance/test_units.py says what they
check.
"""

from __future__ import annotations

import pytest

from kvplan.app import importer
from kvplan.base.units import Dim, parse_quantity
from kvplan.lang import check_source
from tests.unit.lang.test_units import _kv125

# ------------------------------------------------------------------ import: each engine's reading

@pytest.mark.parametrize("engine, value, tokens, note", [
    ("vllm", "128K", 131_072, "vLLM reads K as 2^10: 131,072 tokens"),
    ("vllm", "128k", 128_000, ""),
    ("vllm", "1M", 1_048_576, "vLLM reads M as 2^20: 1,048,576 tokens"),
    ("vllm", "1m", 1_000_000, ""),
    ("vllm", "1G", 2**30, "vLLM reads G as 2^30: 1,073,741,824 tokens"),
    ("vllm", "25.6k", 25_600, ""),
    ("vllm", "32768", 32_768, ""),
    ("vllm", "1_000", 1_000, ""),                       # int() takes an underscore
    ("sglang", "128k", 128_000, ""),
    ("sglang", "1M", 1_000_000, ""),                      # SGLang's M is SI, unlike vLLM's
    ("sglang", "128Ki", 131_072, "SGLang reads Ki as 2^10: 131,072 tokens"),
    ("trtllm", "131072", 131_072, ""),
])
def test_each_engine_reads_its_own_suffixes(engine: str, value: str, tokens: int, note: str) -> None:
    read = getattr(importer, f"{engine}_tokens")
    assert read(value, "--flag") == (tokens, note)
    assert parse_quantity(importer.tokens_text(tokens), Dim.TOKENS) == tokens   # written so kvplan reads the same


@pytest.mark.parametrize("engine, value, words", [
    ("vllm", "1.5K", "decimal before the binary suffix"),
    ("vllm", "128Ki", "not a token count vLLM reads"),
    ("vllm", "9" * 400, "between 1 and 1,073,741,824, got a 400-digit number"),
    ("vllm", "0", "between 1 and 1,073,741,824, got 0"),
    ("sglang", "128K", "SGLang refuses this suffix"),
    ("sglang", "1.5Ki", "decimal"),
    ("trtllm", "128k", "not a token count TensorRT-LLM reads"),
])
def test_a_suffix_the_engine_would_refuse_is_refused_in_one_line(engine: str, value: str, words: str) -> None:
    read = getattr(importer, f"{engine}_tokens")
    with pytest.raises(importer.DeploymentReadError) as info:
        read(value, "--flag")
    assert words in str(info.value) and len(str(info.value)) < 300


def test_imported_binary_context_is_written_exactly_with_how_the_engine_read_it() -> None:
    out = importer.import_deployment("vllm", "vllm serve x --max-model-len 128K --max-num-seqs 8",
                                     importer.Options(model="llama-3-8b", device="h100-sxm"))
    line = next(ln for ln in out.text.splitlines() if ln.strip().startswith("context"))
    assert line.split("#")[0].split("=")[1].strip() == "128Ki"
    assert "--max-model-len 128K (vLLM reads K as 2^10: 131,072 tokens)" in line
    (sc,) = check_source(out.text, "i.kvp").scenarios
    assert sc.context == 131_072 and not _kv125(out.text)


def test_vllm_max_model_len_auto_takes_the_models_limit() -> None:
    out = importer.import_deployment("vllm", "vllm serve x --max-model-len auto --max-num-seqs 8",
                                     importer.Options(model="llama-3-8b", device="h100-sxm"))
    assert "vLLM derives the limit from the model config" in out.text
    assert "the model's max context" in out.text
