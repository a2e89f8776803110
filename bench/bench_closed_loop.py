"""Benchmark: kvplan's closed-loop predictions against published closed-loop serving runs (docs/service.md).

Run:  python bench/bench_closed_loop.py [FILE.csv]     (default: tests/data/measured/closed_loop.csv)
      python bench/bench_closed_loop.py --select UPSTREAM.csv > tests/data/measured/closed_loop.csv

Each row of the data set (tests/data/measured/README.md, "Closed-loop serving runs") is a benchmark of C
concurrent clients of fixed input and output lengths on one aggregated vLLM deployment. The row becomes a spec,
`workload { concurrency = C  input = ISL  output = OSL }` with the row's model, device, tensor parallelism and
weights pinned, planned as `kvplan advise` plans it; the plan's mean TTFT and mean TPOT (SPEC §13) are printed
beside the measured ones with the error of each, then the median |error| overall, per device, per model and per
model and device. It runs offline and prints the same bytes every time; a row it cannot plan stops it with one
line naming FILE:LINE and exit 2. A row whose plan does not fit at the loop's batch and the context ISL + OSL is
marked: the engine preempts there and queues what kvplan's closed loop does not. It asserts nothing:
tests/unit/model/test_closed_loop_bench.py checks that every row is plannable.

`--select` writes the data set from aiconfigurator's silicon_sample.csv by the stated rule (SELECTION); a row
measured on or after HOLDOUT, or with no measurement date, is dropped before any of its figures is read: those
rows are a holdout kept for a one-time report, and no figure of theirs is read into anything here.
"""

from __future__ import annotations

import csv
import io
import statistics
import sys
from pathlib import Path
from typing import Mapping, Sequence

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script from anywhere: kvplan is the checkout's
    sys.path.insert(0, str(ROOT))

if str(ROOT / "bench") not in sys.path:  # serving.py beside it
    sys.path.insert(0, str(ROOT / "bench"))

from serving import Unplanned, forecast, spec_text  # noqa: E402

from kvplan.base.records import record  # noqa: E402
from kvplan.engines import silicon  # noqa: E402

DATA = ROOT / "tests" / "data" / "measured" / "closed_loop.csv"
#: Where the rows come from: the repository, its commit and the file (`fetch github:ai-dynamo/aiconfigurator`).
UPSTREAM = ("ai-dynamo/aiconfigurator", "095f58a51c4ca8e61b66ec108d86f223f8d559ce",
            "aic-core/src/aiconfigurator_core/systems/silicon_sample.csv")
#: Rows measured on or after this date are the holdout: never read.
HOLDOUT = "2026-03-01"
#: The upstream checkpoints kept and the systems kept, and the catalog id of each (kvplan.engines.silicon's map).
MODELS = {c: silicon.model_of(c) for c in ("meta-llama/Llama-3.1-70B", "Qwen/Qwen3-32B")}
SYSTEMS = {s: silicon.SYSTEMS[s] for s in ("h100_sxm", "h200_sxm")}
SELECTION = (f"mode = agg, backend = vllm, system in {sorted(SYSTEMS)}, model_path in {sorted(MODELS)} (the "
             "dense models of kvplan's catalog), pp_size = 1, gemm_quant_mode = fp8, a `measured=` date in "
             f"silicon_data_source before {HOLDOUT}")
COLUMNS = ("id", "model", "device", "tensor_parallel", "weights", "engine", "engine_version", "concurrency",
           "input", "output", "measured", "ttft_ms", "tpot_ms", "source")
#: A data set is a small table: a bigger file is refused rather than read into memory.
MAX_BYTES = 4 << 20


class DataError(Exception):
    """A row that cannot be planned: the message names FILE:LINE, what was wrong and what would be right."""


@record
class Row:
    """One closed-loop benchmark run: its deployment, its workload and the measured means (seconds)."""

    line: int
    id: str
    model: str
    device: str
    tp: int
    weights: str
    concurrency: int
    n_in: int
    n_out: int
    ttft: float
    tpot: float


def select(upstream: Path) -> str:
    """The data set's CSV text from aiconfigurator's silicon_sample.csv (SELECTION), typed by
    kvplan.engines.silicon; the holdout is dropped before its figures are written."""
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(COLUMNS)
    repo, commit, path = UPSTREAM
    for r in silicon.parse(upstream.read_text(encoding="utf-8"), str(upstream)).rows:
        date = r.measured_on.isoformat()
        if date >= HOLDOUT:
            continue  # the holdout: nothing of this row past its date is written
        if (r.mode, r.engine, r.layout.pp, r.weights, r.precision) != ("agg", "vllm", 1, "fp8", "fp8") or (
                r.system not in SYSTEMS or r.checkpoint not in MODELS):
            continue
        w.writerow([r.id, r.model, r.device, r.layout.tp, "fp8", "vllm", r.engine_version, r.concurrency, r.isl,
                    r.osl, date, repr(r.ttft_ms), repr(r.tpot_ms), f"{repo}@{commit}:{path}"])
    return out.getvalue()


