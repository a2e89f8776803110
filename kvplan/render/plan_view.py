"""Render a plan: text (100 columns, no color), contract JSON, and MADR rationale Markdown."""

from __future__ import annotations

import textwrap
from typing import Sequence, Union

from kvplan.base.evidence import Value, to_jsonable
from kvplan.planner import per_engine
from kvplan.planner.plan import Decision, Plan, Rejection, Unmet
from kvplan.planner.rules import RULES
from kvplan.render.common import dump_json

WIDTH = 100


#: How the text output names a metric whose key alone would not say it (the bound stays labelled a lower bound).
_METRIC_LABELS = {"step_time": "step time (lower bound)", "step_time_expected": "step time (expected)",
                  "throughput": "throughput (at the bound)", "throughput_expected": "throughput (expected)",
                  "ttft": "TTFT (lower bound)", "ttft_expected": "TTFT (expected)"}


def reason_text(reason: Union[str, Rejection]) -> str:
    """Why an option was turned down, in words: a rule's rejection leads with the rule's id."""
    if isinstance(reason, str):
        return reason
    return f"{reason.rule}: {reason.reason}" if reason.rule is not None else reason.reason


def _v(v: Value) -> str:
    return f"{v.human} ({v.evidence.value})"


def _bar(v: Value) -> str:
    """A figure's error bar after its row ('  [14.2, 18.5] (80%, n = 212, vllm · h200 · kv-bound)'), else ''."""
    return "" if v.interval is None or v.absent else f"  {v.interval.text(v.unit, v.human)}"


def _wrap(text: str, indent: str = "", sub: str = "") -> list[str]:
    return textwrap.wrap(text, WIDTH, initial_indent=indent, subsequent_indent=sub or indent,
                         break_long_words=False, break_on_hyphens=False) or [indent.rstrip()]


def _pairs(pairs: Sequence[tuple[str, Value]], indent: str) -> list[str]:
    width = max((len(k) for k, _ in pairs), default=0)
    out = []
    for k, v in pairs:
        out.extend(_wrap(f"{k.replace('_', ' ').ljust(width)}  {_v(v)}  — {v.source}", indent,
                         indent + " " * (width + 2)))
    return out


def text(plans: Sequence[Plan]) -> str:
    out: list[str] = []
    for p in plans:
        out.extend(_text_one(p))
        out.append("")
    return "\n".join(out).rstrip("\n") + "\n"


def _text_one(p: Plan) -> list[str]:
    sc = p.scenario
    mb, ma = p.map_before, p.map_after
    out = [f"plan for {sc.name}: {sc.model.id} on {sc.device.id}, batch {sc.batch}, context {sc.context:,} tokens",
           "=" * min(WIDTH, 80), ""]
    n0 = mb.n_devices
    out.append("regime map (R1, 16-bit KV, one device: no count up to the device limit holds the weights)"
               if mb.devices is not None and mb.devices.absent else
               "regime map (R1, 16-bit KV, one device)" if n0 == 1 else
               f"regime map (R1, 16-bit KV, {n0} devices: the fewest {sc.device.id} that hold the weights)")
    out.extend(_pairs(mb.items(), "  "))
    out.append(f"  → {p.regime_before}: context is {mb.context_over_s_star.human} s* and "
               f"{mb.context_over_s_cap.human} s_cap")
    out.append("")
    out.append("decisions")
    for d in p.decisions:
        rules = f" [{', '.join(d.rules)}]" if d.rules else ""
        pin = " (pinned)" if d.pinned else ""
        out.append(f"  {d.domain:<15} {d.choice}{pin}{rules}")
        out.extend(_wrap(d.decision, " " * 18))
        for o in d.options:
            out.extend(_wrap(f"rejected {o.choice}: {reason_text(o.reason)}", " " * 20, " " * 22))
        for e in d.evidence[:2]:
            out.extend(_wrap(f"evidence: {e.human} (reported) — {e.source}", " " * 20, " " * 22))
        hidden = len(d.evidence[2:]) + len(d.reported_text)
        if hidden:
            out.extend(_wrap(f"(+{hidden} more reported results: --format markdown or json)", " " * 20))
    out.append("")
    out.append("predicted (plan vs baseline: 16-bit KV, no eviction, no prefix sharing, striped, same devices)")
    base = dict(p.baseline.items())
    rows = [(_METRIC_LABELS.get(k, k.replace("_", " ")), k, v) for k, v in p.metrics.items() if k != "speedup"]
    width = max(len(label) for label, _, _ in rows)
    for label, k, v in rows:
        out.append(f"  {label.ljust(width)}  {v.human:>12}  {base[k].human:>12}  ({v.evidence.value}){_bar(v)}")
    sp = p.metrics.speedup
    out.append(f"  {'speedup'.ljust(width)}  {sp.human:>12}  {'1x':>12}  ({sp.evidence.value})")
    out.extend([*_load_text(p), *_pools_text(p), *_cost_text(p), "", "byte factors (footprint = 16-bit KV × combined)"])
    out.extend(_pairs(p.byte_factors.items(), "  "))
    if p.expected_factors:
        out.append("")
        out.append("factors of the expected figures (docs/expected.md; each source: --format json)")
        out.extend(_wrap("; ".join(f"{k} {_v(v)}" for k, v in p.expected_factors), "  "))
    out.append("")
    out.append(f"after the plan (R8): {p.regime_after}; s* = {ma.s_star.human}, s_cap = {ma.s_cap.human}")
    if p.unmet:
        out.append("")
        out.append("UNMET")
        for u in p.unmet:
            out.extend(_wrap(u.message, "  "))
            for s in u.suggestions:
                out.extend(_wrap(f"would meet it: {s.text}", "    ", "      "))
    out.append("")
    out.append("assumptions")
    for a in p.assumptions:
        out.extend(_wrap(f"{a.human} (assumed) — {a.source}", "  ", "    "))
    out.append("")
    out.extend(_engines_text(p))
    out.append(f"plan digest {p.digest}; {p.candidates_evaluated} candidates evaluated")
    return out


