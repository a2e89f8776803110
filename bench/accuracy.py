"""Benchmark: kvplan's bound and expected decode step against published measurements (docs/expected.md).

Run:  python bench/accuracy.py [FILE.csv]        (default: tests/data/measured/decode.csv)

For each row of the data set (tests/data/measured/README.md) it prints the lower bound
(kvplan.model.roofline.step_time at the row's deployment), the expected step with kvplan's default factors
(kvplan.model.expected), the measured inter-token latency and both errors, then the median absolute error of
each overall, per device and per engine. It runs offline and prints the same bytes every time. A row it cannot
evaluate (a model, device or dtype the catalog does not know, a malformed number, a column it does not know)
stops it with one line naming FILE:LINE:COL and exit 2; the shipped set has none. It asserts nothing:
tests/unit/model/test_accuracy.py holds the figures to their bounds.
"""

from __future__ import annotations

import csv
import math
import statistics
import sys
from pathlib import Path
from typing import Mapping, Optional, Sequence

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script from anywhere: kvplan is the checkout's
    sys.path.insert(0, str(ROOT))

from kvplan import catalog  # noqa: E402
from kvplan.base.errors import KvplanError, Span  # noqa: E402
from kvplan.base.records import record  # noqa: E402
from kvplan.catalog import weight_bytes  # noqa: E402
from kvplan.model import calibrate as cal  # noqa: E402
from kvplan.model import expected as ex  # noqa: E402
from kvplan.model import roofline as rf  # noqa: E402

DATA = ROOT / "tests" / "data" / "measured" / "decode.csv"
#: The columns every row has (the calibration CSV's, docs/expected.md) and the ones it may have.
REQUIRED = ("model", "device", "devices", "tensor_parallel", "weights", "kv_dtype", "batch", "context", "itl_ms")
OPTIONAL = ("engine", "ttft_ms", "input_len", "source", "settings", "notes")
#: A data set is a small table: a bigger file is refused rather than read into memory.
MAX_BYTES = 4 << 20


class DataError(Exception):
    """A row that cannot be evaluated: the message names FILE:LINE:COL, what was wrong and what would be right."""


@record
class Row:
    """One published measurement: the deployment it ran on and its inter-token latency (seconds)."""

    line: int
    model: str
    device: str
    devices: int
    tp: int
    weights: str
    kv_dtype: str
    batch: int
    context: int
    itl: float
    engine: str
    ttft: Optional[float]
    input_len: Optional[int]
    source: str


@record
class Result:
    """A row beside kvplan's figures for it: the bound and the expected step (seconds), and their errors
    against the measured value, (figure − measured) / measured."""

    row: Row
    bound: float
    expected: float

    @property
    def bound_error(self) -> float:
        return (self.bound - self.row.itl) / self.row.itl

    @property
    def expected_error(self) -> float:
        return (self.expected - self.row.itl) / self.row.itl


def _columns(line: str) -> list[int]:
    """The 1-based character column where each comma-separated field of `line` starts (quotes respected)."""
    starts, quoted = [1], False
    for i, ch in enumerate(line):
        if ch == '"':
            quoted = not quoted
        elif ch == "," and not quoted:
            starts.append(i + 2)
    return starts


