"""Turn a chosen candidate into decision records: facts, the decision, numbers, evidence,
the options considered and why each was turned down. Computes nothing the search and the
core have not; it only arranges their numbers."""

from __future__ import annotations

from typing import Optional, Sequence

from kvplan.base.evidence import Value, derived
from kvplan.base.records import record
from kvplan.base.units import fmt_unit
from kvplan.catalog import DTYPE_ORDER
from kvplan.catalog.engines import block_sizes_for, default_block_for, get_engine, kv_refusal
from kvplan.catalog.quality import QualityResult, admissible, for_choice
from kvplan.model import roofline as rf
from kvplan.model.footprint import KvFactors, fragmentation
from kvplan.model.scenario import Pins
from kvplan.planner.plan import Constraint, Decision, Numbers, Option, Plan
from kvplan.planner.search import Evaluated, Space


@record
class Gain:
    """What cutting the KV bytes by `c` buys on the plan's layout (one computation for advise and lint).

    W is the weight bytes a step reads; K the KV bytes a step reads at 16-bit with every token kept,
    with the plan's prefix sharing, over the plan's devices and tensor-parallel ranks (each rank reads
    its copy of a replicated KV head or MLA latent); s* is the context where K reaches W on that layout.
    gain = S(c) = (W + K)/(W + K/c), the memory-bound speedup (SPEC §5)."""

    c: float
    weights: float
    kv: float
    s_star: float
    gain: float


def compression_gain(p: Plan, c: float) -> Gain:
    """S(c) for the plan's layout; see Gain."""

    sc = p.scenario
    cfg = rf.Config(sc.model, sc.device, n_devices=p.n_devices, tp=p.tp, w_p=sc.weights.width, w_kv=2.0,
                    factors=KvFactors(sharing=p.sharing), attention_dp=sc.attention_dp,
                    expert_parallel=sc.expert_parallel)
    w = float(rf.weight_bytes_read(sc.model, sc.batch, sc.weights.width))
    k = float(rf.kv_bytes_read(cfg, sc.batch, sc.context))
    return Gain(c, w, k, float(rf.s_star(cfg, sc.batch)), float(rf.speedup(w, k, c)))


def _find(ev: Evaluated, *, dtype: Optional[str] = None, r: Optional[float] = None, n: Optional[int] = None,
          placement: Optional[str] = None, tp: Optional[int] = None) -> Optional[int]:
    for i in range(len(ev)):
        if ((dtype is None or ev.dtype[i] == dtype) and (r is None or ev.retention[i] == r)
                and (n is None or ev.n[i] == n) and (placement is None or ev.placement[i] == placement)
                and (tp is None or ev.tp[i] == tp)):
            return i
    return None


def _nums(ev: Evaluated, i: int, baseline_step: float) -> Numbers:
    return (
        ("step_time", derived(float(ev.step[i]), "s", "T_step lower bound (docs/model.md §4)")),
        ("step_time_expected", derived(float(ev.step_exp[i]), "s", "T_expected (docs/expected.md)")),
        ("speedup", derived(baseline_step / float(ev.step[i]), "x", "vs 16-bit KV on the same devices")),
        ("memory_needed", derived(float(ev.need[i]), "B", "weights + KV")),
    )


def _why_absent(p: Plan, dtype: str, why: dict[str, str]) -> str:
    sc = p.scenario
    if dtype == "fp4" and not sc.device.fp4:
        return f"{sc.device.id} has no FP4 formats in hardware"
    if dtype not in get_engine(sc.engine).kv_dtypes:
        return f"engine {sc.engine} cannot store KV as {dtype}"
    refused = kv_refusal(get_engine(sc.engine), dtype, sc.device, sc.model)
    if refused is not None:
        return refused
    if dtype not in admissible(sc.budget, False).kv_dtypes:
        return f"quality budget '{sc.budget}' does not admit {dtype}"
    if "R3" in why:
        return why["R3"]
    if sc.pinned.kv_dtype is not None:
        return "kv_dtype is pinned"
    return "not in the candidate space"


def _reported(results: Sequence[QualityResult]) -> tuple[tuple[Value, ...], tuple[str, ...]]:
    """Reported results as `reported` Values where the source gives one number, as text otherwise
    (ranges, several numbers, gaps): printed beside the plan, never combined with derived numbers."""
    values = tuple(v for v in (x.value_obj() for x in results) if v is not None)
    texts = tuple(f"{x.method}: {'gap — ' if x.gap else ''}{x.result} ({x.citation})"
                  for x in results if x.value is None)
    return values, texts


