"""What a spec's `model` and `checkpoint` settings name, and the model's own context limit (docs/hub.md).

kvplan.lang.check calls these and reports what they find; the resolving is kvplan.catalog.hub's.
"""

from __future__ import annotations

import os
from typing import Optional, Sequence

import attrs

from kvplan.base import codes, files
from kvplan.base.errors import CatalogError, ConfigError, KvplanError
from kvplan.base.evidence import Value, assumed, derived, reported
from kvplan.base.records import record
from kvplan.base.units import fmt_bytes
from kvplan.catalog import Dtype, Model, get_model, hub, weight_bytes


@record
class Problem:
    """A finding for the checker to report: its code, message and help."""

    code: str
    message: str
    help: Optional[str] = None


def weight_notes(model: Model) -> tuple[Value, ...]:
    """The weight bytes a hub-resolved model carries, as a plan input citing the files and revision."""
    wb = model.weight_bytes
    if wb is None:
        return ()
    ev = {"reported": reported, "derived": derived}.get(wb.evidence, assumed)
    fmt = f"{wb.format}, " if wb.format else ""
    return (ev(wb.held, "B", f"{_HELD} ({fmt}the checkpoint's weight bytes, docs/weights.md): {wb.source}"),)


#: How weight_notes' figure begins (declared_weights replaces it).
_HELD = "weights held"


def declared_weights(model: Model, notes: tuple[Value, ...], weights: Dtype) -> tuple[Model, tuple[Value, ...]]:
    """`weights = ...` declared in the spec wins over the checkpoint's own bytes (the user serves another
    checkpoint, docs/weights.md): the model planned at parameters × the declared width, and the plan's inputs
    say which was used instead of citing the checkpoint's figure."""
    wb = model.weight_bytes
    if wb is None:
        return model, notes
    served, _ = weight_bytes.planned(model, weights)
    kept = tuple(n for n in notes if not str(n.source).startswith(_HELD))
    said = assumed(served.params * weights.width, "B",
                   f"weights = {weights.id} declared: parameters × {weights.width:g} B, not the checkpoint's own "
                   f"{fmt_bytes(wb.held)} ({wb.format or wb.evidence}, docs/weights.md)")
    return served, (*kept, said)


def resolve_model(name: str) -> Model:
    """A model by catalog id, alias or repo id, else through the hub (kvplan.catalog.hub.resolve). A catalog
    entry named by one of its other repo ids (an instruct variant) serves that repo: what the spec names."""
    try:
        model = get_model(name)
    except KvplanError:
        if hub.looks_like_path(name):  # a spec names files only through `model` blocks and `checkpoint`
            raise _a_path(name) from None
        if not hub.is_repo_id(name):
            raise
        model = hub.resolve_repo(name).model
    named = next((r for r in model.hf_ids if r.lower() == name.strip().lower()), None)
    return model if named is None or named == model.hf_id else attrs.evolve(model, hf_id=named)


def _a_path(name: str) -> CatalogError:
    """`model = "dir/config.json"`: a path where the deployment names a model; the block that reads it."""
    block = hub.block_name(name)
    return CatalogError(f"`{name[:100]}` is a path: a deployment's `model` names a catalog model, a `model` block "
                        "of this file or a Hugging Face repo id",
                        help=f'read the config in a model block and name the block: `model "{block}" '
                             f'{{ config = "{name[:100]}" }}` before the deployment and `model = {block}` '
                             "(docs/language.md#model)")


def problem_of(exc: KvplanError, name: str) -> Problem:
    """A failed model or checkpoint resolution as a finding: a config that cannot be used, or a name that
    names nothing."""
    if isinstance(exc, ConfigError):
        return Problem(codes.CONFIG_ERROR, f"cannot use the config.json of `{name}`: {exc.message}", exc.help)
    return Problem(codes.UNKNOWN_MODEL, exc.message, exc.help)


def _same_architecture(model: Model, other: Model) -> Optional[str]:
    for what, a, b in (("layers", model.n_layers, other.n_layers), ("KV heads", model.n_kv, other.n_kv),
                       ("head_dim", model.head_dim, other.head_dim), ("kind", model.kv_kind, other.kv_kind)):
        if a != b:
            return f"{what} {b} where {model.id} has {a}"
    return None


def checkpoint(value: str, base_dir: str, model: Model, allowed: Sequence[str] = ()
               ) -> tuple[Model, tuple[Value, ...], Optional[Problem]]:
    """The model as served from the checkpoint `value` (a repo id or a path relative to the spec):
    the checkpoint's weight bytes where its files can be read, an assumption saying so where not.
    A folder is read only inside the spec's folder or `allowed` (as a model block's config is)."""
    local = os.path.join(base_dir, value)
    if "\0" not in local and os.path.exists(local):
        if not files.within(os.path.join(local, hub.CONFIG) if os.path.isdir(local) else local,
                            (base_dir, *allowed)):
            return model, (), Problem(codes.CONFIG_ERROR, f"checkpoint `{value[:100]}` is outside the folder of "
                                                          "the spec", "a spec reads checkpoints in its folder or "
                                                          "below it; pass --allow-path DIR (docs/cli-lint.md)")
        try:
            found = hub.resolve_path(local).model
        except KvplanError as exc:
            return model, (), problem_of(exc, value)
    elif hub.is_repo_id(value):
        try:  # a repo the catalog entry lists too: read from the cache for its exact weight bytes
            found = hub.resolve_repo(value).model
        except ConfigError as exc:
            return model, (), problem_of(exc, value)
        except KvplanError as exc:
            if value.lower() in {r.lower() for r in model.hf_ids}:  # the catalog's own repo: nothing assumed
                return attrs.evolve(model, hf_id=value), (), None
            note = assumed(0, "1", f"checkpoint {value} not read ({exc.message}): weight bytes from the declared "
                                   "weights dtype")
            return attrs.evolve(model, hf_id=value), (note,), None
    else:
        return model, (), Problem(codes.UNKNOWN_VALUE, f"checkpoint `{value[:100]}` is neither a Hugging Face "
                                                       "repo id nor a path that exists",
                                  "write `checkpoint = \"org/name\"` or the checkpoint folder, relative to the spec")
    differs = _same_architecture(model, found)
    if differs is not None:
        return model, (), Problem(codes.CONFIG_ERROR, f"checkpoint `{value}` is not {model.id}: it has {differs}",
                                  "name the model the checkpoint is, or the checkpoint of this model")
    served = attrs.evolve(model, hf_id=value, weight_bytes=found.weight_bytes or model.weight_bytes)
    return served, weight_notes(served), None


def context_problem(model: Model, context: int) -> Optional[Problem]:
    """A context beyond the model's own limit (max_position_embeddings, with rope scaling where it extends
    it, as vLLM's `_get_and_verify_max_len` derives it)."""
    limit = model.max_context
    if limit is None or context <= limit:
        return None
    return Problem(codes.CONTEXT_EXCEEDS_MODEL,
                   f"context {context:,} tokens is beyond {model.id}'s limit of {int(limit):,} positions",
                   f"write `context = {int(limit)}` or less, or name a model (or checkpoint) with a longer context; "
                   "vLLM refuses --max-model-len beyond it (docs/rules/KV126.md)")


__all__ = ["Problem", "checkpoint", "context_problem", "declared_weights", "problem_of", "resolve_model",
           "weight_notes"]
