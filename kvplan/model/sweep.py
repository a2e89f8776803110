"""Sweep the decode model over a grid of devices × KV dtype × batch × context, streamed as CSV or JSON.

The grid is read by kvplan.model.grid (its names are re-exported here, where the commands look for them).

The grid is evaluated with the vectorized core (kvplan.model.roofline) in chunks of at
most `CHUNK` points, and each chunk is formatted and handed on before the next
is computed, so memory stays flat however large the grid grows. Row order is
fixed: devices, then KV dtype, then batch, then context, each in list order.

The text generators yield `(rows, text)` pairs; the caller writes the text
wherever it likes and may count rows for a progress display.
"""

from __future__ import annotations

import io
import json
import math
import multiprocessing
import os
import queue
import threading
import traceback
from multiprocessing.connection import wait
from typing import IO, TYPE_CHECKING, Iterator, Optional, Sequence, Union

import attrs
import numpy as np
import numpy.typing as npt

from kvplan.base import limits
from kvplan.base.evidence import reported
from kvplan.base.records import record
from kvplan.catalog import DTYPES
from kvplan.model import csvtext as ct
from kvplan.model import expected as ex
from kvplan.model import roofline as rf
from kvplan.model.expected import deployment_factors
from kvplan.model.footprint import kappa
from kvplan.model.grid import SweepError, SweepSpec, parse_dtypes, parse_list, spec_from_flags, specs_from_scenarios

if TYPE_CHECKING:
    from multiprocessing.connection import Connection
    from multiprocessing.sharedctypes import Synchronized
    from multiprocessing.synchronize import Semaphore
    from types import ModuleType


#: Points evaluated at once; bounds the memory of the numeric arrays.
CHUNK = 2**18
#: Rows formatted at once; bounds the memory of the Python objects formatting makes.
FORMAT_ROWS = 2**14
#: Points one worker process evaluates and formats at once in a parallel CSV sweep (about 10 MB of text).
PARALLEL_UNIT = 2**16
#: Units a parallel CSV worker may have made and not yet written (it writes in turn with the others).
AHEAD = 2
#: Grids up to this many points are written by one process: forking would cost more than it saves.
PARALLEL_MIN = 2**20

Array = npt.NDArray[np.float64]


@record
class Column:
    """One output column; numbers carry their unit, evidence class and source."""

    name: str
    type: str  # "string", "integer", "number", "boolean"
    unit: str = ""
    evidence: str = ""
    source: str = ""

    def to_json(self) -> dict[str, str]:
        out = {"name": self.name, "type": self.type}
        if self.type in ("integer", "number"):
            out.update(unit=self.unit, evidence=self.evidence, source=self.source)
        elif self.source:
            out["source"] = self.source
        return out


COLUMNS: tuple[Column, ...] = (
    Column("model", "string", source="input: --model / the spec's model"),
    Column("device", "string", source="input: --device / the spec's device"),
    Column("devices", "integer", "1", "assumed", "input: --devices"),
    Column("kv_dtype", "string", source="input: --kv-dtype"),
    Column("batch", "integer", "1", "assumed", "input: --batch"),
    Column("context", "integer", "tokens", "assumed", "input: --context"),
    Column("kappa_bytes", "number", "B", "derived",
           "κ = 2·L·n_kv·d_h·w_kv per token (L·(d_c+d_r)·w_kv for MLA) (docs/model.md §2)"),
    Column("kv_bytes", "number", "B", "derived",
           "b·B_kv(s), windows applied, × KV replication over tp ranks (docs/model.md §3)"),
    Column("weight_bytes", "number", "B", "derived", "P·w_p, every parameter held (docs/model.md §4); the "
           "checkpoint's weight bytes where the model has them (docs/weights.md)"),
    Column("memory_bytes", "number", "B", "derived", "weight_bytes + kv_bytes"),
    Column("fits", "boolean", source="memory_bytes ≤ N·C (docs/model.md §5)"),
    Column("s_star_tokens", "number", "tokens", "derived", "s*(b) = P·w_p/(b·κ) (docs/model.md §5)"),
    Column("s_cap_tokens", "number", "tokens", "derived",
           "s_cap(b) = (N·C − P·w_p)/(b·κ); none (empty in CSV, null in JSON) where the weights alone "
           "exceed N·C (docs/model.md §5)"),
    Column("regime", "string",
           source="weight-bound below s*, capacity-bound above s_cap, KV-bound between (docs/model.md §6)"),
    Column("step_time_s", "number", "s", "derived", "T_step ≥ max(M/β_eff, F/π) over tp ranks (docs/model.md §4, §7)"),
    Column("step_time_expected_s", "number", "s", "derived",
           "T_expected = max(t_fixed + L·t_layer + W/(η_w·β_eff) + K/(η_kv·β_eff) + T_comm, "
           "t_fixed + L·t_layer + F/(η_π·π)) at kvplan's "
           "default factors for the device, KV dtype and engine, or the calibration profile's (docs/expected.md)"),
    Column("throughput_tok_s", "number", "tok/s", "derived", "b / T_step"),
    Column("speedup_vs_bf16", "number", "x", "derived",
           "memory time with bf16 KV / memory time with this KV dtype: S(c) = (W+K)/(W+K/c) (docs/model.md §6)"),
)
DEPLOYMENT_COLUMN = Column("deployment", "string", source="the spec's deployment name")


