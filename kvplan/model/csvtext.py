"""Vectorized CSV text: whole columns of numbers turned into bytes without a Python object per value.

A column of text is a ``Field``: an ``(n, w)`` uint8 matrix, one row per value, its
bytes padded with NUL (0) anywhere in the row. ``join`` lays fields side by side and
drops the padding, so a CSV row costs numpy work per column, not per value.

Numbers follow one rule, written out by ``number_text`` (the reference the tests check
the vectorized path against, value by value):

* a whole number of magnitude below 2**53 is written as an integer (``41943040000``);
* any other finite number is written as C's ``%.6g``: 6 significant digits, trailing
  zeros dropped, an exponent below 1e-4 and from 1e6 up (``0.0281242``, ``284.453``,
  ``1.5e+06``);
* ``inf``, ``-inf`` and ``nan`` as such.

The vectorized ``%.6g`` scales each value by an exact power of ten (10**k, k ≤ 22)
so that it lies in [1e5, 1e6), where one IEEE multiplication or division errs by at
most 2**-33; it rounds to the nearest integer and hands the few values whose fraction
lies within 1e-9 of one half (ties, or too close to call), and values outside
[1e-16, 1e22), to Python's own formatting. So every value is written exactly as
``'%.6g' % x`` would write it.
"""

from __future__ import annotations

import math
from typing import Sequence, Union

import numpy as np
import numpy.typing as npt

U8 = npt.NDArray[np.uint8]
#: A part of a row: a column of text (an (n, w) uint8 matrix, NUL-padded) or bytes the same in every row.
Part = Union[U8, bytes]

#: Significant digits of a number that is not whole (C's %g default).
DIGITS = 6
_EXACT_INT = 2.0**53
_P10 = 10.0 ** np.arange(0, 23)
#: Lookup tables of digit text, read as little-endian words ("<u4") wherever they are used, so that the
#: shifts below put each byte where the text wants it on any machine.
_LUT4 = np.frombuffer(b"".join(b"%04d" % i for i in range(10_000)), dtype="<u4")

_TZ4 = np.array([4 if i == 0 else len(str(i)) - len(str(i).rstrip("0")) for i in range(10_000)], dtype=np.int8)
_TZ2 = np.array([2 if i == 0 else len(str(i)) - len(str(i).rstrip("0")) for i in range(100)], dtype=np.int8)


def number_text(x: float) -> str:
    """The text of one number (module docstring): the reference of `numbers`."""
    if not math.isfinite(x):
        return "nan" if x != x else ("inf" if x > 0 else "-inf")
    if x == int(x) and abs(x) < _EXACT_INT:
        return str(int(x))
    return "%.6g" % x


def table(texts: Sequence[bytes]) -> npt.NDArray[np.bytes_]:
    """A lookup table of texts for `pick` (NUL-padded to the longest)."""
    return np.array(list(texts), dtype=f"S{max(1, max(len(t) for t in texts))}")


def pick(texts: npt.NDArray[np.bytes_], index: Union[npt.NDArray[np.int8], npt.NDArray[np.int64]]) -> U8:
    """The texts of a `table` picked by `index`, one per row, gathered whole rows at a time."""
    out: U8 = texts[index].view(np.uint8).reshape(len(index), texts.itemsize)
    return out


