"""The planner: the unit tests that need the model layer.

Split by layer from the tests of the same subject in tests/acceptance/test_planner.py,
tests/unit/planner/test_planner.py; tests/unit/planner/test_planner.py says what they check.
"""

from __future__ import annotations

import pytest


def test_moe_short_context_intensity_limit_uses_bytes_read() -> None:
    from kvplan import catalog
    from kvplan.model import roofline as rf

    m = catalog.get_model("deepseek-v3")
    short, _ = rf.intensity_limits(m, 1, 1.0, 2.0)
    # at b = 1 a step reads the non-routed weights plus k/E of the routed ones
    read = (m.params - m.params_routed) + m.params_routed * m.experts_per_token / m.n_experts
    assert float(short) == pytest.approx(2 * m.params_active / read)
    assert float(short) <= float(rf.intensity(rf.Config(m, catalog.get_device("mi300x"), w_p=1.0), 1, 1))
