"""What a batch plan's chosen candidate misses: a layout, fit, the SLOs or a device count its engine cannot run,
each an `Unmet` in numbers, with the changes that would meet it (kvplan.planner.suggest) when asked for."""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from kvplan.base.evidence import derived
from kvplan.base.units import fmt_unit
from kvplan.catalog import Model
from kvplan.model import memory
from kvplan.model.scenario import Scenario
from kvplan.planner import search
from kvplan.planner.plan import Constraint, Suggestion, Unmet
from kvplan.planner.search import Evaluated, Slos, Space
from kvplan.planner.space import Found, Setup, slos
from kvplan.planner.suggest import (
    SUGGESTED_COUNTS,
    Knobs,
    devices_change,
    engine_gap_suggestions,
    fit_suggestions,
    replan,
    say_count,
    slo_suggestions,
)

if TYPE_CHECKING:  # numpy.typing is for annotations only: its import costs the cold start
    pass


def unmet_constraints(sc: Scenario, ev: Evaluated, best: int, found: Found, setup: Setup, knobs: Knobs,
           suggest: bool) -> list[Unmet]:
    """What the chosen candidate misses: a layout, fit or the SLOs, and a device count the engine
    cannot run (the gaps search_space found)."""
    m = sc.model
    space, engine_gap, layout_gap = found.space, found.engine_gap, found.layout_gap
    unmet: list[Unmet] = []
    if layout_gap is not None:
        unmet.append(_unmet_layout(sc, knobs, layout_gap, suggest))
    elif not bool(ev.fits[best]):
        unmet.append(_unmet_fit(sc, ev, best, space, setup.sigma, setup.phi, knobs, sc.weights.width, suggest))
    else:
        unmet += _unmet_slo(sc, ev, best, slos(sc), knobs, space, suggest)
    if engine_gap is None:
        return unmet
    gap = engine_gap_suggestions(sc, knobs, engine_gap) if suggest else []
    unmet.append(Unmet(
        Constraint.ENGINE, f"{sc.engine} has no pipeline parallelism, and {', '.join(map(str, engine_gap))} devices "
        f"cannot all be tensor-parallel ranks of {m.id} ({m.n_q} query heads, {m.n_kv} KV heads)",
        derived(float(int(ev.n[best])), "1", "devices planned with pipeline stages the engine cannot run"),
        tuple(gap)))
    return unmet


def slo_reason(ev: Evaluated, i: int, want: Slos) -> str:
    """Which SLOs a candidate misses, on the figures they are checked against, the other figure beside it."""
    parts = []
    for key, figure, slo, unit in _slo_figures(ev, i, want):
        miss = figure[0] > slo if key != "throughput" else figure[0] < slo
        if miss:
            parts.append(f"{key.replace('_', ' ')} {fmt_unit(figure[0], unit)} {'<' if key == 'throughput' else '>'} "
                         f"{fmt_unit(slo, unit)} ({figure[2]}; {figure[3]} {fmt_unit(figure[1], unit)})")
    return "misses the SLO: " + ", ".join(parts)


def _slo_figures(ev: Evaluated, i: int, want: Slos) -> list[tuple[str, tuple[float, float, str, str], float, str]]:
    """Each SLO set: its key, (the figure it is checked against, the other one, their names), the SLO, the unit."""
    on, other = ("expected", "bound") if want.on != "bound" else ("bound", "expected")
    checked, shown = ev.figures(want.on), ev.figures(other)
    out = []
    for k, (key, slo, unit) in enumerate((("step_time", want.step_time, "s"), ("throughput", want.throughput, "tok/s"),
                                          ("ttft", want.ttft, "s"))):
        if slo is not None:
            out.append((key, (float(checked[k][i]), float(shown[k][i]), on, other), float(slo), unit))
    return out


