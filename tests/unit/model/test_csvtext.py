"""kvplan.model.csvtext: the vectorized text equals the straightforward reference, value by value."""

from __future__ import annotations

import math

import numpy as np
import pytest

from kvplan.model import csvtext as ct


def _texts(grid: np.ndarray) -> list[str]:
    """Each row of a NUL-padded text column, the padding dropped."""
    return [bytes(r[r != 0]).decode() for r in grid]


def _hard_values() -> list[float]:
    """Values at the edges of the rules: zero, non-finite, 2**53, powers of ten and their neighbours,
    halfway cases of the sixth digit (decimal ties and the doubles next to them), exponent forms."""
    out = [0.0, -0.0, math.inf, -math.inf, math.nan, 0.5, 1.5, 2.5, -2.5, 2.0**53, 2.0**53 - 1, -(2.0**53),
           2.0**53 + 2, 1e-5, 1e-4, 9.99999e-5, 99999.95, 999999.5, 9999995.0, 123456.5, 0.0000125, 1e16, 1e22,
           1e-16, 5e-324, 1.7976931348623157e308, 1e100, 1e-100, 123456789.123, 0.1, 0.2, 0.3, 1 / 3]
    for e in range(-20, 25):
        p = 10.0**e
        out += [p, math.nextafter(p, 0), math.nextafter(p, math.inf), p * 0.9999995, p * 9.999995]
    rng = np.random.default_rng(7)
    for digits in rng.integers(1_000_000, 10_000_000, 300):  # seven digits ending in 5: the sixth rounds half-way
        tie = float(digits) * 10 + 5
        for e in (-12, -7, -3, 0, 2, 5, 9):
            x = tie * 10.0**e
            out += [x, math.nextafter(x, 0), math.nextafter(x, math.inf)]
    return out


def test_numbers_equal_the_reference_on_random_and_hard_values() -> None:
    rng = np.random.default_rng(1)
    n = 40_000
    mags = rng.random(n) * 10.0 ** rng.integers(-22, 26, n)
    x = np.concatenate([mags, -mags[:2000], rng.integers(-(2**53), 2**53, 2000).astype(np.float64),
                        rng.integers(0, 10**7, 2000) / 1000.0, np.array(_hard_values())])
    rng.shuffle(x)
    assert _texts(ct.numbers(x)) == [ct.number_text(v) for v in x.tolist()]


@pytest.mark.parametrize("scale", [1e-3, 1.0, 1e3, 1e7])
def test_numbers_of_one_magnitude_and_of_whole_columns(scale: float) -> None:
    """The common cases each take their own path: a column of one form, and a column of whole numbers."""
    rng = np.random.default_rng(int(scale * 1000) % 97)
    x = (1 + rng.random(5000)) * scale
    assert _texts(ct.numbers(x)) == ["%.6g" % v for v in x.tolist()]
    whole = np.floor(x * 1000)
    assert _texts(ct.numbers(whole)) == [str(int(v)) for v in whole.tolist()]


def test_reference_rule() -> None:
    """number_text by hand: integers for whole numbers below 2**53, %.6g for the rest."""
    assert [ct.number_text(v) for v in (41943040000.0, 2.0**53, 0.059581466624000004, 1722498.7, 1e-5, -0.0)] == [
        "41943040000", "9.0072e+15", "0.0595815", "1.7225e+06", "1e-05", "0"]
    assert [ct.number_text(v) for v in (math.inf, -math.inf, math.nan)] == ["inf", "-inf", "nan"]


def test_integers_equal_str() -> None:
    rng = np.random.default_rng(3)
    v = np.concatenate([rng.integers(-(2**53) + 1, 2**53, 20_000), [0, 1, -1, 9, 10, 9999, 10_000, 2**53 - 1],
                        rng.integers(0, 1000, 100)])
    assert _texts(ct.integers(v)) == [str(i) for i in v.tolist()]
    assert ct.integers(np.array([7, 12, 345])).shape[1] == 3  # as wide as the widest value needs
    with pytest.raises(ValueError):
        ct.integers(np.array([2**53]))


def test_join_and_pick() -> None:
    rng = np.random.default_rng(5)
    names = [b"weight-bound,", b"kv-bound,", b"capacity-bound,"]
    index = rng.integers(0, 3, 1000)
    x = rng.random(1000) * 100
    got = ct.join([ct.pick(ct.table(names), index), ct.numbers(x), b"\n"], 1000)
    assert got == b"".join(names[i] + ("%.6g" % v).encode() + b"\n" for i, v in zip(index, x.tolist()))