def integers(v: npt.NDArray[np.int64]) -> U8:
    """Whole numbers (|v| < 2**53) as decimal text, right-aligned, leading zeros as NUL."""
    n = len(v)
    a = np.abs(v)
    top = int(a.max()) if n else 0
    if top >= 2**53:
        raise ValueError("csvtext.integers: |v| must be below 2**53")
    w = len(str(top))
    out = _quads(a, (w + 3) // 4)[:, -w:]  # the digits the largest value needs
    place = np.array([10**p for p in range(w - 1, 0, -1)] + [0], dtype=np.int64)  # the units digit: even 0
    out *= a[:, None] >= place[None, :]
    if (v < 0).any():
        sign = np.where(v < 0, np.uint8(ord("-")), np.uint8(0)).astype(np.uint8)
        out = np.concatenate([sign[:, None], out], axis=1)
    return out


def _stripped(i: int, width: int, lead: bool) -> bytes:
    text = b"%0*d" % (width, i)
    if lead:  # leading zeros as NUL (the value 0 too: the caller writes the units digit)
        return text.lstrip(b"0").rjust(width, b"\0")
    return text.rstrip(b"0").ljust(width, b"\0")  # trailing zeros as NUL


#: 0..99 without leading zeros; 0..9999 with the units digit always; 0..9999 without trailing zeros.
_LUT2_LEAD = np.frombuffer(b"".join(_stripped(i, 2, True) for i in range(100)), dtype="<u2")
_LUT4_UNITS = np.frombuffer(b"".join(_stripped(i, 4, True) if i else b"\0\0\0" + b"0" for i in range(10_000)),
                            dtype="<u4")
_LUT4_TRAIL = np.frombuffer(b"".join(_stripped(i, 4, False) for i in range(10_000)), dtype="<u4")
_I10 = 10.0 ** np.arange(0, 10)


def _quads(v: npt.NDArray[np.int64], groups: int) -> U8:
    """The decimal digits of 0 ≤ v < min(2**53, 10**(4·groups)), zero-padded, as an (n, 4·groups) matrix.
    In float64, where numpy divides fast: v and every quotient are exact; floor(q / 1e4) is the true
    quotient since q < 2**53 keeps the rounded q / 1e4 at least 1e-4 below the next whole number."""
    quads = np.empty((len(v), groups), dtype="<u4")
    q = v.astype(np.float64)
    for g in range(groups - 1, -1, -1):
        nq = np.floor(q / 10_000.0)
        quads[:, g] = _LUT4[(q - nq * 10_000.0).astype(np.intp)]
        q = nq
    return quads.view(np.uint8).reshape(len(v), 4 * groups)


def _positional(m: npt.NDArray[np.float64], x: npt.NDArray[np.int64]) -> U8:
    """m (a whole number of six digits) × 10**(x-5), -4 ≤ x ≤ 5, as %g writes it without an exponent:
    no leading zeros but the units digit, no trailing zeros, no point without decimals.

    The value in units of 1e-9, v = m·10**(x+4) < 1e15, is exact in float64, and so are the whole
    parts of its quotients by powers of ten (see _quads): integer part ip = ih·10**4 + il, decimals
    f = f1·10**5 + f2·10 + f3. Each group's text is one lookup, its leading or trailing zeros already NUL."""
    n = len(m)
    v = m * _I10[x + 4]
    ip = np.floor(v / 1e9)
    f = v - ip * 1e9
    ih = np.floor(ip / 1e4)
    il = (ip - ih * 1e4).astype(np.intp)
    f1 = np.floor(f / 1e5)
    rest = f - f1 * 1e5
    f2 = np.floor(rest / 10.0)
    f3 = (rest - f2 * 10.0).astype(np.uint8)
    ihi = ih.astype(np.intp)
    f1i, f2i = f1.astype(np.intp), f2.astype(np.intp)
    # The 16 bytes [ih 2][il 4][. 1][f1 4][f2 4][f3 1] as four little-endian words, put together by shifts.
    hi2 = _LUT2_LEAD[ihi].astype("<u4")
    units = np.where(ihi > 0, _LUT4[il], _LUT4_UNITS[il])
    dot = np.where(f > 0, np.uint32(ord(".")), np.uint32(0))
    d1 = np.where((f3 > 0) | (f2i > 0), _LUT4[f1i], _LUT4_TRAIL[f1i])
    d2 = np.where(f3 > 0, _LUT4[f2i], _LUT4_TRAIL[f2i])
    d3 = np.where(f3 > 0, f3.astype(np.uint32) + ord("0"), np.uint32(0))
    words = np.empty((n, 4), dtype="<u4")
    words[:, 0] = hi2 | (units << 16)
    words[:, 1] = (units >> 16) | (dot << 16) | (d1 << 24)
    words[:, 2] = (d1 >> 8) | (d2 << 24)
    words[:, 3] = (d2 >> 8) | (d3 << 24)
    out = words.view(np.uint8).reshape(n, 16)
    top = float(ip.max()) if n else 0.0
    return out[:, 5 - (len(str(int(top))) - 1 if top >= 1 else 0):]  # no columns of leading NUL


def _scientific(m: npt.NDArray[np.int64], e: npt.NDArray[np.int64], tz: npt.NDArray[np.int64]) -> U8:
    """m (six digits, `tz` trailing zeros) × 10**(e-5) as %g writes it with an exponent: d.ddddde+XX."""
    n = len(m)
    digits = _quads(m, 2)[:, 2:]
    wide = bool((np.abs(e) >= 100).any())
    out = np.empty((n, 12 if wide else 11), dtype=np.uint8)
    out[:, 0] = digits[:, 0]
    out[:, 1] = ord(".")
    out[:, 2:7] = digits[:, 1:]
    out[:, 1:7] *= tz[:, None] < np.array([5, 5, 4, 3, 2, 1])[None, :]
    out[:, 7] = ord("e")
    out[:, 8] = np.where(e < 0, ord("-"), ord("+"))
    exp = _quads(np.abs(e), 1)
    out[:, 9:] = exp[:, 1:] if wide else exp[:, 2:]
    if wide:
        out[:, 9] *= np.abs(e) >= 100
    return out


def _scaled(a: npt.NDArray[np.float64]) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int64], npt.NDArray[np.bool_]]:
    """(a·10**(5-e), in [1e5, 1e6) once rounded; e; whether a rounding on the way was too close to call)
    for 1e-16 ≤ a < 1e22: one exact power of ten each."""
    e = np.floor(np.log10(a)).astype(np.int64)
    tie = np.zeros(a.shape, dtype=bool)
    for _ in range(3):  # log10 may be one off near a power of ten; rounding may carry to 1e6
        k = 5 - e
        if (k >= 0).all():
            y = a * _P10[k]
        else:
            y = np.where(k >= 0, a * _P10[np.maximum(k, 0)], a / _P10[np.maximum(-k, 0)])
        tie |= np.abs(y - np.floor(y) - 0.5) < 1e-9  # too close to call, at this scale or the one before
        off = (y >= 999_999.5).astype(np.int64) - (y < 99_999.5)
        if not off.any():
            break
        e += off
    return y, e, tie


