"""Quantities and dimensions: parse units at the edge, format them for output.

Conventions (SPEC §1): token multipliers k/M are decimal, Ki/Mi binary; bytes
KB/MB/GB/TB/PB/EB are powers of 1000 and KiB/MiB/GiB/TiB/PiB/EiB powers of 1024; bandwidth
in B/s; compute in dense FLOP/s. Inside kvplan every quantity is a float in
the base unit of its dimension (tokens, B, B/s, FLOP/s, s, tok/s, fraction).
"""

from __future__ import annotations

import enum
import math
import re
from typing import Iterable, Mapping, Optional

from kvplan.base.errors import UnitError
from kvplan.base.near import close_matches


class Dim(str, enum.Enum):
    TOKENS = "tokens"
    COUNT = "count"
    BYTES = "bytes"
    BANDWIDTH = "bandwidth"
    COMPUTE = "compute"
    TIME = "time"
    RATE = "rate"
    FRACTION = "fraction"
    NUMBER = "number"


_DEC = {"K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18}
_BIN = {"Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40, "Pi": 2.0**50, "Ei": 2.0**60}


def _byte_units(suffix: str) -> dict[str, float]:
    table = {f"B{suffix}": 1.0}
    # up to P and E: the documented ranges end at 1 PB, 1 PB/s and (an `expect kv_bytes`) 1 EB
    for p in "KMGTPE":
        table[f"{p}B{suffix}"] = _DEC[p]
        table[f"{p}iB{suffix}"] = _BIN[f"{p}i"]
    return table


UNITS: Mapping[Dim, Mapping[str, float]] = {
    Dim.TOKENS: {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "Ki": 2.0**10, "Mi": 2.0**20, "tokens": 1.0, "tok": 1.0},
    Dim.COUNT: {"": 1.0, "k": 1e3, "M": 1e6, "B": 1e9, "T": 1e12},
    Dim.BYTES: _byte_units(""),
    Dim.BANDWIDTH: _byte_units("/s"),
    Dim.COMPUTE: {"FLOPS": 1.0, "GFLOPS": 1e9, "TFLOPS": 1e12, "PFLOPS": 1e15, "EFLOPS": 1e18,
                  "FLOP/s": 1.0, "GFLOP/s": 1e9, "TFLOP/s": 1e12, "PFLOP/s": 1e15, "EFLOP/s": 1e18},
    Dim.TIME: {"us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0},
    Dim.RATE: {"tok/s": 1.0, "ktok/s": 1e3},
    Dim.FRACTION: {"": 1.0, "%": 0.01},
    Dim.NUMBER: {"": 1.0},
}

#: The unit each dimension is stored in, as JSON output names it.
BASE_UNIT: Mapping[Dim, str] = {
    Dim.TOKENS: "tokens", Dim.COUNT: "1", Dim.BYTES: "B", Dim.BANDWIDTH: "B/s",
    Dim.COMPUTE: "FLOP/s", Dim.TIME: "s", Dim.RATE: "tok/s", Dim.FRACTION: "1", Dim.NUMBER: "1",
}

#: The largest whole number a float64 holds exactly. A count, token count or byte size given on the
#: command line or read from an engine's flags must not exceed it: above it kvplan could not count
#: exactly, and no deployment is that large, so it is refused as a typo (docs/cli.md#option-values).
MAX_EXACT = 2**53

_QUANTITY = re.compile(r"^\s*([-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)\s*([A-Za-zµ%/]*)\s*$")


def dims_of_unit(unit: str) -> list[Dim]:
    """Every dimension in which `unit` is a known unit (`B` is bytes and a count)."""
    return [d for d, table in UNITS.items()
            if unit in table and (unit or d in (Dim.TOKENS, Dim.COUNT, Dim.FRACTION, Dim.NUMBER))]


def convert(number: float, unit: str, dim: Dim, *, what: str = "value",
            table: Optional[Mapping[str, float]] = None) -> float:
    """Convert `number unit` to the base unit of `dim` (with `table`'s units, default all of the
    dimension's), or say what was expected."""
    table = UNITS[dim] if table is None else table
    if unit in table:
        return float(number) * table[unit]
    if not unit:
        raise UnitError(f"{what} takes {dim.value}, got a plain number '{number:g}'",
                        help=f"add its unit, e.g. '{_example(dim)}' (units: {_unit_list(dim, table)})")
    close = suggest_unit(unit, table)
    if close is not None and close.casefold() == unit.casefold():  # a case slip: `1K` for a count, `5GIB`
        raise UnitError(f"unknown unit '{unit}' for {what} ({dim.value})", help=f"did you mean '{close}'?")
    found = [d for d in dims_of_unit(unit) if d is not dim]
    if found:
        raise UnitError(f"{what} takes {dim.value}, got {found[0].value} ('{number:g} {unit}')",
                        help=f"write {dim.value}, e.g. '{_example(dim)}' (units: {_unit_list(dim, table)})")
    hint = f"did you mean '{close}'?" if close else f"use {_unit_list(dim, table)}"
    raise UnitError(f"unknown unit '{unit}' for {what} ({dim.value})", help=hint)


_BINARY_PREFIX = re.compile(r"^[KMGTPEkmgtpe][iI]")
#: The scale prefix a unit spelling starts with (`Ki` of `KiB`, `G` of `GB/s`, `m` of `ms`), '' for none.
#: Every SI prefix letter counts, known or not, so that `ZB` and `ns` keep theirs (and match nothing).
_SCALE_PREFIX = re.compile(r"^(?:[KMGTPEZYRQkmgtpezyrq][iI](?=[A-Za-z])|[KMGTPEZYRQkmgtpezyrqµunfa](?=[A-Za-z]))")


def scale_prefix(unit: str) -> str:
    """The scale prefix of a unit spelling, case-folded (`GB` -> 'g', `KIB/s` -> 'ki', `B` -> '')."""
    m = _SCALE_PREFIX.match(unit)
    return m.group(0).casefold().replace("µ", "u") if m else ""


def is_binary_unit(unit: str) -> bool:
    """Whether a unit spelling carries a binary prefix (`Ki`, `MiB`, `GIB`, `gib/s`), in any case."""
    return bool(_BINARY_PREFIX.match(unit))


def suggest_unit(unit: str, units: Iterable[str]) -> Optional[str]:
    """The unit of `units` that an unknown `unit` most likely means, or None.

    The same letters in another case come first (`GIB` -> `GiB`, `MS` -> `ms`, `TB/S` -> `TB/s`),
    so a case slip never turns a binary unit into a decimal one (`GIB` is not `GB`); otherwise the
    closest spelling, ignoring case, among the units with the same scale prefix (`Gbs` -> `GB/s`):
    a suggestion never changes the magnitude (`ZB` is not `B`, `PB/s` was never `B/s`), and where
    no unit keeps the prefix there is none, and the caller lists the units.
    """
    known = [u for u in units if u]
    folded = unit.casefold()
    same = [u for u in known if u.casefold() == folded]
    if same:  # fewest letters whose case differs
        return min(same, key=lambda u: sum(a != b for a, b in zip(u, unit)))
    by_fold: dict[str, str] = {}
    for u in known:
        if scale_prefix(u) == scale_prefix(unit):
            by_fold.setdefault(u.casefold(), u)
    close = close_matches(folded, list(by_fold), n=1)
    return by_fold[close[0]] if close else None


def _unit_list(dim: Dim, table: Optional[Mapping[str, float]] = None) -> str:
    table = UNITS[dim] if table is None else table
    units = [u for u in table if u]
    if not units:
        return "a plain number"
    return ", ".join(units[:16]) + (" or a plain number" if "" in table else "")


def split_quantity(text: str) -> Optional[tuple[str, str]]:
    """('128', 'k') for '128 k': the number and the unit as written, or None if it is no quantity."""
    m = _QUANTITY.match(text)
    return (m.group(1), m.group(2)) if m else None


def parse_quantity(text: str, dim: Dim, *, what: str = "value",
                   table: Optional[Mapping[str, float]] = None) -> float:
    """Parse '4.8 TB/s', '128k', '60%' into the base unit of `dim`."""
    m = _QUANTITY.match(text)
    if not m:
        raise UnitError(f"cannot read '{text}' as a quantity for {what}",
                        help=f"write a number with a unit, e.g. '{_example(dim)}'")
    value = convert(float(m.group(1)), m.group(2), dim, what=what, table=table)
    if not math.isfinite(value):
        raise UnitError(f"{what} '{text.strip()}' is not a finite number",
                        help=f"write a number such as '{_example(dim)}'")
    return value


def _example(dim: Dim) -> str:
    return {Dim.TOKENS: "128k", Dim.COUNT: "70B", Dim.BYTES: "80 GB", Dim.BANDWIDTH: "3.35 TB/s",
            Dim.COMPUTE: "989 TFLOPS", Dim.TIME: "50 ms", Dim.RATE: "500 tok/s",
            Dim.FRACTION: "60%", Dim.NUMBER: "1.5"}[dim]


# ---------------------------------------------------------------- formatting

def _sig(x: float, digits: int = 4) -> str:
    """A compact decimal with up to `digits` significant digits, no exponent for common sizes."""
    if x == 0 or not math.isfinite(x):
        return "0" if x == 0 else ("inf" if x > 0 else "-inf") if math.isinf(x) else "nan"
    mag = int(math.floor(math.log10(abs(x))))
    decimals = max(0, digits - 1 - mag)
    text = f"{x:.{decimals}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text


def fmt_tokens(x: float) -> str:
    if not math.isfinite(x):
        return "never" if x > 0 else "n/a"
    if abs(x) >= 1e6:
        return f"{_sig(x / 1e6)}M tokens"
    if abs(x) >= 1e3:
        return f"{_sig(x / 1e3)}k tokens"
    return f"{_sig(x)} tokens"


def fmt_bytes(x: float) -> str:
    for unit, f in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if abs(x) >= f:
            return f"{_sig(x / f)} {unit}"
    return f"{_sig(x)} B"


def fmt_bandwidth(x: float) -> str:
    for unit, f in (("TB/s", 1e12), ("GB/s", 1e9), ("MB/s", 1e6)):
        if abs(x) >= f:
            return f"{_sig(x / f)} {unit}"
    return f"{_sig(x)} B/s"


def fmt_compute(x: float) -> str:
    return f"{_sig(x / 1e12)} TFLOP/s"


def fmt_time(x: float) -> str:
    if not math.isfinite(x):
        return "n/a"
    if abs(x) >= 1:
        return f"{_sig(x)} s"
    if abs(x) >= 1e-3:
        return f"{_sig(x * 1e3)} ms"
    return f"{_sig(x * 1e6)} us"


def fmt_rate(x: float) -> str:
    return f"{_sig(x)} tok/s"


def fmt_unit(x: float, unit: str) -> str:
    """Format a base-unit value for people."""
    fmt = {"tokens": fmt_tokens, "B": fmt_bytes, "B/s": fmt_bandwidth, "FLOP/s": fmt_compute,
           "s": fmt_time, "tok/s": fmt_rate}.get(unit)
    if fmt is not None:
        return fmt(x)
    if unit == "FLOP":
        for name, f in (("PFLOP", 1e15), ("TFLOP", 1e12), ("GFLOP", 1e9), ("MFLOP", 1e6)):
            if abs(x) >= f:
                return f"{_sig(x / f)} {name}"
        return f"{_sig(x)} FLOP"
    if unit == "tokens/s":
        return fmt_tokens(x).replace(" tokens", "") + " tokens/s"
    if unit == "x":
        return f"{_sig(x, 3)}x"
    if unit == "%":
        return f"{_sig(x * 100, 3)}%"
    if unit in ("1", ""):
        for name, f in (("T", 1e12), ("B", 1e9), ("M", 1e6)):
            if abs(x) >= f:
                return f"{_sig(x / f)}{name}"
        return _sig(x)
    return f"{_sig(x)} {unit}"