@record
class _Inputs:
    """What the decision builders read: the plan so far and the search that chose it."""

    plan: Plan
    ev: Evaluated
    best: int
    space: Space
    why: dict[str, str]
    baseline_step: float
    yielded: frozenset[str]


def build_decisions(p: Plan, ev: Evaluated, best: int, space: Space, why: dict[str, str],
                    baseline_step: float, yielded: frozenset[str] = frozenset()) -> tuple[Decision, ...]:
    """The plan's decision records, one builder each; `yielded` holds the rules that gave way to capacity."""
    inp = _Inputs(p, ev, best, space, why, baseline_step, yielded)
    return (_regime(inp), _devices(inp), _quantization(inp), _eviction(inp), _paging(inp), _prefix_caching(inp),
            _placement(inp), _tiering(inp), _reevaluation(inp))


def _rule_of(ev: Evaluated, i: int) -> Optional[str]:
    x = ev.reject[i]
    return None if x is None else x.rule


def _cause(ev: Evaluated, i: int) -> Optional[str]:
    x = ev.reject[i]
    return None if x is None else x.cause


def _regime(inp: _Inputs) -> Decision:
    """R1: where the deployment sits on the regime map."""
    p = inp.plan
    sc = p.scenario
    m = sc.model
    d = sc.device
    b = sc.batch
    s = sc.context
    mb = p.map_before
    n0 = mb.n_devices  # the R1 map's count
    where0 = "one device" if n0 == 1 else f"{n0} × {d.id}, the fewest that hold the weights,"
    return Decision(
        domain="regime", title="Where the deployment sits", choice=p.regime_before, rules=("R1",),
        context=(f"{m.id} ({fmt_unit(m.params, '1')} parameters, {sc.weights.id} weights) on {d.id}, "
                 f"batch {b}, context {s:,} tokens",
                 f"s* = {mb.s_star.human}, s_cap = {mb.s_cap.human} on {where0} with 16-bit KV"),
        decision=(f"We will plan for the {p.regime_before} regime: the context is "
                  f"{mb.context_over_s_star.human} s* and {mb.context_over_s_cap.human} s_cap"
                  + (f" on {n0} × {d.id}." if n0 > 1 else ".")),
        numbers=p.map_before.items(),
        consequences=("below s* compression barely helps (R3); above s* KV bytes become speed (R4); "
                      "above s_cap the deployment must shard or shrink (R6)",),
    )


def _devices(inp: _Inputs) -> Decision:
    """How many devices (R6 when capacity-bound or the weights need several)."""
    p = inp.plan
    sc = p.scenario
    d = sc.device
    n = p.n_devices
    r = p.retention
    kv = p.kv_dtype
    pins = sc.pinned
    n0 = p.map_before.n_devices  # the R1 map's count
    ev = inp.ev
    baseline_step = inp.baseline_step
    dev_opts = []
    best_per_n: dict[int, int] = {}
    for i in range(len(ev)):  # one line per device count: its best tensor-parallel split
        if ev.dtype[i] != kv.id or ev.retention[i] != r or ev.placement[i] != p.placement:
            continue
        c = int(ev.n[i])
        if c not in best_per_n or ev.step_exp[i] < ev.step_exp[best_per_n[c]] or (
                ev.fits[i] and not ev.fits[best_per_n[c]]):
            best_per_n[c] = i
    same_tp = [i for i in range(len(ev)) if ev.n[i] == n and ev.tp[i] != p.tp and ev.dtype[i] == kv.id
               and ev.retention[i] == r and ev.placement[i] == p.placement]
    for i in same_tp:
        dev_opts.append(Option(f"{n} × {d.id} (tp {int(ev.tp[i])}, pp {n // int(ev.tp[i])})",
                               ev.reject[i] or "not preferred", _nums(ev, i, baseline_step)))
    more = sorted(c for c in best_per_n if c > n and _cause(ev, best_per_n[c]) == "more-devices")
    for c, i in sorted(best_per_n.items()):
        if c == n or c in more:
            continue
        dev_opts.append(Option(f"{c} × {d.id} (tp {int(ev.tp[i])})", ev.reject[i] or "not preferred",
                               _nums(ev, i, baseline_step)))
    if more:
        dev_opts.append(Option(f"{', '.join(map(str, more))} × {d.id}", f"more devices than the {n} that suffice"))
    return Decision(
        domain="devices", title="How many devices", choice=(
            f"{n} × {d.id}: no valid tensor × pipeline split" if any(u.constraint is Constraint.LAYOUT for u in p.unmet)
            else f"{n} × {d.id} (tensor parallel {p.tp}, pipeline {p.pp})"),
        rules=("R6",) if p.regime_before == "capacity-bound" or n0 > 1 else (),
        context=(f"memory needed {p.metrics.memory_needed.human}, usable {p.metrics.memory_usable.human}",
                 f"devices: {sc.devices.mode}" + (f" ≤ {sc.devices.n}" if sc.devices.mode == "max" else
                                                  f" = {sc.devices.n}" if sc.devices.mode == "fixed" else ""),
                 f"objective: {sc.objective}", *_layout_context(pins)),
        decision=(f"We will run on {n} device{'s' if n > 1 else ''}" if sc.replicas == 1 else
                  f"We will run {sc.replicas} data-parallel replicas of {n} device{'s' if n > 1 else ''}, "
                  f"{sc.replicas * n} in all") + (
            "." if p.feasible else ", the closest plan to the constraints; see what is unmet."),
        numbers=(("memory_needed", p.metrics.memory_needed), ("memory_usable", p.metrics.memory_usable),
                 ("device_need", p.metrics.device_need), ("headroom", p.metrics.headroom)),
        options=tuple(dev_opts),
        pinned=any(n is not None for n in (pins.devices, pins.tensor_parallel, pins.pipeline_parallel)),
    )


