"""`kvplan calibrate FILE... -o profile.toml`: exit codes, the profile written, one line for a bad file."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from click.testing import CliRunner

from kvplan.cli import main
from tests.paths import DATA
from tests.unit.render.test_calibrate_view import check_format

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

CAL = DATA / "calibrate"


def run(*args: str) -> tuple[int, str, str]:
    r = CliRunner().invoke(main, ["calibrate", *args])
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    return r.exit_code, r.stdout, r.stderr


def test_files_that_say_their_deployment_fit_together(tmp_path: Path) -> None:
    out = tmp_path / "h100.toml"
    code, stdout, stderr = run(str(CAL / "measurements.csv"), str(CAL / "vllm_serve.json"), "-o", str(out))
    assert code == 0, stderr
    doc = check_format(out.read_text())
    (vllm,) = doc["fit"]
    assert (vllm["device"], vllm["engine"], vllm["points"]) == ("h100-sxm", "vllm", 74)
    # the CSV's synthetic figures were made at η_w 0.82, η_π 0.55 (tests/data/calibrate/README.md) ± 1.5%
    assert abs(vllm["eta_w"] - 0.82) < 0.01 and abs(vllm["eta_compute"] - 0.55) < 0.01
    assert set(vllm["kv_efficiency"]) == {"bf16", "fp8"}
    assert doc["profile"]["inputs"] == [str(CAL / "measurements.csv"), str(CAL / "vllm_serve.json")]
    assert "fit h100-sxm/vllm: 74 measured times" in stdout and f"wrote {out}" in stderr
    assert "measurements.csv:2:1" in stdout and "(measured)" in stdout and "(derived)" in stdout


def test_the_command_line_says_what_sglang_files_do_not(tmp_path: Path) -> None:
    out = tmp_path / "sglang.toml"
    code, stdout, stderr = run(str(CAL / "sglang_one_batch.jsonl"), str(CAL / "sglang_serving.jsonl"),
                               "--model", "llama-3-8b", "--device", "h100-sxm", "-o", str(out))
    assert code == 0, stderr
    (f,) = check_format(out.read_text())["fit"]
    assert (f["device"], f["engine"], f["points"]) == ("h100-sxm", "sglang", 7)
    assert "mean_ttft_ms not fitted" in stderr and "KV dtype bf16 (assumed" in stderr


def test_a_value_the_file_says_otherwise_is_refused(tmp_path: Path) -> None:
    code, _, stderr = run(str(CAL / "measurements.csv"), "--model", "llama-3-8b", "-o", str(tmp_path / "p.toml"))
    assert code == 2
    assert stderr.strip().endswith(":20:1: the file says model = llama-3-70b, but --model says llama-3-8b "
                                   "(drop --model or fix the file)")


def test_the_same_measurements_give_the_same_bytes(tmp_path: Path) -> None:
    a, b = tmp_path / "a" / "p.toml", tmp_path / "b" / "p.toml"
    a.parent.mkdir()
    b.parent.mkdir()
    for out in (a, b):
        assert run(str(CAL / "measurements.csv"), "-o", str(out))[0] == 0
    assert a.read_bytes() == b.read_bytes()


def test_a_latency_json_alone_determines_nothing_and_writes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "p.toml"
    code, stdout, stderr = run(str(CAL / "vllm_latency.json"), "--model", "llama-3-8b", "--device", "h100",
                               "--batch", "8", "--input-len", "1024", "--output-len", "128", "-o", str(out))
    assert code == 2 and not out.exists()
    assert "left out (default used): eta_w: not determined by the data" in stdout
    assert stderr.splitlines()[-1].startswith("kvplan: error: the measurements determine no parameter")


def test_a_file_missing_a_field_is_one_line_and_exit_2(tmp_path: Path) -> None:
    raw = json.loads((CAL / "vllm_serve.json").read_text())
    del raw["total_output_tokens"]
    bad = tmp_path / "serve.json"
    bad.write_text(json.dumps(raw))
    code, stdout, stderr = run(str(bad), "-o", str(tmp_path / "p.toml"))
    assert code == 2 and stdout == ""
    (line,) = stderr.splitlines()
    assert line.startswith(f"kvplan: error: {bad}:1:1: no `total_output_tokens` in this vllm bench serve result")


def test_an_unreadable_file_and_a_profile_over_an_input_are_refused(tmp_path: Path) -> None:
    code, _, stderr = run(str(tmp_path / "nope.json"), "-o", str(tmp_path / "p.toml"))
    assert code == 2 and stderr.startswith(f"kvplan: error: {tmp_path / 'nope.json'}:1:1: ")
    assert len(stderr.splitlines()) == 1
    copy = tmp_path / "m.csv"
    copy.write_text((CAL / "measurements.csv").read_text())
    code, _, stderr = run(str(copy), "-o", str(copy))
    assert code == 2 and "is one of the measurement files" in stderr
    assert copy.read_text() == (CAL / "measurements.csv").read_text()


def test_an_engine_option_names_a_profile_engine(tmp_path: Path) -> None:
    code, _, stderr = run(str(CAL / "measurements.csv"), "--engine", "tgi", "-o", str(tmp_path / "p.toml"))
    assert code == 2 and "unknown engine 'tgi'" in stderr
    out = tmp_path / "p.toml"
    rows = (CAL / "measurements.csv").read_text().replace(",vllm,", ",,")
    csv = tmp_path / "any.csv"
    csv.write_text(rows)
    assert run(str(csv), "--engine", "tensorrt-llm", "-o", str(out))[0] == 0
    assert [f["engine"] for f in tomllib.loads(out.read_text())["fit"]] == ["trtllm"]
