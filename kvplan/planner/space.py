"""What one batch plan starts from: the planner's assumed defaults, the reserves, the engine's pages and prefix
caching (R2), the scenario's SLOs and expected factors, and the candidate space after the pins, the quality
budget, the engine and the model's layouts."""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import attrs
import numpy as np

from kvplan.base.records import record
from kvplan.catalog import DTYPE_ORDER, DTYPES
from kvplan.catalog.engines import default_block_for, get_engine, kv_dtypes_for
from kvplan.catalog.quality import admissible
from kvplan.model import expected as ex
from kvplan.model import memory
from kvplan.model.footprint import fragmentation, sharing_factor
from kvplan.model.pools.query import Sizing
from kvplan.model.scenario import Scenario
from kvplan.planner import search
from kvplan.planner.search import Slos, Space

if TYPE_CHECKING:  # numpy.typing is for annotations only: its import costs the cold start
    import numpy.typing as npt



#: Fraction of each device's memory kept for activations, CUDA graphs and the runtime (assumed:
#: vLLM's default --gpu-memory-utilization of 0.92 leaves the same 8%); kvplan.model.memory holds it.
DEFAULT_RESERVE = memory.DEFAULT_RESERVE
#: A lossier option must shorten the step by at least this factor to be preferred (assumed).
DEFAULT_MIN_GAIN = 1.10


def scalar(x: npt.ArrayLike) -> float:
    return float(np.asarray(x))


def admissible_dtypes(budget: str, engine: str) -> tuple[str, ...]:
    """KV dtypes the budget admits (LANGUAGE.md) that the engine can store (on some device, for some model:
    `_space` narrows them to the scenario's with the record's `kv_requires`)."""

    allowed = admissible(budget, False).kv_dtypes
    eng = get_engine(engine)
    return tuple(d for d in DTYPE_ORDER if d in allowed and d in eng.kv_dtypes and d != "fp16")


def eviction_admissible(sc: Scenario) -> bool:
    return admissible(sc.budget, sc.eviction_allowed).eviction and get_engine(sc.engine).eviction


def runnable_dtypes(sc: Scenario) -> tuple[str, ...]:
    """The KV dtypes the budget admits that the engine stores on this device for this model (FP4 only with FP4
    hardware; the record's conditions), before a kv_dtype pin."""
    runs = kv_dtypes_for(get_engine(sc.engine), sc.device, sc.model)
    return tuple(x for x in admissible_dtypes(sc.budget, sc.engine) if x in runs)


def _space(sc: Scenario) -> tuple[Space, dict[str, str]]:
    """Candidate axes after pins, budget and engine; `why` says what removed an option.
    R3 is applied per candidate afterwards: whether a layout is below s* depends on its
    tensor-parallel replication."""
    why: dict[str, str] = {}
    dtypes = runnable_dtypes(sc)
    pins = sc.pinned
    pin_dt = pins.kv_dtype
    if pin_dt is not None:
        dtypes = (DTYPES[pin_dt].id if pin_dt in DTYPES else pin_dt,)
    retentions: tuple[float, ...] = (1.0,)
    if eviction_admissible(sc):
        retentions = (1.0,) + tuple(r for r in search.EVICTION_RETENTIONS if r >= max(0.5, sc.min_retention))
        if sc.min_retention not in retentions and 0.5 <= sc.min_retention < 1:
            retentions = retentions + (float(sc.min_retention),)
    if pins.retention is not None:
        retentions = (pins.retention,)
    if pins.devices is not None:
        counts: tuple[int, ...] = (pins.devices,)
    elif sc.devices.mode == "fixed":
        counts = (sc.devices.n,)
    else:
        cap = sc.devices.n
        counts = tuple(sorted({c for c in search.AUTO_DEVICE_COUNTS if c <= cap}
                              | ({cap} if sc.devices.mode == "max" else set())))
    pin_pl = pins.placement or (sc.placement if sc.placement != "auto" else None)
    if sc.device.partitions == 1:
        placements: tuple[str, ...] = ("striped",)
    elif pin_pl is not None:
        placements = (pin_pl,)
    else:
        placements = ("striped", "affinity")
    layout = Space(tuple(dtypes), retentions, counts, placements, pins.tensor_parallel, pins.pipeline_parallel)
    return attrs.evolve(layout, counts=layout.layout_counts(counts)), why


