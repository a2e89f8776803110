"""Reading NVIDIA aiconfigurator's silicon sample: published closed-loop serving runs as typed rows.

The file is `aic-core/src/aiconfigurator_core/systems/silicon_sample.csv` of ai-dynamo/aiconfigurator (shipped
as published in tests/data/public/, whose README cites it, states its licence and its columns). Each row is one
benchmark of C concurrent clients of ISL input and OSL output tokens on one deployment: the engine (`backend`),
its version, the checkpoint (`model_path`), the system, the quantization, aggregated or disaggregated serving,
the layout, and the measured mean TTFT and mean TPOT in ms (SPEC §13). The measurement date sits in
`silicon_data_source` as `measured=YYYY-MM-DD[THH:MM:SS[.fff]Z]`, the benchmark's client count as
`silicon_concurrency=C` (`batch_size` is per attention-DP rank: C = batch_size × attention_dp_size).

`read(path)` returns a Ledger: the rows it could type, and the rows it could not, each skipped with its line
and the reason (no measurement date, a system or checkpoint kvplan's catalog does not hold, a field that is not
a number). A file that is not this table (missing columns, too large, not UTF-8) raises SiliconError naming
it. Nothing here plans: bench/serving.py turns rows into specs.
"""

from __future__ import annotations

import csv
import datetime
import io
import math
import re
from typing import Mapping, Optional

from kvplan.base import files
from kvplan.base.errors import KvplanError, Span
from kvplan.base.records import record
from kvplan.catalog import by_repo_id

#: The largest sample read (bytes): the published file is 1.9 MB; ten times that is the wrong file.
MAX_SAMPLE_BYTES = 20 * 1024 * 1024
#: aiconfigurator's system names and the catalog device each is. b200_sxm is the B200 of an HGX/DGX server,
#: the catalog's HGX-table part (180 GB usable), not the 192 GB paper figure.
SYSTEMS: Mapping[str, str] = {"h100_sxm": "h100-sxm", "h200_sxm": "h200", "b200_sxm": "b200-hgx",
                              "b300_sxm": "b300", "gb200": "gb200"}
#: Checkpoints the catalog's repo ids (hf_ids) do not list, and the catalog model whose architecture each is.
#: The weight dtype a row runs at is its own column, so a quantized repo is its base architecture.
CHECKPOINTS: Mapping[str, str] = {"nvidia/Llama-3.1-8B-Instruct-FP8": "llama-3-8b",
                                  "nvidia/Qwen3-32B-NVFP4": "qwen3-32b",
                                  "nvidia/DeepSeek-R1-NVFP4": "deepseek-v3"}
#: aiconfigurator's gemm_quant_mode and the catalog weight dtype it is ('' is the checkpoint's BF16).
WEIGHTS: Mapping[str, str] = {"": "bf16", "fp8": "fp8", "fp8_block": "fp8", "nvfp4": "fp4", "int4_wo": "int4"}
ENGINES = ("vllm", "sglang", "trtllm")
MODES = ("agg", "disagg")
_POOL = ("num_workers", "batch_size", "tp_size", "pp_size", "attention_dp_size", "moe_tp_size", "moe_ep_size")
COLUMNS = ("id", "silicon_data_source", "backend", "backend_version", "model_path", "system", "precision", "mode",
           "isl", "osl", "gemm_quant_mode", "moe_quant_mode", "batch_size", "tp_size", "pp_size",
           "attention_dp_size", "moe_tp_size", "moe_ep_size",
           *(f"{p}_{c}" for p in ("prefill", "decode") for c in _POOL), "silicon_ttft_ms", "silicon_tpot_ms")
_CONCURRENCY = re.compile(r"(?:^|;)\s*silicon_concurrency=(\d+)\s*(?:;|$)")
_MEASURED = re.compile(r"(?:^|;)\s*measured=(\d{4})-(\d{2})-(\d{2})(?:T[0-9:.]+Z)?\s*(?:;|$)")


