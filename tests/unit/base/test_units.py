"""Units never surprise: the unit tests that need the base layer.

Split by layer from the tests of the same subject in tests/acceptance/test_units.py,
tests/unit/app/test_units.py, tests/unit/lang/test_units.py; tests/acceptance/test_units.py says what
they check.
"""

from __future__ import annotations

import pytest

from kvplan.base import units
from kvplan.base.errors import KvplanError
from kvplan.base.units import UNITS, Dim, parse_quantity

# ------------------------------------------------------------------ did you mean

@pytest.mark.parametrize("written, table, meant", [
    ("GIB", Dim.BYTES, "GiB"), ("gib", Dim.BYTES, "GiB"), ("Gib", Dim.BYTES, "GiB"), ("KIB", Dim.BYTES, "KiB"),
    ("gb", Dim.BYTES, "GB"), ("TIB/S", Dim.BANDWIDTH, "TiB/s"), ("TB/S", Dim.BANDWIDTH, "TB/s"),
    ("MS", Dim.TIME, "ms"), ("KI", Dim.TOKENS, "Ki"), ("mi", Dim.TOKENS, "Mi"),
    ("GiBB", Dim.BYTES, "GiB"),    # a typo of a binary unit stays binary
    ("GBB", Dim.BYTES, "GB"),      # and of a decimal one decimal
])
def test_a_unit_suggestion_keeps_binary_and_decimal_apart(written: str, table: Dim, meant: str) -> None:
    assert units.suggest_unit(written, UNITS[table]) == meant
    with pytest.raises(KvplanError) as info:
        parse_quantity(f"5 {written}", table, what="x")
    assert f"did you mean '{meant}'" in (info.value.help or "")


def test_a_quantity_that_overflows_is_refused_as_not_finite() -> None:
    with pytest.raises(KvplanError, match="not a finite number"):
        parse_quantity("1e400", Dim.TOKENS, what="context")
