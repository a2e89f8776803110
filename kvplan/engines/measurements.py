"""Reading benchmark output for `kvplan calibrate` (docs/calibrate.md): each file becomes Measurements.

The formats, told apart by their content (tests/data/calibrate/README.md names the source each follows):

- `vllm bench latency --output-json FILE` (vllm/benchmarks/latency.py): `avg_latency` (s) of one batch of
  requests, prefilled and decoded to the end. The file holds neither the batch nor the lengths: --batch,
  --input-len and --output-len say them. It is a whole-request latency, fitted as such (prefill of the batch
  and output_len − 1 decode steps), never divided into a per-token time.
- `vllm bench serve --save-result` (vllm/benchmarks/serve.py), one JSON object or several, one a line
  (--append-result): `mean_itl_ms`, `mean_ttft_ms`, `max_concurrency` (the batch), `model_id`, and
  `total_input_tokens`, `total_output_tokens`, `completed` (the mean lengths). --metadata KEY=VALUE keys
  `device`, `devices`, `tensor_parallel` (or `tp`), `weights`, `kv_dtype` and `engine` are read when present.
- SGLang `bench_one_batch` (python/sglang/bench_one_batch.py), JSON lines: `batch_size`, `input_len`,
  `output_len`, `prefill_latency` (the batch's prefill, s) and `median_decode_latency` (s).
- SGLang `bench_serving` (python/sglang/bench_serving.py), JSON lines: as vLLM's serve result, with
  `mean_e2e_latency_ms` and `backend`.
- The CSV of docs/calibrate.md: a header, then `model,device,devices,tensor_parallel,weights,kv_dtype,batch,
  context,itl_ms` and optionally `ttft_ms,input_len,engine` and `kv_bytes,kernel_ms,achieved_kv_bandwidth_Bps`
  (a kernel measurement: the attention kernel alone on one rank, as `emit --target flashinfer`'s benchmark
  writes it, `itl_ms` empty); `source,settings,notes` are accepted and ignored.

What a file does not say, the command line (`Given`) fills; a value said both ways that disagrees is an
error. A file kvplan cannot read is refused with one line naming it and the field it missed.
"""

from __future__ import annotations

import csv
import json
import math
from typing import Callable, Mapping, Optional, Sequence

from kvplan.base import files, limits
from kvplan.base.errors import KvplanError, Span
from kvplan.base.json_types import JSONValue
from kvplan.base.records import record
from kvplan.catalog import dtype, get_device, get_model
from kvplan.catalog.engines import ENGINES
from kvplan.model.calibrate import MAX_REQUEST_STEPS, Measurement

#: The largest measurements file kvplan reads: a `--save-detailed` serve result of a few thousand requests is
#: a few MB; larger is refused as the wrong file.
MAX_MEASUREMENTS_BYTES = 16 * 1024 * 1024
#: The longest time one measured figure may be (s): a day. Above it, a figure in the wrong unit.
MAX_SECONDS = 86_400.0
#: The engines a profile's fit names.
PROFILE_ENGINES = ("vllm", "sglang", "trtllm", "any")

CSV_REQUIRED = ("model", "device", "devices", "tensor_parallel", "weights", "kv_dtype", "batch", "context",
                "itl_ms")
#: The columns of a kernel measurement (flashinfer_decode.py's; kvplan.engines.flashinfer.CSV_COLUMNS).
KERNEL_COLUMNS = ("kv_bytes", "kernel_ms", "achieved_kv_bandwidth_Bps")
CSV_OPTIONAL = ("ttft_ms", "input_len", "engine", *KERNEL_COLUMNS)
CSV_IGNORED = ("source", "settings", "notes")
#: How far kv_bytes / kernel_ms may differ from achieved_kv_bandwidth_Bps (relative): the benchmark writes
#: kernel_ms to 6 significant digits, 5e-6 at most; more than 1% is two different measurements in one row.
KERNEL_AGREEMENT = 0.01
#: The largest achieved KV bandwidth a row may state (B/s): 1 PB/s, over a hundred times any device's HBM.
MAX_KV_BANDWIDTH = 1e15


