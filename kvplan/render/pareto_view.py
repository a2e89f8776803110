"""`kvplan pareto`'s output: each scenario's front and the candidates it dominates, as text, CSV or JSON.

Every number carries its unit and its evidence class (derived: the expected model's figures and the bounds'). The
order is the front's (kvplan.planner.pareto.Front.points), so the same spec prints the same bytes.
"""

from __future__ import annotations

import csv
import io
import textwrap
from typing import Sequence

from kvplan.base.evidence import Value
from kvplan.planner.pareto import Front, Point
from kvplan.render.common import dump_json, table

WIDTH = 100
#: The CSV's columns before the costs; then one `cost_<name>` column per cost of the points (`cost_devices`). The
#: units are in the names (tok/s, s), every number derived (docs/cli.md, `kvplan pareto`).
CSV_COLUMNS = ("scenario", "point", "front", "beaten_by", "advise_chooses", "kv_dtype", "retention", "devices",
               "tensor_parallel", "pipeline_parallel", "placement", "tokens_per_s_per_user",
               "tokens_per_s_per_user_bound", "tokens_per_s_per_device", "tokens_per_s_per_device_bound",
               "step_time_expected_s", "step_time_s")


def _v(v: Value) -> str:
    return v.human


def _row(p: Point, chosen: int) -> list[str]:
    mark = "*" if p.front else f"< {p.beaten_by}"
    return [str(p.number) + (" (advise)" if p.number == chosen else ""), mark, p.kv_dtype, f"{p.retention:g}",
            str(p.devices), f"{p.tp} × {p.pp}", p.placement, _v(p.per_user), _v(p.per_user_bound), _v(p.per_device),
            _v(p.per_device_bound), _v(p.step), _v(p.step_bound), *(_v(v) for _, v in p.costs)]


def _headers(f: Front) -> list[str]:
    costs = [f"cost: {name}" for name, _ in (f.points[0].costs if f.points else ())]
    return ["#", "front", "kv", "r", "devices", "tp × pp", "placement", "tok/s per user", "(bound)",
            "tok/s per device", "(bound)", "step", "(bound)", *costs]


def _text_one(f: Front, advise: str) -> list[str]:
    sc = f.scenario
    out = [f"pareto front for {sc.name}: {sc.model.id} on {sc.device.id}, batch {sc.batch}, "
           f"context {sc.context:,} tokens", "=" * min(WIDTH, 80), ""]
    feasible, front = len(f.points), len(f.on_front)
    intro = (f"{f.evaluated} candidates evaluated, {feasible} pass the rules, fit and meet the SLOs (the planner's "
             f"filters, docs/planner.md), {front} on the front. Axes: tokens/s per user = 1/T_expected and tokens/s "
             "per device = b/(T_expected·N), both maximized; every figure derived (docs/expected.md), the lower "
             f"bound's beside it. Every candidate: {f.block_size}-token pages, prefix caching "
             f"{'on' if f.prefix_caching else 'off'}. Costs: the devices a point takes and, where the device has a "
             "price, its $/1M output tokens at the expected throughput.")
    out.extend(textwrap.wrap(intro, WIDTH))
    out.append("")
    if not f.points:
        out.append(f"no front: {f.gap}")
        return out
    rows = [_row(p, f.chosen) for p in f.on_front]
    right = tuple(range(7, 13 + len(f.points[0].costs)))
    out.append("front")
    out.extend("  " + line for line in table(_headers(f), rows, right=right).splitlines())
    out.append("")
    if f.chosen:
        out.append(f"kvplan advise chooses point {f.chosen} (objective {sc.objective}, then the minimum gain), "
                   + ("on the front." if any(p.number == f.chosen for p in f.on_front) else "off the front."))
        out.append("")
    out.extend(textwrap.wrap(f"reproduce: `{advise}` with the point's pins in deployment \"{sc.deployment}\" "
                             "(replacing those keys of its pin block) plans exactly that point:", WIDTH,
                             break_on_hyphens=False, break_long_words=False))
    for p in f.on_front:
        out.append(f"  {p.number}: {p.label}")
        out.extend(p.pin_block("    ").splitlines())
    beaten = [p for p in f.points if not p.front]
    if beaten:
        out.append("")
        out.extend(textwrap.wrap(f"dominated ({len(beaten)}; `< N`: front point N is at least as fast per user "
                                 "and per device, and faster on one)", WIDTH))
        out.extend("  " + line for line in
                   table(_headers(f), [_row(p, f.chosen) for p in beaten], right=right).splitlines())
    return out