def _g6(x: npt.NDArray[np.float64]) -> U8:
    """`'%.6g' % v` for each v, vectorized (module docstring); the few values it cannot decide go to Python."""
    n = len(x)
    a = np.abs(x)
    ok = (a >= 1e-16) & (a < 1e22)  # False for inf and nan too
    y, e, tie = _scaled(np.where(ok, a, 1.0))
    m = np.rint(y)
    fallback = ~ok | tie | (m < 1e5) | (m >= 1e6)
    mf = np.where(fallback, 100_000.0, m)
    hi = np.floor(mf / 10_000.0)
    lo = (mf - hi * 10_000.0).astype(np.intp)
    sci = ((e < -4) | (e >= DIGITS)) & ~fallback
    out = _positional(mf, np.where(sci | fallback, 0, e))
    if sci.any():
        rows = np.flatnonzero(sci)
        tz = np.where(lo == 0, 4 + _TZ2[hi.astype(np.intp)], _TZ4[lo]).astype(np.int64)
        text = _scientific(mf.astype(np.int64)[rows], e[rows], tz[rows])
        out[rows] = 0
        out[rows, : text.shape[1]] = text
    if (x < 0).any():
        out = np.concatenate([np.where(x < 0, ord("-"), 0).astype(np.uint8)[:, None], out], axis=1)
    for i in np.flatnonzero(fallback):
        line = number_text(float(x[i])).encode()
        if len(line) > out.shape[1]:
            out = np.concatenate([out, np.zeros((n, len(line) - out.shape[1]), dtype=np.uint8)], axis=1)
        out[i] = 0
        out[i, : len(line)] = np.frombuffer(line, dtype=np.uint8)
    return out


def numbers(x: npt.NDArray[np.float64]) -> U8:
    """Each value's `number_text`, as a column of text."""
    whole = (x == np.floor(x)) & (np.abs(x) < _EXACT_INT)  # False for inf and nan
    if whole.all():
        return integers(x.astype(np.int64))
    out = _g6(x)
    if whole.any():
        ints = integers(x[whole].astype(np.int64))
        if ints.shape[1] > out.shape[1]:
            out = np.concatenate([out, np.zeros((len(x), ints.shape[1] - out.shape[1]), dtype=np.uint8)], axis=1)
        out[whole] = 0
        out[whole, : ints.shape[1]] = ints
    return out


def join(parts: Sequence[Part], n: int) -> bytes:
    """`n` rows, each the parts side by side (bytes parts repeated in every row), padding dropped."""
    widths = [len(p) if isinstance(p, bytes) else p.shape[1] for p in parts]
    grid = np.empty((n, sum(widths)), dtype=np.uint8)
    at = 0
    for p, w in zip(parts, widths):
        grid[:, at: at + w] = np.frombuffer(p, dtype=np.uint8) if isinstance(p, bytes) else p
        at += w
    return grid.tobytes().translate(None, b"\0")


__all__ = ["DIGITS", "Part", "integers", "join", "number_text", "numbers", "pick", "table"]