def _layout_context(pins: Pins) -> tuple[str, ...]:
    """The pinned tensor × pipeline split, as the devices decision lists it (the search kept only it)."""
    said = [f"{what} {n}" for what, n in (("tensor parallel", pins.tensor_parallel),
                                          ("pipeline parallel", pins.pipeline_parallel)) if n is not None]
    return (f"pinned split: {' × '.join(said)}",) if said else ()


def _quantization(inp: _Inputs) -> Decision:
    """R3/R4: the KV cache dtype."""
    p = inp.plan
    sc = p.scenario
    n = p.n_devices
    kv = p.kv_dtype
    pins = sc.pinned
    ev = inp.ev
    space = inp.space
    why = inp.why
    baseline_step = inp.baseline_step

    q_opts = []
    for dt in DTYPE_ORDER:
        if dt in ("fp16",) or dt == kv.id:
            continue
        j = _find(ev, dtype=dt, r=1.0, n=n, placement=p.placement, tp=p.tp)
        if j is None:
            q_opts.append(Option(dt, _why_absent(p, dt, why)))
        else:
            q_opts.append(Option(dt, ev.reject[j] or "not preferred", _nums(ev, j, baseline_step)))
    r3 = kv.id == "bf16" and any(_rule_of(ev, i) == "R3" for i in range(len(ev))
                                 if ev.n[i] == n and ev.tp[i] == p.tp)
    yields = "R3" in inp.yielded
    q_rules = ("R3", "R6") if yields else ("R3",) if r3 else ("R4",) if kv.id != "bf16" else ()
    evidence, evidence_text = _reported(for_choice("quantization", kv_dtype=kv.id))
    w_kv = p.kv_width  # the engine's bytes per value, scales included
    scales = f", {w_kv:.4g} B with the engine's scales" if w_kv != kv.width else ""
    s_q = compression_gain(p, 2.0 / w_kv).gain
    return Decision(
        domain="quantization", title="KV cache dtype", choice=kv.id, rules=q_rules,
        context=(f"quality budget '{sc.budget}', engine {sc.engine}",
                 f"admissible here: {', '.join(space.dtypes)}"),
        decision=(f"We will store the KV cache as {kv.id} ({kv.width:g} B per element{scales})."
                  + (" The point is below s*, so the cache stays uncompressed (R3)." if r3 else "")
                  + (" The point is below s*, but 16-bit KV does not fit on the allowed devices and R6 cannot shard"
                     " further, so R3 yields to capacity: this is the least lossy width that fits." if yields else "")),
        numbers=(("byte_factor", derived(w_kv / 2.0, "x", "w_q / w_kv")),
                 ("speedup_from_quantization", derived(s_q, "x", "S(c) = (W+K)/(W+K/c) with c = 2/w_q; W weight "
                                                           "bytes, K 16-bit KV bytes read per step on this "
                                                           "layout, prefix sharing as planned (docs/model.md §6)"))),
        evidence=evidence, options=tuple(q_opts), pinned=pins.kv_dtype is not None,
        consequences=(kv.note,) if kv.note else (), reported_text=evidence_text,
    )


