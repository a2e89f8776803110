"""A number with its unit and evidence class: derived, reported, assumed or measured (SPEC §1)."""

from __future__ import annotations

import enum
import math
from typing import Any, Optional, Union

from kvplan.base.json_types import JSONObject
from kvplan.base.records import record
from kvplan.base.units import fmt_unit


class Evidence(str, enum.Enum):
    DERIVED = "derived"
    REPORTED = "reported"
    ASSUMED = "assumed"
    MEASURED = "measured"  # the user's own measurement (kvplan calibrate's inputs); never mixed into a derived number


@record
class Interval:
    """An error bar on an expected figure: `[lo, hi]` in the figure's unit holds a share `level` (0.8) of the
    measured figures of `n` residual rows of `cell` (engine · device · regime, or the coarser cell it fell back
    to, or a calibration profile's own fit), from `source` (the residual file). kvplan.planner.intervals."""

    lo: float
    hi: float
    level: float
    n: int
    cell: str
    source: str

    def to_json(self) -> JSONObject:
        return {"lo": self.lo, "hi": self.hi, "level": self.level, "n": self.n, "cell": self.cell,
                "source": self.source}

    def text(self, unit: str, shown: str = "") -> str:
        """'[14.2, 18.5] (80%, n = 212, vllm · h200 · kv-bound)': the bounds without their unit where both print
        in the scale of `shown` (the figure as printed, '16.1 ms'), else each with its own ('[980 µs, 1.2 ms]')."""
        lo, hi = fmt_unit(self.lo, unit), fmt_unit(self.hi, unit)
        scales = {t.rpartition(" ")[2] for t in (lo, hi, shown or hi)}
        if len(scales) == 1 and " " in lo and " " in hi:
            lo, hi = lo.rpartition(" ")[0], hi.rpartition(" ")[0]
        return f"[{lo}, {hi}] ({round(self.level * 100):d}%, n = {self.n}, {self.cell})"


@record
class Value:
    """One printed number. `unit` is the base unit (B, B/s, tokens, s, ...); `source`
    names the equation, the citation or the input it came from."""

    value: float
    unit: str
    evidence: Evidence
    source: str
    #: Why the quantity has no meaningful number here ("weights alone exceed memory"): printed
    #: instead of `value`, and null in JSON (the source says why). `value` keeps the raw figure.
    absent: str = ""
    #: The figure's error bar (expected figures only, kvplan.planner.intervals); JSON has an "interval" key only
    #: when there is one, so every figure without one prints as it did.
    interval: Optional[Interval] = None

    def to_json(self) -> JSONObject:
        v: Union[float, str, None] = self.value
        if self.absent:
            v = None
        elif isinstance(v, float):
            if math.isinf(v) or math.isnan(v):
                v = None  # JSON has no infinity; the source says why
            elif v.is_integer() and abs(v) < 2**53:
                v = int(v)
        out: JSONObject = {"value": v, "unit": self.unit, "evidence": self.evidence.value, "source": self.source}
        if self.interval is not None:
            out["interval"] = self.interval.to_json()
        return out

    def text(self) -> str:
        """'427.2k tokens (derived)'; with an interval, '16.1 ms [14.2, 18.5] (80%, n = 212, …) (derived)'."""
        return f"{self.human_with_interval} ({self.evidence.value})"

    @property
    def human_with_interval(self) -> str:
        """`human`, and the interval beside it when there is one."""
        if self.interval is None or self.absent:
            return self.human
        return f"{self.human} {self.interval.text(self.unit, self.human)}"

    @property
    def human(self) -> str:
        if self.absent:
            return self.absent
        if isinstance(self.value, str):  # a word-valued default (kvplan.lang.Choice)
            return self.value
        return fmt_unit(self.value, self.unit)


def derived(value: float, unit: str, source: str) -> Value:
    return Value(float(value), unit, Evidence.DERIVED, source)


def assumed(value: float, unit: str, source: str) -> Value:
    return Value(float(value), unit, Evidence.ASSUMED, source)


def reported(value: float, unit: str, source: str) -> Value:
    return Value(float(value), unit, Evidence.REPORTED, source)


def to_jsonable(obj: object) -> Any:  # Any: callers splat a mapping's result into their own dicts
    """Values become contract objects; tuples of pairs become dicts; the rest passes through."""
    if isinstance(obj, Value):
        return obj.to_json()
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    return obj
