"""The layout search of a request workload (SPEC §12, docs/service.md): r data-parallel replicas of n devices
each (the batch plan of one replica picks its tensor × pipeline split of n), for every total r·n the spec allows,
compared at equal totals.

`devices = N` (or `pin devices = N`) is the total over the replicas, `<= N` caps the total, `auto` caps it at
kvplan.lang's auto limit and takes the least total that meets. Among the layouts of that total the most goodput
wins, then the lower ITL; with one price per device `objective = cheapest` is the same least total (the rate is
the declared one: $/h and $/token both grow with the total). When none meets, the plan is the best layout within
the bound (most goodput, then lower ITL). Only an engine whose launch writes a data-parallel size
(catalog Engine.data_parallel) gets r > 1, unless `pin replicas` sets r.

Attention data parallelism and expert parallelism (SPEC §14) are further choices of a layout for a mixture-of-experts
model: one replica of n devices whose attention runs in d = n groups, each holding only its own sequences' KV (where
tensor parallelism replicates the KV: an MLA latent on every rank, fewer KV heads than ranks), and whose routed experts
are split over e = n ranks, each MoE layer an all-to-all (where the engine runs it). Tried on one replica: (d, e) =
(1, 1), (n, 1), (n, n) (the engines' DeepSeek recipes: attention DP with the experts over the same ranks), each only on
an engine whose launch runs it (catalog Engine.attention_dp, Engine.expert_parallel) and unless the spec pins it
(`pin attention_dp`, `pin expert_parallel`) or its tensor × pipeline split (the split a deployment runs). A choice is
planned as those pins and kept only where the plan's tensor-parallel group is the whole replica (the engines run them
so)."""

from __future__ import annotations

import math
from typing import Callable, Optional

import attrs

from kvplan.base.errors import KvplanError
from kvplan.base.limits import MAX_LAYOUTS
from kvplan.base.records import record
from kvplan.catalog import settings
from kvplan.catalog.engines import get_engine
from kvplan.model import load
from kvplan.model.roofline import kv_replication
from kvplan.model.scenario import DeviceCount, Scenario
from kvplan.planner import search, service
from kvplan.planner.plan import Plan
from kvplan.planner.suggest import LAYOUT_UNMET, with_pin

#: The plan of one replica layout: the settled plan, its service figures with the goodput, its bound load.
Served = tuple[Plan, service.LoadFigures, load.Load]


@record
class Split:
    """How one replica's ranks split the model's layers beyond tensor parallelism: attention groups that each hold
    their own sequences (pin.attention_dp) and the ranks the routed experts are split over (pin.expert_parallel)."""

    attention_dp: int = 1
    expert_parallel: int = 1


@record
class Tried:
    """One layout the search planned: `replicas` × `per` devices (the plan's own split of `per`), its attention in
    groups and experts over ranks as `split` says."""

    replicas: int
    per: int
    plan: Plan
    fig: service.LoadFigures
    bound: load.Load
    split: Split = Split()

    @property
    def attention_dp(self) -> int:
        return self.split.attention_dp

    @property
    def total(self) -> int:
        return self.replicas * self.per

    @property
    def fits(self) -> bool:
        """Whether it fits on a layout its engine runs (nothing of suggest.LAYOUT_UNMET is unmet)."""
        return not any(u.constraint in LAYOUT_UNMET for u in self.plan.unmet)

    @property
    def meets(self) -> bool:
        """Whether it fits and its declared rate meets the service SLOs (a steady state included)."""
        return self.fits and service.meets(self.plan.scenario, self.fig, self.bound)

    @property
    def goodput(self) -> float:
        """The rate all replicas carry within the SLOs (the saturation rate without latency SLOs); 0 if none."""
        g = self.fig.goodput if self.fig.goodput is not None else self.fig.saturation_rate
        return g.value if self.fits and g.value > 0 else 0.0

    @property
    def itl(self) -> float:
        return self.fig.itl.value if self.fig.itl is not None else math.inf


@record
class Found:
    """The layout chosen, every layout planned (in the order planned), and whether the chosen one meets."""

    chosen: Tried
    tried: tuple[Tried, ...]
    met: bool
    bound: int            # the most devices in all the spec allows


def bound_total(sc: Scenario) -> int:
    """The most devices in all the spec allows: `pin devices`, `devices = N`, `<= N`, or auto's limit."""
    return int(sc.pinned.devices) if sc.pinned.devices is not None else sc.devices.n


def exact(sc: Scenario) -> bool:
    """Whether the spec fixes the total (`devices = N` or `pin devices = N`)."""
    return sc.pinned.devices is not None or sc.devices.mode == "fixed"


