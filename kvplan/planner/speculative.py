"""Speculative decoding as a planned decision (SPEC §15, docs/speculative.md).

After the plan is made, each method the spec asks for (`method = auto`: each the plan's engine runs) is costed
on the plan's layout at its batch and context (kvplan.model.speculative), at the spec's k or, with
`draft_tokens = auto`, at every k from 1 to 16; the method and k with the shortest expected time per output token
is adopted when it beats the plain expected step and its draft fits beside the plan, else speculation is rejected
with the regime of its verify step and both sides' numbers. The draft's weights and KV come out of the plan's
free memory (the plan is not searched again around them). A method with no acceptance (neither the spec's nor a
cited one in kvplan/catalog/speculative.toml) or an EAGLE-3 draft kvplan cannot name is an option turned down
with what the spec must write.
"""

from __future__ import annotations

from typing import Optional

import attrs
import numpy as np

from kvplan.base.evidence import Evidence, Value, derived
from kvplan.base.records import record
from kvplan.catalog import settings
from kvplan.catalog import speculative as drafts
from kvplan.catalog.engines import get_engine
from kvplan.model import expected as ex
from kvplan.model import roofline as rf
from kvplan.model import speculative as sp
from kvplan.model.footprint import KvFactors, fragmentation
from kvplan.model.scenario import Scenario
from kvplan.planner.plan import Decision, Option, Plan, SpeculativeFigures

#: The k `draft_tokens = auto` weighs: every whole number of the setting's range.
DRAFT_TOKENS = tuple(range(1, settings.MAX_DRAFT_TOKENS + 1))


@record
class _Candidate:
    """One method ready to cost: its draft, acceptance, the k it may take and the repo id emit loads."""

    method: str
    draft: sp.Draft
    acceptance: Value
    ks: tuple[int, ...]
    repo: str


def _methods(sc: Scenario) -> tuple[str, ...]:
    spec = sc.speculative
    assert spec is not None
    if spec.method != "auto":
        return (spec.method,)
    return tuple(m for m in sp.METHODS if m in get_engine(sc.engine).speculative)


def _acceptance(sc: Scenario, row: Optional[drafts.DraftRow]) -> Optional[Value]:
    spec = sc.speculative
    assert spec is not None
    if spec.acceptance is not None:
        return Value(spec.acceptance, "1", Evidence.ASSUMED, "speculative.acceptance as the spec writes it")
    return None if row is None else drafts.acceptance(row)


def _candidate(sc: Scenario, method: str) -> tuple[Optional[_Candidate], str]:
    """The method's candidate, or None and why it cannot be costed (what the spec must give)."""
    spec = sc.speculative
    assert spec is not None
    engine = get_engine(sc.engine)
    if method not in engine.speculative:
        return None, f"{engine.described} runs no {method} speculation"
    row = drafts.row_for(method, sc.model.id)
    alpha = _acceptance(sc, row)
    if alpha is None:
        return None, (f"no cited acceptance for {method} on {sc.model.id} (kvplan/catalog/speculative.toml): "
                      "write the one measured on your traffic, `acceptance = 0.6`")
    ks = DRAFT_TOKENS if spec.draft_tokens is None else (spec.draft_tokens,)
    if method == "ngram":
        return _Candidate(method, sp.Draft("ngram", 0.0, 0), alpha, ks, ""), ""
    if row is None and method == "mtp":
        return None, f"kvplan knows no MTP module of {sc.model.id}: its checkpoint must carry one"
    if row is None:
        repo = spec.draft or ""
        if not repo:
            return None, (f"kvplan knows no EAGLE-3 draft of {sc.model.id}: name the draft, "
                          '`draft = "owner/name"` (a Hugging Face repo id)')
        # a named head kvplan has no row for: sized as one decoder layer of the target (assumed, docs/speculative.md)
        return _Candidate(method, sp.Draft("eagle3", sc.model.params / sc.model.n_layers, 1), alpha, ks, repo), ""
    if method == "mtp" and spec.acceptance is None and spec.draft_tokens is None:
        ks = (row.tau_k,)  # the cited acceptance is of the module's own depth (speculative.toml's note)
    dense = method == "eagle3"
    return _Candidate(method, sp.Draft(method, row.draft_params, row.draft_layers, dense), alpha, ks,
                      spec.draft or row.draft), ""