@record
class Given:
    """What the command line says about every file's runs (None: not said)."""

    model: Optional[str] = None
    device: Optional[str] = None
    devices: Optional[int] = None
    tensor_parallel: Optional[int] = None
    weights: Optional[str] = None
    kv_dtype: Optional[str] = None
    engine: Optional[str] = None
    batch: Optional[int] = None
    input_len: Optional[int] = None
    output_len: Optional[int] = None


@record
class Read:
    """A file's measurements, the tool that wrote it, and what kvplan assumed for it (printed as notes)."""

    measurements: tuple[Measurement, ...]
    tool: str
    notes: tuple[str, ...]


class MeasurementsError(KvplanError):
    """A measurements file kvplan cannot read, or one whose figures disagree with the command line."""


def _option(name: str) -> str:
    return "--" + name.replace("_", "-")


# ------------------------------------------------------------------ values

def _where(text: str, path: str, key: str, start: int = 0) -> Span:
    """The place of `"key"` in the JSON text (from offset `start`), else the place `start` is at."""
    at = text.find(f'"{key}"', start)
    line, col = limits.line_col(text, at if at >= 0 else start)
    return Span(path, line, col, line, col)


def _number(raw: JSONValue, what: str, span: Span, *, lo: float, hi: float, integer: bool = False) -> float:
    if isinstance(raw, bool) or not isinstance(raw, (int, float)):
        raise MeasurementsError(f"{what} is {json.dumps(raw)[:40]}: expected a number", span=span)
    x = float(raw)
    if not math.isfinite(x) or not lo <= x <= hi or (integer and x != int(x)):
        kind = "a whole number" if integer else "a number"
        raise MeasurementsError(f"{what} is {raw!r}: expected {kind} from {lo:g} to {hi:g}", span=span)
    return x


def _seconds(raw: JSONValue, what: str, span: Span, scale: float = 1.0) -> float:
    """A positive measured time, `scale` to seconds (1e-3 for a figure in ms)."""
    x = _number(raw, what, span, lo=0.0, hi=MAX_SECONDS / scale)
    if x <= 0:
        raise MeasurementsError(f"{what} is {raw!r}: a measured time must be above 0", span=span)
    return x * scale


def _count(raw: JSONValue, what: str, span: Span, hi: float) -> int:
    return int(_number(raw, what, span, lo=1, hi=hi, integer=True))


def _merge(field: str, said: Optional[str], given: Optional[str], span: Span, same: bool) -> Optional[str]:
    """The file's value, else the command line's; both that disagree is an error."""
    if said is not None and given is not None and not same:
        raise MeasurementsError(f"the file says {field} = {said}, but {_option(field)} says {given}",
                                help=f"drop {_option(field)} or fix the file", span=span)
    return said if said is not None else given


def _same(field: str, a: str, b: str) -> bool:
    """Whether two names of a model, device, dtype or engine mean the same entry."""
    if a.strip().lower() == b.strip().lower():
        return True
    look = {"model": lambda n: get_model(n).id, "device": lambda n: get_device(n).id,
            "weights": lambda n: dtype(n).id, "kv_dtype": lambda n: dtype(n).id, "engine": engine_id}.get(field)
    if look is None:
        return False
    try:
        return bool(look(a) == look(b))
    except KvplanError:
        return False


def engine_id(name: str) -> str:
    """vllm, sglang, trtllm or any, from an engine's id or one of its aliases."""
    low = name.strip().lower()
    for eid in PROFILE_ENGINES:
        if low == eid or low in ENGINES[eid].aliases:
            return eid
    raise MeasurementsError(f"unknown engine '{name}'", help="use vllm, sglang, trtllm or any")


# ------------------------------------------------------------------ one run's deployment

@record
class _Said:
    """What a file says of one run's deployment (strings as written; None: not said)."""

    model: Optional[str] = None
    device: Optional[str] = None
    devices: Optional[str] = None
    tensor_parallel: Optional[str] = None
    weights: Optional[str] = None
    kv_dtype: Optional[str] = None
    engine: Optional[str] = None


