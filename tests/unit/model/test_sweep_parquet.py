"""kvplan sweep --format parquet: the same values as the CSV, in the same order, one row group per chunk.

Skipped only where pyarrow (the `parquet` extra, also in the `test` extra) is not importable; the error
without it is tested in tests/acceptance/test_sweep_parquet.py.
"""

from __future__ import annotations

import csv
import io
import math

import attrs
import pytest

from kvplan import catalog
from kvplan.model import csvtext as ct
from kvplan.model import sweep as sw

pq = pytest.importorskip("pyarrow.parquet")

LLAMA = catalog.get_model("llama-3-70b")
A100 = catalog.get_device("a100-80g")  # 80 GB: one device cannot hold the 141 GB of weights (no s_cap)


def _spec(name: str = "") -> sw.SweepSpec:
    spec = sw.spec_from_flags(LLAMA, A100, devices="1,2,4", kv_dtypes="bf16,fp8,int4", batch="1,3,64",
                              context="1k,32k,1M")
    return attrs.evolve(spec, name=name)


def _csv_values(specs: list[sw.SweepSpec], exact: bool = True) -> list[dict[str, object]]:
    """The CSV read back by column type: an empty number is None, as a null in Parquet."""
    text = "".join(t for _, t in sw.csv_text(specs, exact=exact))
    kinds = {c.name: c.type for c in sw.columns(any(s.name for s in specs))}
    read = {"string": str, "integer": int, "boolean": lambda v: {"true": True, "false": False}[v],
            "number": lambda v: None if v == "" else float(v)}
    return [{k: read[kinds[k]](v) for k, v in row.items()} for row in csv.DictReader(io.StringIO(text))]


def _parquet_rows(specs: list[sw.SweepSpec], chunk: int = sw.CHUNK) -> tuple[list[dict[str, object]], object]:
    buf = io.BytesIO()
    written = sum(sw.parquet_write(specs, buf, chunk))
    buf.seek(0)
    table = pq.read_table(buf)
    assert written == table.num_rows
    buf.seek(0)
    return table.to_pylist(), pq.ParquetFile(buf).metadata


@pytest.mark.parametrize("name", ["", "chat"])
def test_parquet_round_trip_equals_csv(name: str) -> None:
    specs = [_spec(name)]
    expect = _csv_values(specs)
    got, _ = _parquet_rows(specs)
    assert len(got) == len(expect) == specs[0].points
    assert got == expect  # exact: the --exact CSV's text is the shortest round trip of the same float
    assert any(r["s_cap_tokens"] is None for r in got)  # the weights alone exceed 80 GB on one device
    assert [r["devices"] for r in got[:: 27]] == [1, 2, 4]  # row order: devices outermost


def test_default_csv_is_parquet_to_6_significant_digits() -> None:
    """The default CSV's numbers are the Parquet file's float64s written by csvtext.number_text."""
    specs = [_spec("chat")]
    got, _ = _parquet_rows(specs)
    text = "".join(t for _, t in sw.csv_text(specs))
    rows = list(csv.reader(io.StringIO(text)))[1:]
    kinds = [c.type for c in sw.columns(True)]
    for row, cells in zip(got, rows):
        for (key, value), cell, kind in zip(row.items(), cells, kinds):
            if kind == "number":
                assert cell == ("" if value is None else ct.number_text(value)), key


def test_parquet_two_deployments_and_small_chunks() -> None:
    """Row groups follow the chunks (each at most `chunk` rows, the memory bound) and the values do not."""
    specs = [_spec("a"), attrs.evolve(_spec("b"), batch=(7,))]
    whole, _ = _parquet_rows(specs)
    small, meta = _parquet_rows(specs, chunk=4)
    assert small == whole == _csv_values(specs)
    sizes = [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]
    assert max(sizes) == 4 and sum(sizes) == sum(s.points for s in specs)
    # one row group per chunk of each devices × kv dtype pair: 9 pairs × ceil(9/4) + 9 pairs × ceil(3/4)
    assert len(sizes) == 9 * math.ceil(9 / 4) + 9 * math.ceil(3 / 4)


def test_parquet_default_row_groups_bounded_by_chunk() -> None:
    spec = sw.spec_from_flags(LLAMA, A100, batch="1..600", context="1k..1000k:+1k")  # 600,000 points
    buf = io.BytesIO()
    assert sum(sw.parquet_write([spec], buf)) == 600_000
    buf.seek(0)
    meta = pq.ParquetFile(buf).metadata
    assert max(meta.row_group(i).num_rows for i in range(meta.num_row_groups)) == sw.CHUNK
    assert meta.num_rows == 600_000


def test_parquet_schema_carries_units_and_evidence() -> None:
    schema = sw.parquet_schema(named=False)
    assert schema.names == [c.name for c in sw.COLUMNS]
    for col in sw.COLUMNS:
        meta = schema.field(col.name).metadata or {}
        if col.type in ("integer", "number"):
            assert meta[b"unit"].decode() == col.unit and meta[b"evidence"].decode() == col.evidence
            assert meta[b"source"].decode() == col.source
    assert schema.metadata[b"format_version"] == b"1" and schema.metadata[b"kind"] == b"sweep"
