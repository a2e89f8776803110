"""bench/serving.py: rows of the public silicon sample mapped to specs (checked by hand), the error and median
arithmetic, the noise floor's grouping, the counts, and `--out`'s columns. How close kvplan comes is the bench's to
print, not a test's to hold."""

from __future__ import annotations

import collections
import csv
import datetime
import io
from pathlib import Path

import pytest

from kvplan.engines import silicon
from tests.paths import DATA, load_tool

SAMPLE = DATA / "public" / "silicon_sample.csv"
bench = load_tool("serving", "bench")
TEXT = SAMPLE.read_text(encoding="utf-8")
HEADER = TEXT.splitlines()[0]
FIELDS = HEADER.split(",")


def _published(line: int) -> str:
    """The sample's line `line` (1 is the header), as published."""
    return TEXT.splitlines()[line - 1]


def _row(line: int) -> silicon.SiliconRow:
    (r,) = silicon.parse(HEADER + "\n" + _published(line) + "\n", "s.csv").rows
    return r


def _line(**over: str) -> str:
    base = {"id": "x", "silicon_data_source": "silicon_concurrency=8; measured=2025-11-03", "backend": "vllm",
            "backend_version": "0.11.0", "model_path": "meta-llama/Llama-3.1-70B", "system": "h200_sxm",
            "precision": "fp8", "mode": "agg", "isl": "1024", "osl": "128", "gemm_quant_mode": "fp8",
            "moe_quant_mode": "fp8", "batch_size": "8", "tp_size": "4", "pp_size": "1", "attention_dp_size": "1",
            "moe_tp_size": "4", "moe_ep_size": "1", "silicon_ttft_ms": "100", "silicon_tpot_ms": "10"}
    base.update(over)
    return ",".join(base.get(f, "") for f in FIELDS)


def _ledger(*lines: str) -> silicon.Ledger:
    return silicon.parse("\n".join([HEADER, *lines]) + "\n", "t.csv")


def test_a_vllm_row_maps_to_its_spec_by_hand() -> None:
    # Line 3344: vLLM on 4 of h100_sxm (TP4), Llama-3.1-70B FP8, 16 clients of 1024 in / 1024 out, 2025-10-29.
    assert "h100_sxm_vllm_fp8_agg_1024x1024_c16_tp4" in _published(3344)
    r = _row(3344)
    assert bench.split_of(r) == "fit" and bench.unexpressible(r) is None
    assert bench.spec(r) == (
        'kvplan 1\ndeployment "2026_04_06_llama_3_1_70b_h100_sxm_vllm_fp8_agg_1024x1024_c16_tp4_ep1_260" {\n'
        "    model   = llama-3-70b\n    device  = h100-sxm\n    devices = 4\n    engine  = vllm\n"
        "    weights = fp8\n    workload {\n        concurrency = 16\n        input       = 1024\n"
        "        output      = 1024\n    }\n    quality { budget = lossless }\n    pin {\n"
        "        tensor_parallel   = 4\n        pipeline_parallel = 1\n        kv_dtype          = bf16\n    }\n}\n")


def test_a_trtllm_nvfp4_moe_row_maps_to_fp4_weights_on_the_hgx_b200() -> None:
    # Line 2712: TensorRT-LLM on 8 × b200_sxm, gpt-oss-120b with NVFP4 GEMMs, TP8 and moe_tp 8 (no EP), C = 4.
    r = _row(2712)
    assert (r.measured_on, r.image) == (datetime.date(2026, 2, 5), "nvcr.io#nvidia/tensorrt-llm/release:1.2.0rc2.post2")
    text = bench.spec(r, kv_dtype="fp8")
    for want in ("model   = gpt-oss-120b", "device  = b200-hgx", "devices = 8", "engine  = trtllm",
                 "weights = fp4", "concurrency = 4", "input       = 1024", "output      = 8192",
                 "tensor_parallel   = 8", "kv_dtype          = fp8"):
        assert want in text


@pytest.mark.parametrize("over, why", [
    ({"mode": "disagg", "tp_size": "", "pp_size": "", "batch_size": "",
      **{f"{pool}_{k}": "1" for pool in ("prefill", "decode") for k in ("tp_size", "pp_size")}},
     "disaggregated serving"),
    ({"moe_ep_size": "8"}, "expert parallelism"),
    ({"attention_dp_size": "4", "batch_size": "2"}, "attention data parallelism"),
    ({"attention_dp_size": "0"}, "does not say what 0 means"),
    ({"batch_size": "4"}, "batch_size disagrees with silicon_concurrency"),
])
def test_rows_kvplan_cannot_express_say_why(over: dict[str, str], why: str) -> None:
    led = _ledger(_line(**over))
    reason = bench.unexpressible(led.rows[0]) if led.rows else led.skipped[0].reason
    assert reason is not None and why in reason


