"""Speculative decoding's catalog (kvplan/catalog/speculative.toml): per method and model, the draft that
proposes tokens, its size, and the acceptance a source states for it (SPEC §15, docs/speculative.md).

A row states either the per-token acceptance α or the mean tokens kept per verify step τ at its k draft
tokens; `acceptance` derives α from τ by inverting τ = (1 − α^(k+1))/(1 − α), and says it did.
"""

from __future__ import annotations

import functools
from typing import Mapping, Optional

from kvplan.base.errors import CatalogError
from kvplan.base.evidence import Evidence, Value
from kvplan.base.records import record
from kvplan.catalog import CatalogEntry, _float, _int, _load_toml, _text, get_model

#: The methods a row may speak for (speculative.method's words, less auto and off).
METHODS = ("eagle3", "mtp", "ngram")
_KEYS = frozenset({"method", "model", "draft", "draft_source", "draft_params", "draft_layers", "dataset", "tau",
                   "tau_k", "acceptance", "acceptance_source", "note"})
#: Bisection steps inverting τ(α): 60 halvings of (0, 1) leave α exact to double precision.
_BISECTIONS = 60


@record
class DraftRow:
    """One row of speculative.toml: a method's draft for a model and its stated acceptance."""

    id: str
    method: str
    model: str
    draft: str
    draft_source: str
    draft_params: float
    draft_layers: int
    dataset: str
    acceptance_source: str
    tau_k: int
    tau: Optional[float] = None
    stated_acceptance: Optional[float] = None
    note: str = ""


def tau_of(alpha: float, k: int) -> float:
    """τ = (1 − α^(k+1))/(1 − α): the mean tokens a verify step keeps with k drafted tokens, each kept with
    chance α given those before it were (the last verify position always yields one token)."""
    return float(k + 1) if alpha >= 1.0 else (1.0 - alpha ** (k + 1)) / (1.0 - alpha)


def alpha_of(tau: float, k: int) -> float:
    """The α whose τ at k drafted tokens is `tau` (τ rises with α from 1 to k + 1, so bisection finds it)."""
    if not 1.0 < tau < k + 1:
        raise CatalogError(f"speculative.toml: τ = {tau:g} at k = {k} is outside (1, {k + 1})",
                           help="τ counts the tokens a verify step keeps: more than 1, fewer than k + 1")
    lo, hi = 0.0, 1.0
    for _ in range(_BISECTIONS):
        mid = (lo + hi) / 2.0
        lo, hi = (mid, hi) if tau_of(mid, k) < tau else (lo, mid)
    return (lo + hi) / 2.0


def _row(rid: str, e: CatalogEntry) -> DraftRow:
    where = f"speculative.toml [{rid}]"
    unknown = sorted(set(e) - _KEYS)
    if unknown:
        raise CatalogError(f"{where}: unknown key `{unknown[0]}`", help="keys: " + ", ".join(sorted(_KEYS)))
    method = _text(e, "method", where)
    if method not in METHODS:
        raise CatalogError(f"{where}: method `{method}` is not one of {', '.join(METHODS)}")
    has_tau, has_alpha = "tau" in e, "acceptance" in e
    if has_tau == has_alpha:
        raise CatalogError(f"{where}: give one of tau and acceptance", help="the source's own figure, as stated")
    row = DraftRow(id=rid, method=method, model=get_model(_text(e, "model", where)).id,
                   draft=_text(e, "draft", where, ""), draft_source=_text(e, "draft_source", where),
                   draft_params=_float(e, "draft_params", where), draft_layers=_int(e, "draft_layers", where),
                   dataset=_text(e, "dataset", where), acceptance_source=_text(e, "acceptance_source", where),
                   tau_k=_int(e, "tau_k", where), tau=_float(e, "tau", where) if has_tau else None,
                   stated_acceptance=_float(e, "acceptance", where) if has_alpha else None,
                   note=_text(e, "note", where, ""))
    if row.stated_acceptance is not None and not 0.0 < row.stated_acceptance < 1.0:
        raise CatalogError(f"{where}: acceptance {row.stated_acceptance:g} is outside (0, 1)")
    if row.tau is not None:
        alpha_of(row.tau, row.tau_k)  # a τ no α gives is a catalog error at load
    return row


@functools.cache
def rows() -> Mapping[str, DraftRow]:
    """Every row of speculative.toml, by id, in file order."""
    return {rid: _row(rid, e) for rid, e in _load_toml("speculative.toml").items()}


def row_for(method: str, model_id: str) -> Optional[DraftRow]:
    """The row of `method` for the catalog model `model_id`; None where the catalog has none."""
    return next((r for r in rows().values() if r.method == method and r.model == model_id), None)


def acceptance(r: DraftRow) -> Value:
    """The row's per-token acceptance α as a Value: reported where the source states α, derived from its τ at
    its k otherwise (the inversion named in the source text)."""
    where = f"speculative.toml [{r.id}] ({r.dataset}): {r.acceptance_source}"
    if r.stated_acceptance is not None:
        return Value(r.stated_acceptance, "1", Evidence.REPORTED, where)
    assert r.tau is not None
    alpha = alpha_of(r.tau, r.tau_k)
    return Value(alpha, "1", Evidence.DERIVED,
                 f"α from τ = {r.tau:g} at k = {r.tau_k}: (1 − α^{r.tau_k + 1})/(1 − α) = τ; {where}")


__all__ = ["METHODS", "DraftRow", "acceptance", "alpha_of", "row_for", "rows", "tau_of"]