@record
class _Layout:
    """One run's deployment, settled."""

    model: str
    device: str
    devices: int
    tensor_parallel: int
    weights: str
    kv_dtype: str
    engine: str

    def measurement(self, batch: int, context: float, itl_s: Optional[float], span: Span, *,
                    ttft_s: Optional[float] = None, request_s: Optional[float] = None,
                    input_len: Optional[int] = None, output_len: Optional[int] = None,
                    prefill_prompts: int = 1, kernel: Optional[tuple[float, float]] = None,
                    clients: Optional[int] = None) -> Measurement:
        return Measurement(self.model, self.device, self.devices, self.tensor_parallel, self.weights,
                           self.kv_dtype, self.engine, batch, context, itl_s, ttft_s, request_s, input_len,
                           output_len, prefill_prompts, span, kernel_s=None if kernel is None else kernel[0],
                           kv_bytes=None if kernel is None else kernel[1], clients=clients)


def _layout(said: _Said, given: Given, span: Span, notes: list[str], default_engine: Optional[str]) -> _Layout:
    """The deployment of a run: the file's, the command line's, else a named default (noted)."""
    out: dict[str, object] = {}
    for field in ("model", "device", "weights", "kv_dtype", "engine"):
        s, g = getattr(said, field), getattr(given, field)
        out[field] = _merge(field, s, g, span, s is None or g is None or _same(field, s, g))
    for field in ("model", "device"):
        if out[field] is None:
            raise MeasurementsError(f"the file does not say the {field} its runs used", span=span,
                                    help=f"give {_option(field)}")
    if out["engine"] is None:
        if default_engine is None:
            raise MeasurementsError("the file does not say which engine served", span=span,
                                    help="give --engine vllm, sglang or trtllm")
        out["engine"] = default_engine
        notes.append(f"{span.file}: engine {default_engine} (assumed: the file does not name the engine that "
                     "served; give --engine)")
    out["engine"] = _engine(str(out["engine"]), span)
    if out["kv_dtype"] is None:
        out["kv_dtype"] = "bf16"
        notes.append(f"{span.file}: KV dtype bf16 (assumed: the engines' default for a BF16 model; give --kv-dtype)")
    out["weights"] = out["weights"] or ""
    for field in ("devices", "tensor_parallel"):
        s, g = getattr(said, field), getattr(given, field)
        number = None if s is None else _count(_int_text(s), field, span, limits.MAX_DEVICES)
        if number is not None and g is not None and number != g:
            raise MeasurementsError(f"the file says {field} = {number}, but {_option(field)} says {g}",
                                    help=f"drop {_option(field)} or fix the file", span=span)
        out[field] = number if number is not None else g
    tp = out["tensor_parallel"] or out["devices"] or 1
    if said.devices is None and said.tensor_parallel is None and given.devices is None \
            and given.tensor_parallel is None:
        notes.append(f"{span.file}: one device, tensor parallel 1 (assumed; give --devices and --tensor-parallel)")
    return _Layout(str(out["model"]), str(out["device"]), int(str(out["devices"] or tp)), int(str(tp)),
                   str(out["weights"]), str(out["kv_dtype"]), str(out["engine"]))


def _engine(name: str, span: Span) -> str:
    try:
        return engine_id(name)
    except KvplanError as exc:
        raise MeasurementsError(exc.message, help=exc.help, span=span) from None


def _int_text(text: str) -> JSONValue:
    try:
        return int(text.strip())
    except ValueError:
        return text


# ------------------------------------------------------------------ JSON files

def _objects(text: str, path: str) -> list[tuple[int, dict[str, JSONValue]]]:
    """The JSON objects of a file: one document, or one a line (JSON lines); each with its offset."""
    deep = limits.json_too_deep(text)
    if deep is not None:
        line, col = limits.line_col(text, deep)
        raise MeasurementsError(f"JSON nested deeper than {limits.MAX_JSON_DEPTH} levels",
                                span=Span(path, line, col, line, col))
    try:
        whole = json.loads(text)
        docs: list[tuple[int, JSONValue]] = [(len(text) - len(text.lstrip()), whole)]
    except json.JSONDecodeError as first:
        docs = []
        offset = 0
        for line_text in text.split("\n"):
            if line_text.strip():
                try:
                    docs.append((offset, json.loads(line_text)))
                except json.JSONDecodeError:
                    line, col = limits.line_col(text, first.pos)
                    raise MeasurementsError(f"not JSON: {first.msg}", span=Span(path, line, col, line, col),
                                            help="give the JSON file the benchmark wrote, or the CSV of "
                                                 "docs/calibrate.md") from None
            offset += len(line_text) + 1
    out = []
    for at, doc in docs:
        if not isinstance(doc, dict):
            line, col = limits.line_col(text, at)
            raise MeasurementsError("expected a JSON object of a benchmark's results",
                                    span=Span(path, line, col, line, col),
                                    help="a .pytorch.json file is not read; give the file --output-json, "
                                         "--save-result or --result-filename wrote")
        out.append((at, doc))
    return out


