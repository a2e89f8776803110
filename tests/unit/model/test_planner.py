"""The planner: the unit tests that need the model layer.

Split by layer from the tests of the same subject in tests/acceptance/test_planner.py,
tests/unit/planner/test_planner.py; tests/unit/planner/test_planner.py says what they check.
"""

from __future__ import annotations

import pytest


def test_moe_short_context_intensity_limit_uses_bytes_read() -> None:
    import attrs

    from kvplan import catalog
    from kvplan.model import roofline as rf

    ckpt = catalog.get_model("deepseek-v3")
    m = attrs.evolve(ckpt, weight_bytes=None)  # declared weights: parameters × w_p
    short, _ = rf.intensity_limits(m, 1, 1.0, 2.0)
    # at b = 1 a step reads the non-routed weights plus k/E of the routed ones
    read = (m.params - m.params_routed) + m.params_routed * m.experts_per_token / m.n_experts
    assert float(short) == pytest.approx(2 * m.params_active / read)
    assert float(short) <= float(rf.intensity(rf.Config(m, catalog.get_device("mi300x"), w_p=1.0), 1, 1))
    # the catalog's own FP8 checkpoint, by hand from its quantization_config (fp8, 128 × 128 blocks): every
    # linear weight 1 B + a 4 B scale per 16,384, the embedding and the untied head (129,280 × 7,168 each) bf16
    per, embed = 1 + 4 / 16_384, 129_280 * 7_168
    read_ckpt = (2 * embed * 2 + (m.params - m.params_routed - 2 * embed) * per
                 + m.params_routed * per * m.experts_per_token / m.n_experts)
    assert float(rf.intensity_limits(ckpt, 1, 1.0, 2.0)[0]) == pytest.approx(2 * m.params_active / read_ckpt,
                                                                             rel=1e-9)
