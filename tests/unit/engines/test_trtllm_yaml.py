"""kvplan import --from trtllm reads YAML whose keys and values are not what it expects (found typing it)."""

from __future__ import annotations

import pytest

from kvplan.engines import trtllm
from kvplan.engines.flagparse import DeploymentReadError

# ------------------------------------------------------------------ TensorRT-LLM YAML keys

def test_a_quant_config_with_keys_of_mixed_types_is_read() -> None:
    """YAML keys need not be strings: `1:` is an int. The weight-quantization keys are named in the
    order of their text; before, sorting an int key with string keys raised a TypeError."""
    r = trtllm.read("quant_config:\n  quant_algo: FP8\n  1: x\n  kv_cache_quant_algo: FP8\n", where="t.yaml")
    assert r.kv_dtype == ("fp8", "quant_config.kv_cache_quant_algo: FP8")
    quant = [n for n in r.notes if n.startswith("quant_config.")]
    assert quant == ["quant_config.1: x: weight quantization; set `weights` by hand if it applies",
                     "quant_config.quant_algo: FP8: weight quantization; set `weights` by hand if it applies"]


@pytest.mark.parametrize("value,written", [("[1, 2]", "[1, 2]"), ("{a: 1}", "{'a': 1}"),
                                           ("2024-01-01", "2024-01-01"), ("null", "None"), ("-1", "-1")])
def test_a_host_cache_size_that_is_no_number_says_so(value: str, written: str) -> None:
    """What number() says of each kind of YAML value that is not a number of at least 0 (as before typing it)."""
    with pytest.raises(DeploymentReadError) as err:
        trtllm.read(f"kv_cache_config:\n  host_cache_size: {value}\n", where="t.yaml")
    what = "a finite number of at least 0" if value == "-1" else "a number"
    assert err.value.message == f"kv_cache_config.host_cache_size: {written} takes {what}, got '{written}'"


