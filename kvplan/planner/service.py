"""A request workload's plan (docs/service.md): the batch the load model derives from the rate, and the figures
advise prints beside the plan (concurrency, ITL and TTFT at the rate, the saturation rate), each with evidence."""

from __future__ import annotations

import math
from typing import Optional

import attrs

from kvplan.base.evidence import Evidence, Value, assumed, derived
from kvplan.base.limits import MAX_BATCH
from kvplan.base.units import fmt_unit
from kvplan.model import expected as ex
from kvplan.model import load
from kvplan.model import roofline as rf
from kvplan.model.footprint import KvFactors, fragmentation
from kvplan.model.pools.vllm import batched_tier, default_max_seqs
from kvplan.model.scenario import Lengths, Scenario
from kvplan.planner.plan import Constraint, LoadFigures, Plan, Suggestion, Unmet


def default_chunk(memory: float, device_id: str) -> tuple[int, str]:
    """The prefill chunk, tokens per engine iteration, when `pin { max_batched_tokens }` does not give it: the
    --max-num-batched-tokens `kvplan emit` writes for vLLM by default (vLLM 0.33.0's own default for `vllm serve`,
    vllm/engine/arg_utils.py:2955-3005; kvplan.model.pools.vllm.batched_tier):
    16,384 from 160 GiB, 8,192 from 70 GiB (not A100), else 2,048. SGLang's --chunked-prefill-size is the same
    from 60 GiB up. vLLM's budget also holds the iteration's decode tokens; the load model gives it all to the chunk."""
    n, gpus, _ = batched_tier(memory, device_id)
    return n, f"vLLM's default --max-num-batched-tokens on {gpus}"


def max_seqs(sc: Scenario) -> Value:
    """The engine's cap on running requests (the load model queues a closed loop's clients above it): assumed,
    vLLM's default (default_max_seqs)."""
    n, why = default_max_seqs(sc.device.memory, sc.device.id)
    return assumed(float(n), "sequences", f"default: the engine runs at most {n:,} requests at once, {why} "
                   "(docs/service.md, Scheduling limits)")


#: Rounds of plan → load model → batch before the batch is taken as settled (each plan is made at the batch the
#: previous one's load model gives; it settles in two or three where the chosen layout does not change).
MAX_ROUNDS = 8


def chunk(sc: Scenario) -> Value:
    """The prefill chunk of the scenario: the pinned max_batched_tokens, else the assumed default."""
    pin = sc.pinned.max_batched_tokens
    if pin is not None:
        return derived(float(pin), "tokens", "pin max_batched_tokens: the engine's prefill chunk")
    n, why = default_chunk(sc.device.memory, sc.device.id)
    return assumed(float(n), "tokens", f"default: prefill chunk {n:,} tokens per iteration, {why} (pin "
                   "max_batched_tokens to set it; docs/service.md)")


def _inputs(sc: Scenario) -> tuple[float, Lengths, Lengths]:
    """(rate, inputs, outputs) of a request workload; the rate is 0 for a closed loop (its throughput is the load
    model's)."""
    assert sc.requests and sc.inputs is not None and sc.outputs is not None
    return sc.rate or 0.0, sc.inputs, sc.outputs


def lengths_text(n_in: Lengths, n_out: Lengths) -> str:
    """`n_in = 4,096, n_out = 512 tokens`, or with a uniform length `n_in uniform 2,000–6,000 (mean 4,000)`."""
    def one(name: str, n: Lengths) -> str:
        return f"{name} = {n.text()}" if n.fixed else f"{name} {n.text()}"
    return f"{one('n_in', n_in)}, {one('n_out', n_out)} tokens"


def solve(p: Plan, on: str = "expected") -> tuple[load.Load, float, float, Value]:
    """The load model on the plan's layout: (load, KV bytes of one sequence at the mean context, the batch limit
    the memory allows at it, the chunk). The rate is split evenly over pin.replicas. `on` = "bound" runs it on
    the bound step (every efficiency 1, no fixed cost: Factors.perfect), as `--slo-on bound` checks the SLOs."""
    cfg, f, link, sv, per_seq, limit, ch = _model_inputs(p, on)
    return load.solve(cfg, f, link, sv), per_seq, limit, ch