def columns(named: bool) -> tuple[Column, ...]:
    return ((DEPLOYMENT_COLUMN,) if named else ()) + COLUMNS


@record
class Block:
    """The evaluated points of one chunk: one devices × KV dtype pair, a run of batch × context.

    `b_index` / `s_index` index the spec's batch and context lists; per-batch values
    (`s_star`, `s_cap`) are over the whole batch list.
    """

    spec: SweepSpec
    n_devices: int
    kv: str
    b_index: npt.NDArray[np.int64]
    s_index: npt.NDArray[np.int64]
    kappa: float
    weight_bytes: float
    capacity: float
    s_star: Array
    s_cap: Array
    kv_bytes: Array
    memory_bytes: Array
    fits: npt.NDArray[np.bool_]
    regime: npt.NDArray[np.int8]  # index into rf.REGIMES
    step_time: Array
    step_time_expected: Array
    throughput: Array
    speedup: Array


def regime_codes(s: Array, s_star: Array, s_cap: Array) -> npt.NDArray[np.int8]:
    """rf.regime as indices into rf.REGIMES, without the array of strings: capacity-bound above s_cap,
    weight-bound below s*, KV-bound between (the same comparisons, in the same order)."""
    weight, kv, capacity = (np.int8(rf.REGIMES.index(r)) for r in ("weight-bound", "kv-bound", "capacity-bound"))
    return np.where(s > s_cap, capacity, np.where(s < s_star, weight, kv)).astype(np.int8)


@record
class _Pair:
    """What one devices × KV dtype pair of a grid shares: its configuration and per-batch values."""

    spec: SweepSpec
    n_devices: int
    kv: str
    cfg: rf.Config
    base: rf.Config
    s_star: Array
    s_cap: Array
    w_held: float
    factors: ex.Factors
    link: Optional[float]


def _pair(spec: SweepSpec, n: int, kv: str) -> _Pair:
    cfg = spec.config(n, kv)
    b_all = np.asarray(spec.batch, dtype=np.float64)
    return _Pair(spec=spec, n_devices=n, kv=kv, cfg=cfg, base=attrs.evolve(cfg, w_kv=DTYPES["bf16"].width),
                 s_star=rf.s_star(cfg, b_all), s_cap=rf.s_cap(cfg, b_all),
                 w_held=rf.weight_bytes_held(cfg.model, cfg.w_p),
                 factors=deployment_factors(spec.device, kv, spec.engine, spec.calibration),
                 link=ex.link_bandwidth(spec.device))


