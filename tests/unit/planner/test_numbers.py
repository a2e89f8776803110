"""One set of numbers: the unit tests that need the planner layer.

Split by layer from the tests of the same subject in tests/acceptance/test_numbers.py,
tests/unit/lang/test_numbers.py, tests/unit/model/test_numbers.py; tests/acceptance/test_numbers.py says
what they check.
"""

from __future__ import annotations

from kvplan import catalog


def test_widest_tp_is_the_searchs_first_option_and_bounded() -> None:
    import time

    from kvplan.model.regime import widest_tp
    from kvplan.planner.search import tp_options

    for mid in ("deepseek-v3", "llama-3-70b", "llama-3-8b"):
        m = catalog.get_model(mid)
        for n in range(1, 65):
            opts = tp_options(m, n)
            if opts:
                assert widest_tp(m, n) == opts[0], (mid, n)
            else:  # no split at all: even the widest tensor-parallel size leaves a stage without a layer
                assert n // widest_tp(m, n) > m.n_layers, (mid, n)
    start = time.monotonic()
    assert widest_tp(catalog.get_model("llama-3-70b"), 10**12) == 64  # 64 query heads, 8 KV heads
    assert time.monotonic() - start < 1.0
