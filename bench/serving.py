"""Benchmark: kvplan's serving forecasts against NVIDIA aiconfigurator's published silicon sample (docs/service.md).

Run:  python bench/serving.py [--rows] [--out FILE.csv] [--aic AIC.csv] [--kv-dtype DTYPE] [--per-client N]
      [SAMPLE.csv]
      python bench/serving.py --holdout ...      (the rows measured on or after HOLDOUT: the lead's, once)

SAMPLE.csv defaults to tests/data/public/silicon_sample.csv (its README cites it and states TTFT/TPOT as the rows
carry them). kvplan.engines.silicon types each row; a row kvplan can express (EXPRESSIBLE) becomes a spec,
`workload { concurrency = C  input = ISL  output = OSL }` with the row's device, engine, weight dtype, KV dtype and
layout pinned, planned as `kvplan advise` plans it. Printed: per (engine, device, model, regime) the medians of
the bound, the expected figure, the measured one and |error| for TPOT and TTFT; the medians of |error| overall
and per engine; the noise floor (the repeat spread of identical configurations, NOISE_KEY); the counts planned and
skipped with their reasons. `--rows` adds one line per row. `--out` writes one CSV line per planned row, OUT_COLUMNS
first. `--aic` reads bench/aiconfigurator_rows.py's CSV and puts aiconfigurator's medians beside kvplan's on the
rows both have.

By default only rows measured before HOLDOUT (the fit set) are planned or printed; `--holdout` reports the rows
measured on or after it instead and the noise floor is always the fit set's. It runs offline and prints the same
bytes every time; a file that is not the sample stops it with one line and exit 2.
"""

from __future__ import annotations

import csv
import datetime
import io
import statistics
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Callable, Iterable, Mapping, Optional, Sequence

import attrs

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script from anywhere: kvplan is the checkout's
    sys.path.insert(0, str(ROOT))

from kvplan.base.errors import KvplanError  # noqa: E402
from kvplan.base.records import record  # noqa: E402
from kvplan.engines import silicon  # noqa: E402
from kvplan.engines.silicon import SiliconRow  # noqa: E402
from kvplan.lang import check_source  # noqa: E402
from kvplan.model import disagg as dg  # noqa: E402
from kvplan.planner import plan, service  # noqa: E402
from kvplan.planner.plan import Plan  # noqa: E402

SAMPLE = ROOT / "tests" / "data" / "public" / "silicon_sample.csv"
#: Rows measured on or after this date are the holdout (issue 22): not planned unless --holdout.
HOLDOUT = datetime.date(2026, 3, 1)
#: Assumed: the sample does not state the KV-cache dtype. vLLM, SGLang and TensorRT-LLM keep the KV cache in the
#: model's activation dtype (bf16) unless a flag says otherwise (vLLM `--kv-cache-dtype auto`); override with
#: --kv-dtype.
KV_DTYPE = "bf16"
#: Assumed: each row is one run of a benchmark client that sends 10·C requests, the first C of them at once when the
#: run starts (InferenceMAX's client configuration: `--num-prompts $((CONC * 10)) --max-concurrency $CONC
#: --request-rate inf`, its README's "Benchmark Client Configuration"; the rows' ISL/OSL grid and concurrencies are
#: InferenceMAX's, but the sample's README does not name its client). The mean TTFT is the run's, start-up burst
#: included (kvplan.model.load.run_mean); override with --per-client (0: the steady state alone).
PER_CLIENT = 10
OUT_COLUMNS = ("engine", "device", "regime", "tpot_expected_ms", "tpot_measured_ms", "ttft_expected_ms",
               "ttft_measured_ms", "measured_on", "split")
OUT_MORE = ("id", "model", "concurrency", "isl", "osl", "tp", "weights", "tpot_bound_ms", "ttft_bound_ms", "fits")
#: What makes two runs the same configuration: everything but the engine version, image and date.
NOISE_FIELDS = ("checkpoint", "system", "engine", "precision", "weights", "moe_quant", "mode", "layout", "prefill",
                "decode", "isl", "osl", "concurrency")