def _sharing(sc: Scenario, prefix_caching: bool) -> float:
    if not prefix_caching or sc.prefix <= 0 or sc.fanout <= 1:
        return 1.0
    n = min(sc.fanout, sc.batch)
    return scalar(sharing_factor(n, sc.context, sc.prefix)) if n > 1 else 1.0


@record
class Setup:
    """What every step of one plan reads: the reserves, the engine and the lossless domains (R2)."""

    reserves: memory.Reserves
    reserved: float          # bytes per device the reserves keep free
    block: int
    prefix_caching: bool
    sigma: float
    phi: float
    sizing: Sizing = "fill"  # how the engine's target is sized (kvplan.model.pools.query.Sizing)


def reserve_for(sc: Scenario, reserve: float) -> float:
    """The reserve fraction a plan is made with: the pinned memory fraction's rest, unless --reserve was given."""
    return 1.0 - sc.memory_fraction if sc.memory_fraction is not None and reserve == DEFAULT_RESERVE else reserve


def factors_for(sc: Scenario, kv_dtype: str) -> ex.Factors:
    """The expected-performance factors of the scenario at a KV dtype: kvplan's defaults for its device,
    engine and scale-up link, with its calibration profile's fit laid over them (docs/expected.md)."""
    return ex.deployment_factors(sc.device, kv_dtype, sc.engine, sc.calibration)


def slos(sc: Scenario) -> Slos:
    """The scenario's SLOs on a step and the figures they are checked against (`--slo-on`, default expected).
    A request workload's ttft is the TTFT under load, checked on the service figures (plan_service), not here."""
    return Slos(sc.slo_step_time, sc.slo_throughput, sc.slo_ttft if not sc.requests else None, sc.slo_on)


def setup_for(sc: Scenario, reserves: memory.Reserves) -> Setup:
    pin_pc = sc.pinned.prefix_caching
    prefix_caching = True if pin_pc is None else pin_pc
    block = sc.pinned.block_size or default_block_for(get_engine(sc.engine), sc.device, sc.model)
    return Setup(reserves, reserves.total(sc.device.memory), block, prefix_caching,
                 _sharing(sc, prefix_caching), scalar(fragmentation(sc.context, block)))


@record
class Found:
    """The candidate space and what the engine and the model's layouts left of it (search_space)."""

    space: Space
    why: dict[str, str]      # what removed an option; the rules add their notes to it
    pipeline: bool           # whether a candidate may use pipeline stages
    engine_gap: Optional[tuple[int, ...]]  # counts the engine cannot run (no pipeline, no head split), else None
    layout_gap: Optional[tuple[int, ...]]  # counts no tensor × pipeline split takes, when none does, else None


def search_space(sc: Scenario) -> Found:
    """The candidate space, whether it may use pipeline stages, the device counts the engine
    cannot run (no pipeline parallelism and no count that splits the heads), else None, and the
    counts no tensor × pipeline split of the model takes when none of them does, else None."""
    space, why = _space(sc)
    pipeline, engine_gap = get_engine(sc.engine).pipeline, None
    if not pipeline:  # every device must be a tensor-parallel rank, so the count must split the heads
        splittable = tuple(c for c in space.counts if c in search.tp_options(sc.model, c))
        if splittable:
            space = attrs.evolve(space, counts=splittable)
        else:
            pipeline = True
            engine_gap = space.counts
    # A count no tensor × pipeline split of the model takes (more stages than layers, or heads the
    # ranks cannot share) is never a valid plan: searched counts without one are dropped, and a
    # fixed count without one leaves the plan unmet ("layout") rather than planned on a split that
    # cannot run.
    layout_gap: Optional[tuple[int, ...]] = None
    laid = tuple(c for c in space.counts if search.has_layout(sc.model, c))
    if laid:
        space = attrs.evolve(space, counts=laid)
    else:
        layout_gap, engine_gap = space.counts, None
    # a searched count no layout of which keeps a pinned tp or pp is no plan either (pipeline_parallel = 1 pinned
    # does not make 64 ranks of 32 query heads a candidate); when no count keeps it, the pin is evaluated as given
    kept = tuple(c for c in space.counts if space.pinned_splits(sc.model, c, pipeline))
    if kept and (space.tp is not None or space.pp is not None):
        space = attrs.evolve(space, counts=kept)
    return Found(space, why, pipeline, engine_gap, layout_gap)
