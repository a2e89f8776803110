"""From a step to a service: continuous batching at a request rate (docs/service.md).

The scheduler modelled is the one vLLM and SGLang run by default, reduced to what sets the figures:

* requests of `n_in` prompt tokens and `n_out` output tokens arrive at `rate` λ per second;
* every engine iteration runs one decode step of the `N_d` sequences that are generating, at the expected step
  T(N_d, s̄) (kvplan.model.expected.expected_step) at the mean context s̄ = n_in + n_out/2 a generating sequence
  holds (it grows from n_in + 1 to n_in + n_out − 1 as it generates);
* one prompt is prefilled at a time, first come first served, in chunks of at most `chunk` tokens, one chunk per
  iteration: a chunk of c tokens rides on the iteration's decode step and lengthens it by c/n_in · P, where P is the
  expected prefill of the prompt alone less the per-step overhead (the step already pays t_fixed and L·t_layer); a
  prompt takes k = ⌈n_in / chunk⌉ iterations, and its last chunk yields the request's first token;
* the iteration is the decoders' inter-token time: each generating sequence gains one token per iteration.

Closed form (fluid in the decode stage, M/D/1 or D/D/1 for the prefill queue):

    per second the prefill chunks take λ·P of the engine's time, so iterations run at (1 − λ·P)/T(N_d) per second:
        ITL = T(N_d) / (1 − λ·P)
    Little's law on the decode stage (n_out − 1 tokens after the first):  N_d = λ · (n_out − 1) · ITL,
        a fixed point in N_d, solved for the least root on a grid and refined by bisection (bounded)
    a prompt's prefill occupies k iterations:  S = k · T(N_d) + P,  utilization ρ = λ·S
    its wait for the prefill slot: Poisson arrivals W = ρ·S / (2(1 − ρ)) (Pollaczek–Khinchine, deterministic
        service); deterministic arrivals W = 0; plus, when the slot is free, the rest of the iteration in
        progress, (1 − ρ) · T(N_d) / 2
    TTFT = (1 − ρ)·T/2 + W + S;  concurrency (requests in the engine) N = λ · (TTFT + (n_out − 1) · ITL)
    running sequences (what --max-num-seqs must admit): N_d + ρ

Distribution-shaped lengths (docs/service.md): with n_in and n_out independent and uniform over integer ranges,
P, k and S are functions of n_in and the figures take their expectations: ITL = T(N_d, s̄)/(1 − λ·E[P]),
N_d = λ·E[n_out − 1]·ITL, ρ = λ·E[S], and the M/G/1 wait W = λ·E[S²]/(2(1 − ρ)); s̄ is the token-weighted mean
context (kvplan.model.scenario.mean_context) and the tail the longest input + the longest output. A fixed length is
the degenerate distribution and gives the figures above, bit for bit.

Saturation: no steady state exists once ρ reaches 1 (every iteration carries a chunk: N_d = (n_out − 1)/k), once
the decode stage's fixed point has no root (λ·(n_out − 1)·T(N)/(1 − λP) > N for every N), or once the running
sequences exceed the batch the memory holds at the mean context. Since N_d(λ) grows with λ, the largest stable rate
is  λ_sat = max over 0 < N ≤ N_cap of  N / ((n_out − 1)·T(N) + N·P),  N_cap = min((n_out − 1)/k, memory limit − 1),
and `binding` names which limit sets it.

Closed loop (SPEC §13, `workload { concurrency = C }`: `vllm bench serve --max-concurrency C`, SGLang
bench_serving, aiperf): C clients, each sending its next request when the last one's final token arrives. The
prefill slot is a queue in a closed network whose other station is a delay, the decode of n_out − 1 tokens at ITL:

    decode stage at N_d (Little's law):  X = N_d / ((n_out − 1)·T(N_d) + N_d·P),  ITL = T(N_d) / (1 − X·P)
    a prompt's prefill S = k·T(N_d·(C − 1)/C) + P: an arrival sees the other C − 1 clients (arrival theorem), so
        at C = 1 it runs alone; it arrives as an iteration ends (the last token of its client's previous request),
        so no residual iteration is added
    the slot's response R (mean value analysis, Schweitzer's (C − 1)/C queue, Reiser's residual E[S²]/(2E[S])):
        R = S + (C − 1)/(R + Z)·S·(R − S + E[S²]/(2E[S])),  Z = (n_out − 1)·ITL
    the loop:  X = min(C / (R + Z), 1/E[S]) (the slot's bottleneck bound; R = C/X − Z where it binds);
        N_d is the least root of X_loop(N_d) = X_decode(N_d) in [0, C] (positive gap at 0, negative at C),
        found on a grid and refined by bisection; the residual is checked
    TTFT = R (queueing included), TPOT = (E2E − TTFT)/(n_out − 1) = ITL, as `vllm bench serve` defines
        mean_ttft_ms and mean_tpot_ms; X·(TTFT + (n_out − 1)·TPOT) = C and N_d + X·R = C by construction.

A closed loop always has a steady state (at most C requests are in it). The engine runs at most
C_run = min(C, ⌊max_seqs⌋) requests at once (its --max-num-seqs; at least 1): the loop above is solved for C_run
clients, and the other C − C_run wait in the engine's queue. The queue is never empty then, so a finished request
is replaced at once and the engine's loop is the C_run one; by Little's law on the queue its wait is (C − C_run)/X,
added to the TTFT:
    TTFT = R(C_run) + (C − C_run)/X,  and still X·(TTFT + (n_out − 1)·TPOT) = C.
The start of a run (Service.prompts, `vllm bench serve --num-prompts`): a benchmark run sends `prompts` requests in
all, and its C clients send their first ones together when it starts. The engine prefills those first come first
served, packing `chunk` tokens into each iteration (SGLang --chunked-prefill-size, vLLM --max-num-batched-tokens,
TensorRT-LLM max_num_tokens: several short prompts in one iteration, a long one over several), so prompt i's first
token comes at the end of iteration j_i = ⌈i·n̄_in/chunk⌉, after the prefill of every token up to it and those
iterations' steps (start_burst). The tool's mean TTFT is the run's: F = min(C_run, prompts) requests at the burst's
mean, the others at the steady state's R, and by Little's law over the run its throughput and decode batch follow:
    TTFT = (F·TTFT_burst + (prompts − F)·R)/prompts,  X = C/(TTFT + (n_out − 1)·ITL),  N_d = X·(n_out − 1)·ITL,
so both identities above still hold. With prompts None (the default) the figures are the steady state's.
The KV pool is not such a cap: vLLM admits while the pool has blocks for the prompt and preempts (recomputes) when
a running sequence needs a block it lacks, so whether the running sequences fit stays the plan's to check (its
batch is N_d + ρ, ρ = X·S); docs/service.md, Scheduling limits, states what that leaves out.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Optional

import attrs
import numpy as np

from kvplan.base.errors import KvplanError
from kvplan.base.records import record
from kvplan.model.expected import Factors, expected_step, expected_ttft
from kvplan.model.roofline import Config
from kvplan.model.scenario import Lengths, mean_context

if TYPE_CHECKING:  # numpy.typing is for annotations only: its import costs the cold start
    import numpy.typing as npt

#: Points of the grid the fixed point and the saturation rate are searched on (geometric in N), and the bisection
#: steps that refine a root between two of them: the work is bounded whatever the inputs.
GRID_POINTS = 512
BISECTION_STEPS = 60
#: Arrival processes the queueing term knows.
ARRIVALS = ("poisson", "deterministic")
#: The most prompt lengths the prefill moments are summed over: a uniform range of at most this many integers is
#: summed exactly, a wider one at this many equal strata (each at its middle integer): bounded work whatever the
#: bounds (docs/service.md, Distribution-shaped lengths).
SUPPORT_POINTS = 4096


def support(n: Lengths) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """(lengths, weights) the expectations over a uniform length sum over: every integer of lo..hi, or
    SUPPORT_POINTS equal strata's middle integers (bounded work whatever the bounds)."""
    width = n.hi - n.lo + 1
    if width <= SUPPORT_POINTS:
        return np.arange(n.lo, n.hi + 1, dtype=np.float64), np.full(width, 1.0 / width)
    edges = np.linspace(n.lo - 0.5, n.hi + 0.5, SUPPORT_POINTS + 1)
    mids = np.clip(np.round(0.5 * (edges[:-1] + edges[1:])), n.lo, n.hi)
    return mids, np.full(SUPPORT_POINTS, 1.0 / SUPPORT_POINTS)