def replica_counts_allowed(sc: Scenario) -> Optional[int]:
    """The one replica count the search may use (a `pin replicas`, or 1 for an engine that writes no
    data-parallel size, and for a closed loop of clients: it declares no rate to split), or None: any."""
    if sc.pinned.has(settings.pin("replicas")):
        return sc.replicas
    if sc.concurrency is not None:
        return 1
    if sc.pool:  # a pool of disaggregated serving: its workers are separate engines, one launch each
        return None
    return None if get_engine(sc.engine).data_parallel is not None else 1


def pinned_split(sc: Scenario) -> Split:
    """The spec's own split (its pins, else 1 and 1)."""
    return Split(sc.attention_dp, sc.expert_parallel)


def splits(sc: Scenario, per: int) -> tuple[Split, ...]:
    """The splits the search tries on one replica of `per` devices (module docstring): the spec's, and for a
    mixture-of-experts model on `per` > 1 tensor-parallel ranks (no split pinned) attention DP over `per` where
    its KV is replicated and the engine runs it, then with the experts over `per` where the engine runs that;
    a pinned size is kept."""
    m, eng, own = sc.model, get_engine(sc.engine), pinned_split(sc)
    # a pinned tensor × pipeline split is the split a deployment runs (kvplan import): kept as it is
    if not m.is_moe or per == 1 or sc.pinned.pipeline_parallel is not None or sc.pinned.tensor_parallel is not None:
        return (own,)
    d_pinned = sc.pinned.has(settings.pin("attention_dp"))
    e_pinned = sc.pinned.has(settings.pin("expert_parallel"))
    d = own.attention_dp if d_pinned else (
        per if eng.attention_dp is not None and float(kv_replication(m, per)) > 1 else 1)
    e = own.expert_parallel if e_pinned else per if eng.expert_parallel is not None else 1
    out = [own, Split(d, own.expert_parallel), Split(d, e)]
    return tuple(dict.fromkeys(s for s in out if s == own or s.attention_dp > 1))


def per_replica(sc: Scenario, replicas: int, per: int, split: Optional[Split] = None) -> Scenario:
    """The scenario of one replica of `per` devices, `replicas` of them sharing the rate, split as `split` says
    (pins the search sets; the spec's own where it pins them)."""
    one = attrs.evolve(sc, pins=with_pin(sc, "replicas", float(replicas))) if replicas != sc.replicas else sc
    split = split or pinned_split(sc)
    for key, n, now in (("attention_dp", split.attention_dp, sc.attention_dp),
                        ("expert_parallel", split.expert_parallel, sc.expert_parallel)):
        if n != now:
            one = attrs.evolve(one, pins=with_pin(one, key, float(n)))
    if sc.pinned.devices is not None:
        one = attrs.evolve(one, pins=with_pin(one, "devices", float(per)))
    return attrs.evolve(one, devices=DeviceCount("fixed", per))


def _order(t: Tried) -> tuple[float, float, int, int, int]:
    """Best first: most goodput, then lower ITL, then fewer devices in all, then fewer attention groups."""
    return (-t.goodput, t.itl, t.total, t.split.attention_dp, t.split.expert_parallel)