def _load_text(p: Plan) -> list[str]:
    """A request workload's service figures (docs/service.md): the load model at the declared rate."""
    ld = p.load
    if ld is None:
        return []
    sc = p.scenario
    assert sc.inputs is not None and sc.outputs is not None
    head = (f"service (load model, continuous batching): {ld.rate.human} of {sc.inputs.text()} input and "
            f"{sc.outputs.text()} output tokens; the batch {sc.batch} is derived from it") if sc.concurrency is None \
        else (f"service (load model, closed loop): {sc.concurrency:,} clients of {sc.inputs.text()} input and "
              f"{sc.outputs.text()} output tokens; the throughput {ld.rate.human} and the batch {sc.batch} are "
              "derived from them")
    out = [""] + _wrap(head, "")
    if ld.saturated:
        out.extend(_wrap(f"SATURATED: the rate {ld.rate.human} is past the saturation rate "
                         f"{ld.saturation_rate.human} ({ld.saturation_rate.evidence.value}), set by the {ld.binding}; "
                         "no steady state: the queue grows without bound", "  "))
    rows = [({"itl": "ITL", "ttft": "TTFT", "tpot": "TPOT", "kv_bytes_mean": "KV bytes (mean)",
              "kv_bytes_tail": "KV bytes (tail)", "rate": "rate" if sc.concurrency is None else "throughput",
              "concurrency": "concurrency" if sc.concurrency is None else "clients",
              "output_rate": "output tokens/s"}
             .get(k, k.replace("_", " ")), v) for k, v in ld.items()]
    width = max(len(label) for label, _ in rows)
    for label, v in rows:
        out.append(f"  {label.ljust(width)}  {v.human:>14}  ({v.evidence.value}){_bar(v)}")
    if ld.goodput is not None:  # what binds it: the source names the SLOs (docs/service.md, Goodput)
        binds = {"ttft": "the TTFT SLO binds it", "itl": "the ITL SLO binds it",
                 "saturation": "the SLOs hold up to the saturation rate"}[ld.goodput_slo or "saturation"]
        out.extend(_wrap(f"goodput: the largest rate meeting the service SLOs on the {sc.slo_on} step; {binds}",
                         "  ", "    "))
    return out


