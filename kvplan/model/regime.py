"""The regime map at one deployment point (SPEC §3–6), as evidence-carrying Values.

This is what `kvplan map` prints and what the planner starts from: κ, weight
bytes, s*, s_cap, β_eff per placement, intensity against the ridge, the step
time bound, the regime and its margins, and the same map for each KV dtype.
"""

from __future__ import annotations

import math
from typing import Optional, Sequence

import attrs
import numpy as np

from kvplan import catalog
from kvplan.base.evidence import Value, assumed, derived, reported
from kvplan.base.limits import MAX_DEVICES
from kvplan.base.records import record
from kvplan.base.units import fmt_unit
from kvplan.catalog import DTYPES, Device, Dtype, Model
from kvplan.model import expected as ex
from kvplan.model import memory
from kvplan.model import roofline as rf
from kvplan.model.footprint import kappa, kv_bytes_per_seq
from kvplan.model.profile import Profile


def paper_model() -> Model:
    """Llama-3-70B with the paper's round parameter count (the map marks where the paper's figures are; the
    paper's tables, kvplan.model.paper, use it too)."""
    m = catalog.get_model("llama-3-70b")
    return attrs.evolve(m, params=70e9, params_active=70e9, source="paper: P = 70e9 (140 GB BF16)")

DEFAULT_KV_DTYPES = ("bf16", "fp8", "int4", "int2")


@record
class DtypeRow:
    """The map for one KV dtype at the same point."""

    dtype: str
    kappa: Value
    s_star: Value
    s_cap: Value
    kv_bytes: Value
    regime: str
    step_time: Value
    speedup: Value
    step_time_expected: Optional[Value] = None   # at this KV dtype's factors (docs/expected.md)


@record
class RegimeMap:
    model: Model
    device: Device
    n_devices: int
    tp: int
    weights: Dtype
    kv: Dtype
    batch: int
    context: int
    placement: str
    inputs: tuple[tuple[str, Value], ...]
    results: tuple[tuple[str, Value], ...]
    bandwidth: tuple[tuple[str, Value], ...]
    regime: str
    notes: tuple[str, ...]
    dtypes: tuple[DtypeRow, ...]
    #: The factors of the expected step and TTFT (kvplan.model.expected), by name.
    factors: tuple[tuple[str, Value], ...] = ()

    def result(self, key: str) -> Value:
        return dict(self.results)[key]


def _scalar(x: object) -> float:
    return float(np.asarray(x))


#: What kvplan prints instead of a capacity crossover when the weights leave no room for KV.
WEIGHTS_EXCEED = "none (weights alone exceed memory)"


def distinct_bytes(a: float, b: float) -> tuple[str, str]:
    """Two byte counts that differ, printed so that they read differently: fmt_unit's four
    significant digits, or in the larger one's unit with as many decimals (the same for both) as it takes."""
    fa, fb = fmt_unit(a, "B"), fmt_unit(b, "B")
    if fa != fb or a == b:
        return fa, fb
    unit, scale = next(((u, f) for u, f in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("KB", 1e3))
                        if max(abs(a), abs(b)) >= f), ("B", 1.0))
    for digits in range(1, 16):  # decimals, the same for both
        fa, fb = f"{a / scale:.{digits}f} {unit}", f"{b / scale:.{digits}f} {unit}"
        if fa != fb:
            break
    return fa, fb