def read(path: Path) -> list[Row]:
    """The data set's rows; a malformed one raises DataError naming FILE:LINE."""
    if path.stat().st_size > MAX_BYTES:
        raise DataError(f"{path}: over {MAX_BYTES:,} bytes: a data set is a small table")
    rows = []
    with path.open(newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        if tuple(reader.fieldnames or ()) != COLUMNS:
            raise DataError(f"{path}:1: the columns must be {','.join(COLUMNS)}")
        for i, r in enumerate(reader, start=2):
            try:
                rows.append(Row(i, r["id"], r["model"], r["device"], int(r["tensor_parallel"]), r["weights"],
                                int(r["concurrency"]), int(r["input"]), int(r["output"]),
                                float(r["ttft_ms"]) / 1e3, float(r["tpot_ms"]) / 1e3))
            except ValueError as e:
                raise DataError(f"{path}:{i}: {e}: every count is a whole number and every time a number of "
                                "ms") from None
    return rows


def spec(row: Row) -> str:
    """The row as a spec: its deployment pinned (the KV dtype left to kvplan), its closed loop the workload."""
    return spec_text(row.id, row.model, row.device, "vllm", row.weights, row.tp, 1, row.concurrency, row.n_in,
                     row.n_out, None)


@record
class Predicted:
    """A row's plan: mean TTFT and mean TPOT (seconds), and whether the plan fits at the loop's batch."""

    ttft: float
    tpot: float
    fits: bool


def predict(row: Row, where: str) -> Predicted:
    """The row's spec planned; DataError naming `where` when it does not check or plan."""
    try:
        got = forecast(spec(row), row.id)
    except Unplanned as e:
        raise DataError(f"{where}: {e}") from None
    return Predicted(got.ttft_expected / 1e3, got.tpot_expected / 1e3, got.fits)


def _median(xs: Sequence[float]) -> str:
    return f"{statistics.median(xs):6.1%}" if xs else "     -"


def report(path: Path) -> str:
    """The table of rows and the medians, as printed."""
    rows = read(path)
    lines = [f"{'row':<72} {'C':>4} {'ISL':>5} {'OSL':>5}  {'TTFT ms':>9} {'meas.':>9} {'err':>7}  "
             f"{'TPOT ms':>8} {'meas.':>8} {'err':>7}"]
    errs: dict[str, list[tuple[float, float]]] = {}
    for row in rows:
        got = predict(row, f"{path.name}:{row.line}")
        e_t, e_p = got.ttft / row.ttft - 1.0, got.tpot / row.tpot - 1.0
        for group in (row.device, row.model, f"{row.model} {row.device}"):
            errs.setdefault(group, []).append((abs(e_t), abs(e_p)))
        if got.fits:
            errs.setdefault(" that fit", []).append((abs(e_t), abs(e_p)))
        lines.append(f"{row.id[:72]:<72} {row.concurrency:>4} {row.n_in:>5} {row.n_out:>5}  "
                     f"{got.ttft * 1e3:9.1f} {row.ttft * 1e3:9.1f} {e_t:+7.1%}  {got.tpot * 1e3:8.2f} "
                     f"{row.tpot * 1e3:8.2f} {e_p:+7.1%}" + ("" if got.fits else "  (does not fit)"))
    lines.append("")
    lines.append("median |error|                 TTFT    TPOT   rows")
    every = [e for k, v in errs.items() if k in {r.device for r in rows} for e in v]
    for name, es in [("all", every), *sorted(errs.items())]:
        name = "rows whose plan fits" if name == " that fit" else name
        lines.append(f"  {name:<27} {_median([t for t, _ in es])}  {_median([p for _, p in es])}  {len(es):>5}")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str], env: Mapping[str, str] | None = None) -> int:
    try:
        if argv[:1] == ["--select"] and len(argv) == 2:
            sys.stdout.write(select(Path(argv[1])))
        elif len(argv) <= 1:
            sys.stdout.write(report(Path(argv[0]) if argv else DATA))
        else:
            print("usage: bench_closed_loop.py [FILE.csv] | --select UPSTREAM.csv", file=sys.stderr)
            return 2
    except (DataError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