def _config(p: Plan) -> rf.Config:
    sc = p.scenario
    frag = float(fragmentation(sc.context, p.block_size))
    return rf.Config(sc.model, sc.device, n_devices=p.n_devices, tp=p.tp, w_p=sc.weights.width, w_kv=p.kv_width,
                     factors=KvFactors(retention=p.retention, sharing=p.sharing, frag=frag), placement=p.placement,
                     attention_dp=sc.attention_dp)


@record
class _Costed:
    cand: _Candidate
    step: sp.SpecStep
    best: int
    memory: float
    verify_compute_bound: bool


def _cost(p: Plan, cfg: rf.Config, c: _Candidate) -> _Costed:
    sc = p.scenario
    f = ex.deployment_factors(sc.device, p.kv_dtype.id, sc.engine, sc.calibration)
    link = ex.link_bandwidth(sc.device)
    ks = np.array(c.ks, dtype=np.float64)
    step = sp.speculative_step(cfg, sc.batch, sc.context, ks, float(c.acceptance.value), c.draft, f, link)
    best = int(np.argmin(step.per_token))
    bound = rf.step_bound(sc.model, sc.device, sc.batch * (ks[best] + 1.0), sc.context, w_p=cfg.w_p, tp=cfg.tp,
                          kv_read=rf.kv_bytes_read(cfg, sc.batch, sc.context),
                          beta_kv=rf.beta_eff(sc.device, cfg.placement, sc.batch)[0])
    memory = float(sp.draft_memory(cfg, c.draft, sc.batch, sc.context))
    return _Costed(c, step, best, memory, bool(float(bound.compute) > float(bound.memory)))


def _ms(x: float) -> str:
    return f"{x * 1e3:.3g} ms"


def _figures(p: Plan, k: _Costed, adopted: bool) -> SpeculativeFigures:
    s, i = k.step, k.best
    kk = int(s.k[i])
    b = p.scenario.batch
    tau = float(s.tau[i])
    alpha = k.cand.acceptance
    return SpeculativeFigures(
        method=k.cand.method, adopted=adopted, draft_model=k.cand.repo if adopted else "",
        regime="compute-bound" if k.verify_compute_bound else p.regime_after,
        speedup=derived(float(s.speedup[i]), "x", "time per output token without speculation over with it "
                        "(docs/speculative.md)"),
        time_per_token=derived(float(s.per_token[i]), "s", f"(T_verify + {kk} · T_draft)/τ (docs/speculative.md)"),
        time_per_token_plain=derived(float(s.plain[i]), "s", "T_expected at the plan's batch (docs/expected.md)"),
        tau=derived(tau, "tok", f"τ = (1 − α^{kk + 1})/(1 − α) at α = {float(alpha.value):.3g}"),
        acceptance=alpha,
        draft_tokens=derived(float(kk), "tok", "the draft tokens per verify step"
                             + (" the spec writes" if len(k.cand.ks) == 1 else " with the shortest time per token")),
        verify_time=derived(float(s.verify[i]), "s", f"the expected step at {b} × {kk + 1} query tokens"),
        draft_time=derived(float(s.draft[i]), "s", f"one {k.cand.method} draft forward at batch {b}"),
        draft_memory=derived(k.memory, "B", "the draft's weights and its layers' KV"),
    )


def _option(k: _Costed, free: float) -> Option:
    s, i = k.step, k.best
    words = (f"k = {int(s.k[i])}: {_ms(float(s.per_token[i]))} per token against {_ms(float(s.plain[i]))} "
             f"({float(s.speedup[i]):.2f}×; τ = {float(s.tau[i]):.2f} at α = {float(k.cand.acceptance.value):.3g})")
    if k.memory > free:
        words += f"; its draft needs {k.memory / 1e9:.3g} GB beside the plan, which leaves {max(free, 0) / 1e9:.3g} GB"
    return Option(f"{k.cand.method}, k = {int(s.k[i])}", words)