def _model_inputs(p: Plan, on: str) -> tuple[rf.Config, ex.Factors, Optional[float], load.Service, float, float,
                                             Value]:
    sc = p.scenario
    rate, n_in, n_out = _inputs(sc)
    frag = float(fragmentation(sc.context, p.block_size))
    cfg = rf.Config(sc.model, sc.device, n_devices=p.n_devices, tp=p.tp, w_p=sc.weights.width, w_kv=p.kv_width,
                    factors=KvFactors(retention=p.retention, sharing=p.sharing, frag=frag), placement=p.placement,
                    attention_dp=sc.attention_dp,
                    expert_parallel=sc.expert_parallel)
    per_seq = p.metrics.kv_bytes.value / sc.batch
    free = p.metrics.memory_usable.value - p.metrics.weight_bytes.value
    limit = max(free, 0.0) / per_seq if per_seq > 0 else math.inf
    ch = chunk(sc)
    f = ex.deployment_factors(sc.device, p.kv_dtype.id, sc.engine, sc.calibration)
    sv = load.Service(rate / sc.replicas, n_in.hi, n_out.hi, int(ch.value), batch_limit=limit, arrivals="poisson",
                      in_lo=None if n_in.fixed else n_in.lo, out_lo=None if n_out.fixed else n_out.lo,
                      clients=None if sc.concurrency is None else sc.concurrency / sc.replicas,
                      max_seqs=max_seqs(sc).value, decode_only=sc.pool == "decode",
                      prompts=None if sc.concurrency is None or sc.prompts is None else sc.prompts / sc.replicas)
    return cfg, f.perfect() if on == "bound" else f, ex.link_bandwidth(sc.device), sv, per_seq, limit, ch


def prompt_bound(p: Plan) -> Value:
    """The lower bound of every request's TTFT: the shortest prompt prefilled alone, at π and β with no overhead
    (the plan's own `ttft` bound is of a prompt of its whole context, n_in + n_out for a closed loop)."""
    cfg, f, _, sv, _, _, _ = _model_inputs(p, "bound")
    n = sv.inputs.lo
    t = float(ex.expected_ttft(cfg, float(n), f, None).ttft)
    return derived(t, "s", f"TTFT ≥ max(F_prefill/(tp·π), W/(tp·β)): one prompt of the input alone, {n:,} tokens "
                   "(the shortest; docs/expected.md)")


def batch_for(ld: load.Load, limit: float) -> int:
    """The batch a plan of the load is made at: the running sequences, rounded up; past saturation, the most the
    steady state could run (the memory's limit where that binds)."""
    if not ld.saturated:
        return int(min(max(1, math.ceil(ld.running - 1e-9)), MAX_BATCH))
    most = min(math.floor(limit) if math.isfinite(limit) else MAX_BATCH, math.ceil(ld.max_running - 1e-9))
    return int(min(max(1, most), MAX_BATCH))