@record
class Service:
    """The inputs of the load model besides the deployment: rate (requests/s), the lengths (tokens), the prefill
    chunk (tokens per iteration), the batch limit the memory allows (sequences at the mean context; None: no
    limit) and the arrival process."""

    rate: float
    n_in: int
    n_out: int
    chunk: int
    batch_limit: Optional[float] = None
    arrivals: str = "poisson"
    #: The shortest prompt and output of a uniform length (n_in, n_out are then the longest); None: fixed.
    in_lo: Optional[int] = None
    out_lo: Optional[int] = None
    #: C, the clients of a closed loop (`workload { concurrency = C }`): each sends its next request when the last
    #: one's final token arrives, and `rate` is not read (the throughput follows from C; closed_loop). None: the
    #: open loop at `rate`.
    clients: Optional[float] = None
    #: The engine's cap on the requests it runs at once (vLLM --max-num-seqs, SGLang --max-running-requests);
    #: None: no cap. A closed loop of more clients than it (or than the batch limit) queues the rest (closed_loop).
    max_seqs: Optional[float] = None
    #: The requests a closed-loop benchmark run sends in all (`vllm bench serve --num-prompts`): the first
    #: min(C_run, prompts) of them arrive together when the run starts (start_burst) and the mean TTFT is the run's
    #: (run_mean). None: the steady state alone.
    prompts: Optional[float] = None
    #: A decode pool of disaggregated serving (SPEC §14, kvplan.planner.disagg): the prompts' KV arrives over a
    #: link, so no prefill chunk rides on the decode steps (P = 0, k = 0) and a request's wait here is the rest of
    #: the iteration in progress, T/2. False: one engine serves both phases (the model above).
    decode_only: bool = False

    @property
    def inputs(self) -> Lengths:
        return Lengths(self.n_in if self.in_lo is None else self.in_lo, self.n_in)

    @property
    def outputs(self) -> Lengths:
        return Lengths(self.n_out if self.out_lo is None else self.out_lo, self.n_out)


