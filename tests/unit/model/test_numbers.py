"""One set of numbers: the unit tests that need the model layer.

Split by layer from the tests of the same subject in tests/acceptance/test_numbers.py,
tests/unit/lang/test_numbers.py, tests/unit/planner/test_numbers.py; tests/acceptance/test_numbers.py says
what they check.
"""

from __future__ import annotations

import re

# "the weights alone (16.06 GB) exceed the memory (16.06 GB)": two figures that read as equal
_EXCEED = re.compile(r"\(([^()]+)\) exceed the memory (?:of [^(]*)?\(([^()]+)\)")


def _no_equal_exceed(text: str, where: str) -> None:
    for m in _EXCEED.finditer(text):
        assert m[1] != m[2], (where, m[0])


def test_weights_exceed_note_never_joins_two_equal_figures_with_exceed() -> None:
    from kvplan.model.regime import weights_exceed_note

    close = weights_exceed_note(16.0605e9, 16.0601e9)  # 16.06 GB and 16.06 GB at four digits
    assert "(16.061 GB) exceed the memory (16.060 GB) by 400 KB" in close, close
    _no_equal_exceed(close, "note")
    assert "exceed" not in weights_exceed_note(16.06e9, 16.06e9)