def text(fronts: Sequence[Front], advise: str = "kvplan advise FILE.kvp") -> str:
    """The fronts as text; `advise` is the command that reproduces a point (its scenario and options)."""
    out: list[str] = []
    for f in fronts:
        out.extend(_text_one(f, advise))
        out.append("")
    return "\n".join(out).rstrip("\n") + "\n"


def _num(x: float) -> str:
    """A number as CSV writes it: Python's shortest round-trip repr, whole numbers without a decimal point."""
    return str(int(x)) if float(x).is_integer() and abs(x) < 2**53 else repr(float(x))


def csv_text(fronts: Sequence[Front]) -> str:
    """One row per feasible candidate of every scenario, the front first; the header names each column's unit."""
    costs = list(dict.fromkeys(name for f in fronts for p in f.points for name, _ in p.costs))
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow([*CSV_COLUMNS, *(f"cost_{name}" for name in costs)])
    for f in fronts:
        for p in f.points:
            have = dict(p.costs)
            w.writerow([f.scenario.name, p.number, "true" if p.front else "false", p.beaten_by or "",
                        "true" if p.number == f.chosen else "false", p.kv_dtype, _num(p.retention), p.devices, p.tp,
                        p.pp, p.placement, _num(p.per_user.value), _num(p.per_user_bound.value),
                        _num(p.per_device.value), _num(p.per_device_bound.value), _num(p.step.value),
                        _num(p.step_bound.value), *(_num(have[c].value) if c in have else "" for c in costs)])
    return buf.getvalue()


def _point_json(p: Point, chosen: int) -> dict[str, object]:
    return {
        "point": p.number, "front": p.front, "beaten_by": p.beaten_by or None, "advise_chooses": p.number == chosen,
        "label": p.label,
        "choices": {"kv_dtype": p.kv_dtype, "retention": p.retention, "devices": p.devices, "tensor_parallel": p.tp,
                    "pipeline_parallel": p.pp, "placement": p.placement},
        "tokens_per_s_per_user": p.per_user, "tokens_per_s_per_user_bound": p.per_user_bound,
        "tokens_per_s_per_device": p.per_device, "tokens_per_s_per_device_bound": p.per_device_bound,
        "step_time_expected": p.step, "step_time": p.step_bound,
        "cost": dict(p.costs),
        "pins": dict(p.pins), "pin_block": p.pin_block(),
    }


def json_text(fronts: Sequence[Front], advise: str = "kvplan advise FILE.kvp") -> str:
    """`{"format_version": "1", "kind": "pareto", "fronts": [...]}`: each front's scenario, counts and points."""
    return dump_json({"kind": "pareto", "advise": advise, "fronts": [{
        "scenario": f.scenario.name, "deployment": f.scenario.deployment, "model": f.scenario.model.id,
        "device": f.scenario.device.id, "batch": f.scenario.batch, "context": f.scenario.context,
        "axes": ["tokens_per_s_per_user", "tokens_per_s_per_device"], "maximize": [True, True],
        "candidates_evaluated": f.evaluated, "feasible": len(f.points), "on_front": len(f.on_front),
        "block_size": f.block_size, "prefix_caching": f.prefix_caching,
        "advise_chooses": f.chosen or None, "gap": f.gap or None,
        "points": [_point_json(p, f.chosen) for p in f.points],
    } for f in fronts]})