class SiliconError(KvplanError):
    """A file that is not the silicon sample: the message names the file and what it lacks."""


@record
class Layout:
    """A deployment's parallelism as a row states it (an aggregated row's; a disaggregated row's is all 0 and
    its pools' are in `prefill` and `decode`)."""

    tp: int
    pp: int
    attention_dp: int
    moe_tp: int
    moe_ep: int


@record
class Pool:
    """One pool of a disaggregated deployment: its workers, per-worker batch (0 where the row leaves them blank,
    as 1,328 of the published 1,602 disaggregated rows do) and each worker's layout."""

    workers: int
    batch_size: int
    layout: Layout


@record
class SiliconRow:
    """One published serving run: where it ran, what it served, and its measured mean TTFT and TPOT (ms)."""

    line: int
    id: str
    measured_on: datetime.date
    engine: str
    engine_version: str
    image: str
    checkpoint: str
    model: str
    system: str
    device: str
    precision: str
    weights: str
    moe_quant: str
    mode: str
    isl: int
    osl: int
    concurrency: int
    batch_size: int
    layout: Layout
    prefill: Optional[Pool]
    decode: Optional[Pool]
    ttft_ms: float
    tpot_ms: float


@record
class Skipped:
    """A row not typed: its line, its id and why."""

    line: int
    id: str
    reason: str


@record
class Ledger:
    """The typed rows of one sample file, in file order, and those skipped."""

    path: str
    rows: tuple[SiliconRow, ...]
    skipped: tuple[Skipped, ...]


def measured_on(source: str) -> Optional[datetime.date]:
    """The `measured=` date of a `silicon_data_source` field, or None when it carries none (or an impossible
    date)."""
    m = _MEASURED.search(source)
    if m is None:
        return None
    try:
        return datetime.date(int(m.group(1)), int(m.group(2)), int(m.group(3)))
    except ValueError:
        return None


def _image(source: str) -> str:
    """The engine image the run used: an `image=` part, else the field's last part when it names one
    (`repo:tag`), else ''."""
    parts = [p.strip() for p in source.split(";")]
    tagged = [p[len("image="):] for p in parts if p.startswith("image=")]
    if tagged:
        return tagged[0]
    return parts[-1] if ":" in parts[-1] and "=" not in parts[-1] else ""


class _Bad(Exception):
    """A field of one row that is not what it must be: the message says which and what would be right."""


def _int(r: Mapping[str, str], key: str, *, blank: Optional[int] = None, lo: int = 1) -> int:
    raw = (r.get(key) or "").strip()
    if not raw and blank is not None:
        return blank
    try:
        v = int(raw)
    except ValueError:
        raise _Bad(f"{key} is {raw!r}: expected a whole number of at least {lo}") from None
    if v < lo:
        raise _Bad(f"{key} is {v}: expected a whole number of at least {lo}")
    return v


def _ms(r: Mapping[str, str], key: str) -> float:
    raw = (r.get(key) or "").strip()
    try:
        v = float(raw)
    except ValueError:
        raise _Bad(f"{key} is {raw!r}: expected a time in ms above 0") from None
    if not math.isfinite(v) or v <= 0.0:
        raise _Bad(f"{key} is {raw!r}: expected a time in ms above 0")
    return v


def model_of(checkpoint: str) -> Optional[str]:
    """The catalog model a checkpoint is (its repo id in the catalog's hf_ids, or CHECKPOINTS), else None."""
    m = by_repo_id().get(checkpoint.lower())
    return m.id if m is not None else CHECKPOINTS.get(checkpoint)


def _layout(r: Mapping[str, str], prefix: str = "") -> Layout:
    return Layout(_int(r, f"{prefix}tp_size"), _int(r, f"{prefix}pp_size"),
                  _int(r, f"{prefix}attention_dp_size", blank=1, lo=0), _int(r, f"{prefix}moe_tp_size", blank=1, lo=0),
                  _int(r, f"{prefix}moe_ep_size", blank=1, lo=0))