def _block(p: _Pair, i0: int, i1: int) -> Block:
    """Points i0 .. i1-1 of one pair's batch × context grid (row-major: batch, then context)."""
    spec, cfg = p.spec, p.cfg
    b_i, s_i = np.divmod(np.arange(i0, i1, dtype=np.int64), len(spec.context))
    b = np.asarray(spec.batch, dtype=np.float64)[b_i]
    s = np.asarray(spec.context, dtype=np.float64)[s_i]
    kv_b = rf.kv_bytes_stored(cfg, b, s)
    mem = p.w_held + kv_b
    t = rf.step_time(cfg, b, s)
    t_base = t.memory if cfg.w_kv == p.base.w_kv else rf.step_time(p.base, b, s).memory
    return Block(spec=spec, n_devices=p.n_devices, kv=p.kv, b_index=b_i, s_index=s_i,
                 kappa=kappa(cfg.model, cfg.w_kv), weight_bytes=p.w_held, capacity=cfg.capacity,
                 s_star=p.s_star, s_cap=p.s_cap, kv_bytes=kv_b, memory_bytes=mem,
                 fits=mem <= cfg.capacity, regime=regime_codes(s, p.s_star[b_i], p.s_cap[b_i]),
                 step_time=t.step, step_time_expected=ex.expected_step(cfg, b, s, p.factors, p.link).step,
                 throughput=b / t.step, speedup=t_base / t.memory)


def _units(spec: SweepSpec, chunk: int) -> Iterator[tuple[int, str, int, int]]:
    """(devices, KV dtype, first point, end) of each chunk, in the fixed row order."""
    total = len(spec.batch) * len(spec.context)
    for n in spec.devices:
        for kv in spec.kv_dtypes:
            for i0 in range(0, total, chunk):
                yield n, kv, i0, min(total, i0 + chunk)


def evaluate(spec: SweepSpec, chunk: int = CHUNK) -> Iterator[Block]:
    """Evaluate the grid chunk by chunk, in the fixed row order."""
    pair: Optional[_Pair] = None
    for n, kv, i0, i1 in _units(spec, chunk):
        if pair is None or (pair.n_devices, pair.kv) != (n, kv):
            pair = _pair(spec, n, kv)
        yield _block(pair, i0, i1)


# ------------------------------------------------------------------ text

def _scalar_text(x: float, json_out: bool) -> str:
    """repr of a float (shortest round trip), as an integer where it is one; null/inf in JSON/CSV."""
    if not math.isfinite(x):
        return "null" if json_out else ("inf" if x > 0 else "-inf" if x < 0 else "nan")
    if x == int(x) and abs(x) < 2**53:
        return str(int(x))
    return repr(float(x))


def _values(arr: Array, json_out: bool) -> list[object]:
    """Python objects whose str() is the column's text: ints where the whole array is integral."""
    if np.all(np.isfinite(arr)):
        if np.all(arr == np.floor(arr)) and np.all(np.abs(arr) < 2**53):
            return arr.astype(np.int64).tolist()  # type: ignore[no-any-return]
        return arr.tolist()  # type: ignore[no-any-return]
    return [_scalar_text(x, json_out) for x in arr.tolist()]


def _csv_field(text: str) -> str:
    if any(c in text for c in ',"\n\r'):
        return '"' + text.replace('"', '""') + '"'
    return text


def _string(text: str, json_out: bool) -> str:
    return json.dumps(text, ensure_ascii=False) if json_out else _csv_field(text)


def _rows(block: Block, json_out: bool) -> Iterator[tuple[int, str]]:
    """Format one block: per-batch and per-context text is made once and looked up per row."""
    spec = block.spec
    sep = ", " if json_out else ","
    lead = [spec.name] if spec.name else []
    prefix = [sep.join([*(_string(x, json_out) for x in [*lead, spec.model.id, spec.device.id]),
                        str(block.n_devices), _string(block.kv, json_out), str(b)]) for b in spec.batch]
    # no capacity crossover where the weights alone exceed N·C: null in JSON, empty in CSV, never negative
    none = "null" if json_out else ""
    crossovers = [sep.join([_scalar_text(a, json_out), _scalar_text(c, json_out) if c > 0 else none])
                  for a, c in zip(block.s_star.tolist(), block.s_cap.tolist())]
    pre_b = np.array(prefix, dtype=object)
    cross_b = np.array(crossovers, dtype=object)
    ctx = np.array([str(s) for s in spec.context], dtype=object)
    fits_t = np.array(["true", "false"], dtype=object)
    regimes = np.array([_string(r, json_out) for r in rf.REGIMES], dtype=object)
    middle = sep.join(["%s", "%s", _scalar_text(block.kappa, json_out), "%s",
                       _scalar_text(block.weight_bytes, json_out), "%s", "%s", "%s", "%s", "%s", "%s", "%s", "%s"])
    row = ("    [" + middle + "],\n") if json_out else (middle + "\n")
    n = len(block.b_index)
    for i0 in range(0, n, FORMAT_ROWS):
        sl = slice(i0, min(n, i0 + FORMAT_ROWS))
        bi, si = block.b_index[sl], block.s_index[sl]
        cols: Sequence[Union[list[object], npt.NDArray[np.object_]]] = (
            pre_b[bi], ctx[si], _values(block.kv_bytes[sl], json_out), _values(block.memory_bytes[sl], json_out),
            fits_t[(~block.fits[sl]).astype(np.int8)], cross_b[bi], regimes[block.regime[sl]],
            _values(block.step_time[sl], json_out), _values(block.step_time_expected[sl], json_out),
            _values(block.throughput[sl], json_out),
            _values(block.speedup[sl], json_out),
        )
        m = sl.stop - sl.start
        grid = np.empty((m, len(cols)), dtype=object)
        for j, c in enumerate(cols):
            grid[:, j] = c
        yield m, (row * m) % tuple(grid.ravel().tolist())