def test_error_and_median_arithmetic() -> None:
    assert bench.error(12.0, 10.0) == pytest.approx(0.2)
    assert bench.error(8.0, 10.0) == pytest.approx(-0.2)
    assert bench.median_abs([0.1, -0.3, 0.2]) == pytest.approx(0.2)
    assert bench.median_abs([-0.1, 0.4, 0.2, -0.3]) == pytest.approx(0.25)  # (0.2 + 0.3) / 2
    assert bench.median_abs([]) is None
    assert bench.spread([9.0, 10.0, 12.0]) == pytest.approx(0.3)  # (12 − 9) / 10


def test_the_noise_floor_groups_repeats_of_one_configuration() -> None:
    src = "silicon_concurrency=8; measured={}"
    rows = _ledger(
        _line(id="a", silicon_tpot_ms="10", silicon_ttft_ms="100", silicon_data_source=src.format("2025-11-03")),
        _line(id="b", silicon_tpot_ms="12", silicon_ttft_ms="100", silicon_data_source=src.format("2026-01-10"),
              backend_version="0.12.0"),
        _line(id="c", silicon_tpot_ms="12", silicon_ttft_ms="100", silicon_data_source=src.format("2026-01-10")),
        _line(id="d", silicon_tpot_ms="11", silicon_ttft_ms="90", isl="2048"),  # another configuration
        _line(id="e", silicon_tpot_ms="20", silicon_ttft_ms="150", tp_size="8", moe_tp_size="8"),
        _line(id="f", silicon_tpot_ms="30", silicon_ttft_ms="250", tp_size="8", moe_tp_size="8"),
    ).rows
    groups = bench.repeats(rows)
    # a, b, c are one configuration; c's figures are b's exactly (one run listed twice), counted once.
    assert [[r.id for r in g] for g in groups] == [["a", "b"], ["e", "f"]]
    n = bench.noise_floor(rows)
    # TPOT spreads: (12 − 10)/11 and (30 − 20)/25; TTFT: 0 and (250 − 150)/200.
    assert (n.groups, n.rows) == (2, 4)
    assert n.tpot == pytest.approx((2 / 11 + 10 / 25) / 2)
    assert n.ttft == pytest.approx((0 + 100 / 200) / 2)


def test_every_row_is_planned_or_counted_and_the_holdout_stays_out(tmp_path: Path) -> None:
    led = _ledger(_line(id="fit1"), _line(id="late", silicon_data_source="silicon_concurrency=8; measured=2026-03-01"),
                  _line(id="ep", moe_ep_size="4"), _line(id="gb3", system="gb300"))
    got = bench.run(led)
    assert [p.row.id for p in got.planned] == ["fit1"]
    assert sum(k for _, k in got.skipped) == 3
    assert dict(got.skipped)["in the holdout (measured on or after 2026-03-01)"] == 1
    p = got.planned[0]
    assert p.tpot_error == pytest.approx(p.got.tpot_expected / 10.0 - 1.0)
    assert min(p.got.tpot_bound, p.got.ttft_bound, p.got.tpot_expected, p.got.ttft_expected) > 0


def test_out_writes_the_stated_columns_first(tmp_path: Path) -> None:
    sample, out = tmp_path / "s.csv", tmp_path / "o.csv"
    sample.write_text("\n".join([HEADER, _line(id="r1"), _line(id="r2", isl="4096")]) + "\n", encoding="utf-8")
    assert bench.main(["--rows", "--out", str(out), str(sample)]) == 0
    rows = list(csv.reader(io.StringIO(out.read_text(encoding="utf-8"))))
    assert rows[0][:9] == ["engine", "device", "regime", "tpot_expected_ms", "tpot_measured_ms", "ttft_expected_ms",
                           "ttft_measured_ms", "measured_on", "split"]
    assert [r[:2] + r[4:5] + r[6:9] for r in rows[1:]] == [["vllm", "h200", "10", "100", "2025-11-03", "fit"]] * 2
    assert out.read_text(encoding="utf-8") == bench.out_csv(bench.run(silicon.read(str(sample))))  # deterministic


def test_a_file_that_is_not_the_sample_is_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("id,backend\nx,vllm\n", encoding="utf-8")
    assert bench.main([str(bad)]) == 2
    assert "bad.csv:1:1" in capsys.readouterr().err
    assert bench.main(["--nope"]) == 2


def test_aiconfigurator_medians_sit_beside_kvplans_on_shared_rows(tmp_path: Path) -> None:
    aic = tmp_path / "aic.csv"
    aic.write_text("id,aic_tpot_ms,aic_ttft_ms\nr1,11,80\nzz,1,1\nr2,,\n", encoding="utf-8")
    got = bench.read_aic(aic)
    assert got == {"r1": (11.0, 80.0), "zz": (1.0, 1.0)}
    result = bench.run(_ledger(_line(id="r1"), _line(id="r2")))
    text = bench.report(result, aic=got)
    assert "on the 1 of 2 planned rows its estimate covers" in text
    # aiconfigurator on r1: |11/10 − 1| = 10.0%, |80/100 − 1| = 20.0%.
    assert "  aiconfigurator         10.0%   20.0%      1" in text