@record
class Load:
    """The steady state of a service, or where it has none (`saturated`: then only the saturation figures hold).

    Times in seconds; concurrency, decode_batch and running in sequences; contexts in tokens."""

    saturated: bool
    saturation_rate: float          # requests/s past which no steady state exists
    binding: str                    # prefill | decode | memory: the limit that sets saturation_rate
    concurrency: float              # requests in the engine, queued ones included (Little's law)
    running: float                  # sequences the engine runs: N_d generating + ρ prefilling
    decode_batch: float             # N_d: the decode step's batch
    itl: float
    ttft: float
    prefill_wait: float             # the queueing part of the TTFT
    prefill_service: float          # S: a prompt's prefill, its k iterations
    prefill_utilization: float      # ρ
    step: float                     # T(N_d): the decode step alone
    chunk_time: float               # P: the prefill of one prompt's tokens, spread over its chunks
    chunks: int                     # k
    mean_context: float
    tail_context: float
    max_running: float              # the most sequences a steady state runs: N_cap generating + 1 prefilling
    #: X, requests/s a closed loop completes (closed_loop); None for the open loop, whose throughput is its rate.
    throughput: Optional[float] = None


class Model:
    """The step and prefill figures of one deployment the load model reads: T(N) at the mean context, and P."""

    def __init__(self, cfg: Config, f: Factors, link: Optional[float], sv: Service) -> None:
        if sv.arrivals not in ARRIVALS:
            raise KvplanError(f"unknown arrival process '{sv.arrivals}'", help=f"use one of {', '.join(ARRIVALS)}")
        inputs, outputs = sv.inputs, sv.outputs
        closed = sv.clients is not None and math.isfinite(sv.clients) and sv.clients >= 1
        if not (closed or math.isfinite(sv.rate) and sv.rate > 0) or min(inputs.lo, outputs.lo, sv.chunk) < 1 or (
                inputs.lo > inputs.hi or outputs.lo > outputs.hi):
            raise KvplanError(f"the load model needs a positive rate and lengths, got rate {sv.rate:g}/s, input "
                              f"{inputs.text()}, output {outputs.text()}, chunk {sv.chunk}",
                              help="write `rate = 20/s  input = 4k  output = 512` (docs/service.md)")
        self.cfg, self.f, self.link, self.sv = cfg, f, link, sv
        self.mean_context = mean_context(inputs, outputs)
        self.fixed = inputs.fixed
        lengths, weights = support(inputs)
        ttft = expected_ttft(cfg, lengths, f, link)
        # P(n_in): what the chunks add to the steps they ride on (the step already pays t_fixed and L · t_layer)
        p = ttft.ttft - f.t_fixed.value - ttft.layers
        k = np.ceil(lengths / sv.chunk)
        if sv.decode_only:  # a decode pool: the prompts were prefilled elsewhere
            p, k = np.zeros_like(p), np.zeros_like(k)
        self.prefill = float(np.dot(weights, p))            # E[P]
        self.chunks = 0 if sv.decode_only else math.ceil(sv.n_in / sv.chunk)  # k of the longest prompt
        self.k_mean = float(np.dot(weights, k))             # E[k]
        # E[S²] = E[k²]·T² + 2·E[kP]·T + E[P²], S = k·T + P (the step T is the same for every prompt)
        self.k2, self.kp, self.p2 = (float(np.dot(weights, x)) for x in (k * k, k * p, p * p))
        self.decode_tokens = outputs.mean - 1.0              # E[n_out − 1]

    def service(self, step: npt.NDArray[np.float64]) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        """(E[S], E[S²]/E[S]) at the decode step T: a prompt's mean prefill service and the factor the
        Pollaczek–Khinchine wait takes, W = ρ·E[S²]/E[S] / (2(1 − ρ)); for a fixed length E[S²]/E[S] = S."""
        mean = self.k_mean * step + self.prefill
        if self.fixed or self.sv.decode_only:  # a decode pool's S is 0 for every prompt
            return mean, mean
        return mean, (self.k2 * step * step + 2.0 * self.kp * step + self.p2) / mean

    def step(self, n: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """T(N): the expected decode step at batch N (0 allowed: an iteration of the prefill alone) and s̄."""
        out: npt.NDArray[np.float64] = expected_step(self.cfg, np.asarray(n, dtype=np.float64),
                                                           self.mean_context, self.f, self.link).step
        return out

    def cap(self) -> float:
        """N_cap: the largest decode batch with a steady state (prefill slot below 1, memory below its limit)."""
        sv = self.sv
        prefill_cap = self.decode_tokens / self.k_mean if self.k_mean > 0 else math.inf
        mem_cap = math.inf if sv.batch_limit is None else max(sv.batch_limit - 1.0, 0.0)
        return min(prefill_cap, mem_cap)

    def saturation(self) -> tuple[float, str]:
        """(λ_sat, binding): the largest stable rate and the limit that sets it (module docstring)."""
        sv = self.sv
        if sv.n_out == 1:  # no decode stage: the prefill slot alone
            return 1.0 / (self.k_mean * float(self.step(0.0)) + self.prefill), "prefill"
        n_cap = self.cap()
        if n_cap <= 0:
            return 0.0, "memory"
        grid = np.geomspace(n_cap * 1e-6, n_cap, GRID_POINTS)
        lam = grid / (self.decode_tokens * self.step(grid) + grid * self.prefill)
        i = int(np.argmax(lam))
        if i < GRID_POINTS - 1:
            return float(lam[i]), "decode"
        mem = sv.batch_limit is not None and n_cap == max(sv.batch_limit - 1.0, 0.0)
        return float(lam[i]), "memory" if mem else "prefill"

    def decode_batch(self, rate: float) -> Optional[float]:
        """The least root N_d of N = λ·(n_out − 1)·T(N)/(1 − λP) in [0, N_cap], or None when there is none."""
        sv = self.sv
        if sv.n_out == 1:
            return 0.0
        slack = 1.0 - rate * self.prefill
        if slack <= 0:
            return None
        coef = rate * self.decode_tokens / slack
        n_cap = self.cap()
        if n_cap <= 0:
            return None
        grid = np.concatenate(([0.0], np.geomspace(n_cap * 1e-9, n_cap, GRID_POINTS)))
        below = np.nonzero(coef * self.step(grid) <= grid)[0]
        if below.size == 0:
            return None
        lo, hi = float(grid[below[0] - 1]), float(grid[below[0]])  # g(lo) > lo, g(hi) <= hi
        for _ in range(BISECTION_STEPS):
            mid = 0.5 * (lo + hi)
            if coef * float(self.step(mid)) <= mid:
                hi = mid
            else:
                lo = mid
        return hi


def solve(cfg: Config, f: Factors, link: Optional[float], sv: Service) -> Load:
    """The steady state of the service on the deployment `cfg` with the expected-step factors `f` (module
    docstring), or its saturation. Raises KvplanError for inputs the model cannot take."""
    m = Model(cfg, f, link, sv)
    if sv.clients is not None:
        return queued(m, *m.saturation())
    return _steady(m, *m.saturation())


def _steady(m: Model, sat: float, binding: str) -> Load:
    """The steady state of the model's service at its rate, given its saturation (λ_sat, binding)."""
    sv = m.sv
    n_d = m.decode_batch(sv.rate) if sv.rate < sat else None
    tail = float(sv.n_in + sv.n_out)  # the longest prompt and the longest output
    most = (m.cap() if sv.n_out > 1 else 0.0) + 1.0
    if n_d is None:
        nan = math.nan
        return Load(True, sat, binding, nan, nan, nan, nan, nan, nan, nan, nan, nan, m.prefill, m.chunks,
                    m.mean_context, tail, most)
    step = float(m.step(n_d))
    itl = step / (1.0 - sv.rate * m.prefill)
    mean, second = (float(x) for x in m.service(np.array(step)))
    service = mean
    rho = sv.rate * service
    wait = rho * second / (2.0 * (1.0 - rho)) if sv.arrivals == "poisson" else 0.0
    ttft = (1.0 - rho) * step / 2.0 + wait + service
    concurrency = sv.rate * (ttft + m.decode_tokens * itl)
    return Load(False, sat, binding, concurrency, n_d + rho, n_d, itl, ttft, wait, service, rho, step, m.prefill,
                m.chunks, m.mean_context, tail, most)


def response(clients: float, service: npt.ArrayLike, second: npt.ArrayLike, think: npt.ArrayLike
             ) -> npt.NDArray[np.float64]:
    """R: the mean time a request spends at the prefill slot, queueing included, in a closed loop of `clients`
    whose other station is a delay of `think` seconds (its decode), the slot serving E[S] = `service` with
    E[S²]/E[S] = `second` (module docstring, Closed loop). Mean value analysis with Schweitzer's estimate of the
    queue an arrival sees, (C − 1)/C of the mean, and Reiser's residual for the request in service, E[S²]/(2E[S]):
    R = S + (C − 1)/(R + Z) · S · (R − S + E[S²]/(2E[S])), the larger root of its quadratic (its discriminant is
    never negative for C >= 1 and E[S²] >= E[S]²; at C = 1 the root is S: no queue)."""
    s, z, m2 = (np.asarray(x, dtype=np.float64) for x in (service, think, second))
    b = clients * s - z
    disc = b * b + 4.0 * s * (z + (clients - 1.0) * (0.5 * m2 - s))
    r: npt.NDArray[np.float64] = 0.5 * (b + np.sqrt(np.maximum(disc, 0.0)))  # typed: numpy 1.24's stubs say Any
    return r


def closed_loop(m: Model, sat: float, binding: str) -> Load:
    """The steady state of a closed loop of C = sv.clients clients (module docstring, Closed loop): the least
    decode batch N_d in [0, C] at which the throughput of the decode stage, N_d / ((n_out − 1)·T(N_d) + N_d·P),
    equals the loop's, C / (R + (n_out − 1)·ITL); found on a grid and refined by bisection (bounded work), and
    checked: a residual that does not vanish is an error, not a figure. `sat`, `binding`: the open loop's
    saturation, printed beside it (the most the layout carries)."""
    sv = m.sv
    assert sv.clients is not None
    c = float(sv.clients)
    if not m.decode_tokens > 0:
        raise KvplanError(f"a closed loop needs at least two output tokens per request (TPOT = (E2E − TTFT) / "
                          f"(OSL − 1)), got output {sv.outputs.text()}", help="write `output = 2` or more")
    seen = (c - 1.0) / c  # an arrival sees the other C − 1 clients: (C − 1)/C of the decode batch

    def state(n: npt.NDArray[np.float64]) -> tuple[npt.NDArray[np.float64], ...]:
        """(gap, X, ITL, R, E[S], T) at decode batch n: gap = the loop's throughput − the decode stage's."""
        step = m.step(n)
        x_dec = n / (m.decode_tokens * step + n * m.prefill)
        itl = step / (1.0 - x_dec * m.prefill)
        s, second = m.service(m.step(seen * n))
        z = m.decode_tokens * itl
        # the slot completes at most 1/E[S] prompts a second (the bottleneck bound, which Schweitzer's estimate
        # can overshoot by a part in 10^4 when the slot is always busy): R is then what that X leaves, C/X − Z
        x_loop = np.minimum(c / (response(c, s, second, z) + z), 1.0 / s)
        return x_loop - x_dec, x_loop, itl, c / x_loop - z, s, step

    grid = np.concatenate(([0.0], np.geomspace(c * 1e-9, c, GRID_POINTS)))
    below = np.nonzero(state(grid)[0] <= 0.0)[0]  # the gap is positive at 0 and negative at C (docs/service.md)
    if below.size == 0 or below[0] == 0:
        raise KvplanError(f"the closed loop of {c:g} clients has no steady state on this layout (the decode and "
                          "prefill throughputs never meet)", help="report this spec: the closed-loop model should "
                          "always meet in [0, C] (docs/service.md, Closed loop)")
    lo, hi = float(grid[below[0] - 1]), float(grid[below[0]])
    for _ in range(BISECTION_STEPS):
        mid = 0.5 * (lo + hi)
        if float(state(np.array([mid]))[0][0]) <= 0.0:
            hi = mid
        else:
            lo = mid
    gap, x, itl, r, s, step = (float(v[0]) for v in state(np.array([hi])))
    if not (math.isfinite(x) and x > 0 and abs(gap) <= 1e-6 * x):
        raise KvplanError(f"the closed loop of {c:g} clients did not converge (throughput gap {gap:.3g}/s at "
                          f"{x:.6g}/s)", help="report this spec (docs/service.md, Closed loop)")
    rho = x * s
    n_d = x * m.decode_tokens * itl  # Little's law on the decode stage at the loop's throughput
    return Load(False, sat, binding, c, n_d + rho, n_d, itl, r, r - s, s, rho, step, m.prefill, m.chunks,
                m.mean_context, float(sv.n_in + sv.n_out), m.cap() + 1.0, throughput=x)


def admitted(sv: Service) -> float:
    """C_run: the clients of a closed loop the engine runs at once, min(C, ⌊max_seqs⌋), at least 1 (module
    docstring, Closed loop). The batch limit is not a cap here: the engine admits past it and preempts."""
    assert sv.clients is not None
    run = float(sv.clients)
    if sv.max_seqs is not None and math.isfinite(sv.max_seqs):
        run = min(run, max(float(math.floor(sv.max_seqs)), 1.0))
    return run


def queued(m: Model, sat: float, binding: str) -> Load:
    """A closed loop under the engine's cap: the loop of C_run = admitted(sv) clients (closed_loop), the other
    C − C_run waiting in the engine's queue for (C − C_run)/X, which the TTFT includes (module docstring)."""
    sv = m.sv
    assert sv.clients is not None
    run = admitted(sv)
    if run >= sv.clients:
        return run_mean(m, closed_loop(m, sat, binding))
    inner = closed_loop(Model(m.cfg, m.f, m.link, attrs.evolve(sv, clients=run)), sat, binding)
    assert inner.throughput is not None
    wait = (float(sv.clients) - run) / inner.throughput
    return run_mean(m, attrs.evolve(inner, concurrency=float(sv.clients), ttft=inner.ttft + wait,
                                    prefill_wait=inner.prefill_wait + wait))


def start_burst(m: Model, clients: int) -> float:
    """The mean TTFT of the `clients` prompts a closed-loop run sends together when it starts (module docstring,
    The start of a run): the engine prefills them first come first served, packing `chunk` tokens into each
    iteration (several prompts into one where they fit, a prompt over several where it does not); prompt i's
    first token comes at the end of iteration j_i = ⌈i·n̄/chunk⌉, after the prefill of the tokens of iterations
    1..j_i, min(j_i·chunk, C·n̄)/n̄ · P, and those iterations' decode steps, each at the i − 1 prompts already
    decoding: TTFT_i = min(j_i·chunk, C·n̄)/n̄ · P + Σ_{i' ≤ i} (j_i' − j_i'−1)·T(i' − 1). Bounded work: one array of
    C <= MAX_BATCH entries."""
    sv = m.sv
    n = sv.inputs.mean
    i = np.arange(1, clients + 1, dtype=np.float64)
    j = np.ceil(i * n / sv.chunk)
    steps = np.diff(j, prepend=0.0) * m.step(i - 1.0)
    ttft = np.minimum(j * sv.chunk, clients * n) / n * m.prefill + np.cumsum(steps)
    return float(np.mean(ttft))


def run_mean(m: Model, ld: Load) -> Load:
    """A closed loop's figures over a benchmark run of sv.prompts requests (module docstring, The start of a run):
    the first F = min(C_run, prompts) arrive together (start_burst), the others in the steady state, so the mean
    TTFT is (F·TTFT_burst + (prompts − F)·TTFT_steady)/prompts; the run's throughput and decode batch follow from
    it by Little's law, X = C/(TTFT + (n_out − 1)·ITL) and N_d = X·(n_out − 1)·ITL. Unchanged when sv.prompts is
    None."""
    sv = m.sv
    if sv.prompts is None:
        return ld
    assert sv.clients is not None
    total = max(float(sv.prompts), 1.0)
    first = min(admitted(sv), total)
    ttft = (first * start_burst(m, int(first)) + (total - first) * ld.ttft) / total
    think = m.decode_tokens * ld.itl
    x = float(sv.clients) / (ttft + think)
    n_d = x * think
    rho = x * ld.prefill_service
    return attrs.evolve(ld, ttft=ttft, prefill_wait=ttft - ld.prefill_service, throughput=x, decode_batch=n_d,
                        running=n_d + rho, prefill_utilization=rho)


@record
class Goodput:
    """The largest rate (requests/s) at which the mean TTFT and the ITL meet their SLOs, below saturation, and
    what binds it: 'ttft' or 'itl' (the SLO missed just above it), or 'saturation' (both hold up to λ_sat)."""

    rate: float
    binding: str


def misses(ld: Load, ttft: Optional[float], itl: Optional[float]) -> Optional[str]:
    """The first service SLO the steady state misses ('ttft', then 'itl'), or None; a saturated load misses both
    (no steady state: the queue grows without bound)."""
    if ttft is not None and (ld.saturated or ld.ttft > ttft):
        return "ttft"
    if itl is not None and (ld.saturated or ld.itl > itl):
        return "itl"
    return None


def _latencies(m: Model, rate: npt.NDArray[np.float64], step: npt.NDArray[np.float64]
               ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """(ITL, TTFT) of the steady states at `rate` whose decode step is `step` (solve's formulas, vectorized)."""
    itl = step / (1.0 - rate * m.prefill)
    service, second = m.service(step)
    rho = rate * service
    wait = rho * second / (2.0 * (1.0 - rho)) if m.sv.arrivals == "poisson" else np.zeros_like(rho)
    return itl, (1.0 - rho) * step / 2.0 + wait + service


def goodput(cfg: Config, f: Factors, link: Optional[float], sv: Service, ttft: Optional[float],
            itl: Optional[float]) -> Goodput:
    """The goodput of the deployment for the service's lengths (its rate is not read): the largest λ in
    (0, λ_sat) at which mean TTFT <= `ttft` and ITL <= `itl` (seconds; None: that SLO is not set); with neither
    set, λ_sat (binding 'saturation').

    The steady states are walked by their decode batch N rather than by λ: the least root of the fixed point is
    N_d(λ) = min{N : λ(N) >= λ} with λ(N) = N / ((n_out − 1)·T(N) + N·P) (the saturation formula), so the states
    are the N where λ(N) sets a new running maximum, in order of growing λ, and each one's ITL and TTFT follow in
    closed form. On them ITL and TTFT grow with λ (T, S and ρ all grow; docs/service.md, Goodput), so the goodput
    lies between the last state on the grid that meets the SLOs and the next, and BISECTION_STEPS refine it there.
    Bounded work: one grid of GRID_POINTS and the bisection. With one output token there is no decode stage
    (N_d = 0) and λ is walked directly."""
    m = Model(cfg, f, link, sv)
    sat, _ = m.saturation()
    none = "ttft" if ttft is not None else "itl" if itl is not None else "saturation"
    if ttft is None and itl is None:
        return Goodput(sat, "saturation")
    if sat <= 0:
        return Goodput(0.0, none)

    def state(x: npt.NDArray[np.float64]) -> tuple[npt.NDArray[np.float64], ...]:
        """(λ, ITL, TTFT) of the states at grid variable x: N_d = x, or λ = x with one output token."""
        if sv.n_out == 1:
            lam, step = x, np.full(x.shape, float(m.step(0.0)))
        else:
            step = m.step(x)
            lam = x / (m.decode_tokens * step + x * m.prefill)
        return (lam, *_latencies(m, lam, step))

    def worst(i: npt.NDArray[np.float64], t: npt.NDArray[np.float64]) -> tuple[npt.NDArray[np.float64], ...]:
        return (t / ttft if ttft is not None else np.zeros_like(t), i / itl if itl is not None else np.zeros_like(i))

    top = sat if sv.n_out == 1 else m.cap()
    grid = np.geomspace(top * 1e-9, top, GRID_POINTS)
    with np.errstate(divide="ignore", invalid="ignore"):  # ρ = 1 at the prefill cap: that state is λ_sat, left out
        lam, i_, t_ = state(grid)
    record_ = lam >= np.maximum.accumulate(lam)
    states = np.nonzero(record_ & (lam < sat))[0]
    r_t, r_i = worst(i_[states], t_[states])
    ok = (r_t <= 1.0) & (r_i <= 1.0)
    if ok.all():
        return Goodput(sat, "saturation")
    first = int(np.argmin(ok))  # the first state that misses
    if first == 0:
        return Goodput(0.0, "ttft" if r_t[0] > 1.0 else "itl")
    lo, hi = float(grid[states[first - 1]]), float(grid[states[first]])
    why = "ttft" if r_t[first] > 1.0 else "itl"
    for _ in range(BISECTION_STEPS):
        mid = 0.5 * (lo + hi)
        lm, im, tm = state(np.array([mid]))
        wt, wi = worst(im, tm)
        if wt[0] <= 1.0 and wi[0] <= 1.0 and lm[0] < sat:
            lo = mid
        else:
            hi, why = mid, "ttft" if wt[0] > 1.0 else "itl"
    return Goodput(float(state(np.array([lo]))[0][0]), why)


__all__ = ["ARRIVALS", "BISECTION_STEPS", "GRID_POINTS", "SUPPORT_POINTS", "Goodput", "Lengths", "Load", "Model",
           "Service", "admitted", "closed_loop", "goodput", "mean_context", "misses", "queued", "response", "solve",
           "support"]