def total_points(specs: Sequence[SweepSpec]) -> int:
    """The points of the whole sweep, refused (before any work) above limits.MAX_SWEEP_POINTS."""
    total = sum(s.points for s in specs)
    if total > limits.MAX_SWEEP_POINTS:
        if len(specs) == 1:
            s = specs[0]
            product = (f"{len(s.devices):,} device counts × {len(s.kv_dtypes):,} kv dtypes"
                       f" × {len(s.batch):,} batch sizes × {len(s.context):,} context lengths")
        else:
            product = f"the grids of {len(specs):,} deployments together"
        raise SweepError(f"the sweep has {total:,} points ({product}), more than {limits.MAX_SWEEP_POINTS:,}, "
                         "kvplan's limit for one sweep", help="sweep fewer values, or split the sweep into parts")
    return total


def _csv_block(block: Block) -> Iterator[tuple[int, bytes]]:
    """One block as CSV bytes, whole columns at a time (kvplan.model.csvtext): numbers as
    csvtext.number_text writes them, the per-batch and per-context text made once and gathered."""
    spec = block.spec
    num = ct.number_text
    lead = [spec.name] if spec.name else []
    names = ",".join(_csv_field(x) for x in [*lead, spec.model.id, spec.device.id])
    prefix = ct.table([f"{names},{block.n_devices},{_csv_field(block.kv)},{b},".encode() for b in spec.batch])
    ctx = ct.table([f"{c},{num(block.kappa)},".encode() for c in spec.context])
    cross = ct.table([f"{num(a)},{num(c) if c > 0 else ''},".encode()  # no s_cap where the weights exceed N·C
                      for a, c in zip(block.s_star.tolist(), block.s_cap.tolist())])
    regimes = ct.table([f"{_csv_field(r)},".encode() for r in rf.REGIMES])
    fits = ct.table([b",true,", b",false,"])
    weight = f",{num(block.weight_bytes)},".encode()
    n = len(block.b_index)
    for i0 in range(0, n, FORMAT_ROWS):
        sl = slice(i0, min(n, i0 + FORMAT_ROWS))
        bi, si = block.b_index[sl], block.s_index[sl]
        parts: list[ct.Part] = [
            ct.pick(prefix, bi), ct.pick(ctx, si), ct.numbers(block.kv_bytes[sl]), weight,
            ct.numbers(block.memory_bytes[sl]), ct.pick(fits, (~block.fits[sl]).view(np.int8)),
            ct.pick(cross, bi), ct.pick(regimes, block.regime[sl]), ct.numbers(block.step_time[sl]), b",",
            ct.numbers(block.step_time_expected[sl]), b",", ct.numbers(block.throughput[sl]), b",",
            ct.numbers(block.speedup[sl]), b"\n"]
        yield sl.stop - sl.start, ct.join(parts, sl.stop - sl.start)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


@record
class _Ring:
    """What the forked CSV workers share: the output, the turn to write (one semaphore per worker),
    the rows written so far (for the progress bar)."""

    fd: int
    turns: "list[Semaphore]"
    rows: "Synchronized[int]"