def _need(obj: Mapping[str, JSONValue], key: str, text: str, path: str, at: int, tool: str) -> JSONValue:
    if key not in obj or obj[key] is None:
        line, col = limits.line_col(text, at)
        raise MeasurementsError(f"no `{key}` in this {tool} result", span=Span(path, line, col, line, col),
                                help=f"kvplan reads `{key}` from it; is it the file {tool} wrote?")
    return obj[key]


def _tool(obj: Mapping[str, JSONValue]) -> Optional[str]:
    if "avg_latency" in obj and "latencies" in obj:
        return "vllm bench latency"
    if "prefill_latency" in obj and "batch_size" in obj:
        return "sglang bench_one_batch"
    if "mean_itl_ms" in obj:
        return "sglang bench_serving" if "mean_e2e_latency_ms" in obj or "dataset_name" in obj else \
            "vllm bench serve"
    return None


def _fixed(field: str, file_value: int, given: Optional[int], span: Span) -> int:
    if given is not None and given != file_value:
        raise MeasurementsError(f"the file says {field} = {file_value}, but {_option(field)} says {given}",
                                help=f"drop {_option(field)} or fix the file", span=span)
    return file_value


def _needed(value: Optional[int], field: str, tool: str, span: Span, flag: str) -> int:
    if value is None:
        raise MeasurementsError(f"a {tool} result does not record the {field.replace('_', ' ')}", span=span,
                                help=f"give {_option(field)} (the {flag} it ran with)")
    return value


def _vllm_latency(obj: Mapping[str, JSONValue], text: str, path: str, at: int, given: Given,
                  notes: list[str]) -> Measurement:
    tool = "vllm bench latency"
    span = _where(text, path, "avg_latency", at)
    request = _seconds(_need(obj, "avg_latency", text, path, at, tool), "avg_latency", span)
    batch = _needed(given.batch, "batch", tool, span, "--batch-size")
    input_len = _needed(given.input_len, "input_len", tool, span, "--input-len")
    output_len = _needed(given.output_len, "output_len", tool, span, "--output-len")
    if output_len > MAX_REQUEST_STEPS:
        raise MeasurementsError(f"--output-len {output_len:,} is above the {MAX_REQUEST_STEPS:,} decode steps "
                                "kvplan sums for one request latency", span=span)
    layout = _layout(_Said(engine="vllm"), given, span, notes, None)  # vllm bench latency runs vLLM itself
    return layout.measurement(batch, float(input_len + output_len / 2), None, span, request_s=request,
                              input_len=input_len, output_len=output_len, prefill_prompts=batch)


def _serve_engine(obj: Mapping[str, JSONValue]) -> Optional[str]:
    """The engine a serve result's `backend` names (vllm, sglang, trt...), None for a generic client (openai)."""
    backend = str(obj.get("backend") or "").lower()
    for prefix, eid in (("sglang", "sglang"), ("vllm", "vllm"), ("trt", "trtllm"), ("tensorrt", "trtllm")):
        if backend.startswith(prefix):
            return eid
    return None