def figures(p: Plan, ld: load.Load, per_seq: float, limit: float, ch: Value) -> LoadFigures:
    """The service figures of a plan made at the load's batch, each derived and naming what it is from."""
    sc = p.scenario
    if sc.concurrency is not None:
        return _closed_figures(p, ld, per_seq, limit, ch)
    rate, n_in, n_out = _inputs(sc)
    per = "" if sc.replicas == 1 else f" per replica ({sc.replicas} replicas share the rate)"
    src = f"λ = {rate:g}/s{per}, {lengths_text(n_in, n_out)}, chunk {int(ch.value):,} tokens"

    def d(x: float, unit: str, what: str) -> Optional[Value]:
        return None if ld.saturated else derived(x, unit, f"{what} (docs/service.md): {src}")

    fixed = n_in.fixed and n_out.fixed  # fixed lengths keep the formulas as written before distributions
    itl_f = "ITL = T_expected(N_d, n_in + n_out/2) / (1 − λ·P)" if fixed else "ITL = T_expected(N_d, s̄) / (1 − λ·E[P])"
    ttft_f = ("TTFT = (1 − ρ)·T/2 + ρ·S/(2(1 − ρ)) + S, S = k·T + P (M/D/1 prefill queue)" if fixed else
              "TTFT = (1 − ρ)·T/2 + λ·E[S²]/(2(1 − ρ)) + E[S], S = k(n_in)·T + P(n_in) (M/G/1 prefill queue)")
    if sc.pool == "decode":  # disaggregated serving's decode pool: the prompts were prefilled elsewhere (P = 0)
        itl_f = "ITL = T_expected(N_d, s̄), a decode pool: no prefill chunk in its steps"
        ttft_f = "T/2: a decode pool's wait for the iteration in progress"

    return LoadFigures(
        rate=Value(rate, "req/s", Evidence.ASSUMED, "workload.rate as declared (an input)"),
        batch=derived(float(sc.batch), "sequences", "the plan's batch: ⌈N_d + ρ⌉, the running sequences"
                      + (", past saturation the most the steady state runs" if ld.saturated else "")
                      + f" (docs/service.md): {src}"),
        concurrency=d(ld.concurrency, "requests", "N = λ·(TTFT + (n_out − 1)·ITL), Little's law" if fixed else
                      "N = λ·(TTFT + E[n_out − 1]·ITL), Little's law"),
        running=d(ld.running, "sequences", "N_d + ρ: generating + prefilling, the plan's batch rounded up"),
        itl=d(ld.itl, "s", itl_f),
        ttft=d(ld.ttft, "s", ttft_f),
        prefill_wait=d(ld.prefill_wait, "s", "ρ·S/(2(1 − ρ)), Poisson arrivals" if fixed else
                       "λ·E[S²]/(2(1 − ρ)), Poisson arrivals (Pollaczek–Khinchine)"),
        prefill_utilization=d(ld.prefill_utilization, "%", "ρ = λ·S" if fixed else "ρ = λ·E[S]"),
        saturation_rate=derived(ld.saturation_rate * sc.replicas, "req/s",
                                f"the largest rate with a steady state, set by {_binding(ld.binding)} "
                                f"(docs/service.md): {src}"),
        batch_limit=derived(limit, "sequences", "(memory usable − weights) / KV of one sequence at the mean "
                                                "context"),
        mean_context=derived(ld.mean_context, "tokens", "n_in + n_out/2: a generating sequence's mean" if fixed else
                             "s̄ = E[n_in] + E[n_out·(n_out − 1)]/(2·E[n_out − 1]): a generating sequence's "
                             f"token-weighted mean, {lengths_text(n_in, n_out)}"),
        tail_context=derived(ld.tail_context, "tokens", "n_in + n_out: a sequence's last token" if fixed else
                             "max n_in + max n_out: the longest sequence's last token"),
        kv_bytes_mean=d(ld.running * per_seq, "B", "running sequences × KV of one at the mean context"),
        kv_bytes_tail=d(ld.running * per_seq * ld.tail_context / ld.mean_context, "B",
                        "running sequences × KV of one at the tail context (all at their last token)"),
        chunk=ch, saturated=ld.saturated, binding=ld.binding, prefill_time=ld.chunk_time,
    )


