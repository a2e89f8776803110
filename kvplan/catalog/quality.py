"""Reported quality evidence for lossy KV choices, and the `quality.budget` table.

The catalog (kvplan/catalog/quality.toml) holds what papers and engine docs
reported, as they reported it, and the gaps where no number was found. A
reported number is shown as `reported` with its citation and is never combined
with a derived number into one value: the quality costs of lossy domains do not
multiply the way their byte factors do (SPEC §3), so kvplan prints the evidence
beside a plan and does no arithmetic on it.

The budget table says which lossy domains each `quality.budget` admits
(LANGUAGE.md, Meaning). `lossiness_rank` orders choices by how lossy they are,
so that the planner can prefer the less lossy of two otherwise equal plans.
"""

from __future__ import annotations

import functools
import math
from typing import Mapping, Optional

import attrs

from kvplan.base.errors import CatalogError, KvplanError
from kvplan.base.evidence import Value, reported
from kvplan.base.records import field, record
from kvplan.catalog import DTYPES, CatalogEntry, _float, _int, _load_toml, _opt_text, _text, dtype

DOMAINS = ("quantization", "eviction", "tiering")

#: The lowest retention eviction may reach under any budget (SPEC rule 5).
MIN_RETENTION = 0.5

_TEXT_KEYS = ("method", "setting", "model", "benchmark", "result", "baseline", "where_read")
_KNOWN_KEYS = frozenset({*_TEXT_KEYS, "arxiv", "domain", "kv_dtype", "bits", "retention", "variant",
                         "value", "unit", "verified", "gap", "note"})


def _check_retention(instance: object, attribute: "attrs.Attribute[Optional[float]]", value: Optional[float]) -> None:
    if value is not None and not 0.0 < value <= 1.0:
        raise ValueError(f"{attribute.name} must be in (0, 1], got {value}")


@record
class QualityResult:
    """One reported result (or gap) from the quality catalog.

    Text fields are the reference table's cells. `value`/`unit` exist only where
    the row has one headline number (`variant` names it when the row reports
    several, as KIVI's "KIVI-2 38.30, KIVI-4 38.79" does); `value_text` is that
    number as the source wrote it ("38.30"). `kv_dtype` is the
    kvplan dtype the row speaks for; `bits` is also set where no kvplan dtype
    applies (KVQuant 3-bit). `gap` results carry no number by construction.
    """

    id: str
    method: str
    domain: str = field(validator=attrs.validators.in_(DOMAINS))
    setting: str
    model: str
    benchmark: str
    result: str
    baseline: str
    where_read: str
    verified: bool
    gap: bool
    arxiv: str = ""
    kv_dtype: Optional[str] = field(
        default=None, validator=attrs.validators.optional(attrs.validators.in_(tuple(DTYPES))))
    bits: Optional[int] = None
    retention: Optional[float] = field(default=None, validator=_check_retention)
    variant: str = ""
    value: Optional[float] = None
    value_text: str = ""
    unit: str = ""
    note: str = ""

    def __attrs_post_init__(self) -> None:
        if self.gap and self.value is not None:
            raise ValueError(f"{self.id}: a gap has no value")
        if not (self.value is None) == (self.unit == "") == (self.value_text == ""):
            raise ValueError(f"{self.id}: value, value_text and unit go together")
        if self.kv_dtype is not None and self.bits is not None and DTYPES[self.kv_dtype].bits != self.bits:
            raise ValueError(f"{self.id}: bits {self.bits} disagree with kv_dtype {self.kv_dtype}")
        if self.retention is not None and self.domain != "eviction":
            raise ValueError(f"{self.id}: retention applies to eviction results only")

    @property
    def citation(self) -> str:
        """'method (arXiv id) variant, model, benchmark — where read'."""
        head = f"{self.method} (arXiv {self.arxiv})" if self.arxiv else self.method
        if self.variant:
            head = f"{head} {self.variant}"
        return f"{head}, {self.model}, {self.benchmark} — {self.where_read}"

    def value_obj(self) -> Optional[Value]:
        """The headline number as a `reported` Value citing its source, or None where there is none."""
        if self.value is None:
            return None
        return reported(self.value, self.unit, self.citation)


