"""Candidate plans, evaluated together with numpy, filtered by fit, SLOs and rules.

A candidate is (KV dtype, retention, device count, placement); the lossless
domains (paging, prefix caching) are on in every candidate (R2) and do not
multiply the space. The search is exhaustive over a few hundred candidates,
vectorized, so planning stays in milliseconds.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Mapping, Optional, Sequence

import numpy as np

from kvplan.base.records import record
from kvplan.catalog import Device, Model
from kvplan.catalog.engines import kv_width
from kvplan.catalog.quality import lossiness_rank
from kvplan.model import expected as ex
from kvplan.model import memory, pools
from kvplan.model import roofline as rf
from kvplan.model.regime import widest_tp
from kvplan.planner.plan import Rejection

if TYPE_CHECKING:  # numpy.typing is for annotations only: its import costs the cold start
    import numpy.typing as npt

    Array = npt.NDArray[np.float64]


#: Device counts `devices = auto` considers: tensor-parallel groups come in powers of two.
AUTO_DEVICE_COUNTS = (1, 2, 4, 8, 16, 32, 64)
#: Retentions the search tries when eviction is admissible (never below 0.5, R5).
EVICTION_RETENTIONS = (0.75, 0.5)


def tp_options(model: Model, n: int) -> tuple[int, ...]:
    """Tensor-parallel sizes for n devices, largest first: each divides n and the query heads,
    and divides the KV heads or is a multiple of them; the rest of the devices become pipeline
    stages, no more than the model has layers. (MLA replicates its latent on every rank, so smaller tp
    can be what fits.)"""
    out = []
    for t in range(n, 0, -1):
        if n % t or model.n_q % t or n // t > model.n_layers:  # a pipeline stage holds at least one layer
            continue
        if model.kv_kind == "mla" or model.n_kv % t == 0 or t % model.n_kv == 0:
            out.append(t)
    return tuple(out)


def has_layout(model: Model, n: int) -> bool:
    """Whether n devices split into tensor-parallel ranks the heads take and pipeline stages of at
    least one layer each: a count without such a split is never a valid plan."""
    return bool(tp_options(model, n))


def closest_tp(model: Model, n: int) -> int:
    """For a count with no valid split (only evaluated to say how far it is): the widest tensor-parallel
    size the heads take, so that the pipeline is as short as the heads allow (regime.widest_tp)."""
    return widest_tp(model, n)


def lossiness(dtype: str, retention: float) -> int:
    """quality.lossiness_rank (one rank per halving of the width, one for evicting), with
    deeper eviction (r < 0.75) one rank further, so that r = 0.5 must buy its own gain over 0.75."""
    return lossiness_rank(dtype, retention) + (1 if retention < 0.75 else 0)


@record
class Space:
    """The candidate axes after pins, engine and budget are applied."""

    dtypes: tuple[str, ...]
    retentions: tuple[float, ...]
    counts: tuple[int, ...]
    placements: tuple[str, ...]
    tp: Optional[int] = None     # pin.tensor_parallel: the only tensor-parallel size searched
    pp: Optional[int] = None     # pin.pipeline_parallel: the only pipeline depth searched

    def layout_counts(self, counts: Sequence[int]) -> tuple[int, ...]:
        """The counts a pinned split takes: tp × pp with both pinned, multiples of the one pinned."""
        if self.tp is not None and self.pp is not None:
            return (self.tp * self.pp,)
        step = self.tp or self.pp or 1
        return tuple(c for c in counts if c % step == 0) or tuple(counts)

    def splits(self, model: Model, n: int, pipeline: bool) -> tuple[int, ...]:
        """The tensor-parallel sizes searched on n devices: the model's layouts (tp_options; every device a
        rank without pipeline stages) that keep the pinned tp and pp. A pinned split none of them takes is
        still evaluated, as the engine would run it: lint reports it on the pin (kvplan.planner.lint)."""
        opts = tp_options(model, n) or (closest_tp(model, n),)  # no valid split: the planner rejects it
        opts = opts if pipeline else tuple(t for t in opts if t == n)
        if self.tp is None and self.pp is None:
            return opts
        return self.pinned_splits(model, n, pipeline) or (
            self.tp if self.tp is not None else max(1, n // (self.pp or 1)),)

    def pinned_splits(self, model: Model, n: int, pipeline: bool) -> tuple[int, ...]:
        """The tensor-parallel sizes of the model's layouts on n devices that keep the pinned tp and pp."""
        opts = tuple(t for t in tp_options(model, n) if pipeline or t == n)
        return tuple(t for t in opts if self.tp in (None, t) and self.pp in (None, n // t))


@record
class Evaluated:
    """Every candidate's metrics, one array entry per candidate."""

    dtype: npt.NDArray[np.str_]
    width: Array
    retention: Array
    n: npt.NDArray[np.int64]
    tp: npt.NDArray[np.int64]
    placement: npt.NDArray[np.str_]
    kv_stored: Array
    kv_read: Array
    need: Array          # weights + KV over the deployment
    capacity: Array      # N · usable per device
    need_dev: Array      # weights + KV on the most loaded device (kvplan.model.memory)
    usable_dev: Array    # device memory less the reserves
    step: Array
    throughput: Array
    headroom: Array
    fits: npt.NDArray[np.bool_]
    lossy: npt.NDArray[np.int64]
    reject: list[Optional[Rejection]]   # None while the candidate stands
    step_exp: Array      # the expected step (kvplan.model.expected): what the choices and the SLOs use
    ttft: Array          # the TTFT bound: the prompt's prefill at π (never faster than the weights at β)
    ttft_exp: Array      # the expected TTFT
    bound_binds: Optional[npt.NDArray[np.bool_]] = None  # one sequence of the bound needs more KV than the batch
    #: the memory model fits it and the engine's own pool does not (kvplan.model.pools); None: no engine pool
    by_engine: Optional[npt.NDArray[np.bool_]] = None
    #: each candidate against the engine's own pool (kvplan.model.pools.fit); empty: no engine pool, None: the
    #: memory model's figures for that candidate (a dtype the engine does not store)
    pools: tuple[Optional[pools.Fit], ...] = ()

    def __len__(self) -> int:
        return len(self.width)

    def figures(self, on: str) -> tuple[Array, Array, Array]:
        """(step, throughput, ttft) an SLO is checked against: the expected figures, or the bounds (`on` =
        "bound", `--slo-on bound`)."""
        if on == "bound":
            return self.step, self.throughput, self.ttft
        return self.step_exp, self.throughput * self.step / self.step_exp, self.ttft_exp


def _expected(model: Model, device: Device, bound: rf.StepTime, batch: int, context: int, tp: Array, n: Array,
              w_p: float, factors: Mapping[str, ex.Factors], dtypes: Sequence[str], attention_dp: int = 1,
              ep: int = 1) -> tuple[Array, Array, Array]:
    """Each candidate's expected step, TTFT bound and expected TTFT from its bound and its KV dtype's factors
    (`dtypes`: one per candidate): kvplan.model.expected's equations, evaluated over the candidates, their
    collectives at the links their groups span (`n`: devices per replica, SPEC §12), attention in `attention_dp`
    groups and the experts over `ep` ranks (SPEC §14)."""
    rates = ex.Rates.over([factors[d] for d in dtypes])
    link = ex.link_bandwidth(device)
    perfect = {d: f.perfect() for d, f in factors.items()}  # the bound: every fraction 1, every time 0
    ttft = ex.prefill_ttft(model, device, context, tp=tp, w_p=w_p, link_bandwidth=None,
                           k=ex.Rates.over([perfect[d] for d in dtypes]), n=n, attention_dp=attention_dp, ep=ep).ttft
    return (ex.expected_from_bound(model, device, bound, batch, tp, n, link, rates, attention_dp, ep).step, ttft,
            ex.prefill_ttft(model, device, context, tp=tp, w_p=w_p, link_bandwidth=link, k=rates, n=n,
                            attention_dp=attention_dp, ep=ep).ttft)


def evaluate(model: Model, device: Device, *, batch: int, context: int, w_p: float, sharing: float, frag: float,
             reserved: float, space: Space, pipeline: bool = True, bound: Optional[int] = None,
             attention_dp: int = 1, expert_parallel: int = 1, replicas: int = 1, engine: str = "any",
             factors: Optional[Mapping[str, ex.Factors]] = None, pool: Optional[pools.PoolSettings] = None
             ) -> Evaluated:
    """Evaluate every combination of the space's axes with the SPEC §3–6 equations.
    Without pipeline parallelism (an engine that has none) every device is a tensor-parallel rank.
    `reserved` is the bytes per device the reserves keep free (kvplan.model.memory.Reserves.total); a
    candidate fits when its most loaded device does (kvplan.model.memory), and, with a `bound` (the
    longest sequence the engine admits, workload.max_context), when its pool also holds one sequence
    of the bound: an engine refuses to start otherwise. `attention_dp` attention groups each hold
    their own sequences (roofline.kv_replication); the routed experts are split over `expert_parallel` ranks
    (their all-to-all in the expected figures); `replicas` copies multiply the throughput. A candidate's
    KV width is the dtype's as `engine` stores it, scales included (catalog.engines.kv_width). `factors` are
    each KV dtype's expected-performance factors (default: kvplan's defaults for the device and engine): each
    candidate also carries its expected step and TTFT (docs/expected.md); `pool`: the engine's own (_fit)."""
    grid = [(d, r, n, t, p) for n in space.counts for t in space.splits(model, n, pipeline)
            for p in space.placements for d in space.dtypes for r in space.retentions]
    # once per value of the axes they depend on, not per candidate (a few values, a few hundred candidates)
    width_of = {d: kv_width(engine, d, model) for d in dict.fromkeys(g[0] for g in grid)}
    beta_of = {p: float(rf.beta_eff(device, p, batch)[0]) for p in dict.fromkeys(g[4] for g in grid)}
    lossy_of = {dr: lossiness(*dr) for dr in dict.fromkeys((g[0], g[1]) for g in grid)}
    dt, w = np.array([g[0] for g in grid]), np.array([width_of[g[0]] for g in grid])
    r = np.array([g[1] for g in grid], dtype=np.float64)
    n = np.array([g[2] for g in grid], dtype=np.int64)
    tp = np.array([g[3] for g in grid], dtype=np.int64)
    pl = np.array([g[4] for g in grid])
    rep = rf.kv_replication(model, tp.astype(np.float64), attention_dp)
    # the model's equations, every candidate at once: footprint (SPEC §3), the bound (§4), the expected figures
    kv_read = rf.kv_bytes(model, batch, context, w_kv=w, factor=r / sharing, replication=rep)
    kv_stored = rf.kv_bytes(model, batch, context, w_kv=w, factor=r * (1.0 + frag) / sharing, replication=rep)
    # the pool must hold one sequence of the bound on its attention group: that group's share of the pool
    one = (rf.kv_bytes(model, 1, bound, w_kv=w, factor=1.0 + frag, replication=rep) * attention_dp
           if bound is not None and bound > context else np.zeros(len(grid)))
    w_held = rf.weight_bytes_held(model, w_p)
    beta_kv = np.array([beta_of[g[4]] for g in grid])
    tpf = tp.astype(np.float64)
    t = rf.step_bound(model, device, batch, context, w_p=w_p, tp=tpf, kv_read=kv_read, beta_kv=beta_kv)
    if factors is None:
        factors = {d: ex.default_factors(device, d, engine, device.scaleup_link or "") for d in space.dtypes}
    step_exp, ttft, ttft_exp = _expected(model, device, t, batch, context, tpf, n.astype(np.float64), w_p, factors,
                                         list(dt), attention_dp, expert_parallel)
    step = t.step
    usable = np.full(len(grid), device.memory - reserved, dtype=np.float64)
    kv_fit = np.maximum(kv_stored, one)
    need_dev, fits, by_engine, found = _fit(model, device, engine, pool, dt, w, tp, n // tp, kv_fit, w_p, batch,
                                            context, attention_dp, reserved, usable)
    capacity, need = n * usable, w_held + kv_fit
    with np.errstate(divide="ignore", invalid="ignore"):
        headroom = np.where(usable > 0, 1.0 - need_dev / np.where(usable > 0, usable, 1.0), -np.inf)
    return Evaluated(
        dtype=dt, width=w, retention=r, n=n, tp=tp, placement=pl, kv_stored=kv_stored, kv_read=kv_read,
        need=need, capacity=capacity, need_dev=need_dev, usable_dev=usable, step=step,
        throughput=replicas * batch / step,
        headroom=headroom, fits=fits,
        lossy=np.array([lossy_of[g[0], g[1]] for g in grid], dtype=np.int64),
        reject=[None] * len(grid), step_exp=step_exp, ttft=ttft, ttft_exp=ttft_exp, bound_binds=one > kv_stored,
        by_engine=by_engine, pools=found)


def _fit(model: Model, device: Device, engine: str, pool: Optional[pools.PoolSettings], dt: npt.NDArray[np.str_],
         w: Array, tp: npt.NDArray[np.int64], pp: npt.NDArray[np.int64], kv_fit: Array, w_p: float, batch: int,
         context: int, attention_dp: int, reserved: float, usable: Array
         ) -> tuple[Array, npt.NDArray[np.bool_], Optional[npt.NDArray[np.bool_]], tuple[Optional[pools.Fit], ...]]:
    """(need per device, fits, decided by the engine, the engine's Fits) of every candidate: weights + KV on its
    most loaded device (kvplan.model.memory) against the usable memory; with `pool` (the plan's page, reserves,
    prefix caching and pinned step limit), a candidate for an engine that sizes its pool its own way
    (kvplan.model.pools.FORMULAS) fits when that engine's pool holds its KV, the need being the weights + the
    engine's pool, what the engine's writer derives its setting from."""
    need_dev = memory.weights_per_device(model, w_p, tp, pp) + memory.kv_per_device(model, kv_fit, tp, pp)
    queries = [pools.PoolQuery(model, device, str(dt[i]), float(w[i]), int(tp[i]), int(pp[i]), pool.page, batch,
                               context, float(kv_fit[i]), w_p, pool.reserves, attention_dp, pool.prefix_caching,
                               pool.max_batched_tokens, pool.memory_fraction, pool.context_bound, pool.sizing)
               for i in range(len(dt))
               ] if pool is not None and engine in pools.FORMULAS else []
    return _engine_pool(engine, pool, queries, reserved, need_dev, need_dev <= usable)


def _engine_pool(engine: str, pool: Optional[pools.PoolSettings], queries: Sequence[pools.PoolQuery],
                 reserved: float, need_dev: Array, fits: npt.NDArray[np.bool_]
                 ) -> tuple[Array, npt.NDArray[np.bool_], Optional[npt.NDArray[np.bool_]],
                            tuple[Optional[pools.Fit], ...]]:
    """(need per device, fits, decided by the engine, the engine's Fits) of each candidate against `engine`'s own pool
    (kvplan.model.pools.fit): the weights + the pool that holds its KV, and the engine's verdict (the reserves left
    free, the engine's setting in range); the memory model's figures where the engine has none (a dtype it does
    not store). `decided by the engine`: the memory model fits the candidate and the engine's pool does not. No
    `queries` (no `pool`, or an engine without a formula of its own): the memory model's figures, as they are."""
    if pool is None or not queries:
        return need_dev, fits, None, ()
    found = tuple(pools.fit(engine, q) for q in queries)
    need = np.array([f.needed - reserved if f is not None else need_dev[i] for i, f in enumerate(found)],
                    dtype=np.float64)
    ok = np.array([f.fits if f is not None else bool(fits[i]) for i, f in enumerate(found)], dtype=np.bool_)
    return need, ok, fits & ~ok, found


def objective_order(ev: Evaluated, idx: Sequence[int], objective: str) -> list[int]:
    """Sort candidate indices best-first by the spec's objective; ties go to the less lossy,
    then to the order of the axes (deterministic)."""
    def key(i: int) -> tuple[float, ...]:  # speed is the expected step's (docs/expected.md)
        if objective == "fastest":
            return (ev.step_exp[i], ev.n[i], ev.lossy[i], i)
        if objective == "most-headroom":
            return (-ev.headroom[i], ev.n[i], ev.lossy[i], i)
        if objective == "cheapest":  # one price per device: $/1M output tokens ∝ devices × expected step / batch
            return (ev.n[i] * ev.step_exp[i], ev.n[i], ev.lossy[i], i)
        return (ev.n[i], ev.step_exp[i], ev.lossy[i], i)  # fewest-devices

    return sorted(idx, key=key)


def relax_to_less_lossy(ev: Evaluated, best: int, pool: Sequence[int], min_gain: float) -> int:
    """Climb from the least lossy candidate on the chosen device count, one lossier step at a
    time, taking a step only when it shortens the EXPECTED step time by at least `min_gain`× over the
    current choice (an assumed threshold): every added loss must buy its own speed, as an engine would run it,
    its kernel's dequantization cost (η_kv) and the fixed costs included (docs/expected.md)."""
    same = sorted((i for i in pool if ev.n[i] == ev.n[best]), key=lambda i: (ev.lossy[i], ev.step_exp[i], i))
    if not same:
        return best
    cur = same[0]
    for i in same[1:]:
        if ev.lossy[i] > ev.lossy[cur] and ev.step_exp[i] * min_gain <= ev.step_exp[cur]:
            cur = i
    return cur


@record
class Slos:
    """A scenario's SLOs (None: not set) and the figures they are checked against: "expected" (the default)
    or "bound" (`--slo-on bound`)."""

    step_time: Optional[float] = None
    throughput: Optional[float] = None
    ttft: Optional[float] = None
    on: str = "expected"

    @property
    def any(self) -> bool:
        return self.step_time is not None or self.throughput is not None or self.ttft is not None


def slo_violation(ev: Evaluated, i: int, slos: Slos) -> float:
    """How far a candidate is from its SLOs: 1.0 meets them, 1.3 misses the worst by 30%."""
    if not slos.any:  # asked of every candidate: no SLO, no figures to derive (ev.figures divides arrays)
        return 1.0
    step, thr, ttft = ev.figures(slos.on)
    v = 1.0
    if slos.step_time is not None:
        v = max(v, step[i] / slos.step_time)
    if slos.throughput is not None:
        v = max(v, slos.throughput / thr[i])
    if slos.ttft is not None:
        v = max(v, ttft[i] / slos.ttft)
    return float(v)


def compare_reason(ev: Evaluated, i: int, best: int, objective: str) -> Rejection:
    """Why a feasible candidate lost to the chosen one, in the objective's terms."""
    return Rejection(None, _compare_words(ev, i, best, objective), cause=(
        "more-devices" if ev.n[i] > ev.n[best] and objective == "fewest-devices" else "objective"))


def _compare_words(ev: Evaluated, i: int, best: int, objective: str) -> str:
    if ev.n[i] > ev.n[best] and objective == "fewest-devices":
        return f"needs {int(ev.n[i])} devices where {int(ev.n[best])} suffice"
    dearer = ev.n[i] * ev.step_exp[i] / (ev.n[best] * ev.step_exp[best])
    if objective == "cheapest" and dearer > 1 + 1e-9:
        return (f"dearer: {dearer:.3g}x the cost per output token (devices × expected step: {int(ev.n[i])} × "
                f"{ev.step_exp[i] * 1e3:.4g} ms vs {int(ev.n[best])} × {ev.step_exp[best] * 1e3:.4g} ms)")
    if ev.step_exp[i] > ev.step_exp[best] * (1 + 1e-9):
        return (f"slower: expected step {ev.step_exp[i] * 1e3:.4g} ms vs {ev.step_exp[best] * 1e3:.4g} ms "
                f"(bound {ev.step[i] * 1e3:.4g} ms vs {ev.step[best] * 1e3:.4g} ms)")
    if ev.tp[i] != ev.tp[best]:
        return f"tensor parallel {int(ev.tp[i])} is no better than {int(ev.tp[best])}"
    if ev.lossy[i] > ev.lossy[best]:
        return (f"lossier for no more than the minimum gain: expected step {ev.step_exp[i] * 1e3:.4g} ms vs "
                f"{ev.step_exp[best] * 1e3:.4g} ms (bound {ev.step[i] * 1e3:.4g} ms vs {ev.step[best] * 1e3:.4g} ms)")
    if ev.width[i] == ev.width[best] and ev.dtype[i] != ev.dtype[best]:
        return f"same bytes as {ev.dtype[best]}; ties go to {ev.dtype[best]}, which has more reported evidence"
    if objective == "most-headroom" and ev.headroom[i] < ev.headroom[best]:
        return f"less headroom: {ev.headroom[i]:.1%} vs {ev.headroom[best]:.1%}"
    if ev.n[i] > ev.n[best]:
        return f"same speed on more devices ({int(ev.n[i])} vs {int(ev.n[best])})"
    if ev.placement[i] != ev.placement[best]:
        return f"same step time; {ev.placement[best]} is preferred on ties (R7)"
    return "equal on the objective; the less lossy option wins ties"
