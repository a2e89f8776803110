"""Error bars on the expected figures (docs/expected.md, "Error bars"): the cell of a plan's engine, device and
regime in kvplan/catalog/intervals.toml gives the quantiles of measured/expected TPOT and TTFT over the ledger's
residuals, and each expected figure it covers carries [value·lo, value·hi] (kvplan.base.evidence.Interval).

A cell of fewer than MIN_ROWS rows is thin: the lookup falls back, engine/device/regime → engine/device →
engine → any, to the first cell that is not; when every present cell is thin, the finest one is used widened by
sqrt(MIN_ROWS/n) about its midpoint (`widen`), and its cell name says so."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Mapping, Optional

import attrs

from kvplan import catalog
from kvplan.base.errors import CatalogError
from kvplan.base.evidence import Interval, Value
from kvplan.base.records import record

if TYPE_CHECKING:
    from kvplan.planner.plan import Plan

#: A cell with fewer residual rows than this is thin (assumed; docs/expected.md, "Error bars"): with 30 rows the
#: 10th and 90th percentiles each rest on three rows.
MIN_ROWS = 30
_KEYS = ("engine", "device", "regime", "level", "n", "tpot_lo", "tpot_hi", "ttft_lo", "ttft_hi", "source")


@record
class Cell:
    """One row of intervals.toml: the ratio quantiles (measured/expected) of one cell."""

    name: str
    level: float
    n: int
    tpot: tuple[float, float]
    ttft: tuple[float, float]
    source: str


def parse(entries: Mapping[str, Mapping[str, object]], where: str = "intervals.toml") -> dict[str, Cell]:
    """The cells of an intervals table as tomllib reads it; a missing key or a bad bound is a CatalogError."""
    out: dict[str, Cell] = {}
    for name, e in entries.items():
        missing = [k for k in _KEYS if k not in e]
        if missing:
            raise CatalogError(f"{where}: cell `{name}` lacks {', '.join(missing)}",
                               help="regenerate the table: python bench/intervals.py res.csv")
        try:
            level, n = float(e["level"]), int(e["n"])  # type: ignore[arg-type, call-overload]
            tpot = (float(e["tpot_lo"]), float(e["tpot_hi"]))  # type: ignore[arg-type]
            ttft = (float(e["ttft_lo"]), float(e["ttft_hi"]))  # type: ignore[arg-type]
        except (TypeError, ValueError) as err:
            raise CatalogError(f"{where}: cell `{name}`: {err}", help="level, n and the bounds are numbers") from None
        if not 0 < level < 1 or n < 1 or not all(0 <= lo <= hi for lo, hi in (tpot, ttft)):
            raise CatalogError(f"{where}: cell `{name}`: want 0 < level < 1, n >= 1 and 0 <= lo <= hi",
                               help="regenerate the table: python bench/intervals.py res.csv")
        out[name] = Cell(name.replace("/", " · "), level, n, tpot, ttft, str(e["source"]))
    return out


_TABLE: Optional[dict[str, Cell]] = None


def table() -> dict[str, Cell]:
    """The shipped table (kvplan/catalog/intervals.toml), parsed once per process."""
    global _TABLE
    if _TABLE is None:
        _TABLE = parse(catalog.intervals())
    return _TABLE


def widen(lo: float, hi: float, n: int) -> tuple[float, float]:
    """A thin cell's bounds (n < MIN_ROWS) stretched by sqrt(MIN_ROWS/n) about their midpoint, lo kept >= 0."""
    w = math.sqrt(MIN_ROWS / n)
    mid = (lo + hi) / 2
    return max(0.0, mid - (mid - lo) * w), mid + (hi - mid) * w


def lookup(cells: Mapping[str, Cell], engine: str, device: str, regime: str) -> Optional[Cell]:
    """The cell for (engine, device, regime) by the fallback of the module docstring, or None when the table has
    none of its cells."""
    keys = (f"{engine}/{device}/{regime}", f"{engine}/{device}", engine, "any")
    present = [cells[k] for k in keys if k in cells]
    for c in present:
        if c.n >= MIN_ROWS:
            return c
    if not present:
        return None
    c = present[0]
    return attrs.evolve(c, name=f"{c.name}, thin: widened ×{math.sqrt(MIN_ROWS / c.n):.2f}",
                        tpot=widen(*c.tpot, c.n), ttft=widen(*c.ttft, c.n))


def interval(v: Value, ratio: tuple[float, float], c: Cell) -> Value:
    """`v` with the interval [v·lo, v·hi] of cell `c`; an absent or non-finite figure stays as it is."""
    if v.absent or not math.isfinite(v.value):
        return v
    return attrs.evolve(v, interval=Interval(v.value * ratio[0], v.value * ratio[1], c.level, c.n, c.name, c.source))


def attach(p: "Plan", cells: Optional[Mapping[str, Cell]] = None) -> "Plan":
    """`p` with an interval on each expected figure its cell covers (the cell of its engine, device and regime
    after the plan in `cells`, the shipped table by default): the expected step time and TTFT, and a request
    workload's TPOT, ITL and TTFT. `p` itself when the table has no cell for it (the shipped table is empty), and
    for a calibrated plan, whose figures the table's uncalibrated residuals do not describe."""
    cells = table() if cells is None else cells
    sc = p.scenario
    if sc.calibration is not None:  # the table is of uncalibrated residuals: a fit's own are not stored yet
        return p
    c = lookup(cells, sc.engine, sc.device.id, p.regime_after) if cells else None
    if c is None:
        return p
    m = p.metrics
    out = attrs.evolve(p, metrics=attrs.evolve(m, step_time_expected=interval(m.step_time_expected, c.tpot, c),
                                               ttft_expected=interval(m.ttft_expected, c.ttft, c)))
    ld = p.load
    if ld is not None:
        def on(v: Optional[Value], ratio: tuple[float, float]) -> Optional[Value]:
            return None if v is None else interval(v, ratio, c)
        out = attrs.evolve(out, load=attrs.evolve(ld, itl=on(ld.itl, c.tpot), tpot=on(ld.tpot, c.tpot),
                                                  ttft=on(ld.ttft, c.ttft)))
    return out