def _decision(p: Plan, fig: SpeculativeFigures, options: tuple[Option, ...]) -> Decision:
    sc = p.scenario
    k = int(fig.draft_tokens.value)
    b = sc.batch
    context = (f"batch {b} at context {sc.context:,} on {p.n_devices} × {sc.device.id} (tp {p.tp}), "
               f"{sc.engine}: the plain expected step is {_ms(fig.time_per_token_plain.value)}",
               f"a verify step runs {b} × {k + 1} = {b * (k + 1):,} query tokens: weights and each sequence's KV "
               f"read once, {k + 1}× the compute; it takes {_ms(fig.verify_time.value)} ({fig.regime})",
               f"{fig.method} keeps τ = {fig.tau.value:.2f} tokens per verify at α = {fig.acceptance.value:.3g} "
               f"({fig.acceptance.evidence.value}: {fig.acceptance.source})")
    if fig.adopted:
        choice = f"{fig.method}, k = {k}"
        decision = (f"We will speculate with {fig.method}, {k} draft tokens per verify"
                    + (f" from {fig.draft_model}" if fig.draft_model else "")
                    + f": {_ms(fig.time_per_token.value)} per output token against "
                    + f"{_ms(fig.time_per_token_plain.value)} without, {fig.speedup.value:.2f}× (derived).")
    else:
        choice = "off"
        why = (f"the {fig.regime} verify step costs more than the {fig.tau.value:.2f} tokens it keeps"
               if fig.speedup.value <= 1.0 else "its draft does not fit beside the plan")
        decision = (f"We will not speculate: {why}; the best option, {fig.method} at k = {k}, takes "
                    f"{_ms(fig.time_per_token.value)} per output token against {_ms(fig.time_per_token_plain.value)}"
                    f" without ({fig.speedup.value:.2f}×).")
    numbers = tuple((name, v) for name, v in fig.items())
    return Decision(domain="speculative", title="Speculative decoding", choice=choice, rules=(), context=context,
                    decision=decision, numbers=numbers, options=options,
                    consequences=((f"kvplan emit writes the {fig.method} draft with {k} tokens per verify",)
                                  if fig.adopted else ("kvplan emit writes no speculative flags",)))


def _unavailable(p: Plan, why: tuple[tuple[str, str], ...]) -> Decision:
    options = tuple(Option(m, w) for m, w in why)
    return Decision(domain="speculative", title="Speculative decoding", choice="off", rules=(),
                    context=tuple(f"{m}: {w}" for m, w in why),
                    decision="We will not speculate: no method asked for can be costed (each option says what "
                             "the spec must give).", numbers=(), options=options,
                    consequences=("kvplan emit writes no speculative flags",))


def decide(p: Plan) -> Plan:
    """The plan with its speculative decision (SpeculativeFigures and a Decision), for a spec with a speculative
    block that asks for a method; any other plan as it is."""
    sc = p.scenario
    if sc.speculative is None or not sc.speculative.on:
        return p
    cfg = _config(p)
    costed: list[_Costed] = []
    why: list[tuple[str, str]] = []
    for method in _methods(sc):
        cand, reason = _candidate(sc, method)
        if cand is None:
            why.append((method, reason))
        else:
            costed.append(_cost(p, cfg, cand))
    if not costed:
        return attrs.evolve(p, decisions=(*p.decisions, _unavailable(p, tuple(why))))
    free = p.metrics.memory_usable.value - p.metrics.memory_needed.value
    fits = [k for k in costed if k.memory <= free]
    pick = min(fits or costed, key=lambda k: float(k.step.per_token[k.best]))
    adopted = bool(fits) and float(pick.step.speedup[pick.best]) > 1.0
    fig = _figures(p, pick, adopted)
    others = [k for k in costed if not (adopted and k is pick)]
    options = tuple(_option(k, free) for k in others) + tuple(Option(m, w) for m, w in why)
    return attrs.evolve(p, speculative=fig, decisions=(*p.decisions, _decision(p, fig, options)))


__all__ = ["DRAFT_TOKENS", "decide"]