def _csv_worker(specs: Sequence[SweepSpec], units: Sequence[tuple[int, int, str, int, int]], w: int,
                ring: _Ring, conn: "Connection") -> None:
    """A forked worker: makes the CSV text of every len(ring.turns)-th unit from the w-th; a thread
    writes each when its turn comes (the previous unit written) and passes the turn on, while up to
    AHEAD more units are made, so a worker waiting for its turn keeps working. Reports b"ok", b"pipe"
    (the reader went away) or a traceback to the parent at the end."""
    jobs = len(ring.turns)
    ready: "queue.Queue[Optional[tuple[int, list[bytes]]]]" = queue.Queue(maxsize=AHEAD)
    failed: list[bytes] = []

    def write() -> None:
        try:
            while (item := ready.get()) is not None:
                ring.turns[w].acquire()
                for data in item[1]:
                    _write_all(ring.fd, data)
                with ring.rows.get_lock():
                    ring.rows.value += item[0]
                ring.turns[(w + 1) % jobs].release()
        except BaseException as e:  # noqa: BLE001 - reported to the parent, which raises it
            failed.append(b"pipe" if isinstance(e, BrokenPipeError) else traceback.format_exc().encode())
            while ready.get() is not None:  # let the maker finish
                pass

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    try:
        for k, n, kv, i0, i1 in units[w::jobs]:
            if failed:
                break
            ready.put((i1 - i0, [data for _, data in _csv_block(_block(_pair(specs[k], n, kv), i0, i1))]))
    except BaseException:  # noqa: BLE001 - reported to the parent, which raises it
        failed.insert(0, traceback.format_exc().encode())
    ready.put(None)
    writer.join()
    conn.send_bytes(failed[0] if failed else b"ok")
    conn.close()


def _csv_parallel(specs: Sequence[SweepSpec], fd: int, jobs: int) -> Iterator[int]:
    """Write the CSV rows to `fd` from `jobs` forked processes, unit u made and written by process
    u mod jobs in unit order (a ring of turns), so the file holds the same bytes one process writes;
    yields the rows written as they grow. Each worker holds at most AHEAD + 1 units' text (about 10 MB
    each) at a time."""
    units = [(k, *u) for k, spec in enumerate(specs) for u in _units(spec, PARALLEL_UNIT)]
    ctx = multiprocessing.get_context("fork")
    ring = _Ring(fd=fd, turns=[ctx.Semaphore(0) for _ in range(jobs)], rows=ctx.Value("q", 0))
    ring.turns[0].release()
    procs, conns = [], []
    try:
        for w in range(jobs):
            parent, child = ctx.Pipe(duplex=False)
            proc = ctx.Process(target=_csv_worker, args=(specs, units, w, ring, child), daemon=True)
            proc.start()
            child.close()
            procs.append(proc)
            conns.append(parent)
        done, shown = 0, 0
        pending = list(conns)
        while pending:
            ready = wait(pending, timeout=0.1)
            for conn in [c for c in pending if c in ready]:
                status = conn.recv_bytes() if conn.poll() else b"a sweep worker stopped without a word"
                pending.remove(conn)
                if status == b"pipe":
                    raise BrokenPipeError
                if status != b"ok":
                    raise RuntimeError("a sweep worker failed:\n" + status.decode(errors="replace"))
            done = ring.rows.value
            if done > shown:
                yield done - shown
                shown = done
    finally:
        for proc in procs:
            if proc.is_alive():
                proc.terminate()
            proc.join()
        for conn in conns:
            conn.close()


def csv_bytes(specs: Sequence[SweepSpec], chunk: int = CHUNK, exact: bool = False) -> Iterator[tuple[int, bytes]]:
    """The header line, then rows as each chunk is evaluated, as UTF-8 bytes. Whole numbers are written
    as integers; other numbers to 6 significant digits (kvplan.model.csvtext), or with `exact` as
    Python's shortest round-trip repr; s* is `inf` where it never comes."""
    named = any(s.name for s in specs)
    yield 0, (",".join(c.name for c in columns(named)) + "\n").encode()
    for spec in specs:
        for block in evaluate(spec, chunk):
            if exact:
                yield from ((m, text.encode()) for m, text in _rows(block, json_out=False))
            else:
                yield from _csv_block(block)