def _eviction(inp: _Inputs) -> Decision:
    """R5: token eviction."""
    p = inp.plan
    sc = p.scenario
    n = p.n_devices
    r = p.retention
    kv = p.kv_dtype
    pins = sc.pinned
    ev = inp.ev
    space = inp.space
    baseline_step = inp.baseline_step
    e_opts = []
    for rr in sorted(set(space.retentions) | {1.0}, reverse=True):
        if rr == r:
            continue
        j = _find(ev, dtype=kv.id, r=rr, n=n, placement=p.placement, tp=p.tp)
        e_opts.append(Option(f"r = {rr:g}", (ev.reject[j] or "not preferred") if j is not None else "not in the space",
                             _nums(ev, j, baseline_step) if j is not None else ()))
    if not (sc.eviction_allowed or sc.budget == "aggressive"):
        e_opts.append(Option("r < 1", "quality.eviction is forbidden for this workload (R5)"))
    elif not get_engine(sc.engine).eviction:
        e_opts.append(Option("r < 1", f"engine {sc.engine} cannot evict tokens inside a request"))
    ev_evidence, ev_text = _reported(for_choice("eviction", retention=r)) if r < 1 else ((), ())
    return Decision(
        domain="eviction", title="Token eviction", choice=f"retention {r:g}", rules=("R5",),
        context=(f"eviction {'allowed' if sc.eviction_allowed else 'forbidden'}, min_retention {sc.min_retention:g}",),
        decision=("We will keep every token." if r >= 1 else f"We will keep {r:.0%} of the tokens (r = {r:g} ≥ 0.5)."),
        numbers=(("retention", derived(r, "x", "r")),), evidence=ev_evidence, options=tuple(e_opts),
        pinned=pins.retention is not None, reported_text=ev_text,
    )


def _paging(inp: _Inputs) -> Decision:
    """R2: paged KV allocation and its page size."""
    p = inp.plan
    sc = p.scenario
    s = sc.context
    pins = sc.pinned
    eng = get_engine(sc.engine)
    default = default_block_for(eng, sc.device, sc.model)  # the engine's default page on this device
    phi_here = float(fragmentation(s, p.block_size))

    def page_reason(bs: int) -> str:
        phi = float(fragmentation(s, bs))
        if bs > p.block_size:
            return f"wastes φ = {phi:.3%} of the last page vs {phi_here:.3%}" if phi > phi_here else \
                f"same φ = {phi:.3%} here, but more waste at other lengths"
        return (f"{s // bs:,} pages per sequence instead of {-(-s // p.block_size):,} for φ = {phi:.3%}; "
                f"the engine default is {default}")

    page_opts = tuple(Option(f"{bs}-token pages", page_reason(bs),
                             (("fragmentation", derived(float(fragmentation(s, bs)), "%", "φ = ceil(s/B)·B/s − 1")),))
                      for bs in block_sizes_for(eng, sc.device, sc.model) if bs != p.block_size)
    return Decision(
        domain="paging", title="Paged KV allocation", choice=f"{p.block_size}-token pages", rules=("R2",),
        context=(f"engine {sc.engine} default page: {default} tokens",),
        decision=f"We will page the KV cache in {p.block_size}-token blocks.",
        numbers=(("fragmentation", derived(float(fragmentation(s, p.block_size)), "%",
                                           "φ = ceil(s/B)·B/s − 1 at this context")),),
        options=page_opts + (Option("contiguous allocation", "reserves the maximum length per sequence (R2)"),),
        pinned=pins.block_size is not None,
    )


def _prefix_caching(inp: _Inputs) -> Decision:
    """R2: prefix caching."""
    p = inp.plan
    sc = p.scenario
    pins = sc.pinned
    return Decision(
        domain="prefix-caching", title="Prefix caching", choice="on" if p.prefix_caching else "off", rules=("R2",),
        context=(f"prefix {sc.prefix:,} tokens shared by {sc.fanout} requests",),
        decision=("We will enable prefix caching"
                  + (f"; the shared prefix gives σ = {p.sharing:.3g}." if p.sharing > 1
                     else "; this workload declares no shared prefix, so σ = 1 until one appears.")
                  if p.prefix_caching else "Prefix caching stays off as pinned (breaks R2)."),
        numbers=(("sharing", derived(p.sharing, "x", "σ = n·s/(p + n(s − p)) (docs/model.md §3)")),),
        options=(Option("off", "lossless and free: R2 keeps it on"),) if p.prefix_caching else (),
        pinned=pins.prefix_caching is not None,
    )


