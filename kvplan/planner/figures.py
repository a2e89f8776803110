"""The figures of a batch plan: the regime map before (R1) and after (R8), the chosen candidate's metrics and
byte factors, the tier from the reuse economics (SPEC §7), and the assumptions the plan was made with."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Optional

import attrs

from kvplan.base.evidence import Value, assumed, derived
from kvplan.base.records import record
from kvplan.base.units import fmt_unit
from kvplan.catalog import Model, get_link
from kvplan.model import expected as ex
from kvplan.model import memory, pools
from kvplan.model import roofline as rf
from kvplan.model.footprint import KvFactors, kappa, kv_bytes_per_seq
from kvplan.model.regime import cap_value, devices_for_weights, over_cap_value, weights_unheld_note, widest_tp
from kvplan.model.scenario import Scenario
from kvplan.model.tiering import DEFAULT_PREFILL_EFFICIENCY, fetch_time, prefill_time
from kvplan.planner.plan import ByteFactors, MapNumbers, Metrics, TierPlan
from kvplan.planner.space import DEFAULT_MIN_GAIN, DEFAULT_RESERVE, Setup, scalar
from kvplan.planner.suggest import Knobs

if TYPE_CHECKING:  # numpy.typing is for annotations only: its import costs the cold start
    pass


@record
class Map0:
    """R1: the regime map of the uncompressed deployment, on n0 devices (tp0 tensor-parallel)."""

    n0: int
    tp0: int
    base: rf.Config
    s_star: float
    s_cap: float
    regime: str
    n_fit: Optional[int]     # the fewest devices that hold the weights; None when no count up to the limit does


def regime_map(sc: Scenario) -> Map0:
    """R1: the regime of the uncompressed deployment on one device, or, where the weights alone
    exceed one device, on the fewest devices that hold them (all tensor-parallel where the heads
    allow): a map at a device count that cannot hold the weights has no capacity crossover."""
    m, d, w_p, b = sc.model, sc.device, sc.weights.width, sc.batch
    n_fit = devices_for_weights(m, d, w_p)
    n0 = 1 if n_fit is None else n_fit  # no count up to the device limit holds them: one device, said so
    tp0 = widest_tp(m, n0)
    base1 = rf.Config(m, d, n_devices=n0, tp=tp0, w_p=w_p, w_kv=2.0, reserve=0.0, attention_dp=sc.attention_dp,
                    expert_parallel=sc.expert_parallel)
    s_star0 = scalar(rf.s_star(base1, b))
    s_cap0 = scalar(rf.s_cap(base1, b))
    return Map0(n0, tp0, base1, s_star0, s_cap0, str(rf.regime(sc.context, s_star0, s_cap0)), n_fit)


def map_before(sc: Scenario, map0: Map0) -> MapNumbers:
    """R1's figures: κ, s*, s_cap and where the context sits, on the map's n0 devices."""
    m, d, s, n0 = sc.model, sc.device, sc.context, map0.n0
    w_held = rf.weight_bytes_held(m, sc.weights.width)
    where0 = _where0(map0)
    unheld = weights_unheld_note(m, d, sc.weights.width) if map0.n_fit is None else ""
    return MapNumbers(
        devices=derived(n0, "1", f"the fewest {d.id} whose memory N·C holds the weights P·w_p = "
                                 f"{fmt_unit(w_held, 'B')}: the map is drawn there") if n0 > 1 else
        attrs.evolve(derived(1, "1", f"none: {unheld}; the map is drawn on one device"),
                     absent="none up to the device limit") if unheld else None,
        kappa=derived(kappa(m, 2.0), "B", "κ at 16-bit (docs/model.md §2)"),
        s_star=derived(map0.s_star, "tokens", "s*(b) = P·w_p/(b·κ), 16-bit KV"
                       + (f", {where0}, KV replication per tp rank" if n0 > 1 else "") + " (docs/model.md §5)"),
        s_cap=cap_value(map0.s_cap, _cap_source(m, map0, where0), w_held, map0.base.capacity, map0.base),
        context_over_s_star=derived(s / map0.s_star if map0.s_star > 0 else 0.0, "x", "s / s*"),
        context_over_s_cap=over_cap_value(s, map0.s_cap, w_held, map0.base.capacity, map0.base),
    )


def _where0(map0: Map0) -> str:
    n0, tp0 = map0.n0, map0.tp0
    return "one device" if n0 == 1 else (f"N = {n0} (tp {tp0} × pp {n0 // tp0}, the layout `kvplan map --devices {n0} "
                                         f"--tp {tp0}` draws), the fewest devices that hold the weights")


def _cap_source(m: Model, map0: Map0, where0: str) -> str:
    """The R1 map's s_cap formula as the layout computes it: ρ copies over the tp ranks, and the most
    loaded device when the pipeline stages split the layers unevenly."""
    n0, pp0 = map0.n0, map0.n0 // map0.tp0
    rho0 = map0.base.kv_replication
    rho_txt = "·ρ" if rho0 != 1 else ""
    rho_note = f", ρ = {rho0:g} copies of each KV byte over the tp ranks" if rho0 != 1 else ""
    layers0 = int(memory.stage_layers(m, pp0))
    if n0 == 1:
        return "s_cap(b) = (C − P·w_p)/(b·κ), one device, 16-bit KV (docs/model.md §5)"
    if layers0 * pp0 == m.n_layers:
        return f"s_cap(b) = (N·C − P·w_p)/(b·κ{rho_txt}), {where0}{rho_note}, 16-bit KV (docs/model.md §5)"
    # the stages split the layers unevenly: the most loaded device fills first
    return (f"s_cap(b) = (C − W_d)·L·tp/(⌈L/pp⌉·b·κ{rho_txt}), W_d = P·w_p·⌈L/pp⌉/(L·tp) the weights of the "
            f"most loaded device ({layers0} of {m.n_layers} layers on one of {pp0} pipeline stages), "
            f"{where0}{rho_note}, 16-bit KV (docs/model.md §5)")


def map_after(sc: Scenario, cfg: rf.Config, w_kv: float, factors: KvFactors, s_star1: float, s_cap1: float,
               block: int) -> MapNumbers:
    """R8: the map re-evaluated for the chosen plan."""
    m, s, n = sc.model, sc.context, cfg.n_devices
    w_held = rf.weight_bytes_held(m, sc.weights.width)
    return MapNumbers(
        kappa=derived(kappa(m, w_kv) * factors.traffic, "B", "κ·r/σ read per token after the plan"),
        s_star=derived(s_star1, "tokens", "s* with the plan's width, r and σ (docs/model.md §5, rule R8)"),
        s_cap=cap_value(s_cap1, f"s_cap on {n} devices less the reserves, {block}-token pages, "
                                "the most loaded device full (R8)", w_held, cfg.capacity, cfg),
        context_over_s_star=derived(s / s_star1 if s_star1 > 0 else 0.0, "x", "s / s*"),
        context_over_s_cap=over_cap_value(s, s_cap1, w_held, cfg.capacity, cfg),
    )


def byte_factors(w_kv: float, r: float, s: int, setup: Setup) -> ByteFactors:
    phi, sigma, block = setup.phi, setup.sigma, setup.block
    return ByteFactors(
        quantization=derived(w_kv / 2.0, "x", f"w_q/w_kv = {w_kv:g}/2"),
        eviction=derived(r, "x", "retention r"),
        paging=derived(1.0 + phi, "x", f"1 + φ, {block}-token pages at {s} tokens"),
        prefix_caching=derived(1.0 / sigma, "x", "1/σ"),
        combined=derived(w_kv / 2.0 * r * (1.0 + phi) / sigma, "x", "(w_q/w_kv)·r·(1+φ)/σ (docs/model.md §3)"),
    )


def assumptions_of(sc: Scenario, knobs: Knobs, reserves: memory.Reserves, tier: TierPlan,
                 sigma: float) -> tuple[Value, ...]:
    """The spec's defaults, then the planner's assumed defaults and overrides this plan used."""
    m, d, b = sc.model, sc.device, sc.batch
    reserve, min_gain, eta = knobs.reserve, knobs.min_gain, knobs.eta
    activation, runtime = reserves.resolve(d.memory)
    assumptions = tuple(sc.assumptions) + (
        assumed(reserve, "1", "memory reserve per device for activations and runtime " + (
            "(default: vLLM's default 0.92 utilization leaves 8%)" if reserve == DEFAULT_RESERVE else "(--reserve)")
            + ("" if knobs.activation_reserve is not None else "; sizes the activation reserve")),
        activation, runtime,
        assumed(min_gain, "x", "a lossier option must shorten the expected step by this factor to be preferred"
                + (" (default)" if min_gain == DEFAULT_MIN_GAIN else " (--min-gain)")),
    )
    if m.is_moe:
        assumptions += (assumed(1.0, "1", "uniform expert routing for weight traffic (docs/model.md §4)"),)
    if tier.prefill_time is not None:
        assumptions += (assumed(eta, "1", "prefill efficiency η: recompute runs at η·π "
                                + ("(docs/model.md §9 default)" if eta == DEFAULT_PREFILL_EFFICIENCY
                                   else "(--prefill-efficiency)")),)
    if sigma > 1.0:
        assumptions += (assumed(1.0, "1", "shared prefix pages read once per step (cascade attention); "
                                          "without it σ saves capacity only"),)
    if rf.beta_eff(d, "striped", b)[1]:
        assumptions += (assumed(d.bandwidth, "B/s", f"{d.id} fabric unpublished: striped bandwidth taken "
                                                     "as the aggregate, an upper bound"),)
    return assumptions


def metrics_of(cfg: rf.Config, b: int, s: int, reserves: memory.Reserves, replicas: int,
             factors: ex.Factors) -> Metrics:
    t = rf.step_time(cfg, b, s)
    weights = rf.weight_bytes_held(cfg.model, cfg.w_p)
    kv = scalar(rf.kv_bytes_stored(cfg, b, s))
    step = scalar(t.step)
    link = ex.link_bandwidth(cfg.device)
    step_exp = scalar(ex.expected_step(cfg, b, s, factors, link).step)
    ttft = scalar(ex.expected_ttft(cfg, s, factors.perfect(), None).ttft)
    ttft_exp = scalar(ex.expected_ttft(cfg, s, factors, link).ttft)
    words = ", ".join(f"{k} = {v.human} {v.evidence.value}" for k, v in factors.items()) + (
        f"; calibration {factors.profile}" if factors.profile else "")  # which fit (engine = any: each line its own)
    per = "b / T" if replicas == 1 else f"replicas · b / T ({replicas} replicas, pin.replicas)"
    dev = memory.per_device(cfg.model, cfg.device.memory, w_p=cfg.w_p, kv_bytes=kv, tp=cfg.tp, pp=cfg.pp,
                            reserves=reserves)
    layers = int(memory.stage_layers(cfg.model, cfg.pp))
    return Metrics(
        step_time=derived(step, "s", "T_step ≥ max(M/β_eff, F/π) (docs/model.md §4)"),
        step_time_expected=derived(step_exp, "s", "max(t_fixed + L·t_layer + W/(η_w·β_eff) + K/(η_kv·β_eff) + T_comm, "
                                                  f"t_fixed + L·t_layer + F/(η_π·π)) (docs/expected.md): {words}"),
        throughput=derived(replicas * b / step, "tok/s", "b / T_step" if replicas == 1 else
                           f"replicas · b / T_step ({replicas} replicas, pin.replicas)"),
        throughput_expected=derived(replicas * b / step_exp, "tok/s", per.replace("T", "T_expected")),
        ttft=derived(ttft, "s", f"TTFT ≥ max(F_prefill/(tp·π), W/(tp·β)): one prompt of the context, {s:,} tokens "
                                "(docs/expected.md)"),
        ttft_expected=derived(ttft_exp, "s", "max(F_prefill/(tp·η_π·π), W/(tp·η_w·β)) + T_comm + t_fixed + "
                                             f"L·t_layer: one prompt of the context, {s:,} tokens (docs/expected.md): "
                                             f"{words}"),
        kv_bytes=derived(kv, "B", "b·B_kv(s)·(w_q/w_kv)·r·(1+φ)/σ (docs/model.md §3)"),
        weight_bytes=derived(weights, "B", "P·w_p" if cfg.model.weight_bytes is None
                             else "the checkpoint's weight bytes (docs/weights.md)"),
        memory_needed=derived(weights + kv, "B", "weights + KV"),
        memory_usable=derived(cfg.capacity, "B", "N·(C − reserves)"),
        device_need=derived(dev.needed, "B", f"most loaded device: weights + KV on {layers} of "
                                             f"{cfg.model.n_layers} layers, 1/{cfg.tp} of the heads, + reserves "
                                             "(kvplan.model.memory)"),
        headroom=derived(dev.headroom, "%", "1 − (weights + KV)/(C − reserves), most loaded device")
        if math.isfinite(dev.headroom) else
        attrs.evolve(derived(dev.headroom, "%", "1 − (weights + KV)/(C − reserves), most loaded device; none: "
                                                f"the reserves ({fmt_unit(dev.reserves, 'B')}) take all of the "
                                                f"device's {fmt_unit(dev.total, 'B')}"),
                     absent="none (reserves exceed device)"),
        kv_bytes_read=derived(scalar(rf.kv_bytes_read(cfg, b, s)), "B", "KV bytes read per step"),
    )


def engine_pool_figures(metrics: Metrics, fit: Optional[pools.Fit], engine: str, reserved: float,
                        total: float) -> Metrics:
    """`metrics` with the device need and headroom of the engine's own pool where the plan was fitted against it
    (kvplan.model.pools.<engine>: what the engine's file is written from), else as they are."""
    if fit is None:
        return metrics
    usable = total - reserved
    if usable <= 0:
        return attrs.evolve(metrics, device_need=derived(fit.needed, "B", _pool_source(fit, engine)))
    return attrs.evolve(
        metrics,
        device_need=derived(fit.needed, "B", _pool_source(fit, engine)),
        headroom=derived(1.0 - (fit.needed - reserved) / usable, "%",
                         f"1 − (weights + {engine}'s KV pool)/(C − reserves), most loaded device "
                         f"(kvplan.model.pools.{engine})"))


def _pool_source(fit: pools.Fit, engine: str) -> str:
    return (f"most loaded device: weights + {engine}'s KV pool for the plan ({fit.tokens:,} tokens, {fit.setting} "
            f"{fit.value}) + reserves (kvplan.model.pools.{engine})")


def tier_for(sc: Scenario, w_kv: float, factors: KvFactors, tp: int, eta: float) -> TierPlan:
    """Reuse economics (SPEC §7): keep reused contexts in host memory when fetching them
    over the host link beats recomputing them; never as a read inside a step (R6)."""
    pin = sc.pinned.tier
    if sc.reuse <= 0 and pin in (None, "none"):  # pinning what the planner would choose changes nothing
        return TierPlan("none", None, None, None, None)
    m, d = sc.model, sc.device
    link = get_link(d.host_link) if d.host_link else None
    t_pre = scalar(prefill_time(m, sc.context, d.compute * tp, eta))
    pre = derived(t_pre, "s", f"(2·P_active·s + 2·L·n_q·d_h·s²)/(η·π·tp), tp = {tp}, "
                              f"η = {eta:g} assumed (docs/model.md §9)")
    if link is None:
        return TierPlan("none" if pin is None else str(pin), None, None, pre, None)
    per_seq = scalar(kv_bytes_per_seq(m, sc.context, w_kv)) * factors.capacity
    t_fetch = scalar(fetch_time(m, sc.context, w_kv, link.bandwidth)) * factors.retention
    fetch = derived(t_fetch, "s",
                    f"B_kv(s)·r/({link.name} {fmt_unit(link.bandwidth, 'B/s')} per direction) (docs/model.md §9)")
    size = derived(sc.reuse * sc.batch * per_seq, "B", "reuse × batch × KV bytes per sequence")
    tier = "host" if t_fetch < t_pre else "none"
    if pin is not None:
        tier = str(pin)
    return TierPlan(tier, link.id, size if tier != "none" else None, pre, fetch)  # no tier holds no bytes