def _pools_text(p: Plan) -> list[str]:
    """A disaggregated plan's pools (docs/service.md, Disaggregated serving): each pool's workers and layout, the KV
    transfer and the end-to-end figures; the service figures above are the decode pool's, with this TTFT."""
    pools = p.pools
    if pools is None:
        return []
    out = [""] + _wrap(f"disaggregated serving: {pools.ratio} prefill:decode workers; the service figures above are "
                       "the decode pool's, its TTFT the end-to-end one", "")
    for name, q, n in (("prefill", pools.prefill, pools.prefill_workers), ("decode", pools.decode,
                                                                           pools.decode_workers)):
        out.extend(_wrap(f"{name} pool: {n} × ({q.n_devices} × {q.scenario.device.id}, tp {q.tp}"
                         f"{f' × pp {q.pp}' if q.pp > 1 else ''}), KV {q.kv_dtype.id}, batch {q.scenario.batch}",
                         "  ", "    "))
    out.extend(_pairs(pools.figures.items(), "  "))
    return out


#: How the text output names the cost figures.
_COST_LABELS = {"hourly": "deployment $/hour", "per_million_input": "$/1M input tokens",
                "per_million_output": "$/1M output tokens", "price": "price per device-hour",
                "devices": "devices paid for"}


def _cost_text(p: Plan) -> list[str]:
    """What the plan costs (kvplan.planner.cost), each figure with its evidence, the price with its own and its
    source; without a price, the one line that says how to give one."""
    c = p.cost
    if c is None:
        return [""] + _wrap(f"cost: {p.cost_absent}", "") if p.cost_absent else []
    rate = "the declared rate" if p.scenario.concurrency is None else "the closed loop's throughput"
    at = (f"at {rate}; the engine's time split into prefill and decode by the load model's shares"
          if c.rate is not None else "at the plan's expected throughput")
    out = [""] + _wrap(f"cost (docs/service.md): {at}", "")
    rows = [(_COST_LABELS.get(k, k.replace("_", " ")), v) for k, v in c.items()]
    width = max(len(label) for label, _ in rows)
    for label, v in rows:
        out.append(f"  {label.ljust(width)}  {v.human:>22}  ({v.evidence.value})")
    good = p.cost_at_goodput
    if good is not None and good.rate is not None and good.per_million_input is not None:
        out.extend(_wrap(f"at goodput ({good.rate.human}): $/1M input tokens {_v(good.per_million_input)}, "
                         f"$/1M output tokens {_v(good.per_million_output)}", "  ", "    "))
    out.extend(_wrap(f"price source: {c.price.source}", "  ", "    "))
    return out


def _cost_json(p: Plan) -> dict[str, object]:
    """The plan's cost figures, or why there are none (`absent`: how to give a price)."""
    if p.cost is None:
        return {"absent": p.cost_absent}
    good = p.cost_at_goodput
    return {**dict(p.cost.items()), **({"at_goodput": dict(good.items())} if good is not None else {})}


def _engines_text(p: Plan) -> list[str]:
    """`engine = any`: each engine's own plan beside the spec's, as `kvplan emit` writes its target."""
    if not p.engines:
        return []
    out = ["per engine (engine = any: each engine target is written from the plan made for it, kvplan emit)"]
    for q in p.engines:
        out.extend(_wrap(f"{q.scenario.engine}: {per_engine.side_by_side(p, q)}", "  ", "    "))
    return out + [""]


def _speculative_json(p: Plan) -> dict[str, object]:
    """A spec with a speculative block: `speculative_speedup` (time per token without over with speculation,
    derived, x) and the figures it was weighed with; nothing for any other plan (docs/speculative.md)."""
    s = p.speculative
    if s is None:
        return {}
    return {"speculative_speedup": s.speedup,
            "speculative": {"method": s.method, "adopted": s.adopted, "draft_model": s.draft_model,
                            "regime": s.regime, **dict(s.items())}}


def _decision_json(d: Decision) -> dict[str, object]:
    return {
        "domain": d.domain, "title": d.title, "choice": d.choice, "rules": list(d.rules), "pinned": d.pinned,
        "context": list(d.context), "decision": d.decision, "numbers": dict(d.numbers),
        "evidence": list(d.evidence), "reported_text": list(d.reported_text),
        "options": [{"choice": o.choice, "reason": reason_text(o.reason), "numbers": dict(o.numbers)}
                    for o in d.options],
        "consequences": list(d.consequences),
    }