def _serve(obj: Mapping[str, JSONValue], text: str, path: str, at: int, given: Given, tool: str,
           notes: list[str]) -> Measurement:
    span = _where(text, path, "mean_itl_ms", at)

    def need(key: str) -> JSONValue:
        return _need(obj, key, text, path, at, tool)

    itl = _seconds(need("mean_itl_ms"), "mean_itl_ms", span, 1e-3)
    completed = _count(need("completed"), "completed", _where(text, path, "completed", at), limits.MAX_TOKENS)
    lens = []
    for key, field in (("total_input_tokens", "input_len"), ("total_output_tokens", "output_len")):
        where = _where(text, path, key, at)
        mean = _number(need(key), key, where, lo=1, hi=float(limits.MAX_TOKENS) * completed) / completed
        flag = getattr(given, field)
        if flag is not None and abs(flag - mean) > 0.01 * mean:
            raise MeasurementsError(f"the file's mean {field.replace('_', ' ')} is {mean:.6g} tokens "
                                    f"({key} / completed), but {_option(field)} says {flag}", span=where,
                                    help=f"drop {_option(field)}: a serve result gives it")
        lens.append(mean)
    conc = obj.get("max_concurrency")
    cspan = _where(text, path, "max_concurrency", at)
    batch = _fixed("batch", _count(conc, "max_concurrency", cspan, limits.MAX_BATCH), given.batch, cspan) \
        if conc is not None else _needed(given.batch, "batch", tool, cspan, "--max-concurrency")
    model = _text(obj, "model_id")
    if model is not None and given.model is not None and not _known_model(model):
        model = None  # a local path or a served name: --model names the model
    said = _Said(model, _text(obj, "device"), _text(obj, "devices"), _text(obj, "tensor_parallel") or _text(obj, "tp"),
                 _text(obj, "weights"), _text(obj, "kv_dtype"), _text(obj, "engine") or _serve_engine(obj))
    layout = _layout(said, given, span, notes, "sglang" if tool.startswith("sglang") else "vllm")
    ttft = obj.get("mean_ttft_ms")
    tspan = _where(text, path, "mean_ttft_ms", at)
    if batch > 1 and ttft is not None:
        notes.append(f"{tspan}: mean_ttft_ms not fitted: at concurrency {batch} a request's first token waits "
                     "behind the others' (only a concurrency-1 run measures a prefill alone)")
    input_len, output_len = lens
    return layout.measurement(batch, input_len + output_len / 2, itl, span,
                              ttft_s=None if ttft is None else _seconds(ttft, "mean_ttft_ms", tspan, 1e-3),
                              input_len=max(1, round(input_len)), output_len=max(1, round(output_len)),
                              prefill_prompts=1 if batch == 1 else 0,
                              # a closed loop of `batch` clients: its mean ITL is the load model's (calibrate)
                              clients=batch if output_len >= 2 else None)


def _text(obj: Mapping[str, JSONValue], key: str) -> Optional[str]:
    raw = obj.get(key)
    return None if raw is None or isinstance(raw, (dict, list)) else str(raw)


def _known_model(name: str) -> bool:
    """Whether a file's model name is a catalog model or a Hugging Face repo id (a local path is not)."""
    try:
        get_model(name)
        return True
    except KvplanError:
        return "/" in name and not name.startswith(("/", ".", "~"))


def _one_batch(obj: Mapping[str, JSONValue], text: str, path: str, at: int, given: Given,
               notes: list[str]) -> Measurement:
    tool = "sglang bench_one_batch"
    span = _where(text, path, "batch_size", at)

    def count(key: str, field: str, hi: int) -> int:
        where = _where(text, path, key, at)
        return _fixed(field, _count(_need(obj, key, text, path, at, tool), key, where, hi), getattr(given, field),
                      where)

    batch = count("batch_size", "batch", limits.MAX_BATCH)
    input_len = count("input_len", "input_len", limits.MAX_TOKENS)
    output_len = count("output_len", "output_len", limits.MAX_TOKENS)
    prefill = _seconds(_need(obj, "prefill_latency", text, path, at, tool), "prefill_latency",
                       _where(text, path, "prefill_latency", at))
    decode = obj.get("median_decode_latency")
    itl = None if decode is None else _seconds(decode, "median_decode_latency",
                                               _where(text, path, "median_decode_latency", at))
    layout = _layout(_Said(engine="sglang"), given, span, notes, None)  # bench_one_batch runs SGLang itself
    return layout.measurement(batch, input_len + output_len / 2, itl, span, ttft_s=prefill, input_len=input_len,
                              output_len=output_len, prefill_prompts=batch)