EXPRESSIBLE = ("aggregated serving (mode = agg), one pipeline stage or more of tensor parallelism, no expert "
               "parallelism (moe_ep_size 1) and no attention data parallelism (attention_dp_size 1): kvplan plans "
               "tensor x pipeline only")


class BenchError(Exception):
    """The bench cannot run: one line naming the file and what was wrong."""


def split_of(row: SiliconRow) -> str:
    """`fit` for a row measured before HOLDOUT, else `holdout`."""
    return "fit" if row.measured_on < HOLDOUT else "holdout"


def unexpressible(row: SiliconRow) -> Optional[str]:
    """Why kvplan cannot express the row (EXPRESSIBLE), or None when it can."""
    lay = row.layout
    if row.mode != "agg":
        return "disaggregated serving: kvplan plans one aggregated pool"
    if lay.moe_ep == 0 or lay.attention_dp == 0:
        return "moe_ep_size or attention_dp_size is 0: the sample does not say what 0 means"
    if lay.moe_ep > 1:
        return "expert parallelism (moe_ep_size > 1): kvplan plans tensor x pipeline only"
    if lay.attention_dp > 1:
        return "attention data parallelism (attention_dp_size > 1): kvplan plans tensor x pipeline only"
    if row.batch_size != row.concurrency:
        return "batch_size disagrees with silicon_concurrency at attention_dp_size 1"
    return None


def spec_text(name: str, model: str, device: str, engine: str, weights: str, tp: int, pp: int, concurrency: int,
              isl: int, osl: int, kv_dtype: Optional[str]) -> str:
    """A closed-loop benchmark run as a spec: its deployment pinned (the KV dtype unless None), its loop the
    workload."""
    kv = f"        kv_dtype          = {kv_dtype}\n" if kv_dtype else ""
    return (f'kvplan 1\ndeployment "{name}" {{\n    model   = {model}\n    device  = {device}\n'
            f"    devices = {tp * pp}\n    engine  = {engine}\n    weights = {weights}\n"
            f"    workload {{\n        concurrency = {concurrency}\n        input       = {isl}\n"
            f"        output      = {osl}\n    }}\n    quality {{ budget = lossless }}\n"
            f"    pin {{\n        tensor_parallel   = {tp}\n        pipeline_parallel = {pp}\n{kv}    }}\n}}\n")


def spec(row: SiliconRow, kv_dtype: str = KV_DTYPE) -> str:
    """The row as a spec: its device, engine, weights, KV dtype and layout pinned, its closed loop the workload."""
    lay = row.layout
    return spec_text(row.id, row.model, row.device, row.engine, row.weights, lay.tp, lay.pp, row.concurrency,
                     row.isl, row.osl, kv_dtype)


@record
class Forecast:
    """A row's plan: its regime, the TPOT and TTFT lower bounds and expected figures (ms), whether it fits."""

    regime: str
    tpot_bound: float
    tpot_expected: float
    ttft_bound: float
    ttft_expected: float
    fits: bool


class Unplanned(Exception):
    """A row whose spec does not check or plan: the reason, counted as a skip."""


def forecast(text: str, name: str, per_client: int = PER_CLIENT) -> Forecast:
    """A spec's plan as a Forecast, its closed loop run for `per_client` requests per client (PER_CLIENT; 0: the
    steady state alone); Unplanned with the reason when it does not check or plan."""
    r = check_source(text, f"{name}.kvp")
    if not r.ok or len(r.scenarios) != 1:
        first = next((d.message for d in r.diagnostics if d.severity.value == "error"), "no scenario")
        raise Unplanned(f"the spec does not check: {first}")
    sc = r.scenarios[0]
    if per_client > 0 and sc.concurrency is not None:
        sc = attrs.evolve(sc, prompts=per_client * sc.concurrency)
    try:
        p = plan(sc, suggest=False)
    except KvplanError as e:
        raise Unplanned(f"the spec does not plan: {e.message}") from None
    ld = p.load
    if ld is None or ld.ttft is None or ld.tpot is None:
        raise Unplanned("the plan has no closed-loop figures")
    m = p.metrics
    return Forecast(p.regime_after, m.step_time.value * 1e3, ld.tpot.value * 1e3,
                    service.prompt_bound(p).value * 1e3, ld.ttft.value * 1e3,
                    not any(u.constraint.value == "fits" for u in p.unmet))