def _closed_figures(p: Plan, ld: load.Load, per_seq: float, limit: float, ch: Value) -> LoadFigures:
    """A closed loop's figures (kvplan.model.load.closed_loop, SPEC §13): the throughput, mean TTFT and mean TPOT
    as the benchmark tools print them, the decode batch the plan is sized to, each derived and naming its formula."""
    sc = p.scenario
    assert sc.concurrency is not None and ld.throughput is not None
    _, n_in, n_out = _inputs(sc)
    r = sc.replicas
    per = "" if r == 1 else f" per replica ({r} replicas share the clients, C/{r} each)"
    src = f"C = {sc.concurrency:,} clients{per}, {lengths_text(n_in, n_out)}, chunk {int(ch.value):,} tokens"

    def d(x: float, unit: str, what: str) -> Value:
        return derived(x, unit, f"{what} (closed loop, docs/service.md): {src}")

    x = ld.throughput * r
    return LoadFigures(
        rate=d(x, "req/s", "X = C / (TTFT + (n_out − 1)·TPOT), the loop's throughput"),
        batch=d(float(sc.batch), "sequences", "the plan's batch: ⌈N_d + ρ⌉, the running sequences"),
        concurrency=Value(float(sc.concurrency), "requests", Evidence.ASSUMED,
                          "workload.concurrency as declared (an input): the clients of the closed loop"),
        running=d(ld.running, "sequences", "N_d + ρ: generating + prefilling, the plan's batch rounded up"),
        itl=d(ld.itl, "s", "ITL = T_expected(N_d, s̄) / (1 − X·P), the mean gap between tokens"),
        ttft=d(ld.ttft, "s", "mean TTFT = R, the prefill slot's response (mean value analysis, queueing "
                             "included): vllm bench serve's mean_ttft_ms"),
        prefill_wait=d(ld.prefill_wait, "s", "R − S: the wait for the prefill slot"),
        prefill_utilization=d(ld.prefill_utilization, "%", "ρ = X·S"),
        saturation_rate=derived(ld.saturation_rate * r, "req/s", f"the largest open-loop rate with a steady "
                                f"state, set by {_binding(ld.binding)} (docs/service.md): {src}"),
        batch_limit=derived(limit, "sequences", "(memory usable − weights) / KV of one sequence at the mean "
                                                "context"),
        mean_context=derived(ld.mean_context, "tokens",
                             f"s̄: a generating sequence's mean, {lengths_text(n_in, n_out)}"),
        tail_context=derived(ld.tail_context, "tokens", "n_in + n_out: the longest sequence's last token"),
        kv_bytes_mean=d(ld.running * per_seq, "B", "running sequences × KV of one at the mean context"),
        kv_bytes_tail=d(ld.running * per_seq * ld.tail_context / ld.mean_context, "B",
                        "running sequences × KV of one at the tail context (all at their last token)"),
        chunk=ch, saturated=False, binding=ld.binding, prefill_time=ld.chunk_time,
        tpot=d(ld.itl, "s", "mean TPOT = (E2E − TTFT)/(n_out − 1) = ITL: vllm bench serve's mean_tpot_ms"),
        output_rate=d(x * n_out.mean, "tok/s", "X · E[n_out], output tokens per second"),
    )


def _binding(binding: str) -> str:
    return {"prefill": "the prefill slot (every iteration carries a chunk)",
            "decode": "the decode stage (the step grows faster than the batch)",
            "memory": "the memory (the running sequences' KV fills it)"}[binding]


def unmet(fig: LoadFigures) -> Optional[Unmet]:
    """Past saturation: what is unmet, and by how much."""
    if not fig.saturated:
        return None
    over = fig.rate.value - fig.saturation_rate.value
    return Unmet(Constraint.RATE, f"the rate {fig.rate.human} is past the saturation rate {fig.saturation_rate.human} "
                         f"({fig.saturation_rate.evidence.value}), set by {_binding(fig.binding)}: the queue of "
                         "requests grows without bound and there is no steady ITL or TTFT; the plan is sized at the "
                         "most the steady state runs",
                 derived(over, "req/s", "rate − saturation rate"),
                 (Suggestion("lower the rate, or add devices or replicas (pin replicas)"),))  # verified: the planner's


def has_slos(sc: Scenario) -> bool:
    """Whether the request workload sets a service SLO (ttft, itl or rate: docs/service.md)."""
    return sc.requests and any(x is not None for x in (sc.slo_ttft, sc.slo_itl, sc.slo_rate))


def _slo_text(sc: Scenario) -> str:
    said = [f"{k} <= {fmt_unit(v, 's')}" for k, v in (("ttft", sc.slo_ttft), ("itl", sc.slo_itl)) if v is not None]
    return ", ".join(said)