def plan_payload(p: Plan) -> dict[str, object]:
    sc = p.scenario
    return {
        "scenario": sc.name, "deployment": sc.deployment, "model": sc.model.id, "device": sc.device.id,
        "batch": sc.batch, "context": sc.context,
        "choices": p.choices, "digest": p.digest, "feasible": p.feasible,
        "regime_before": p.regime_before, "regime_after": p.regime_after,
        "map_before": dict(p.map_before.items()), "map_after": dict(p.map_after.items()),
        "metrics": dict(p.metrics.items()), "baseline": dict(p.baseline.items()),
        "byte_factors": dict(p.byte_factors.items()), "expected_factors": dict(p.expected_factors),
        **({"load": {**dict(p.load.items()), "saturated": p.load.saturated, "binding": p.load.binding,
                      "goodput_slo": p.load.goodput_slo}}
           if p.load is not None else {}),
        "cost": _cost_json(p),
        **_speculative_json(p),
        **({"pools": _pools_json(p)} if p.pools is not None else {}),
        "tier": {"tier": p.tier.tier, "link": p.tier.link, "bytes": p.tier.bytes,
                 "prefill_time": p.tier.prefill_time, "fetch_time": p.tier.fetch_time},
        "decisions": [_decision_json(d) for d in p.decisions],
        "unmet": [_unmet_json(u) for u in p.unmet],
        "assumptions": list(p.assumptions),
        "candidates_evaluated": p.candidates_evaluated,
        "kernel": p.kernel,
        **({"engines": [_engine_json(p, q) for q in p.engines]} if p.engines else {}),
    }


def _pools_json(p: Plan) -> dict[str, object]:
    """A disaggregated plan's pools: x:y, the link, the figures and each pool's choices, digest and figures."""
    pools = p.pools
    assert pools is not None

    def pool(q: Plan, n: int) -> dict[str, object]:
        return {"workers": n, "choices": q.choices, "digest": q.digest, "feasible": q.feasible,
                "metrics": dict(q.metrics.items()), **({"load": dict(q.load.items())} if q.load is not None else {})}

    return {"ratio": pools.ratio, "prefill_workers": pools.prefill_workers, "decode_workers": pools.decode_workers,
            "link": pools.link, "same_node": pools.same_node, "figures": dict(pools.figures.items()),
            "prefill": pool(pools.prefill, pools.prefill_workers), "decode": pool(pools.decode, pools.decode_workers)}


def _unmet_json(u: Unmet) -> dict[str, object]:
    """An unmet constraint as the JSON contract writes it: its kind's name and each suggestion's text."""
    return {"constraint": u.constraint.value, "message": u.message, "shortfall": u.shortfall,
            "suggestions": [s.text for s in u.suggestions]}


def _engine_json(p: Plan, q: Plan) -> dict[str, object]:
    """One engine's own plan beside the spec's (`engine = any`): what `kvplan emit` writes for its target."""
    error = per_engine.unfit(p, q)
    return {"engine": q.scenario.engine, "choices": q.choices, "digest": q.digest, "feasible": q.feasible,
            "written": error is None, "differences": per_engine.differences(p, q),
            "metrics": dict(q.metrics.items()),
            "unmet": [_unmet_json(u) for u in q.unmet],
            "summary": per_engine.side_by_side(p, q)}


def json_text(plans: Sequence[Plan], extra: dict[str, object] | None = None) -> str:
    body: dict[str, object] = {"kind": "plan", "plans": [plan_payload(p) for p in plans]}
    if extra:
        body.update(to_jsonable(extra))
    return dump_json(body)


# ------------------------------------------------------------------ markdown (MADR)

def _md_value(v: Value) -> str:
    return f"{v.human_with_interval} *({v.evidence.value})*"