def error(expected: float, measured: float) -> float:
    """The relative error of a forecast: expected / measured − 1 (+ is slower than measured)."""
    return expected / measured - 1.0


def median_abs(errors: Iterable[float]) -> Optional[float]:
    """The median of |error|, or None for no errors."""
    xs = [abs(e) for e in errors]
    return statistics.median(xs) if xs else None


def spread(values: Sequence[float]) -> float:
    """A group of repeats' relative spread: (max − min) / median."""
    return (max(values) - min(values)) / statistics.median(values)


def repeats(rows: Iterable[SiliconRow]) -> list[list[SiliconRow]]:
    """The groups of two or more measurements of one configuration (NOISE_FIELDS), in first-seen order. A row
    whose TPOT and TTFT are exactly another's of the same configuration is one run listed twice (under two
    config ids), counted once."""
    groups: dict[tuple[object, ...], dict[tuple[float, float], SiliconRow]] = {}
    for r in rows:
        groups.setdefault(tuple(getattr(r, f) for f in NOISE_FIELDS), {}).setdefault((r.tpot_ms, r.ttft_ms), r)
    return [list(g.values()) for g in groups.values() if len(g) > 1]


@record
class Noise:
    """The noise floor: the median relative spread of TPOT and TTFT over the groups of repeats."""

    groups: int
    rows: int
    tpot: Optional[float]
    ttft: Optional[float]


def noise_floor(rows: Iterable[SiliconRow]) -> Noise:
    gs = repeats(rows)
    tp = [spread([r.tpot_ms for r in g]) for g in gs]
    tt = [spread([r.ttft_ms for r in g]) for g in gs]
    return Noise(len(gs), sum(len(g) for g in gs), statistics.median(tp) if tp else None,
                 statistics.median(tt) if tt else None)


@record
class Planned:
    row: SiliconRow
    got: Forecast

    @property
    def tpot_error(self) -> float:
        return error(self.got.tpot_expected, self.row.tpot_ms)

    @property
    def ttft_error(self) -> float:
        return error(self.got.ttft_expected, self.row.ttft_ms)


@record
class Run:
    """What the bench computed: the rows planned, the reasons rows were skipped (counted), the fit set's noise."""

    planned: tuple[Planned, ...]
    skipped: tuple[tuple[str, int], ...]
    noise: Noise
    split: str


def run(ledger: silicon.Ledger, *, holdout: bool = False, kv_dtype: str = KV_DTYPE,
        plan_text: Callable[[str, str], Forecast] = forecast) -> Run:
    """Plan the split's expressible rows; count every other row of the file under its reason."""
    want = "holdout" if holdout else "fit"
    reasons: Counter[str] = Counter(s.reason for s in ledger.skipped)
    planned = []
    for row in ledger.rows:
        if split_of(row) != want:
            reasons[f"in the {'fit set' if holdout else 'holdout'} (measured {'before' if holdout else 'on or after'} "
                    f"{HOLDOUT})"] += 1
            continue
        why = unexpressible(row)
        if why is None:
            try:
                planned.append(Planned(row, plan_text(spec(row, kv_dtype), row.id)))
                continue
            except Unplanned as e:
                why = str(e)
        reasons[why] += 1
    return Run(tuple(planned), tuple(sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0]))),
               noise_floor(r for r in ledger.rows if split_of(r) == "fit"), want)


def _pct(x: Optional[float]) -> str:
    return f"{x:7.1%}" if x is not None else "      -"


def _med(xs: Sequence[float]) -> float:
    return statistics.median(xs)