def _pool(r: Mapping[str, str], prefix: str) -> Pool:
    return Pool(_int(r, f"{prefix}num_workers", blank=0, lo=0), _int(r, f"{prefix}batch_size", blank=0, lo=0),
                _layout(r, prefix))


def _row(line: int, r: Mapping[str, str]) -> SiliconRow:
    source = r["silicon_data_source"]
    date = measured_on(source)
    if date is None:
        raise _Bad("silicon_data_source carries no measured=YYYY-MM-DD date: the row is in neither the fit set "
                   "nor the holdout")
    engine, mode = r["backend"].strip(), r["mode"].strip()
    if engine not in ENGINES:
        raise _Bad(f"backend is {engine!r}: expected one of {', '.join(ENGINES)}")
    if mode not in MODES:
        raise _Bad(f"mode is {mode!r}: expected agg or disagg")
    system = r["system"].strip()
    if system not in SYSTEMS:
        raise _Bad(f"system {system!r} is not a catalog device (silicon.SYSTEMS)")
    checkpoint = r["model_path"].strip()
    model = model_of(checkpoint)
    if model is None:
        raise _Bad(f"model {checkpoint!r} is not a catalog model (`kvplan models`, silicon.CHECKPOINTS)")
    gemm = r["gemm_quant_mode"].strip()
    if gemm not in WEIGHTS:
        raise _Bad(f"gemm_quant_mode is {gemm!r}: expected one of {', '.join(repr(k) for k in WEIGHTS)}")
    if mode == "agg":
        layout = _layout(r)
        batch = _int(r, "batch_size")
        pools: tuple[Optional[Pool], Optional[Pool]] = (None, None)
    else:
        layout, batch = Layout(0, 0, 0, 0, 0), 0
        pools = (_pool(r, "prefill_"), _pool(r, "decode_"))
    # The benchmark's clients: silicon_concurrency (batch_size is per attention-DP rank), else batch_size.
    m = _CONCURRENCY.search(source)
    concurrency = int(m.group(1)) if m else batch
    if concurrency < 1:
        raise _Bad("neither silicon_concurrency= nor batch_size states the benchmark's concurrency")
    return SiliconRow(line, r["id"], date, engine, r["backend_version"].strip(), _image(source), checkpoint,
                      model, system, SYSTEMS[system], r["precision"].strip(), WEIGHTS[gemm],
                      r["moe_quant_mode"].strip(), mode, _int(r, "isl"), _int(r, "osl"),
                      concurrency, batch, layout, *pools, _ms(r, "silicon_ttft_ms"), _ms(r, "silicon_tpot_ms"))


def parse(text: str, path: str) -> Ledger:
    """The sample's rows from its text; SiliconError when the header lacks a column."""
    reader = csv.DictReader(io.StringIO(text, newline=""))
    missing = [c for c in COLUMNS if c not in (reader.fieldnames or ())]
    if missing:
        raise SiliconError(f"not aiconfigurator's silicon sample: no column {', '.join(missing)}",
                           span=Span(path, 1, 1, 1, 1),
                           help="expected the header of aic-core/src/aiconfigurator_core/systems/silicon_sample.csv")
    rows: list[SiliconRow] = []
    skipped: list[Skipped] = []
    for r in reader:
        line = reader.line_num
        if None in r or any(v is None for v in r.values()):
            skipped.append(Skipped(line, r.get("id") or "", f"{len(COLUMNS)}+ fields expected, the row has "
                                   "a different count"))
            continue
        try:
            rows.append(_row(line, r))
        except _Bad as e:
            skipped.append(Skipped(line, r["id"], str(e)))
    return Ledger(path, tuple(rows), tuple(skipped))


def read(path: str) -> Ledger:
    """The sample file's rows; SiliconError (or files' InputFileError) when the file is not the sample."""
    return parse(files.read_text(path, limit=MAX_SAMPLE_BYTES, what="the silicon sample"), path)
