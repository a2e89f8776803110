"""A number with its unit and evidence class: derived, reported, assumed or measured (SPEC §1)."""

from __future__ import annotations

import enum
import math
from typing import Any, Union

from kvplan.base.json_types import JSONObject
from kvplan.base.records import record
from kvplan.base.units import fmt_unit


class Evidence(str, enum.Enum):
    DERIVED = "derived"
    REPORTED = "reported"
    ASSUMED = "assumed"
    MEASURED = "measured"  # the user's own measurement (kvplan calibrate's inputs); never mixed into a derived number


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

    def to_json(self) -> JSONObject:
        v: Union[float, str, None] = self.value
        if self.absent:
            v = None
        elif isinstance(v, float):
            if math.isinf(v) or math.isnan(v):
                v = None  # JSON has no infinity; the source says why
            elif v.is_integer() and abs(v) < 2**53:
                v = int(v)
        return {"value": v, "unit": self.unit, "evidence": self.evidence.value, "source": self.source}

    def text(self) -> str:
        """'427.2k tokens (derived)'."""
        return f"{self.human} ({self.evidence.value})"

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