def no_fit(m: Model, ev: Evaluated, i: int) -> str:
    """Why a candidate does not fit, in the terms that decide it: the totals when every device holds
    the same share, the most loaded device when the pipeline stages split the layers unevenly."""
    n, tp = int(ev.n[i]), int(ev.tp[i])
    layers = int(memory.stage_layers(m, n // tp))
    if ev.usable_dev[i] <= 0:
        return _reserves_exceed(ev, i)
    if ev.by_engine is not None and ev.by_engine[i]:  # the engine's own pool decided it (kvplan.model.pools)
        return f"does not fit: {_engine_pool_need(ev, i)}"
    if layers * (n // tp) == m.n_layers:
        return f"does not fit: needs {fmt_unit(ev.need[i], 'B')} of {fmt_unit(ev.capacity[i], 'B')} usable"
    return (f"does not fit: its most loaded device ({layers} of {m.n_layers} layers on one of {n // tp} "
            f"pipeline stages) needs {fmt_unit(ev.need_dev[i], 'B')} of {fmt_unit(ev.usable_dev[i], 'B')} usable")


def _engine_pool_need(ev: Evaluated, i: int) -> str:
    return (f"the weights and the engine's own KV pool (the pool it builds to hold this KV) need "
            f"{fmt_unit(ev.need_dev[i], 'B')} per device, {fmt_unit(ev.usable_dev[i], 'B')} usable")


def no_layout(m: Model, n: int) -> str:
    return (f"no layout: {n:,} devices do not split into tensor-parallel ranks of {m.id}'s {m.n_q} query and "
            f"{m.n_kv} KV heads times pipeline stages of at least one of its {m.n_layers} layers")


def _unmet_layout(sc: Scenario, knobs: Knobs, counts: tuple[int, ...], suggest: bool) -> Unmet:
    """A device count with no valid split: the plan is unmet, with the smallest count kvplan searches
    that splits and meets every constraint (verified by planning it)."""
    m = sc.model
    tp_max = search.closest_tp(m, m.n_q)
    sugg: list[Suggestion] = []
    if suggest:
        for c in SUGGESTED_COUNTS:
            if not search.has_layout(m, c):
                continue
            changes, edits = devices_change(sc, c)
            p = replan(sc, knobs, changes)
            if p is not None:
                sugg.append(Suggestion(f"{say_count(edits)} (the smallest count kvplan searches that splits into "
                                       f"tensor parallel {p.tp} × pipeline {p.pp} and meets every constraint; "
                                       f"{p.kv_dtype.id} KV)", edits))
                break
    return Unmet(Constraint.LAYOUT, no_layout(m, max(counts)) + f" (at most tensor parallel {tp_max} × pipeline "
                 f"{m.n_layers} = {tp_max * m.n_layers:,} devices, and a count those divide)",
                 derived(float(max(counts)), "1", "devices with no tensor × pipeline split of the model"),
                 tuple(sugg))


def _reserves_exceed(ev: Evaluated, i: int) -> str:
    reserved = float(ev.usable_dev[i] + 0.0)
    return (f"does not fit: the reserves alone take more than the device: {fmt_unit(-reserved, 'B')} short before any "
            "weights or KV (activation and runtime reserves, assumed: --runtime-reserve, --activation-reserve)")


def _unmet_fit(sc: Scenario, ev: Evaluated, best: int, space: Space, sigma: float, phi: float, knobs: Knobs,
               w_p: float, suggest: bool) -> Unmet:
    short = float(ev.need[best] - ev.capacity[best])
    sugg: list[Suggestion] = []
    if suggest:
        sugg = fit_suggestions(sc, ev, best, space, sigma, phi, knobs, w_p)
        if not sugg and slos(sc).any:
            # nothing fits and meets the SLOs: say what fits, and that the SLO stays missed
            sugg = [attrs.evolve(x, text=x.text + "; the SLO is still missed")
                    for x in fit_suggestions(sc, ev, best, space, sigma, phi, attrs.evolve(knobs, fit_only=True),
                                              w_p)]
        if not sugg:
            sugg = [Suggestion("no single change kvplan can verify fits: more devices, narrower weights or a "
                               "smaller workload")]
    n, tp = int(ev.n[best]), int(ev.tp[best])
    layers = int(memory.stage_layers(sc.model, n // tp))
    if ev.usable_dev[best] <= 0:
        short = float(ev.need_dev[best] - ev.usable_dev[best])
        return Unmet(Constraint.FITS, _reserves_exceed(ev, best) + f"; each {sc.device.id} would need "
                     f"{fmt_unit(short, 'B')} more for this plan",
                     derived(short, "B", "memory needed − usable, per device (kvplan.model.memory)"),
                     tuple(sugg))
    if ev.by_engine is not None and ev.by_engine[best]:  # the engine's own pool decided it (kvplan.model.pools)
        short = float(ev.need_dev[best] - ev.usable_dev[best])
        return Unmet(Constraint.FITS, f"does not fit under {sc.engine}'s own KV pool: {_engine_pool_need(ev, best)} "
                     f"on each {sc.device.id}; short by {fmt_unit(short, 'B')}",
                     derived(short, "B", f"weights + {sc.engine}'s KV pool − usable, per device (kvplan.model.pools)"),
                     tuple(sugg))
    if layers * (n // tp) != sc.model.n_layers:
        short = float(ev.need_dev[best] - ev.usable_dev[best])
        return Unmet(Constraint.FITS, f"does not fit: the most loaded device ({layers} of {sc.model.n_layers} layers "
                     f"on one of {n // tp} pipeline stages) needs {fmt_unit(ev.need_dev[best], 'B')}, "
                     f"{fmt_unit(ev.usable_dev[best], 'B')} usable on each {sc.device.id}; short by "
                     f"{fmt_unit(short, 'B')}",
                     derived(short, "B", "memory needed − usable, most loaded device (kvplan.model.memory)"),
                     tuple(sugg))
    bound = ""
    if ev.bound_binds is not None and ev.bound_binds[best]:
        bound = (f" (one sequence of max_context {sc.context_bound:,} tokens, which the engine must admit, "
                 f"takes more KV {'on its attention group ' if sc.attention_dp > 1 else ''}than the batch)")
    return Unmet(Constraint.FITS, f"does not fit: needs {fmt_unit(ev.need[best], 'B')}{bound}, "
                 f"{fmt_unit(ev.capacity[best], 'B')} "
                 f"usable on {int(ev.n[best])} × {sc.device.id}; short by {fmt_unit(short, 'B')}",
                 derived(short, "B", "memory needed − usable capacity"), tuple(sugg))


def _unmet_slo(sc: Scenario, ev: Evaluated, best: int, want: Slos, knobs: Knobs, space: Space,
               suggest: bool) -> list[Unmet]:
    """Each SLO the chosen candidate misses on the figures it is checked against (`--slo-on`), both figures
    printed, with changes that would meet it."""
    out = []
    for key, (got, other, on, other_name), slo, unit in _slo_figures(ev, best, want):
        low = key == "throughput"
        if (got >= slo) if low else (got <= slo):
            continue
        sugg = slo_suggestions(sc, knobs, space, suggest, str(ev.dtype[best]))
        gap = slo - got if low else got - slo
        name = {"step_time": "step time", "throughput": "throughput", "ttft": "TTFT"}[key]
        verb = "is below" if low else "exceeds"
        out.append(Unmet(Constraint(key), f"{name} {fmt_unit(got, unit)} ({on}; {other_name} "
                         f"{fmt_unit(other, unit)}) {verb} the SLO {fmt_unit(slo, unit)} by {fmt_unit(gap, unit)}",
                         derived(gap, unit, f"SLO − plan {name} ({on})" if low else f"plan {name} ({on}) − SLO"),
                         tuple(sugg)))
    return out