def _descriptor(out: IO[bytes]) -> Optional[int]:
    """out's file descriptor, which forked workers can write to; None for an in-memory file."""
    try:
        return out.fileno()
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is both OSError and ValueError
        return None


def csv_write(specs: Sequence[SweepSpec], out: IO[bytes], exact: bool = False, jobs: int = 1) -> Iterator[int]:
    """Write csv_bytes to the binary file `out`, yielding the rows of each piece as it is written.
    With `jobs` > 1, more than PARALLEL_MIN points and a file descriptor beneath `out`, `jobs` forked
    processes make and write the rows in turn to it (the same bytes, in the same order)."""
    fd = _descriptor(out) if jobs > 1 and not exact and sum(s.points for s in specs) > PARALLEL_MIN else None
    if fd is not None:
        named = any(s.name for s in specs)
        out.write((",".join(c.name for c in columns(named)) + "\n").encode())
        out.flush()
        yield from _csv_parallel(specs, fd, jobs)
        return
    for rows, data in csv_bytes(specs, exact=exact):
        out.write(data)
        yield rows


def csv_text(specs: Sequence[SweepSpec], chunk: int = CHUNK, exact: bool = False) -> Iterator[tuple[int, str]]:
    """csv_bytes as text."""
    for m, data in csv_bytes(specs, chunk, exact):
        yield m, data.decode()


def _deployment_json(spec: SweepSpec) -> dict[str, object]:
    msrc = spec.model.source or f"model catalog: {spec.model.id}"
    dsrc = spec.device.source or f"device catalog: {spec.device.id}"
    out: dict[str, object] = {"name": spec.name} if spec.name else {}
    out.update({
        "model": spec.model.id,
        "device": spec.device.id,
        "weights_dtype": spec.weights.id,
        "placement": spec.placement,
        "params": reported(spec.model.params, "1", msrc).to_json(),
        "memory": reported(spec.device.memory, "B", dsrc).to_json(),
        "bandwidth": reported(spec.device.bandwidth, "B/s", dsrc).to_json(),
        "compute": reported(spec.device.compute, "FLOP/s", dsrc).to_json(),
        "devices": list(spec.devices),
        "kv_dtypes": list(spec.kv_dtypes),
        "batch_values": len(spec.batch),
        "context_values": len(spec.context),
        "points": spec.points,
    })
    return out


def json_text(specs: Sequence[SweepSpec], chunk: int = CHUNK) -> Iterator[tuple[int, str]]:
    """A JSON object streamed: the header (format_version, columns with unit/evidence/source,
    deployments), then `rows` as arrays of plain values in column order, then `row_count`."""
    named = any(s.name for s in specs)
    head = {
        "format_version": "1",
        "kind": "sweep",
        "columns": [c.to_json() for c in columns(named)],
        "deployments": [_deployment_json(s) for s in specs],
        "row_order": "devices, kv_dtype, batch, context (nested, each in list order)",
    }
    text = json.dumps(head, indent=2, ensure_ascii=False, allow_nan=False)
    yield 0, text[: text.rstrip().rfind("}")].rstrip() + ',\n  "rows": [\n'
    count = 0
    pending: Optional[tuple[int, str]] = None  # held back: the last row must lose its comma
    for spec in specs:
        for block in evaluate(spec, chunk):
            for piece in _rows(block, json_out=True):
                if pending is not None:
                    yield pending
                count += piece[0]
                pending = piece
    if pending is not None:
        yield pending[0], pending[1][:-2] + "\n"
    yield 0, f'  ],\n  "row_count": {count}\n}}\n'


# ------------------------------------------------------------------ parquet

#: Where `--format parquet` gets its writer: the optional `parquet` extra (pyproject.toml).
#: (kvplan's distribution, kvcache-planner, is not on PyPI yet: the hint names pyarrow itself, as the plots' does).
PARQUET_INSTALL = "pip install pyarrow"


def _pyarrow() -> "tuple[ModuleType, ModuleType]":
    """pyarrow and pyarrow.parquet, imported only for Parquet output; without them one clear error."""
    try:
        import pyarrow
        import pyarrow.parquet
    except ImportError:
        raise SweepError("--format parquet needs pyarrow (the optional `parquet` extra)",
                         help=f"{PARQUET_INSTALL}, or pip install '.[parquet]' in a checkout of kvplan; "
                              "or use --format csv") from None
    return pyarrow, pyarrow.parquet