def _placement(inp: _Inputs) -> Decision:
    """R7: KV page placement."""
    p = inp.plan
    sc = p.scenario
    d = sc.device
    b = sc.batch
    n = p.n_devices
    r = p.retention
    kv = p.kv_dtype
    pins = sc.pinned
    ev = inp.ev
    baseline_step = inp.baseline_step
    pl_nums = []
    for name in rf.PLACEMENTS:
        beta, upper = rf.beta_eff(d, name, b)
        pl_nums.append((f"beta_eff_{name}", derived(float(beta), "B/s", f"{name} β_eff (docs/model.md §7)"
                                                    + ("; upper bound, fabric unpublished" if upper else ""))))
    pl_opts = []
    if d.partitions > 1:
        for name in rf.PLACEMENTS:
            if name == p.placement:
                continue
            j = _find(ev, dtype=kv.id, r=r, n=n, placement=name, tp=p.tp)
            reason = (ev.reject[j] or "slower KV stream") if j is not None else (
                "R7: pinning every page to one partition streams at β/n_part" if name == "pinned"
                else f"the spec sets placement = {sc.placement}")
            pl_opts.append(Option(name, reason, _nums(ev, j, baseline_step) if j is not None else ()))
    return Decision(
        domain="placement", title="KV page placement", choice=p.placement, rules=("R7",) if d.partitions > 1 else (),
        context=(f"{d.id}: {d.partitions} memory partition{'s' if d.partitions > 1 else ''}, "
                 f"{fmt_unit(d.partition_bandwidth, 'B/s')} each, fabric "
                 + (fmt_unit(d.fabric, 'B/s') if d.fabric else "unpublished"),),
        decision=(f"We will place pages {p.placement}." if d.partitions > 1 else
                  "One partition: placement does not change the bandwidth."),
        numbers=tuple(pl_nums), options=tuple(pl_opts), pinned=pins.placement is not None,
    )


def _tiering(inp: _Inputs) -> Decision:
    """R6: tiering for reuse."""
    p = inp.plan
    sc = p.scenario
    pins = sc.pinned
    t = p.tier
    t_nums = tuple((k, v) for k, v in (("prefill_time", t.prefill_time), ("fetch_time", t.fetch_time),
                                       ("tier_bytes", t.bytes)) if v is not None)
    return Decision(
        domain="tiering", title="Tiering for reuse", choice=t.tier, rules=("R6",),
        context=(f"reuse {sc.reuse:.0%} of contexts across sessions",
                 f"host link: {t.link or 'none in the catalog'}"),
        decision=("We will keep no second tier." if t.tier == "none" else
                  f"We will keep reused contexts in the {t.tier} tier between sessions, never read inside a step."),
        numbers=t_nums,
        options=(Option("read KV from a remote tier inside a step",
                        "R6: a link ~50× below HBM would set the step time"),
                 (Option("recompute (prefill) on reuse", "slower than fetching over the host link")
                  if t.tier == "host" else
                  Option("host tier", "no context comes back (reuse = 0)") if sc.reuse <= 0 else
                  Option("host tier", "fetching is no faster than recomputing") if t.tier == "none" else
                  Option("recompute (prefill) on reuse", f"the {t.tier} tier is pinned"))),
        pinned=pins.tier is not None,
    )


def _reevaluation(inp: _Inputs) -> Decision:
    """R8: the map after the plan."""
    p = inp.plan
    ma = p.map_after
    return Decision(
        domain="re-evaluation", title="The map after the plan", choice=p.regime_after, rules=("R8",),
        context=(f"before: {p.regime_before}; combined byte factor {p.byte_factors.combined.human}",),
        decision=f"After the plan the point is {p.regime_after}: s* = {ma.s_star.human}, "
                 f"s_cap = {ma.s_cap.human}.",
        numbers=p.map_after.items(),
        consequences=(("further KV compression would barely help now (R3)",) if p.regime_after == "weight-bound"
                      else ("the deployment does not fit as planned",) if p.regime_after == "capacity-bound"
                      else ("KV bytes still set the step time: more compression would still be speed",)),
    )
