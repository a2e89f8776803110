"""Fitting the expected model's factors to a user's own measurements (`kvplan calibrate`; docs/calibrate.md).

A `Measurement` is one run a benchmark reported (kvplan.engines.measurements reads the files): the
deployment it ran (model, device, devices, tensor parallel, weights, KV dtype, engine), its batch and
context, and what it measured — a decode step (ITL), a time to first token, a whole request's latency, or
the attention kernel alone on one rank (`kernel`: `kv_bytes` of KV read in the time, as `emit --target
flashinfer`'s benchmark measures it). Each is evidence `measured`; the fitted factors are `derived` and name
the profile they go in.

The fit uses exactly kvplan.model.expected's model. Every measured time is a sum of pieces, each the larger
of two linear forms in the unknowns

    x = (1/η_w, 1/η_kv per KV dtype, 1/η_π, t_fixed, collective latency, t_layer)

— a decode step is max(t_fixed + L·t_layer + W/β·(1/η_w) + K/β·(1/η_kv) + T_comm, t_fixed + L·t_layer +
F/π·(1/η_π)), a prefill max(weights once/β·(1/η_w), F_prefill/π·(1/η_π)) + T_comm + t_fixed + L·t_layer, with
W, K, F the bound's terms per rank, L the layers and T_comm = 2·L·(latency + bytes/link) on more than one rank.
A kernel measurement is one piece with no max: kv_bytes/β_eff·(1/η_kv), β_eff the KV stream's bandwidth per
rank as the bound uses it (kvplan.model.roofline.beta_eff for the deployment's placement; the datasheet β on
a one-partition device), so it pins its KV dtype's η_kv and nothing else. With the branch of each max fixed,
the model is linear in x: `fit` solves the least squares of the relative errors with numpy.linalg.lstsq, chooses the
branches again at the solution and repeats until they stay (at most MAX_ROUNDS rounds). A parameter is
determined when its unit vector lies in the row space of the design (the null space of the design does not
touch it); one that is not, one no measurement depends on (no tensor-parallel run: no collective latency) and
one whose fit falls outside its range (an η above 1: the measurements beat the bound; a bandwidth fraction
below ETA_FLOOR: a time the model has no term for) are left out of the profile, so kvplan uses the default.
A bandwidth fraction the design determines only because nothing else grows with the batch (η_kv on a batch
sweep at one context: the KV bytes grow with the batch alone) is held too: a column of a time per sequence
joined to the design (_growth_tied) must leave it determined. A closed-loop run's ITL (a concurrency sweep)
is the load model's T(N_d, s̄) / (1 − X·P) (kvplan.model.load.closed_loop, the planner's): the fit takes the
step at N_d and the time ITL·(1 − X·P) at the current factors and solves again until they stay.
The per-layer times are the exception to leaving a tie unfitted: on one tensor-parallel size the collective
latency (2·L per step) and t_layer (L) move together, and with one layer count t_layer moves with t_fixed,
and on one model η_w's weight time moves with t_fixed; the fit then holds the collective latency, then
t_layer, then η_w at its (reported) default (HOLD_WHEN_TIED) and fits the rest, so the time they share is
still fitted into t_fixed (and the profile says which one was held).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Mapping, Optional, Sequence, Union

import numpy as np

from kvplan.base.errors import KvplanError, Span
from kvplan.base.evidence import Evidence, Value
from kvplan.base.records import record
from kvplan.catalog import DTYPE_ORDER, Device, dtype, get_device, get_link, weight_bytes
from kvplan.catalog.hub import resolve_model
from kvplan.model import load
from kvplan.model.expected import (
    ALL_REDUCES_PER_LAYER,
    Factors,
    all_reduce_time,
    default_factors,
    expected_step,
    expected_ttft,
    group_bandwidth,
    layer_time,
    pipeline_time,
)
from kvplan.model.pools.vllm import batched_tier
from kvplan.model.roofline import Config, beta_eff, step_time, tensor_rate, weight_bytes_read
from kvplan.model.tiering import prefill_flops

if TYPE_CHECKING:  # numpy.typing is for annotations only: its import costs the cold start
    import numpy.typing as npt

    ArrayLike = Union[float, int, npt.NDArray[np.float64]]
    Array = npt.NDArray[np.float64]

#: Rounds of choosing each max's branch and solving again; the branches settle in two or three.
MAX_ROUNDS = 20
#: The most decode steps one request latency sums (a `vllm bench latency` run's --output-len): kvplan's own
#: limit, far above what a latency benchmark generates, and what keeps one measurement's work bounded.
MAX_REQUEST_STEPS = 65_536
#: The most measured times one `kvplan calibrate` run fits: kvplan's own limit, far above a benchmark
#: campaign's few hundred, and what keeps the fit's time and memory bounded.
MAX_MEASURED_TIMES = 10_000
#: A singular value below this fraction of the largest (columns scaled to unit length) counts as zero.
RANK_TOLERANCE = 1e-9
#: A parameter whose component in the design's null space is below this is determined.
NULL_TOLERANCE = 1e-6
#: The kinds of measured time, as printed.
KINDS = ("itl", "ttft", "request", "kernel")
#: Parameters held at their defaults, in this order, while the data cannot separate them from the others: a
#: per-layer time that moves with another fixed time is given to that one rather than left out with it, and the
#: weight stream's η_w (a reported default) is held where one model's steps all read the same weights, so that
#: t_fixed takes the time the two share (issue 22: a single-model sweep fits the per-step constant).
HOLD_WHEN_TIED = ("collective_latency", "t_layer", "eta_w")
#: The least a fitted bandwidth fraction (η_w, η_kv) may be: kvplan's own sanity floor (assumed, no measurement
#: behind the figure; the catalog's reported fractions are 0.6-0.95). A fit below it has put a time the model has
#: no term for (the batch's GEMM growth, issue 22's MI300X sweeps at η_kv 0.006-0.04) into a bandwidth: it is
#: refused and the fraction held at its default.
ETA_FLOOR = 0.2
#: Rounds of solving a closed-loop (concurrency) run's ITL through the load model: the decode batch N_d and the
#: prefill stretch 1 − X·P are taken at the current factors, the fit solved, and repeated until the factors stay.
MAX_LOAD_ROUNDS = 40
#: The relative change of every unknown below which the closed-loop rounds stop.
LOAD_TOLERANCE = 1e-12


@record
class Measurement:
    """One measured run, as a benchmark reported it (evidence `measured`). Times in seconds; `context` is the
    tokens per sequence at the decode step the ITL measures (the mean over a run's steps); `prefill_prompts`
    counts the prompts the measured TTFT prefilled together (1: one request alone; a batch for SGLang's
    bench_one_batch; 0: the TTFT waited behind other requests and is not fitted). `request_s` is a whole
    request's latency (`vllm bench latency`): the prefill of `batch` prompts of `input_len` tokens and
    `output_len` − 1 decode steps. `kernel_s` is the attention kernel alone on one rank reading `kv_bytes`
    bytes of KV (B): a kernel benchmark's row, which measures η_kv and nothing else. `span` is where in its
    file the figures are."""

    model: str
    device: str
    devices: int
    tensor_parallel: int
    weights: str           # a dtype id; "" = the checkpoint's own bytes (docs/weights.md)
    kv_dtype: str
    engine: str            # vllm, sglang, trtllm or any
    batch: int
    context: float
    itl_s: Optional[float]
    ttft_s: Optional[float] = None
    request_s: Optional[float] = None
    input_len: Optional[int] = None
    output_len: Optional[int] = None
    prefill_prompts: int = 1
    span: Span = Span("", 1, 1, 1, 1)
    kernel_s: Optional[float] = None
    kv_bytes: Optional[float] = None
    #: C, the clients of a closed loop (`vllm bench serve --max-concurrency C`, SGLang bench_serving): its ITL
    #: is the load model's (kvplan.model.load.closed_loop at input_len and output_len), prefill interference and
    #: all, not a step at batch C. None: the ITL is one decode step at `batch`.
    clients: Optional[int] = None

    def observed(self) -> tuple[tuple[str, float], ...]:
        """(kind, seconds) of each time this run measured that the fit uses."""
        out = []
        if self.itl_s is not None:
            out.append(("itl", self.itl_s))
        if self.ttft_s is not None and self.prefill_prompts > 0 and self.input_len:
            out.append(("ttft", self.ttft_s))
        if self.request_s is not None:
            out.append(("request", self.request_s))
        if self.kernel_s is not None and self.kv_bytes:
            out.append(("kernel", self.kernel_s))
        return tuple(out)


@record
class Deployment:
    """What a measurement ran on, resolved: the roofline Config and the scale-up link's B/s (None: none)."""

    cfg: Config
    link_bandwidth: Optional[float]
    link: str


def deployment(m: Measurement) -> Deployment:
    """The Config a measurement ran: its model (catalog, Hugging Face cache or repo id), weights (the
    checkpoint's own where `weights` is ""), KV dtype, device and layout; an unknown name is an error at the
    measurement's place."""
    try:
        device = get_device(m.device)
        model, w = weight_bytes.planned(resolve_model(m.model, None), dtype(m.weights) if m.weights else None)
        cfg = Config(model, device, n_devices=m.devices, tp=m.tensor_parallel, w_p=w.width,
                     w_kv=dtype(m.kv_dtype).width)
    except KvplanError as exc:
        raise KvplanError(exc.message, help=exc.help, span=m.span) from None
    link = device.scaleup_link or ""
    return Deployment(cfg, get_link(link).bandwidth if link else None, link)


def prefill_time(cfg: Config, prompts: int, prompt: int, f: Factors, link_bandwidth: Optional[float]) -> float:
    """Seconds to prefill `prompts` prompts of `prompt` tokens together: expected_ttft's terms for the
    batch — max(prompts · F_prefill(prompt) / (tp · η_π · π), weights read once / (tp · η_w · β)) plus the
    all-reduces over every prompt token and t_fixed. One prompt is expected_ttft exactly."""
    if prompts == 1:
        return float(expected_ttft(cfg, prompt, f, link_bandwidth).ttft)
    coef = _prefill_terms(cfg, prompts, prompt, link_bandwidth)
    prefill = max(coef["compute"] / f.eta_compute.value, coef["weights"] / f.eta_w.value)
    return (prefill + coef["latency"] * f.collective_latency.value + coef["bytes"] + f.t_fixed.value
            + float(layer_time(cfg.model, f.t_layer.value, f.t_moe.value)))


def _prefill_terms(cfg: Config, prompts: int, prompt: int, link_bandwidth: Optional[float]) -> dict[str, float]:
    tokens = prompts * prompt
    return {"compute": prompts * float(prefill_flops(cfg.model, prompt)) / (cfg.tp * tensor_rate(cfg.device, cfg.w_p)),
            "weights": float(weight_bytes_read(cfg.model, tokens, cfg.w_p)) / (cfg.tp * cfg.device.bandwidth),
            "latency": _collectives(cfg),
            "bytes": _comm_bytes(cfg, tokens, link_bandwidth)}


def _collectives(cfg: Config) -> float:
    """Collectives of one forward pass, each paying collective_latency: two all-reduces per layer on more than
    one rank, one transfer per pipeline stage boundary (SPEC §12)."""
    return (float(ALL_REDUCES_PER_LAYER * cfg.model.n_layers) if cfg.tp > 1 else 0.0) + cfg.n_devices / cfg.tp - 1


def _comm_bytes(cfg: Config, tokens: float, link_bandwidth: Optional[float]) -> float:
    """Seconds the collectives' bytes of one forward pass over `tokens` tokens take, latencies apart: the
    all-reduces at the link the group spans and the pipeline's transfers (expected_from_bound's T_comm)."""
    bw = group_bandwidth(cfg.device, cfg.tp, cfg.n_devices, link_bandwidth)
    return float(all_reduce_time(cfg.model, tokens, cfg.tp, bw, 0.0)
                 + pipeline_time(cfg.model, cfg.device, tokens, cfg.tp, cfg.n_devices, link_bandwidth, 0.0))


def request_steps(m: Measurement) -> Array:
    """The contexts of a request's decode steps: input_len + 1 … input_len + output_len − 1."""
    n = (m.output_len or 1) - 1
    return (m.input_len or 0) + np.arange(1, n + 1, dtype=np.float64)


def kernel_bandwidth(m: Measurement, d: Deployment) -> float:
    """The bandwidth (B/s) a kernel measurement's KV streams at per rank in the bound: β_eff of the
    deployment's placement at its batch (the datasheet β on a one-partition device), as step_time's KV term."""
    return float(beta_eff(d.cfg.device, d.cfg.placement, m.batch)[0])


def closed_loop(m: Measurement, d: Deployment, f: Factors) -> load.Load:
    """The load model's steady state of a closed-loop run (`m.clients` clients, input_len and output_len tokens),
    as the planner solves a `workload { concurrency = C }` (kvplan.planner.service): the prefill chunk is vLLM's
    default --max-num-batched-tokens for the device (SGLang's --chunked-prefill-size is the same from 60 GiB)."""
    chunk = batched_tier(d.cfg.device.memory, d.cfg.device.id)[0]
    sv = load.Service(0.0, m.input_len or 1, max(m.output_len or 2, 2), chunk, clients=float(m.clients or 1))
    try:
        return load.solve(d.cfg, f, d.link_bandwidth, sv)
    except KvplanError as exc:
        raise KvplanError(exc.message, help=exc.help, span=m.span) from None


def expected_time(m: Measurement, kind: str, d: Deployment, f: Factors) -> float:
    """What kvplan's model predicts for the time of `kind` this measurement measured: a closed loop's ITL through
    the load model (closed_loop), every other time through kvplan.model.expected."""
    cfg, link = d.cfg, d.link_bandwidth
    if kind == "kernel":
        return float(m.kv_bytes or 0.0) / (f.eta_kv.value * kernel_bandwidth(m, d))
    if kind == "itl" and m.clients is not None:
        return closed_loop(m, d, f).itl
    if kind == "itl":
        return float(expected_step(cfg, m.batch, m.context, f, link).step)
    if kind == "ttft":
        return prefill_time(cfg, m.prefill_prompts, m.input_len or 1, f, link)
    steps = request_steps(m)
    decode = float(np.sum(expected_step(cfg, m.batch, steps, f, link).step)) if steps.size else 0.0
    return prefill_time(cfg, m.batch, m.input_len or 1, f, link) + decode


# ------------------------------------------------------------------ the design

@record
class _Pieces:
    """One measured time as a sum over pieces k of max(A[k]·x + a[k], B[k]·x + b[k]); `g[k]` the sequences the
    piece's decode step runs (0 for a prefill or a kernel): the batch-growth direction the fit tests a bandwidth
    fraction against (_growth_tied), and where a factor for the batch's own growth would join the design."""

    A: Array
    a: Array
    B: Array
    b: Array
    g: Array


def _names(kv: Sequence[str]) -> tuple[str, ...]:
    return ("eta_w", *(f"eta_kv:{k}" for k in kv), "eta_compute", "t_fixed", "collective_latency", "t_layer")


def _pieces(m: Measurement, kind: str, d: Deployment, names: Sequence[str],
            at: Optional[tuple[float, float]] = None) -> _Pieces:
    """The linear forms of each piece of a measured time, in the unknowns `names` (docstring above); `at` the
    (batch, context) of an ITL's step where it is not the measurement's own (a closed loop's N_d and s̄)."""
    cfg, link, col = d.cfg, d.link_bandwidth, {n: i for i, n in enumerate(names)}
    batch, context = at if at is not None else (float(m.batch), m.context)
    kv = col[f"eta_kv:{dtype(m.kv_dtype).id}"]
    P = len(names)
    # an MoE model's routing kernels (L · t_moe): a default the fit holds, a constant of every step and prefill
    moe = float(layer_time(cfg.model, 0.0, _t_moe(m, d).value))
    A, a, B, b, g = np.zeros((0, P)), np.zeros(0), np.zeros((0, P)), np.zeros(0), np.zeros(0)
    if kind == "kernel":  # one piece, both branches the same: kv_bytes/β_eff · 1/η_kv
        A = np.zeros((1, P))
        A[0, kv] = float(m.kv_bytes or 0.0) / kernel_bandwidth(m, d)
        return _Pieces(A, np.zeros(1), A.copy(), np.zeros(1), np.zeros(1))
    if kind in ("ttft", "request"):
        prompts = m.prefill_prompts if kind == "ttft" else m.batch
        t = _prefill_terms(cfg, prompts, m.input_len or 1, link)
        A, B = np.zeros((1, P)), np.zeros((1, P))
        A[0, col["eta_w"]], B[0, col["eta_compute"]] = t["weights"], t["compute"]
        A[0, col["t_fixed"]] = B[0, col["t_fixed"]] = 1.0
        A[0, col["t_layer"]] = B[0, col["t_layer"]] = float(cfg.model.n_layers)
        A[0, col["collective_latency"]] = B[0, col["collective_latency"]] = t["latency"]
        a, b, g = np.array([t["bytes"] + moe]), np.array([t["bytes"] + moe]), np.zeros(1)
    contexts = np.array([context]) if kind == "itl" else request_steps(m) if kind == "request" else np.zeros(0)
    if contexts.size:
        bound = step_time(cfg, batch, contexts)
        sa, sb = np.zeros((contexts.size, P)), np.zeros((contexts.size, P))
        sa[:, col["eta_w"]] = np.broadcast_to(bound.weights, contexts.shape)
        sa[:, kv] = np.broadcast_to(bound.kv, contexts.shape)
        sa[:, col["collective_latency"]] = _collectives(cfg)
        sb[:, col["eta_compute"]] = np.broadcast_to(bound.compute, contexts.shape)
        sa[:, col["t_fixed"]] = sb[:, col["t_fixed"]] = 1.0
        sa[:, col["t_layer"]] = sb[:, col["t_layer"]] = float(cfg.model.n_layers)
        comm = _comm_bytes(cfg, batch, link)
        A, B = np.vstack([A, sa]), np.vstack([B, sb])
        a = np.concatenate([a, np.full(contexts.size, comm + moe)])
        b = np.concatenate([b, np.full(contexts.size, moe)])
        g = np.concatenate([g, np.full(contexts.size, batch)])
    return _Pieces(A, a, B, b, g)


def _linear(p: _Pieces, x: Array) -> tuple[Array, float, npt.NDArray[np.bool_]]:
    """The row and constant of the design with each max's branch chosen at x, and the choice (True: A)."""
    first = p.A @ x + p.a >= p.B @ x + p.b
    row: Array = np.where(first[:, None], p.A, p.B).sum(axis=0)
    return row, float(np.where(first, p.a, p.b).sum()), first


def _linearized(obs: Sequence[tuple[Measurement, Deployment, str, float]], names: Sequence[str], x: Array,
                source: str) -> tuple[list[_Pieces], Array]:
    """Each measured time's pieces and the time they must sum to, at the unknowns x: a closed loop's ITL is
    T(N_d, s̄) / (1 − X·P) (kvplan.model.load), so its step at the loop's N_d and s̄ (the factors x give them)
    must take ITL · (1 − X·P); the measured ITL already holds the prefill stretch, and the planner, which
    divides by (1 − X·P) once, must not find it in the step a second time. Every other time is its own."""
    pieces, y = [], []
    for m, d, kind, t in obs:
        if kind == "itl" and m.clients is not None:
            ld = closed_loop(m, d, _factors(x, names, dtype(m.kv_dtype).id, source, _t_moe(m, d)))
            pieces.append(_pieces(m, kind, d, names, (ld.decode_batch, ld.mean_context)))
            y.append(t * (1.0 - (ld.throughput or 0.0) * ld.chunk_time))
        else:
            pieces.append(_pieces(m, kind, d, names))
            y.append(t)
    return pieces, np.array(y)


# ------------------------------------------------------------------ the fit

@record
class Residual:
    """One measured time beside the fitted model's: the error is (fitted − measured) / measured."""

    span: Span
    kind: str
    measured: Value
    fitted: Value
    error: float


@record
class Fit:
    """The factors fitted for one (device, engine): `fitted` holds the determined ones (eta_w, eta_kv:<dtype>,
    eta_compute, t_fixed, collective_latency; derived), `kv_efficiency` each determined η_kv / η_w (with the
    default η_w where η_w is not determined), `left_out` each parameter the profile leaves to its default and
    why, `residuals` each measured time against the profile as written."""

    device: str
    engine: str
    fitted: tuple[tuple[str, Value], ...]
    kv_efficiency: tuple[tuple[str, Value], ...]
    left_out: tuple[tuple[str, str], ...]
    residuals: tuple[Residual, ...]
    points: int
    rms: Value
    rms_relative: Value

    @property
    def written(self) -> bool:
        """Whether the fit determined anything a profile can carry."""
        return any(n in ("eta_w", "eta_compute", "t_fixed", "collective_latency", "t_layer")
                   for n, _ in self.fitted) or \
            bool(self.kv_efficiency)


def _group_key(m: Measurement) -> tuple[str, str]:
    try:
        return get_device(m.device).id, m.engine
    except KvplanError as exc:
        raise KvplanError(exc.message, help=exc.help, span=m.span) from None


def fit(measurements: Sequence[Measurement], profile: str) -> tuple[Fit, ...]:
    """One Fit per (device, engine) the measurements cover, in sorted order; `profile` names the file the
    factors go in (their source)."""
    times = sum(len(m.observed()) for m in measurements)
    if times > MAX_MEASURED_TIMES:
        raise KvplanError(f"{times:,} measured times: kvplan fits at most {MAX_MEASURED_TIMES:,} in one run",
                          help="fit a sample of them, or each device in its own run")
    groups: dict[tuple[str, str], list[Measurement]] = {}
    for m in measurements:
        groups.setdefault(_group_key(m), []).append(m)
    return tuple(_fit_group(get_device(dev), eng, groups[(dev, eng)], profile) for dev, eng in sorted(groups))


def _defaults(device: Device, engine: str, link: str, kv: Sequence[str]) -> tuple[Array, dict[str, Factors]]:
    """The default of each unknown (inverted fractions) and kvplan's default Factors per KV dtype."""
    per = {k: default_factors(device, k, engine, link) for k in kv}
    f = per[kv[0]]
    x = [1.0 / f.eta_w.value, *(1.0 / per[k].eta_kv.value for k in kv), 1.0 / f.eta_compute.value,
         f.t_fixed.value, f.collective_latency.value, f.t_layer.value]
    return np.array(x), per


def _t_moe(m: Measurement, d: Deployment) -> Value:
    """The default per-MoE-layer time of the measurement's engine: the fit holds it (docs/expected.md)."""
    return default_factors(d.cfg.device, m.kv_dtype, m.engine, d.link).t_moe


def _factors(x: Array, names: Sequence[str], kv: str, source: str, t_moe: Value) -> Factors:
    col = {n: i for i, n in enumerate(names)}

    def v(name: str, unit: str, invert: bool) -> Value:
        raw = float(x[col[name]])
        return Value(1.0 / raw if invert else raw, unit, Evidence.DERIVED, source)
    return Factors(v("eta_w", "x", True), v(f"eta_kv:{kv}", "x", True), v("eta_compute", "x", True),
                   v("t_fixed", "s", False), v("collective_latency", "s", False), v("t_layer", "s", False),
                   t_moe, profile=source)


def _determined(M: Array) -> tuple[Array, Array]:
    """Which columns of M (rows and columns already scaled) the data determine: those the null space misses;
    and the null space's basis (one row per direction the data cannot see)."""
    if M.shape[0] < M.shape[1]:  # fewer measured times than unknowns: zero rows keep every null direction
        M = np.vstack([M, np.zeros((M.shape[1] - M.shape[0], M.shape[1]))])
    _, s, vt = np.linalg.svd(M, full_matrices=False)
    rank = int(np.sum(s > RANK_TOLERANCE * s[0])) if s.size and s[0] > 0 else 0
    null: Array = vt[rank:]
    known: Array = np.linalg.norm(null, axis=0) < NULL_TOLERANCE if null.size else np.ones(M.shape[1], dtype=bool)
    return known, null


def _bandwidth(name: str) -> bool:
    """Whether an unknown is a bandwidth fraction (η_w, η_kv of a KV dtype), which never takes batch growth."""
    return name == "eta_w" or name.startswith("eta_kv:")


def _valid(name: str, value: float) -> str:
    """'' when a fitted unknown is in its range, else why not (the profile format's rules, and ETA_FLOOR for a
    bandwidth fraction)."""
    if name.startswith("eta"):
        eta = 1.0 / value if value > 0 else float("inf")
        if not 0 < eta <= 1:
            return (f"fitted {name.replace(':', ' ')} = {eta:.4g} is above 1: the measurements beat the bound"
                    if value > 0 else f"fitted 1/{name} = {value:.4g} is not positive")
        if _bandwidth(name) and eta < ETA_FLOOR:
            return (f"fitted {_shown(name)} = {eta:.4g} is below {ETA_FLOOR:g}, the least a bandwidth fraction may "
                    "be: the measurements hold a time the model has no term for (the batch's own growth), not a "
                    "bandwidth; held at its default")
        return ""
    return f"fitted {name} = {value:.4g} s is negative" if value < 0 else ""


def _growth_tied(names: Sequence[str], free: Sequence[int], known: Array, M: Array, growth: Array) -> list[str]:
    """The determined bandwidth fractions the data cannot tell from batch growth: determined by the design M
    (columns scaled) but not once a column for a time per sequence in the step (`growth`, scaled like M's rows)
    joins it. On a batch sweep at one context the KV bytes grow with the batch alone, so η_kv would take the
    batch's GEMM growth; a sweep over context too separates them."""
    norm = float(np.linalg.norm(growth))
    if norm == 0:
        return []
    with_growth, _ = _determined(np.hstack([M, (growth / norm)[:, None]]))
    return [names[j] for a, j in enumerate(free) if known[a] and _bandwidth(names[j]) and not with_growth[a]]


@record
class _Solved:
    names: tuple[str, ...]
    x: Array
    determined: frozenset[str]
    out_of_range: Mapping[str, str]
    rows: Array
    tied: Mapping[str, tuple[str, ...]]  # an undetermined parameter -> those it moves with in the null space


# Each round: branches at the current x, the scaled least squares, what it determines, what is out of range;
# a parameter out of range is held at its default and the rest solved again.
def _solve(pieces: Sequence[_Pieces], y: Array, names: tuple[str, ...], x_def: Array) -> _Solved:
    P = len(names)
    fixed: dict[str, str] = {}
    x, choice = x_def.copy(), None
    determined: set[str] = set()
    for _ in range(MAX_ROUNDS):
        lin = [_linear(p, x) for p in pieces]
        D, c = np.array([r for r, _, _ in lin]), np.array([k for _, k, _ in lin])
        growth = np.array([float(p.g.sum()) for p in pieces]) / y
        free = [j for j in range(P) if np.any(D[:, j] != 0) and names[j] not in fixed]
        held = [j for j in range(P) if j not in free]
        M = D[:, free] / y[:, None]
        norms = np.linalg.norm(M, axis=0)
        norms[norms == 0] = 1.0
        target = (y - c - D[:, held] @ x_def[held]) / y
        sol = np.linalg.lstsq(M / norms, target, rcond=None)[0] / norms if free else np.zeros(0)
        known, null = _determined(M / norms) if free else (np.zeros(0, dtype=bool), np.zeros((0, 0)))
        x_new, determined, bad = x_def.copy(), set(), False
        for name in _growth_tied(names, free, known, M / norms, growth) if free else []:
            fixed[name], bad = ("not separable from batch growth: these measurements vary the batch but not the "
                                "context enough to tell the KV bytes from a time per sequence; held at its "
                                "default"), True
        for j, value, ok in zip(free, sol, known):
            if names[j] in fixed:
                continue
            why = _valid(names[j], float(value)) if ok else ""
            if why:
                fixed[names[j]], bad = why, True
            elif ok:
                x_new[j] = value
                determined.add(names[j])
        tie = _hold(names, free, known, null) if not bad else None
        if tie is not None:
            fixed[tie[0]], bad = tie[1], True
        new_choice = [_linear(p, x_new)[2] for p in pieces]
        settled = choice is not None and all(np.array_equal(a, b) for a, b in zip(choice, new_choice))
        x, choice = x_new, new_choice
        if settled and not bad:
            break
    D = np.array([_linear(p, x)[0] for p in pieces])
    return _Solved(names, x, frozenset(determined), fixed, D, _ties(names, free, known, null))


def _hold(names: Sequence[str], free: Sequence[int], known: Array, null: Array) -> Optional[tuple[str, str]]:
    """The first parameter of HOLD_WHEN_TIED the data cannot separate from another, and why it is held at its
    default; None when there is none."""
    ties = _ties(names, free, known, null)
    for name in HOLD_WHEN_TIED:
        if ties.get(name):
            with_ = ", ".join(_shown(t) for t in ties[name])
            return name, (f"not determined by the data: these measurements cannot separate it from {with_}; held "
                          f"at its default so that {with_} take{'s' if len(ties[name]) == 1 else ''} the time they "
                          "share")
    return None


def _ties(names: Sequence[str], free: Sequence[int], known: Array, null: Array) -> dict[str, tuple[str, ...]]:
    """For each undetermined parameter, the others that share a direction of the null space with it."""
    out: dict[str, tuple[str, ...]] = {}
    for a, ja in enumerate(free):
        if known[a]:
            continue
        out[names[ja]] = tuple(names[jb] for b, jb in enumerate(free)
                               if b != a and not known[b] and np.any(np.abs(null[:, a] * null[:, b]) > NULL_TOLERANCE))
    return out


def _why_out(name: str, solved: _Solved, kernel_only: bool) -> str:
    """Why the profile leaves `name` to its default (`kernel_only`: every measurement timed a kernel alone)."""
    if name in solved.out_of_range:
        return solved.out_of_range[name]
    if not np.any(solved.rows[:, solved.names.index(name)] != 0):
        if kernel_only:
            return "not determined: the measurements time the attention kernel alone, which gives η_kv only"
        return {"collective_latency": "no measurement on more than one rank",
                "eta_compute": "no compute-bound step or prefill among the measurements"}.get(
            name, "no measurement depends on it")
    tied = solved.tied.get(name, ())
    with_ = f": these measurements cannot separate it from {', '.join(_shown(t) for t in tied)}" if tied else ""
    return f"not determined by the data{with_}"


def _shown(name: str) -> str:
    """'eta_kv:fp8' -> 'eta_kv (fp8)'."""
    return name.replace(":", " (") + ")" if ":" in name else name


def _kv_dtypes(ms: Sequence[Measurement]) -> list[str]:
    rank = {k: i for i, k in enumerate(DTYPE_ORDER)}
    return sorted({dtype(m.kv_dtype).id for m in ms}, key=lambda k: (rank.get(k, len(rank)), k))


def _kv_efficiency(solved: _Solved, kv: Sequence[str], left: dict[str, str],
                   source: str) -> list[tuple[str, Value]]:
    """η_kv / η_w of each determined KV dtype (η_w fitted or default, as the profile's reader will use it)."""
    eta_w = 1.0 / float(solved.x[0])
    out = []
    for k in kv:
        name = f"eta_kv:{k}"
        if name not in solved.determined:
            continue
        ratio = (1.0 / float(solved.x[solved.names.index(name)])) / eta_w
        if 0 < ratio <= 1:
            out.append((k, Value(ratio, "x", Evidence.DERIVED, source)))
        else:
            left[name] = f"fitted η_kv/η_w = {ratio:.4g} is above 1: the KV stream faster than the weights"
    return out


def _as_written(solved: _Solved, left: Mapping[str, str], per: Mapping[str, Factors]) -> Array:
    """The unknowns as the profile's reader will see them: a KV dtype left out gets η_w × its default
    kv_efficiency, every other left-out parameter its default (already in x)."""
    x = solved.x.copy()
    eta_w = 1.0 / float(x[0])
    for name in left:
        if name.startswith("eta_kv:"):
            f = per[name.split(":", 1)[1]]
            x[solved.names.index(name)] = 1.0 / (eta_w * f.eta_kv.value / f.eta_w.value)
    return x


def _solve_loaded(obs: Sequence[tuple[Measurement, Deployment, str, float]], names: tuple[str, ...], x_def: Array,
                  per: Mapping[str, Factors], source: str) -> _Solved:
    """The solve, repeated while a closed loop's N_d and prefill stretch (taken at the last round's factors, as
    the profile will write them) move the solution; one round when no measurement is a closed loop."""
    x = x_def
    loops = any(m.clients is not None and kind == "itl" for m, _, kind, _ in obs)
    for _ in range(MAX_LOAD_ROUNDS if loops else 1):
        pieces, y = _linearized(obs, names, x, source)
        solved = _solve(pieces, y, names, x_def)
        x_new = _as_written(solved, {n: "" for n in names if n not in solved.determined}, per)
        settled = bool(np.all(np.abs(x_new - x) <= LOAD_TOLERANCE * np.abs(x)))
        x = x_new
        if settled:
            break
    return solved


def _fit_group(device: Device, engine: str, ms: Sequence[Measurement], profile: str) -> Fit:
    """One (device, engine): the design, the solve, then the profile's values, the residuals and the RMS."""
    cache: dict[tuple[str, str, int, int, str, str], Deployment] = {}
    deps = []
    for m in ms:
        key = (m.model, m.device, m.devices, m.tensor_parallel, m.weights, m.kv_dtype)
        if key not in cache:
            cache[key] = deployment(m)
        deps.append(cache[key])
    kv = _kv_dtypes(ms)
    names = _names(kv)
    x_def, per = _defaults(device, engine, deps[0].link, kv)
    obs = [(m, d, kind, t) for m, d in zip(ms, deps) for kind, t in m.observed()]
    if not obs:
        raise KvplanError(f"no measured time to fit for {device.id}/{engine}", span=ms[0].span)
    source = (f"calibrated in {profile} [fit {device.id}/{engine}] from {len(obs)} "
              f"measurement{'s' if len(obs) != 1 else ''}")
    solved = _solve_loaded(obs, names, x_def, per, source)
    fitted = [(n, _value(n, float(solved.x[i]), source)) for i, n in enumerate(names) if n in solved.determined]
    kernel_only = all(kind == "kernel" for _, _, kind, _ in obs)
    left = {n: _why_out(n, solved, kernel_only) for n in names if n not in solved.determined}
    kv_eff = _kv_efficiency(solved, kv, left, source)
    x = _as_written(solved, left, per)
    residuals = []
    for m, d, kind, t in obs:
        got = expected_time(m, kind, d, _factors(x, names, dtype(m.kv_dtype).id, source, _t_moe(m, d)))
        residuals.append(Residual(m.span, kind, Value(t, "s", Evidence.MEASURED, str(m.span)),
                                  Value(got, "s", Evidence.DERIVED, source), (got - t) / t))
    err = np.array([r.fitted.value - r.measured.value for r in residuals])
    rel = np.array([r.error for r in residuals])
    order = {n: i for i, n in enumerate(names)}
    return Fit(device.id, engine, tuple(fitted), tuple(kv_eff), tuple(sorted(left.items(), key=lambda i: order[i[0]])),
               tuple(residuals), len(obs),
               Value(float(np.sqrt(np.mean(err**2))), "s", Evidence.DERIVED, f"RMS residual, {source}"),
               Value(float(np.sqrt(np.mean(rel**2))), "%", Evidence.DERIVED, f"RMS relative residual, {source}"))


def _value(name: str, raw: float, source: str) -> Value:
    if name.startswith("eta"):
        return Value(1.0 / raw, "x", Evidence.DERIVED, source)
    return Value(raw, "s", Evidence.DERIVED, source)


__all__ = ["Deployment", "Fit", "KINDS", "MAX_MEASURED_TIMES", "MAX_REQUEST_STEPS", "MAX_ROUNDS", "Measurement",
           "Residual", "deployment", "expected_time", "fit", "prefill_time", "request_steps"]