def _arrow_type(pa: "ModuleType", col: Column) -> object:
    if col.type == "string":
        return pa.dictionary(pa.int32(), pa.string())
    return {"integer": pa.int64(), "number": pa.float64(), "boolean": pa.bool_()}[col.type]


def parquet_schema(named: bool) -> object:
    """The Parquet schema: the CSV's columns in order; each field's metadata carries its unit, evidence
    and source as the JSON form's `columns` do, and the schema's `format_version` and `kind`."""
    pa, _ = _pyarrow()
    fields = [pa.field(c.name, _arrow_type(pa, c), nullable=c.name == "s_cap_tokens",
                       metadata={k: v for k, v in c.to_json().items() if k not in ("name", "type")})
              for c in columns(named)]
    return pa.schema(fields, metadata={"format_version": "1", "kind": "sweep",
                                       "row_order": "devices, kv_dtype, batch, context (nested, each in list order)"})


def _block_arrays(pa: "ModuleType", block: Block, named: bool) -> list[object]:
    """One block as Arrow arrays in column order: names as dictionaries, numbers as the model's float64s."""
    spec, n = block.spec, len(block.b_index)

    def const(text: str) -> object:
        return pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, dtype=np.int32)), pa.array([text]))

    s_cap = block.s_cap[block.b_index]
    out = [const(spec.name)] if named else []
    out += [const(spec.model.id), const(spec.device.id), pa.array(np.full(n, block.n_devices, dtype=np.int64)),
            const(block.kv), pa.array(np.asarray(spec.batch, dtype=np.int64)[block.b_index]),
            pa.array(np.asarray(spec.context, dtype=np.int64)[block.s_index]),
            pa.array(np.full(n, block.kappa)), pa.array(block.kv_bytes), pa.array(np.full(n, block.weight_bytes)),
            pa.array(block.memory_bytes), pa.array(block.fits), pa.array(block.s_star[block.b_index]),
            pa.array(s_cap, mask=~(s_cap > 0)),  # none where the weights alone exceed N·C, as CSV's empty field
            pa.DictionaryArray.from_arrays(pa.array(block.regime.astype(np.int32)), pa.array(list(rf.REGIMES))),
            pa.array(block.step_time), pa.array(block.step_time_expected), pa.array(block.throughput),
            pa.array(block.speedup)]
    return out


class _KeepOpen(io.RawIOBase):
    """A binary file that pyarrow may close when the Parquet file ends without closing the one beneath
    (stdout, or a file the caller opened)."""

    def __init__(self, raw: IO[bytes]) -> None:
        super().__init__()
        self._raw = raw

    def writable(self) -> bool:
        return True

    def write(self, data: "bytes | bytearray | memoryview") -> int:  # type: ignore[override]
        return self._raw.write(data)

    def close(self) -> None:
        if not self.closed:
            self._raw.flush()
        super().close()


def parquet_write(specs: Sequence[SweepSpec], sink: IO[bytes], chunk: int = CHUNK) -> Iterator[int]:
    """Write the sweep to `sink` (a binary file, left open: stdout, or the file kvplan.base.outputs replaces, never
    a path pyarrow would open itself) as Parquet, one row group per evaluated chunk, so memory stays flat; yields
    the rows of each row group as it is written. The values are the floats the model computed, the same the
    CSV's round-trip text reads back to."""
    pa, pq = _pyarrow()
    named = any(s.name for s in specs)
    schema = parquet_schema(named)
    with pq.ParquetWriter(_KeepOpen(sink), schema, compression="snappy") as writer:
        for spec in specs:
            for block in evaluate(spec, chunk):
                writer.write_table(pa.Table.from_arrays(_block_arrays(pa, block, named), schema=schema))
                yield len(block.b_index)


__all__ = ["CHUNK", "COLUMNS", "Block", "Column", "SweepError", "SweepSpec", "columns", "csv_bytes", "csv_text",
           "csv_write", "evaluate", "json_text", "parquet_schema", "parquet_write", "parse_dtypes",
           "parse_list", "regime_codes", "spec_from_flags", "specs_from_scenarios", "total_points"]