def _json(text: str, path: str, given: Given, notes: list[str]) -> Read:
    out: list[Measurement] = []
    tools = []
    objects = _objects(text, path)
    if len(objects) > 1 and any(_tool(obj) == "vllm bench latency" for _, obj in objects):
        line, col = limits.line_col(text, objects[1][0])
        raise MeasurementsError("a vllm bench latency file holds one result (the lengths on the command line "
                                "are its alone)", span=Span(path, line, col, line, col),
                                help="give one file per run")
    for at, obj in objects:
        tool = _tool(obj)
        if tool is None:
            line, col = limits.line_col(text, at)
            raise MeasurementsError("not a benchmark result kvplan reads: no `avg_latency` (vllm bench latency), "
                                    "`mean_itl_ms` (vllm bench serve, sglang bench_serving) or `prefill_latency` "
                                    "(sglang bench_one_batch)", span=Span(path, line, col, line, col))
        tools.append(tool)
        if tool == "vllm bench latency":
            out.append(_vllm_latency(obj, text, path, at, given, notes))
        elif tool == "sglang bench_one_batch":
            out.append(_one_batch(obj, text, path, at, given, notes))
        else:
            out.append(_serve(obj, text, path, at, given, tool, notes))
    return Read(tuple(out), ", ".join(dict.fromkeys(tools)), tuple(dict.fromkeys(notes)))


# ------------------------------------------------------------------ the CSV

def _cells(line: str) -> list[tuple[str, int]]:
    """The cells of one CSV line with the column (from 1) each starts at."""
    cells = next(csv.reader([line]), [])
    out, col = [], 1
    for cell in cells:
        out.append((cell.strip(), col))
        col += len(cell) + 1 if '"' not in line else 0
    return out


def _csv(text: str, path: str, given: Given, notes: list[str]) -> Read:
    lines = text.split("\n")
    head = next((i for i, ln in enumerate(lines) if ln.strip() and not ln.lstrip().startswith("#")), None)
    if head is None:
        raise MeasurementsError("the CSV has no header", span=files.start(path))
    names = [c for c, _ in _cells(lines[head].rstrip("\r"))]
    allowed = (*CSV_REQUIRED, *CSV_OPTIONAL, *CSV_IGNORED)
    for name, col in _cells(lines[head].rstrip("\r")):
        if name not in allowed:
            raise MeasurementsError(f"unknown column `{name}`", span=Span(path, head + 1, col, head + 1, col),
                                    help="the columns are " + ", ".join(allowed))
    missing = [c for c in CSV_REQUIRED if c not in names]
    if missing:
        raise MeasurementsError(f"the CSV header has no `{missing[0]}` column",
                                span=Span(path, head + 1, 1, head + 1, 1),
                                help="the header must name " + ",".join(CSV_REQUIRED))
    out = []
    for i in range(head + 1, len(lines)):
        line = lines[i].rstrip("\r")
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        out.append(_csv_row(dict(zip(names, _cells(line))), path, i + 1, given, notes))
    if not out:
        raise MeasurementsError("the CSV has a header and no rows", span=Span(path, head + 1, 1, head + 1, 1))
    return Read(tuple(out), "csv", tuple(dict.fromkeys(notes)))


def _csv_row(row: Mapping[str, tuple[str, int]], path: str, line: int, given: Given, notes: list[str]) -> Measurement:
    def span(name: str) -> Span:
        col = row[name][1] if name in row else 1
        return Span(path, line, col, line, col)

    def cell(name: str) -> Optional[str]:
        return row[name][0] if name in row and row[name][0] else None

    def number(name: str, *, integer: bool, hi: float) -> Optional[float]:
        raw = cell(name)
        if raw is None:
            return None
        try:
            value: JSONValue = int(raw) if integer and raw.lstrip("+-").isdigit() else float(raw)
        except ValueError:
            value = raw
        return _number(value, name, span(name), lo=0 if not integer else 1, hi=hi, integer=integer)

    where = Span(path, line, 1, line, 1)
    said = _Said(**{f: cell(f) for f in ("model", "device", "devices", "tensor_parallel", "weights", "kv_dtype",
                                         "engine")})
    layout = _layout(said, given, where, notes, "any")
    batch = number("batch", integer=True, hi=limits.MAX_BATCH)
    if batch is not None:
        _fixed("batch", int(batch), given.batch, span("batch"))
    context = number("context", integer=True, hi=limits.MAX_TOKENS)
    itl = number("itl_ms", integer=False, hi=MAX_SECONDS * 1e3)
    for name, value in (("batch", batch if batch is not None else given.batch), ("context", context)):
        if value is None:
            raise MeasurementsError(f"no `{name}` in this row", span=span(name),
                                    help="every row needs " + ", ".join(CSV_REQUIRED[6:]))
    kernel = _kernel(lambda name, hi: number(name, integer=False, hi=hi), span)
    if itl is None and kernel is None:
        raise MeasurementsError("no `itl_ms` in this row, nor a kernel measurement (" +
                                ", ".join(f"`{c}`" for c in KERNEL_COLUMNS) + ")", span=span("itl_ms"),
                                help="every row needs batch, context and itl_ms, or the three kernel columns")
    if itl is not None and itl <= 0:
        raise MeasurementsError("itl_ms must be above 0", span=span("itl_ms"))
    ttft = number("ttft_ms", integer=False, hi=MAX_SECONDS * 1e3)
    input_len = number("input_len", integer=True, hi=limits.MAX_TOKENS)
    if ttft is not None and (ttft <= 0 or input_len is None):
        raise MeasurementsError("ttft_ms must be above 0" if ttft <= 0 else "ttft_ms needs input_len (the prompt's "
                                "tokens)", span=span("ttft_ms" if ttft <= 0 else "input_len"))
    return layout.measurement(int(batch or given.batch or 1), float(context or 1),
                              None if itl is None else itl * 1e-3, where,
                              ttft_s=None if ttft is None else ttft * 1e-3,
                              input_len=None if input_len is None else int(input_len), kernel=kernel)


