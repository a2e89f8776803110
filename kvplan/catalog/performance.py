"""The expected-performance factors' defaults (docs/expected.md): kvplan/catalog/performance.toml, read once.

`factor(name, ...)` is the most specific entry that sets `name` — the device's, the KV dtype's, the engine's
or the link's table — else [defaults]. An entry with a `source` is `reported` (a public measurement backs
it), one without is `assumed`; kvplan.model.expected turns them into Values.
"""

from __future__ import annotations

import functools
from typing import Mapping, Optional

from kvplan.base.errors import CatalogError
from kvplan.base.records import record
from kvplan.base.units import Dim, parse_quantity
from kvplan.catalog import CatalogEntry, _load_toml

#: Each factor, the table kinds that may set it, and its dimension (None: a plain fraction).
FACTORS: Mapping[str, tuple[tuple[str, ...], Optional[Dim]]] = {
    "eta_w": (("device",), None),
    "kv_efficiency": (("kv",), None),
    "eta_compute": (("device",), None),
    "t_fixed": (("engine",), Dim.TIME),
    "collective_latency": (("link",), Dim.TIME),
    "t_layer": (("engine",), Dim.TIME),
    "t_moe": (("engine",), Dim.TIME),
    "eta_gemm": (("device",), None),
}
#: Factors a term is off without: no [defaults] entry, only where a table sets one (optional_factor).
OPTIONAL = ("eta_gemm",)


@record
class Factor:
    """One default: its value in base units (fraction, or seconds), what it is (`note`) and the public
    measurement it comes from (`source`, "" when assumed), and the table that set it."""

    name: str
    value: float
    source: str
    note: str
    table: str


def _number(entry: CatalogEntry, key: str, dim: Optional[Dim], where: str) -> float:
    raw = entry[key]
    if isinstance(raw, bool) or not isinstance(raw, (int, float, str)):
        raise CatalogError(f"performance.toml: {where}.{key} is {raw!r}: expected a number",
                           help="fix the shipped catalog entry")
    value = float(raw) if isinstance(raw, (int, float)) else parse_quantity(raw, dim or Dim.COUNT,
                                                                            what=f"{where}.{key}")
    if dim is None and not 0 < value <= 1:
        raise CatalogError(f"performance.toml: {where}.{key} is {value:g}: a fraction must be in (0, 1]",
                           help="fix the shipped catalog entry")
    return value


@functools.cache
def _tables() -> Mapping[str, CatalogEntry]:
    return _load_toml("performance.toml")


def factor(name: str, *, device: str = "", kv: str = "", engine: str = "", link: str = "") -> Factor:
    """The default of `name` for that device, KV dtype, engine or link (whichever tables may set it)."""
    if name not in FACTORS:
        raise KeyError(name)
    kinds, dim = FACTORS[name]
    tables = _tables()
    ids = {"device": device, "kv": kv, "engine": engine, "link": link}
    for kind in kinds:
        if not ids[kind]:
            continue
        where = f"{kind}.{ids[kind]}"
        entry = tables.get(kind, {}).get(ids[kind]) if isinstance(tables.get(kind), dict) else None
        if isinstance(entry, dict) and name in entry:
            return Factor(name, _number(entry, name, dim, where), str(entry.get(f"{name}_source", "")),
                          str(entry.get(f"{name}_note", "")), where)
    defaults = tables["defaults"]
    if name not in defaults and name in OPTIONAL:
        raise KeyError(f"{name} is set for none of {ids}: use optional_factor")
    return Factor(name, _number(defaults, name, dim, "defaults"), str(defaults.get(f"{name}_source", "")),
                  str(defaults.get(f"{name}_note", "")), "defaults")


def optional_factor(name: str, *, device: str = "", kv: str = "", engine: str = "", link: str = "") -> Optional[Factor]:
    """The entry of an OPTIONAL factor for that device (or other id), or None where no table sets it (its term
    is off)."""
    if name not in OPTIONAL:
        raise KeyError(name)
    try:
        return factor(name, device=device, kv=kv, engine=engine, link=link)
    except KeyError:
        return None
