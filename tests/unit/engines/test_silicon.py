"""kvplan.engines.silicon: the published silicon sample read as typed rows, its skips counted with reasons."""

from __future__ import annotations

import datetime
import hashlib
import re
from pathlib import Path

import pytest

from kvplan.base.files import InputFileError
from kvplan.engines import silicon
from tests.paths import DATA

PUBLIC = DATA / "public"
SAMPLE = PUBLIC / "silicon_sample.csv"
HEADER = SAMPLE.read_text(encoding="utf-8").splitlines()[0]
FIELDS = HEADER.split(",")


def _line(**over: str) -> str:
    """A row of the sample's header built from named fields (the rest blank), as the file writes it."""
    base = {"id": "x", "silicon_data_source": "db-dump/2026-04-27; config_id=1; silicon_concurrency=8; "
            "measured=2025-11-03T00:00:00.000Z; workflow_run_id=1; vllm/vllm-openai:v0.11.0",
            "backend": "vllm", "backend_version": "0.11.0", "model_path": "meta-llama/Llama-3.1-70B",
            "system": "h200_sxm", "precision": "fp8", "mode": "agg", "isl": "1024", "osl": "128",
            "gemm_quant_mode": "fp8", "moe_quant_mode": "fp8", "batch_size": "8", "tp_size": "4", "pp_size": "1",
            "attention_dp_size": "1", "moe_tp_size": "4", "moe_ep_size": "1", "silicon_ttft_ms": "120.5",
            "silicon_tpot_ms": "14.25"}
    base.update(over)
    return ",".join(base.get(f, "") for f in FIELDS)


def _parse(*lines: str) -> silicon.Ledger:
    return silicon.parse("\n".join([HEADER, *lines]) + "\n", "t.csv")


def test_the_file_is_the_published_one() -> None:
    readme = (PUBLIC / "README.md").read_text(encoding="utf-8")
    stated = re.search(r"\*\*sha256:\*\* `([0-9a-f]{64})`", readme)
    assert stated is not None
    assert hashlib.sha256(SAMPLE.read_bytes()).hexdigest() == stated.group(1)
    assert SAMPLE.read_bytes().count(b"\n") == 5_222  # a header and 5,221 rows, as the README says
    assert "Apache License" in (PUBLIC / "LICENSE.aiconfigurator").read_text(encoding="utf-8")


@pytest.mark.parametrize("source, date", [
    ("a; measured=2026-04-17T00:00:00.000Z; b", datetime.date(2026, 4, 17)),
    ("a; measured=2025-10-02T13:05:59Z; b", datetime.date(2025, 10, 2)),
    ("measured=2026-02-28", datetime.date(2026, 2, 28)),
    ("source_file=/x/y.csv; config=3", None),
    ("a; measured=2026-02-30; b", None),       # no such day
    ("a; premeasured=2026-01-01; b", None),     # another key
])
def test_the_measurement_date(source: str, date: datetime.date | None) -> None:
    assert silicon.measured_on(source) == date


def test_a_row_typed_field_by_field() -> None:
    (r,) = _parse(_line()).rows
    assert (r.line, r.measured_on, r.engine, r.engine_version, r.image) == (
        2, datetime.date(2025, 11, 3), "vllm", "0.11.0", "vllm/vllm-openai:v0.11.0")
    assert (r.model, r.device, r.weights, r.mode, r.isl, r.osl, r.concurrency) == (
        "llama-3-70b", "h200", "fp8", "agg", 1024, 128, 8)
    assert r.layout == silicon.Layout(tp=4, pp=1, attention_dp=1, moe_tp=4, moe_ep=1)
    assert (r.ttft_ms, r.tpot_ms) == (120.5, 14.25)


@pytest.mark.parametrize("system, device", [("h100_sxm", "h100-sxm"), ("h200_sxm", "h200"),
                                            ("b200_sxm", "b200-hgx"), ("b300_sxm", "b300"), ("gb200", "gb200")])
def test_systems_map_to_catalog_devices(system: str, device: str) -> None:
    assert _parse(_line(system=system)).rows[0].device == device


def test_concurrency_is_the_benchmarks_clients_not_the_per_rank_batch() -> None:
    src = "silicon_concurrency=64; measured=2026-01-05"
    (r,) = _parse(_line(silicon_data_source=src, batch_size="16", attention_dp_size="4")).rows
    assert (r.concurrency, r.batch_size, r.layout.attention_dp) == (64, 16, 4)


def test_unknown_system_model_undated_and_bad_rows_are_skipped_with_reasons() -> None:
    led = _parse(_line(id="a", system="gb300"), _line(id="b", model_path="zhipuai/GLM-5"),
                 _line(id="c", silicon_data_source="source_file=/x.csv"), _line(id="d", silicon_tpot_ms="fast"),
                 _line(id="e", tp_size="0"), _line(id="f", silicon_ttft_ms="-3"), "g,short", _line(id="ok"))
    assert [r.id for r in led.rows] == ["ok"]
    why = {s.id: (s.line, s.reason) for s in led.skipped}
    assert why["a"] == (2, "system 'gb300' is not a catalog device (silicon.SYSTEMS)")
    assert why["b"][1].startswith("model 'zhipuai/GLM-5' is not a catalog model")
    assert "no measured=YYYY-MM-DD date" in why["c"][1]
    assert why["d"] == (5, "silicon_tpot_ms is 'fast': expected a time in ms above 0")
    assert why["e"][1] == "tp_size is 0: expected a whole number of at least 1"
    assert why["f"][1] == "silicon_ttft_ms is '-3': expected a time in ms above 0"
    assert "different count" in why["g"][1] and why["g"][0] == 8


def test_quantized_checkpoints_are_their_architecture() -> None:
    rows = _parse(_line(model_path="nvidia/Qwen3-32B-NVFP4", gemm_quant_mode="nvfp4"),
                  _line(model_path="deepseek-ai/DeepSeek-R1", gemm_quant_mode="")).rows
    assert [(r.model, r.weights) for r in rows] == [("qwen3-32b", "fp4"), ("deepseek-v3", "bf16")]


def test_a_file_that_is_not_the_sample_names_itself(tmp_path: Path) -> None:
    with pytest.raises(silicon.SiliconError, match=r"no column silicon_data_source") as e:
        silicon.parse("id,backend\nx,vllm\n", "other.csv")
    assert e.value.span is not None and e.value.span.file == "other.csv"
    (tmp_path / "bin.csv").write_bytes(b"\xff\xfe")
    with pytest.raises(InputFileError):
        silicon.read(str(tmp_path / "bin.csv"))


def test_the_whole_sample_reads_every_row_once() -> None:
    led = silicon.read(str(SAMPLE))
    assert len(led.rows) + len(led.skipped) == 5_221
    assert sum("no measured=" in s.reason for s in led.skipped) == 918  # the README's undated rows
    assert all(r.device in silicon.SYSTEMS.values() for r in led.rows)