def decision_markdown(p: Plan, d: Decision, number: int) -> str:
    sc = p.scenario
    status = "pinned by the spec" if d.pinned else "proposed by kvplan"
    out = [f"# {number:02d}. {d.title}: {d.choice}", "",
           f"- Status: {status}",
           f"- Deployment: `{sc.name}` ({sc.model.id} on {sc.device.id})",
           f"- Rules: {'; '.join(f'{r} — {RULES[r].title}' for r in d.rules) if d.rules else '—'}",
           f"- Plan digest: `{p.digest}`", "",
           "## Context", ""]
    out += [f"- {c}" for c in d.context] + [""]
    out += ["## Decision", "", d.decision, ""]
    if d.numbers:
        out += ["## Evidence", "", "| quantity | value | source |", "|---|---|---|"]
        out += [f"| {k.replace('_', ' ')} | {_md_value(v)} | {v.source} |" for k, v in d.numbers]
        out.append("")
    if d.evidence or d.reported_text:
        out += ["Reported results (as each source reported them; not comparable across papers):", ""]
        out += [f"- {e.human} *(reported)* — {e.source}" for e in d.evidence]
        out += [f"- *(reported, text)* {note}" for note in d.reported_text]
        out.append("")
    assumed = [a for a in p.assumptions]
    if assumed:
        out += ["## Assumptions", ""]
        out += [f"- {a.human} *(assumed)* — {a.source}" for a in assumed]
        out.append("")
    if d.options:
        out += ["## Options considered", "", f"- **{d.choice}** — chosen"]
        for o in d.options:
            nums = "; ".join(f"{k.replace('_', ' ')} {_md_value(v)}" for k, v in o.numbers)
            out.append(f"- **{o.choice}** — {reason_text(o.reason)}" + (f" ({nums})" if nums else ""))
        out.append("")
    if d.consequences:
        out += ["## Consequences", ""] + [f"- {c}" for c in d.consequences] + [""]
    return "\n".join(out).rstrip("\n") + "\n"


def markdown(plans: Sequence[Plan]) -> str:
    """One document: a summary per plan, then one MADR record per decision."""
    out: list[str] = []
    for p in plans:
        out.append(index_markdown(p).rstrip("\n"))
        out.append("")
        for i, d in enumerate(p.decisions, 1):
            out.append(decision_markdown(p, d, i).replace("\n# ", "\n## ").replace("# ", "## ", 1)
                       .replace("\n## Context", "\n### Context").replace("\n## Decision", "\n### Decision")
                       .replace("\n## Evidence", "\n### Evidence").replace("\n## Assumptions", "\n### Assumptions")
                       .replace("\n## Options considered", "\n### Options considered")
                       .replace("\n## Consequences", "\n### Consequences").rstrip("\n"))
            out.append("")
    return "\n".join(out).rstrip("\n") + "\n"


def index_markdown(p: Plan) -> str:
    sc = p.scenario
    base = dict(p.baseline.items())
    out = [f"# KV-cache plan: {sc.name}", "",
           f"{sc.model.id} on {sc.device.id}, batch {sc.batch}, context {sc.context:,} tokens. "
           f"Plan digest `{p.digest}`.", "",
           f"Regime before the plan: **{p.regime_before}**; after: **{p.regime_after}**.", "",
           "| decision | choice | rules |", "|---|---|---|"]
    out += [f"| {d.title} | {d.choice}{' (pinned)' if d.pinned else ''} | {', '.join(d.rules) or '—'} |"
            for d in p.decisions]
    out += ["", "| predicted | plan | baseline |", "|---|---|---|"]
    out += [f"| {k.replace('_', ' ')} | {_md_value(v)} | {_md_value(base[k])} |" for k, v in p.metrics.items()
            if k in base]
    out.append(f"| speedup | {_md_value(p.metrics.speedup)} | 1x |")
    if p.load is not None:  # a request workload (docs/service.md)
        out += ["", "| service (load model) | value |", "|---|---|"]
        out += [f"| {k.replace('_', ' ')} | {_md_value(v)} |" for k, v in p.load.items()]
    if p.cost is not None:  # a price is known (kvplan.planner.cost)
        out += ["", "| cost | value |", "|---|---|"]
        out += [f"| {_COST_LABELS.get(k, k.replace('_', ' '))} | {_md_value(v)} |" for k, v in p.cost.items()]
    elif p.cost_absent:
        out += ["", f"Cost: {p.cost_absent}."]
    if p.unmet:
        out += ["", "## Unmet", ""]
        for u in p.unmet:
            out.append(f"- {u.message}")
            out += [f"  - would meet it: {s.text}" for s in u.suggestions]
    if p.engines:
        out += ["", "## Per engine", "",
                "`engine = any`: each engine target is written from the plan made for it (`kvplan emit`).", ""]
        out += [f"- **{q.scenario.engine}**: {per_engine.side_by_side(p, q)}" for q in p.engines]
    return "\n".join(out) + "\n"