def read_aic(path: Path) -> dict[str, tuple[float, float]]:
    """bench/aiconfigurator_rows.py's CSV: row id -> (aiconfigurator's TPOT, TTFT) in ms; rows with no estimate
    (empty fields) are left out."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise BenchError(f"{path}: {e}") from None
    reader = csv.DictReader(io.StringIO(text, newline=""))
    need = ("id", "aic_tpot_ms", "aic_ttft_ms")
    if tuple(reader.fieldnames or ())[:3] != need:
        raise BenchError(f"{path}:1: the columns must begin {','.join(need)}")
    out = {}
    for r in reader:
        if r["aic_tpot_ms"] and r["aic_ttft_ms"]:
            try:
                out[r["id"]] = (float(r["aic_tpot_ms"]), float(r["aic_ttft_ms"]))
            except ValueError:
                raise BenchError(f"{path}:{reader.line_num}: a time in ms expected") from None
    return out


def report(result: Run, *, rows: bool = False, aic: Optional[Mapping[str, tuple[float, float]]] = None) -> str:
    """The text the bench prints."""
    ps = result.planned
    out = [f"kvplan against aiconfigurator's silicon sample, {result.split} set "
           f"({'measured on or after' if result.split == 'holdout' else 'measured before'} {HOLDOUT}); "
           "error = expected / measured - 1; times in ms",
           "TPOT bound: the plan's step lower bound at its batch; TTFT bound: the prefill of one ISL prompt alone at "
           "peak compute and bandwidth", ""]
    if rows:
        out.append(f"{'row':<60} {'regime':<15} {'TPOT bound':>10} {'exp.':>8} {'meas.':>8} {'err':>7}  "
                   f"{'TTFT bound':>10} {'exp.':>8} {'meas.':>8} {'err':>7}")
        for p in ps:
            g, r = p.got, p.row
            out.append(f"{r.id[:60]:<60} {g.regime:<15} {g.tpot_bound:10.2f} {g.tpot_expected:8.2f} "
                       f"{r.tpot_ms:8.2f} {p.tpot_error:+7.1%}  {g.ttft_bound:10.1f} {g.ttft_expected:8.1f} "
                       f"{r.ttft_ms:8.1f} {p.ttft_error:+7.1%}" + ("" if g.fits else "  (does not fit)"))
        out.append("")
    out.append("per cell: medians of the rows' bound, expected, measured and |error|")
    out.append(f"{'engine':<7} {'device':<9} {'model':<13} {'regime':<15} {'rows':>4}  {'TPOT bound':>10} "
               f"{'exp.':>8} {'meas.':>8} {'|err|':>7}  {'TTFT bound':>10} {'exp.':>8} {'meas.':>8} {'|err|':>7}")
    cells: dict[tuple[str, str, str, str], list[Planned]] = {}
    for p in ps:
        cells.setdefault((p.row.engine, p.row.device, p.row.model, p.got.regime), []).append(p)
    for (eng, dev, mod, reg), c in sorted(cells.items()):
        out.append(f"{eng:<7} {dev:<9} {mod:<13} {reg:<15} {len(c):>4}  "
                   f"{_med([p.got.tpot_bound for p in c]):10.2f} {_med([p.got.tpot_expected for p in c]):8.2f} "
                   f"{_med([p.row.tpot_ms for p in c]):8.2f} {_pct(median_abs(p.tpot_error for p in c))}  "
                   f"{_med([p.got.ttft_bound for p in c]):10.1f} {_med([p.got.ttft_expected for p in c]):8.1f} "
                   f"{_med([p.row.ttft_ms for p in c]):8.1f} {_pct(median_abs(p.ttft_error for p in c))}")
    out += ["", "median |error|            TPOT    TTFT   rows"]
    by_engine: dict[str, list[Planned]] = {}
    for p in ps:
        by_engine.setdefault(p.row.engine, []).append(p)
    for name, group in [("all", list(ps)), *sorted(by_engine.items())]:
        out.append(f"  {name:<20} {_pct(median_abs(p.tpot_error for p in group))} "
                   f"{_pct(median_abs(p.ttft_error for p in group))}  {len(group):>5}")
    n = result.noise
    out += ["", f"noise floor (fit set; {n.groups} configurations run 2+ times, {n.rows} rows; median of "
            "(max - min) / median within a configuration):", f"  TPOT {_pct(n.tpot)}   TTFT {_pct(n.ttft)}"]
    if aic is not None:
        both = [p for p in ps if p.row.id in aic]
        out += ["", f"beside aiconfigurator on the {len(both)} of {len(ps)} planned rows its estimate covers:",
                "median |error|            TPOT    TTFT   rows"]
        out.append(f"  {'kvplan':<20} {_pct(median_abs(p.tpot_error for p in both))} "
                   f"{_pct(median_abs(p.ttft_error for p in both))}  {len(both):>5}")
        out.append(f"  {'aiconfigurator':<20} {_pct(median_abs(error(aic[p.row.id][0], p.row.tpot_ms) for p in both))} "
                   f"{_pct(median_abs(error(aic[p.row.id][1], p.row.ttft_ms) for p in both))}  {len(both):>5}")
    out += ["", f"planned {len(ps)} rows; skipped:"]
    out += [f"  {k:>5}  {why}" for why, k in ((w, k) for w, k in result.skipped)]
    return "\n".join(out) + "\n"


def out_csv(result: Run) -> str:
    """One line per planned row: OUT_COLUMNS, then OUT_MORE."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(OUT_COLUMNS + OUT_MORE)
    for p in result.planned:
        r, g = p.row, p.got
        w.writerow([r.engine, r.device, g.regime, f"{g.tpot_expected:.6g}", f"{r.tpot_ms:.6g}",
                    f"{g.ttft_expected:.6g}", f"{r.ttft_ms:.6g}", r.measured_on.isoformat(), split_of(r),
                    r.id, r.model, r.concurrency, r.isl, r.osl, r.layout.tp, r.weights, f"{g.tpot_bound:.6g}",
                    f"{g.ttft_bound:.6g}", "yes" if g.fits else "no"])
    return buf.getvalue()


