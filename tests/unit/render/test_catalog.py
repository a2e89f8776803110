"""The shipped catalogs: the unit tests that need the render layer.

Split by layer from the tests of the same subject in tests/acceptance/test_catalog.py,
tests/unit/catalog/test_catalog.py; tests/unit/catalog/test_catalog.py says what they check.
"""

from __future__ import annotations

import sys

import pytest

from kvplan import catalog
from kvplan.render import catalog_view

if sys.version_info >= (3, 11):
    pass
else:  # pragma: no cover
    pass


@pytest.mark.parametrize("mid, expected", [
    ("llama-3-70b", 327_680), ("llama-3-8b", 131_072), ("deepseek-v2", 69_120),
    ("qwen2.5-7b", 57_344), ("mistral-7b", 131_072),
])
def test_per_token_kv_bytes_bf16(mid: str, expected: int) -> None:
    m = catalog.get_model(mid)
    if m.kv_kind == "mla":
        kappa = m.n_layers * (m.mla_kv_rank + m.mla_rope_dim) * 2  # SPEC §2: L·(d_c + d_r)·w_kv
    else:
        kappa = 2 * m.n_layers * m.n_kv * m.head_dim * 2  # SPEC §3: 2·L·n_kv·d_h·w_kv
    assert kappa == expected
    assert catalog_view.kv_bytes_per_token(m) == expected
