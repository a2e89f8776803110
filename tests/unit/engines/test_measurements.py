"""kvplan.engines.measurements: the benchmark files `kvplan calibrate` reads (tests/data/calibrate/README.md)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from kvplan.base.errors import KvplanError
from kvplan.engines import measurements as mr
from kvplan.model.calibrate import Measurement
from tests.paths import DATA

CAL = DATA / "calibrate"


def one(path: Path, **given: object) -> Measurement:
    (m,) = mr.read(str(path), mr.Given(**given)).measurements  # type: ignore[arg-type]
    return m


def refusal(path: Path, **given: object) -> str:
    with pytest.raises(KvplanError) as err:
        mr.read(str(path), mr.Given(**given))  # type: ignore[arg-type]
    text = str(err.value)
    assert "\n" not in text
    return text


def test_vllm_bench_latency_is_one_request_latency_with_the_lengths_from_the_command_line() -> None:
    raw = json.loads((CAL / "vllm_latency.json").read_text())
    m = one(CAL / "vllm_latency.json", model="llama-3-8b", device="h100", batch=8, input_len=1024, output_len=128)
    assert m.request_s == raw["avg_latency"] and m.itl_s is None and m.ttft_s is None
    assert (m.batch, m.input_len, m.output_len, m.prefill_prompts) == (8, 1024, 128, 8)
    assert (m.model, m.device, m.engine, m.kv_dtype, m.devices, m.tensor_parallel) == \
        ("llama-3-8b", "h100", "vllm", "bf16", 1, 1)
    assert (m.span.line, m.span.column) == (2, 5)  # `"avg_latency"` in the indented file


def test_vllm_bench_serve_reads_the_mean_itl_ttft_concurrency_and_metadata() -> None:
    raw = json.loads((CAL / "vllm_serve.json").read_text())
    m = one(CAL / "vllm_serve.json")
    assert m.itl_s == pytest.approx(raw["mean_itl_ms"] / 1e3, rel=1e-15)
    assert m.ttft_s == pytest.approx(raw["mean_ttft_ms"] / 1e3, rel=1e-15)
    assert m.batch == 1 and m.prefill_prompts == 1  # concurrency 1: the TTFT is a prefill alone
    assert m.clients == 1  # a closed loop: its ITL is fitted through the load model (kvplan.model.calibrate)
    assert (m.input_len, m.output_len, m.context) == (1024, 256, 1024 + 128)
    assert (m.model, m.device, m.kv_dtype, m.engine) == ("meta-llama/Llama-3.1-8B-Instruct", "h100-sxm", "bf16",
                                                         "vllm")


def test_sglang_bench_one_batch_gives_one_measurement_a_line() -> None:
    lines = [json.loads(ln) for ln in (CAL / "sglang_one_batch.jsonl").read_text().splitlines()]
    got = mr.read(str(CAL / "sglang_one_batch.jsonl"), mr.Given(model="llama-3-8b", device="h100-sxm"))
    assert got.tool == "sglang bench_one_batch" and len(got.measurements) == 3
    for i, (m, raw) in enumerate(zip(got.measurements, lines)):
        assert (m.batch, m.input_len, m.output_len) == (raw["batch_size"], 1024, 16)
        assert m.itl_s == raw["median_decode_latency"] and m.ttft_s == raw["prefill_latency"]
        assert m.prefill_prompts == m.batch and m.engine == "sglang" and m.context == 1024 + 8
        assert m.clients is None  # one batch in-process: its decode latency is one step
        assert m.span.line == i + 1


def test_sglang_bench_serving_at_concurrency_16_does_not_fit_its_ttft() -> None:
    raw = json.loads((CAL / "sglang_serving.jsonl").read_text())
    got = mr.read(str(CAL / "sglang_serving.jsonl"), mr.Given(model="llama-3-8b", device="h100-sxm"))
    (m,) = got.measurements
    assert got.tool == "sglang bench_serving"
    assert m.itl_s == pytest.approx(raw["mean_itl_ms"] / 1e3, rel=1e-15) and m.batch == 16
    assert m.prefill_prompts == 0 and m.observed() == (("itl", m.itl_s),)
    assert any("mean_ttft_ms not fitted" in n for n in got.notes)
    assert m.clients == 16  # 16 clients in a closed loop, not one step at batch 16


def test_the_csv_reads_every_row_with_its_line() -> None:
    got = mr.read(str(CAL / "measurements.csv"), mr.Given())
    rows = (CAL / "measurements.csv").read_text().splitlines()
    assert got.tool == "csv" and len(got.measurements) == len(rows) - 1 == 54
    first = got.measurements[0]
    cells = dict(zip(rows[0].split(","), rows[1].split(",")))
    assert (first.model, first.device, first.devices, first.tensor_parallel, first.weights, first.kv_dtype) == \
        ("llama-3-8b", "h100-sxm", 1, 1, "", "bf16")
    assert first.itl_s == float(cells["itl_ms"]) * 1e-3 and first.ttft_s == float(cells["ttft_ms"]) * 1e-3
    assert (first.batch, first.context, first.input_len, first.engine) == (1, 2048, 2048, "vllm")
    assert [m.span.line for m in got.measurements] == list(range(2, len(rows) + 1))
    assert got.measurements[3].ttft_s is None  # batch 8: no TTFT column value


def _without(path: Path, key: str, tmp: Path) -> Path:
    text = path.read_text()
    lines = []
    for ln in text.splitlines():
        obj = json.loads(ln)
        obj.pop(key)
        lines.append(json.dumps(obj))
    out = tmp / path.name
    out.write_text("\n".join(lines) + "\n")
    return out


@pytest.mark.parametrize("name,key,given", [
    ("vllm_serve.json", "mean_itl_ms", {}),
    ("vllm_serve.json", "completed", {}),
    ("vllm_serve.json", "total_input_tokens", {}),
    ("vllm_serve.json", "total_output_tokens", {}),
    ("sglang_one_batch.jsonl", "prefill_latency", {"model": "llama-3-8b", "device": "h100"}),
    ("sglang_one_batch.jsonl", "batch_size", {"model": "llama-3-8b", "device": "h100"}),
    ("sglang_one_batch.jsonl", "output_len", {"model": "llama-3-8b", "device": "h100"}),
    ("sglang_serving.jsonl", "mean_itl_ms", {"model": "llama-3-8b", "device": "h100"}),
])
def test_a_missing_field_is_one_line_naming_it(name: str, key: str, given: dict[str, object], tmp_path: Path) -> None:
    text = refusal(_without(CAL / name, key, tmp_path), **given)
    assert re.match(rf"{re.escape(str(tmp_path / name))}:\d+:\d+: ", text), text
    if key in ("mean_itl_ms", "prefill_latency", "batch_size"):  # what tells the tool: without it, not a result
        assert f"`{key}`" in text or "not a benchmark result" in text, text
    else:
        assert f"no `{key}` in this" in text, text


def test_a_latency_json_without_the_batch_says_which_option_gives_it() -> None:
    text = refusal(CAL / "vllm_latency.json", model="llama-3-8b", device="h100", input_len=1024, output_len=128)
    assert "does not record the batch" in text and "--batch" in text and "--batch-size" in text


def test_a_file_without_the_device_asks_for_it() -> None:
    text = refusal(CAL / "sglang_one_batch.jsonl", model="llama-3-8b")
    assert text.endswith("the file does not say the device its runs used (give --device)"), text


def test_a_value_said_both_ways_that_disagrees_is_an_error() -> None:
    text = refusal(CAL / "sglang_one_batch.jsonl", model="llama-3-8b", device="h100", batch=4)
    assert "the file says batch = 1, but --batch says 4" in text
    text = refusal(CAL / "vllm_serve.json", device="b200")
    assert "the file says device = h100-sxm, but --device says b200" in text
    # the same entry by another name agrees
    assert one(CAL / "vllm_serve.json", device="h100", model="llama-3-8b").device == "h100-sxm"
    text = refusal(CAL / "vllm_latency.json", model="llama-3-8b", device="h100", batch=8, input_len=1024,
                   output_len=128, engine="sglang")
    assert "the file says engine = vllm, but --engine says sglang" in text


def test_a_served_path_as_model_id_gives_way_to_model(tmp_path: Path) -> None:
    raw = json.loads((CAL / "vllm_serve.json").read_text())
    raw["model_id"] = "/models/llama-8b"
    path = tmp_path / "serve.json"
    path.write_text(json.dumps(raw))
    assert one(path, model="llama-3-8b").model == "llama-3-8b"


def test_the_csv_refuses_an_unknown_column_and_a_missing_one(tmp_path: Path) -> None:
    rows = (CAL / "measurements.csv").read_text().splitlines()
    bad = tmp_path / "bad.csv"
    bad.write_text(rows[0].replace("notes", "nots") + "\n" + rows[1] + "\n")
    text = refusal(bad)
    assert text.startswith(f"{bad}:1:") and "unknown column `nots`" in text and "achieved_kv_bandwidth_Bps" in text
    cols = rows[0].split(",")
    i = cols.index("itl_ms")
    drop = tmp_path / "drop.csv"
    drop.write_text("\n".join(",".join(c for j, c in enumerate(r.split(",")) if j != i) for r in rows[:3]) + "\n")
    assert "the CSV header has no `itl_ms` column" in refusal(drop)


def test_the_csv_refuses_a_row_without_its_figure(tmp_path: Path) -> None:
    path = tmp_path / "m.csv"
    path.write_text("model,device,devices,tensor_parallel,weights,kv_dtype,batch,context,itl_ms\n"
                    "llama-3-8b,h100-sxm,1,1,,bf16,8,4000,\n")
    text = refusal(path)
    assert text.startswith(f"{path}:2:") and "no `itl_ms` in this row" in text
    path.write_text("model,device,devices,tensor_parallel,weights,kv_dtype,batch,context,itl_ms,ttft_ms\n"
                    "llama-3-8b,h100-sxm,1,1,,bf16,8,4000,9.5,120\n")
    assert "ttft_ms needs input_len" in refusal(path)
    path.write_text("model,device,devices,tensor_parallel,weights,kv_dtype,batch,context,itl_ms\n"
                    "llama-3-8b,h100-sxm,1,1,,bf16,eight,4000,9.5\n")
    text = refusal(path)
    assert text.startswith(f"{path}:2:{len('llama-3-8b,h100-sxm,1,1,,bf16,') + 1}: ") and "batch is" in text


def test_a_file_that_is_no_benchmark_result_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    path.write_text('{"hello": 1}\n')
    assert "not a benchmark result kvplan reads" in refusal(path)
    path.write_text('[{"name": "latency"}]')
    assert "a .pytorch.json file is not read" in refusal(path)
    path.write_text('{"avg_latency": \n')
    assert re.match(rf"{re.escape(str(path))}:\d+:\d+: not JSON", refusal(path))
    path.write_text("")
    assert "is empty" in refusal(path)


def test_a_measurements_file_is_read_within_its_size_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mr, "MAX_MEASUREMENTS_BYTES", 100)
    assert "more than 100 bytes" in refusal(CAL / "vllm_serve.json")


def test_a_time_must_be_positive_and_finite(tmp_path: Path) -> None:
    raw = json.loads((CAL / "vllm_serve.json").read_text())
    for bad in (0, -3.0, "12"):
        raw["mean_itl_ms"] = bad
        path = tmp_path / "s.json"
        path.write_text(json.dumps(raw))
        assert "mean_itl_ms is" in refusal(path)


def test_a_latency_file_holds_one_result(tmp_path: Path) -> None:
    raw = json.loads((CAL / "vllm_latency.json").read_text())
    path = tmp_path / "two.json"
    path.write_text(json.dumps(raw) + "\n" + json.dumps(raw) + "\n")
    text = refusal(path, model="llama-3-8b", device="h100", batch=8, input_len=1024, output_len=128)
    assert text.startswith(f"{path}:2:1: a vllm bench latency file holds one result"), text


def test_a_latency_run_sums_at_most_its_limit_of_decode_steps() -> None:
    text = refusal(CAL / "vllm_latency.json", model="llama-3-8b", device="h100", batch=8, input_len=1024,
                   output_len=65_537)
    assert "--output-len 65,537 is above the 65,536 decode steps" in text
    assert one(CAL / "vllm_latency.json", model="llama-3-8b", device="h100", batch=8, input_len=1024,
               output_len=65_536).output_len == 65_536