# --------------------------------------------------------------------------- disaggregated rows (issue 23 item 3)

#: Which disaggregated rows kvplan can express: both pools tensor x pipeline only (attention_dp_size and
#: moe_ep_size 1 in each), their workers and layouts pinned.
DISAGG_EXPRESSIBLE = ("disaggregated serving (mode = disagg) whose prefill and decode pools are each tensor x "
                      "pipeline only (attention_dp_size 1, moe_ep_size 1), workers and layouts as the row states")
#: Bisection steps on the open-loop rate whose Little's-law concurrency is the row's clients.
LOOP_STEPS = 60


def disagg_unexpressible(row: SiliconRow) -> Optional[str]:
    """Why kvplan cannot express a disaggregated row (DISAGG_EXPRESSIBLE), or None when it can."""
    if row.mode != "disagg" or row.prefill is None or row.decode is None:
        return "aggregated serving: the default run plans it"
    for name, pool in (("prefill", row.prefill), ("decode", row.decode)):
        lay = pool.layout
        if pool.workers < 1 or lay.tp < 1 or lay.pp < 1:
            return f"the {name} pool states no workers or layout"
        if lay.moe_ep != 1 or lay.attention_dp != 1:
            return f"the {name} pool uses expert or attention data parallelism: kvplan plans tensor x pipeline only"
    return None


def pool_spec(row: SiliconRow, pool: silicon.Pool, kv_dtype: str) -> str:
    """One pool of the row as a spec at a placeholder rate (the load model sets the rate; the layout is pinned)."""
    lay = pool.layout
    n = pool.workers * lay.tp * lay.pp
    return (f'kvplan 1\ndeployment "{row.id}" {{\n    model   = {row.model}\n    device  = {row.device}\n'
            f"    devices = {n}\n    engine  = {row.engine}\n    weights = {row.weights}\n"
            f"    workload {{\n        rate   = 1/s\n        input  = {row.isl}\n        output = {row.osl}\n    }}\n"
            f"    quality {{ budget = lossless }}\n    pin {{\n        tensor_parallel   = {lay.tp}\n"
            f"        pipeline_parallel = {lay.pp}\n        replicas          = {pool.workers}\n"
            f"        kv_dtype          = {kv_dtype}\n    }}\n}}\n")