def with_goodput(p: Plan, fig: LoadFigures) -> LoadFigures:
    """The figures with the plan's goodput (kvplan.model.load.goodput) on the figures the SLOs are checked
    against (`--slo-on`): the largest rate at which mean TTFT and ITL meet slo.ttft and slo.itl. Absent when the
    spec sets neither (then the saturation rate is the most the plan carries, with no latency promised)."""
    sc = p.scenario
    if sc.slo_ttft is None and sc.slo_itl is None or sc.concurrency is not None:  # a closed loop: its X is checked
        return fig
    cfg, f, link, sv, _, _, ch = _model_inputs(p, sc.slo_on)
    g = load.goodput(cfg, f, link, sv, sc.slo_ttft, sc.slo_itl)
    per = "" if sc.replicas == 1 else f", × {sc.replicas} replicas"
    bound = {"saturation": "both hold up to the saturation rate (the goodput is that supremum)",
             "ttft": "the TTFT SLO binds it", "itl": "the ITL SLO binds it"}[g.binding]
    src = (f"the largest λ below saturation at which {_slo_text(sc)} hold on the {sc.slo_on} step ({bound}; "
           f"load model, docs/service.md): {lengths_text(sv.inputs, sv.outputs)}, chunk "
           f"{int(ch.value):,} tokens{per}")
    return attrs.evolve(fig, goodput=derived(g.rate * sc.replicas, "req/s", src), goodput_slo=g.binding)


def meets(sc: Scenario, fig: LoadFigures, bound: Optional[load.Load] = None) -> bool:
    """Whether the service figures meet the scenario's service SLOs (and have a steady state)."""
    return not fig.saturated and not service_unmet(sc, fig, bound, suggest=())


def service_unmet(sc: Scenario, fig: LoadFigures, bound: Optional[load.Load],
                  suggest: tuple[Suggestion, ...]) -> tuple[Unmet, ...]:
    """Each service SLO the plan misses at the declared rate (mean TTFT, ITL on the `--slo-on` figures, printed
    beside the other) and a goodput below slo.rate; each with the suggestions given (verified by the caller).
    `bound` is the load on the bound step (for --slo-on bound and the figure printed beside the expected one)."""
    if not sc.requests or fig.saturated:
        return ()
    out = []
    on_bound = sc.slo_on == "bound" and bound is not None and not bound.saturated
    for key, name, slo, shown in ((Constraint.TTFT, "TTFT", sc.slo_ttft, fig.ttft),
                                  (Constraint.ITL, "ITL", sc.slo_itl, fig.itl)):
        if slo is None or shown is None:
            continue
        other = None if bound is None or bound.saturated else float(getattr(bound, key.value))
        got, alt = (other, shown.value) if on_bound and other is not None else (shown.value, other)
        on, alt_name = ("bound", "expected") if on_bound else ("expected", "bound")
        if got <= slo:
            continue
        beside = "" if alt is None else f"; {alt_name} {fmt_unit(alt, 's')}"
        out.append(Unmet(key, f"{name} under load {fmt_unit(got, 's')} at {fig.rate.human} ({on}{beside}) exceeds "
                         f"the SLO {fmt_unit(slo, 's')} by {fmt_unit(got - slo, 's')}",
                         derived(got - slo, "s", f"plan {name} at the declared rate ({on}, load model) − SLO"),
                         suggest))
    if sc.slo_rate is not None:
        good = fig.rate if sc.concurrency is not None else fig.goodput if fig.goodput is not None else (
            fig.saturation_rate)
        if good.value < sc.slo_rate:
            what = ("closed loop's throughput" if sc.concurrency is not None else "goodput" if fig.goodput is not None
                    else "saturation rate (no ttft or itl SLO: the most it carries)")
            out.append(Unmet(Constraint.GOODPUT, f"the {what} {good.human} is below the SLO rate >= "
                             f"{fmt_unit(sc.slo_rate, 'req/s')} by {fmt_unit(sc.slo_rate - good.value, 'req/s')}",
                             derived(sc.slo_rate - good.value, "req/s", f"SLO rate − plan {what.split(' (')[0]}"),
                             suggest))
    return tuple(out)


__all__ = ["LoadFigures", "MAX_ROUNDS", "batch_for", "chunk", "default_chunk", "figures",
           "has_slos", "max_seqs", "meets", "prompt_bound", "service_unmet", "solve", "unmet", "with_goodput"]