def _kernel(number: Callable[[str, float], Optional[float]],
            span: Callable[[str], Span]) -> Optional[tuple[float, float]]:
    """A row's kernel measurement, (seconds, KV bytes read); None when the row has none of its three cells.
    The time is kv_bytes / achieved_kv_bandwidth_Bps: the benchmark's unrounded kernel time (it writes
    kernel_ms to 6 significant digits), checked against kernel_ms."""
    his = (limits.MAX_KV_BYTES, MAX_SECONDS * 1e3, MAX_KV_BANDWIDTH)
    got = [number(name, hi) for name, hi in zip(KERNEL_COLUMNS, his)]
    if all(v is None for v in got):
        return None
    for name, v in zip(KERNEL_COLUMNS, got):
        if v is None:
            raise MeasurementsError(f"no `{name}` in this row: a kernel measurement needs "
                                    + ", ".join(f"`{c}`" for c in KERNEL_COLUMNS), span=span(name))
        if v <= 0:
            raise MeasurementsError(f"{name} must be above 0", span=span(name))
    kv, ms, bw = (float(v or 0.0) for v in got)
    ratio = kv / (ms * 1e-3)
    if abs(ratio - bw) > KERNEL_AGREEMENT * bw:
        raise MeasurementsError(f"kv_bytes / kernel_ms is {ratio:.6g} B/s, but achieved_kv_bandwidth_Bps is "
                                f"{bw:.6g} B/s: {abs(ratio / bw - 1) * 100:.3g}% apart, more than "
                                f"{KERNEL_AGREEMENT:.0%}", span=span("achieved_kv_bandwidth_Bps"),
                                help="the three cells are one measurement: fix the one that is wrong")
    return kv / bw, kv


# ------------------------------------------------------------------ one file

def read(path: str, given: Given) -> Read:
    """The measurements in one file (its format told by its content); MeasurementsError at the place in it
    that kvplan cannot read."""
    try:
        text = files.read_text(path, limit=MAX_MEASUREMENTS_BYTES, what="the measurements file")
    except OSError as exc:
        raise MeasurementsError(exc.strerror or str(exc), span=files.start(path)) from None
    files.refuse_blank(text, path, holds="a benchmark's JSON result or the CSV of docs/calibrate.md",
                       what="the measurements file")
    notes: list[str] = []
    if text.lstrip().startswith(("{", "[")):
        return _json(text, path, given, notes)
    return _csv(text, path, given, notes)


def read_all(paths: Sequence[str], given: Given) -> tuple[Read, ...]:
    """Every file's measurements, in the order given."""
    return tuple(read(p, given) for p in paths)


__all__ = ["CSV_IGNORED", "CSV_OPTIONAL", "CSV_REQUIRED", "Given", "KERNEL_AGREEMENT", "KERNEL_COLUMNS",
           "MAX_KV_BANDWIDTH", "MAX_MEASUREMENTS_BYTES", "MeasurementsError",
           "PROFILE_ENGINES", "Read", "engine_id", "read", "read_all"]