def _pool_plan(row: SiliconRow, pool: silicon.Pool, role: str, kv_dtype: str) -> Plan:
    """The pool's settled plan (kvplan.planner.disagg's pool scenarios: the prefill pool one output token)."""
    r = check_source(pool_spec(row, pool, kv_dtype), f"{row.id}-{role}.kvp")
    if not r.ok or len(r.scenarios) != 1:
        first = next((d.message for d in r.diagnostics if d.severity.value == "error"), "no scenario")
        raise Unplanned(f"the {role} pool's spec does not check: {first}")
    sc = r.scenarios[0]
    sc = (attrs.evolve(sc, pool="prefill", output_tokens=1, context=row.isl + 1) if role == "prefill" else
          attrs.evolve(sc, pool="decode"))
    try:
        return plan(sc, suggest=False)
    except KvplanError as e:
        raise Unplanned(f"the {role} pool does not plan: {e.message}") from None


def disagg_forecast(row: SiliconRow, kv_dtype: str = KV_DTYPE) -> Forecast:
    """A disaggregated row's mean TTFT and TPOT in its closed loop of C clients: each pool planned once on its
    pinned layout, then the open-loop rate λ whose Little's-law concurrency λ·(TTFT(λ) + (OSL − 1)·ITL(λ)) is C
    (bisection; TTFT = the prefill pool's at λ/x + the KV transfer + the decode pool's T/2 at λ/y, ITL the decode
    pool's; docs/service.md, Disaggregated serving). Bounds are left at 0: the pools have no one bound step."""
    assert row.prefill is not None and row.decode is not None
    pre = _pool_plan(row, row.prefill, "prefill", kv_dtype)
    dec = _pool_plan(row, row.decode, "decode", kv_dtype)
    total = row.prefill.workers * pre.n_devices + row.decode.workers * dec.n_devices
    link, _ = dg.pool_link(pre.scenario.device, total)
    move = dg.transfer_time(dg.transfer_bytes(pre.scenario.model, row.isl, dec.kv_width),
                            dg.link_bandwidth(link)) if link else 0.0

    def at(lam: float) -> Optional[tuple[float, float]]:
        lp = service.solve(attrs.evolve(pre, scenario=attrs.evolve(pre.scenario, rate=lam)))[0]
        ld = service.solve(attrs.evolve(dec, scenario=attrs.evolve(dec.scenario, rate=lam)))[0]
        if lp.saturated or ld.saturated:
            return None
        return lp.ttft + move + ld.ttft, ld.itl

    def below(lam: float) -> bool:
        """Whether the steady state at λ holds fewer requests than the clients (Little's law)."""
        got = at(lam)
        return got is not None and lam * (got[0] + (row.osl - 1) * got[1]) < row.concurrency

    lo, hi = 0.0, 1.0
    while below(hi) and hi < 1e6:
        lo, hi = hi, hi * 2.0  # grow until the clients are reached or a pool saturates
    for _ in range(LOOP_STEPS):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if below(mid) else (lo, mid)
    got = at(lo) if lo > 0 else at(hi * 1e-6)
    if got is None:
        raise Unplanned("no steady state of the pools below the clients' rate")
    fits = not any(u.constraint.value == "fits" for q in (pre, dec) for u in q.unmet)
    return Forecast(dec.regime_after, 0.0, got[1] * 1e3, 0.0, got[0] * 1e3, fits)


def run_disagg(ledger: silicon.Ledger, *, holdout: bool = False, kv_dtype: str = KV_DTYPE
               ) -> tuple[list[tuple[SiliconRow, Forecast]], Counter[str]]:
    """The disaggregated rows of one split planned (disagg_forecast), and the skips by reason."""
    planned: list[tuple[SiliconRow, Forecast]] = []
    skipped: Counter[str] = Counter()
    for row in ledger.rows:
        if row.mode != "disagg" or (split_of(row) == "holdout") != holdout:
            continue
        why = disagg_unexpressible(row)
        if why is not None:
            skipped[why] += 1
            continue
        try:
            planned.append((row, disagg_forecast(row, kv_dtype)))
        except Unplanned as e:
            skipped[str(e)] += 1
    return planned, skipped


