"""kvplan sweep: the unit tests that need the model layer.

Split by layer from the tests of the same subject in tests/acceptance/test_sweep.py;
tests/acceptance/test_sweep.py says what they check.
"""

from __future__ import annotations

import pytest

from kvplan import catalog
from kvplan.base import limits
from kvplan.base.errors import KvplanError
from kvplan.model import sweep as sw

LLAMA = catalog.get_model("llama-3-70b")
B200 = catalog.get_device("b200")


# ------------------------------------------------------------------ lists

@pytest.mark.parametrize("text, kind, expected", [
    ("1,8,32", "int", (1, 8, 32)),
    ("1..4", "int", (1, 2, 3, 4)),
    ("1..1024:x2", "int", tuple(2**k for k in range(11))),
    ("3..100:x3", "int", (3, 9, 27, 81)),
    ("8..2,1", "int", None),  # downward range: error below
    ("1,1,2,1", "int", (1, 2)),
    (" 2 , 4 ", "int", (2, 4)),
    ("128k", "tokens", (128_000,)),
    ("1M", "tokens", (1_000_000,)),
    ("32Ki", "tokens", (32_768,)),
    ("4k..1M:x2", "tokens", tuple(4000 * 2**k for k in range(8))),  # 4k·2^8 = 1.024M > 1M
    ("4Ki..1Mi:x2", "tokens", tuple(2**k for k in range(12, 21))),
    ("8k..32k:+8k", "tokens", (8000, 16000, 24000, 32000)),
    ("1k..1003", "tokens", (1000, 1001, 1002, 1003)),
])
def test_parse_list(text: str, kind: str, expected: tuple[int, ...] | None) -> None:
    if expected is None:
        with pytest.raises(sw.SweepError, match="downward"):
            sw.parse_list(text, kind, "batch")
    else:
        assert sw.parse_list(text, kind, "batch") == expected


@pytest.mark.parametrize("text, kind, needle", [
    ("1..", "int", "needs both ends"),
    ("..8", "int", "needs both ends"),
    ("1...8", "int", "not a whole number"),
    ("1..8:x1", "int", "factor above 1"),
    ("1..8:x", "int", "factor above 1"),
    ("1..8:+0", "int", "step of at least 1"),
    ("1..8:+1.5", "int", "step of at least 1"),
    ("0", "int", "at least 1"),
    ("1.5", "int", "not a whole number"),
    ("eight", "int", "cannot read 'eight'"),
    ("1,,2", "int", "empty item"),
    ("", "int", "empty list"),
    ("1..50000000", "tokens", "more than"),          # 5e7 values: past the 10^7 cap
    ("1..100000000000", "int", "above 1,048,576, kvplan's limit for batch"),
    ("40 GB", "tokens", "context takes tokens"),
    ("0.5k..2k:x2.5", "tokens", None),
])
def test_parse_list_errors(text: str, kind: str, needle: str | None) -> None:
    if needle is None:  # a fractional factor rounds each value to a whole token count
        assert sw.parse_list(text, kind, "context") == (500, 1250)
        return
    with pytest.raises(KvplanError, match=needle):
        sw.parse_list(text, kind, "context" if kind == "tokens" else "batch")


def test_parse_dtypes_resolves_aliases_and_rejects_unknown() -> None:
    assert sw.parse_dtypes("bf16,bfloat16,2bit,fp8") == ("bf16", "int2", "fp8")
    with pytest.raises(catalog.CatalogError, match="unknown dtype 'int3'"):
        sw.parse_dtypes("bf16,int3")


def test_chunking_does_not_change_output() -> None:
    spec = sw.spec_from_flags(LLAMA, B200, devices="1,4", kv_dtypes="bf16,fp8", batch="1..9",
                              context="1k..100k:+7k")
    whole = "".join(t for _, t in sw.csv_text([spec]))
    pieces = list(sw.csv_text([spec], chunk=7))
    assert "".join(t for _, t in pieces) == whole
    assert sum(n for n, _ in pieces) == spec.points == 2 * 2 * 9 * 15
    assert whole.count("\n") == spec.points + 1


def test_the_grid_limit_is_on_the_product_and_admits_issue_13s_sweeps() -> None:
    assert limits.MAX_SWEEP_POINTS >= 10**7
    model, device = catalog.get_model("llama-3-8b"), catalog.get_device("h100-sxm")
    edge = sw.spec_from_flags(model, device, batch="1..10000", context="1..10000")  # 10^4 × 10^4 = 10^8
    assert sw.total_points([edge]) == 10**8 == limits.MAX_SWEEP_POINTS
    over = sw.spec_from_flags(model, device, devices="1,2", batch="1..10000", context="1..10000")
    with pytest.raises(sw.SweepError, match="200,000,000 points"):
        sw.total_points([over])
    # A file's deployments count together: two grids of 6·10^7 are over, though each alone is under.
    part = sw.spec_from_flags(model, device, batch="1..6000", context="1..10000")
    assert sw.total_points([part]) == 6 * 10**7
    with pytest.raises(sw.SweepError, match="120,000,000 points .the grids of 2 deployments together"):
        sw.total_points([part, part])