@pytest.mark.slow
def test_the_fit_set_plans_and_every_row_is_accounted_for() -> None:
    led = silicon.read(str(SAMPLE))
    got = bench.run(led)
    assert len(got.planned) + sum(k for _, k in got.skipped) == 5_221
    assert len(got.planned) >= 1_000
    assert all(p.row.measured_on < bench.HOLDOUT for p in got.planned)
    assert got.noise.groups > 100


def test_aiconfigurator_rows_passes_a_row_as_its_own_tool_does() -> None:
    aic = load_tool("aiconfigurator_rows", "bench")
    row = dict(zip(FIELDS, next(csv.reader(io.StringIO(_published(3344))))))
    # predict_silicon_sample.py's _estimate_args for an agg row; the checkpoint under its bundled config's name.
    assert aic.estimate_args(row) == dict(
        model_path="meta-llama/Meta-Llama-3.1-70B", system_name="h100_sxm", mode="agg", backend_name="vllm",
        backend_version=None, isl=1024, osl=1024, gemm_quant_mode="fp8", moe_quant_mode="fp8", batch_size=16,
        tp_size=4, pp_size=1, attention_dp_size=1, moe_tp_size=4, moe_ep_size=1)
    assert aic.HOLDOUT == bench.HOLDOUT.isoformat()


def test_a_run_of_ten_requests_per_client_adds_the_start_burst_and_the_bound_is_the_prompts() -> None:
    r = _row(3344)  # vLLM, TP4 h100_sxm, Llama-3.1-70B FP8, 16 clients, 1024 in / 1024 out
    steady, run = (bench.forecast(bench.spec(r), r.id, per) for per in (0, bench.PER_CLIENT))
    # the run's first 16 prompts arrive together and queue for the prefill: its mean TTFT is above the steady
    # state's, and the TPOT (the decode stage's) is the same
    assert run.ttft_expected > steady.ttft_expected and run.tpot_expected == steady.tpot_expected
    # the bound is one 1,024-token prompt's prefill, whatever the run: below the expected figure and the same in
    # both, and below the bound of a prompt of the whole context, 2,048 tokens
    assert run.ttft_bound == steady.ttft_bound < steady.ttft_expected
    longer = bench.forecast(bench.spec_text("x", r.model, r.device, r.engine, r.weights, 4, 1, 16, 2048, 1024,
                                            "bf16"), "x", 0)
    assert longer.ttft_bound > run.ttft_bound


def test_per_client_takes_a_whole_number(capsys: pytest.CaptureFixture[str]) -> None:
    assert bench.main(["--per-client", "ten"]) == 2
    assert "--per-client takes a whole number" in capsys.readouterr().err


# ------------------------------------------------------------------ disaggregated rows (issue 23 item 3)

def test_a_disaggregated_row_maps_to_two_pool_specs() -> None:
    """Line 269 of the published sample: DeepSeek-R1 on GB200, SGLang, 1 prefill worker of tp 4 and 2 decode
    workers of tp 4; each pool a spec with its workers pinned as replicas, its total the workers' devices."""
    r = _row(269)
    assert r.mode == "disagg" and bench.disagg_unexpressible(r) is None
    assert r.prefill is not None and r.decode is not None
    pre = bench.pool_spec(r, r.prefill, "bf16")
    dec = bench.pool_spec(r, r.decode, "bf16")
    assert "devices = 4\n" in pre and "replicas          = 1\n" in pre and "tensor_parallel   = 4\n" in pre
    assert "devices = 8\n" in dec and "replicas          = 2\n" in dec
    assert f"input  = {r.isl}\n" in dec and f"output = {r.osl}\n" in dec


def test_an_aggregated_row_is_not_a_disaggregated_one() -> None:
    r = _row(3344)
    assert r.mode == "agg"
    assert bench.disagg_unexpressible(r) == "aggregated serving: the default run plans it"


def test_disaggregated_medians_and_skips_are_reported() -> None:
    r = _row(269)
    f = bench.Forecast("kv-bound", 0.0, r.tpot_ms * 1.1, 0.0, r.ttft_ms * 0.5, True)
    text = bench.report_disagg([(r, f)], collections.Counter({"the prefill pool uses expert parallelism": 3}), False)
    assert "fit-set" in text and "1 planned, 3 skipped" in text
    assert "median |TPOT error|   10.0%" in text and "median |TTFT error|   50.0%" in text
    assert "skipped    3: the prefill pool uses expert parallelism" in text
