"""The engines' facts are one catalog record each (kvplan.catalog.engines): the unit tests that need the catalog layer.

Split by layer from the tests of the same subject in tests/acceptance/test_engine_records.py,
tests/unit/app/test_engine_records.py, tests/unit/lang/test_engine_records.py;
tests/unit/app/test_engine_records.py says what they check.
"""

from __future__ import annotations

import pytest

from kvplan.catalog.engines import ENGINES

ENGINE_IDS = ("vllm", "sglang", "trtllm")


@pytest.mark.parametrize("engine", ENGINE_IDS)
def test_every_name_emit_writes_reads_back_as_the_same_dtype(engine: str) -> None:
    """kv_names (what emit writes) and kv_reads (what import reads) are one record: every written name is
    read back as the dtype it was written for, except `auto`, which is the checkpoint's dtype."""
    e = ENGINES[engine]
    for dtype, name in e.kv_names.items():
        assert name in e.kv_reads, (dtype, name)
        if name != "auto":
            assert e.kv_reads[name][0] == dtype, (dtype, name)