class _Search:
    """The layouts planned so far, at most MAX_LAYOUTS, keyed by (replicas, devices per replica, split); a split
    layout whose plan cuts the replica into pipeline stages is dropped (None)."""

    def __init__(self, sc: Scenario, evaluate: Callable[[Scenario], Served]) -> None:
        self.sc, self.evaluate = sc, evaluate
        self.most, self.only = bound_total(sc), replica_counts_allowed(sc)
        self.done: dict[tuple[int, int, Split], Tried] = {}
        self.dropped: set[tuple[int, int, Split]] = set()
        model, tp, pp = sc.model, sc.pinned.tensor_parallel, sc.pinned.pipeline_parallel
        counts = sorted({c for c in search.AUTO_DEVICE_COUNTS if c <= self.most}
                        | ({self.most} if sc.devices.mode != "auto" or sc.pinned.devices is not None else set()))
        #: the per-replica counts: a tensor × pipeline split of the model's heads and layers, the pinned one
        self.per_counts = tuple(c for c in counts if search.has_layout(model, c)
                                and (tp is None or c % tp == 0) and (pp is None or c % pp == 0)
                                and (tp is None or pp is None or c == tp * pp)) or tuple(counts[-1:])

    def splits(self, r: int, n: int) -> tuple[Split, ...]:
        """The splits tried on r replicas of n: splits() on one replica, the spec's own on several (SGLang refuses
        replicas beside attention DP in one server)."""
        return splits(self.sc, n) if r == 1 else (pinned_split(self.sc),)

    def plan(self, r: int, n: int, force: bool = False, split: Optional[Split] = None) -> Optional[Tried]:
        """r replicas of n devices, split as `split` says (default: the spec's), planned (once), or None: past the
        bound, the pinned count or MAX_LAYOUTS (unless `force`: the one layout planned when no allowed one exists,
        as the engine would run it), or a split layout the plan cuts into pipeline stages."""
        own = pinned_split(self.sc)
        split = split or own
        key = (r, n, split)
        if key in self.done or key in self.dropped:
            return self.done.get(key)
        if not force and (len(self.done) >= MAX_LAYOUTS or r * n > self.most
                          or (self.only is not None and r != self.only)):
            return None
        sc = self.sc
        q, fig, bound = self.evaluate(per_replica(sc, r, n, split))
        if split != own and q.tp != n:  # the engines run attention groups and experts over the whole TP group
            self.dropped.add(key)
            return None
        back = attrs.evolve(q.scenario, devices=sc.devices)  # the spec's count, the total
        if sc.pinned.devices is not None:
            back = attrs.evolve(back, pins=with_pin(back, "devices", float(sc.pinned.devices)))
        t = Tried(r, n, attrs.evolve(q, scenario=back), fig, bound, split)
        self.done[key] = t
        return t

    def each_group(self, r: int, n: int) -> list[Tried]:
        """r replicas of n planned with each split they take (splits)."""
        out = [self.plan(r, n, split=s) for s in self.splits(r, n)]
        return [t for t in out if t is not None]

    def at_total(self, total: int) -> list[Tried]:
        """Every layout of `total` devices in all: r replicas of n, n a per-replica count dividing it that fits
        (one replica that does not fit does not fit as many)."""
        own = pinned_split(self.sc)
        unfit = {n for (_, n, s), t in self.done.items() if not t.fits and s == own}
        return [t for n in self.per_counts if total % n == 0 and n not in unfit for t in self.each_group(total // n, n)]

    def ladder(self) -> Optional[int]:
        """One replica (or the pinned count) of each per-replica size, and replicas of it sized by its goodput:
        the least total that meets, or None."""
        best: Optional[int] = None
        only = self.only
        for n in self.per_counts:
            if best is not None and n * (only or 1) > best:
                break
            each = self.each_group(only or 1, n)
            if not each:
                continue
            t = min(each, key=_order)
            if t.meets:
                best = t.total if best is None else min(best, t.total)
            elif only is None and t.goodput > 0:
                # r replicas split the rate: the least r above the rate over the layout's goodput, and r + 1 (the
                # goodput is per replica at 1/r of the rate, so rounding can leave it short)
                r0 = max(2, math.floor(t.fig.rate.value / t.goodput) + 1)
                for r in (r0, r0 + 1):
                    u = None if best is not None and r * n > best else self.plan(r, n)
                    if u is not None and u.meets:
                        best = u.total if best is None else min(best, u.total)
                        break
        return best


def layout_search(sc: Scenario, evaluate: Callable[[Scenario], Served]) -> Found:
    """Plan the layouts of a request workload (module docstring) and choose one: at most MAX_LAYOUTS of them
    are planned whatever the spec says (each a settled batch plan of one replica)."""
    s = _Search(sc, evaluate)
    if exact(sc):
        if not s.at_total(s.most):  # no per-replica count divides the total: one layout, as the engine runs it
            r = s.only or 1
            if s.most % r:  # lint reports it on the pin (KV108); a plan made anyway has nothing true to say
                raise KvplanError(f"pin replicas = {r} does not divide the {s.most} devices in all",
                                  help=f"devices is the total over the replicas: make it a multiple of {r}")
            s.plan(r, s.most // r, force=True)
        tried = list(s.done.values())
        met = [t for t in tried if t.meets]
        return Found(min(met or tried, key=_order), tuple(tried), bool(met), s.most)
    best = s.ladder()
    if best is not None:
        s.at_total(best)  # compared at equal totals: every other split of the same devices
        met = [t for t in s.done.values() if t.meets and t.total == best]
        return Found(min(met, key=_order), tuple(s.done.values()), True, s.most)
    s.at_total(s.most)  # none meets: the layouts of the most devices allowed are the likeliest best
    if not s.done:
        raise KvplanError(f"pin replicas = {s.only} takes more than the {s.most} devices in all the spec allows",
                          help=f"allow at least {s.only} devices (one per replica), or pin fewer replicas")
    tried = list(s.done.values())
    return Found(min(tried, key=_order), tuple(tried), False, s.most)