def _whole(text: str, where: str, name: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise DataError(f"{where}: {name} is {text!r}: expected a whole number of at least 1")
    return value


def _positive(text: str, where: str, name: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise DataError(f"{where}: {name} is {text!r}: expected a positive number of milliseconds")
    return value


def _header(fields: list[str], line: str, path: str) -> None:
    known = REQUIRED + OPTIONAL
    cols = _columns(line)
    for name, col in zip(fields, cols):
        if name not in known:
            raise DataError(f"{path}:1:{col}: unknown column {name!r} (the columns are {', '.join(known)})")
    for name in REQUIRED:
        if name not in fields:
            raise DataError(f"{path}:1:1: no column {name!r} (every row needs {', '.join(REQUIRED)})")


def _row(values: Mapping[str, str], cols: Mapping[str, int], path: str, line: int) -> Row:
    def at(name: str) -> str:
        return f"{path}:{line}:{cols[name]}"

    ttft = values.get("ttft_ms", "")
    input_len = values.get("input_len", "")
    row = Row(line=line, model=values["model"], device=values["device"],
              devices=_whole(values["devices"], at("devices"), "devices"),
              tp=_whole(values["tensor_parallel"], at("tensor_parallel"), "tensor_parallel"),
              weights=values["weights"], kv_dtype=values["kv_dtype"],
              batch=_whole(values["batch"], at("batch"), "batch"),
              context=_whole(values["context"], at("context"), "context"),
              itl=_positive(values["itl_ms"], at("itl_ms"), "itl_ms") / 1e3,
              engine=values.get("engine", "") or "any",
              ttft=_positive(ttft, at("ttft_ms"), "ttft_ms") / 1e3 if ttft else None,
              input_len=_whole(input_len, at("input_len"), "input_len") if input_len else None,
              source=values.get("source", ""))
    if row.input_len is not None and row.context < row.input_len:
        raise DataError(f"{at('context')}: context {row.context} is below input_len {row.input_len}: the mean "
                        "context during decode is input_len + output_len / 2 (tests/data/measured/README.md)")
    return row


def load(path: Path) -> list[tuple[Row, dict[str, str]]]:
    """The rows of a data set CSV, each on one line, with the FILE:LINE:COL of each of its columns; DataError
    names the first thing wrong."""
    name = str(path)
    try:
        if path.stat().st_size > MAX_BYTES:
            raise DataError(f"{name}: {path.stat().st_size:,} bytes: a data set is at most {MAX_BYTES:,} bytes")
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise DataError(f"{name}: cannot read it ({e.__class__.__name__}: {e}): give a UTF-8 CSV file") from None
    if not lines:
        raise DataError(f"{name}:1:1: the file is empty: its first line names the columns ({', '.join(REQUIRED)})")
    header = next(csv.reader([lines[0]]))
    _header(header, lines[0], name)
    rows = []
    for n, text in enumerate(lines[1:], start=2):
        if not text.strip():
            continue
        if text.count('"') % 2:
            raise DataError(f"{name}:{n}:1: a quoted field runs past the end of the line: write each row on one line")
        fields = next(csv.reader([text]))
        if len(fields) != len(header):
            raise DataError(f"{name}:{n}:1: {len(fields)} fields where the header has {len(header)}")
        cols = dict(zip(header, _columns(text)))
        where = {k: f"{name}:{n}:{c}" for k, c in cols.items()}
        rows.append((_row(dict(zip(header, fields)), cols, name, n), where))
    return rows


def evaluate(row: Row, where: Mapping[str, str]) -> Result:
    """kvplan's bound and expected step at the row's deployment; DataError (at the offending column) for what the
    catalog or the model refuses. `where` maps a column name to its FILE:LINE:COL."""
    stage = "model"
    try:
        model = catalog.get_model(row.model)
        stage = "device"
        device = catalog.get_device(row.device)
        stage = "weights"
        model, w = weight_bytes.planned(model, catalog.dtype(row.weights))
        stage = "kv_dtype"
        kv = catalog.dtype(row.kv_dtype)
        stage = "tensor_parallel"
        cfg = rf.Config(model, device, n_devices=row.devices, tp=row.tp, w_p=w.width, w_kv=kv.width)
        stage = "device"
        link = device.scaleup_link or ""
        bandwidth = catalog.get_link(link).bandwidth if link else None
        factors = ex.default_factors(device, kv.id, row.engine, link)
        bound = float(rf.step_time(cfg, row.batch, row.context).step)
        expected = float(ex.expected_step(cfg, row.batch, row.context, factors, bandwidth).step)
    except KvplanError as e:
        raise DataError(f"{where[stage]}: {e}") from None
    return Result(row, bound, expected)


def run(path: Path) -> list[Result]:
    """Every row of the data set at `path`, evaluated."""
    return [evaluate(row, where) for row, where in load(path)]


#: The engines a calibration fit names (kvplan.model.profile.ENGINES); another engine's rows fit as "any".
FIT_ENGINES = ("vllm", "sglang", "trtllm")
#: The fewest rows of one single-model sweep the half-split check takes: two to fit, two to predict.
SPLIT_MIN_ROWS = 4


@record
class Split:
    """One single-model sweep's half-split: the fit on every other row (batch, context order) and each other
    row's error, (predicted − measured) / measured, with the fitted factors laid over kvplan's defaults."""

    label: str
    fit: cal.Fit
    errors: tuple[tuple[Row, float], ...]


def _engine(r: Row) -> str:
    return r.engine if r.engine in FIT_ENGINES else "any"


def sweeps(rows: Sequence[Row]) -> dict[str, list[Row]]:
    """The single-model sweeps of the set: rows of one model, device, layout, weights, KV dtype and engine (only
    batch and context vary), by a label naming them, each sorted by batch then context."""
    out: dict[str, list[Row]] = {}
    for r in rows:
        label = f"{r.model} {r.device} tp{r.tp}/{r.devices} {r.weights}/{r.kv_dtype} {r.engine}"
        out.setdefault(label, []).append(r)
    return {k: sorted(v, key=lambda r: (r.batch, r.context, r.line)) for k, v in sorted(out.items())}


def _measurement(r: Row, path: str) -> cal.Measurement:
    return cal.Measurement(r.model, r.device, r.devices, r.tp, r.weights, r.kv_dtype, _engine(r), r.batch,
                           float(r.context), r.itl, span=Span(path, r.line, 1, r.line, 1))


def predicted(fit: cal.Fit, m: cal.Measurement) -> float:
    """The ITL kvplan predicts for `m` with the fit laid over its defaults, as a profile's reader lays it: each
    determined factor the fit's, every other the default."""
    fitted = dict(fit.fitted)
    dep = cal.deployment(m)
    base = ex.default_factors(dep.cfg.device, m.kv_dtype, m.engine, dep.link)
    f = base.replaced({k: fitted[n] for k, n in (("eta_w", "eta_w"), ("eta_kv", f"eta_kv:{m.kv_dtype}"),
                                                  ("eta_compute", "eta_compute"), ("t_fixed", "t_fixed"),
                                                  ("collective_latency", "collective_latency"),
                                                  ("t_layer", "t_layer")) if n in fitted})
    return cal.expected_time(m, "itl", dep, f)


def half_split(rows: Sequence[Row], path: str) -> list[Split]:
    """Per single-model sweep with at least SPLIT_MIN_ROWS rows: `kvplan calibrate`'s fit (kvplan.model.calibrate)
    on rows 1, 3, 5, … in batch and context order, and each of rows 2, 4, … predicted with it."""
    out = []
    for label, group in sweeps(rows).items():
        if len(group) < SPLIT_MIN_ROWS:
            continue
        (fit,) = cal.fit([_measurement(r, path) for r in group[0::2]], "half.toml")
        errors = tuple((r, predicted(fit, _measurement(r, path)) / r.itl - 1) for r in group[1::2])
        out.append(Split(label, fit, errors))
    return out


def median_abs(values: Sequence[float]) -> float:
    return statistics.median(abs(v) for v in values)


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.2f} ms"


def _quantity(value: float, unit: str) -> str:
    """A factor as printed: a fraction bare, a time in ms or us."""
    if unit != "s":
        return f"{value:g}"
    return f"{value * 1e3:g} ms" if value >= 1e-3 else f"{value * 1e6:g} us"


def _factor_lines(results: Sequence[Result]) -> list[str]:
    """The default factors each device, KV dtype and engine of the set is evaluated with (evaluate's), value and
    evidence class."""
    out = []
    keys = {(r.row.device, catalog.dtype(r.row.kv_dtype).id, r.row.engine) for r in results}
    for dev_id, kv_id, engine in sorted(keys):
        device = catalog.get_device(dev_id)
        f = ex.default_factors(device, kv_id, engine, device.scaleup_link or "")
        parts = [f"{name} {_quantity(v.value, v.unit)} ({v.evidence.value})" for name, v in f.items()]
        out.append(f"#   {dev_id}, KV {kv_id}, {engine}: " + ", ".join(parts))
    return out


def _split_lines(split: Sequence[Split]) -> list[str]:
    """The half-split check: per single-model sweep, what the fit on every other row fitted and held, the other
    rows' errors and their median |error|; then the median over every predicted row."""
    out = ["", "calibrated on every other row of each single-model sweep (kvplan.model.calibrate), the other rows "
               "predicted:"]
    for sp in split:
        each = ", ".join(f"line {r.line} {e:+.1%}" for r, e in sp.errors)
        fitted = ", ".join(n for n, _ in sp.fit.fitted) or "nothing"
        out.append(f"{sp.label}: {len(sp.errors)} rows predicted, median |error| "
                   f"{median_abs([e for _, e in sp.errors]):.1%}  ({each}); fitted {fitted}")
        out += [f"    held {name}: {why}" for name, why in sp.fit.left_out]
    every = [e for sp in split for _, e in sp.errors]
    if every:
        out.append(f"all sweeps: {len(every)} rows predicted, median |error| {median_abs(every):.1%}")
    return out


def render(results: Sequence[Result], shown: str, split: Optional[Sequence[Split]] = None) -> str:
    """The report: a header naming the command and the evidence, a line per row, then the medians."""
    lines = [f"# python bench/accuracy.py{' ' + shown if shown else ''}",
             "# bound: kvplan.model.roofline.step_time at the row's deployment, a derived lower bound (docs/model.md)",
             "# expected: kvplan.model.expected.expected_step with kvplan's default factors (docs/expected.md),"
             " derived, from:",
             *_factor_lines(results),
             "# measured: the inter-token latency the source published, evidence class measured"
             " (tests/data/measured/README.md)",
             "# error: (figure - measured) / measured",
             ""]
    head = (f"{'line':>4}  {'model':<15} {'device':<9} {'tp':>2}  {'w/kv':<9} {'batch':>5} {'context':>7}  "
            f"{'engine':<8} {'bound':>10} {'expected':>10} {'measured':>10} {'bound err':>9} {'exp err':>8}")
    lines += [head, "-" * len(head)]
    for r in results:
        row = r.row
        dtypes = f"{row.weights}/{row.kv_dtype}"
        lines.append(f"{row.line:>4}  {row.model:<15} {row.device:<9} {row.tp:>2}  {dtypes:<9} "
                     f"{row.batch:>5} {row.context:>7}  {row.engine:<8} {_ms(r.bound):>10} {_ms(r.expected):>10} "
                     f"{_ms(row.itl):>10} {r.bound_error:>+9.1%} {r.expected_error:>+8.1%}")
    lines += ["", _summary("all rows", results)]
    for key, label in ((lambda r: r.row.device, "device"), (lambda r: r.row.engine, "engine")):
        for name in sorted({key(r) for r in results}):
            lines.append(_summary(f"{label} {name}", [r for r in results if key(r) == name]))
    above = sum(r.bound > r.row.itl for r in results)
    lines += ["", f"bound above the measured value: {above} of {len(results)} rows (a bound must never be)"]
    if split:
        lines += _split_lines(split)
    return "\n".join(lines) + "\n"


def _summary(label: str, results: Sequence[Result]) -> str:
    exp = [r.expected_error for r in results]
    bound = median_abs([r.bound_error for r in results])
    return (f"{label:<18} {len(results):>3} rows  median |error|: bound {bound:6.1%}, "
            f"expected {median_abs(exp):6.1%}  (expected's median signed error {statistics.median(exp):+.1%})")


def main(argv: Sequence[str]) -> int:
    """Print the report for the file named in argv (default the shipped set): 0, or 2 with one line on stderr."""
    if len(argv) > 1:
        print("accuracy: give at most one data set CSV (python bench/accuracy.py [FILE.csv])", file=sys.stderr)
        return 2
    path = Path(argv[0]) if argv else DATA
    try:
        results = run(path)
    except DataError as e:
        print(f"accuracy: {e}", file=sys.stderr)
        return 2
    if not results:
        print(f"accuracy: {path}: no rows: add at least one measurement under the header", file=sys.stderr)
        return 2
    try:
        split = half_split([r.row for r in results], str(path))
    except KvplanError as e:  # the rows evaluated above; a fit that cannot run is one line too
        print(f"accuracy: {e}", file=sys.stderr)
        return 2
    sys.stdout.write(render(results, argv[0] if argv else "", split))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