def report_disagg(planned: Sequence[tuple[SiliconRow, Forecast]], skipped: Counter[str], holdout: bool) -> str:
    """Medians of |TPOT error| and |TTFT error| over the planned disaggregated rows, overall and per engine and
    device, with the skips."""
    split = "held-out" if holdout else "fit-set"
    out = [f"disaggregated rows, {split} ({DISAGG_EXPRESSIBLE}): {len(planned)} planned, "
           f"{sum(skipped.values())} skipped"]
    groups: dict[str, list[tuple[SiliconRow, Forecast]]] = {"all": list(planned)}
    for row, f in planned:
        groups.setdefault(f"{row.engine} {row.device}", []).append((row, f))
    for name in sorted(groups, key=lambda k: (k != "all", k)):
        rs = groups[name]
        tpot = median_abs(error(f.tpot_expected, r.tpot_ms) for r, f in rs)
        ttft = median_abs(error(f.ttft_expected, r.ttft_ms) for r, f in rs)
        out.append(f"  {name:<20} n = {len(rs):>4}  median |TPOT error| {_pct(tpot):>7}  "
                   f"median |TTFT error| {_pct(ttft):>7}")
    for why, n in sorted(skipped.items(), key=lambda kv: (-kv[1], kv[0])):
        out.append(f"  skipped {n:>4}: {why}")
    return "\n".join(out) + "\n"


USAGE = ("usage: serving.py [--rows] [--holdout] [--disagg] [--out FILE.csv] [--aic AIC.csv] "
         "[--kv-dtype DTYPE] [--per-client N] "
         "[SAMPLE.csv]")


def main(argv: Sequence[str]) -> int:
    args = list(argv)
    flags = {"--rows": False, "--holdout": False, "--disagg": False}
    values: dict[str, Optional[str]] = {"--out": None, "--aic": None, "--kv-dtype": None, "--per-client": None}
    paths: list[str] = []
    while args:
        a = args.pop(0)
        if a in flags:
            flags[a] = True
        elif a in values and args:
            values[a] = args.pop(0)
        elif not a.startswith("-") and not paths:
            paths.append(a)
        else:
            print(USAGE, file=sys.stderr)
            return 2
    started = time.perf_counter()
    per_text = values["--per-client"]
    if per_text is not None and not (per_text.isdigit() and len(per_text) < 7):
        print("error: --per-client takes a whole number of requests per client, 0 to 999999", file=sys.stderr)
        return 2
    try:
        ledger = silicon.read(paths[0] if paths else str(SAMPLE))
        if flags["--disagg"]:  # the disaggregated rows only (docs/service.md, Disaggregated serving)
            planned, skipped = run_disagg(ledger, holdout=flags["--holdout"], kv_dtype=values["--kv-dtype"] or KV_DTYPE)
            sys.stdout.write(report_disagg(planned, skipped, flags["--holdout"]))
            print(f"planned in {time.perf_counter() - started:.1f} s", file=sys.stderr)
            return 0
        aic = read_aic(Path(values["--aic"])) if values["--aic"] else None
        per = int(per_text) if per_text is not None else PER_CLIENT
        result = run(ledger, holdout=flags["--holdout"], kv_dtype=values["--kv-dtype"] or KV_DTYPE,
                     plan_text=lambda text, name: forecast(text, name, per))
    except (KvplanError, BenchError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    sys.stdout.write(report(result, rows=flags["--rows"], aic=aic))
    if values["--out"]:
        Path(values["--out"]).write_text(out_csv(result), encoding="utf-8")
    print(f"planned in {time.perf_counter() - started:.1f} s", file=sys.stderr)  # wall time: stderr, stdout stays
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