def weights_exceed_note(weights: float, capacity: float, cfg: "rf.Config | None" = None) -> str:
    """Why there is no capacity crossover, with the shortfall, never two equal-looking figures joined
    by "exceed": the weights exceed N·C, fill it exactly, or (with `cfg`) the deployment holds them
    in total but its most loaded device does not (a pipeline stage with more layers than its memory)."""
    if weights > capacity:
        w_text, c_text = distinct_bytes(weights, capacity)
        return (f"none: the weights alone ({w_text}) exceed the memory ({c_text}) "
                f"by {fmt_unit(weights - capacity, 'B')}")
    if weights == capacity:
        return f"none: the weights alone fill the memory ({fmt_unit(capacity, 'B')}) exactly"
    if cfg is not None:
        held = float(memory.weights_per_device(cfg.model, cfg.w_p, cfg.tp, cfg.pp))
        usable = cfg.device_usable
        if held >= usable:
            layers = int(memory.stage_layers(cfg.model, cfg.pp))
            h_text, u_text = distinct_bytes(held, usable)
            return (f"none: the most loaded device holds {h_text} of weights ({layers} of "
                    f"{cfg.model.n_layers} layers, 1/{cfg.tp} of the heads), "
                    + (f"{fmt_unit(held - usable, 'B')} more than its {u_text}"
                       if held > usable else f"all of its {fmt_unit(usable, 'B')}"))
    return f"none: the weights ({fmt_unit(weights, 'B')}) leave no room for KV on the most loaded device"


def cap_value(s_cap: float, source: str, weights: float, capacity: float,
              cfg: "rf.Config | None" = None) -> Value:
    """s_cap as a Value: where the weights alone fill the memory (all of it, or the most loaded
    device's) there is no capacity crossover, and no negative number is printed (the raw figure
    stays in `value` for arithmetic)."""
    if s_cap > 0 and math.isfinite(s_cap):
        return derived(s_cap, "tokens", source)
    if s_cap > 0:  # +inf: nothing ever fills the memory (no KV per token)
        return attrs.evolve(derived(s_cap, "tokens", f"{source}; none: KV never fills the memory"),
                            absent="none (KV never fills memory)")
    return attrs.evolve(derived(s_cap, "tokens", f"{source}; {weights_exceed_note(weights, capacity, cfg)}"),
                        absent=WEIGHTS_EXCEED)


def over_cap_value(context: float, s_cap: float, weights: float, capacity: float,
                   cfg: "rf.Config | None" = None) -> Value:
    """s / s_cap, never an infinite or negative ratio: absent when the weights alone fill the memory."""
    if s_cap > 0 and math.isfinite(s_cap):
        return derived(context / s_cap, "x", "s / s_cap")
    if s_cap > 0:
        return attrs.evolve(derived(0.0, "x", "s / s_cap; none: KV never fills the memory"),
                            absent="none (KV never fills memory)")
    return attrs.evolve(derived(float("inf"), "x", f"s / s_cap; {weights_exceed_note(weights, capacity, cfg)}"),
                        absent=WEIGHTS_EXCEED)


def paper_params_note(model: Model) -> str:
    """Where `kvplan tables` uses the paper's round parameter count for this model, say so and by
    how much the two s* differ (s* is proportional to P)."""

    paper = paper_model()
    if model.id != paper.id or model.params == paper.params:
        return ""
    diff = model.params / paper.params - 1
    return (f"params {fmt_unit(model.params, '1')} are counted from the model's config.json; `kvplan tables` "
            f"uses the paper's round P = {paper.params / 1e9:g}e9 for this model, so its s* is {abs(diff):.2%} "
            f"{'lower' if diff > 0 else 'higher'} than here and its s_cap {'higher' if diff > 0 else 'lower'}")