def _result(rid: str, e: CatalogEntry) -> QualityResult:
    unknown = set(e) - _KNOWN_KEYS
    missing = [k for k in (*_TEXT_KEYS, "domain", "verified", "gap") if k not in e]
    if unknown or missing:
        what = "; ".join(filter(None, (
            f"unknown keys {sorted(unknown)}" if unknown else "",
            f"missing keys {missing}" if missing else "")))
        raise CatalogError(f"quality.toml [{rid}]: {what}", help="see the key list at the top of quality.toml")
    where = f"quality.toml [{rid}]"
    try:
        return QualityResult(
            id=rid, arxiv=str(e.get("arxiv", "")), domain=_text(e, "domain", where),
            kv_dtype=_opt_text(e, "kv_dtype", where), bits=_int(e, "bits", where) if "bits" in e else None,
            retention=None if "retention" not in e else _float(e, "retention", where),
            variant=str(e.get("variant", "")),
            value=None if "value" not in e else _float(e, "value", where), value_text=str(e.get("value", "")),
            unit=str(e.get("unit", "")),
            verified=bool(e["verified"]), gap=bool(e["gap"]), note=str(e.get("note", "")),
            **{k: str(e[k]) for k in _TEXT_KEYS},
        )
    except ValueError as exc:
        raise CatalogError(f"quality.toml [{rid}]: {exc}") from None


@functools.cache
def load() -> tuple[QualityResult, ...]:
    """Every result in the catalog, in the file's order (the reference table's order)."""
    return tuple(_result(rid, e) for rid, e in _load_toml("quality.toml").items())


def _evidence_order(r: QualityResult) -> tuple[bool, bool, str]:
    return (r.gap, not r.verified, r.id)


def for_choice(domain: str, kv_dtype: Optional[str] = None,
               retention: Optional[float] = None) -> tuple[QualityResult, ...]:
    """The results that speak for one lossy choice of a plan.

    quantization: the results for exactly `kv_dtype` (aliases accepted; a
    lossless dtype has none; None means all quantization results).
    eviction: every eviction result when `retention` is below 1 (or None).
    tiering: every transfer-compression result.
    Verified results with a number come first, then unverified ones, then gaps;
    ties by id.
    """
    if domain not in DOMAINS:
        raise ValueError(f"unknown quality domain {domain!r}; known: {', '.join(DOMAINS)}")
    rows = [r for r in load() if r.domain == domain]
    if domain == "quantization" and kv_dtype is not None:
        want = dtype(kv_dtype).id
        rows = [r for r in rows if r.kv_dtype == want]
    elif domain == "eviction" and retention is not None and retention >= 1.0:
        rows = []
    return tuple(sorted(rows, key=_evidence_order))


# ------------------------------------------------------------------ budgets

@record
class Admissible:
    """What a quality budget lets the planner use: these KV dtypes, and eviction or not."""

    kv_dtypes: tuple[str, ...]
    eviction: bool

    @property
    def min_retention(self) -> float:
        """The lowest retention admitted: 1 without eviction, else the SPEC rule-5 floor."""
        return MIN_RETENTION if self.eviction else 1.0


_LOSSLESS_KV = ("bf16", "fp16")
_NEAR_LOSSLESS_KV = (*_LOSSLESS_KV, "fp8", "int8", "int4", "fp4")
_MODERATE_KV = (*_NEAR_LOSSLESS_KV, "int2")

#: `quality.budget` -> what it admits without `eviction = allowed` (LANGUAGE.md, Meaning).
BUDGETS: Mapping[str, Admissible] = {
    "lossless": Admissible(_LOSSLESS_KV, eviction=False),
    "near-lossless": Admissible(_NEAR_LOSSLESS_KV, eviction=False),
    "moderate": Admissible(_MODERATE_KV, eviction=False),
    "aggressive": Admissible(_MODERATE_KV, eviction=True),
}


def admissible(budget: str, eviction_allowed: bool = False) -> Admissible:
    """What `budget` admits; `eviction = allowed` adds eviction under every budget but lossless."""
    if budget not in BUDGETS:
        raise KvplanError(f"unknown quality budget '{budget}'", help="one of " + " | ".join(BUDGETS))
    base = BUDGETS[budget]
    if eviction_allowed and budget != "lossless" and not base.eviction:
        return Admissible(base.kv_dtypes, eviction=True)
    return base


def lossiness_rank(kv_dtype: str, retention: float = 1.0) -> int:
    """An ordering of how lossy a choice is: 0 for 16-bit (or wider) KV at r = 1.

    One rank per halving of the KV width below 16 bits (8-bit 1, 4-bit 2,
    2-bit 3), plus one when tokens are evicted (r < 1). The planner uses it
    only to prefer the less lossy of two equally good plans. It is an ordering,
    not a measure: it does no arithmetic on reported quality deltas, and equal
    ranks say nothing about equal quality.
    """
    if not 0.0 < retention <= 1.0:
        raise ValueError(f"retention must be in (0, 1], got {retention}")
    bits = dtype(kv_dtype).bits
    rank = 0 if bits >= 16 else round(math.log2(16 / bits))
    return rank + (1 if retention < 1.0 else 0)