def devices_for_weights(model: Model, device: Device, w_p: float,
                        limit: int = MAX_DEVICES) -> Optional[int]:
    """The fewest devices, at most `limit`, that hold the weights P·w_p with room to spare (SPEC §5's
    s_cap > 0) in the layout the map draws (widest_tp, the rest pipeline stages): not only N·C > P·w_p
    but the most loaded device, whose stage holds ⌈L/pp⌉ layers, below its memory C. None where no
    count up to `limit` does (one layer's share on the widest split already fills a device)."""
    need = rf.weight_bytes_held(model, w_p)
    c = device.memory
    if not (math.isfinite(need) and c > 0):
        return 1
    widest = widest_tp(model, model.n_q)
    if need / (model.n_layers * widest) >= c:  # the least any device can hold: one layer, widest split
        return None
    n = max(1, math.ceil(need / c))
    while n <= limit:
        tp = widest_tp(model, n)
        if float(memory.kv_room(model, c, 0.0, w_p, tp, n // tp)) > 0:
            return n
        n += 1
    return None


def weights_unheld_note(model: Model, device: Device, w_p: float, limit: int = MAX_DEVICES) -> str:
    """Why no device count up to `limit` holds the weights: the least the most loaded device can hold."""
    widest = widest_tp(model, model.n_q)
    least = rf.weight_bytes_held(model, w_p) / (model.n_layers * widest)
    return (f"no count of {device.id} up to {limit:,} (the device limit) holds the weights "
            f"P·w_p = {fmt_unit(rf.weight_bytes_held(model, w_p), 'B')}; the most loaded device would hold at "
            f"least {fmt_unit(least, 'B')} of them (one of {model.n_layers} layers, 1/{widest} of the heads) "
            f"on {fmt_unit(device.memory, 'B')} of memory")


def widest_tp(model: Model, n: int) -> int:
    """The largest tensor-parallel size for n devices (kvplan.planner.search.tp_options' first), found
    among the divisors of the query heads so the work is bounded by the head count, not by n."""
    for t in range(min(n, model.n_q), 0, -1):
        if n % t == 0 and model.n_q % t == 0 and (model.kv_kind == "mla" or model.n_kv % t == 0
                                                   or t % model.n_kv == 0):
            return t
    return 1


def model_inputs(model: Model, device: Device, n_devices: int, batch: int, context: int,
                 weights: Dtype, kv: Dtype) -> list[tuple[str, Value]]:
    """The inputs a map rests on, each with its evidence class."""
    msrc = model.source or f"model catalog: {model.id}"
    dsrc = device.source or f"device catalog: {device.id}"
    return [
        ("params", reported(model.params, "1", msrc)),
        ("params_active", reported(model.params_active, "1", msrc)),
        ("layers", reported(model.n_layers, "1", msrc)),
        ("kv_heads", reported(model.n_kv, "1", msrc)),
        ("head_dim", reported(model.head_dim, "1", msrc)),
        ("memory", reported(device.memory, "B", dsrc)),
        ("bandwidth", reported(device.bandwidth, "B/s", dsrc)),
        ("compute", reported(device.compute, "FLOP/s", dsrc)),
        ("devices", assumed(n_devices, "1", "input")),
        ("batch", assumed(batch, "1", "input")),
        ("context", assumed(context, "tokens", "input")),
        ("weight_width", assumed(weights.width, "B", f"input: weights = {weights.id}") if model.weight_bytes is None
         else derived(weights.width, "B", f"weights = {weights.id}: the checkpoint's weight bytes / parameters "
                                          "(docs/weights.md)")),
        ("kv_width", assumed(kv.width, "B", f"input: kv dtype = {kv.id}")),
        *weight_bytes_inputs(model),
    ]


def weight_bytes_inputs(model: Model) -> list[tuple[str, Value]]:
    """The checkpoint's exact weight bytes, when the model carries them, with the files they came from."""
    wb = model.weight_bytes
    if wb is None:
        return []
    ev = {"reported": reported, "derived": derived}.get(wb.evidence, assumed)
    return [("weight_bytes_held", ev(wb.held, "B", wb.source)),
            ("weight_bytes_checkpoint", ev(wb.checkpoint, "B", wb.source))]


def _results(cfg: rf.Config, batch: int, context: int, w_held: float, sstar: float,
             scap: float) -> list[tuple[str, Value]]:
    """The map's figures at (batch, context): bytes, the crossovers, intensity, step time, rates."""
    m, d = cfg.model, cfg.device
    k = kappa(m, cfg.w_kv)
    w_read = _scalar(rf.weight_bytes_read(m, batch, cfg.w_p))
    kv_read = _scalar(rf.kv_bytes_read(cfg, batch, context))
    kv_held = _scalar(rf.kv_bytes_stored(cfg, batch, context))
    t = rf.step_time(cfg, batch, context)
    flops = _scalar(rf.decode_flops(m, batch, context))
    inten = _scalar(rf.intensity(cfg, batch, context))
    short, long = rf.intensity_limits(m, batch, cfg.w_p, cfg.w_kv)
    windows = "" if m.all_full else " (windows applied per layer)"
    return [
        ("kappa", derived(k, "B", f"κ = {'L·(d_c+d_r)·w_kv' if m.kv_kind == 'mla' else '2·L·n_kv·d_h·w_kv'} "
                                  "(docs/model.md §2), per token")),
        ("kv_bytes_per_sequence", derived(_scalar(kv_bytes_per_seq(m, context, cfg.w_kv)), "B",
                                          f"B_kv(s) = κ·s{windows} (docs/model.md §2)")),
        ("weight_bytes", derived(w_held, "B", "P·w_p (docs/model.md §4)" if m.weight_bytes is None
                                 else "the checkpoint's weight bytes (docs/weights.md)")),
        ("weight_bytes_read", derived(w_read, "B", "weights read per step" + (
            ": non-routed + E(1−(1−k/E)^b) routed experts, uniform routing assumed (docs/model.md §4)"
            if m.is_moe else " = P·w_p (docs/model.md §4)"))),
        ("kv_bytes_read", derived(kv_read, "B", "b·B_kv(s)·r/σ per step (docs/model.md §4)")),
        ("kv_bytes_stored", derived(kv_held, "B", "b·B_kv(s)·r(1+φ)/σ (docs/model.md §3)")),
        ("memory_needed", derived(w_held + kv_held, "B", "P·w_p + b·B_kv(s)")),
        ("capacity", derived(cfg.capacity, "B", "N·C (docs/model.md §5)")),
        ("s_star", derived(sstar, "tokens", f"s*(b) = P·w_p/(b·κ){windows} (docs/model.md §5)")),
        ("s_cap", cap_value(scap, f"s_cap(b) = (N·C − P·w_p)/(b·κ){windows} (docs/model.md §5)", w_held,
                            cfg.capacity, cfg)),
        ("context_over_s_star", derived(context / sstar if np.isfinite(sstar) and sstar > 0 else 0.0, "x", "s / s*")),
        ("context_over_s_cap", over_cap_value(context, scap, w_held, cfg.capacity, cfg)),
        ("flops_per_step", derived(flops, "FLOP", "F = 2·P_active·b + 4·b·s·L·n_q·d_h (docs/model.md §4)")),
        ("intensity", derived(inten, "FLOP/B", "I = F/M (docs/model.md §4)")),
        ("intensity_short_limit", derived(_scalar(short), "FLOP/B",
                                          "2·b·P_active / weight bytes read (= 2b/w_p dense; docs/model.md §4)")),
        ("intensity_long_limit", derived(long, "FLOP/B", "2g/w_kv (docs/model.md §4)")),
        ("ridge", derived(d.ridge, "FLOP/B", "π/β")),
        ("step_time_weights", derived(_scalar(t.weights), "s", "weight bytes / (tp·β_eff striped)")),
        ("step_time_kv", derived(_scalar(t.kv), "s", f"KV bytes / (tp·β_eff {cfg.placement})")),
        ("step_time_compute", derived(_scalar(t.compute), "s", "F / (tp·π)")),
        ("step_time", derived(_scalar(t.step), "s", "T_step ≥ max(M/β_eff, F/π) (docs/model.md §4)")),
        ("throughput", derived(batch / _scalar(t.step), "tok/s", "b / T_step")),
        ("ceiling_rate", derived(_scalar(rf.ceiling_rate(cfg, batch)), "tokens/s", "R_∞ = β_eff/κ (docs/model.md §7)")),
    ]


def _bandwidth(d: Device, batch: int) -> tuple[list[tuple[str, Value]], list[str]]:
    """β_eff under each placement, and a note for each that is an upper bound."""
    bandwidth = []
    notes = []
    for placement in rf.PLACEMENTS:
        beta, upper = rf.beta_eff(d, placement, batch)
        src = {"pinned": "β/n_part (docs/model.md §7)", "striped": "min(β, β_link·n/(n−1)) (docs/model.md §7)",
               "affinity": "(b/ceil(b/n_part))·β/n_part (docs/model.md §7)"}[placement]
        if upper:
            src += "; fabric bandwidth unpublished: upper bound"
            notes.append(f"striped bandwidth on {d.id} is an upper bound: die-to-die fabric bandwidth is unpublished")
        bandwidth.append((placement, derived(_scalar(beta), "B/s", src)))
    return bandwidth, notes


def _dtype_rows(cfg: rf.Config, batch: int, context: int, kv_dtypes: Sequence[str], w_held: float,
                engine: str, profile: Optional[Profile]) -> list[DtypeRow]:
    """The map again at each KV width of `kv_dtypes`, with its speed-up over bf16 KV and its expected step at
    that dtype's factors (its kernel's kv_efficiency)."""
    m = cfg.model
    rows = []
    base_cfg = attrs.evolve(cfg, w_kv=DTYPES["bf16"].width)
    base_t = _scalar(rf.step_time(base_cfg, batch, context).memory)
    for name in kv_dtypes:
        dt = DTYPES[name]
        c2 = attrs.evolve(cfg, w_kv=dt.width)
        ss = _scalar(rf.s_star(c2, batch))
        sc = _scalar(rf.s_cap(c2, batch))
        tt = rf.step_time(c2, batch, context)
        rows.append(DtypeRow(
            dtype=name,
            kappa=derived(kappa(m, dt.width), "B", "κ at this width"),
            s_star=derived(ss, "tokens", "s*(b) (docs/model.md §5)"),
            s_cap=cap_value(sc, "s_cap(b) (docs/model.md §5)", w_held, cfg.capacity, c2),
            kv_bytes=derived(_scalar(rf.kv_bytes_stored(c2, batch, context)), "B", "b·B_kv(s)"),
            regime=str(rf.regime(context, ss, sc)),
            step_time=derived(_scalar(tt.step), "s", "T_step lower bound"),
            speedup=derived(base_t / _scalar(tt.memory), "x", "S(c) = (W+K)/(W+K/c) vs bf16 KV (docs/model.md §6)"),
            step_time_expected=_expected_step(c2, batch, context, ex.deployment_factors(cfg.device, name, engine,
                                                                                          profile)),
        ))
    return rows


def _no_crossover_note(cfg: rf.Config, w_held: float) -> str:
    """Why the weights leave no room for KV, and the fewest devices that hold them."""
    m, d = cfg.model, cfg.device
    n_fit = devices_for_weights(m, d, cfg.w_p)
    why = weights_exceed_note(w_held, cfg.capacity, cfg).removeprefix("none: ")
    return f"no capacity crossover on {cfg.n_devices} × {d.id}: {why}; " + (
        f"{n_fit} devices are the fewest that hold them: --devices {n_fit}"
        + (f" --tp {widest_tp(m, n_fit)}" if widest_tp(m, n_fit) != n_fit else "") if n_fit is not None
        else weights_unheld_note(m, d, cfg.w_p))


def _factor_words(f: ex.Factors) -> str:
    """Each factor with its value and evidence, for an expected figure's source."""
    return ", ".join(f"{k} = {v.human} {v.evidence.value}" for k, v in f.items())


def expected_results(cfg: rf.Config, batch: int, context: int, f: ex.Factors) -> list[tuple[str, Value]]:
    """The expected step, its terms and the expected TTFT with its all-reduces (docs/expected.md), each derived, its
    source naming every factor with its evidence; the prompt of the TTFT is the workload's context, the all-reduces
    cross the slowest link the group spans (SPEC §12: the scale-up link inside a node, the scale-out link across
    nodes; none: their latency only, said so)."""
    link = ex.link_bandwidth(cfg.device)
    spanned = ex.spanned_link(cfg.device, cfg.tp, cfg.n_devices)
    link_words = (f"all-reduces over {spanned} at {fmt_unit(catalog.get_link(spanned).bandwidth, 'B/s')}"
                  + ("" if spanned == cfg.device.scaleup_link else
                     f", the group spanning {cfg.device.node}-device nodes")
                  if link and spanned else
                  f"{cfg.device.id} has no scale-up link in the catalog: the all-reduces' latency only, their bytes "
                  "not counted")
    if cfg.n_devices > cfg.tp:
        link_words += f"; {cfg.n_devices // cfg.tp - 1} pipeline transfers of b·hidden·2 B"
    words = f"{_factor_words(f)}; {link_words}" + (f"; profile {f.profile}" if f.profile else "")
    t = ex.expected_step(cfg, batch, context, f, link)
    ttft = ex.expected_ttft(cfg, context, f, link)
    return [
        ("step_time_expected", derived(_scalar(t.step), "s", "T = max(t_fixed + L·t_layer + W/(η_w·β_eff) + "
                                                       "K/(η_kv·β_eff) + T_comm, t_fixed + L·t_layer + F/(η_π·π)) "
                                                       f"(docs/expected.md): {words}")),
        ("step_time_expected_comm", derived(_scalar(t.comm), "s", f"T_comm: 2 all-reduces per layer ({link_words})")),
        ("throughput_expected", derived(batch / _scalar(t.step), "tok/s", "b / T_expected")),
        ("ttft_expected", derived(_scalar(ttft.ttft), "s", "max(F_prefill/(tp·η_π·π), W/(tp·η_w·β)) + T_comm + t_fixed "
                                                    "+ L·t_layer, one prompt of the workload's context, "
                                                    f"{context:,} tokens "
                                                    f"(docs/expected.md): {words}")),
        ("ttft_expected_comm", derived(_scalar(ttft.comm), "s", f"the TTFT's T_comm: 2 all-reduces per layer over the "
                                                          f"prompt's {context:,} tokens ({link_words})")),
    ]


def _expected_step(cfg: rf.Config, batch: int, context: int, f: ex.Factors) -> Value:
    """The expected step alone, at factors `f` (a row of the by-KV-dtype table)."""
    step = _scalar(ex.expected_step(cfg, batch, context, f, ex.link_bandwidth(cfg.device)).step)
    return derived(step, "s", f"T_expected (docs/expected.md): {_factor_words(f)}")


def regime_map(cfg: rf.Config, batch: int, context: int, *, weights: Dtype, kv: Dtype,
               kv_dtypes: Sequence[str] = DEFAULT_KV_DTYPES, engine: str = "any",
               profile: Optional[Profile] = None) -> RegimeMap:
    """Evaluate the map at (batch, context) for `cfg`, and for each of `kv_dtypes`: the figures, the
    bandwidth of each placement, the rows per KV width, the notes; beside the bound the expected step and
    TTFT at the deployment's factors (kvplan's defaults for the device, KV dtype and `engine`, with the
    calibration `profile`'s fit laid over them)."""
    rf.check_batch_context(batch, context)
    m, d = cfg.model, cfg.device
    f = ex.deployment_factors(d, kv.id, engine, profile)
    w_held = rf.weight_bytes_held(m, cfg.w_p)
    sstar = _scalar(rf.s_star(cfg, batch))
    scap = _scalar(rf.s_cap(cfg, batch))
    results = _results(cfg, batch, context, w_held, sstar, scap) + expected_results(cfg, batch, context, f)
    bandwidth, notes = _bandwidth(d, batch)
    rows = _dtype_rows(cfg, batch, context, kv_dtypes, w_held, engine, profile)
    if not scap > 0:
        notes.append(_no_crossover_note(cfg, w_held))
    paper = paper_params_note(m)
    if paper:
        notes.append(paper)
    return RegimeMap(
        model=m, device=d, n_devices=cfg.n_devices, tp=cfg.tp, weights=weights, kv=kv, batch=batch,
        context=context, placement=cfg.placement,
        inputs=tuple(model_inputs(m, d, cfg.n_devices, batch, context, weights, kv)),
        results=tuple(results), bandwidth=tuple(bandwidth), regime=str(rf.regime(context, sstar, scap)),
        notes=tuple(notes), dtypes=tuple(rows), factors=f.items(),
    )
